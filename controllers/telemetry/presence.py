"""Presence and retention: who publishes what, since when, and what is dropped when they go quiet.

Frames carry their publisher id (``src``) and time, but a snapshot in Redis outlives the process that
wrote it: after a ``make demo`` stops and another starts on the same Redis, the earlier run's state
would pass for live. So every publisher also keeps one **presence entry** in the hash
``{prefix}publishers`` (field: publisher id), refreshed every ``REFRESH_S`` by its own thread::

    {"src": "host-42-a1b2c3", "role": "worker", "name": "demo", "host": "host", "pid": 42,
     "started": ms, "seen": ms, "stopped": ms | null, "topics": ["w/demo/components", ...],
     "retention": 3600}

A reader takes an entry as **alive** while ``seen`` is at most ``ALIVE_MS`` old and ``stopped`` is
null; otherwise that run is **stopped** (cleanly, with ``stopped``, or silently: killed, its host
gone) and everything it published is shown as that run's, never as current. Whether a *worker* is
live is its newest run's entry (``controllers/schema.py`` ``worker_liveness``, the rule every reader
follows: ``protocol/redis-layout.md``, "Liveness"), never the age of its last frame.

**Retention** (``CTRLSCOPE_RETENTION``, default 1 h): the publisher gives its topics' stream and
snapshot keys a TTL of the retention and refreshes it every ``retention / 4`` while it runs, so the
keys of a publisher silent for longer than the retention expire in Redis by themselves. A refresh
that finds a snapshot gone (``PEXPIRE`` answers 0: it expired during a long outage, or someone
forgot the worker) makes the publisher rewrite the topic with a reset frame, so an expiry never
leaves a live topic half written.

``sweep`` (run by the dashboard, at most once per ``SWEEP_S`` across all replicas) notices what
expired and says so: topics whose stream is gone leave ``{prefix}topics``; topics whose last entry is
older than the retention and that no live publisher claims (publishers that set no TTL) are deleted;
presence entries silent for longer than the retention are removed; each removal is logged in the
stream ``{prefix}expired`` (``MAXLEN ~ EXPIRED_MAXLEN``), which the overview shows. ``forget``
drops one stopped worker's keys at once (an operator's action, logged the same way).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable
from typing import Any

import orjson
import redis

from controllers.schema import WORKER_PREFIX, TopicKind, parse_topic, run_alive, topic_part, worker_liveness, worker_run
from controllers.telemetry.streams import Keys, parse_id

REFRESH_S = 2.0
DEFAULT_RETENTION_S = 3600
MIN_RETENTION_S = 60
SWEEP_S = 30.0
EXPIRED_MAXLEN = 500

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_retention(raw: str | None) -> float:
    """``CTRLSCOPE_RETENTION``: seconds, or a number with s/m/h/d. Clear errors for anything else."""
    if raw is None or not raw.strip():
        return float(DEFAULT_RETENTION_S)
    match = _DURATION.match(raw)
    if match is None:
        raise ValueError(f"CTRLSCOPE_RETENTION must be a duration like 3600, 90m, 6h or 2d, not {raw!r}")
    seconds = float(match.group(1)) * _UNITS[match.group(2)]
    if seconds < MIN_RETENTION_S:
        raise ValueError(f"CTRLSCOPE_RETENTION must be at least {MIN_RETENTION_S} s (got {raw!r}): a worker's "
                         "keys would expire between two refreshes")
    return seconds


def retention_from_env() -> float:
    return parse_retention(os.environ.get("CTRLSCOPE_RETENTION"))


def redis_now_ms(client: redis.Redis) -> float:
    """Redis' clock in ms: the one stream ids are made of, the same for every dashboard replica."""
    seconds, micros = client.time()
    return seconds * 1000 + micros / 1000


