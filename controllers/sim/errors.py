"""Kubernetes ``Status`` errors.

Every failure the simulator reports travels as a ``StatusError`` until the HTTP layer turns it into
the body a real API server sends (``kind: Status``, ``status: Failure``, ``reason``, ``details``,
``code``). kubectl prints ``Error from server (<reason>): <message>`` from exactly these fields, and
the Python client raises ``ApiException`` with the same status code, so the shape is part of the
protocol, not decoration. Keeping one exception type means a handler can never leak a 500 for bad
input by forgetting to translate some other error.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from controllers.faults.status import REASONS


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
        retry_after: int | None = None,
        generic: bool = False,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = REASONS.get(code, "Unknown") if reason is None else reason
        # StatusDetails' fields are all omitempty: an empty name and the core group ("") are left out.
        self.details: dict[str, Any] = {}
        if name:
            self.details["name"] = name
        if group:
            self.details["group"] = group
        if kind:
            self.details["kind"] = kind
        if causes:
            self.details["causes"] = causes
        if retry_after:
            self.details["retryAfterSeconds"] = retry_after
        # apimachinery's NewGenericServerResponse (unknown paths, 405, 406, a JSON patch that does not
        # apply) always attaches a StatusDetails, so its Status carries "details": {} even when empty.
        self.generic = generic
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
        if self.details or self.generic:
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


def internal(message: str) -> StatusError:
    """A plain Go error no layer turned into an API error: a 500 without a reason."""
    return StatusError(500, message, reason="")


# field.ErrorType -> its String(), the head of each cause's message (field.Invalid and
# field.TypeInvalid share one: a TypeInvalid cause names its reason explicitly).
_CAUSE_REASONS = {
    "Not found": "FieldValueNotFound",
    "Required value": "FieldValueRequired",
    "Duplicate value": "FieldValueDuplicate",
    "Invalid value": "FieldValueInvalid",
    "Unsupported value": "FieldValueNotSupported",
    "Forbidden": "FieldValueForbidden",
    "Too long": "FieldValueTooLong",
    "Too many": "FieldValueTooMany",
    "Internal error": "InternalError",
}


def cause_reason(message: str) -> str:
    """The StatusCause reason of a field error, read off its message (``Required value: ...``)."""
    return _CAUSE_REASONS.get(message.split(":", 1)[0], "FieldValueInvalid")


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]] | list[tuple[str, str, str]],
            ) -> StatusError:
    """422 Invalid, listing each offending field the way apimachinery's field errors do: causes are
    (field, message) or (field, message, reason); without a reason it follows from the message."""
    full = [(c[0], c[1], c[2] if len(c) > 2 else cause_reason(c[1])) for c in causes]  # type: ignore[misc]
    texts = [f"{field}: {msg}" for field, msg, _ in full]
    text = texts[0] if len(texts) == 1 else f"[{', '.join(texts)}]"
    return StatusError(
        422,
        f'{kind}{"." + group if group else ""} "{name}" is invalid: {text}',
        name=name or None,  # StatusDetails.name is omitempty
        group=group,
        kind=kind,
        causes=[{"reason": reason, "message": msg, "field": field} for field, msg, reason in full],
    )


def patch_invalid(obj: Any, detail: str) -> StatusError:
    """A patch whose result its kind's type cannot hold: a 422 with one cause, on the field
    ``patch``, quoting the patched object (the API server names neither kind nor object)."""
    shown = json.dumps(orjson.dumps(obj).decode(), ensure_ascii=False)  # Go's %q of the object's JSON
    message = f"Invalid value: {shown}: {detail}"
    return StatusError(422, f' "" is invalid: patch: {message}', reason="Invalid",
                       causes=[{"reason": "FieldValueInvalid", "message": message, "field": "patch"}])


def expired(message: str) -> StatusError:
    return StatusError(410, message, reason="Expired")
