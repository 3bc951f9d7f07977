"""The publisher API: protocol v1 telemetry from any Python process, without ctrlscope's runtime.

ctrlscope's own informers, queues and controllers report through ``Observer`` hooks that a Manager
wires for you. A program built on something else (a kopf operator, a script around the official
client's informer, a hand-rolled loop) uses this module instead and shows up on the dashboard the
same way: its informers' caches and watch events, its queues key by key, its reconciles and their
results, its API writes, its metrics::

    from controllers.publish import ProtocolPublisher

    with ProtocolPublisher("redis://127.0.0.1:6379/0", worker="podset-operator", runtime="kopf") as pub:
        pods = pub.informer("v1/Pod")
        pods.listed(initial_pods, resource_version="1200")
        pods.synced()
        queue = pub.queue("podsets")
        controller = pub.controller("podsets", watches=["v1/Pod"])
        queue.add("default/web")
        queue.get("default/web")
        with controller.reconcile("default/web") as attempt:
            ...  # raises -> result "error"; attempt.requeue_after(5) -> "requeue_after"
        queue.done("default/web")

Underneath it is exactly what a ctrlscope worker runs: a ``TelemetryObserver`` (records, snapshot
state, stage counters) on a ``RedisPublisher`` (batched frames on its own thread, a bounded buffer
that drops and counts the oldest records as a last resort, idempotent per-publisher frame sequence
numbers, epoch handling that rewrites every snapshot after Redis lost its data), fanned out to a
``MetricsObserver`` sampled once a second for the metrics charts. Every call is non-blocking and
does no I/O. Secrets are redacted before anything leaves the process (``summarize``).

The queue reporter derives what the real queue did from the protocol's queue item model
(``controllers.schema.fold_queue_op``): ``add`` of a key that is already queued is reported as a
``dedup``, of a key being processed as a ``defer`` -- client-go's workqueue semantics -- so the
caller only says "I called Add".
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from controllers.clock import Clock, RealClock
from controllers.metrics import FAMILIES, MetricsObserver
from controllers.observer import FanoutObserver, Observer, StoreOp
from controllers.schema import (
    ErrorKind,
    HandlerCause,
    HandlerEvent,
    HandlerOutcome,
    HandlerProgress,
    LogLevel,
    ObservationMode,
    QueueItemState,
    QueueOp,
    ReconcileResult,
    ReflectorState,
    Runtime,
    TopicKind,
    WatchEndReason,
    WatcherVariant,
    WatchEventType,
    WriteRefusal,
    fold_queue_op,
    informer_scope_fields,
)
from controllers.telemetry.metrics_sampler import MetricsSampler
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.telemetry_observer import TelemetryObserver

__all__ = ["ControllerReport", "InformerReport", "ProtocolPublisher", "QueueReport", "ReconcileAttempt",
           "WatcherReport"]


class ProtocolPublisher:
    """One process' telemetry: a worker on the dashboard. Start it, report, stop it (or use ``with``).

    ``worker`` names the process on the dashboard (replicas need distinct names); ``runtime`` is the
    label shown next to it (``python``, ``kopf``, ``go``...). ``prefix`` must match the dashboard's
    ``CTRLSCOPE_PREFIX``. ``metrics=False`` skips the Prometheus series and the one-a-second sampler.
    ``observers``: more observers that hear every report beside the telemetry (the OTLP span
    sink, ``controllers.telemetry.otel_env.otlp_from_environment``; stopping them is the caller's).
    Further keyword arguments go to ``RedisPublisher`` (``flush_interval``, ``buffer_limit``, ...).
    """

    def __init__(self, url: str, *, worker: str, runtime: str = Runtime.PYTHON, prefix: str = "ctrlscope:",
                 clock: Clock | None = None, metrics: bool = True, observers: Iterable[Observer] = (),
                 **publisher_options: Any) -> None:
        if not worker:
            raise ValueError("worker must name this process (it is how the dashboard lists it)")
        self.clock = clock or RealClock()
        self.publisher = RedisPublisher(url, prefix=prefix, clock=self.clock, **publisher_options)
        self.telemetry = TelemetryObserver(self.publisher, worker=worker, clock=self.clock, runtime=runtime)
        self.metrics = MetricsObserver(clock=self.clock) if metrics else None
        self.observer = FanoutObserver(self.telemetry, self.metrics, *observers)
        """The raw ``Observer`` hooks, for code that reports something the reporters do not cover."""
        self._sampler = (MetricsSampler(self.metrics.registry, self.publisher, topic=self.telemetry.metrics_topic,
                                        families=FAMILIES, stages=self.telemetry.stages, clock=self.clock)
                         if self.metrics is not None else None)
        self._started = False

    @property
    def worker(self) -> str:
        """The worker's topic segment (``w/{worker}/...``)."""
        return self.telemetry.worker

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> ProtocolPublisher:
        if not self._started:
            self._started = True
            self.publisher.start()
            if self._sampler is not None:
                self._sampler.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Flush what is buffered (best effort within ``timeout``) and stop publishing."""
        if self._sampler is not None and self._started:
            self._sampler.stop(timeout)
        self.publisher.stop(timeout)
        self._started = False

    def __enter__(self) -> ProtocolPublisher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what the process has --------------------------------------------------------------------
    def describe_cluster(self, *, name: str, server: str, version: str = "", simulated: bool | None = None,
                         writes: str | None = None) -> None:
        """Which cluster this process talks to: a name and the server URL, never a credential; v1.2:
        whether it is the simulated cluster, and ``writes`` (WriteMode) whether this process writes to it."""
        self.telemetry.describe_cluster(name=name, server=server, version=version, simulated=simulated, writes=writes)

    def informer(self, name: str, *, resync_period: float = 0.0, fifo: str = "DeltaFIFO", namespace: str = "",
                 label_selector: str = "", field_selector: str = "", metadata_only: bool = False,
                 transform: str = "") -> InformerReport:
        """An informer (``name`` as the page shows it, e.g. ``v1/Pod``); announces it at once. v1.3:
        what narrows it, if anything (the protocol's InformerScope; ``transform`` named for people)."""
        scope = {"namespace": namespace, "label_selector": label_selector, "field_selector": field_selector,
                 "metadata_only": metadata_only, "transform": transform}
        self.observer.on_informer(name, fifo=fifo, resync_period=resync_period,
                                  scope=informer_scope_fields(scope) or None)
        return InformerReport(self, name)

    def watcher(self, name: str, *, resource: str, variant: str, namespace: str | None = None) -> WatcherReport:
        """v1.6: a raw watch loop of this process (a ``Watch`` call in a loop, no informer) on
        ``resource`` (``apps/v1/deployments``); ``variant`` (WatcherVariant) says what the loop does
        when its stream ends. Announces it at once; report ``watching()`` when the loop starts."""
        self.observer.on_watcher(name, resource=resource, namespace=namespace, variant=WatcherVariant(variant))
        return WatcherReport(self, name)

    def queue(self, name: str) -> QueueReport:
        """A workqueue; name it like its controller, as controller-runtime does."""
        return QueueReport(self, name)

    def controller(self, name: str, *, watches: Iterable[str] = (), workers: int = 1, mode: str | None = None,
                   unseen: Iterable[str] = (), rate_limiter: dict[str, Any] | None = None) -> ControllerReport:
        """A controller (reconciler) that watches the named informers; reported as started. One seen
        from outside its process says so: ``mode`` (``ObservationMode``) and what it cannot see.
        v1.5: ``rate_limiter`` describes its queue's rate limiter (a RateLimiterSpec, e.g.
        ``{"type": "exponential", "base": 0.005, "max": 1000}``), so the page can say which part chose
        each retry's delay and what the next will be."""
        self.observer.on_controller(name, watches=list(watches), workers=workers, started=True,
                                    **({"mode": ObservationMode(mode), "unseen": list(unseen)} if mode else {}),
                                    **({"rate_limiter": rate_limiter} if rate_limiter is not None else {}))
        return ControllerReport(self, name)

    def status(self, table: str, key: str, value: dict[str, Any] | None) -> None:
        """One row of the process' own live status table (``None`` removes it)."""
        self.observer.on_status(table, key=key, value=value)

    def leader(self, lock: str, *, identity: str, leader: bool, holder: str | None) -> None:
        """Leader election on ``lock`` changed for this process or was observed for ``holder``."""
        self.observer.on_leader(lock, identity=identity, leader=leader, holder=holder)


class InformerReport:
    """Reports one informer: its LIST, watch events (which also keep the cache panel's copy of the
    cache), bookmarks, watch ends, backoffs, sync and handler calls."""

    def __init__(self, owner: ProtocolPublisher, name: str) -> None:
        self.name = name
        self._obs = owner.observer
        self._clock = owner.clock

    def listed(self, objects: Iterable[dict[str, Any]], *, resource_version: str, duration: float = 0.0) -> None:
        """A LIST returned ``objects``: the cache is now exactly these (deleted keys disappear)."""
        items = [(object_key(o), o) for o in objects]
        self._obs.on_store(self.name, op=StoreOp.REPLACE, key="", obj=items)
        self._obs.on_list(self.name, resource_version=resource_version, items=len(items), duration=duration)

    def list_failed(self, error: str, *, resource_version: str = "", duration: float = 0.0) -> None:
        self._obs.on_list(self.name, resource_version=resource_version, items=0, duration=duration, error=error)

    def watch_started(self, resource_version: str) -> None:
        self._obs.on_reflector_state(self.name, state=ReflectorState.WATCHING)
        self._obs.on_watch_start(self.name, resource_version=resource_version)

    def watch_event(self, event_type: str, obj: dict[str, Any]) -> None:
        """A watch event (``ADDED``/``MODIFIED``/``DELETED``) for ``obj`` reached the cache."""
        event_type = WatchEventType(event_type)
        key = object_key(obj)
        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
        self._obs.on_watch_event(self.name, event_type=event_type, key=key, resource_version=rv)
        if event_type is WatchEventType.DELETED:
            self._obs.on_store(self.name, op=StoreOp.DELETE, key=key, obj=obj)
        elif event_type is not WatchEventType.BOOKMARK and event_type is not WatchEventType.ERROR:
            self._obs.on_store(self.name, op=StoreOp.UPSERT, key=key, obj=obj)

    def bookmark(self, resource_version: str) -> None:
        self._obs.on_bookmark(self.name, resource_version=resource_version)

    def watch_ended(self, reason: str, *, error: str | None = None) -> None:
        """Why the watch ended: a ``WatchEndReason`` (``closed``, ``expired``, ``error`` with its text...)."""
        reason = WatchEndReason(reason)
        self._obs.on_watch_end(self.name, reason=reason, **({"error": error} if error is not None else {}))

    def backoff(self, delay: float, reason: str) -> None:
        self._obs.on_reflector_state(self.name, state=ReflectorState.BACKING_OFF)
        self._obs.on_backoff(self.name, delay=delay, reason=reason)

    def synced(self) -> None:
        """The initial list is in the cache (``HasSynced``)."""
        self._obs.on_reflector_state(self.name, state=ReflectorState.SYNCED)

    def handler(self, handler: str, event: str, key: str, *, outcome: str = HandlerOutcome.OK,
                duration: float = 0.0, error: str | None = None, old: Any = None, new: Any = None,
                tombstone: bool = False) -> None:
        """An event handler ran (``event``: add/update/delete); ``old``/``new`` feed the object
        inspector; ``tombstone``: a delete seen only by a relist (``new`` the last known object)."""
        self._obs.on_handler(self.name, handler=handler, event=HandlerEvent(event), key=key,
                             outcome=HandlerOutcome(outcome), duration=duration, error=error, old=old, new=new,
                             tombstone=tombstone)

    @contextmanager
    def handling(self, handler: str, event: str, key: str, *, old: Any = None, new: Any = None) -> Iterator[None]:
        """Times a handler call; an exception is reported as ``outcome=error`` and re-raised."""
        start = self._clock.now()
        try:
            yield
        except Exception as exc:
            self.handler(handler, event, key, outcome=HandlerOutcome.ERROR, duration=self._clock.now() - start,
                         error=f"{type(exc).__name__}: {exc}", old=old, new=new)
            raise
        self.handler(handler, event, key, duration=self._clock.now() - start, old=old, new=new)


class WatcherReport:
    """Reports one raw watch loop: the watches it opens, the events it gets, how each stream ends,
    the GETs it makes because it has no cache, and whether it still watches at all."""

    def __init__(self, owner: ProtocolPublisher, name: str) -> None:
        self.name = name
        self._obs = owner.observer
        self._clock = owner.clock

    def watching(self) -> None:
        """The loop runs (it is about to open its first watch)."""
        self._obs.on_watcher_state(self.name, state=ReflectorState.WATCHING)

    def stopped(self) -> None:
        """The loop returned or raised: nothing watches any more, whatever the process does next."""
        self._obs.on_watcher_state(self.name, state=ReflectorState.STOPPED)

    def watch_started(self, resource_version: str) -> None:
        """A watch was opened from ``resource_version`` (``""``: from now, existing objects first)."""
        self._obs.on_watcher_watch_start(self.name, resource_version=resource_version)

    def event(self, event_type: str, obj: dict[str, Any]) -> None:
        """One watch event (``ADDED``/``MODIFIED``/``DELETED``/``BOOKMARK``) for ``obj`` (a dict)."""
        rv = (obj.get("metadata") or {}).get("resourceVersion", "")
        self._obs.on_watcher_event(self.name, event_type=WatchEventType(event_type), key=object_key(obj),
                                   resource_version=rv)

    def watch_ended(self, reason: str, *, error: str | None = None) -> None:
        """How the stream ended: a ``WatchEndReason`` (``closed`` by the server, ``expired``: 410,
        ``error`` with its text...)."""
        self._obs.on_watcher_watch_end(self.name, reason=WatchEndReason(reason), error=error)

    def read(self, key: str, *, path: str, code: int, duration: float) -> None:
        """A GET of object ``key`` the loop made (``code`` 0: no answer)."""
        self._obs.on_watcher_read(self.name, key=key, path=path, code=code, duration=duration)

    @contextmanager
    def reading(self, key: str, path: str) -> Iterator[ReadOutcome]:
        """Times a GET; set the answer's status on what it yields (``outcome.code = 404``), or let an
        exception out (reported with the code it carries as ``status``, else 0) -- re-raised."""
        outcome = ReadOutcome()
        start = self._clock.now()
        try:
            yield outcome
        except Exception as exc:
            status = getattr(exc, "status", 0)
            self.read(key, path=path, code=status if isinstance(status, int) else 0, duration=self._clock.now() - start)
            raise
        self.read(key, path=path, code=outcome.code, duration=self._clock.now() - start)


class ReadOutcome:
    """What ``WatcherReport.reading`` reports: the GET's HTTP status (200 unless told otherwise)."""

    def __init__(self) -> None:
        self.code = 200


class QueueReport:
    """Reports one workqueue key by key. Say what your queue was asked to do; the report works out
    dedups, deferrals and the queue's depth from the protocol's queue item model."""

    def __init__(self, owner: ProtocolPublisher, name: str) -> None:
        self.name = name
        self._obs = owner.observer
        self._clock = owner.clock
        self._lock = threading.Lock()
        # Each key's item is the queue topic's state, which the TelemetryObserver folds from the
        # records this report emits: read there, not mirrored here.
        self._publisher = owner.publisher
        self._topic = owner.telemetry.topic(TopicKind.QUEUE, name)
        self._ready = 0  # keys whose state is queued: the queue's depth
        self._added_at: dict[str, float] = {}  # key -> clock time of its first unprocessed add
        self._got_at: dict[str, float] = {}  # key -> clock time a worker took it

    def _item(self, key: str) -> dict[str, Any]:
        return self._publisher.state_value(self._topic, key) or {}

    def _apply_locked(self, key: str, op: QueueOp, *, depth_before: bool = False, **fields: Any) -> None:
        # The record carries the depth after the op, so the fold that follows it is worked out here
        # first, for whether the key leaves or joins the ready keys.
        before = self._item(key) or None
        depth = self._ready
        after = fold_queue_op(before, op, now_ms=self._clock.wall() * 1000, delay=fields.get("delay"),
                              requeues=fields.get("requeues"))
        self._ready += _is_ready(after) - _is_ready(before)
        self._obs.on_queue(self.name, op=op, key=key, depth=depth if depth_before else self._ready, **fields)

    def add(self, key: str) -> None:
        """``Add(key)``: queued, or absorbed (already queued: dedup; being processed: defer)."""
        with self._lock:
            item = self._item(key)
            if item.get("s") == QueueItemState.QUEUED or item.get("dirty"):
                self._apply_locked(key, QueueOp.DEDUP)
            elif item.get("s") == QueueItemState.PROCESSING:
                self._apply_locked(key, QueueOp.DEFER)
            else:
                self._added_at.setdefault(key, self._clock.now())
                self._apply_locked(key, QueueOp.ADD)

    def get(self, key: str) -> None:
        """A worker took ``key`` off the queue."""
        with self._lock:
            now = self._clock.now()
            self._got_at[key] = now
            self._apply_locked(key, QueueOp.GET, duration=now - self._added_at.pop(key, now))

    def done(self, key: str) -> None:
        """The worker finished ``key``; if it was added meanwhile it is queued again (``requeue``)."""
        with self._lock:
            now = self._clock.now()
            dirty = bool(self._item(key).get("dirty"))
            # Like the queue itself: done reports the depth before a dirty key goes back in the FIFO.
            self._apply_locked(key, QueueOp.DONE, depth_before=dirty, duration=now - self._got_at.pop(key, now))
            if dirty:
                self._added_at.setdefault(key, now)
                self._obs.on_queue(self.name, op=QueueOp.REQUEUE, key=key, depth=self._ready)

    def add_after(self, key: str, delay: float) -> None:
        """``AddAfter(key, delay)``; report ``add(key)`` when your queue adds it back."""
        if delay <= 0:
            self.add(key)
            return
        with self._lock:
            self._apply_locked(key, QueueOp.ADD_AFTER, delay=delay)

    def add_rate_limited(self, key: str, *, delay: float, requeues: int) -> None:
        """``AddRateLimited(key)``: the limiter chose ``delay``; ``requeues`` counts this retry too."""
        with self._lock:
            self._apply_locked(key, QueueOp.ADD_RATE_LIMITED, delay=delay, requeues=requeues)

    def forget(self, key: str) -> None:
        """``Forget(key)``: the rate limiter's count for ``key`` is cleared."""
        with self._lock:
            requeues = self._item(key).get("requeues", 0)
            self._apply_locked(key, QueueOp.FORGET, requeues=requeues)

    def shut_down(self) -> None:
        with self._lock:
            self._obs.on_queue(self.name, op=QueueOp.SHUTDOWN, key="", depth=self._ready)


def object_key(obj: dict[str, Any]) -> str:
    """An object's cache key, ``namespace/name`` (``name`` when cluster-scoped), as informers key it."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _is_ready(item: dict[str, Any] | None) -> int:
    return 1 if item is not None and item.get("s") == QueueItemState.QUEUED else 0


class ReconcileAttempt:
    """What one reconcile decided; ``ControllerReport.reconcile`` hands it out."""

    def __init__(self) -> None:
        self.result = ReconcileResult.SUCCESS
        self.requeue_after_seconds = 0.0
        self.error: str | None = None
        self.delay: float | None = None
        self.error_kind: ErrorKind | None = None

    def retry_after(self, seconds: float, error: str, *, kind: str = ErrorKind.EXCEPTION) -> None:
        """The handler failed and the framework runs it again by itself in ``seconds`` (kopf: a
        ``TemporaryError``'s delay, or the handler's backoff for any other exception)."""
        kind = ErrorKind(kind)
        self.result = ReconcileResult.REQUEUE_AFTER if kind is ErrorKind.CHILDREN else ReconcileResult.ERROR
        self.requeue_after_seconds = seconds if kind is ErrorKind.CHILDREN else 0.0
        self.delay, self.error_kind, self.error = seconds, kind, error

    def give_up(self, error: str, *, kind: str = ErrorKind.PERMANENT) -> None:
        """The handler failed for good (a ``PermanentError``, out of retries or of time)."""
        self.result, self.error, self.error_kind = ReconcileResult.TERMINAL, error, ErrorKind(kind)

    def ignore(self, error: str) -> None:
        """The handler raised and the framework ignored it (logged, never retried)."""
        self.result, self.error, self.error_kind = ReconcileResult.SUCCESS, error, ErrorKind.IGNORED

    def requeue(self) -> None:
        """``Result{Requeue: true}``: retry with the rate limiter's backoff."""
        self.result = ReconcileResult.REQUEUE

    def requeue_after(self, seconds: float) -> None:
        """``Result{RequeueAfter: seconds}``."""
        self.result = ReconcileResult.REQUEUE_AFTER
        self.requeue_after_seconds = seconds

    def terminal(self, error: str) -> None:
        """A terminal error: reported as failed, not retried."""
        self.result = ReconcileResult.TERMINAL
        self.error = error


class ControllerReport:
    """Reports one controller: the events that reached it and every reconcile, with its result.

    API writes reported with ``write`` from inside ``reconcile`` (same thread) count as that
    reconcile's writes, as the runtime's API client does it."""

    def __init__(self, owner: ProtocolPublisher, name: str) -> None:
        self.name = name
        self._obs = owner.observer
        self._clock = owner.clock

    def event(self, event: str, key: str, *, requests: Iterable[str] | None = None,
              filtered_by: str | None = None, source: str | None = None, old: Any = None,
              new: Any = None) -> None:
        """A watched object's event (create/update/delete/generic) mapped to ``requests`` (default:
        the object's own key) or dropped by the predicate ``filtered_by``. v1.7: ``source`` names the
        handler that mapped it, ``new`` is the event's object (a delete's: the deleted one) and
        ``old`` an update's previous one: the record then says which fields changed and whether
        the object is one this controller wrote (its ``write`` got that resourceVersion back)."""
        mapped = [] if filtered_by else list(requests if requests is not None else [key])
        self._obs.on_event(self.name, event=event, key=key, requests=mapped, filtered_by=filtered_by,
                           source=source, old=old, new=new)

    @contextmanager
    def reconcile(self, key: str, *, worker: int = 0, handler: str | None = None, cause: str | None = None,
                  retry: int | None = None) -> Iterator[ReconcileAttempt]:
        """Times one Reconcile of ``key``: an exception is result ``error`` (re-raised); otherwise
        whatever the attempt was told (``requeue``, ``requeue_after``, ``terminal``, ``retry_after``,
        ``give_up``), else success. A framework's per-object handler names itself (``handler``, its
        ``cause`` and ``retry``): the key's ``handlers`` state then says where each handler is."""
        attempt = ReconcileAttempt()
        named: dict[str, Any] = {}
        if handler is not None:
            named = {"handler": handler, "cause": HandlerCause(cause) if cause in _CAUSES else cause, "retry": retry}
        self._obs.on_reconcile_start(self.name, key=key, worker=worker, **named)
        start = self._clock.now()
        try:
            yield attempt
        except Exception as exc:
            self._obs.on_reconcile_end(self.name, key=key, worker=worker, duration=self._clock.now() - start,
                                       result=ReconcileResult.ERROR, error=f"{type(exc).__name__}: {exc}", **named)
            raise
        if handler is not None:
            named.update(delay=attempt.delay, error_kind=attempt.error_kind)
        self._obs.on_reconcile_end(self.name, key=key, worker=worker, duration=self._clock.now() - start,
                                   result=attempt.result, requeue_after=attempt.requeue_after_seconds,
                                   error=attempt.error, **named)

    def write(self, *, method: str, path: str, code: int, duration: float, attributed: bool = False,
              rv: str | None = None) -> None:
        """An API request made by the reconcile running on this thread (GETs are not writes).
        ``attributed``: this controller made it while handling an object, whatever the thread (an
        asyncio framework, whose handlers all share one thread, knows that better than the thread).
        v1.7: ``rv``, the metadata.resourceVersion of the object the server answered with, lets the
        watch event of this write be told apart as the controller's own."""
        self._obs.on_request(method=method, path=path, code=code, duration=duration, rv=rv,
                             **({"controller": self.name} if attributed else {}))

    def write_refused(self, *, method: str, path: str, reason: str = WriteRefusal.READ_ONLY,
                      attributed: bool = False) -> None:
        """A write this process refused itself and never sent (``reason``: a ``WriteRefusal``, e.g.
        read-only); shown as "refused", not as a failed API write. ``attributed`` as for ``write``."""
        self._obs.on_write_refused(method=method, path=path, reason=WriteRefusal(reason),
                                   **({"controller": self.name} if attributed else {}))

    def log(self, key: str, level: str, message: str, *, handler: str | None = None) -> None:
        """A line the controller logged about object ``key`` (``level``: a ``LogLevel``)."""
        self._obs.on_log(self.name, key=key, level=LogLevel(level), message=message, handler=handler)

    def progress(self, key: str, handler: str, state: str | None, *, retries: int = 0, next_at: float | None = None,
                 cause: str | None = None, error: str | None = None) -> None:
        """What object ``key`` stores about ``handler``'s progress (``state``: a ``HandlerProgress``,
        ``None`` once the object no longer stores it; ``next_at``: wall ms of a delayed retry)."""
        self._obs.on_progress(self.name, key=key, handler=handler,
                              state=HandlerProgress(state) if state is not None else None, retries=retries,
                              next_at=next_at, cause=cause, error=error)


_CAUSES = frozenset(HandlerCause)
