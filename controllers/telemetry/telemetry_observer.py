"""TelemetryObserver: turns the runtime's Observer hooks into published records and snapshot state.

Topics (one set per worker, so two replicas never overwrite each other's snapshots):

- ``w/{worker}/informer/{name}`` — records: list, watch events, bookmarks, watch start/end, backoff,
  handler calls, FIFO model; state: the cache as compact summaries (``key`` → rv, generation, uid,
  phase), Secrets redacted before anything is read from them.
- ``w/{worker}/queue/{name}`` — records: every queue operation; state: every key the queue knows about
  (``queued`` / ``processing`` / ``waiting`` with its ready time / ``dirty``) with its requeue count.
- ``w/{worker}/controller/{name}`` — records: event→request mapping, reconcile start/end; state: per
  key the last result, attempt count, last error.
  Also ``write`` records: the API writes (POST/PUT/PATCH/DELETE) a Reconcile made, with their status.
- ``w/{worker}/watcher/{name}`` — (v1.6) records of a program's own raw watch loop: when it starts,
  each watch it opens, each event, each stream end and each GET it makes for an event; no state
  (it has no cache).
- ``w/{worker}/components`` — state: one entry per informer/controller/leader lock/watcher (reflector state,
  resourceVersion, synced, FIFO model, the informers a controller watches, leadership) and the
  cluster the worker talks to (``describe_cluster``: a name and the server URL, never a credential).
- ``w/{worker}/status/{table}`` — state: rows a controller reports about itself (``on_status``), e.g.
  the PodSet example's scoreboard of desired versus actual pods per implementation.
- ``w/{worker}/metrics`` — written by ``MetricsSampler`` once a second; ``stages()`` is its share:
  cumulative counters per pipeline stage, so a page can draw every controller's pipeline with live
  rates without subscribing to the (large) informer, queue and controller topics.

Full objects are never published. What an update handler call received (``old`` and ``new``) is kept
in the worker, redacted and bounded (``last_updates``, a ``LastUpdates``), for the object inspector
(``inspector.py``) to answer with when the dashboard asks for one object.

Every hook runs on the runtime's thread; it only builds small dicts and hands them to the publisher's
in-memory buffer (no I/O). Records carry ``ts`` (wall ms) so the page can show and measure latency.

Which controller made an API write: the workqueue never hands one key to two workers and a worker
calls Reconcile on its own thread, so the thread that reported ``on_reconcile_start`` and has not yet
reported ``on_reconcile_end`` is that controller's; a request from it is that Reconcile's.

v1.7, why each attempt ran and what is stuck: ``Provenance`` (provenance.py) keeps the triggers each
key's next attempt absorbs and the resourceVersions the controller's writes got back, so an
``event`` record says whether it is the controller's own write (``self``) and which fields changed
(field_diff.py), and a ``reconcile_start`` lists its triggers. ``Detectors`` (detectors.py) turn the
same calls into ``finding`` records through a ``FindingBook`` (findings.py): hot loops, failing and
terminal keys, slow reconciles, keys waiting for a worker, informers not synced, silent watches and
relist storms; their time rules run before every flush (``evaluate``). All of this state is guarded
by one lock (``_detect_lock``), taken by the hooks that feed it, and the records those hooks publish
are emitted under it, so the stream's order is the order the state changed in.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from controllers.clock import Clock, RealClock, wall_ms
from controllers.observer import Observer, StoreOp
from controllers.schema import (
    INFORMER_SCOPE_FIELDS,
    LEADER_PREFIX,
    PROTOCOL_VERSION,
    ComponentKind,
    ControllerEvent,
    HandlerEvent,
    HandlerOutcome,
    QueueOp,
    RecordKind,
    ReflectorState,
    Runtime,
    TopicKind,
    WatchEndReason,
    WatcherVariant,
    WatchEventType,
    fold_handler_record,
    fold_queue_op,
    informer_scope_fields,
    topic_part,
    worker_topic,
)
from controllers.telemetry.detectors import DetectionConfig, Detectors
from controllers.telemetry.field_diff import diff_paths
from controllers.telemetry.findings import FindingBook
from controllers.telemetry.last_updates import LastUpdates
from controllers.telemetry.provenance import Provenance, written_key
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.summary import resource_version, summarize

# How long an event's record is parked, at most, for the answer to a write of its key in flight
# (on_request_start).
SELF_WAIT_LIMIT = 1.0

WATCHER_COUNTERS = ("watch", "watch_starts", "watch_ends", "expired", "reads", "read_errors")
"""v1.6: a raw watcher's stage counters (the metrics sample's ``stages.watchers``)."""

@dataclass
class _ParkedEvent:
    """An event record held back until the writes in flight when it arrived are answered (or
    ``SELF_WAIT_LIMIT`` has passed on the clock): only then can ``self`` be decided."""

    controller: str
    key: str
    rv: str | None
    old_rv: str | None
    record: dict[str, Any]
    requests: list[str]
    ts: float
    targets: list[tuple[tuple[str, str], int]]  # (write slot, writes started in it when the event arrived)
    deadline: float  # on the clock


FROM_ENV = "env"
"""``TelemetryObserver(detection=FROM_ENV)``: thresholds from ``CTRLSCOPE_DETECT_*`` (the default)."""


class TelemetryObserver(Observer):
    """Publishes every runtime step through a RedisPublisher (see module docstring)."""

    def __init__(self, publisher: RedisPublisher, *, worker: str, clock: Clock | None = None,
                 last_updates: LastUpdates | None = None, runtime: str = Runtime.PYTHON,
                 detection: DetectionConfig | str | None = FROM_ENV) -> None:
        """``detection``: the thresholds of the findings (``FROM_ENV``: ``DetectionConfig.from_env``,
        which raises ``ValueError`` naming a bad variable); ``None`` turns provenance and findings off
        (the records are then what a 1.6 publisher sends, apart from the version)."""
        self.publisher = publisher
        self.worker = topic_part(worker)
        publisher.describe(role="worker", name=self.worker)  # its presence entry (presence.py)
        self.clock = clock or RealClock()
        self.last_updates = last_updates or LastUpdates()
        self._topics: dict[tuple[TopicKind, str], str] = {}
        self._components_topic = worker_topic(self.worker, TopicKind.COMPONENTS)
        self._components: dict[str, dict[str, Any]] = {}
        self._components_lock = threading.Lock()  # entries are rewritten from runtime and flush threads
        self._reconciles: dict[tuple[str, str], dict[str, Any]] = {}
        self.metrics_topic = worker_topic(self.worker, TopicKind.METRICS)
        self.errors_topic = worker_topic(self.worker, TopicKind.ERRORS)
        # Who is publishing, in which protocol version: the dashboard labels the worker with the
        # runtime and shows a notice instead of data when it does not speak the major version.
        self._component(self.worker, ComponentKind.WORKER, runtime=str(runtime), protocol=PROTOCOL_VERSION,
                        publisher=publisher.name)
        # Stage counters (see stages()), bumped from several runtime threads: guarded by one lock.
        self._counts_lock = threading.Lock()
        self._informer_counts: dict[str, dict[str, int]] = {}
        self._controller_counts: dict[str, dict[str, Any]] = {}
        self._watcher_counts: dict[str, dict[str, int]] = {}
        self._reconciling: dict[int, str] = {}  # thread id -> controller whose Reconcile runs on it
        config = DetectionConfig.from_env() if detection == FROM_ENV else detection
        self._detect_lock = threading.Lock()
        # Writes of a Reconcile sent and answered, [started, answered], by (controller, key the path
        # names, "" for a create): an event of such a key is parked until the writes sent before it
        # arrived are answered (_writes_in_flight). Slots with nothing in flight are dropped once no
        # parked event waits (_write_waiters), so that a waiter's counts never restart under it.
        self._writes_lock = threading.Lock()  # nothing waits on it: events are parked, not held
        self._writes: dict[tuple[str, str], list[int]] = {}
        self._write_waiters = 0
        # Event records parked for those answers, in the order the events arrived (_detect_lock).
        self._parked: deque[_ParkedEvent] = deque()
        self.provenance: Provenance | None = None
        self.detectors: Detectors | None = None
        if isinstance(config, DetectionConfig):
            self.provenance = Provenance()
            self.detectors = Detectors(FindingBook(self._emit, self._set_findings), config, clock=self.clock)
            publisher.add_flush_hook(self.evaluate)

    def topic(self, kind: TopicKind, name: str) -> str:
        """This worker's topic of ``kind`` for component ``name`` (cached: called on every record)."""
        key = (kind, name)
        t = self._topics.get(key)
        if t is None:
            t = self._topics[key] = worker_topic(self.worker, kind, name)
        return t

    def _emit(self, kind: TopicKind, name: str, record: dict[str, Any], ts: float | None = None) -> None:
        record["ts"] = wall_ms(self.clock) if ts is None else ts
        self.publisher.publish(self.topic(kind, name), record)

    def _informer_record(self, informer: str, record: dict[str, Any],
                         detect: Callable[[Detectors, float], None]) -> None:
        """Publish an informer's record and feed the findings its call changes (``detect``, given the
        detectors and the record's time), under the detection lock: the stream's order is the order the
        findings' state changed in. The time is taken before the lock: waiting for it must not move
        the record's time."""
        ts = wall_ms(self.clock)
        with self._detect_lock:
            self._emit(TopicKind.INFORMER, informer, record, ts)
            if self.detectors is not None:
                detect(self.detectors, ts)

    def _component(self, name: str, kind: ComponentKind, **fields: Any) -> None:
        key = f"{kind}/{name}"
        with self._components_lock:
            comp = self._components.get(key)
            if comp is None:
                comp = self._components[key] = {"kind": kind, "name": name}
            comp.update(fields)
            self.publisher.set_state(self._components_topic, key, dict(comp))

    def _set_findings(self, kind: ComponentKind, name: str, findings: dict[str, Any]) -> None:
        self._component(name, kind, findings=findings)

    def evaluate(self) -> None:
        """v1.7: the findings' time rules and held changes, with the clock's time, and the parked
        events whose wait is over (the publisher runs this before building each flush's frames)."""
        if self.detectors is not None:
            with self._detect_lock:
                self._release_parked_locked()
                self.detectors.evaluate()

    def describe_cluster(self, *, name: str, server: str, version: str = "", simulated: bool | None = None,
                         writes: str | None = None) -> None:
        """Say which cluster this worker talks to (components state ``cluster/{name}``). Only what a
        person needs to recognise it: pass no token, no user info in ``server``. v1.2: whether it
        is the simulated cluster (``None``: not known yet) and whether the worker may write to it
        (``writes``: "allowed" or "read-only", informers/write_guard.py)."""
        extra: dict[str, Any] = {}
        if simulated is not None:
            extra["simulated"] = simulated
        if writes is not None:
            extra["writes"] = writes
        self._component(name, ComponentKind.CLUSTER, server=server, version=version, **extra)

    # -- stage counters ------------------------------------------------------------------------
    def _informer(self, informer: str) -> dict[str, int]:
        """The informer's counters (the caller holds ``_counts_lock``)."""
        c = self._informer_counts.get(informer)
        if c is None:
            c = self._informer_counts[informer] = dict.fromkeys(
                ("watch", "fifo", "cache", "handlers", "handler_errors", "fifo_depth"), 0)
        return c

    def _count(self, informer: str, field: str, n: int = 1) -> None:
        with self._counts_lock:
            self._informer(informer)[field] += n

    def _controller(self, controller: str) -> dict[str, Any]:
        c = self._controller_counts.get(controller)
        if c is None:
            c = self._controller_counts[controller] = {"writes": 0, "write_errors": 0, "write_conflicts": 0,
                                                       "writes_refused": 0, "last_result": ""}
        return c

    def _watcher(self, watcher: str) -> dict[str, int]:
        """The raw watcher's counters (the caller holds ``_counts_lock``)."""
        c = self._watcher_counts.get(watcher)
        if c is None:
            c = self._watcher_counts[watcher] = dict.fromkeys(WATCHER_COUNTERS, 0)
        return c

    def _count_watcher(self, watcher: str, *fields: str) -> None:
        with self._counts_lock:
            c = self._watcher(watcher)
            for field in fields:
                c[field] += 1

    def stages(self) -> dict[str, Any]:
        """Cumulative counters per pipeline stage, for the pipeline overview (rates come from the
        differences between two samples). Per informer: watch events, FIFO deltas queued, cache
        writes, handler calls and failures, the FIFO's depth, the cache size and the item count of
        the last LIST (initial-sync progress). Per controller: API writes made from Reconcile,
        those that failed (no response or status >= 400), writes the worker refused itself
        (``writes_refused``, never sent: in neither of the others) and the last reconcile result.
        v1.6, per raw watcher (``WATCHER_COUNTERS``): events, watches opened, streams ended, of those
        ended by 410 Expired, GETs made, and of those failed."""
        with self._counts_lock:
            informers = {name: dict(c) for name, c in self._informer_counts.items()}
            controllers = {name: dict(c) for name, c in self._controller_counts.items()}
            watchers = {name: dict(c) for name, c in self._watcher_counts.items()}
        for name, c in informers.items():
            c["size"] = self.publisher.state_len(self.topic(TopicKind.INFORMER, name))
        return {"informers": informers, "controllers": controllers, "watchers": watchers}

    # -- informer / reflector ----------------------------------------------------------------
    def on_informer(self, informer: str, *, fifo: str, resync_period: float,
                    scope: dict[str, Any] | None = None) -> None:
        narrowed = informer_scope_fields(scope)  # v1.3: only the fields that narrow it
        stale = self._components.get(f"{ComponentKind.INFORMER}/{informer}") or {}
        for field in INFORMER_SCOPE_FIELDS:
            stale.pop(field, None)  # an informer started again, narrowed otherwise
        self._component(informer, ComponentKind.INFORMER, fifo=fifo, resync_period=resync_period, synced=False,
                        **narrowed)
        with self._counts_lock:
            self._informer(informer)
        self._informer_record(informer, {"k": RecordKind.INFORMER, "fifo": fifo, "resync_period": resync_period,
                                         **narrowed}, lambda d, ts: d.informer(informer, ts=ts))

    def on_list(self, informer: str, *, resource_version: str, items: int, duration: float,
                error: str | None = None) -> None:
        self._informer_record(informer, {"k": RecordKind.LIST, "rv": resource_version, "items": items,
                                         "duration": duration, "error": error},
                              lambda d, ts: d.list(informer, ts=ts, error=error))
        if error is None:
            self._component(informer, ComponentKind.INFORMER, rv=resource_version, listed=items)

    def on_watch_start(self, informer: str, *, resource_version: str) -> None:
        self._informer_record(informer, {"k": RecordKind.WATCH_START, "rv": resource_version},
                              lambda d, ts: d.watch_start(informer, ts=ts, rv=resource_version))

    def on_watch_event(self, informer: str, *, event_type: str, key: str, resource_version: str) -> None:
        self._informer_record(informer, {"k": RecordKind.WATCH, "type": event_type, "key": key, "rv": resource_version},
                              lambda d, ts: d.watch_alive(informer, ts=ts, rv=resource_version))
        self._count(informer, "watch")

    def on_bookmark(self, informer: str, *, resource_version: str) -> None:
        self._informer_record(informer, {"k": RecordKind.BOOKMARK, "rv": resource_version},
                              lambda d, ts: d.watch_alive(informer, ts=ts, rv=resource_version))
        self._component(informer, ComponentKind.INFORMER, rv=resource_version)

    def on_watch_end(self, informer: str, *, reason: WatchEndReason, error: str | None = None) -> None:
        self._informer_record(informer, {"k": RecordKind.WATCH_END, "reason": reason, "error": error},
                              lambda d, ts: d.watch_end(informer, ts=ts, reason=reason))

    def on_backoff(self, informer: str, *, delay: float, reason: str) -> None:
        self._emit(TopicKind.INFORMER, informer, {"k": RecordKind.BACKOFF, "delay": delay, "reason": reason})

    def on_reflector_state(self, informer: str, *, state: str) -> None:
        self._informer_record(informer, {"k": RecordKind.STATE, "state": state},
                              lambda d, ts: d.reflector_state(informer, ts=ts, state=state))
        if state == ReflectorState.SYNCED:
            self._component(informer, ComponentKind.INFORMER, synced=True)
        else:
            self._component(informer, ComponentKind.INFORMER, state=state)

    def on_store(self, informer: str, *, op: str, key: str, obj: Any) -> None:
        topic = self.topic(TopicKind.INFORMER, informer)
        if op == StoreOp.UPSERT:
            self.on_secret(obj)  # a cached Secret's values are masked in every outgoing string
            self.publisher.set_state(topic, key, summarize(obj))
            self._count(informer, "cache")
        elif op == StoreOp.DELETE:
            if self.publisher.scrubber is not None:
                self.publisher.scrubber.forget(obj)
            self.publisher.set_state(topic, key, None)
            self._count(informer, "cache")
        elif op == StoreOp.REPLACE and isinstance(obj, Iterable):
            self._count(informer, "cache", self._replace(topic, obj))

    def _replace(self, topic: str, items: Iterable[tuple[str, Any]]) -> int:
        fresh = dict(items)
        gone = self.publisher.state(topic).keys() - fresh.keys()
        for key in gone:
            self.publisher.set_state(topic, key, None)
        for key, obj in fresh.items():
            self.on_secret(obj)
            self.publisher.set_state(topic, key, summarize(obj))
        return len(gone) + len(fresh)

    def on_secret(self, obj: Any) -> None:
        """Learn a Secret's (or SecretList's) values; anything else is ignored by the scrubber."""
        if self.publisher.scrubber is not None:
            self.publisher.scrubber.learn(obj)

    def on_fifo(self, informer: str, *, op: str, key: str, delta: str, depth: int) -> None:
        self._emit(TopicKind.INFORMER, informer, {"k": RecordKind.FIFO, "op": op, "key": key, "delta": delta, "depth": depth})
        with self._counts_lock:
            c = self._informer(informer)
            c["fifo_depth"] = depth
            if op == "queued":
                c["fifo"] += 1

    def on_handler(self, informer: str, *, handler: str, event: str, key: str, outcome: str,
                   duration: float, error: str | None = None, old: Any = None, new: Any = None,
                   tombstone: bool = False) -> None:
        record = {"k": RecordKind.HANDLER, "handler": handler, "event": event, "key": key, "outcome": outcome,
                  "duration": duration, "error": error, "rv": resource_version(new), "old_rv": resource_version(old)}
        if event == HandlerEvent.UPDATE and isinstance(old, dict) and isinstance(new, dict):
            self.last_updates.record(informer, key, handler=handler, old=old, new=new, old_rv=record["old_rv"],
                                     new_rv=record["rv"], at=wall_ms(self.clock))
        if tombstone:  # the delete was seen only by a relist: rv is the last known object's
            record["tombstone"] = True
        self._emit(TopicKind.INFORMER, informer, record)
        with self._counts_lock:
            c = self._informer(informer)
            c["handlers"] += 1
            if outcome == HandlerOutcome.ERROR:
                c["handler_errors"] += 1

    # -- raw watcher (v1.6) ----------------------------------------------------------------------
    def on_watcher(self, watcher: str, *, resource: str, namespace: str | None, variant: WatcherVariant) -> None:
        self._component(watcher, ComponentKind.WATCHER, resource=resource, namespace=namespace, variant=variant)
        with self._counts_lock:
            self._watcher(watcher)
        self._emit(TopicKind.WATCHER, watcher, {"k": RecordKind.WATCHER, "resource": resource, "namespace": namespace,
                                                "variant": variant})

    def on_watcher_state(self, watcher: str, *, state: ReflectorState) -> None:
        self._emit(TopicKind.WATCHER, watcher, {"k": RecordKind.STATE, "state": state})
        # since: a card says how long a loop has not been watching, which its program never notices.
        self._component(watcher, ComponentKind.WATCHER, state=state, since=wall_ms(self.clock))

    def on_watcher_watch_start(self, watcher: str, *, resource_version: str) -> None:
        self._emit(TopicKind.WATCHER, watcher, {"k": RecordKind.WATCH_START, "rv": resource_version})
        self._count_watcher(watcher, "watch_starts")

    def on_watcher_event(self, watcher: str, *, event_type: WatchEventType, key: str, resource_version: str) -> None:
        self._emit(TopicKind.WATCHER, watcher, {"k": RecordKind.WATCH, "type": event_type, "key": key,
                                                "rv": resource_version})
        self._count_watcher(watcher, "watch")

    def on_watcher_watch_end(self, watcher: str, *, reason: WatchEndReason, error: str | None = None) -> None:
        self._emit(TopicKind.WATCHER, watcher, {"k": RecordKind.WATCH_END, "reason": reason, "error": error})
        self._component(watcher, ComponentKind.WATCHER, last_end=reason)
        self._count_watcher(watcher, "watch_ends", *(("expired",) if reason == WatchEndReason.EXPIRED else ()))

    def on_watcher_read(self, watcher: str, *, key: str, path: str, code: int, duration: float) -> None:
        self._emit(TopicKind.WATCHER, watcher, {"k": RecordKind.READ, "key": key, "path": path, "code": code,
                                                "duration": duration})
        self._count_watcher(watcher, "reads", *(("read_errors",) if code == 0 or code >= 400 else ()))

    # -- workqueue ---------------------------------------------------------------------------
    def on_queue(self, queue: str, *, op: str, key: str, depth: int, delay: float | None = None,
                 requeues: int | None = None, duration: float | None = None) -> None:
        now_ms = wall_ms(self.clock)
        self._emit(TopicKind.QUEUE, queue, {"k": RecordKind.QUEUE, "op": op, "key": key, "depth": depth, "delay": delay,
                                    "requeues": requeues, "duration": duration}, now_ms)
        if self.detectors is not None:
            with self._detect_lock:
                self.detectors.queue_op(queue, op, key, ts=now_ms, delay=delay)
                if op == QueueOp.ADD_RATE_LIMITED and self.provenance is not None:
                    self.provenance.rate_limited(queue, key, delay)
        if not key:
            return
        topic = self.topic(TopicKind.QUEUE, queue)
        self.publisher.set_state(topic, key, fold_queue_op(self.publisher.state_value(topic, key), op, now_ms=now_ms,
                                                           delay=delay, requeues=requeues))

    # -- controllers -------------------------------------------------------------------------
    def on_event(self, controller: str, *, event: str, key: str, requests: list[str],
                 filtered_by: str | None = None, source: str | None = None, old: Any = None,
                 new: Any = None) -> None:
        record: dict[str, Any] = {"k": RecordKind.EVENT, "event": event, "key": key, "requests": requests,
                                  "filtered_by": filtered_by}
        provenance = self.provenance
        if provenance is None:
            self._emit(TopicKind.CONTROLLER, controller, record)
            return
        if source is not None:
            record["source"] = source
        rv = old_rv = None
        if new is not None:
            record["rv"] = rv = resource_version(new)
            if event == ControllerEvent.UPDATE and old is not None:
                record["old_rv"] = old_rv = resource_version(old)
                paths, more = diff_paths(old, new)
                record["diff"] = paths
                if more:
                    record["diff_more"] = more
        ts = wall_ms(self.clock)  # before the lock: waiting for it must not move the record's time
        with self._detect_lock:
            # Its own write's answer may not have been read yet (on_request_start says why): the
            # record waits for it, parked, and so do the events after it (their order is kept).
            # (An update that kept its resourceVersion is a resync: it brings back no write.)
            targets = self._writes_in_flight(controller, key) if rv is not None and rv != old_rv else []
            if targets or self._parked:
                self._parked.append(_ParkedEvent(controller, key, rv, old_rv, record, requests, ts, targets,
                                                 self.clock.now() + SELF_WAIT_LIMIT))
                return
            self._emit_event_locked(controller, key, rv, old_rv, record, requests, ts)

    def _emit_event_locked(self, controller: str, key: str, rv: str | None, old_rv: str | None,
                           record: dict[str, Any], requests: list[str], ts: float) -> None:  # _detect_lock held
        provenance = self.provenance
        assert provenance is not None
        if rv is not None and rv != old_rv and provenance.is_self(controller, key, rv):
            record["self"] = True
        self._emit(TopicKind.CONTROLLER, controller, record, ts)
        provenance.event(controller, record, requests)

    def on_controller(self, controller: str, *, watches: list[str], workers: int, started: bool,
                      mode: str | None = None, unseen: list[str] | None = None,
                      rate_limiter: dict[str, Any] | None = None) -> None:
        extra: dict[str, Any] = {}
        if mode is not None:  # v1.1
            extra.update(mode=str(mode), unseen=list(unseen or []))
        if rate_limiter is not None:  # v1.5
            extra["rate_limiter"] = rate_limiter
        self._component(controller, ComponentKind.CONTROLLER, watches=list(watches), workers=workers, started=started,
                        **extra)
        if rate_limiter is not None and self.detectors is not None:
            with self._detect_lock:
                self.detectors.rate_limiter(controller, rate_limiter)
        with self._counts_lock:
            self._controller(controller)  # counters from zero, so the first sample already has them

    def on_reconcile_start(self, controller: str, *, key: str, worker: int, handler: str | None = None,
                           cause: str | None = None, retry: int | None = None) -> None:
        self._reconciling[threading.get_ident()] = controller
        record: dict[str, Any] = {"k": RecordKind.RECONCILE_START, "key": key, "worker": worker}
        if handler is not None:  # v1.1: a framework's per-object handler (kopf)
            record.update(handler=handler, cause=cause, retry=retry)
        if self.provenance is None or self.detectors is None:
            self._emit(TopicKind.CONTROLLER, controller, record)
        else:
            ts = wall_ms(self.clock)  # before the lock: waiting for it must not move the record's time
            with self._detect_lock:
                # A parked event that maps to this key is one of its triggers: out it goes now, with
                # the events parked before it (an attempt cannot wait; its key's own write, if that
                # is what the event shows, was answered before the attempt that made it ended).
                self._release_parked_locked(until=(controller, key))
                triggers, count, self_triggered = self.provenance.take(controller, key)
                record.update(triggers=triggers, trigger_count=count)
                if self_triggered:
                    record["self_triggered"] = True
                self._emit(TopicKind.CONTROLLER, controller, record, ts)
                self.detectors.attempt_start(controller, key, ts=record["ts"], self_triggered=self_triggered,
                                             triggers=triggers, worker=worker, handler=handler)
        if handler is not None:
            self._fold_handler(controller, key, handler, record)

    def on_reconcile_end(self, controller: str, *, key: str, worker: int, duration: float, result: str,
                         requeue_after: float = 0.0, error: str | None = None, handler: str | None = None,
                         cause: str | None = None, retry: int | None = None, delay: float | None = None,
                         error_kind: str | None = None) -> None:
        record = {"k": RecordKind.RECONCILE, "key": key, "worker": worker, "duration": duration, "result": result,
                  "requeue_after": requeue_after, "error": error}
        if handler is not None:
            record.update(handler=handler, cause=cause, retry=retry, delay=delay, error_kind=error_kind)
        if self.provenance is None or self.detectors is None:
            self._emit(TopicKind.CONTROLLER, controller, record)
        else:
            ts = wall_ms(self.clock)  # before the lock: waiting for it must not move the record's time
            with self._detect_lock:
                self._emit(TopicKind.CONTROLLER, controller, record, ts)
                self.detectors.attempt_end(controller, key, ts=record["ts"], result=result, error=error)
                self.provenance.result(controller, key, ts=record["ts"], result=result, requeue_after=requeue_after,
                                       delay=delay if handler is not None else None)
        self._reconciling.pop(threading.get_ident(), None)
        summary = self._reconciles.setdefault((controller, key), {"attempts": 0})
        summary["attempts"] += 1
        summary.update(result=result, at=wall_ms(self.clock), duration=duration, error=error)
        if handler is not None:
            self._fold_handler(controller, key, handler, record)  # publishes the summary
        else:
            self.publisher.set_state(self.topic(TopicKind.CONTROLLER, controller), key, dict(summary))
        with self._counts_lock:
            self._controller(controller)["last_result"] = result
        if f"{ComponentKind.CONTROLLER}/{controller}" not in self._components:
            self._component(controller, ComponentKind.CONTROLLER)

    def on_log(self, controller: str, *, key: str, level: str, message: str, handler: str | None = None) -> None:
        record = {"k": RecordKind.LOG, "key": key, "level": level, "message": message}
        if handler is not None:
            record["handler"] = handler
        self._emit(TopicKind.CONTROLLER, controller, record)

    def on_progress(self, controller: str, *, key: str, handler: str, state: str | None, retries: int = 0,
                    next_at: float | None = None, cause: str | None = None, error: str | None = None) -> None:
        record = {"k": RecordKind.PROGRESS, "key": key, "handler": handler, "state": state, "retries": retries,
                  "next_at": next_at, "cause": cause, "error": error}
        self._emit(TopicKind.CONTROLLER, controller, record)
        self._fold_handler(controller, key, handler, record)

    def _fold_handler(self, controller: str, key: str, handler: str, record: dict[str, Any]) -> None:
        """The key's ``handlers`` entry for ``handler`` after ``record`` (``fold_handler_record``), and
        the key's summary republished with it."""
        summary = self._reconciles.setdefault((controller, key), {"attempts": 0})
        handlers = dict(summary.get("handlers") or {})
        entry = fold_handler_record(handlers.get(handler), record)
        if entry is None:
            handlers.pop(handler, None)
        else:
            handlers[handler] = entry
        summary["handlers"] = handlers
        topic = self.topic(TopicKind.CONTROLLER, controller)
        if not handlers and not summary["attempts"]:
            # Only stored progress ever named this key, and it is gone: so is the key.
            del self._reconciles[(controller, key)]
            self.publisher.set_state(topic, key, None)
            return
        self.publisher.set_state(topic, key, dict(summary))

    def on_request_start(self, *, method: str, path: str, controller: str | None = None) -> None:
        if method == "GET" or self.provenance is None:
            return
        if controller is None:
            controller = self._reconciling.get(threading.get_ident())
        if controller is not None:
            with self._writes_lock:
                slot = (controller, written_key(path) or "")
                counts = self._writes.get(slot)
                if counts is None:
                    counts = self._writes[slot] = [0, 0]
                counts[0] += 1

    def _write_answered(self, controller: str, path: str) -> None:
        """The end of a write ``on_request_start`` counted: events waiting for it go on."""
        slot = (controller, written_key(path) or "")
        with self._writes_lock:
            counts = self._writes.get(slot)
            if counts is None:
                return
            counts[1] += 1
            if counts[1] >= counts[0] and not self._write_waiters:
                del self._writes[slot]
            waiting = self._write_waiters
        if waiting:
            with self._detect_lock:
                self._release_parked_locked()

    def _writes_in_flight(self, controller: str, key: str) -> list[tuple[tuple[str, str], int]]:
        """The writes of ``key`` (and creates) by ``controller`` in flight now, as (slot, writes
        started in it): an event arriving now waits for their answers; one counted as waiting
        keeps these slots until it is released (_detect_lock held)."""
        writes = self._writes
        if not writes:  # the usual case, without the lock: a dict's emptiness is read atomically
            return []
        with self._writes_lock:
            targets = [(slot, counts[0]) for slot in ((controller, key), (controller, ""))
                       if (counts := writes.get(slot)) is not None and counts[1] < counts[0]]
            if targets:
                self._write_waiters += 1
            return targets

    def _answered(self, targets: list[tuple[tuple[str, str], int]]) -> bool:
        with self._writes_lock:
            return all(self._writes[slot][1] >= started for slot, started in targets)

    def _release_parked_locked(self, until: tuple[str, str] | None = None) -> None:
        """Emit the parked events, in order, up to the first still waiting for an answer within its
        limit; ``until`` (controller, request key): also every one up to the last that maps to it,
        answered or not (_detect_lock held)."""
        parked = self._parked
        if not parked:
            return
        last = -1
        if until is not None:
            controller, request = until
            last = max((i for i, p in enumerate(parked) if p.controller == controller and request in p.requests),
                       default=-1)
        now = self.clock.now()
        n = 0
        while parked:
            p = parked[0]
            if n > last and p.targets and now < p.deadline and not self._answered(p.targets):
                break
            parked.popleft()
            n += 1
            if p.targets:
                self._unwait()
            self._emit_event_locked(p.controller, p.key, p.rv, p.old_rv, p.record, p.requests, p.ts)

    def _unwait(self) -> None:
        """One parked event stopped waiting; the last one drops the slots with nothing in flight."""
        with self._writes_lock:
            self._write_waiters -= 1
            if not self._write_waiters:
                writes = self._writes
                for slot in [slot for slot, (started, answered) in writes.items() if answered >= started]:
                    del writes[slot]

    def on_request(self, *, method: str, path: str, code: int, duration: float,
                   controller: str | None = None, rv: str | None = None) -> None:
        if method == "GET":
            return  # reads: lists, watches and a Reconcile's GETs are not writes
        if controller is None:
            controller = self._reconciling.get(threading.get_ident())
        if controller is None:
            return  # not made from a Reconcile (an informer event handler, set-up code)
        try:
            self._request_done(method, path, code, duration, controller, rv)
        finally:
            if self.provenance is not None:
                self._write_answered(controller, path)

    def _request_done(self, method: str, path: str, code: int, duration: float, controller: str,
                      rv: str | None) -> None:
        record: dict[str, Any] = {"k": RecordKind.WRITE, "method": method, "path": path, "code": code,
                                  "duration": duration}
        if rv is not None:  # v1.7
            record["rv"] = rv
        if self.provenance is None:
            self._emit(TopicKind.CONTROLLER, controller, record)
        else:
            ts = wall_ms(self.clock)  # before the lock: waiting for it must not move the record's time
            with self._detect_lock:
                self._emit(TopicKind.CONTROLLER, controller, record, ts)
                self.provenance.wrote(controller, path=path, code=code, rv=rv)
        with self._counts_lock:
            c = self._controller(controller)
            c["writes"] += 1
            if code == 0 or code >= 400:
                c["write_errors"] += 1
            if code == 409:  # of those, optimistic-concurrency conflicts (a write from a stale read)
                c["write_conflicts"] += 1

    def on_write_refused(self, *, method: str, path: str, reason: str, controller: str | None = None) -> None:
        if controller is None:
            controller = self._reconciling.get(threading.get_ident())
        if controller is None:
            return  # as on_request: only a Reconcile's writes are the controller's
        # v1.4: still a ``write`` record (the timeline shows the attempt), with code 0 and duration 0
        # as a 1.3 reader expects, and ``refused`` saying it never left the worker.
        self._emit(TopicKind.CONTROLLER, controller, {"k": RecordKind.WRITE, "method": method, "path": path, "code": 0,
                                                      "duration": 0.0, "refused": reason})
        with self._counts_lock:
            self._controller(controller)["writes_refused"] += 1

    def on_leader(self, name: str, *, identity: str, leader: bool, holder: str | None) -> None:
        self._emit(TopicKind.CONTROLLER, f"{LEADER_PREFIX}{name}", {"k": RecordKind.LEADER, "identity": identity, "leader": leader,
                                                     "holder": holder})
        self._component(name, ComponentKind.LEASE, identity=identity, leader=leader, holder=holder)


    # -- controller-defined status ------------------------------------------------------------
    def on_status(self, table: str, *, key: str, value: dict[str, Any] | None) -> None:
        # State only: a page shows the current rows; the frame that carries a change is its history.
        self.publisher.set_state(self.topic(TopicKind.STATUS, table), key, None if value is None else dict(value))
