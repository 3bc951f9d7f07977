"""The Observer interface the runtime reports to (``runtime → observer ← telemetry``).

Like client-go's workqueue ``MetricsProvider``, the Observer is injected and its default does
nothing: instrumentation costs a method call when nobody listens. Every hook is a plain, fast,
non-blocking call made from the thread that did the work (often while it holds a lock);
implementations must never do I/O inline (the telemetry observer appends to an in-memory buffer
that a publisher thread drains). The runtime calls observers through ``active_observer``: the
no-op default is skipped entirely, and any other observer is guarded so that an exception in a hook
is logged, never raised into the runtime.

Hooks are grouped by the component that calls them. Names (``informer``, ``queue``, ``controller``)
are the human-readable names the dashboard shows; ``key`` is the ``namespace/name`` cache key.
Parameters that take one of a closed set of values are typed with the protocol's enums
(``controllers.schema``): a member *is* its wire string, so an observer may publish it as is.

This module sits between the runtime and telemetry: the runtime packages import it, the telemetry
observer implements it, and it imports neither (only ``controllers.schema``), so the runtime never
depends on how, or whether, its reports are published.
"""

from __future__ import annotations

import logging
from enum import StrEnum
from typing import Any

import orjson

from controllers.schema import (
    ControllerEvent,
    DeltaType,
    ErrorKind,
    FifoOp,
    HandlerCause,
    HandlerEvent,
    HandlerOutcome,
    HandlerProgress,
    LogLevel,
    ObservationMode,
    QueueOp,
    ReconcileResult,
    ReflectorState,
    WatchEndReason,
    WatcherVariant,
    WatchEventType,
    WriteRefusal,
)

log = logging.getLogger("ctrlscope.observer")


class StoreOp(StrEnum):
    """How ``on_store`` says the cache changed. Not a wire name: the cache's topic state is what
    observers publish of it, so this vocabulary ends at the hook."""

    UPSERT = "upsert"
    DELETE = "delete"
    REPLACE = "replace"


