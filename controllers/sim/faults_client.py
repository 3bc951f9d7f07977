"""A client for the ``/_sim/`` fault endpoints (``controllers.faults.endpoints``).

The simulator and the fault proxy (``controllers.faultproxy``, in front of a real API server) serve
the same fault API, so scenarios and the dashboard's fault panel drive either through
``SimFaults``. It speaks over whatever Kubernetes API client the caller already has (anything with
``get_json``/``send_json``, e.g. the runtime's ``KubernetesClient``), so the faults travel the same
connection, TLS and auth as the API calls, and the simulator still never imports the runtime.
"""

from __future__ import annotations

from typing import Any, Protocol
from urllib.parse import quote

from controllers.faults.vocabulary import ACTOR_HEADER


class JsonClient(Protocol):
    """What ``SimFaults`` needs from an API client: JSON requests that raise on a non-2xx status."""

    def get_json(self, path: str, *, timeout: float) -> Any: ...

    def send_json(self, method: str, path: str, body: dict[str, Any] | None = None, *, timeout: float,
                  headers: dict[str, str] | None = None) -> Any: ...


class SimFaults:
    """The ``/_sim/`` fault endpoints (the simulator's or a fault proxy's), over the same client as
    the API calls.

    Each call returns the JSON answer and raises the client's API error with the server's message
    when it refuses (a real cluster has no ``/_sim/``: 404; a fault the fault proxy cannot do: 501) or
    ``ConnectionRefusedError`` when it is not there at all. With an ``actor`` (``as_actor``) every
    fault is sent with ``ACTOR_HEADER``, and the simulator's fault record says who injected it.
    """

    def __init__(self, client: JsonClient, *, timeout: float = 60.0, actor: str = "") -> None:
        self.client = client
        self.timeout = timeout
        self.actor = actor

    def as_actor(self, actor: str) -> SimFaults:
        """The same client, recording ``actor`` (a dashboard user, a scenario) as who injects."""
        return SimFaults(self.client, timeout=self.timeout, actor=actor)

    def _send(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        # Percent-encoded: a header carries Latin-1 at most, a user name may be anything.
        headers = {ACTOR_HEADER: quote(self.actor, safe=" @.+-_")} if self.actor else None
        return self.client.send_json(method, path, body, timeout=self.timeout, headers=headers)

    def status(self) -> Any:
        """Active rules and the fault log (``GET /_sim/faults``)."""
        return self.client.get_json("/_sim/faults", timeout=self.timeout)

    def errors(self, *, verb: str, resource: str, rate: float, code: int = 500) -> Any:
        return self._send("POST", "/_sim/errors", {"verb": verb, "resource": resource, "rate": rate, "code": code})

    def clear_errors(self) -> Any:
        return self._send("DELETE", "/_sim/errors")

    def drop_watches(self) -> Any:
        return self._send("POST", "/_sim/watches/drop", {})

    def end_watches(self) -> Any:
        return self._send("POST", "/_sim/watches/end", {})

    def compact_history(self) -> Any:
        return self._send("POST", "/_sim/history/compact", {})

    def latency(self, *, verb: str, resource: str, ms: float) -> Any:
        return self._send("POST", "/_sim/latency", {"verb": verb, "resource": resource, "ms": ms})

    def clear_latency(self) -> Any:
        return self._send("DELETE", "/_sim/latency")

    def stall(self, seconds: float) -> Any:
        """A network stall: every API response and watch stream silent for ``seconds``."""
        return self._send("POST", "/_sim/stall", {"seconds": seconds})

    def end_stall(self) -> Any:
        return self._send("DELETE", "/_sim/stall")

    def pause_kubelet(self) -> Any:
        return self._send("POST", "/_sim/kubelet/pause", {})

    def resume_kubelet(self) -> Any:
        return self._send("POST", "/_sim/kubelet/resume", {})

    def kill_pods(self, count: int, namespace: str | None = None) -> Any:
        return self._send("POST", "/_sim/pods/kill", {"count": count, "namespace": namespace})

    def requests(self) -> Any:
        """Resource requests served so far, by user agent, verb and resource (``GET /_sim/requests``)."""
        return self.client.get_json("/_sim/requests", timeout=self.timeout)

    def reset_requests(self) -> Any:
        """Start counting requests afresh."""
        return self._send("DELETE", "/_sim/requests")

    def reset(self) -> Any:
        """Clear every fault and every object; all watches end."""
        return self._send("POST", "/_sim/reset", {})
