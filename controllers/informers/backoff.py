"""The reflector's backoff (client-go ``wait.NewExponentialBackoffManager`` as the reflector
configures it): 0.8 s, doubling, capped at 30 s, each delay stretched by up to 100 % jitter, and back
to 0.8 s once two minutes pass without a backoff.

Jitter spreads a fleet of informers that lost the same API server over time instead of letting them
relist in lockstep. The clock and the random source are injected for tests.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from controllers.clock import Clock, RealClock


class Backoff:
    """Exponential backoff with jitter, a cap, and a reset after a quiet period."""

    def __init__(self, *, initial: float = 0.8, factor: float = 2.0, cap: float = 30.0, jitter: float = 1.0,
                 reset_after: float = 120.0, clock: Clock | None = None,
                 rand: Callable[[], float] = random.random) -> None:
        self.initial = initial
        self.factor = factor
        self.cap = cap
        self.jitter = jitter
        self.reset_after = reset_after
        self.clock: Clock = clock or RealClock()
        self.rand = rand
        self._duration = initial
        self._last = self.clock.now()

    def next(self) -> float:
        """The next delay to wait, in seconds."""
        now = self.clock.now()
        if now - self._last > self.reset_after:
            self._duration = self.initial
        self._last = now
        delay = self._duration
        self._duration = min(self._duration * self.factor, self.cap)
        if self.jitter > 0:
            delay += self.rand() * self.jitter * delay
        return delay
