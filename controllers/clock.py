"""Injectable clocks.

Every time-dependent class in ``controllers`` takes a ``Clock`` so that delays, backoffs and batching
intervals are tested with a ``FakeClock`` instead of sleeping (client-go does the same with
``k8s.io/utils/clock``). ``now()`` is monotonic seconds; ``wall()`` is Unix time for display only.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    """What the runtime needs from time."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""

    def wall(self) -> float:
        """Seconds since the Unix epoch, for timestamps shown to people."""

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock's time."""


class RealClock:
    """The process clock."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class FakeClock:
    """A clock that only moves when a test calls ``step``.

    Threads blocked in ``sleep`` wake once ``step`` has moved time past their deadline, so a test
    can drive a background thread deterministically: step, then wait for the effect.
    """

    def __init__(self, start: float = 1000.0, wall_offset: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_offset
        self._cond = threading.Condition()
        self._sleepers = 0

    def now(self) -> float:
        with self._cond:
            return self._now

    def wall(self) -> float:
        return self.now() + self._wall_offset

    def sleep(self, seconds: float) -> None:
        with self._cond:
            deadline = self._now + seconds
            self._sleepers += 1
            try:
                while self._now < deadline:
                    self._cond.wait()
            finally:
                self._sleepers -= 1

    def step(self, seconds: float) -> None:
        """Advance time and wake every sleeper whose deadline has passed."""
        with self._cond:
            self._now += seconds
            self._cond.notify_all()

    def has_waiters(self) -> bool:
        """True while some thread is blocked in ``sleep`` (client-go's ``HasWaiters``)."""
        with self._cond:
            return self._sleepers > 0
