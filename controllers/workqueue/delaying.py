"""A workqueue that can add a key later (client-go ``util/workqueue/delaying_queue.go``).

``add_after(key, delay)`` with ``delay <= 0`` is a plain ``add``. Otherwise the key waits in a
min-heap ordered by ready time. One key waits at most once: adding it again with an *earlier* ready
time moves it forward, a later one is ignored (so a backoff never postpones a key that is already
due sooner).

A waiting-loop thread, started by the constructor like upstream's goroutine, sleeps on the injected
clock until the earliest ready time (or a 10 s heartbeat), then moves every due key into the FIFO
with ``add`` -- where the usual dedup rules apply. With a ``FakeClock`` a test steps time and the
loop reacts; nothing sleeps for real.

Superseded heap entries are not removed from the heap (that would be O(n)); ``_waiting`` maps each
key to its live entry and the loop skips the stale ones.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from collections.abc import Hashable
from typing import Any

from controllers.clock import Clock
from controllers.observer import Observer
from controllers.schema import QueueItemState, QueueOp
from controllers.workqueue.queue import Queue

HEARTBEAT = 10.0
"""Upper bound on how long the waiting loop sleeps without re-checking (upstream: 10 s)."""


class DelayingQueue(Queue):
    """A ``Queue`` with ``add_after(key, delay)``."""

    def __init__(self, name: str = "", *, clock: Clock | None = None,
                 observer: Observer | None = None) -> None:
        super().__init__(name, clock=clock, observer=observer)
        # Guards the heap; lock order is _wcond -> _cond (the loop calls add while holding it).
        self._wcond = threading.Condition(threading.Lock())
        # Heap of [ready_at, seq, key]; seq keeps equal ready times FIFO and never compares keys.
        self._heap: list[list[Any]] = []
        # Invariant: key -> its live heap entry; an entry not referenced here is stale.
        self._waiting: dict[Any, list[Any]] = {}
        self._seq = itertools.count()
        self._stopped = False
        self._loop = threading.Thread(target=self._waiting_loop, name=f"delaying-queue-{name}", daemon=True)
        self._loop.start()

    def add_after(self, item: Hashable, delay: float) -> None:
        """Add ``item`` once ``delay`` seconds have passed on the queue's clock."""
        if self._shutting_down:
            return
        if delay <= 0:
            self.add(item)
            return
        if self._obs is not None:
            self._obs.on_queue(self.name, op=QueueOp.ADD_AFTER, key=str(item), depth=len(self._queue), delay=delay)
        self._schedule(item, delay)

    def _schedule(self, item: Any, delay: float) -> None:
        if delay <= 0:
            self.add(item)
            return
        with self._wcond:
            if self._stopped:
                return
            ready_at = self.clock.now() + delay
            entry = self._waiting.get(item)
            if entry is not None and entry[0] <= ready_at:
                return
            new = [ready_at, next(self._seq), item]
            self._waiting[item] = new
            heapq.heappush(self._heap, new)
            if self._heap[0] is new:
                self._wcond.notify()

    def _waiting_loop(self) -> None:
        with self._wcond:
            while not self._stopped:
                now = self.clock.now()
                heap = self._heap
                while heap and heap[0][0] <= now:
                    entry = heapq.heappop(heap)
                    item = entry[2]
                    if self._waiting.get(item) is entry:
                        del self._waiting[item]
                        self.add(item)
                while heap and self._waiting.get(heap[0][2]) is not heap[0]:
                    heapq.heappop(heap)
                timeout = min(heap[0][0] - now, HEARTBEAT) if heap else HEARTBEAT
                self.clock.wait(self._wcond, timeout)

    def shut_down(self) -> None:
        self._stop_loop()
        super().shut_down()

    def shut_down_with_drain(self) -> None:
        self._stop_loop()
        super().shut_down_with_drain()

    def _stop_loop(self) -> None:
        with self._wcond:
            self._stopped = True
            self._wcond.notify_all()

    def waiting(self) -> list[tuple[Any, float]]:
        """Keys waiting for their ready time, soonest first, with seconds left (for the dashboard)."""
        with self._wcond:
            now = self.clock.now()
            return sorted(((k, e[0] - now) for k, e in self._waiting.items()), key=lambda kv: kv[1])

    def items(self) -> dict[str, dict[str, Any]]:
        """``Queue.items`` plus the keys waiting for their ready time (``ready_at``, wall ms)."""
        out = super().items()
        wall_ms = self.clock.wall() * 1000
        for key, left in self.waiting():
            item = out.setdefault(str(key), {"requeues": 0, "s": QueueItemState.WAITING.value})
            item["ready_at"] = wall_ms + left * 1000
        return out
