"""The fault proxy's ``FaultBackend``: what a proxy in front of a real API server can break.

Everything that travels through the proxy is the proxy's to break: error rates, latency and stalls
(the shared rules), the watches it forwards (ended or dropped), and the resourceVersions clients
resume from (``Compaction``: 410 on a watch from before the compaction point). Killing pods is an
ordinary API call, made with the upstream's credentials: the upstream's authorization decides, and
only in the one namespace the fault names (an empty namespace -- every namespace, ``kube-system``
too -- is refused on a real cluster).

What needs the cluster's insides is the simulator's alone, and ``unsupported`` says so: a real
cluster's kubelets are not the proxy's to pause, and a reset that deletes every object is never
what anyone wants of a real cluster.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from controllers.clock import Clock, RealClock
from controllers.faultproxy.upstream import ApiAnswer, Upstream, UpstreamError
from controllers.faultproxy.watches import CloseReason, Compaction, ForwardedWatch
from controllers.faults.status import FaultFailed, FaultRequestError, Unsupported
from controllers.faults.vocabulary import Capability

UNSUPPORTED: Mapping[Capability, str] = MappingProxyType({
    Capability.KUBELET: "a real cluster's kubelets are not the fault proxy's to pause: only the simulator's kubelet "
                        "can be paused",
    Capability.RESET: "the fault proxy never deletes a real cluster's objects: only the simulator resets "
                      "(clear errors and latency instead)",
})


class ProxyFaultBackend:
    """The ``FaultBackend`` of a fault proxy: its forwarded watches, its compaction point, its upstream."""

    name = "fault proxy"
    unsupported = UNSUPPORTED

    def __init__(self, upstream: Upstream, watches: set[ForwardedWatch], compaction: Compaction, *,
                 clock: Clock | None = None) -> None:
        self.upstream = upstream
        self.watches = watches
        self.compaction = compaction
        self.clock: Clock = clock or RealClock()

    def wall_time(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.clock.wall()))

    def resource_version(self) -> str:
        # The upstream's RV changes with every write anywhere; the proxy only knows its compaction point.
        return "" if self.compaction.rv is None else str(self.compaction.rv)

    def close_watches(self, *, abort: bool) -> int:
        watches = list(self.watches)
        for w in watches:
            w.close(CloseReason.DROP if abort else CloseReason.END)
        return len(watches)

    async def compact(self) -> str:
        """Mark the upstream's newest resourceVersion, read off a one-item list (an RV of the whole store)."""
        answer = await self._api("GET", "/api/v1/namespaces?limit=1", "read the upstream's resourceVersion")
        rv = answer.get("metadata", {}).get("resourceVersion", "")
        try:
            self.compaction.mark(int(rv))
        except ValueError:
            raise FaultFailed(502, f"the upstream's resourceVersion {rv[:40]!r} is not a number: the fault proxy "
                                   "cannot tell older ones from newer ones") from None
        return str(self.compaction.rv)

    def kubelet_paused(self) -> bool:
        return False

    def pause_kubelet(self, paused: bool) -> None:
        raise Unsupported(UNSUPPORTED[Capability.KUBELET])

    async def kill_pods(self, count: int, namespace: str | None, rng: random.Random) -> list[str]:
        if not namespace:
            raise FaultRequestError("on a real cluster the fault proxy kills pods in one namespace only: name it")
        ns = quote(namespace, safe="")
        pods = await self._api("GET", f"/api/v1/namespaces/{ns}/pods", f"list the pods in {namespace}")
        alive = sorted(p["metadata"]["name"] for p in pods.get("items") or []
                       if not p.get("metadata", {}).get("deletionTimestamp"))
        killed = []
        for name in rng.sample(alive, min(count, len(alive))):
            answer = await self._call("DELETE", f"/api/v1/namespaces/{ns}/pods/{quote(name, safe='')}",
                                      {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0})
            if answer.status < 300:
                killed.append(f"{namespace}/{name}")
            elif answer.status != 404:  # gone already: not killed by us, not a failure either
                raise FaultFailed(answer.status, f"the upstream refused to delete pod {namespace}/{name}: "
                                                 f"{_message(answer.body)} (killed before that: {killed or 'none'})")
        return killed

    def reset(self) -> None:
        raise Unsupported(UNSUPPORTED[Capability.RESET])

    # ---- the upstream, as the kubeconfig's user -------------------------------------------------

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> ApiAnswer:
        try:
            return await self.upstream.api(method, path, body)
        except UpstreamError as exc:
            raise FaultFailed(502, str(exc)) from None

    async def _api(self, method: str, path: str, what: str) -> dict[str, Any]:
        answer = await self._call(method, path)
        if answer.status != 200 or not isinstance(answer.body, dict):
            raise FaultFailed(answer.status if answer.status >= 400 else 502,
                              f"the upstream refused to {what}: {_message(answer.body)}")
        return answer.body


def _message(body: object) -> str:
    if isinstance(body, dict) and body.get("message"):
        return str(body["message"])[:300]
    return "no Status message"
