"""Read-only by default against real clusters: which writes a ``KubernetesClient`` may send.

A worker pointed at a real cluster only observes unless it is started with ``--allow-writes``:
every request that is not a read (GET/HEAD/OPTIONS) fails before it leaves the process with a
``ReadOnlyError`` that says why and what to do, and the client reports it to the observer as a
refused write (``on_write_refused``, not a request: nothing was sent, so nothing failed at the API
server), so the worker's page shows "refused: read-only" beside its writes. A Reconcile that raises
it ends as a terminal error (``controllers/reconcile/controller.py``): retrying cannot make the
worker writable. Against the simulated cluster (``controllers/simulated.py``)
writes are allowed: it is the sandbox the examples are written for.

Whether the server is the simulator is asked once (``GET /version``). A worker usually knows it at
start-up; when the server was unreachable then, the guard asks again on the first write (until an
answer comes, a write is refused: not knowing is not permission).

A few paths may be exempt: the worker's own leader-election Lease (taking the Lease changes nothing
that the controllers observe, and replicas of an observing worker still need one leader).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from controllers.informers.listwatch import ApiError
from controllers.simulated import is_simulated

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def ask_server(client: Any, *, attempts: int = 1, pause: float = 1.0) -> tuple[bool | None, str]:
    """``GET /version`` through ``client`` (a ``KubernetesClient``): whether the server is the
    simulated cluster (``None``: no answer in ``attempts`` tries, ``pause`` s apart) and its gitVersion."""
    for attempt in range(attempts):
        try:
            info = client.get_json("/version", timeout=5)
        except (OSError, ValueError, ApiError):
            if attempt + 1 < attempts:
                time.sleep(pause)
            continue
        return is_simulated(info), str(info.get("gitVersion", "")) if isinstance(info, dict) else ""
    return None, ""


class ReadOnlyError(PermissionError):
    """A write refused by the worker itself: nothing was sent to the API server."""

    def __init__(self, method: str, path: str, server: str, why: str) -> None:
        super().__init__(f"read-only: {method} {path} was not sent: {why}; start the worker with --allow-writes "
                         f"to let its controllers change {server}")
        self.method = method
        self.path = path
        self.server = server


class WriteGuard:
    """Allows or refuses each write. ``probe`` answers "is the server the simulator?" (``None``:
    could not tell, e.g. unreachable); ``on_change`` is called with the new mode when the answer
    changes what is allowed (the worker republishes its cluster entry)."""

    def __init__(self, *, server: str, allow_writes: bool = False, simulated: bool | None = None,
                 probe: Callable[[], bool | None] | None = None, exempt: Iterable[str] = (),
                 on_change: Callable[[WriteGuard], None] | None = None) -> None:
        self.server = server
        self.allow_writes = allow_writes
        self.simulated = simulated
        self.exempt = frozenset(exempt)
        self._probe = probe
        self._on_change = on_change
        self._lock = threading.Lock()

    @property
    def writes_allowed(self) -> bool:
        return self.allow_writes or self.simulated is True

    @property
    def mode(self) -> str:
        """``"allowed"`` or ``"read-only"``: what the worker's cluster entry says."""
        return "allowed" if self.writes_allowed else "read-only"

    def check(self, method: str, path: str) -> None:
        """Return if ``method path`` may be sent, raise ``ReadOnlyError`` otherwise."""
        if method.upper() in SAFE_METHODS or self.writes_allowed or path in self.exempt:
            return
        if self.simulated is None and self._probe is not None:
            self._resolve()
            if self.writes_allowed:
                return
        why = (f"{self.server} did not say whether it is the simulated cluster" if self.simulated is None
               else f"{self.server} is not the simulated cluster")
        raise ReadOnlyError(method.upper(), path, self.server, why)

    def _resolve(self) -> None:
        with self._lock:
            if self.simulated is not None or self._probe is None:
                return
            answer = self._probe()
            if answer is None:
                return
            self.simulated = answer
        if self._on_change is not None and answer:
            self._on_change(self)