def read_publishers(client: redis.Redis, keys: Keys, now_ms: float | None = None) -> list[dict[str, Any]]:
    """Every presence entry, newest run first, each with ``alive`` filled in (malformed ones skipped)."""
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    out = []
    for src, raw in client.hgetall(keys.publishers).items():
        try:
            entry = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        if not isinstance(entry, dict):
            continue
        entry["src"] = src.decode("utf-8", "replace")
        entry["alive"] = run_alive(entry, now_ms)
        out.append(entry)
    out.sort(key=lambda e: float(e.get("started") or 0), reverse=True)
    return out


def _frame_ts(fields: dict[bytes, bytes]) -> Any:
    try:
        frame = orjson.loads(fields[b"f"])
    except (KeyError, orjson.JSONDecodeError):
        return None
    return frame.get("ts") if isinstance(frame, dict) else None


def read_workers(client: redis.Redis, keys: Keys, publishers: list[dict[str, Any]],
                 now_ms: float) -> dict[str, dict[str, Any]]:
    """Every worker with a topic in ``{prefix}topics``: its ``liveness`` by the one rule
    (``worker_liveness``), its newest ``run`` (publisher id, or null) and ``last_frame``: the ``ts``
    of the newest frame of its ``components`` or ``metrics`` stream (the publisher's clock, like a
    presence entry's ``seen``), null when neither has one."""
    workers = sorted({w.worker for t in client.smembers(keys.topics)
                      if (w := parse_topic(t.decode("utf-8", "replace"))) is not None})
    pipe = client.pipeline(transaction=False)
    for worker in workers:
        for kind in (TopicKind.COMPONENTS, TopicKind.METRICS):
            pipe.xrevrange(keys.stream(f"{WORKER_PREFIX}{worker}/{kind}"), count=1)
    lasts = pipe.execute() if workers else []
    out = {}
    for i, worker in enumerate(workers):
        stamps = [ts for entries in lasts[2 * i:2 * i + 2] if entries
                  if isinstance(ts := _frame_ts(entries[0][1]), (int, float))]
        last_frame = max(stamps) if stamps else None
        run = worker_run(publishers, worker)
        out[worker] = {"liveness": str(worker_liveness(publishers, worker, now_ms=now_ms, last_frame_ms=last_frame)),
                       "run": run["src"] if run else None, "last_frame": last_frame}
    return out


def read_expired(client: redis.Redis, keys: Keys, count: int = 20) -> list[dict[str, Any]]:
    """The newest ``count`` removals (what ``sweep`` and ``forget`` dropped), newest first."""
    out = []
    for _id, fields in client.xrevrange(keys.expired, count=count):
        try:
            out.append(orjson.loads(fields[b"e"]))
        except (KeyError, orjson.JSONDecodeError):
            continue
    return out


def _log(client: redis.Redis, keys: Keys, entries: Iterable[dict[str, Any]]) -> None:
    pipe = client.pipeline(transaction=False)
    for entry in entries:
        pipe.xadd(keys.expired, {"e": orjson.dumps(entry)}, maxlen=EXPIRED_MAXLEN, approximate=True)
    pipe.execute()


def _owner(topic: str) -> str:
    """Who a topic belongs to, for the log: ``worker demo`` for w/demo/..., else the topic."""
    parts = topic.split("/")
    return f"worker {parts[1]}" if len(parts) > 2 and parts[0] == "w" else topic


def _drop_topics(client: redis.Redis, keys: Keys, topics: list[str]) -> None:
    pipe = client.pipeline(transaction=False)
    for topic in topics:
        if keys.cluster:  # one slot per topic; its own epoch key goes with it
            pipe.delete(keys.stream(topic), keys.snapshot(topic), keys.pubseq(topic), keys.epoch_of(topic))
        else:
            pipe.delete(keys.stream(topic), keys.snapshot(topic), keys.pubseq(topic))
        pipe.srem(keys.topics, topic)
    pipe.execute()


