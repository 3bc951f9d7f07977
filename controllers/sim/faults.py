"""The simulator's side of fault injection: what only a cluster that owns its store can do.

ctrlscope exists to show how controllers cope, so the simulator produces on demand the failures a
real cluster produces occasionally. The fault model -- rules, the fault log, the ``/_sim/`` HTTP
API -- is ``controllers.faults``, shared with the fault proxy that breaks real clusters the same
way; this module is the simulator's ``FaultBackend``, the part that reaches into the simulated
cluster itself:

* closing watches: every ``Watcher`` in the store, cleanly (the client re-watches from its last RV)
  or by aborting its connection;
* compacting: the store forgets its history, so a watch from an older RV gets 410 Expired;
* its kubelet paused or resumed; random pods deleted at once (grace period 0);
* reset: every object deleted and the defaults seeded again (``SimCluster._reset``).

It can do every fault in the vocabulary, so ``unsupported`` is empty.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

from controllers.faults.vocabulary import Capability
from controllers.sim.errors import StatusError
from controllers.sim.store import Store, rfc3339
from controllers.sim.watch import CloseReason

if TYPE_CHECKING:
    from controllers.sim.kubelet import Kubelet


class SimFaultBackend:
    """The ``FaultBackend`` of the simulated cluster (``store``, ``kubelet``, and how to reset it)."""

    name = "simulator"
    unsupported: Mapping[Capability, str] = MappingProxyType({})

    def __init__(self, store: Store, kubelet: Kubelet, *, reset: Callable[[], None] | None = None) -> None:
        self.store = store
        self.kubelet = kubelet
        self._reset_cluster = reset

    def wall_time(self) -> str:
        return rfc3339(self.store.clock.wall())

    def resource_version(self) -> str:
        return str(self.store.rv)

    def close_watches(self, *, abort: bool) -> int:
        watchers = self.store.all_watchers()
        for w in watchers:
            w.close(CloseReason.ABORT if abort else CloseReason.CLEAN)
        return len(watchers)

    async def compact(self) -> str:
        return str(self.store.compact())

    def kubelet_paused(self) -> bool:
        return self.kubelet.paused

    def pause_kubelet(self, paused: bool) -> None:
        if paused:
            self.kubelet.pause()
        else:
            self.kubelet.resume()

    async def kill_pods(self, count: int, namespace: str | None, rng: random.Random) -> list[str]:
        rt = self.store.registry.storage_type(("", "pods"))
        assert rt is not None
        pods = [o for (ns, _), o in sorted(self.store.bucket(rt.key).objects.items())
                if (not namespace or ns == namespace) and not o["metadata"].get("deletionTimestamp")]
        killed = []
        for pod in rng.sample(pods, min(count, len(pods))):
            meta = pod["metadata"]
            try:
                self.store.delete(rt, meta.get("namespace"), meta["name"], grace_period=0)
                killed.append(f"{meta.get('namespace')}/{meta['name']}")
            except StatusError:
                pass
        return killed

    def reset(self) -> None:
        self.kubelet.resume()
        for w in self.store.all_watchers():
            w.close(CloseReason.CLEAN)
        if self._reset_cluster is not None:
            self._reset_cluster()