class Observer:
    """No-op base: subclass and override the hooks you care about."""

    # -- Informer --------------------------------------------------------------------------
    def on_informer(self, informer: str, *, fifo: str, resync_period: float,
                    scope: dict[str, Any] | None = None) -> None:
        """An informer started: which FIFO model it runs (``DeltaFIFO``) and its resync period; v1.3:
        what narrows it (``scope``: any of ``INFORMER_SCOPE_FIELDS``, only those set)."""

    # -- Reflector -------------------------------------------------------------------------
    def on_list(self, informer: str, *, resource_version: str, items: int, duration: float,
                error: str | None = None) -> None:
        """A LIST (initial list or relist) finished, successfully or not."""

    def on_watch_start(self, informer: str, *, resource_version: str) -> None:
        """A WATCH was opened from ``resource_version``."""

    def on_watch_event(self, informer: str, *, event_type: WatchEventType, key: str,
                       resource_version: str) -> None:
        """A watch event (ADDED/MODIFIED/DELETED) was received and decoded."""

    def on_bookmark(self, informer: str, *, resource_version: str) -> None:
        """A BOOKMARK advanced the reflector's resourceVersion."""

    def on_watch_end(self, informer: str, *, reason: WatchEndReason, error: str | None = None) -> None:
        """A watch ended, and why; ``error`` is the error's text when there was one (an ``error``
        end, a 429)."""

    def on_backoff(self, informer: str, *, delay: float, reason: str) -> None:
        """The reflector is waiting ``delay`` seconds before listing or watching again."""

    def on_reflector_state(self, informer: str, *, state: ReflectorState) -> None:
        """listing / watching / backing-off / relisting; and synced."""

    # -- Store / FIFO ----------------------------------------------------------------------
    def on_store(self, informer: str, *, op: StoreOp, key: str, obj: Any) -> None:
        """The cache changed: ``op`` is ``upsert`` (``obj`` the new object), ``delete`` (``obj`` the
        removed object) or ``replace`` (``key`` empty, ``obj`` the new contents as a list of
        ``(key, object)`` pairs). An informer's cache changes by upsert/delete only: its relists go
        through the DeltaFIFO; ``replace`` comes from a Store a Reflector fills directly."""

    def on_fifo(self, informer: str, *, op: FifoOp, key: str, delta: DeltaType, depth: int) -> None:
        """The FIFO between reflector and store queued or popped a delta."""

    # -- SharedInformer handlers -----------------------------------------------------------
    def on_handler(self, informer: str, *, handler: str, event: HandlerEvent, key: str,
                   outcome: HandlerOutcome, duration: float, error: str | None = None,
                   old: Any = None, new: Any = None, tombstone: bool = False) -> None:
        """An event handler ran; ``outcome`` is ``ok`` or ``error``. ``tombstone``: a delete seen only
        by a relist (client-go's DeletedFinalStateUnknown); ``new`` is then the last known object."""

    # -- Raw watcher (v1.6) ----------------------------------------------------------------
    # A program's own watch loop, not the runtime's: no reflector, no FIFO, no cache. The runtime
    # never calls these; the publisher API (``ProtocolPublisher.watcher``) does, for the loop.
    def on_watcher(self, watcher: str, *, resource: str, namespace: str | None, variant: WatcherVariant) -> None:
        """A raw watch loop started on ``resource`` (``apps/v1/deployments``) in ``namespace``
        (``None``: all), and what it does when its stream ends (``variant``)."""

    def on_watcher_state(self, watcher: str, *, state: ReflectorState) -> None:
        """The loop is ``watching`` (a stream is open, or it is about to open one) or ``stopped``
        (the loop returned or raised: nothing watches any more, whatever the process does next)."""

    def on_watcher_watch_start(self, watcher: str, *, resource_version: str) -> None:
        """The loop opened a watch from ``resource_version`` (``""``: from now, with every existing
        object sent first as ADDED)."""

    def on_watcher_event(self, watcher: str, *, event_type: WatchEventType, key: str, resource_version: str) -> None:
        """The loop received one watch event."""

    def on_watcher_watch_end(self, watcher: str, *, reason: WatchEndReason, error: str | None = None) -> None:
        """The loop's watch stream ended, and why (``expired``: the server answered 410)."""

    def on_watcher_read(self, watcher: str, *, key: str, path: str, code: int, duration: float) -> None:
        """The loop read object ``key`` from the API server (``GET path``, ``code`` 0 without an
        answer): what an informer's handler reads from its cache."""

    # -- Workqueue -------------------------------------------------------------------------
    def on_queue(self, queue: str, *, op: QueueOp, key: str, depth: int,
                 delay: float | None = None, requeues: int | None = None,
                 duration: float | None = None) -> None:
        """A workqueue operation. ``depth`` is the number of keys ready in the FIFO afterwards.

        ``op`` is one of: ``add`` (key queued), ``dedup`` (key already queued or already waiting to
        be re-queued: the add is absorbed), ``defer`` (key is being processed: marked dirty, queued
        again at ``done``), ``get`` (``duration`` = seconds since the first un-processed add),
        ``done`` (``duration`` = seconds since ``get``), ``requeue`` (``done`` put a key that was
        added while processing back in the FIFO), ``add_after`` (``delay`` seconds),
        ``add_rate_limited`` (``delay`` chosen by the rate limiter; ``requeues`` is the key's
        ``num_requeues`` *including* this retry, so 1 on the first one),
        ``forget`` (``requeues`` being cleared), ``shutdown`` (``key`` is empty).
        """

    # -- Controller ------------------------------------------------------------------------
    def on_controller(self, controller: str, *, watches: list[str], workers: int, started: bool,
                      mode: ObservationMode | None = None, unseen: list[str] | None = None,
                      rate_limiter: dict[str, Any] | None = None) -> None:
        """A controller was wired to another informer (``watches``: every informer it watches so
        far) or started (``started``) or stopped its ``workers`` reconcile workers. A controller that
        waits for its caches, or for leadership, has been reported but not started. A controller
        observed from outside its process says so (``mode``) and what that cannot see (``unseen``).
        ``rate_limiter`` describes its workqueue's limiter (a RateLimiterSpec,
        ``workqueue.describe_rate_limiter``), when known."""

    # -- Controller event mapping -----------------------------------------------------------
    def on_event(self, controller: str, *, event: ControllerEvent, key: str, requests: list[str],
                 filtered_by: str | None = None, source: str | None = None, old: Any = None,
                 new: Any = None) -> None:
        """A watched object's event (``create``/``update``/``delete``) reached a controller: either
        a predicate (``filtered_by``) dropped it or the handler mapped it to ``requests``. This is
        the cause that the workqueue's dedup later discards. v1.7: ``source`` names the handler that
        mapped it (``controller/{name} ({role})``), ``new`` is the event's object (a delete's: the
        deleted object) and ``old`` an update's previous one, as the runtime has them: the observer
        reads their resourceVersions and changed fields, and never keeps or changes them."""

    # -- Reconcile -------------------------------------------------------------------------
    def on_reconcile_start(self, controller: str, *, key: str, worker: int, handler: str | None = None,
                           cause: HandlerCause | None = None, retry: int | None = None) -> None:
        """A worker took ``key`` and called Reconcile. Frameworks with per-object handlers (kopf)
        also say which ``handler`` ran, its ``cause`` and ``retry`` (0 on the first attempt)."""

    def on_reconcile_end(self, controller: str, *, key: str, worker: int, duration: float,
                         result: ReconcileResult, requeue_after: float = 0.0,
                         error: str | None = None, handler: str | None = None, cause: HandlerCause | None = None,
                         retry: int | None = None, delay: float | None = None,
                         error_kind: ErrorKind | None = None) -> None:
        """Reconcile returned or raised. ``result`` uses controller-runtime's labels:
        success, error, requeue, requeue_after, terminal (and panic for unexpected exceptions).
        A framework that retries a handler itself says when (``delay`` seconds) and why
        (``error_kind``: a TemporaryError's own delay, a fixed backoff, given up...)."""

    def on_log(self, controller: str, *, key: str, level: LogLevel, message: str,
               handler: str | None = None) -> None:
        """The controller logged ``message`` about object ``key`` (kopf's per-object loggers),
        from inside ``handler`` when it is known."""

    def on_progress(self, controller: str, *, key: str, handler: str, state: HandlerProgress | None,
                    retries: int = 0, next_at: float | None = None, cause: HandlerCause | None = None,
                    error: str | None = None) -> None:
        """One handler's stored progress on object ``key`` (kopf's ``kopf.zalando.org/{handler}``
        annotation or status field) as read from the object: ``state`` ``None`` when the progress
        was removed; ``next_at`` wall ms of a delayed retry."""

    # -- API client ------------------------------------------------------------------------
    def on_request_start(self, *, method: str, path: str, controller: str | None = None) -> None:
        """The API client is about to send a request other than a GET (``on_request`` follows on the
        same thread, whatever comes of it). v1.7's self needs it: the server sends a write's watch
        event and its answer at about the same time, and the event may be handled first."""

    def on_request(self, *, method: str, path: str, code: int, duration: float,
                   controller: str | None = None, rv: str | None = None) -> None:
        """The API client made one request. ``code`` is the HTTP status, 0 when no response came
        (refused, reset, timed out); ``duration`` is seconds until the response headers. Called on
        the requesting thread, so an observer can tell a Reconcile's writes (made on that worker's
        thread, between ``on_reconcile_start`` and ``on_reconcile_end``) from reflector lists.
        An asynchronous caller, whose requests share one thread, names the ``controller`` instead.
        v1.7: ``rv`` is the metadata.resourceVersion of the object the server answered a write with
        (``None``: no object, not JSON, an error status, or not read): how an observer recognises
        that write's watch event coming back."""

    def on_write_refused(self, *, method: str, path: str, reason: WriteRefusal,
                         controller: str | None = None) -> None:
        """The API client refused a write itself (``reason``: the worker is read-only): nothing was
        sent, so this is not ``on_request`` with some code -- a refused write is neither an API write
        nor a failed one. Same thread rule as ``on_request``."""

    def on_secret(self, obj: dict[str, Any]) -> None:
        """The API client read a Secret or a SecretList outside any informer: its
        values are now in this process, so a careful observer masks them wherever they reappear
        (an error text, a log line). Never publish ``obj`` itself."""

    # -- Leader election -------------------------------------------------------------------
    def on_leader(self, name: str, *, identity: str, leader: bool, holder: str | None) -> None:
        """Leadership changed for this process (``leader``) or was observed for ``holder``."""

    # -- Controller-defined status --------------------------------------------------------
    def on_status(self, table: str, *, key: str, value: dict[str, Any] | None) -> None:
        """A controller reports one row of its own live status table (``None`` removes the row),
        e.g. a scoreboard of desired versus actual state. Rows replace each other per key."""


