"""DeltaFIFO: the queue between the reflector and the informer's cache (client-go
``tools/cache/delta_fifo.go``).

ctrlscope uses the **DeltaFIFO** model (``FIFO_MODEL``), the one most controllers in production
have run for years; client-go >= 0.33 defaults to RealFIFO, which keeps every notification as its
own entry and turns a relist into one ReplacedAll. The dashboard shows which model runs.

The reflector produces: ``add``/``update``/``delete`` per watch event, ``replace`` after a LIST,
``resync`` on the resync timer. The informer consumes with ``pop``. For every key the FIFO holds a
list of deltas (``Added``, ``Updated``, ``Deleted``, ``Replaced``, ``Sync``) in arrival order; the
key itself is queued once, so a slow consumer sees all of a key's changes together, in order, and
keys in the order they first changed. Deltas are never merged, except that two trailing
``Deleted`` collapse into one.

``replace`` is where lost deletions surface: every key the cache (``known_objects``) or the queue
knows that is missing from the new list gets ``Deleted(DeletedFinalStateUnknown(key, last state))``.

A ``transformer`` (``transform.py``) changes each object as it arrives, before it is keyed: every
add, update, delete and replaced item, never a Sync (already transformed) or a tombstone.

``has_synced`` is true once the first ``replace`` (or add) happened and every item of that initial
population has been popped -- i.e. the cache holds the first LIST.

Like upstream, ``pop`` runs the consumer's callback while holding the FIFO lock: the reflector blocks
meanwhile, so the cache and the FIFO never disagree about a key. ``pop_batch`` (what the informer
uses) does the same for every queued key at once, up to ``POP_BATCH``: per key nothing changes,
but the lock, the wake-up and the hand-over of the GIL are paid once per batch, not once per event.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from controllers.informers.keys import DeletedFinalStateUnknown, KeyFunc, object_key
from controllers.informers.store import Store
from controllers.informers.transform import TransformFunc
from controllers.observer import NOOP_OBSERVER, Observer, active_observer, listens
from controllers.schema import DeltaType, FifoOp

log = logging.getLogger("ctrlscope.informer")

FIFO_MODEL = "DeltaFIFO"

POP_BATCH = 512
"""Most keys one ``pop_batch`` takes: bounds how long the reflector waits on the FIFO lock."""


class Delta(NamedTuple):
    """One change to one object: ``type`` is Added/Updated/Deleted/Replaced/Sync."""

    type: DeltaType
    obj: Any


_new_delta = tuple.__new__
"""Builds a ``Delta`` from a ``(type, obj)`` tuple in C; used once per watch event."""


class FIFOClosedError(Exception):
    """``pop`` on a closed, empty FIFO."""


class DeltaFIFO:
    """Per-key delta lists in a key-deduplicated FIFO, with tombstones on relist."""

    model = FIFO_MODEL

    def __init__(self, name: str = "", *, known_objects: Store | None = None,
                 key_func: KeyFunc = object_key, emit_delta_type_replaced: bool = True,
                 observer: Observer | None = None,
                 on_synced: Callable[[], None] | None = None, transformer: TransformFunc | None = None) -> None:
        self.name = name
        self.key_func = key_func
        self.transformer = transformer
        self.known_objects = known_objects
        # SharedInformer asks for Replaced; the legacy behaviour reports relisted objects as Sync.
        self.emit_delta_type_replaced = emit_delta_type_replaced
        self.observer = observer or NOOP_OBSERVER
        self._obs = active_observer(self.observer)
        # The one hook the FIFO calls per key, or None when nobody listens to it (``listens``).
        self._on_fifo = self._obs.on_fifo if listens(self._obs, "on_fifo") else None
        # Hot paths take ``_lock`` directly: ``with`` on a Condition runs two Python-level calls
        # per use, the bare Lock none. Waiting and notifying still go through ``_cond``.
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # Invariant: a key is in _queue exactly once iff it has a non-empty delta list in _items.
        self._items: dict[str, list[Delta]] = {}
        self._queue: deque[str] = deque()
        # True once the first replace/add/update/delete happened.
        self._populated = False
        # Items of the initial population not yet popped; has_synced when it reaches 0.
        self._initial_population_count = 0
        self._closed = False
        # Threads blocked in pop/pop_batch, and how many of them were notified but have not woken
        # yet: a burst of adds wakes each waiter once instead of calling notify() per add.
        self._poppers = 0
        self._notified = 0
        # Called once, with the FIFO lock held, when has_synced first becomes true. It must not
        # call back into the FIFO.
        self._on_synced = on_synced
        self._synced_reported = False

    def __len__(self) -> int:
        return len(self._queue)

    # -- producers (the reflector) -------------------------------------------------------------
    def add(self, obj: Any) -> None:
        if self.transformer is not None and (obj := self._transform(obj, "add")) is None:
            return
        with self._lock:
            self._populated = True
            self._queue_action(DeltaType.ADDED, obj)

    def update(self, obj: Any) -> None:
        if self.transformer is not None and (obj := self._transform(obj, "update")) is None:
            return
        with self._lock:
            self._populated = True
            self._queue_action(DeltaType.UPDATED, obj)

    def _transform(self, obj: Any, what: str) -> Any:
        """``transformer(obj)``, or None (logged) when it raises: the event is lost, as client-go
        loses a watch event its store could not add."""
        try:
            return self.transformer(obj)  # type: ignore[misc]
        except Exception:  # noqa: BLE001 -- user code must not end the watch
            try:
                key = self.key_func(obj)
            except Exception:  # noqa: BLE001 -- the object the transform choked on may have no key
                key = "an object without a key"
            log.exception("informer %s: the transform failed on an %s of %s; the event is dropped",
                          self.name, what, key)
            return None

    def delete(self, obj: Any) -> None:
        """Queue a deletion, unless neither the cache nor the queue knows the key (already gone)."""
        if (self.transformer is not None and type(obj) is not DeletedFinalStateUnknown
                and (obj := self._transform(obj, "delete")) is None):
            return
        key = self.key_func(obj)
        with self._lock:
            self._populated = True
            known = self.known_objects is not None and key in self.known_objects
            if not known and key not in self._items:
                return
            self._queue_action(DeltaType.DELETED, obj)

    def replace(self, objs: Iterable[Any], resource_version: str = "") -> None:
        """A LIST result: queue Replaced for each object and tombstones for the missing keys."""
        action = DeltaType.REPLACED if self.emit_delta_type_replaced else DeltaType.SYNC
        if self.transformer is not None:
            # Before the lock, all or nothing: a raising transform fails the whole LIST (the
            # reflector backs off and relists) and leaves the FIFO as it was.
            objs = [self.transformer(obj) for obj in objs]
        with self._cond:
            keys: set[str] = set()
            for obj in objs:
                keys.add(self.key_func(obj))
                self._queue_action(action, obj)
            queued_deletions = 0
            for key, deltas in list(self._items.items()):
                if key in keys:
                    continue
                last = deltas[-1].obj
                if type(last) is DeletedFinalStateUnknown:
                    last = last.obj
                queued_deletions += 1
                self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, last))
            if self.known_objects is not None:
                for key in self.known_objects.list_keys():
                    if key in keys or self._items.get(key):
                        continue
                    last = self.known_objects.get_by_key(key)
                    if last is None:
                        continue
                    queued_deletions += 1
                    self._queue_action(DeltaType.DELETED, DeletedFinalStateUnknown(key, last))
            if not self._populated:
                self._populated = True
                self._initial_population_count = len(keys) + queued_deletions
            self._report_synced()

    def _report_synced(self) -> None:
        if not self._synced_reported and self._populated and self._initial_population_count == 0:
            self._synced_reported = True
            if self._on_synced is not None:
                self._on_synced()

    def resync(self) -> None:
        """Queue a Sync delta for every cached key that has no pending deltas."""
        if self.known_objects is None:
            return
        with self._cond:
            for key in self.known_objects.list_keys():
                if self._items.get(key):
                    continue
                obj = self.known_objects.get_by_key(key)
                if obj is not None:
                    self._queue_action(DeltaType.SYNC, obj)

    def _queue_action(self, delta_type: DeltaType, obj: Any) -> None:
        key = self.key_func(obj)
        deltas = self._items.get(key)
        if deltas is None:
            # _new_delta(...) == Delta(delta_type, obj), minus NamedTuple's Python-level __new__.
            self._items[key] = [_new_delta(Delta, (delta_type, obj))]
            self._queue.append(key)
        else:
            if delta_type is DeltaType.DELETED and deltas[-1].type is DeltaType.DELETED:
                # The only compression: two trailing deletions collapse, keeping the one that
                # knows the final state (a tombstone loses to a real Deleted).
                if type(obj) is not DeletedFinalStateUnknown:
                    deltas[-1] = Delta(DeltaType.DELETED, obj)
            else:
                deltas.append(_new_delta(Delta, (delta_type, obj)))
        if self._poppers > self._notified:
            self._notified += 1
            self._cond.notify()
        if not self._synced_reported:
            self._report_synced()
        if self._on_fifo is not None:
            self._on_fifo(self.name, op=FifoOp.QUEUED, key=key, delta=delta_type, depth=len(self._queue))

    # -- consumer (the informer) ---------------------------------------------------------------
    def pop(self, process: Callable[[list[Delta], bool], None]) -> list[Delta]:
        """Block until a key is queued, then call ``process(deltas, is_in_initial_list)`` with the
        lock held and return the deltas. Raises ``FIFOClosedError`` once closed and empty."""
        with self._lock:
            while not self._queue:
                if self._closed:
                    raise FIFOClosedError(self.name)
                self._wait_for_keys()
            key = self._queue.popleft()
            is_initial = self._initial_population_count > 0
            if is_initial:
                self._initial_population_count -= 1
            deltas = self._items.pop(key)
            if self._on_fifo is not None:
                self._on_fifo(self.name, op=FifoOp.POPPED, key=key, delta=deltas[-1].type,
                                  depth=len(self._queue))
            process(deltas, is_initial)
            if is_initial:
                self._report_synced()
            return deltas

    def pop_batch(self, process: Callable[[list[tuple[str, list[Delta], bool]]], None],
                  max_keys: int = POP_BATCH) -> int:
        """``pop`` for up to ``max_keys`` keys at once: block until a key is queued, take every
        queued key (in queue order, at most ``max_keys``), then call ``process(batch)`` once with
        the lock held, ``batch`` being ``[(key, deltas, is_in_initial_list), ...]``. Returns the number
        of keys popped; raises ``FIFOClosedError`` once closed and empty.

        Why: at tens of thousands of events/s, taking the lock, waking the consumer and handing
        the GIL over once per key cost as much as the cache work itself. Per key the semantics
        are exactly ``pop``'s: each key's deltas are popped whole, in queue order, observed as
        ``popped``, and processed before the reflector can queue anything else. ``process`` must
        not raise (it loses the rest of the batch); the informer guards each key itself."""
        with self._lock:
            queue = self._queue
            while not queue:
                if self._closed:
                    raise FIFOClosedError(self.name)
                self._wait_for_keys()
            items = self._items
            on_fifo = self._on_fifo
            batch: list[tuple[str, list[Delta], bool]] = []
            initial = False
            for _ in range(min(len(queue), max_keys)):
                key = queue.popleft()
                is_initial = self._initial_population_count > 0
                if is_initial:
                    self._initial_population_count -= 1
                    initial = True
                deltas = items.pop(key)
                if on_fifo is not None:
                    on_fifo(self.name, op=FifoOp.POPPED, key=key, delta=deltas[-1].type, depth=len(queue))
                batch.append((key, deltas, is_initial))
            process(batch)
            if initial:
                self._report_synced()
            return len(batch)

    def _wait_for_keys(self) -> None:
        # Called with the lock held and the queue empty.
        self._poppers += 1
        try:
            self._cond.wait()
        finally:
            self._poppers -= 1
            # Woken by an add (or by close's notify_all, which adds no count): never let the
            # count of pending wake-ups exceed the waiters left.
            self._notified = max(0, min(self._notified - 1, self._poppers))

    def has_synced(self) -> bool:
        """True once the initial population has been popped."""
        with self._cond:
            return self._populated and self._initial_population_count == 0

    def close(self) -> None:
        """Wake blocked ``pop`` calls; they raise once the queue is empty."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def list_keys(self) -> list[str]:
        """Keys with pending deltas, in queue order."""
        with self._cond:
            return list(self._queue)

    def pending(self, key: str) -> list[Delta]:
        """A copy of the deltas pending for ``key`` (for the dashboard)."""
        with self._cond:
            return list(self._items.get(key, ()))
