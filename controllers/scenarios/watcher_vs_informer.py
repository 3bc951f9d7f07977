"""The watcher-vs-informer scenario's machinery: the two sides, the faults, and what is measured.

The second source document asks "when writing an operator, a Watcher or an Informer?" and answers
with three claims about the informer: it caches, so it lightens the API server; it survives network
failures; its cache keeps data while the connection is down. The scenario runs both sides on the
same Deployments at once, each as its own worker on the dashboard:

- **the informer** (worker ``watcher-vs-informer.informer``): the document's program in Python on
  ctrlscope's runtime -- a SharedInformerFactory with a 5-minute resync, a Deployment informer, and
  Add/Update/Delete handlers that, like the raw watcher's, read the Deployment they were told about:
  from the informer's cache.
- **three raw watch loops** (worker ``watcher-vs-informer.raw-watchers``, one watcher each):
  ``controllers/examples/raw_watcher.py``'s variants ``stops-on-end``, ``restart-from-empty`` and
  ``restart-from-last``, on the official client, each GETting the Deployment of every event.

Each side sends its own ``User-Agent`` (``watcher-vs-informer/informer``, ``raw-watcher/{variant}``),
so the server's own request counts (``GET /_sim/requests``: the simulator's, or the fault proxy's in
front of any cluster; a real API server counts by verb and resource only) say what each side cost it.
Everything else is read back from the sides' published telemetry, as the dashboard reads it: the
watchers' ``watch``/``watch_start``/``watch_end``/``read`` records (protocol v1.6) and the informer's
``handler``/``watch_start``/``watch_end``/``list`` records.

What counts as **seen**: a side saw a change the scenario made when it was told about that object at
that resourceVersion or a later one (for a delete: told it was deleted, a tombstone included) -- what
a level-based program needs. An informer that relists after 410 sees a Deployment's latest state in
one update and misses the intermediate ones; that is not counted as missed here, because its cache
and its handlers end up knowing the outcome. resourceVersions are compared as integers (both
servers' are etcd revisions; the protocol treats them as opaque strings, the scenario does not).
"""

from __future__ import annotations

import threading
import tracemalloc
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from controllers.examples import raw_watcher
from controllers.informers import ApiError, SharedInformerFactory, Store
from controllers.informers.http_client import KubernetesClient
from controllers.publish import ProtocolPublisher
from controllers.scenarios.base import ScenarioContext
from controllers.scenarios.telemetry import TelemetryReader
from controllers.schema import HandlerEvent, RecordKind, ReflectorState, TopicKind, WatcherVariant, WatchEventType

INFORMER_WORKER = "watcher-vs-informer.informer"
WATCHERS_WORKER = "watcher-vs-informer.raw-watchers"
INFORMER_AGENT = "watcher-vs-informer/informer"
INFORMER_SIDE = "informer"
WATCHERS: tuple[str, ...] = tuple(v.value for v in WatcherVariant)
SIDES: tuple[str, ...] = (INFORMER_SIDE, *WATCHERS)
RESYNC_PERIOD = 300.0
"""The source document's factory resync (5 minutes): longer than the scenario, so no resync shows."""
PART_OF = "watcher-vs-informer"
DEPLOYMENTS = 6
"""Deployments the sides watch from the start (more are created during the outages)."""


def agent_of(side: str) -> str:
    """The ``User-Agent`` a side's requests carry."""
    return INFORMER_AGENT if side == INFORMER_SIDE else f"raw-watcher/{side}"


