"""One key's story, read back from the streams Redis still retains (the key page's first load).

Everything the dashboard draws live comes from tailing topics; a page opened *after* a key went
through its retries has only what the streams still hold. Those hold a lot: every publisher keeps
about ``maxlen`` frames per topic (20,000 by default), and every record that names a key is in them.
So the key page (``/c/{worker}/{controller}/k/{namespace}/{name}``) asks here once for the key's
past, then subscribes to the same topics from the position this scan ended at (``cursor``): the
story continues live without a gap and without a record twice.

What is scanned, newest first and at most ``scan`` entries per topic (XREVRANGE ... COUNT):

- the controller topic ``w/{worker}/controller/{controller}``: the key's ``event`` records (those
  that mapped an object's event to it, and those a predicate dropped for its own object),
  ``reconcile_start`` / ``reconcile`` / ``log`` / ``progress`` / ``finding`` records, and the
  ``write`` records of its attempts. A write names no key (protocol §4: it belongs to the Reconcile
  on its thread): it is the key's when its path names the key's object, or when the key's attempt
  was the only one running when it was made (with several workers another attempt may have made it,
  and then only the path decides);
- the queue topic ``w/{worker}/queue/{controller}``: every ``queue`` record of the key;
- the informers the controller watches (its components entry's ``watches``; all of the worker's
  while it does not say): the ``watch`` / ``fifo`` / ``handler`` records of the key's object, and
  the object's successive cache summaries (the ``s`` entries of the key, ``null`` once deleted).

Frames of the queue and informer topics are searched as bytes for the key's JSON string first and
decoded only when they hold it (an informer's relist is hundreds of frames naming other keys); the
controller topic's frames are all decoded, for the writes' attribution needs every attempt's start
and end. Records are returned as published, in stream order per topic; the page merges the topics
by time (``key_page.js``); a state change has no time of its own but its frame's, so it takes the
time of the frame's last record of the key (the change came with it), else the frame's. ``now`` is each topic's snapshot value for the key, read before the scan,
so the scan covers at least what the snapshot says.
"""

from __future__ import annotations

from typing import Any

import orjson

from controllers.schema import ComponentKind, RecordKind, TopicKind, topic_part, worker_topic
from controllers.telemetry.streams import SNAPSHOT_ID_FIELD, StreamReader, entries_of

DEFAULT_SCAN = 5000
MAX_SCAN = 20_000
"""Entries read per topic, at most: a publisher's default stream length."""
MAX_INFORMERS = 20

CONTROLLER_KINDS = frozenset({RecordKind.RECONCILE_START, RecordKind.RECONCILE, RecordKind.LOG, RecordKind.PROGRESS})
"""Controller records whose ``key`` is the key they are about."""
INFORMER_KINDS = frozenset({RecordKind.WATCH, RecordKind.FIFO, RecordKind.HANDLER})
"""Informer records whose ``key`` is the object's cache key."""


class UnknownController(LookupError):
    """The worker has no such controller (no topic and no components entry): a 404."""


def path_key(path: str) -> str | None:
    """The cache key (``namespace/name``, or ``name`` when cluster-scoped) of the object an API
    request path names: ``/apis/demo/v1/namespaces/default/podsets/web/status`` → ``default/web``;
    ``None`` for a collection (``.../podsets``) or anything else."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    if len(parts) < 2 or parts[0] not in ("api", "apis"):
        return None
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    namespace = ""
    if len(rest) >= 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
        if not rest:  # the Namespace object itself
            return namespace
    if len(rest) < 2 or not rest[1]:
        return None
    return f"{namespace}/{rest[1]}" if namespace else rest[1]


def _decode(frame: bytes) -> dict[str, Any] | None:
    try:
        value = orjson.loads(frame)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


class _Scan:
    """One topic's scan: its newest ``scan`` entries, oldest first, and where they start and end."""

    def __init__(self, reader: StreamReader, topic: str, scan: int) -> None:
        stream = reader.keys.stream(topic)
        rows = reader.client.xrevrange(stream, count=scan)
        self.entries = entries_of(rows[::-1])
        self.cursor = self.entries[-1][0].decode() if self.entries else "0-0"
        first = reader.client.xrange(stream, count=1) if len(rows) >= scan else rows[-1:]
        # Complete: the scan reached the oldest entry the stream retains (nothing older is left).
        self.complete = not self.entries or (bool(first) and first[0][0] == self.entries[0][0])

    def describe(self, topic: str, kind: TopicKind, name: str) -> dict[str, Any]:
        first_ts = None
        if self.entries:
            frame = _decode(self.entries[0][1])
            first_ts = frame.get("ts") if frame else None
        return {"topic": topic, "kind": str(kind), "name": name, "cursor": self.cursor, "scanned": len(self.entries),
                "complete": self.complete, "first_ts": first_ts, "records": [], "states": []}


