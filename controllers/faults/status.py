"""The Kubernetes ``Status`` a fault answers with, and the two ways a fault request fails.

An injected error must look like the API server's own: kubectl prints ``Error from server
(<reason>): <message>`` from a ``Status`` body and client-go decides to retry from its code and
reason (``TooManyRequests``, ``ServiceUnavailable``). ``REASONS`` is the reason the API server gives
each status code; the simulator's ``StatusError`` uses the same table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

REASONS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def status_body(code: int, message: str, reason: str | None = None) -> dict[str, Any]:
    """A failure ``Status`` as the API server writes it (``reason`` from ``REASONS`` unless given)."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": message}
    reason = REASONS.get(code, "") if reason is None else reason
    if reason:
        body["reason"] = reason
    body["code"] = code
    return body


@dataclass(frozen=True)
class InjectedError:
    """An error rule fired: the request is answered with this instead of being served."""

    code: int
    message: str
    reason: str | None  # None: the API server's reason for ``code``

    def status(self) -> dict[str, Any]:
        return status_body(self.code, self.message, self.reason)


class FaultRequestError(ValueError):
    """A malformed fault request (400): it changed nothing."""


class Unsupported(Exception):
    """A fault this backend cannot do (501); the message says why and what can."""


class FaultFailed(Exception):
    """A well-formed fault the cluster would not do (the fault proxy's upstream refused it, or did not
    answer): nothing changed, and the answer carries ``code``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
