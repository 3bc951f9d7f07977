"""Giving the memory daphne freed back to the system: ``malloc_trim(0)`` every few seconds.

CPython hands every allocation over 512 bytes to the C library's ``malloc``, and the dashboard's big
allocations are transient: frames of ~30 KB on a busy topic, a slow tab's buffer dropped at once
(up to ``session.MAX_PENDING_BYTES`` a subscription) when it is resynced, a ``snapshot.json`` read of
a large cache (tens of MB, in a worker thread and so in that thread's arena). glibc keeps what is
freed in its arenas for reuse and gives pages back on its own only from the top of the main heap
and from whole heaps of the other arenas, so a heap with anything live near its top keeps every
free page below it resident. daphne's RSS then follows the highest total ever in flight at once,
not what it holds: in the 60-minute soak of 2026-12-07 it rose 209 → 261 MiB after warm-up and
stayed there. In the next run its arenas had 143 MB from the system with 72 MB in use (one thread
arena: 20.7 MB, 0.2 MB in use), and one ``malloc_trim(0)`` (from gdb) took its RSS 229 → 195 MiB;
at the end of that run they had 150 MB with 30 MB in use, and a trim took it 217 → 129 MiB.

``malloc_trim(0)`` gives back the free pages anywhere in every arena (``madvise``), not only at the
top. It holds each arena's lock while it walks it, ~2–16 ms for a ~100 MB heap on a loaded
2-core machine, so it runs in a daemon thread of its own, not on the event loop. Every
``CTRLSCOPE_MALLOC_TRIM_S`` seconds (10; 0 turns it off). Where the C library has no
``malloc_trim`` (musl, macOS) nothing runs. The same is what ``MALLOC_ARENA_MAX`` and
``MALLOC_TRIM_THRESHOLD_`` are set for in many Python services; those must be set before the
process starts, this works from inside it.
"""

from __future__ import annotations

import ctypes
import logging
import math
import threading
from collections.abc import Callable, Mapping

log = logging.getLogger(__name__)

ENV = "CTRLSCOPE_MALLOC_TRIM_S"
DEFAULT_INTERVAL_S = 10.0


def interval_from_env(environ: Mapping[str, str]) -> float:
    """Seconds between trims from ``CTRLSCOPE_MALLOC_TRIM_S`` (unset or empty: the default; 0: off).
    Raises ValueError, naming the variable, for anything but a number ≥ 0."""
    raw = environ.get(ENV, "").strip()
    if not raw:
        return DEFAULT_INTERVAL_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r}: expected seconds between trims (a number, 0 turns it off)") from None
    if not (math.isfinite(value) and value >= 0):
        raise ValueError(f"{ENV}={raw!r}: expected a finite number of seconds ≥ 0 (0 turns it off)")
    return value


def libc_malloc_trim() -> Callable[[], int] | None:
    """The process's ``malloc_trim(0)`` (1 when it gave memory back), or None where there is none."""
    try:
        fn = ctypes.CDLL(None).malloc_trim  # the C library this process runs on
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return lambda: fn(0)


class MallocTrimmer:
    """Calls ``trim`` every ``interval`` seconds in a daemon thread until ``stop``. ``wait`` is the
    clock: ``wait(seconds)`` returns True to stop (a ``threading.Event``'s ``wait`` by default)."""

    def __init__(self, interval: float, trim: Callable[[], int], wait: Callable[[float], bool] | None = None) -> None:
        if interval <= 0:
            raise ValueError("interval must be > 0")
        self.interval = interval
        self.trim = trim
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None
        self.trims = 0  # calls made
        self.released = 0  # calls that gave memory back

    def start(self) -> MallocTrimmer:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ctrlscope-malloc-trim", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._wait(self.interval) and not self._stop.is_set():
            try:
                gave_back = self.trim()
            except Exception:  # never take the process down for this
                log.exception("malloc_trim failed; no more trims in this process")
                return
            self.trims += 1
            self.released += bool(gave_back)


_started: MallocTrimmer | None = None
_lock = threading.Lock()


def start(interval: float) -> MallocTrimmer | None:
    """Starts the process's one trimmer (again: the same one), unless ``interval`` is 0 or the C
    library has no ``malloc_trim``."""
    global _started
    with _lock:
        if _started is None and interval > 0:
            trim = libc_malloc_trim()
            if trim is None:
                log.info("no malloc_trim in this C library: freed memory is left to the allocator")
                return None
            _started = MallocTrimmer(interval, trim).start()
        return _started
