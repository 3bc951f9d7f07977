"""``FaultInjector``: the active fault rules, the fault log, and every fault as one recorded action.

Whoever serves the Kubernetes API -- the simulator, or the fault proxy in front of a real API
server -- owns one injector and consults it on every request it serves:

* ``await before_request(verb, resource)`` sleeps the latency a rule adds and returns the
  ``InjectedError`` an error rule rolled (a seeded RNG: a run is reproducible), which the server
  answers instead of serving the request;
* ``stall_until`` / ``await hold()``: during a network stall every response and every watch write
  waits, nothing is closed -- what a client sees of a network that silently stopped delivering.

The rest is the fault API's actions (``FaultEndpoints`` calls them for ``/_sim/``, tests may call
them directly). Each validates first -- a ``FaultRequestError`` changes nothing -- then takes
effect, then is recorded: one event dict ``{"type": "fault", "fault", "params", "time",
"resourceVersion", "by"}`` appended to ``events`` (the newest ``MAX_EVENTS``) and passed to the
optional ``on_fault`` callback, so the telemetry layer can publish it next to the controller
activity it provokes. ``by`` is who asked (the request's ``ACTOR_HEADER``: the dashboard's
signed-in user, a scenario's name; a label for the log, not a proof), passed explicitly so that no
await between two requests can mix them up. The callback runs on the server's event loop right
after the fault took effect: it must not block (``FaultTelemetry`` only appends to memory), and it
may call ``rules()`` to see the rules the fault left active.

What only the cluster itself can do is the ``FaultBackend``'s: close its watches, compact its
history, pause its kubelet, kill pods, reset. A backend that cannot do one names it in
``unsupported`` with the reason, and the action raises ``Unsupported`` with that reason before
anything changes.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from controllers.faults.status import FaultRequestError, InjectedError, Unsupported
from controllers.faults.vocabulary import MAX_EVENTS, MAX_STALL, VERBS, Capability, Fault

FaultHook = Callable[[dict[str, Any]], None]
MAX_LATENCY_MS = 3_600_000.0
# A rule's resource: a lowercase plural as the API server's request info names it (``pods``,
# ``deployments``, a CRD's plural), or ``*``.
_RESOURCE = re.compile(r"\*|[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
# Error codes the API server answers with its own reason; the rest keep the table's (or none).
_RETRY_REASONS = {429: "TooManyRequests", 503: "ServiceUnavailable", 504: "Timeout"}


class FaultBackend(Protocol):
    """What only the cluster behind the fault API can do (the simulator's store and kubelet, or the
    fault proxy's forwarded watches and the upstream's credentials)."""

    name: str
    """What serves the fault API, for people: ``simulator``, ``fault proxy``."""
    unsupported: Mapping[Capability, str]
    """Each capability this backend lacks, with the reason a person reads."""

    def wall_time(self) -> str:
        """Now, as RFC 3339 (the fault record's ``time``)."""
        ...

    def resource_version(self) -> str:
        """The cluster's newest resourceVersion as far as the backend knows ("" if it cannot tell)."""
        ...

    def close_watches(self, *, abort: bool) -> int:
        """End every open watch, cleanly or by aborting its connection; how many there were."""
        ...

    async def compact(self) -> str:
        """Forget the history: a watch from an older resourceVersion gets 410; the compacted RV."""
        ...

    def kubelet_paused(self) -> bool: ...

    def pause_kubelet(self, paused: bool) -> None: ...

    async def kill_pods(self, count: int, namespace: str | None, rng: random.Random) -> list[str]:
        """Delete up to ``count`` random pods (chosen with ``rng``); ``namespace/name`` of each killed."""
        ...

    def reset(self) -> None:
        """Delete every object and end every watch (the injector has cleared its rules already)."""
        ...


class FaultInjector:
    """Active fault rules, the fault log and the fault actions over one ``FaultBackend``."""

    def __init__(self, backend: FaultBackend, *, seed: int = 0, on_fault: FaultHook | None = None) -> None:
        self.backend = backend
        self.rng = random.Random(seed)
        self.on_fault = on_fault
        self.events: deque[dict[str, Any]] = deque(maxlen=MAX_EVENTS)
        # (verb, resource) → (probability, status code); "*" matches anything.
        self.errors: dict[tuple[str, str], tuple[float, int]] = {}
        # (verb, resource) → seconds added before the request is served.
        self.latency: dict[tuple[str, str], float] = {}
        # A network stall: until this event-loop time every API response and watch write waits.
        self.stall_until = 0.0

    # ---- the request hook --------------------------------------------------------------------

    @staticmethod
    def _rule(rules: dict[tuple[str, str], Any], verb: str, resource: str) -> Any:
        for key in ((verb, resource), (verb, "*"), ("*", resource), ("*", "*")):
            if key in rules:
                return rules[key]
        return None

    def stalled_for(self) -> float:
        """Seconds the current network stall still lasts (0 without one); on the event loop."""
        if not self.stall_until:
            return 0.0
        return max(0.0, self.stall_until - asyncio.get_running_loop().time())

    async def hold(self) -> None:
        """Wait out a network stall: what the client sees is a connection on which nothing arrives.
        Returns at once without one; the stall may be extended or ended (``stall``) meanwhile."""
        while self.stall_until:
            left = self.stall_until - asyncio.get_running_loop().time()
            if left <= 0:
                self.stall_until = 0.0
                return
            await asyncio.sleep(min(left, 0.05))

    async def before_request(self, verb: str, resource: str) -> InjectedError | None:
        """Delay a request as the latency rules say; the error to answer it with, if a rule fires."""
        if self.latency:
            delay = self._rule(self.latency, verb, resource)
            if delay:
                await asyncio.sleep(delay)
        if self.errors:
            rule = self._rule(self.errors, verb, resource)
            if rule is not None and self.rng.random() < rule[0]:
                code = rule[1]
                return InjectedError(code, f"injected fault: {verb} {resource} failed ({code})",
                                     _RETRY_REASONS.get(code))
        return None

    def rules(self) -> dict[str, Any]:
        """The active rules, as ``GET /_sim/faults`` and the ``on_fault`` listeners see them."""
        return {"errors": [{"verb": v, "resource": r, "rate": p, "code": c} for (v, r), (p, c) in self.errors.items()],
                "latency": [{"verb": v, "resource": r, "ms": s * 1000} for (v, r), s in self.latency.items()],
                "kubeletPaused": self.backend.kubelet_paused(), "stalledFor": round(self.stalled_for(), 3)}

    # ---- the log -----------------------------------------------------------------------------

    def record(self, fault: Fault, *, by: str = "", **params: Any) -> dict[str, Any]:
        event = {"type": "fault", "fault": fault.value, "params": params, "time": self.backend.wall_time(),
                 "resourceVersion": self.backend.resource_version()}
        if by:
            event["by"] = by
        self.events.append(event)
        if self.on_fault is not None:
            self.on_fault(event)
        return event

    def require(self, capability: Capability) -> None:
        """Raise ``Unsupported`` (with the backend's reason) unless the backend can do ``capability``."""
        why = self.backend.unsupported.get(capability)
        if why is not None:
            raise Unsupported(why)

    # ---- the faults --------------------------------------------------------------------------

    def close_watches(self, *, abort: bool, by: str = "") -> int:
        count = self.backend.close_watches(abort=abort)
        self.record(Fault.DROP_WATCHES if abort else Fault.END_WATCHES, by=by, count=count)
        return count

    async def compact(self, *, by: str = "") -> str:
        self.require(Capability.COMPACT)
        rv = await self.backend.compact()
        self.record(Fault.COMPACT, by=by, compactedResourceVersion=rv)
        return rv

    @staticmethod
    def _check_target(verb: str, resource: str) -> None:
        if verb not in VERBS:
            raise FaultRequestError(f"unknown verb {verb!r}; one of {', '.join(VERBS)}")
        if not _RESOURCE.fullmatch(resource):
            raise FaultRequestError(f"resource must be a lowercase plural such as pods, or *: {resource[:80]!r}")

    def set_errors(self, verb: str, resource: str, rate: float, code: int, *, by: str = "") -> None:
        """Fail ``rate`` (0..1) of the matching requests with ``code``; rate 0 removes the rule."""
        self._check_target(verb, resource)
        if not 0 <= rate <= 1:
            raise FaultRequestError("rate must be between 0 and 1")
        if not 400 <= code <= 599:
            raise FaultRequestError("code must be an HTTP error status")
        if rate == 0:
            self.errors.pop((verb, resource), None)
        else:
            self.errors[(verb, resource)] = (rate, code)
        self.record(Fault.ERRORS, by=by, verb=verb, resource=resource, rate=rate, code=code)

    def clear_errors(self, *, by: str = "") -> None:
        self.errors.clear()
        self.record(Fault.ERRORS_CLEARED, by=by)

    def set_latency(self, verb: str, resource: str, ms: float, *, by: str = "") -> None:
        """Delay the matching requests by ``ms``; 0 removes the rule."""
        self._check_target(verb, resource)
        if not (math.isfinite(ms) and 0 <= ms <= MAX_LATENCY_MS):
            raise FaultRequestError(f"ms must be between 0 and {MAX_LATENCY_MS:.0f}")
        if ms == 0:
            self.latency.pop((verb, resource), None)
        else:
            self.latency[(verb, resource)] = ms / 1000.0
        self.record(Fault.LATENCY, by=by, verb=verb, resource=resource, ms=ms)

    def clear_latency(self, *, by: str = "") -> None:
        self.latency.clear()
        self.record(Fault.LATENCY_CLEARED, by=by)

    def stall(self, seconds: float, *, by: str = "") -> None:
        """Hold every API response and every watch stream silent for ``seconds`` (0 ends a stall):
        requests wait before they are served, watches buffer their events, nothing is closed -- a
        network stall as a client sees it. The fault API (``/_sim/``) keeps answering."""
        if not 0 <= seconds <= MAX_STALL:
            raise FaultRequestError(f"seconds must be between 0 and {MAX_STALL:.0f}")
        self.stall_until = asyncio.get_running_loop().time() + seconds if seconds else 0.0
        self.record(Fault.STALL, by=by, seconds=seconds)

    def pause_kubelet(self, paused: bool, *, by: str = "") -> None:
        self.require(Capability.KUBELET)
        self.backend.pause_kubelet(paused)
        self.record(Fault.KUBELET_PAUSE if paused else Fault.KUBELET_RESUME, by=by)

    async def kill_pods(self, count: int, namespace: str | None, *, by: str = "") -> list[str]:
        self.require(Capability.KILL_PODS)
        if count < 0:
            raise FaultRequestError("count must not be negative")
        if namespace is not None and not isinstance(namespace, str):
            raise FaultRequestError("namespace must be a namespace name")
        killed = await self.backend.kill_pods(count, namespace or None, self.rng)
        self.record(Fault.KILL_PODS, by=by, count=count, namespace=namespace, killed=killed)
        return killed

    def reset(self, *, by: str = "") -> None:
        """Clear every rule and the stall, then the backend deletes every object and ends every watch."""
        self.require(Capability.RESET)
        self.errors.clear()
        self.latency.clear()
        self.stall_until = 0.0
        self.backend.reset()
        self.record(Fault.RESET, by=by)
