"""SharedInformer: one cache per resource, shared by many event handlers (client-go
``tools/cache/shared_informer.go``).

Pipeline, one thread per stage::

    Reflector thread --add/update/delete/replace/resync--> DeltaFIFO
    informer thread  --pop_batch--> update the Store (cache) --> notifications to every handler's buffer
    one thread per handler --> on_add / on_update / on_delete

Throughput (bench/informer.py) is decided by per-event overhead and by the cyclic GC, so:

* The informer thread takes every queued key in one ``DeltaFIFO.pop_batch`` (same per-key
  semantics as ``pop``) and appends the batch's notifications to each handler's buffer in one lock
  round-trip: one wake-up per batch instead of one per event.
* The Store keeps objects JSON-encoded (``cache="compact"``, see ``store.py``) unless
  ``freeze_gc_after_sync`` is set, when it keeps the decoded dicts (``cache="decoded"``); ``cache``
  picks either explicitly. An update's ``old`` object is buffered as the Store entry (bytes in
  the compact cache) and reaches ``on_update`` as a ``LazyObject`` (``lazy_object.py``), decoded
  on the handler's thread the first time the handler reads it: a handler that never reads
  ``old`` (an enqueue of ``new``'s key) pays no decode, and the decoded copy never waits in
  buffers, where the GC would walk it and promote it.
* Only the hooks an observer implements are called (``observer.listens``): the Manager's
  default observer (metrics) costs an informer event nothing.

Rules this keeps (and the dashboard shows):

* Each handler has its own unbounded buffer and thread: a slow handler never blocks the cache or
  other handlers, and nothing is dropped for backpressure. Per handler, calls are one at a time and
  in order; there is no order across handlers.
* Handlers return nothing and are never retried. One that raises loses that notification's side
  effect; upstream crashes the process, we log it, count it and report it to the observer.
* The cache is updated *before* handlers hear about a change, so a handler reading the cache sees
  the new state or a newer one -- the handler sees a subsequence of the object's states. ``old`` is
  the last cached state, not the server's previous one. Objects deleted while disconnected arrive
  as a ``DeletedFinalStateUnknown`` tombstone.
* ``old`` in ``on_update(old, new)``: with the compact cache a ``LazyObject`` -- a read-only
  ``Mapping`` equal to the previous cached object, decoded on first read; ``old.object`` /
  ``decoded(old)`` is the ``dict`` itself (``lazy_object.py`` has the whole contract). With the
  decoded cache, the previous cached dict itself. ``new`` is always the dict. Observers'
  ``on_handler`` get ``old`` decoded, as before.
* Resync (``resync_period`` > 0) re-delivers every cached object as ``on_update(obj, obj)`` to the
  handlers whose resync is due. A relist (Replaced) of an unchanged object counts as a resync too.
  Resync never talks to the API server.
* ``has_synced`` becomes true once the first LIST is in the cache. Handlers added after start first
  receive the whole cache as ``on_add`` calls.
* With ``freeze_gc_after_sync`` the informer has the process's ``CacheFreezer`` (``gc_freeze.py``)
  call ``gc.freeze()`` once synced and again every 1,000 cache writes (counted over all informers),
  and thaw for one full collection every 10 minutes: the cyclic GC stops re-walking the cache and
  the rest of the heap. Unless ``cache`` says otherwise the cache then holds decoded dicts
  (``compact=False``): once frozen they cost the GC nothing, and no write or read pays for
  encoding or decoding, at ~4x the memory per cached object of the JSON-bytes cache.
  It is process-wide, so a bare informer freezes only when asked; ``SharedInformerFactory`` and
  the ``Manager`` ask by default.

What narrows an informer (``scope``, published with ``on_informer`` and shown on its pipeline card):
its namespace, label and field selectors and metadata-only mode come from its ``ListWatch`` (the
server does that filtering), its ``transform`` (``transform.py``) runs in the DeltaFIFO before
anything is cached or handled.

The FIFO model is DeltaFIFO (``fifo_model``); the observer learns it from ``on_informer``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from controllers.clock import Clock, RealClock
from controllers.informers.delta_fifo import Delta, DeltaFIFO, FIFOClosedError
from controllers.informers.gc_freeze import CACHE_FREEZER, CacheFreezer
from controllers.informers.keys import DeletedFinalStateUnknown, object_key, resource_version
from controllers.informers.lazy_object import LazyObject, decoded
from controllers.informers.listwatch import ListWatch
from controllers.informers.reflector import MIN_WATCH_TIMEOUT, Reflector
from controllers.informers.store import CacheMode, IndexFunc, Store, decode_entry
from controllers.informers.transform import TransformFunc, describe_transform
from controllers.observer import NOOP_OBSERVER, Observer, active_observer, listens
from controllers.schema import DeltaType, HandlerEvent, HandlerOutcome, ReflectorState, informer_scope_fields

log = logging.getLogger("ctrlscope.informer")

AddFunc = Callable[[Any], None]
UpdateFunc = Callable[[Any, Any], None]
DeleteFunc = Callable[[Any], None]


def informer_scope(list_watch: Any, transform: TransformFunc | None) -> dict[str, Any]:
    """What narrows an informer, as the protocol's optional ``informer`` fields (v1.3): only those
    set. Read from the list/watch (``KubernetesListWatch`` has ``namespace``, ``options``,
    ``metadata_only``; a test fake may have none) and the transform."""
    options = getattr(list_watch, "options", None)
    return informer_scope_fields({
        "namespace": getattr(list_watch, "namespace", None),
        "label_selector": getattr(options, "label_selector", None),
        "field_selector": getattr(options, "field_selector", None),
        "metadata_only": getattr(list_watch, "metadata_only", False),
        "transform": describe_transform(transform),
    })


def _func_name(*funcs: Callable[..., Any] | None) -> str:
    for f in funcs:
        if f is not None:
            return getattr(f, "__qualname__", None) or repr(f)
    return "handler"


class HandlerRegistration:
    """One handler's buffer and thread (client-go ``processorListener``); returned by
    ``add_event_handler`` and accepted by ``remove_event_handler``."""

    def __init__(self, informer: str, name: str, on_add: AddFunc | None, on_update: UpdateFunc | None,
                 on_delete: DeleteFunc | None, resync_period: float, *, clock: Clock,
                 observer: Observer) -> None:
        self.informer = informer
        self.name = name
        self.on_add = on_add
        self.on_update = on_update
        self.on_delete = on_delete
        self.resync_period = resync_period
        self.next_resync = 0.0
        self.clock = clock
        self.observer = observer
        # None unless someone listens to ``on_handler``: then calls go out untimed, in one loop.
        obs = active_observer(observer)
        self._obs = obs if listens(obs, "on_handler") else None
        # ``with self._lock`` on the hot path (a Condition's ``with`` costs two Python calls).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # Unbounded on purpose: upstream never drops a notification for backpressure.
        self._buffer: deque[tuple[HandlerEvent, Any, Any]] = deque()
        # The batch being delivered; only the handler thread touches it.
        self._batch: deque[tuple[HandlerEvent, Any, Any]] = deque()
        self._waiting = False
        self._stopped = False
        self.delivered = 0
        self.errors = 0
        self._thread = threading.Thread(target=self._run, name=f"handler-{informer}-{name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def add(self, event: HandlerEvent, old: Any, new: Any) -> None:
        """Buffer one notification (called by the informer thread)."""
        with self._lock:
            self._buffer.append((event, old, new))
            if self._waiting:
                # Clear it here so the rest of a burst does not notify again.
                self._waiting = False
                self._cond.notify()

    def add_many(self, notifications: list[tuple[HandlerEvent, Any, Any]]) -> None:
        """Buffer several notifications, in order, in one lock round-trip (one informer batch)."""
        with self._lock:
            self._buffer.extend(notifications)
            if self._waiting:
                # Clear it here so the rest of a burst does not notify again.
                self._waiting = False
                self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def pending(self) -> int:
        """Notifications buffered and not yet delivered (the dashboard shows a slow handler here)."""
        return len(self._buffer) + len(self._batch)

    def _run(self) -> None:
        # Take everything buffered in one lock round-trip, then deliver without the lock.
        while True:
            with self._cond:
                while not self._buffer and not self._stopped:
                    self._waiting = True
                    self._cond.wait()
                    self._waiting = False
                if self._stopped:
                    return
                self._batch, self._buffer = self._buffer, self._batch
            if self._obs is None:
                self._deliver_unobserved()
                continue
            batch = self._batch
            deliver = self._deliver
            while batch and not self._stopped:
                event, old, new = batch.popleft()
                deliver(event, old, new)

    def _deliver_unobserved(self) -> None:
        """``_deliver`` for the whole batch with nobody observing: the same calls in the same
        order, without per-call timing and reporting (the common case in production)."""
        batch = self._batch
        on_add, on_update, on_delete = self.on_add, self.on_update, self.on_delete
        pop = batch.popleft
        while batch and not self._stopped:
            event, old, new = pop()
            try:
                if event is HandlerEvent.UPDATE:
                    if on_update is not None:
                        # The compact cache's previous entry, decoded only if the handler reads it.
                        on_update(LazyObject(old) if type(old) is bytes else old, new)
                elif event is HandlerEvent.ADD:
                    if on_add is not None:
                        on_add(new)
                elif on_delete is not None:
                    on_delete(new)
            except Exception:  # noqa: BLE001 -- a failing handler must not stop the informer
                self.errors += 1
                log.exception("informer %s: handler %s failed on %s", self.informer, self.name, event)
            self.delivered += 1

    def _deliver(self, event: HandlerEvent, old: Any, new: Any) -> None:
        obs = self._obs
        start = self.clock.now() if obs is not None else 0.0
        error = None
        try:
            if event is HandlerEvent.UPDATE:
                # The informer buffers the old object as its Store entry (see _apply): decoded
                # once, when the handler or else the observer (below) first reads it.
                if type(old) is bytes:
                    old = LazyObject(old)
                if self.on_update is not None:
                    self.on_update(old, new)
            elif event is HandlerEvent.ADD:
                if self.on_add is not None:
                    self.on_add(new)
            elif self.on_delete is not None:
                self.on_delete(new)
        except Exception as exc:  # noqa: BLE001 -- a failing handler must not stop the informer
            self.errors += 1
            error = f"{type(exc).__name__}: {exc}"
            log.exception("informer %s: handler %s failed on %s", self.informer, self.name, event)
        self.delivered += 1
        if obs is not None:
            # A delete whose final state was missed (a relist after a gap) reaches handlers as a
            # DeletedFinalStateUnknown tombstone: observers get the last known object and the flag.
            tombstone = type(new) is DeletedFinalStateUnknown
            obs.on_handler(self.informer, handler=self.name, event=event, key=object_key(new),
                           outcome=HandlerOutcome.OK if error is None else HandlerOutcome.ERROR, duration=self.clock.now() - start,
                           error=error, old=decoded(old), new=new.obj if tombstone else new, tombstone=tombstone)


class SharedInformer:
    """A Reflector, a DeltaFIFO and an indexed Store, fanned out to any number of handlers."""

    fifo_model = DeltaFIFO.model

    def __init__(self, list_watch: ListWatch, *, name: str = "", resync_period: float = 0.0,
                 indexers: dict[str, IndexFunc] | None = None, clock: Clock | None = None,
                 observer: Observer | None = None, freeze_gc_after_sync: bool = False,
                 gc_freezer: CacheFreezer | None = None, min_watch_timeout: float = MIN_WATCH_TIMEOUT,
                 transform: TransformFunc | None = None, cache: CacheMode | str | None = None) -> None:
        self.name = name or list_watch.describe()
        self.list_watch = list_watch
        self.resync_period = resync_period
        self.clock: Clock = clock or RealClock()
        self.observer: Observer = observer or NOOP_OBSERVER
        self._obs = active_observer(self.observer)
        self.freeze_gc_after_sync = freeze_gc_after_sync
        self._freezer = (gc_freezer or CACHE_FREEZER) if freeze_gc_after_sync else None
        self.cache_mode = CacheMode.resolve(cache, CacheMode.for_gc_policy(freeze_gc_after_sync))
        self.indexer = Store(self.name, indexers=indexers, observer=self.observer,
                             compact=self.cache_mode is CacheMode.COMPACT)
        self.fifo = DeltaFIFO(self.name, known_objects=self.indexer, observer=self.observer,
                              on_synced=self._mark_synced, transformer=transform)
        self.reflector = Reflector(list_watch, self.fifo, name=self.name, clock=self.clock,
                                   observer=self.observer, resync_period=resync_period,
                                   should_resync=self._should_resync, min_watch_timeout=min_watch_timeout)
        # Held while deltas are processed and while a handler is added, so a new handler gets
        # exactly the cache as Adds followed by every later change.
        self._block = threading.Lock()
        self._handlers: list[HandlerRegistration] = []
        self._syncing: list[HandlerRegistration] = []
        self._sync_cond = threading.Condition(threading.Lock())
        self._synced = False
        self._started = False
        self._stopped = False
        self._threads: list[threading.Thread] = []

    @property
    def transform(self) -> TransformFunc | None:
        return self.fifo.transformer

    def set_transform(self, transform: TransformFunc | None) -> None:
        """Transform every object before it is cached (client-go ``SetTransform``): only before start."""
        with self._block:
            if self._started:
                raise RuntimeError(f"informer {self.name} has already started: set its transform before")
            self.fifo.transformer = transform

    @property
    def scope(self) -> dict[str, Any]:
        """What narrows this informer (``informer_scope``)."""
        return informer_scope(self.list_watch, self.fifo.transformer)

    @property
    def store(self) -> Store:
        """The cache (client-go ``GetStore``/``GetIndexer``)."""
        return self.indexer

    # -- handlers ------------------------------------------------------------------------------
    def add_event_handler(self, *, on_add: AddFunc | None = None, on_update: UpdateFunc | None = None,
                          on_delete: DeleteFunc | None = None, name: str | None = None,
                          resync_period: float | None = None) -> HandlerRegistration:
        """Register a handler. After start it first receives the cache as ``on_add`` calls.

        ``resync_period`` defaults to the informer's and cannot be shorter than it.
        """
        if not self.resync_period:
            period = 0.0  # the reflector only checks for resync at the informer's period
        elif resync_period is None:
            period = self.resync_period
        else:
            period = max(resync_period, self.resync_period) if resync_period > 0 else 0.0
        reg = HandlerRegistration(self.name, name or _func_name(on_add, on_update, on_delete), on_add, on_update,
                                  on_delete, period, clock=self.clock, observer=self.observer)
        reg.next_resync = self.clock.now() + period
        with self._block:
            self._handlers.append(reg)
            if self._started:
                for obj in self.indexer.list():
                    reg.add(HandlerEvent.ADD, None, obj)
            reg.start()
        return reg

    def remove_event_handler(self, reg: HandlerRegistration) -> None:
        """Stop delivering to ``reg``; pending notifications are dropped."""
        with self._block:
            if reg in self._handlers:
                self._handlers.remove(reg)
            if reg in self._syncing:
                self._syncing.remove(reg)
        reg.stop()

    @property
    def handlers(self) -> list[HandlerRegistration]:
        with self._block:
            return list(self._handlers)

    def _should_resync(self) -> bool:
        with self._block:
            now = self.clock.now()
            self._syncing = [h for h in self._handlers if h.resync_period > 0 and now >= h.next_resync]
            for h in self._syncing:
                h.next_resync = now + h.resync_period
            return bool(self._syncing)

    # -- sync ----------------------------------------------------------------------------------
    def has_synced(self) -> bool:
        """True once the first LIST has been processed into the cache."""
        return self._synced

    def _mark_synced(self) -> None:
        with self._sync_cond:
            self._synced = True
            self._sync_cond.notify_all()
        if self._obs is not None:
            self._obs.on_reflector_state(self.name, state=ReflectorState.SYNCED)
        if self._freezer is not None:
            self._freezer.freeze()

    def wait_for_sync(self, timeout: float) -> bool:
        """Block up to ``timeout`` seconds (on the informer's clock) for ``has_synced``."""
        with self._sync_cond:
            deadline = self.clock.now() + timeout
            while not self._synced and not self._stopped:
                left = deadline - self.clock.now()
                if left <= 0:
                    break
                self.clock.wait(self._sync_cond, left)
            return self._synced

    @property
    def last_sync_resource_version(self) -> str:
        return self.reflector.last_sync_resource_version

    def snapshot(self) -> dict[str, Any]:
        """The informer's state for a dashboard snapshot (not for the hot path)."""
        return {
            "name": self.name,
            "fifo": self.fifo_model,
            "synced": self._synced,
            "resource_version": self.reflector.last_sync_resource_version,
            "reflector_state": self.reflector.state,
            "lists": self.reflector.lists,
            "watch_list": self.reflector.use_watch_list,
            "cache_size": len(self.indexer),
            "fifo_depth": len(self.fifo),
            "resync_period": self.resync_period,
            "scope": self.scope,
            "gc_freezer": self._freezer.stats() if self._freezer is not None else None,
            "handlers": [{"name": h.name, "pending": h.pending(), "delivered": h.delivered, "errors": h.errors}
                         for h in self.handlers],
        }

    # -- lifecycle -----------------------------------------------------------------------------
    def run(self) -> None:
        """Start the reflector and process deltas until ``stop``. Blocks."""
        with self._block:
            if self._started:
                raise RuntimeError(f"informer {self.name} already started")
            self._started = True
        if self._obs is not None:
            self._obs.on_informer(self.name, fifo=self.fifo_model, resync_period=self.resync_period,
                                  scope=self.scope or None)
        reflector = threading.Thread(target=self.reflector.run, name=f"reflector-{self.name}", daemon=True)
        reflector.start()
        self._threads.append(reflector)
        while True:
            try:
                self.fifo.pop_batch(self._process_batch)
            except FIFOClosedError:
                return
            except Exception:  # noqa: BLE001 -- e.g. a raising observer; keep the cache flowing
                log.exception("informer %s: processing deltas failed", self.name)

    def start(self) -> None:
        """``run`` on a background thread."""
        t = threading.Thread(target=self.run, name=f"informer-{self.name}", daemon=True)
        self._threads.append(t)
        t.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the reflector, the delta processing and every handler thread."""
        self._stopped = True
        self.reflector.stop()
        self.fifo.close()
        with self._sync_cond:
            self._sync_cond.notify_all()
        for h in self.handlers:
            h.stop()
        for t in self._threads:
            t.join(timeout)

    def _process_batch(self, batch: list[tuple[str, list[Delta], bool]]) -> None:
        """Apply a ``DeltaFIFO.pop_batch`` batch to the cache, then hand its notifications to
        every handler in one buffer append per handler (one lock round-trip and at most one
        wake-up per handler per batch, instead of one per notification)."""
        # (event, old, new, is_sync) in processing order.
        notes: list[tuple[HandlerEvent, Any, Any, bool]] = []
        with self._block:
            for key, deltas, _ in batch:
                try:
                    self._apply(key, deltas, notes)
                except Exception:  # noqa: BLE001 -- one bad key (raising indexer) must not stall the rest
                    log.exception("informer %s: processing deltas failed", self.name)
            self._distribute(notes)
        if self._freezer is not None:
            self._freezer.wrote(len(notes))

    def _apply(self, key: str, deltas: list[Delta], notes: list[tuple[HandlerEvent, Any, Any, bool]]) -> None:
        indexer = self.indexer
        for delta_type, obj in deltas:
            if delta_type is DeltaType.DELETED:
                indexer.delete(obj)  # not remove(key): that would decode the dropped entry
                notes.append((HandlerEvent.DELETE, None, obj, False))
                continue
            # ``old`` stays encoded: each handler gets it as a LazyObject, decoded on its own
            # thread only if it reads it, so no informer-thread time is spent on it and no
            # decoded copy sits in buffers (where the GC would walk it).
            old = indexer.upsert_entry(key, obj)
            if old is None:
                notes.append((HandlerEvent.ADD, None, obj, False))
                continue
            is_sync = delta_type is DeltaType.SYNC or (
                delta_type is DeltaType.REPLACED and resource_version(decode_entry(old)) == resource_version(obj))
            notes.append((HandlerEvent.UPDATE, old, obj, is_sync))

    def _distribute(self, notes: list[tuple[HandlerEvent, Any, Any, bool]]) -> None:
        if not notes:
            return
        if not any(note[3] for note in notes):
            # The common case: no resync in this batch, every handler gets everything.
            plain = [(event, old, new) for event, old, new, _ in notes]
            for h in self._handlers:
                h.add_many(plain)
            return
        # A resync (or an unchanged relisted object) goes only to the handlers due for resync.
        syncing = self._syncing
        for h in self._handlers:
            due = h in syncing
            mine = [(event, old, new) for event, old, new, sync in notes if due or not sync]
            if mine:
                h.add_many(mine)
