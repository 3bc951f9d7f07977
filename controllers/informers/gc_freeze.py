"""Keeping CPython's cyclic GC off informer caches: ``gc.freeze()`` as the cache is written.

Why: a cache of decoded objects is a large, long-lived tree of dicts and lists (~32 GC-tracked
containers per Pod) that can never be cyclic garbage -- reference counting frees what the cache
drops. The generational GC still walks every one of them: once or twice while young, then again in
every full collection. ``gc.freeze()`` moves everything alive into a permanent generation that no
collection walks, in O(1).

Mechanism (one ``CacheFreezer`` per process, shared by every informer that asks for it):

* ``freeze()`` -- what an informer calls once its first LIST is cached -- collects the young
  generations first (so young cyclic garbage is freed, not frozen), then freezes.
* ``wrote(n)`` -- after each batch of cache writes -- freezes again once ``FREEZE_EVERY_WRITES``
  writes have accumulated, process-wide. A fixed count on purpose, not a fraction of the cache:
  between freezes the new objects pile up in the oldest generation, and CPython's rule for a full
  collection ("pending survivors > 1/4 of the survivors of the last full collection") counts only
  unfrozen objects, which after a freeze are almost none. With a cadence of ``len(cache) // 4``
  writes, full collections over everything written since the last freeze ran every few thousand
  events: bench/informer.py with 25,000 Pods cached measured 20-23k events/s, against 38-45k with
  a freeze every 1,000 writes.
* **Thaw.** Frozen objects are still freed by reference counting when the cache drops them, but
  cyclic garbage that was alive at a freeze (an exception's traceback held by a request in flight,
  say) is never collected while frozen. So every ``thaw_interval`` seconds (default 600; 0 never)
  the next freeze first unfreezes and runs one full collection: one pause, proportional to the
  heap (measured ~16 ms per 1,000 cached Pods), which reclaims it.

**Measured and dropped: a raised gen0 threshold.** Young collections still run every 700 net
allocations of GC-tracked objects, walking the Pods in flight. Raising the threshold to 10,000 or
50,000 (``gc.set_threshold``) makes them ~70x rarer, and bench/informer_gc.py saw the GC's share of
the CPU fall from ~10 % to ~3 %; but bench/informer_scale.py, in the same session (2026-12-04, idle
machine), measured the compact cache with a freeze 20-30 % *slower* with gen0 at 50,000 on 5,000
ADDED Pods (17,300 -> 12,300 events/s one chunk per event, 14,600 -> 11,700 in 64 KB chunks), and at
100,000 Pods bench/informer_gc.py itself ran 22,900/s without it, 18,000/s with it: each young
collection then walks tens of thousands of objects that have left the CPU cache, where 700 recent
ones are still in it. So nothing here touches the thresholds.

It changes process-wide GC state: a bare ``SharedInformer`` freezes only when asked
(``freeze_gc_after_sync``); ``SharedInformerFactory`` and the ``Manager``, which own a process's
informers, ask by default (pass ``freeze_gc_after_sync=False`` to keep the GC as the process set it).
"""

from __future__ import annotations

import gc
import threading
from typing import Any

from controllers.clock import Clock, RealClock

FREEZE_EVERY_WRITES = 1000
"""Cache writes, summed over every informer of the process, between two freezes."""

THAW_INTERVAL = 600.0
"""Seconds between full collections of the thawed heap (0: never thaw)."""


class CacheFreezer:
    """``gc.freeze()`` every ``every_writes`` cache writes; unfreeze and collect every ``thaw_interval``."""

    def __init__(self, *, every_writes: int = FREEZE_EVERY_WRITES, thaw_interval: float = THAW_INTERVAL,
                 clock: Clock | None = None) -> None:
        self.every_writes = every_writes
        self.thaw_interval = thaw_interval
        self.clock: Clock = clock or RealClock()
        self._lock = threading.Lock()
        self._writes = 0
        self._last_thaw: float | None = None
        self.freezes = 0
        self.thaws = 0
        self.last_thaw_pause = 0.0

    def wrote(self, n: int) -> None:
        """``n`` more cache writes happened; freeze if enough have since the last freeze."""
        with self._lock:
            self._writes += n
            if self._writes < self.every_writes:
                return
            self._freeze_locked()

    def freeze(self) -> None:
        """Freeze now (thawing first when a thaw is due)."""
        with self._lock:
            self._freeze_locked()

    def _freeze_locked(self) -> None:
        self._writes = 0
        now = self.clock.now()
        if self._last_thaw is None:
            self._last_thaw = now
        elif self.thaw_interval > 0 and now - self._last_thaw >= self.thaw_interval:
            gc.unfreeze()
            gc.collect()
            self.last_thaw_pause = self.clock.now() - now
            self.thaws += 1
            self._last_thaw = now
        # Collect the young generations first so fresh cyclic garbage is freed, not frozen.
        gc.collect(1)
        gc.freeze()
        self.freezes += 1

    def stats(self) -> dict[str, Any]:
        """Counters for snapshots: freezes, thaws, the last thaw's pause, objects frozen now."""
        with self._lock:
            return {"freezes": self.freezes, "thaws": self.thaws, "last_thaw_pause": self.last_thaw_pause,
                    "frozen_objects": gc.get_freeze_count()}


CACHE_FREEZER = CacheFreezer()
"""The process's freezer: every informer with ``freeze_gc_after_sync`` uses it unless given another."""
