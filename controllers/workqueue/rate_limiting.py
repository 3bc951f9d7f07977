"""A delaying workqueue that asks a rate limiter how long to wait (client-go
``util/workqueue/rate_limiting_queue.go``).

``add_rate_limited(key)`` is ``add_after(key, limiter.when(key))``: each call records one more failure
for the key, so its next delay grows. ``forget(key)`` clears that history -- it does *not* remove the
key from the queue -- and is what a controller calls after a successful reconcile.
``num_requeues(key)`` is the count the dashboard shows per key ("why is this key retrying?").
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from controllers.clock import Clock
from controllers.observer import Observer
from controllers.schema import QueueOp
from controllers.workqueue.delaying import DelayingQueue
from controllers.workqueue.rate_limiters import RateLimiter, default_controller_rate_limiter


class RateLimitingQueue(DelayingQueue):
    """A ``DelayingQueue`` with ``add_rate_limited``, ``forget`` and ``num_requeues``."""

    def __init__(self, name: str = "", *, rate_limiter: RateLimiter | None = None,
                 clock: Clock | None = None, observer: Observer | None = None) -> None:
        super().__init__(name, clock=clock, observer=observer)
        self.rate_limiter: RateLimiter = rate_limiter or default_controller_rate_limiter(clock=self.clock)

    def add_rate_limited(self, item: Hashable) -> None:
        """Add ``item`` after the delay its rate limiter chooses (one more failure recorded)."""
        delay = self.rate_limiter.when(item)
        if self._obs is not None:
            self._obs.on_queue(self.name, op=QueueOp.ADD_RATE_LIMITED, key=str(item), depth=len(self._queue),
                               delay=delay, requeues=self.rate_limiter.num_requeues(item))
        self._schedule(item, delay)

    def forget(self, item: Hashable) -> None:
        """Clear ``item``'s failure history; its next ``add_rate_limited`` starts from scratch."""
        if self._obs is not None:
            self._obs.on_queue(self.name, op=QueueOp.FORGET, key=str(item), depth=len(self._queue),
                               requeues=self.rate_limiter.num_requeues(item))
        self.rate_limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        """How many times ``item`` has been rate-limited since it was last forgotten."""
        return self.rate_limiter.num_requeues(item)

    def items(self) -> dict[str, dict[str, Any]]:
        """``DelayingQueue.items`` with each key's NumRequeues (controller-runtime #686 asks for
        exactly this). Keys only the rate limiter remembers (``idle`` in a queue topic's state) are
        not listed: rate limiters do not enumerate their keys."""
        out = super().items()
        with self._cond:
            keys = {str(k): k for k in self._dirty | self._processing}
        with self._wcond:
            keys.update((str(k), k) for k in self._waiting)
        for name, item in out.items():
            if name in keys:
                item["requeues"] = self.rate_limiter.num_requeues(keys[name])
        return out
