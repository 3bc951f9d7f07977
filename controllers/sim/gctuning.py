"""Keep CPython's cyclic garbage collector from pausing the simulated cluster.

The store holds every object as plain JSON dicts and lists, plus a long watch history: hundreds of
thousands of container objects that can never form reference cycles (refcounting frees them). Yet
each full (generation 2) collection walks all of them; measured with 30k pods and 50 watchers, full
collections paused the event loop for up to ~470 ms — every watcher's delivery latency at once.

``GcFreezer`` periodically calls ``gc.freeze()``, which moves everything alive into a permanent
generation that collections skip, so a collection only scans what was allocated since. The cost is
that cyclic garbage among frozen objects (an aiohttp request that was in flight at the moment of
freezing, say) is not reclaimed until the next *thaw*: every ``thaw_interval`` seconds the freezer
unfreezes, runs one full collection (one pause, rare) and freezes again. The same technique is what
DESIGN.md recommends for the runtime's informer caches (``gc.freeze()`` after sync).

It changes process-wide GC state, so it is meant for a process dedicated to the simulator
(``run_server``, the benchmark), not for a SimCluster embedded in a test process.
"""

from __future__ import annotations

import asyncio
import gc

from controllers.sim.background import BackgroundLoop


class GcFreezer(BackgroundLoop):
    """Freeze the GC's view of long-lived objects every ``freeze_interval`` seconds."""

    def __init__(self, *, freeze_interval: float = 1.0, thaw_interval: float = 300.0) -> None:
        self.freeze_interval = freeze_interval
        self.thaw_interval = thaw_interval

    async def _run(self) -> None:
        gc.collect()
        gc.freeze()
        since_thaw = 0.0
        try:
            while True:
                await asyncio.sleep(self.freeze_interval)
                since_thaw += self.freeze_interval
                if since_thaw >= self.thaw_interval:
                    gc.unfreeze()
                    gc.collect()
                    since_thaw = 0.0
                gc.freeze()
        finally:
            gc.unfreeze()