def _rv(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


@dataclass(frozen=True)
class Change:
    """One write the scenario made: ``op`` create / update / delete of ``key``, the resourceVersion
    the server gave it (``rv``; -1 for a delete), and when (wall ms)."""

    key: str
    op: str
    rv: int
    at: float


@dataclass(frozen=True)
class Notification:
    """A side was told about ``key`` at ``rv`` (``deleted``: told it was deleted); ``same`` when the
    side was told the old and new versions were one (an informer's relist or resync update)."""

    at: float
    key: str
    rv: int
    deleted: bool
    same: bool = False


# -- the two sides -----------------------------------------------------------------------------------
class InformerSide:
    """The document's program on ctrlscope's runtime, publishing as ``INFORMER_WORKER``; its handlers
    read each Deployment they are told about from the cache and count those reads."""

    def __init__(self, kubeconfig: str, namespace: str, publisher: ProtocolPublisher) -> None:
        self.client = KubernetesClient.from_kubeconfig(kubeconfig)
        self.client.api_client.user_agent = INFORMER_AGENT
        self.factory = SharedInformerFactory(self.client, RESYNC_PERIOD, observer=publisher.observer,
                                             namespace=namespace, freeze_gc_after_sync=False)
        self.informer = self.factory.informer_for("apps/v1", "Deployment")
        self.memory_reads = 0
        self._lock = threading.Lock()
        self.informer.add_event_handler(on_add=self._read, on_update=lambda old, new: self._read(new),
                                        on_delete=self._deleted, name="print")

    @property
    def name(self) -> str:
        """The informer's name on the dashboard."""
        return self.informer.name

    def _read(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.lookup(f"{meta['namespace']}/{meta['name']}")

    def _deleted(self, obj: Any) -> None:
        pass  # a deleted Deployment is only printed, as by the raw watcher

    def lookup(self, key: str) -> dict[str, Any] | None:
        """A read of one Deployment, from the cache (the lister)."""
        with self._lock:
            self.memory_reads += 1
        return self.informer.store.get_by_key(key)

    def start(self, timeout: float) -> None:
        self.factory.start()
        if not all(self.factory.wait_for_cache_sync(timeout).values()):
            raise RuntimeError(f"the informer did not sync within {timeout:.0f} s")

    def stop(self) -> None:
        self.factory.shutdown()

    def bytes_per_object(self) -> float:
        """Memory per cached Deployment: a copy of the cache, built the way the informer builds its
        own (same Store mode), measured with tracemalloc."""
        objects = self.informer.store.list()
        if not objects:
            return 0.0
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            copy = Store(compact=self.informer.store.compact)
            copy.replace(objects)
            used = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        return used / len(copy)


class WatcherSide:
    """One raw watch loop (``raw_watcher.run_loop``) on a thread of its own."""

    def __init__(self, variant: str, kubeconfig: str, namespace: str, publisher: ProtocolPublisher, *,
                 stop: threading.Event, retry_delay: float) -> None:
        self.variant = variant
        self.namespace = namespace
        self.apps = raw_watcher.apps_api(kubeconfig, user_agent=agent_of(variant))
        report = publisher.watcher(variant, resource=raw_watcher.RESOURCE, namespace=namespace, variant=variant)
        self.thread = threading.Thread(target=raw_watcher.run_loop, args=(variant, self.apps, namespace, report),
                                       kwargs={"stop": stop, "retry_delay": retry_delay},
                                       name=f"raw-watcher-{variant}", daemon=True)

    def lookup(self, key: str, *, timeout: float) -> Any:
        """A read of one Deployment, as the loop's program makes it: a GET."""
        return raw_watcher.read_deployment(self.apps, self.namespace, key.split("/", 1)[1], timeout=timeout)


# -- the run -----------------------------------------------------------------------------------------
@dataclass
class Phase:
    """One fault: what the scenario changed meanwhile, and the probe change made once it was over."""

    name: str
    changes: list[Change] = field(default_factory=list)
    probe: Change | None = None


class Run:
    """One scenario run: the Deployments, the sides, the changes made, and reading back what each side
    saw (``notifications``)."""

    def __init__(self, ctx: ScenarioContext) -> None:
        if not ctx.kubeconfig or not ctx.redis_url:
            raise RuntimeError("watcher-vs-informer starts its own informer and raw watchers: it needs the cluster's "
                               "kubeconfig and the dashboard's Redis (manage.py scenario passes both)")
        self.ctx = ctx
        self.kubeconfig: str = ctx.kubeconfig
        self.path = f"/apis/apps/v1/namespaces/{ctx.namespace}/deployments"
        self.changes: list[Change] = []
        self.phases: list[Phase] = []
        self.stop = threading.Event()
        self.informer_pub = ProtocolPublisher(ctx.redis_url, worker=INFORMER_WORKER, prefix=ctx.prefix)
        self.watchers_pub = ProtocolPublisher(ctx.redis_url, worker=WATCHERS_WORKER, prefix=ctx.prefix)
        self.readers = {w: TelemetryReader(ctx.redis_url, prefix=ctx.prefix, worker=w)
                        for w in (INFORMER_WORKER, WATCHERS_WORKER)}
        self.informer: InformerSide | None = None
        self.watchers: dict[str, WatcherSide] = {}
        self.started_ms = 0.0

    # -- Deployments -------------------------------------------------------------------------------
    def name(self, i: int) -> str:
        return f"{PART_OF}-{i}"

    def key(self, i: int) -> str:
        return f"{self.ctx.namespace}/{self.name(i)}"

    def _record(self, key: str, op: str, obj: Any) -> Change:
        rv = _rv(((obj or {}).get("metadata") or {}).get("resourceVersion")) if op != "delete" else -1
        change = Change(key, op, rv, self.ctx.wall_ms())
        self.changes.append(change)
        if self.phases:
            self.phases[-1].changes.append(change)
        return change

    def create(self, i: int) -> Change:
        body = {"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": self.name(i), "namespace": self.ctx.namespace,
                             "labels": {"app.kubernetes.io/part-of": PART_OF}},
                "spec": {"replicas": 1, "selector": {"matchLabels": {"app": self.name(i)}},
                         "template": {"metadata": {"labels": {"app": self.name(i)}},
                                      "spec": {"containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}]}}}}
        return self._record(self.key(i), "create", self.ctx.client.send_json("POST", self.path, body))

    def scale(self, i: int, replicas: int) -> Change:
        for _ in range(10):
            obj = self.ctx.client.get_json(f"{self.path}/{self.name(i)}")
            obj["spec"]["replicas"] = replicas
            try:
                return self._record(self.key(i), "update", self.ctx.client.send_json("PUT", f"{self.path}/{self.name(i)}", obj))
            except ApiError as exc:
                if exc.code != 409:  # the control plane wrote its status meanwhile: read again
                    raise
        raise RuntimeError(f"could not scale {self.name(i)} after 10 attempts")

    def delete(self, i: int) -> Change:
        self.ctx.client.send_json("DELETE", f"{self.path}/{self.name(i)}")
        return self._record(self.key(i), "delete", None)

    def clean(self) -> None:
        """Delete the Deployments an earlier run left (this scenario's label), and wait until they are gone."""
        selector = [("labelSelector", f"app.kubernetes.io/part-of={PART_OF}")]
        for obj in self.ctx.client.get_json(self.path, selector)["items"]:
            try:
                self.ctx.client.send_json("DELETE", f"{self.path}/{obj['metadata']['name']}")
            except ApiError as exc:
                if exc.code != 404:
                    raise
        if self.ctx.wait_for(lambda: not self.ctx.client.get_json(self.path, selector)["items"], timeout=60) is None:
            raise RuntimeError("the Deployments of an earlier run were not deleted within 60 s")

    def server_keys(self) -> set[str]:
        """Every Deployment of the namespace, as the API server lists them (what the informer watches)."""
        return {f"{self.ctx.namespace}/{o['metadata']['name']}" for o in self.ctx.client.get_json(self.path)["items"]}

    # -- sides -----------------------------------------------------------------------------------------
    def start_sides(self) -> None:
        self.informer_pub.start()
        self.watchers_pub.start()
        self.started_ms = self.ctx.wall_ms()
        self.informer = InformerSide(self.kubeconfig, self.ctx.namespace, self.informer_pub)
        self.informer.start(timeout=30)
        retry = max(0.2, self.ctx.time_scale)  # the loops' one second between retries, at demo speed
        for variant in WATCHERS:
            side = WatcherSide(variant, self.kubeconfig, self.ctx.namespace, self.watchers_pub,
                               stop=self.stop, retry_delay=retry)
            self.watchers[variant] = side
            side.thread.start()

    def stop_sides(self) -> None:
        """Stop the loops (they return at their next stream end, which the scenario causes) and the
        informer; the publishers flush what is left."""
        self.stop.set()
        try:
            self.ctx.faults.end_watches()
        finally:
            for side in self.watchers.values():
                side.thread.join(timeout=10)
            if self.informer is not None:
                self.informer.stop()
            self.ctx.clock.sleep(0.3)  # the last records of the loops' ends
            self.informer_pub.stop()
            self.watchers_pub.stop()
            for reader in self.readers.values():
                reader.close()

    # -- what each side saw, from its telemetry ------------------------------------------------------
    def records(self, side: str, kinds: Iterable[RecordKind], since_ms: float | None = None) -> list[dict[str, Any]]:
        wanted = set(kinds)
        since = self.started_ms if since_ms is None else since_ms
        if side == INFORMER_SIDE:
            assert self.informer is not None
            found = self.readers[INFORMER_WORKER].records(TopicKind.INFORMER, since, self.ctx.wall_ms() + 1000,
                                                           lambda r: r.get("k") in wanted, name=self.informer.name)
        else:
            found = self.readers[WATCHERS_WORKER].records(TopicKind.WATCHER, since, self.ctx.wall_ms() + 1000,
                                                          lambda r: r.get("k") in wanted, name=side)
        return sorted(found, key=lambda r: r.get("ts", 0))

    def notifications(self, side: str, since_ms: float | None = None) -> list[Notification]:
        """What ``side`` was told, in order: the informer's handler calls, a watcher's watch events."""
        out: list[Notification] = []
        if side == INFORMER_SIDE:
            for r in self.records(side, (RecordKind.HANDLER,), since_ms):
                deleted = r.get("event") == HandlerEvent.DELETE
                out.append(Notification(r["ts"], r["key"], _rv(r.get("rv")), deleted,
                                        same=r.get("event") == HandlerEvent.UPDATE and r.get("old_rv") == r.get("rv")))
        else:
            for r in self.records(side, (RecordKind.WATCH,), since_ms):
                if r.get("type") in (WatchEventType.ADDED, WatchEventType.MODIFIED, WatchEventType.DELETED):
                    out.append(Notification(r["ts"], r["key"], _rv(r.get("rv")), r.get("type") == WatchEventType.DELETED))
        return out

    def seen_at(self, side: str, change: Change, notes: list[Notification] | None = None) -> float | None:
        """When ``side`` was first told about ``change`` (or a later state of its object), or None."""
        for n in notes if notes is not None else self.notifications(side, change.at - 1):
            if n.key != change.key:
                continue
            if change.op == "delete" and n.deleted and n.at >= change.at:
                return n.at
            if change.op != "delete" and not n.deleted and n.rv >= change.rv:
                return n.at
        return None

    def wait_seen(self, change: Change, sides: Iterable[str], timeout: float) -> None:
        """Poll until every side in ``sides`` saw ``change``, or ``timeout`` (demo seconds) passed."""
        pending = set(sides)

        def all_seen() -> bool:
            for side in list(pending):
                if self.seen_at(side, change) is not None:
                    pending.discard(side)
            return not pending

        self.ctx.wait_for(all_seen, timeout=timeout)

    # -- faults ------------------------------------------------------------------------------------------
    def phase(self, name: str) -> Phase:
        phase = Phase(name)
        self.phases.append(phase)
        return phase

    def probe(self, phase: Phase, i: int, replicas: int, *, timeout: float) -> None:
        """After the fault: one more change, and time for every side to see it."""
        phase.probe = self.scale(i, replicas)
        self.wait_seen(phase.probe, SIDES, timeout)

    def during_outage(self, changes: Callable[[], None], *, compact: bool) -> None:
        """Drop every watch and hold re-watching back (2 s of API latency on watch) while ``changes``
        are made; with ``compact`` the server then forgets its history, so a watch resumed from an
        older resourceVersion gets 410 Expired."""
        faults = self.ctx.faults
        faults.latency(verb="watch", resource="deployments", ms=2000 * self.ctx.time_scale)
        try:
            faults.drop_watches()
            changes()
            if compact:
                faults.compact_history()
        finally:
            faults.clear_latency()

    def stalled_reads(self, key: str, seconds: float) -> dict[str, tuple[bool, float]]:
        """While every API response is held for ``seconds`` (a network stall), each side reads ``key``
        the way its program does: (whether it got the object, seconds it took)."""
        assert self.informer is not None
        informer = self.informer

        def timed(read: Callable[[], Any]) -> tuple[bool, float]:
            start = self.ctx.clock.now()
            try:
                ok = read() is not None
            except Exception:  # noqa: BLE001 -- a read that failed (timed out, refused) is what is measured
                ok = False
            return ok, self.ctx.clock.now() - start

        self.ctx.faults.stall(seconds)
        try:
            self.ctx.clock.sleep(0.1)  # the stall is on: what is asked now waits for the network
            with ThreadPoolExecutor(len(self.watchers)) as pool:
                pending = {v: pool.submit(timed, lambda s=side: s.lookup(key, timeout=2 * seconds))
                           for v, side in self.watchers.items()}
                results = {INFORMER_SIDE: timed(lambda: informer.lookup(key))}
                results.update({v: f.result() for v, f in pending.items()})
        finally:
            self.ctx.faults.end_stall()
        return results


# -- what is measured --------------------------------------------------------------------------------
def served(before: dict[str, Any], after: dict[str, Any], agent: str) -> dict[str, int]:
    """Requests the server answered for ``agent`` between two ``GET /_sim/requests`` answers, by verb."""
    def by_verb(answer: dict[str, Any]) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in answer.get("requests") or []:
            if row.get("userAgent") == agent:
                out[row["verb"]] = out.get(row["verb"], 0) + int(row["count"])
        return out

    old, new = by_verb(before), by_verb(after)
    return {verb: n - old.get(verb, 0) for verb, n in sorted(new.items()) if n - old.get(verb, 0)}


def duplicates(notes: list[Notification]) -> tuple[int, int]:
    """(notifications of a state the side had already been told about, of those the ones that said
    so themselves: old and new version equal)."""
    told: set[tuple[str, int]] = set()
    dups = same = 0
    for n in notes:
        if n.deleted:
            continue
        if (n.key, n.rv) in told:
            dups += 1
            same += n.same
        told.add((n.key, n.rv))
    return dups, same


def longest_gap(run: Run, side: str, until_ms: float) -> tuple[float, bool]:
    """The longest time, up to ``until_ms``, between a watch stream ending and the side acting on it
    (opening another watch, or listing), and whether the side stopped watching for good before
    ``until_ms`` (a loop that returned: its program never notices)."""
    kinds = (RecordKind.WATCH_END, RecordKind.WATCH_START, RecordKind.LIST, RecordKind.STATE)
    records = run.records(side, kinds)
    never = side != INFORMER_SIDE and any(r["k"] == RecordKind.STATE and r.get("state") == ReflectorState.STOPPED
                                          and r["ts"] <= until_ms for r in records)
    longest = 0.0
    for i, r in enumerate(records):
        if r["k"] != RecordKind.WATCH_END or r["ts"] > until_ms:
            continue
        answer = next((n["ts"] for n in records[i + 1:] if n["k"] in (RecordKind.WATCH_START, RecordKind.LIST)), until_ms)
        longest = max(longest, (min(answer, until_ms) - r["ts"]) / 1000)
    return longest, never


@dataclass
class SideResult:
    """What one side did and saw, measured."""

    requests: dict[str, int]
    memory_reads: int
    api_reads: int
    bytes_per_object: float | None
    missed: int
    duplicates: int
    recognisable: int
    recovered: dict[str, float | None]
    gap_s: float
    never_noticed: bool
    stall_read: tuple[bool, float]

    @property
    def total_requests(self) -> int:
        return sum(self.requests.values())


def measure(run: Run, *, before: dict[str, Any], after: dict[str, Any], until_ms: float,
            stall: dict[str, tuple[bool, float]]) -> dict[str, SideResult]:
    assert run.informer is not None
    out: dict[str, SideResult] = {}
    changes = [c for c in run.changes if c.at >= run.started_ms]
    for side in SIDES:
        notes = run.notifications(side)
        dups, same = duplicates(notes)
        gap, never = longest_gap(run, side, until_ms)
        informer = side == INFORMER_SIDE
        out[side] = SideResult(
            requests=served(before, after, agent_of(side)),
            memory_reads=run.informer.memory_reads if informer else 0,
            api_reads=0 if informer else len(run.records(side, (RecordKind.READ,))),
            bytes_per_object=run.informer.bytes_per_object() if informer else None,
            missed=sum(1 for c in changes if run.seen_at(side, c, notes) is None),
            duplicates=dups, recognisable=same,
            recovered={p.name: (None if p.probe is None or (at := run.seen_at(side, p.probe, notes)) is None
                                else max(0.0, (at - p.probe.at) / 1000)) for p in run.phases if p.probe is not None},
            gap_s=gap, never_noticed=never, stall_read=stall[side])
    return out


# -- the results table ------------------------------------------------------------------------------
CLAIM_LIGHTENS, CLAIM_SURVIVES, CLAIM_KEEPS, CLAIM_EQUALS = range(4)
"""The claims' order in the result (the table's rows point at them)."""
COLUMNS = ["", "informer", *WATCHERS]


def _seconds(value: float) -> str:
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.1f} s"


def _requests(r: SideResult) -> str:
    verbs = ", ".join(f"{verb} {n}" for verb, n in r.requests.items())
    return f"{r.total_requests} ({verbs})" if verbs else "0"


def _recovered(value: float | None) -> str:
    return "never: did not see the next change" if value is None else f"saw the next change after {_seconds(value)}"


def stall_text(read: tuple[bool, float], stall_s: float) -> str:
    ok, took = read
    if not ok:
        return f"no answer: failed after {_seconds(took)}"
    return f"from memory in {_seconds(took)}" if took < 0.5 * stall_s else f"waited {_seconds(took)} for the network"


def results_table(measured: dict[str, SideResult], *, changes: int, stall_s: float, cache_equal: bool,
                  phases: list[str]) -> dict[str, Any]:
    """The table the scenarios page shows: one column per side, one row per measurement, each row
    pointing at the document's claim it measures."""
    def row(label: str, claim: int | None, cell: Callable[[str, SideResult], str]) -> dict[str, Any]:
        return {"label": label, "claim": claim, "cells": [cell(side, measured[side]) for side in SIDES]}

    rows = [
        row("API requests the server served for it", CLAIM_LIGHTENS, lambda s, r: _requests(r)),
        row("reads of a Deployment it was told about", CLAIM_LIGHTENS,
            lambda s, r: f"{r.memory_reads} from memory" if s == INFORMER_SIDE else f"{r.api_reads} GETs to the API server"),
        row("memory per cached object", CLAIM_LIGHTENS,
            lambda s, r: "no cache: 0 B" if r.bytes_per_object is None else f"{r.bytes_per_object:,.0f} B"),
        row(f"changes never seen (of {changes} made)", CLAIM_SURVIVES, lambda s, r: str(r.missed)),
        row("duplicate notifications", CLAIM_SURVIVES,
            lambda s, r: f"{r.duplicates}" + (f" (all {r.recognisable} say old = new version)"
                                              if r.duplicates and r.recognisable == r.duplicates else "")),
        *[row(f"after: {name}", CLAIM_SURVIVES, lambda s, r, name=name: _recovered(r.recovered.get(name)))
          for name in phases],
        row("longest time a stream end went unanswered", CLAIM_SURVIVES,
            lambda s, r: ("never noticed: " if r.never_noticed else "") + _seconds(r.gap_s)),
        row(f"a read during a {_seconds(stall_s)} network stall", CLAIM_KEEPS, lambda s, r: stall_text(r.stall_read, stall_s)),
        row("cache equals the API server afterwards", CLAIM_EQUALS,
            lambda s, r: ("yes" if cache_equal else "no") if s == INFORMER_SIDE else "no cache"),
    ]
    return {"columns": COLUMNS, "rows": rows}
