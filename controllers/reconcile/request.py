"""The reconciler's whole public surface (controller-runtime ``pkg/reconcile``).

A ``Reconciler`` gets a ``Request`` -- only the object's namespace and name, never the event that
caused it: events are deduplicated in the workqueue, so the reconciler must read the current state
from the cache and converge on it. It returns a ``Result`` or raises:

* return ``Result()`` (or ``None``): done, the key's backoff is forgotten;
* ``Result(requeue_after=s)``: look again in ``s`` seconds (backoff forgotten);
* ``Result(requeue=True)``: look again after the key's rate-limited backoff;
* raise any exception: an error, retried with the key's rate-limited backoff;
* raise ``TerminalError``: an error that retrying cannot fix; counted, not requeued.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol


class Request(NamedTuple):
    """The key of the object to reconcile: ``namespace`` ("" for cluster-scoped) and ``name``.

    A tuple so that hashing it in the workqueue's sets is as cheap as hashing a string.
    """

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    @classmethod
    def for_object(cls, obj: dict[str, Any]) -> Request:
        """The request for a raw Kubernetes object dict."""
        meta = obj.get("metadata") or {}
        return cls(meta.get("namespace") or "", meta.get("name") or "")


@dataclass(frozen=True, slots=True)
class Result:
    """What a reconcile asks for next. ``requeue_after`` (seconds) wins over ``requeue``."""

    requeue: bool = False
    requeue_after: float = 0.0

    def is_zero(self) -> bool:
        """True when the result asks for nothing."""
        return not self.requeue and self.requeue_after <= 0


class TerminalError(Exception):
    """An error retrying will not fix: reported and counted, never requeued."""


class Reconciler(Protocol):
    """Implement ``reconcile``; the controller does queueing, retries, metrics and telemetry."""

    def reconcile(self, request: Request) -> Result | None:
        """Drive the object named by ``request`` towards its desired state."""