NOOP_OBSERVER = Observer()
"""Shared do-nothing observer: the default everywhere."""


def written_rv(body: bytes | None) -> str | None:
    """``on_request``'s ``rv`` from a 2xx write's response body: the metadata.resourceVersion of the
    object the server answered with (``None``: no body, not JSON, a ``Status``). Here, beside the
    hook, so that every API client of the runtime and of the frameworks reads it alike."""
    if not body:
        return None
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(decoded, dict) or decoded.get("kind") == "Status":
        return None
    rv = (decoded.get("metadata") or {}).get("resourceVersion")
    return rv if isinstance(rv, str) and rv else None


HOOKS = tuple(name for name in vars(Observer) if name.startswith("on_"))
"""Every hook name, in declaration order."""


class GuardedObserver(Observer):
    """Wraps one observer so that an exception in a hook is logged instead of raised into the
    runtime thread that called it (a telemetry bug must never stall a reflector or a worker).

    Hooks the wrapped observer does not override stay the base class's no-ops; the others are
    bound once here, so a guarded call costs one extra frame.
    """

    def __init__(self, inner: Observer) -> None:
        self.inner = inner
        for name in HOOKS:
            method = getattr(inner, name)
            if getattr(method, "__func__", None) is not getattr(Observer, name):
                setattr(self, name, _guarded(method, type(inner).__name__, name))


