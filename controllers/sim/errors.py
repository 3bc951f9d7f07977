"""Kubernetes ``Status`` errors.

Every failure the simulator reports travels as a ``StatusError`` until the HTTP layer turns it into
the body a real API server sends (``kind: Status``, ``status: Failure``, ``reason``, ``details``,
``code``). kubectl prints ``Error from server (<reason>): <message>`` from exactly these fields, and
the Python client raises ``ApiException`` with the same status code, so the shape is part of the
protocol, not decoration. Keeping one exception type means a handler can never leak a 500 for bad
input by forgetting to translate some other error.
"""

from __future__ import annotations

from typing import Any

_REASONS: dict[int, str] = {
    400: "BadRequest",
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


class StatusError(Exception):
    """A request failure carrying the fields of a Kubernetes ``Status``."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str | None = None,
        name: str | None = None,
        group: str | None = None,
        kind: str | None = None,
        causes: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = _REASONS.get(code, "Unknown") if reason is None else reason
        self.details: dict[str, Any] = {}
        if name is not None:
            self.details["name"] = name
        if group is not None:
            self.details["group"] = group
        if kind is not None:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes
        # A Status's ListMeta.continue: an expired continue token is answered with one that goes on.
        self.list_continue: str | None = None

    def status(self) -> dict[str, Any]:
        """The ``Status`` object a real API server would send for this failure."""
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {"continue": self.list_continue} if self.list_continue else {},
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:  # "" (StatusReasonUnknown): a plain Go error turned into a 500 has none
            body["reason"] = self.reason
        if self.details:
            body["details"] = self.details
        body["code"] = self.code
        return body


def qualified(plural: str, group: str) -> str:
    """``deployments.apps`` / ``pods``: how the API server names a resource in messages."""
    return f"{plural}.{group}" if group else plural


def not_found(plural: str, group: str, name: str) -> StatusError:
    return StatusError(404, f'{qualified(plural, group)} "{name}" not found', name=name, group=group, kind=plural)


def already_exists(plural: str, group: str, name: str) -> StatusError:
    return StatusError(
        409,
        f'{qualified(plural, group)} "{name}" already exists',
        reason="AlreadyExists",
        name=name,
        group=group,
        kind=plural,
    )


def conflict(plural: str, group: str, name: str) -> StatusError:
    return StatusError(
        409,
        f'Operation cannot be fulfilled on {qualified(plural, group)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        reason="Conflict",
        name=name,
        group=group,
        kind=plural,
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, message)


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> StatusError:
    """422 Invalid, listing each offending field the way apimachinery's field errors do."""
    text = "; ".join(f"{field}: {msg}" for field, msg in causes)
    return StatusError(
        422,
        f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}',
        name=name,
        group=group,
        kind=kind,
        causes=[{"reason": "FieldValueInvalid", "message": msg, "field": field} for field, msg in causes],
    )


def expired(message: str) -> StatusError:
    return StatusError(410, message, reason="Expired")
