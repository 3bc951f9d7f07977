"""The reconcile loop (controller-runtime ``pkg/internal/controller/controller.go``).

Producers: informer event handlers. ``watch`` registers a handler on a SharedInformer; each event
runs through the predicates, then an event handler maps it to ``Request``s, which are ``add``-ed to
the controller's rate-limiting workqueue (where duplicates collapse).

Consumers: ``max_concurrent_reconciles`` worker threads loop ``get`` -> reconcile -> ``done``. The
workqueue guarantees one key is never held by two workers. What happens after a reconcile is a
fixed table:

====================  =============================================  ===================
outcome               queue action                                   result label
====================  =============================================  ===================
raised TerminalError  none (the key's backoff is *not* forgotten)    error (+ terminal)
raised ReadOnlyError  none, as for TerminalError                     error (+ terminal)
raised anything else  ``add_rate_limited`` (no ``forget``)           error
requeue_after > 0     ``forget`` then ``add_after(requeue_after)``   requeue_after
requeue=True          ``add_rate_limited``                           requeue
otherwise             ``forget``                                     success
====================  =============================================  ===================

A ``ReadOnlyError`` (the worker refused its own write: ``informers/write_guard.py``), raised or
the ``__cause__`` of what was raised, is terminal because no retry can succeed: the worker stays
read-only until it is restarted with ``--allow-writes``, so backing off would only refuse the same
write forever. The result says ``terminal`` and the error text starts with ``read-only``.

A Result returned together with an error cannot happen in Python (raising *is* the error).
Returning something that is neither a ``Result`` nor ``None`` is treated like a Go panic: counted as
a panic and an error, and requeued rate-limited. ``done`` always runs, and no exception escapes a
worker: a buggy reconciler never stops the controller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from controllers.clock import Clock, RealClock
from controllers.informers.keys import DeletedFinalStateUnknown, object_key
from controllers.informers.lazy_object import decoded
from controllers.informers.write_guard import ReadOnlyError
from controllers.observer import NOOP_OBSERVER, Observer, active_observer
from controllers.reconcile.handlers import EnqueueRequestForObject, EnqueueRequestForOwner, EventHandler
from controllers.reconcile.predicates import Predicate
from controllers.reconcile.request import Reconciler, Request, Result, TerminalError
from controllers.schema import ControllerEvent, ReconcileResult
from controllers.workqueue import RateLimiter, RateLimitingQueue, default_controller_rate_limiter, describe_rate_limiter

log = logging.getLogger("ctrlscope.controller")

DEFAULT_CACHE_SYNC_TIMEOUT = 120.0

ReconcileFunc = Callable[[Request], "Result | None"]


def handler_name(controller: str, handler: EventHandler) -> str:
    """The name a controller's informer handler calls are published under: ``controller/{name}
    ({role})``, the role being the controller-runtime builder method that installs such a handler
    (``For``: the object itself, ``Owns``: its controller owner, ``Watches``: anything else), so that
    the calls of one controller's For and Owns watches of one informer can be told apart. Go's
    ``ctrlruntime.HandlerName`` spells it the same."""
    role = ("For" if isinstance(handler, EnqueueRequestForObject)
            else "Owns" if isinstance(handler, EnqueueRequestForOwner) else "Watches")
    return f"controller/{controller} ({role})"


class Source(Protocol):
    """What ``Controller.watch`` needs from an informer."""

    name: str

    def add_event_handler(self, *, on_add: Callable[[Any], None] | None = None,
                          on_update: Callable[[Any, Any], None] | None = None,
                          on_delete: Callable[[Any], None] | None = None,
                          name: str | None = None) -> Any: ...

    def has_synced(self) -> bool: ...

    def wait_for_sync(self, timeout: float) -> bool: ...


@dataclass
class ControllerMetrics:
    """controller-runtime's reconcile counters for one controller, kept in-process for code and tests;
    the Prometheus series come from ``MetricsObserver``."""

    reconcile_total: dict[ReconcileResult, int] = field(default_factory=lambda: dict.fromkeys(
        (ReconcileResult.SUCCESS, ReconcileResult.ERROR, ReconcileResult.REQUEUE, ReconcileResult.REQUEUE_AFTER), 0))
    reconcile_errors_total: int = 0
    terminal_reconcile_errors_total: int = 0
    reconcile_panics_total: int = 0
    active_workers: int = 0


class Controller:
    """Runs a Reconciler over a rate-limited workqueue fed by watched informers."""

    def __init__(self, name: str, reconciler: Reconciler | ReconcileFunc, max_concurrent_reconciles: int = 1,
                 rate_limiter: RateLimiter | None = None, *, clock: Clock | None = None,
                 observer: Observer | None = None,
                 cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT) -> None:
        if max_concurrent_reconciles < 1:
            raise ValueError("max_concurrent_reconciles must be >= 1")
        self.name = name
        self._reconcile: ReconcileFunc = getattr(reconciler, "reconcile", reconciler)
        self.max_concurrent_reconciles = max_concurrent_reconciles
        self.clock: Clock = clock or RealClock()
        self.observer: Observer = observer or NOOP_OBSERVER
        self._obs = active_observer(self.observer)
        self.cache_sync_timeout = cache_sync_timeout
        self.queue = RateLimitingQueue(
            name, rate_limiter=rate_limiter or default_controller_rate_limiter(clock=self.clock),
            clock=self.clock, observer=self.observer)
        self.metrics = ControllerMetrics()
        self._metrics_lock = threading.Lock()
        self._sources: list[Source] = []
        self._workers: list[threading.Thread] = []
        self._started = False

    # -- wiring --------------------------------------------------------------------------------
    def watch(self, informer: Source, handler: EventHandler | None = None,
              predicates: Sequence[Predicate] = ()) -> None:
        """Reconcile requests mapped by ``handler`` (default: the object itself) from ``informer``'s
        events that pass every predicate."""
        handler = handler or EnqueueRequestForObject()
        predicates = tuple(predicates)
        source = handler_name(self.name, handler)

        def dispatch(event: ControllerEvent, obj: Any, requests: Callable[[], list[Request]],
                     passes: Callable[[Predicate], bool], old: Any = None) -> None:
            # The event's objects go to the observer as the informer handed them (it only reads
            # their resourceVersions and changed fields): why the key's next attempt runs. An
            # update's ``old`` from the compact cache is a LazyObject: the observer gets its dict.
            obs = self._obs
            if obs is not None:
                old = decoded(old)
            for p in predicates:
                if not passes(p):
                    if obs is not None:
                        obs.on_event(self.name, event=event, key=object_key(obj), requests=[],
                                     filtered_by=type(p).__name__, source=source, old=old, new=obj)
                    return
            mapped = requests()
            if obs is not None:
                obs.on_event(self.name, event=event, key=object_key(obj), requests=[str(r) for r in mapped],
                             source=source, old=old, new=obj)
            for request in mapped:
                self.queue.add(request)

        def on_add(obj: Any) -> None:
            dispatch(ControllerEvent.CREATE, obj, lambda: handler.create(obj), lambda p: p.create(obj))

        def on_update(old: Any, new: Any) -> None:
            dispatch(ControllerEvent.UPDATE, new, lambda: handler.update(old, new), lambda p: p.update(old, new),
                     old=old)

        def on_delete(obj: Any) -> None:
            # The final state may be unknown (deleted while disconnected): reconcile the last
            # state the cache knew, like controller-runtime's DeleteEvent.DeleteStateUnknown.
            if type(obj) is DeletedFinalStateUnknown:
                obj = obj.obj
            dispatch(ControllerEvent.DELETE, obj, lambda: handler.delete(obj), lambda p: p.delete(obj))

        informer.add_event_handler(on_add=on_add, on_update=on_update, on_delete=on_delete, name=source)
        self._sources.append(informer)
        self._report(started=False)

    def _report(self, *, started: bool) -> None:
        if self._obs is not None:
            self._obs.on_controller(self.name, watches=[s.name for s in self._sources],
                                    workers=self.max_concurrent_reconciles, started=started,
                                    rate_limiter=describe_rate_limiter(self.queue.rate_limiter))

    def enqueue(self, request: Request) -> None:
        """Add a request directly (a generic event / channel source)."""
        self.queue.add(request)

    # -- lifecycle -----------------------------------------------------------------------------
    @property
    def started(self) -> bool:
        """True once the workers run."""
        return self._started

    def start(self) -> None:
        """Wait for every watched informer to sync, then start the workers (returns at once after).

        Raises ``TimeoutError`` if a cache does not sync within ``cache_sync_timeout``.
        """
        if self._started:
            raise RuntimeError(f"controller {self.name} already started")
        for source in self._sources:
            if not source.wait_for_sync(self.cache_sync_timeout):
                raise TimeoutError(f"controller {self.name}: timed out waiting for cache to be synced")
        self._started = True
        for i in range(self.max_concurrent_reconciles):
            t = threading.Thread(target=self._worker, args=(i,), name=f"{self.name}-worker-{i}", daemon=True)
            self._workers.append(t)
            t.start()
        self._report(started=True)

    def snapshot(self) -> dict[str, Any]:
        """The controller's counters and its queue's items (the protocol's queue item model)."""
        with self._metrics_lock:
            m = self.metrics
            counters = {"reconcile_total": dict(m.reconcile_total), "errors": m.reconcile_errors_total,
                        "terminal_errors": m.terminal_reconcile_errors_total, "panics": m.reconcile_panics_total,
                        "active_workers": m.active_workers}
        return {"name": self.name, "max_concurrent_reconciles": self.max_concurrent_reconciles,
                "started": self._started, "queue": self.queue.items(), **counters}

    def stop(self, timeout: float | None = 30.0) -> None:
        """Stop taking work; wait for running reconciles to finish and the workers to exit."""
        self.queue.shut_down_with_drain()
        for t in self._workers:
            t.join(timeout)
        self._report(started=False)

    # -- the loop ------------------------------------------------------------------------------
    def _worker(self, worker: int) -> None:
        queue = self.queue
        while True:
            request, shutdown = queue.get()
            if shutdown:
                return
            with self._metrics_lock:
                self.metrics.active_workers += 1
            try:
                self._reconcile_handler(request, worker)
            except Exception:  # noqa: BLE001 -- a worker must survive anything, even our own bugs
                log.exception("controller %s: internal error handling %s", self.name, request)
            finally:
                with self._metrics_lock:
                    self.metrics.active_workers -= 1
                queue.done(request)

    def _reconcile_handler(self, request: Request, worker: int) -> None:
        key = str(request)
        obs = self._obs
        if obs is not None:
            obs.on_reconcile_start(self.name, key=key, worker=worker)
        start = self.clock.now()
        error: str | None = None
        panicked = False
        terminal = False
        try:
            result = self._reconcile(request)
            if result is None:
                result = Result()
            elif not isinstance(result, Result):
                panicked = True
                error = f"reconciler returned {type(result).__name__}, not Result"
        except TerminalError as exc:
            terminal = True
            error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 -- raising is how a reconciler reports an error
            refused = _read_only(exc)
            if refused is not None:
                terminal = True
                error = str(refused) if refused is exc else f"{type(exc).__name__}: {exc} ({refused})"
                log.warning("controller %s: %s not retried: %s", self.name, key, error)
            else:
                error = f"{type(exc).__name__}: {exc}"
                log.error("controller %s: reconciler error for %s: %s", self.name, key, error,
                          exc_info=log.isEnabledFor(logging.DEBUG))
        duration = self.clock.now() - start

        requeue_after = 0.0
        if error is not None:
            label = (ReconcileResult.TERMINAL if terminal else ReconcileResult.PANIC if panicked
                     else ReconcileResult.ERROR)
            if not terminal:
                self.queue.add_rate_limited(request)
            metric_label = ReconcileResult.ERROR
        elif result.requeue_after > 0:
            requeue_after = result.requeue_after
            self.queue.forget(request)
            self.queue.add_after(request, requeue_after)
            label = metric_label = ReconcileResult.REQUEUE_AFTER
        elif result.requeue:
            self.queue.add_rate_limited(request)
            label = metric_label = ReconcileResult.REQUEUE
        else:
            self.queue.forget(request)
            label = metric_label = ReconcileResult.SUCCESS

        with self._metrics_lock:
            m = self.metrics
            m.reconcile_total[metric_label] += 1
            if error is not None:
                m.reconcile_errors_total += 1
                m.terminal_reconcile_errors_total += terminal
                m.reconcile_panics_total += panicked
        if obs is not None:
            obs.on_reconcile_end(self.name, key=key, worker=worker, duration=duration, result=label,
                                 requeue_after=requeue_after, error=error)


def _read_only(exc: BaseException) -> ReadOnlyError | None:
    """The ``ReadOnlyError`` that ``exc`` is or was raised from (``raise ... from``, the way Go wraps
    with ``%w`` and controller-runtime looks with ``errors.Is``); ``None`` if there is none."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, ReadOnlyError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__
    return None