def story(reader: StreamReader, *, worker: str, controller: str, key: str, scan: int = DEFAULT_SCAN) -> dict[str, Any]:
    """The key's story as the key page loads it (see the module docstring). ``worker`` and
    ``controller`` are topic segments; raises ``UnknownController``."""
    components_topic = worker_topic(worker, TopicKind.COMPONENTS)
    ctl_topic = worker_topic(worker, TopicKind.CONTROLLER, controller)
    queue_topic = worker_topic(worker, TopicKind.QUEUE, controller)
    epoch = reader.epoch(ctl_topic)  # a cluster: the controller topic's (one per topic)
    known = set(reader.topics())
    _, components = reader.snapshot(components_topic)
    entries = [e for e in (_decode(v) for v in components.values()) if e]
    ctl = next((e for e in entries if e.get("kind") == ComponentKind.CONTROLLER
                and isinstance(e.get("name"), str) and topic_part(e["name"]) == controller), None)
    if ctl is None and ctl_topic not in known:
        raise UnknownController(f"worker {worker} has no controller {controller}")
    informers = {e["name"]: worker_topic(worker, TopicKind.INFORMER, e["name"]) for e in entries
                 if e.get("kind") == ComponentKind.INFORMER and isinstance(e.get("name"), str)}
    watches = ctl.get("watches") if ctl else None
    watched = [n for n in watches if n in informers] if isinstance(watches, list) else sorted(informers)

    plan: list[tuple[str, TopicKind, str]] = [(ctl_topic, TopicKind.CONTROLLER, controller),
                                              (queue_topic, TopicKind.QUEUE, controller)]
    plan += [(informers[n], TopicKind.INFORMER, n) for n in watched[:MAX_INFORMERS] if informers[n] in known]
    # The key's snapshot values first, then the streams: the scan ends at or after each snapshot.
    pipe = reader.client.pipeline(transaction=False)
    for topic, _, _ in plan:
        pipe.hmget(reader.keys.snapshot(topic), [key, SNAPSHOT_ID_FIELD])
    now = [orjson.loads(value) if value else None for value, _ in pipe.execute()]

    needle = orjson.dumps(key)
    topics = []
    for (topic, kind, name), value in zip(plan, now, strict=True):
        scanned = _Scan(reader, topic, scan) if topic in known else None
        out = scanned.describe(topic, kind, name) if scanned else {
            "topic": topic, "kind": str(kind), "name": name, "cursor": "0-0", "scanned": 0, "complete": True,
            "first_ts": None, "records": [], "states": []}
        out["now"] = value
        if scanned:
            if kind is TopicKind.CONTROLLER:
                _controller_records(scanned, key, out)
            else:
                _keyed_records(scanned, key, needle, kind, out)
        topics.append(out)
    return {"key": key, "worker": worker, "controller": controller, "epoch": epoch, "component": ctl or {},
            "informers": {name: informers[name] for name in watched}, "topics": topics}


def _keyed_records(scan: _Scan, key: str, needle: bytes, kind: TopicKind, out: dict[str, Any]) -> None:
    """A queue's or an informer's records of ``key`` and the key's state changes."""
    kinds = INFORMER_KINDS if kind is TopicKind.INFORMER else frozenset({RecordKind.QUEUE})
    for eid, raw in scan.entries:
        if needle not in raw:
            continue
        frame = _decode(raw)
        if frame is None:
            continue
        sid = eid.decode()
        ts = frame.get("ts")
        for r in frame.get("r") or ():
            if isinstance(r, dict) and r.get("k") in kinds and r.get("key") == key:
                out["records"].append({"id": sid, "r": r})
                ts = r.get("ts", ts)
        s = frame.get("s")
        if isinstance(s, dict) and key in s:
            out["states"].append({"id": sid, "ts": ts, "v": s[key]})


def _controller_records(scan: _Scan, key: str, out: dict[str, Any]) -> None:
    """The controller topic's records of ``key`` (see the module docstring for writes)."""
    running: dict[str, int] = {}  # key -> attempts running (a framework runs several handlers of one key)
    for eid, raw in scan.entries:
        frame = _decode(raw)
        if frame is None:
            continue
        sid = eid.decode()
        for r in frame.get("r") or ():
            if not isinstance(r, dict):
                continue
            k = r.get("k")
            mine = False
            via = None
            if k == RecordKind.RECONCILE_START:
                running[r.get("key")] = running.get(r.get("key"), 0) + 1
                mine = r.get("key") == key
            elif k == RecordKind.RECONCILE:
                n = running.get(r.get("key"), 0) - 1
                if n > 0:
                    running[r.get("key")] = n
                else:
                    running.pop(r.get("key"), None)
                mine = r.get("key") == key
            elif k in CONTROLLER_KINDS:
                mine = r.get("key") == key
            elif k == RecordKind.FINDING:  # a key's finding names it as its subject
                mine = r.get("subject") == key
            elif k == RecordKind.EVENT:
                requests = r.get("requests")
                mine = r.get("key") == key or (isinstance(requests, list) and key in requests)
            elif k == RecordKind.WRITE:
                path = r.get("path")
                if isinstance(path, str) and path_key(path) == key:
                    mine, via = True, "path"
                elif list(running) == [key]:
                    mine, via = True, "attempt"
            if mine:
                out["records"].append({"id": sid, "r": r, **({"via": via} if via else {})})
        s = frame.get("s")
        if isinstance(s, dict) and key in s:
            mine = [r["r"] for r in out["records"] if r["id"] == sid]
            out["states"].append({"id": sid, "ts": mine[-1].get("ts") if mine else frame.get("ts"), "v": s[key]})
