"""Fault injection under ``/_sim/``: make the simulated cluster misbehave on purpose.

ctrlscope exists to show how controllers cope, so the simulator can produce the failures a real
cluster produces occasionally, on demand and reproducibly (a seeded RNG):

| POST endpoint                 | effect                                                          |
|-------------------------------|-----------------------------------------------------------------|
| ``/_sim/watches/drop``        | abort every watch connection (clients see a protocol error)     |
| ``/_sim/watches/end``         | end every watch cleanly (clients re-watch from their last RV)   |
| ``/_sim/history/compact``     | forget history: re-watching from an old RV gets 410 Expired     |
| ``/_sim/errors``              | ``{"verb","resource","rate","code"}``: fail that share of calls |
| ``/_sim/latency``             | ``{"verb","resource","ms"}``: delay matching calls              |
| ``/_sim/stall``               | ``{"seconds"}``: a network stall: every API response and watch  |
|                               | stream goes silent for that long, no connection is closed       |
| ``/_sim/kubelet/pause|resume``| stop / restart pod status progress                              |
| ``/_sim/pods/kill``           | ``{"count","namespace"}``: delete random pods                   |
| ``/_sim/reset``               | clear faults and every object; all watches end                  |

``verb``/``resource`` accept ``*``. ``DELETE /_sim/errors`` and ``DELETE /_sim/latency`` clear rules,
``DELETE /_sim/stall`` ends a stall early;
``GET /_sim/faults`` lists active rules and the fault log. Each fault is recorded as an event dict
in ``events`` (the newest ``MAX_EVENTS``), with ``by``: who asked for it, as the request's
``ACTOR_HEADER`` says (the dashboard sends its signed-in user, a scenario its name; the simulator
has no authentication of its own, so this is a label for the log, not a proof), and passed to the
optional ``on_fault`` callback, so the telemetry layer can publish it next to the controller
activity it provokes. The callback runs on the
simulator's event loop, right after the fault took effect: it must not block (``manage.py
simcluster`` hands it to a ``RedisPublisher``, which only appends to memory there), and it may call
``rules()`` to see the rules the fault left active.
"""

from __future__ import annotations

import asyncio
import random
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from controllers.sim.errors import StatusError, bad_request
from controllers.sim.store import Store, rfc3339
from controllers.sim.watch import CloseReason

if TYPE_CHECKING:
    from controllers.sim.kubelet import Kubelet

FaultHook = Callable[[dict[str, Any]], None]
VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "*")
MAX_EVENTS = 1000  # the fault log GET /_sim/faults returns: the newest this many
ACTOR_HEADER = "X-Ctrlscope-Actor"
"""Request header naming who injects a fault; recorded as the fault's ``by``."""
MAX_ACTOR = 128