def _guarded(method: Any, owner: str, name: str) -> Any:
    def hook(*args: Any, **kwargs: Any) -> None:
        try:
            method(*args, **kwargs)
        except Exception:  # noqa: BLE001 -- observers must never break the runtime
            log.exception("observer %s.%s failed", owner, name)
    return hook


class FanoutObserver(Observer):
    """Forwards every hook to several observers (e.g. the telemetry publisher and /metrics), each
    guarded like ``GuardedObserver``: one failing observer neither raises nor starves the others.

    Do-nothing observers are dropped at construction.
    """

    def __init__(self, *observers: Observer | None) -> None:
        self.observers: list[Observer] = [o for o in observers if o is not None and type(o) is not Observer]
        # The hooks at least one of them implements (``listens``): the runtime skips the others
        # on its hot paths, e.g. the Manager's metrics observer takes no informer hook.
        self.listening: frozenset[str] = frozenset(
            name for name in HOOKS if any(listens(o, name) for o in self.observers))


def _fan_out_hook(name: str) -> Any:
    def hook(self: FanoutObserver, *args: Any, **kwargs: Any) -> None:
        for observer in self.observers:
            try:
                getattr(observer, name)(*args, **kwargs)
            except Exception:  # noqa: BLE001 -- observers must never break the runtime
                log.exception("observer %s.%s failed", type(observer).__name__, name)
    return hook


for _hook in HOOKS:
    _method = _fan_out_hook(_hook)
    _method.__name__ = _hook
    _method.__doc__ = getattr(Observer, _hook).__doc__
    setattr(FanoutObserver, _hook, _method)


def listens(observer: Observer | None, hook: str) -> bool:
    """Whether calling ``hook`` on ``observer`` can do anything: false for the do-nothing observer,
    for an observer that inherits ``Observer``'s no-op for that hook, and for a ``FanoutObserver``
    none of whose observers implements it. Hot paths (a reflector's per-event hook, the FIFO's, the
    Store's, a handler's) ask once, at construction, and then skip the call and the work of its
    arguments: with the Manager's default observer (metrics only) an informer event made five
    fanned-out calls that did nothing."""
    if observer is None or type(observer) is Observer:
        return False
    if isinstance(observer, FanoutObserver):
        return hook in observer.listening
    cls = type(observer)
    if cls.__getattribute__ is not object.__getattribute__ or hasattr(cls, "__getattr__"):
        return True  # it may answer any hook dynamically (a recording test observer does)
    # A hook set on the instance (GuardedObserver binds those its inner observer implements) or
    # overridden by its class.
    return hook in getattr(observer, "__dict__", ()) or getattr(cls, hook) is not getattr(Observer, hook)


def active_observer(observer: Observer | None) -> Observer | None:
    """What a runtime component should call: ``None`` for the do-nothing observer (so hot paths can
    skip the call altogether), otherwise the observer guarded against exceptions."""
    if observer is None or type(observer) is Observer:
        return None
    if isinstance(observer, (GuardedObserver, FanoutObserver)):
        return observer
    return GuardedObserver(observer)
