"""Where the dashboard finds the simulated cluster -- or the fault proxy -- an operator may inject faults into.

``CTRLSCOPE_SIM_KUBECONFIG`` names its kubeconfig: by default ``run/kubeconfig-sim.yaml``, the file
the demo's simulator writes each time it starts (on a new port), so the client is rebuilt whenever
that file's content changes (it is a few hundred bytes, read on every use). Empty switches fault injection off (``manage.py demo --kubeconfig`` does, for a
real cluster: the dashboard then never holds that cluster's credentials).

Whether the cluster behind a kubeconfig *is* a simulator only the cluster can say: a real API server
has no ``/_sim/`` and answers 404 (or 401/403), which ``probe`` reports as "not a simulator". A fault
proxy in front of a real cluster (``ctrlscope faultproxy``; point ``CTRLSCOPE_SIM_KUBECONFIG`` at its
kubeconfig) serves the same ``/_sim/`` and says what it cannot do (``unsupported``), which ``probe``
passes on. Everything goes through ``SimFaults``, the same client the scenarios use.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings

from controllers.informers import ApiError
from controllers.informers.http_client import KubernetesClient
from controllers.sim.faults_client import SimFaults

TIMEOUT = 5.0  # seconds: a sync view waits at most this long for the simulator
NOT_A_SIMULATOR = (401, 403, 404)
NEEDS_SIMULATOR = "fault injection needs the simulated cluster"

_lock = threading.Lock()
_cached: tuple[tuple[str, bytes], SimFaults] | None = None


class NoSimulator(Exception):
    """Fault injection is off, or the simulator's kubeconfig is missing or unreadable."""


def sim_faults() -> SimFaults:
    """The ``SimFaults`` client for the configured kubeconfig (``NoSimulator`` if there is none)."""
    global _cached
    path = settings.CTRLSCOPE_SIM_KUBECONFIG
    if not path:
        raise NoSimulator(f"{NEEDS_SIMULATOR}: fault injection is off here (CTRLSCOPE_SIM_KUBECONFIG is empty)")
    try:
        with open(path, "rb") as fh:
            version = (path, fh.read())
    except OSError:
        raise NoSimulator(f"{NEEDS_SIMULATOR}: no simulator kubeconfig at {path} (is `make demo` running?)") from None
    with _lock:
        if _cached is None or _cached[0] != version:
            try:
                client = KubernetesClient.from_kubeconfig(path)
            except Exception as exc:  # any kubeconfig problem means the same: no simulator to talk to
                raise NoSimulator(f"cannot load the simulator kubeconfig {path}: {exc}") from exc
            _cached = (version, SimFaults(client, timeout=TIMEOUT))
        return _cached[1]


# What calling the simulator may raise: an error status, no answer, an answer that is not JSON.
CALL_ERRORS = (ApiError, ConnectionRefusedError, ValueError)


def explain(exc: Exception, url: str) -> str:
    """What went wrong talking to the cluster at ``url`` (one of ``CALL_ERRORS``), in words an
    operator can act on."""
    if isinstance(exc, ConnectionRefusedError):
        return f"the simulator at {url} does not answer (is `make demo` running?)"
    if isinstance(exc, ApiError) and exc.code in NOT_A_SIMULATOR:
        return (f"{url} has no /_sim/ endpoints ({exc.code}): it is not a simulator, and {NEEDS_SIMULATOR} "
                "(or a fault proxy in front of this cluster: ctrlscope faultproxy)")
    if isinstance(exc, ApiError) and exc.code == 501:
        return f"not possible here: {exc.message or exc}"
    if isinstance(exc, ApiError):
        return f"refused: {exc.message or exc}"
    return f"{url} answered with something other than the simulator's JSON ({exc}): it is not a simulator"


def probe() -> dict[str, Any]:
    """Is fault injection possible? ``state``: ``ok``, ``off``, ``not-simulator``, ``unreachable``, ``error``;
    when ``ok``, also ``backend`` ("simulator" or "fault proxy") and ``unsupported`` (capability → why not)."""
    try:
        faults = sim_faults()
    except NoSimulator as exc:
        return {"state": "off", "message": str(exc)}
    url = faults.client.server
    try:
        status = faults.status()
    except CALL_ERRORS as exc:
        if isinstance(exc, ConnectionRefusedError):
            state = "unreachable"
        elif isinstance(exc, ApiError) and exc.code not in NOT_A_SIMULATOR:
            state = "error"
        else:
            state = "not-simulator"
        return {"state": state, "url": url, "message": explain(exc, url)}
    # A simulator from before the shared fault model names neither: it could do everything.
    return {"state": "ok", "url": url, "backend": status.get("backend", "simulator"),
            "unsupported": status.get("unsupported") or {}}
