"""A JSON body of a built-in kind as the API server stores it: through its Go type and back.

kube-apiserver never stores the JSON a client sent. It decodes the body into the kind's Go struct
and encodes the struct again, and ``encoding/json`` has its own idea of what an object looks like:

* a field the struct does not declare is gone (``fieldValidation`` only decides whether that is
  also an error or a warning);
* ``omitempty`` drops ``""``, ``0``, ``false``, nil pointers and empty (or null) slices and maps:
  ``data: {}``, ``labels: {}``, ``finalizers: []`` and ``hostNetwork: false`` do not come back;
* a field without ``omitempty`` always comes back, as its zero value when it was absent: an Event
  gets ``reportingComponent: ""``, ``source: {}`` and ``eventTime: null``, a container
  ``resources: {}``, a Service ``status.loadBalancer: {}`` -- ``omitempty`` never drops a struct
  held by value, only ``omitzero`` does (``metadata.creationTimestamp``, which is why a pod
  template's ``creationTimestamp: null`` does not come back either).

The field table is ``protobuf_schema.json`` (generated from the Go types by go/tools/protogen), read
through ``protobuf.py``, whose decoder applies the same rules to protobuf bodies: a JSON and a
protobuf create of the same object store the same thing. Values of the wrong JSON type are left
alone for validation to report; custom-form types (Time, Quantity, IntOrString, raw JSON) keep the
value sent. Custom resources are not Go types and are stored as sent.
"""

from __future__ import annotations

from typing import Any

from controllers.sim.protobuf import CONST, LIST, MAP, MESSAGES, SKIP, Field, Message, message_for, zero_value


def _empty(value: Any) -> bool:
    """Go's zero value of the field's type, for ``omitempty`` (a value of another type is not: it is
    validation's to report)."""
    if value is False or value == "" or value == [] or value == {}:
        return True
    return type(value) in (int, float) and value == 0


def _absent(field: Field, out: dict[str, Any]) -> None:
    """What encoding/json writes for a field that is nil or zero in the struct (null is nil too)."""
    if field.absent == SKIP:
        return
    if field.absent == CONST:
        out[field.json] = field.const
        return
    value = zero_value(field.type)
    if not (field.omitzero and value is None):
        out[field.json] = value


def _value(field: Field, value: Any) -> Any:
    if field.scalar:
        return value
    msg = MESSAGES[field.type]
    if msg.form or not isinstance(value, dict):
        return value  # a custom JSON form, or the wrong type: validation's to report
    return encode_message(msg, value)


# Per message: JSON name -> field (embedded structs' fields promoted), and the fields that are
# written even when absent (zero scalars without omitempty, structs held by value, nil slices as null).
_PLANS: dict[str, tuple[dict[str, Field], tuple[Field, ...]]] = {}


def _plan(msg: Message) -> tuple[dict[str, Field], tuple[Field, ...]]:
    plan = _PLANS.get(msg.name)
    if plan is None:
        by_json: dict[str, Field] = {}
        always: list[Field] = []
        for f in msg.fields:
            if f.inline:
                inner, inner_always = _plan(MESSAGES[f.type])
                by_json.update(inner)
                always.extend(inner_always)
            elif f.json != "-":
                by_json[f.json] = f
                if f.absent != SKIP:
                    always.append(f)
        plan = _PLANS[msg.name] = (by_json, tuple(always))
    return plan


def encode_message(msg: Message, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` decoded into the struct ``msg`` describes and encoded again (keys the struct does
    not declare are gone)."""
    by_json, always = _plan(msg)
    out: dict[str, Any] = {}
    for name, value in obj.items():
        field = by_json.get(name)
        if field is None or value is None:
            continue
        if field.drop_if_empty and _empty(value):
            continue
        if field.scalar:
            pass
        elif field.shape == LIST:
            if isinstance(value, list):
                value = [_value(field, v) if v is not None else zero_value(field.type) for v in value]
        elif field.shape == MAP:
            if isinstance(value, dict):
                value = {k: _value(field, v) for k, v in value.items()}
        else:
            value = _value(field, value)
        out[name] = value
    for field in always:
        if field.json not in out:
            _absent(field, out)
    return out


_MESSAGE_OF: dict[tuple[str, str], Message | None] = {}


def message_of(api_version: str, kind: str) -> Message | None:
    key = (api_version, kind)
    if key not in _MESSAGE_OF:
        name = message_for(api_version, kind)
        _MESSAGE_OF[key] = MESSAGES.get(name) if name else None
    return _MESSAGE_OF[key]


def encode(api_version: str, kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The object of a built-in kind as the API server would store it (see the module docstring);
    ``obj`` unchanged for a kind without a Go type here."""
    msg = message_of(api_version, kind)
    if msg is None:
        return obj
    out = {k: obj[k] for k in ("apiVersion", "kind") if k in obj}
    out.update(encode_message(msg, obj))
    return out


def encode_field(api_version: str, kind: str, name: str, value: Any) -> Any:
    """One top-level field (a status written through /status) as the API server stores it."""
    msg = message_of(api_version, kind)
    if msg is None:
        return value
    return encode_message(msg, {name: value}).get(name)


_ZEROS: dict[tuple[str, str], dict[str, Any]] = {}


def zero(api_version: str, kind: str) -> dict[str, Any]:
    """The JSON of the kind's Go zero value (what server-side field tracking compares a create
    with), or ``{}`` for a kind without a Go type here. Shared: callers must not change it."""
    cached = _ZEROS.get((api_version, kind))
    if cached is None:
        msg = message_of(api_version, kind)
        cached = _ZEROS[(api_version, kind)] = encode_message(msg, {}) if msg is not None else {}
    return cached