def _grouped(topics: list[str], **fields: Any) -> list[dict[str, Any]]:
    groups: dict[str, list[str]] = {}
    for topic in topics:
        groups.setdefault(_owner(topic), []).append(topic)
    return [{"what": owner, "topics": len(ts), "sample": sorted(ts)[:5], **fields} for owner, ts in sorted(groups.items())]


def sweep(client: redis.Redis, keys: Keys, *, retention: float, force: bool = False) -> list[dict[str, Any]]:
    """Drop what outlived the retention and log it (module docstring). At most once per ``SWEEP_S``
    across every dashboard replica (a ``SET NX`` lock), unless ``force``. Returns what it logged."""
    if not force and not client.set(keys.sweep_lock, b"1", nx=True, px=int(SWEEP_S * 1000)):
        return []
    now_ms = redis_now_ms(client)
    publishers = read_publishers(client, keys, now_ms)
    claimed = {t for p in publishers if p["alive"] for t in p.get("topics") or ()}
    topics = sorted(t.decode("utf-8", "replace") for t in client.smembers(keys.topics))
    pipe = client.pipeline(transaction=False)
    for topic in topics:
        pipe.xrevrange(keys.stream(topic), count=1)
    lasts = pipe.execute() if topics else []
    expired, silent = [], []
    for topic, last in zip(topics, lasts, strict=True):
        if not last:
            expired.append(topic)  # its TTL ran out: only the set member is left
        elif topic not in claimed and now_ms - parse_id(last[0][0])[0] > retention * 1000:
            silent.append(topic)  # a publisher that sets no TTL went quiet
    _drop_topics(client, keys, expired + silent)
    gone = [p for p in publishers if not p["alive"] and now_ms - float(p.get("seen") or 0) > retention * 1000]
    if gone:
        client.hdel(keys.publishers, *[p["src"] for p in gone])
    reason = f"nothing published for over {_human(retention)} (CTRLSCOPE_RETENTION)"
    logged = _grouped(expired + silent, at=now_ms, reason=reason, by="retention")
    logged += [{"what": f"{p.get('role', 'publisher')} {p.get('name') or p['src']}", "run": p["src"],
                "started": p.get("started"), "seen": p.get("seen"), "topics": 0, "at": now_ms, "reason": reason,
                "by": "retention"} for p in gone]
    if logged:
        _log(client, keys, logged)
    return logged


def forget_worker(client: redis.Redis, keys: Keys, worker: str, *, by: str) -> dict[str, Any]:
    """Drop every key of a stopped worker now. ``LookupError`` if nothing of it is known,
    ``RuntimeError`` if a live run publishes it (forgetting would only make it rewrite everything)."""
    now_ms = redis_now_ms(client)
    worker = topic_part(worker)
    prefix = f"{WORKER_PREFIX}{worker}/"
    topics = sorted(t.decode("utf-8", "replace") for t in client.smembers(keys.topics)
                    if t.decode("utf-8", "replace").startswith(prefix))
    runs = [p for p in read_publishers(client, keys, now_ms)
            if p.get("role") == "worker" and p.get("name") == worker
            or any(str(t).startswith(prefix) for t in p.get("topics") or ())]
    live = [p for p in runs if p["alive"]]
    if live:
        raise RuntimeError(f"worker {worker} is running (run {live[0]['src']}, seen "
                           f"{max(0, now_ms - float(live[0].get('seen') or 0)) / 1000:.0f} s ago): stop it first")
    if not topics and not runs:
        raise LookupError(f"no worker named {worker} is known here")
    _drop_topics(client, keys, topics)
    if runs:
        client.hdel(keys.publishers, *[p["src"] for p in runs])
    entry = {"what": f"worker {worker}", "topics": len(topics), "sample": topics[:5], "runs": len(runs),
             "at": now_ms, "reason": f"forgotten by {by}", "by": by}
    _log(client, keys, [entry])
    return entry


def _human(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)} {unit}"
    return f"{seconds:g} s"
