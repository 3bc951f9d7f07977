"""The basic workqueue: a FIFO of keys that deduplicates and never hands one key to two workers.

This mirrors client-go ``util/workqueue/queue.go``. Producers (event handlers) ``add`` keys; workers
loop on ``get`` -> do the work -> ``done``. Three structures carry the whole contract:

* ``_queue``: the FIFO of keys ready to be handed out, in order of (first) addition;
* ``_dirty``: every key that needs processing, whether it sits in ``_queue`` or waits for a worker
  to finish with it;
* ``_processing``: every key a worker got with ``get`` and has not yet marked ``done``.

``add`` of a dirty key is absorbed (dedup: ten updates to one object cost one reconcile). ``add`` of a
key being processed only marks it dirty; ``done`` puts it back in the FIFO, so the worker that
handles it next sees the latest state and no two workers ever hold one key at the same time.

After ``shut_down`` new adds are ignored and ``get`` hands out what is left, then reports shutdown.
``shut_down_with_drain`` additionally blocks until every key being processed is ``done``.

Every step is reported to the injected Observer after the queue's state has changed. The default
no-op observer is detected once at construction and skipped entirely, so unobserved queues pay one
attribute test per operation.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Hashable
from typing import Any

from controllers.clock import Clock, RealClock
from controllers.observer import NOOP_OBSERVER, Observer, active_observer
from controllers.schema import QueueItemState, QueueOp


class Queue:
    """A deduplicating FIFO of hashable keys (client-go ``workqueue.Interface``).

    ``add(key)``, ``get() -> (key, shutdown)``, ``done(key)``, ``shut_down()``,
    ``shut_down_with_drain()``, ``shutting_down()``, ``len(queue)``.
    """

    def __init__(self, name: str = "", *, clock: Clock | None = None,
                 observer: Observer | None = None) -> None:
        self.name = name
        self.clock: Clock = clock or RealClock()
        self.observer: Observer = observer or NOOP_OBSERVER
        self._obs = active_observer(observer)
        # Invariant: every element of _queue is in _dirty and not in _processing.
        self._queue: deque[Any] = deque()
        # Invariant: _dirty == set(_queue) | {keys processing that were added again since get}.
        self._dirty: set[Any] = set()
        # Keys handed out by get() and not yet done(); a key is here at most once, so at most one
        # worker holds it.
        self._processing: set[Any] = set()
        # Hot paths use ``with self._lock``: a Condition's ``with`` costs two Python-level calls
        # per use, the bare Lock none; waits and notifies go through ``_cond`` (same lock).
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        # Threads blocked in get(); notify only when someone listens (notify is not free).
        self._getters = 0
        self._shutting_down = False
        self._drain = False
        # Only kept while observed: first add time per dirty key, and get time per processing key.
        self._added_at: dict[Any, float] = {}
        self._started_at: dict[Any, float] = {}

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, item: Hashable) -> None:
        """Mark ``item`` as needing processing."""
        with self._lock:
            self._add_locked(item)

    def _add_locked(self, item: Any) -> None:
        obs = self._obs
        if self._shutting_down:
            return
        if item in self._dirty:
            if obs is not None:
                obs.on_queue(self.name, op=QueueOp.DEDUP, key=str(item), depth=len(self._queue))
            return
        self._dirty.add(item)
        if obs is not None:
            self._added_at[item] = self.clock.now()
        if item in self._processing:
            if obs is not None:
                obs.on_queue(self.name, op=QueueOp.DEFER, key=str(item), depth=len(self._queue))
            return
        self._queue.append(item)
        if self._getters:
            self._cond.notify()
        if obs is not None:
            obs.on_queue(self.name, op=QueueOp.ADD, key=str(item), depth=len(self._queue))

    def get(self) -> tuple[Any, bool]:
        """Block until a key is ready; return ``(key, False)``, or ``(None, True)`` once shut down
        and empty. The caller must call ``done(key)`` when finished with it."""
        with self._lock:
            queue = self._queue
            while not queue and not self._shutting_down:
                self._getters += 1
                try:
                    self._cond.wait()
                finally:
                    self._getters -= 1
            if not queue:
                return None, True
            item = queue.popleft()
            self._processing.add(item)
            self._dirty.discard(item)
            obs = self._obs
            if obs is not None:
                now = self.clock.now()
                self._started_at[item] = now
                added = self._added_at.pop(item, now)
                obs.on_queue(self.name, op=QueueOp.GET, key=str(item), depth=len(queue), duration=now - added)
            return item, False

    def done(self, item: Hashable) -> None:
        """Mark ``item`` as finished; if it was added while processing, queue it again."""
        with self._lock:
            self._processing.discard(item)
            requeue = item in self._dirty
            if requeue:
                self._queue.append(item)
                if self._getters:
                    self._cond.notify()
            elif not self._processing and self._drain:
                self._cond.notify_all()
            obs = self._obs
            if obs is not None:
                now = self.clock.now()
                started = self._started_at.pop(item, now)
                depth = len(self._queue)
                obs.on_queue(self.name, op=QueueOp.DONE, key=str(item), depth=depth - requeue, duration=now - started)
                if requeue:
                    obs.on_queue(self.name, op=QueueOp.REQUEUE, key=str(item), depth=depth)

    def shut_down(self) -> None:
        """Ignore new adds; ``get`` hands out what is queued, then returns shutdown."""
        with self._cond:
            self._drain = False
            self._shut_down_locked()

    def shut_down_with_drain(self) -> None:
        """Like ``shut_down``, then block until every key handed out has been marked ``done``."""
        with self._cond:
            self._drain = True
            self._shut_down_locked()
            while self._processing and self._drain:
                self._cond.wait()

    def _shut_down_locked(self) -> None:
        self._shutting_down = True
        self._cond.notify_all()
        if self._obs is not None:
            self._obs.on_queue(self.name, op=QueueOp.SHUTDOWN, key="", depth=len(self._queue))

    def shutting_down(self) -> bool:
        """True once ``shut_down`` or ``shut_down_with_drain`` was called."""
        with self._cond:
            return self._shutting_down

    def items(self) -> dict[str, dict[str, Any]]:
        """Every key the queue holds, in the protocol's queue item model (``protocol/README.md`` §5.2,
        ``controllers.schema.fold_queue_op``): what the queue topic's state shows for it, folded from
        this queue's records, without ``since`` (when the observer saw the change). A property test
        holds the two to each other. Not for the hot path."""
        with self._lock:
            out = {str(k): {"requeues": 0, "s": QueueItemState.QUEUED.value} for k in self._queue}
            for k in self._processing:
                item: dict[str, Any] = {"requeues": 0, "s": QueueItemState.PROCESSING.value}
                if k in self._dirty:  # added again while processing: queued again at done
                    item["dirty"] = True
                out[str(k)] = item
        return out