class FaultInjector:
    """Active fault rules, the fault log, and the ``/_sim/`` HTTP endpoints."""

    def __init__(self, store: Store, kubelet: Kubelet, *, seed: int = 0, on_fault: FaultHook | None = None,
                 reset: Callable[[], None] | None = None) -> None:
        self.store = store
        self.kubelet = kubelet
        self.rng = random.Random(seed)
        self.on_fault = on_fault
        self._reset_cluster = reset
        self.events: deque[dict[str, Any]] = deque(maxlen=MAX_EVENTS)
        # (verb, resource) → (probability, status code); "*" matches anything.
        self.errors: dict[tuple[str, str], tuple[float, int]] = {}
        self.latency: dict[tuple[str, str], float] = {}
        # Who asked for the fault being handled now (ACTOR_HEADER), "" outside a fault request.
        self._actor = ""
        # A network stall: until this event-loop time every API response and watch write waits.
        self.stall_until = 0.0

    # ---- request hook ------------------------------------------------------------------------

    def _rule(self, rules: dict[tuple[str, str], Any], verb: str, resource: str) -> Any:
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

    async def before_request(self, verb: str, resource: str) -> None:
        """Delay and/or fail a request according to the active rules."""
        if self.latency:
            delay = self._rule(self.latency, verb, resource)
            if delay:
                await asyncio.sleep(delay)
        if self.errors:
            rule = self._rule(self.errors, verb, resource)
            if rule is not None and self.rng.random() < rule[0]:
                code = rule[1]
                reason = {429: "TooManyRequests", 503: "ServiceUnavailable", 504: "Timeout"}.get(code, None)
                raise StatusError(code, f"injected fault: {verb} {resource} failed ({code})", reason=reason)

    def rules(self) -> dict[str, Any]:
        """The active rules, as ``GET /_sim/faults`` and the ``on_fault`` listeners see them."""
        return {"errors": [{"verb": v, "resource": r, "rate": p, "code": c} for (v, r), (p, c) in self.errors.items()],
                "latency": [{"verb": v, "resource": r, "ms": s * 1000} for (v, r), s in self.latency.items()],
                "kubeletPaused": self.kubelet.paused, "stalledFor": round(self.stalled_for(), 3)}

    # ---- faults ------------------------------------------------------------------------------

    def record(self, fault: str, **params: Any) -> dict[str, Any]:
        event = {"type": "fault", "fault": fault, "params": params, "time": rfc3339(self.store.clock.wall()),
                 "resourceVersion": str(self.store.rv)}
        if self._actor:
            event["by"] = self._actor
        self.events.append(event)
        if self.on_fault is not None:
            self.on_fault(event)
        return event

    def close_watches(self, abort: bool) -> int:
        watchers = self.store.all_watchers()
        for w in watchers:
            w.close(CloseReason.ABORT if abort else CloseReason.CLEAN)
        self.record("drop-watches" if abort else "end-watches", count=len(watchers))
        return len(watchers)

    def compact(self) -> int:
        rv = self.store.compact()
        self.record("compact", compactedResourceVersion=str(rv))
        return rv

    def set_errors(self, verb: str, resource: str, rate: float, code: int) -> None:
        if verb not in VERBS:
            raise bad_request(f"unknown verb {verb!r}; one of {', '.join(VERBS)}")
        if not 0 <= rate <= 1:
            raise bad_request("rate must be between 0 and 1")
        if not 400 <= code <= 599:
            raise bad_request("code must be an HTTP error status")
        if rate == 0:
            self.errors.pop((verb, resource), None)
        else:
            self.errors[(verb, resource)] = (rate, code)
        self.record("errors", verb=verb, resource=resource, rate=rate, code=code)

    def set_latency(self, verb: str, resource: str, ms: float) -> None:
        if verb not in VERBS:
            raise bad_request(f"unknown verb {verb!r}")
        if ms < 0:
            raise bad_request("ms must be non-negative")
        if ms == 0:
            self.latency.pop((verb, resource), None)
        else:
            self.latency[(verb, resource)] = ms / 1000.0
        self.record("latency", verb=verb, resource=resource, ms=ms)

    def stall(self, seconds: float) -> None:
        """Hold every API response and every watch stream silent for ``seconds`` (0 ends a stall):
        requests wait before they are served, watches buffer their events, nothing is closed -- a
        network stall as a client sees it. Fault endpoints (``/_sim/``) keep answering."""
        if not 0 <= seconds <= 3600:
            raise bad_request("seconds must be between 0 and 3600")
        self.stall_until = asyncio.get_running_loop().time() + seconds if seconds else 0.0
        self.record("stall", seconds=seconds)

    def pause_kubelet(self, paused: bool) -> None:
        if paused:
            self.kubelet.pause()
        else:
            self.kubelet.resume()
        self.record("kubelet-pause" if paused else "kubelet-resume")

    def kill_pods(self, count: int, namespace: str | None) -> list[str]:
        rt = self.store.registry.storage_type(("", "pods"))
        assert rt is not None
        pods = [o for (ns, _), o in sorted(self.store.bucket(rt.key).objects.items())
                if (not namespace or ns == namespace) and not o["metadata"].get("deletionTimestamp")]
        victims = self.rng.sample(pods, min(count, len(pods)))
        killed = []
        for pod in victims:
            meta = pod["metadata"]
            try:
                self.store.delete(rt, meta.get("namespace"), meta["name"], grace_period=0)
                killed.append(f"{meta.get('namespace')}/{meta['name']}")
            except StatusError:
                pass
        self.record("kill-pods", count=count, namespace=namespace, killed=killed)
        return killed

    def reset(self) -> None:
        self.errors.clear()
        self.latency.clear()
        self.stall_until = 0.0
        self.kubelet.resume()
        for w in self.store.all_watchers():
            w.close(CloseReason.CLEAN)
        if self._reset_cluster is not None:
            self._reset_cluster()
        self.record("reset")

    # ---- HTTP --------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        try:
            return await self._handle(request)
        except StatusError as e:
            return web.Response(body=orjson.dumps(e.status()), status=e.code, content_type="application/json")

    async def _body(self, request: web.Request) -> dict[str, Any]:
        raw = await request.read()
        if not raw.strip():
            return {}
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise bad_request(f"invalid JSON: {e}") from None
        if not isinstance(body, dict):
            raise bad_request("body must be a JSON object")
        return body

    @staticmethod
    def _actor_of(request: web.Request) -> str:
        actor = unquote(request.headers.get(ACTOR_HEADER, "")).strip()
        if len(actor) > MAX_ACTOR or not actor.isprintable():
            raise bad_request(f"{ACTOR_HEADER} must be at most {MAX_ACTOR} printable characters")
        return actor

    async def _handle(self, request: web.Request) -> web.Response:
        path, method = request.path.rstrip("/"), request.method
        actor = self._actor_of(request)
        body = await self._body(request) if method in ("POST", "PUT") else {}
        try:
            # Every fault below is recorded synchronously, with no await in between: the actor
            # cannot leak into another request's record.
            self._actor = actor
            return self._dispatch(path, method, body)
        finally:
            self._actor = ""

    def _dispatch(self, path: str, method: str, body: dict[str, Any]) -> web.Response:
        result: dict[str, Any] = {"ok": True}
        try:
            if path == "/_sim/faults" and method == "GET":
                result = {"events": list(self.events), **self.rules(), "resourceVersion": str(self.store.rv)}
            elif path == "/_sim/watches/drop" and method == "POST":
                result["closed"] = self.close_watches(abort=True)
            elif path == "/_sim/watches/end" and method == "POST":
                result["closed"] = self.close_watches(abort=False)
            elif path == "/_sim/history/compact" and method == "POST":
                result["compactedResourceVersion"] = str(self.compact())
            elif path == "/_sim/errors" and method == "POST":
                self.set_errors(str(body.get("verb", "*")), str(body.get("resource", "*")),
                                float(body.get("rate", 1.0)), int(body.get("code", 500)))
            elif path == "/_sim/errors" and method == "DELETE":
                self.errors.clear()
                self.record("errors-cleared")
            elif path == "/_sim/latency" and method == "POST":
                self.set_latency(str(body.get("verb", "*")), str(body.get("resource", "*")), float(body.get("ms", 0)))
            elif path == "/_sim/latency" and method == "DELETE":
                self.latency.clear()
                self.record("latency-cleared")
            elif path == "/_sim/stall" and method == "POST":
                self.stall(float(body.get("seconds", 0)))
            elif path == "/_sim/stall" and method == "DELETE":
                self.stall(0)
            elif path == "/_sim/kubelet/pause" and method == "POST":
                self.pause_kubelet(True)
            elif path == "/_sim/kubelet/resume" and method == "POST":
                self.pause_kubelet(False)
            elif path == "/_sim/pods/kill" and method == "POST":
                result["killed"] = self.kill_pods(int(body.get("count", 1)), body.get("namespace"))
            elif path == "/_sim/reset" and method == "POST":
                self.reset()
            else:
                raise StatusError(404, f"no simulator endpoint {method} {path}", reason="NotFound")
        except (TypeError, ValueError) as e:
            raise bad_request(f"invalid parameter: {e}") from None
        return web.Response(body=orjson.dumps(result), content_type="application/json")
