"""``FaultEndpoints``: the fault API under ``/_sim/``, served alike by the simulator and the fault proxy.

| endpoint                            | effect                                                          |
|-------------------------------------|-----------------------------------------------------------------|
| ``GET /_sim/faults``                | active rules, the fault log, ``backend``, ``unsupported``       |
| ``POST /_sim/watches/drop``         | abort every watch connection (clients see a protocol error)     |
| ``POST /_sim/watches/end``          | end every watch cleanly (clients re-watch from their last RV)   |
| ``POST /_sim/history/compact``      | forget history: re-watching from an older RV gets 410 Expired   |
| ``POST /_sim/errors``               | ``{"verb","resource","rate","code"}``: fail that share of calls |
| ``POST /_sim/latency``              | ``{"verb","resource","ms"}``: delay matching calls              |
| ``POST /_sim/stall``                | ``{"seconds"}``: a network stall: every API response and watch  |
|                                     | stream goes silent for that long, no connection is closed       |
| ``POST /_sim/kubelet/pause|resume`` | stop / restart pod status progress                              |
| ``POST /_sim/pods/kill``            | ``{"count","namespace"}``: delete random pods                   |
| ``POST /_sim/reset``                | clear faults and every object; all watches end                  |
| ``GET /_sim/requests``              | requests served by user agent, verb, resource (``DELETE``:      |
|                                     | count afresh)                                                   |

``verb``/``resource`` accept ``*``. ``DELETE /_sim/errors`` and ``DELETE /_sim/latency`` clear rules,
``DELETE /_sim/stall`` ends a stall early.

Answers are JSON; a refusal is a Kubernetes ``Status`` (``SimFaults`` raises the client's API error
with its message): 400 for a malformed request (invalid JSON, a bad value, a bad ``ACTOR_HEADER``),
which changes nothing; 404 for an unknown endpoint; 501 for a fault the backend cannot do, saying why
(``unsupported`` in ``GET /_sim/faults`` lists those up front, so a panel can disable them); the
code the cluster answered with when it would not do a well-formed fault (the fault proxy's upstream
refusing to delete a pod: 403), again changing nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from controllers.faults.injector import FaultInjector
from controllers.faults.request_counts import RequestCounter
from controllers.faults.status import FaultFailed, FaultRequestError, Unsupported, status_body
from controllers.faults.vocabulary import ACTOR_HEADER, MAX_ACTOR

Body = dict[str, Any]
Action = Callable[[Body, str], Awaitable[Body]]


class _NoEndpoint(Exception):
    pass


class FaultEndpoints:
    """The ``/_sim/`` HTTP API over ``injector`` (and ``requests``, when the server counts them)."""

    def __init__(self, injector: FaultInjector, *, requests: RequestCounter | None = None) -> None:
        self.injector = injector
        self.requests = requests
        f = injector
        # (method, path) → action(body, actor) → the answer's fields beside "ok".
        self.actions: dict[tuple[str, str], Action] = {
            ("POST", "/_sim/watches/drop"): self._sync(lambda b, by: {"closed": f.close_watches(abort=True, by=by)}),
            ("POST", "/_sim/watches/end"): self._sync(lambda b, by: {"closed": f.close_watches(abort=False, by=by)}),
            ("POST", "/_sim/history/compact"): self._compact,
            ("POST", "/_sim/errors"): self._sync(lambda b, by: f.set_errors(
                str(b.get("verb", "*")), str(b.get("resource", "*")), float(b.get("rate", 1.0)),
                int(b.get("code", 500)), by=by)),
            ("DELETE", "/_sim/errors"): self._sync(lambda b, by: f.clear_errors(by=by)),
            ("POST", "/_sim/latency"): self._sync(lambda b, by: f.set_latency(
                str(b.get("verb", "*")), str(b.get("resource", "*")), float(b.get("ms", 0)), by=by)),
            ("DELETE", "/_sim/latency"): self._sync(lambda b, by: f.clear_latency(by=by)),
            ("POST", "/_sim/stall"): self._sync(lambda b, by: f.stall(float(b.get("seconds", 0)), by=by)),
            ("DELETE", "/_sim/stall"): self._sync(lambda b, by: f.stall(0, by=by)),
            ("POST", "/_sim/kubelet/pause"): self._sync(lambda b, by: f.pause_kubelet(True, by=by)),
            ("POST", "/_sim/kubelet/resume"): self._sync(lambda b, by: f.pause_kubelet(False, by=by)),
            ("POST", "/_sim/pods/kill"): self._kill_pods,
            ("POST", "/_sim/reset"): self._sync(lambda b, by: f.reset(by=by)),
        }

    @staticmethod
    def _sync(fn: Callable[[Body, str], Any]) -> Action:
        async def action(body: Body, by: str) -> Body:
            result = fn(body, by)
            return result if isinstance(result, dict) else {}
        return action

    async def _compact(self, body: Body, by: str) -> Body:
        return {"compactedResourceVersion": await self.injector.compact(by=by)}

    async def _kill_pods(self, body: Body, by: str) -> Body:
        return {"killed": await self.injector.kill_pods(int(body.get("count", 1)), body.get("namespace"), by=by)}

    # ---- HTTP --------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.Response:
        try:
            return _json(await self._handle(request))
        except FaultRequestError as e:
            return _json(status_body(400, str(e)), 400)
        except Unsupported as e:
            return _json(status_body(501, f"{self.injector.backend.name}: {e}", ""), 501)
        except FaultFailed as e:
            return _json(status_body(e.code, str(e)), e.code)
        except _NoEndpoint as e:
            return _json(status_body(404, str(e)), 404)

    async def _handle(self, request: web.Request) -> Body:
        path, method = request.path.rstrip("/"), request.method
        actor = _actor_of(request)
        if method == "GET" and path == "/_sim/faults":
            return self.status()
        if path == "/_sim/requests" and self.requests is not None and method in ("GET", "DELETE"):
            if method == "DELETE":
                self.requests.reset()
            return self.requests.snapshot()
        action = self.actions.get((method, path))
        if action is None:
            raise _NoEndpoint(f"no fault endpoint {method} {path} on the {self.injector.backend.name}")
        body = await _body(request) if method in ("POST", "PUT") else {}
        try:
            return {"ok": True, **await action(body, actor)}
        except (TypeError, ValueError) as e:
            if isinstance(e, FaultRequestError):
                raise
            raise FaultRequestError(f"invalid parameter: {e}") from None

    def status(self) -> Body:
        """``GET /_sim/faults``: the fault log, the active rules, and what this backend cannot do."""
        f = self.injector
        return {"events": list(f.events), **f.rules(), "resourceVersion": f.backend.resource_version(),
                "backend": f.backend.name, "unsupported": {c.value: why for c, why in f.backend.unsupported.items()}}


def _json(body: Body, status: int = 200) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


async def _body(request: web.Request) -> Body:
    raw = await request.read()
    if not raw.strip():
        return {}
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise FaultRequestError(f"invalid JSON: {e}") from None
    if not isinstance(body, dict):
        raise FaultRequestError("body must be a JSON object")
    return body


def _actor_of(request: web.Request) -> str:
    actor = unquote(request.headers.get(ACTOR_HEADER, "")).strip()
    if len(actor) > MAX_ACTOR or not actor.isprintable():
        raise FaultRequestError(f"{ACTOR_HEADER} must be at most {MAX_ACTOR} printable characters")
    return actor
