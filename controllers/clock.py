"""Injectable clocks.

Every time-dependent class in ``controllers`` takes a ``Clock`` so that delays, backoffs and batching
intervals are tested with a ``FakeClock`` instead of sleeping (client-go does the same with
``k8s.io/utils/clock``). ``now()`` is monotonic seconds; ``wall()`` is Unix time for display only.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol


class Clock(Protocol):
    """What the runtime needs from time."""

    def now(self) -> float:
        """Monotonic seconds; only differences are meaningful."""

    def wall(self) -> float:
        """Seconds since the Unix epoch, for timestamps shown to people."""

    def sleep(self, seconds: float) -> None:
        """Block the calling thread for ``seconds`` of this clock's time."""

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        """Wait on ``cond`` (held by the caller) until notified or ``timeout`` of this clock's time
        has passed. Like ``Condition.wait`` it may return early: callers re-check their predicate."""


def wall_ms(clock: Clock) -> float:
    """``clock``'s wall time in milliseconds, to the microsecond: the unit every telemetry timestamp
    (``ts``, presence ``seen``, stream ids) is in."""
    return round(clock.wall() * 1000, 3)


class RealClock:
    """The process clock."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        cond.wait(timeout)


class FakeClock:
    """A clock that only moves when a test calls ``step``.

    Threads blocked in ``sleep`` or in a timed ``wait`` wake once ``step`` has moved time past their
    deadline, so a test can drive a background thread deterministically: step, then wait for the
    effect. ``wait_for_waiters`` lets a test first make sure the thread is parked on this clock.
    """

    def __init__(self, start: float = 1000.0, wall_offset: float = 1_700_000_000.0) -> None:
        self._now = start
        self._wall_offset = wall_offset
        self._cond = threading.Condition()
        self._sleepers = 0
        # Timed ``wait`` callers: (deadline, their condition). ``step`` notifies the due ones after
        # releasing its own lock, so the lock order is always caller's condition -> clock lock.
        # Sleepers register with ``None`` (they wait on the clock's own condition).
        self._timed: list[tuple[float, threading.Condition | None]] = []

    def now(self) -> float:
        with self._cond:
            return self._now

    def wall(self) -> float:
        return self.now() + self._wall_offset

    def sleep(self, seconds: float) -> None:
        with self._cond:
            deadline = self._now + seconds
            entry = (deadline, None)
            self._timed.append(entry)
            self._sleepers += 1
            self._cond.notify_all()
            try:
                while self._now < deadline:
                    self._cond.wait()
            finally:
                self._timed.remove(entry)
                self._sleepers -= 1

    def wait(self, cond: threading.Condition, timeout: float | None) -> None:
        if timeout is None:
            cond.wait()
            return
        if timeout <= 0:
            return
        with self._cond:
            entry = (self._now + timeout, cond)
            self._timed.append(entry)
            self._sleepers += 1
            self._cond.notify_all()
        try:
            # ``step`` needs ``cond`` to notify us and we hold it until ``cond.wait`` releases it,
            # so a step between registering and waiting cannot be lost.
            cond.wait()
        finally:
            with self._cond:
                self._timed.remove(entry)
                self._sleepers -= 1
                self._cond.notify_all()

    def step(self, seconds: float) -> None:
        """Advance time and wake every sleeper and timed waiter whose deadline has passed."""
        with self._cond:
            self._now += seconds
            due = [c for deadline, c in self._timed if deadline <= self._now and c is not None]
            self._cond.notify_all()
        for c in due:
            with c:
                c.notify_all()

    def wait_for_waiters(self, count: int = 1, timeout: float = 5.0) -> bool:
        """Block (real time, at most ``timeout`` s) until ``count`` threads are parked on this clock
        with a deadline still in the future -- i.e. they have reacted to the last ``step``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while sum(1 for d, _ in self._timed if d > self._now) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def has_waiters(self) -> bool:
        """True while some thread is blocked in ``sleep`` or a timed ``wait`` (client-go's ``HasWaiters``)."""
        with self._cond:
            return self._sleepers > 0


class StopSignal:
    """A stop flag whose timed waits run on a ``Clock``: ``wait(seconds)`` returns early when
    ``stop`` is called, so a background loop's pauses (backoffs, retry periods) end at once on
    shutdown and move with a ``FakeClock`` in tests."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._cond = threading.Condition(threading.Lock())
        self.stopped = False

    def stop(self) -> None:
        with self._cond:
            self.stopped = True
            self._cond.notify_all()

    def wait(self, seconds: float) -> bool:
        """Wait ``seconds`` of clock time; True if they passed, False if stopped meanwhile."""
        with self._cond:
            deadline = self.clock.now() + seconds
            while not self.stopped:
                left = deadline - self.clock.now()
                if left <= 0:
                    return True
                self.clock.wait(self._cond, left)
            return False


class BackgroundThread:
    """One daemon thread running a loop that pauses with ``stop_signal.wait``: ``start`` runs
    ``target`` on it, ``stop`` sets the signal (the loop's current pause ends at once) and joins."""

    def __init__(self, target: Callable[[], None], *, name: str, clock: Clock) -> None:
        self.stop_signal = StopSignal(clock)
        self._target = target
        self._name = name
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._target, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self.stop_signal.stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
