"""Rate limiters: how long a key waits before it is retried (client-go
``util/workqueue/default_rate_limiters.go``).

A limiter answers ``when(key)`` -- the delay for the next retry, counting this as one more failure --,
``num_requeues(key)`` and ``forget(key)`` (the key succeeded: reset its history). Per-key limiters
back off each key on its own; the token bucket limits the retry rate of the whole queue.

``default_controller_rate_limiter()`` is what controller-runtime gives every controller: the slower
of a per-key exponential backoff (5 ms, 10 ms, 20 ms, ... capped at 1000 s) and a global token bucket
(10 retries/s, burst 100). Limiters are shared by all workers, so each keeps its own lock.

``describe_rate_limiter(limiter)`` is what the dashboard is told about a queue's limiter (protocol v1.5, a
RateLimiterSpec in the controller component's ``rate_limiter``): enough to say which part chose each
retry's delay and what the next delay will be.
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any, Protocol

from controllers.clock import Clock, RealClock
from controllers.schema import RateLimiterType


class RateLimiter(Protocol):
    """What a ``RateLimitingQueue`` needs from a limiter."""

    def when(self, item: Hashable) -> float:
        """Seconds ``item`` should wait before its next retry; records one more failure."""

    def forget(self, item: Hashable) -> None:
        """Stop tracking ``item`` (it succeeded or is given up on)."""

    def num_requeues(self, item: Hashable) -> int:
        """How many failures are recorded for ``item``."""


class _PerItemFailures:
    """Failure counts per key, shared by the per-key limiters (one lock: workers call concurrently)."""

    def __init__(self) -> None:
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def _record_failure(self, item: Hashable) -> int:
        """Count one more failure; return how many there were before it."""
        with self._lock:
            before = self._failures.get(item, 0)
            self._failures[item] = before + 1
            return before

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)


class ItemExponentialFailureRateLimiter(_PerItemFailures):
    """Per-key exponential backoff: ``base_delay * 2**failures``, capped at ``max_delay``."""

    def __init__(self, base_delay: float, max_delay: float) -> None:
        super().__init__()
        self.base_delay = base_delay
        self.max_delay = max_delay

    def when(self, item: Hashable) -> float:
        exp = self._record_failure(item)
        # Past ~1000 doublings floats overflow; the cap has long been reached by then.
        if exp > 1000:
            return self.max_delay
        return min(self.base_delay * 2.0 ** exp, self.max_delay)


class ItemFastSlowRateLimiter(_PerItemFailures):
    """Per-key: ``fast_delay`` for the first ``max_fast_attempts`` failures, then ``slow_delay``."""

    def __init__(self, fast_delay: float, slow_delay: float, max_fast_attempts: int) -> None:
        super().__init__()
        self.fast_delay = fast_delay
        self.slow_delay = slow_delay
        self.max_fast_attempts = max_fast_attempts

    def when(self, item: Hashable) -> float:
        attempt = self._record_failure(item) + 1
        return self.fast_delay if attempt <= self.max_fast_attempts else self.slow_delay


class BucketRateLimiter:
    """A global token bucket (``qps`` tokens/s, holding at most ``burst``) shared by all keys.

    Like ``golang.org/x/time/rate``'s ``Reserve().Delay()``: every ``when`` takes a token, going into
    debt if needed, and the delay is the time until that debt is repaid. Keys are not tracked:
    ``num_requeues`` is always 0 and ``forget`` does nothing.
    """

    def __init__(self, qps: float, burst: int, *, clock: Clock | None = None) -> None:
        self.qps = qps
        self.burst = burst
        self.clock: Clock = clock or RealClock()
        self._tokens = float(burst)
        self._last = self.clock.now()
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            now = self.clock.now()
            if now > self._last:
                self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
                self._last = now
            self._tokens -= 1.0
            if self._tokens >= 0:
                return 0.0
            return -self._tokens / self.qps

    def num_requeues(self, item: Hashable) -> int:
        return 0

    def forget(self, item: Hashable) -> None:
        return None


class MaxOfRateLimiter:
    """The worst (longest) delay of several limiters; ``num_requeues`` is their maximum."""

    def __init__(self, *limiters: RateLimiter) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        # Every limiter must record the failure, so no short-circuit.
        return max([limiter.when(item) for limiter in self.limiters])

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)


def default_controller_rate_limiter(*, clock: Clock | None = None) -> MaxOfRateLimiter:
    """controller-runtime's default: max(exponential 5 ms..1000 s per key, bucket 10 qps burst 100)."""
    return MaxOfRateLimiter(
        ItemExponentialFailureRateLimiter(0.005, 1000.0),
        BucketRateLimiter(10.0, 100, clock=clock),
    )


def describe_rate_limiter(limiter: RateLimiter) -> dict[str, Any]:
    """``limiter`` as a RateLimiterSpec (protocol/README.md): its type and parameters, recursively for
    a ``MaxOfRateLimiter``; a limiter of another class is ``other``, named by its class."""
    if isinstance(limiter, ItemExponentialFailureRateLimiter):
        return {"type": RateLimiterType.EXPONENTIAL.value, "base": limiter.base_delay, "max": limiter.max_delay}
    if isinstance(limiter, ItemFastSlowRateLimiter):
        return {"type": RateLimiterType.FAST_SLOW.value, "fast": limiter.fast_delay, "slow": limiter.slow_delay,
                "fast_attempts": limiter.max_fast_attempts}
    if isinstance(limiter, BucketRateLimiter):
        return {"type": RateLimiterType.BUCKET.value, "qps": limiter.qps, "burst": limiter.burst}
    if isinstance(limiter, MaxOfRateLimiter):
        return {"type": RateLimiterType.MAX_OF.value, "of": [describe_rate_limiter(sub) for sub in limiter.limiters]}
    return {"type": RateLimiterType.OTHER.value, "name": type(limiter).__name__}
