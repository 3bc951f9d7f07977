"""Built-in objects decoded the way the API server's Go types decode them: wrong types and unknown fields.

A real API server decodes a JSON body into the kind's Go struct with ``encoding/json`` (strict mode of
``sigs.k8s.io/json``). That has two outcomes the simulator must reproduce, because clients see both:

* a value of the wrong JSON type (a number where a string belongs, ``"two"`` replicas, ``data``
  as a string) fails the whole request: 400 ``ConfigMap in version "v1" cannot be handled as a
  ConfigMap: json: cannot unmarshal number into Go struct field ConfigMap.data of type string``.
  Go names the innermost struct, the JSON field path from the root without list indices or map
  keys, and the Go type (``int32``, ``[]v1.Container``, ``map[string]string``); it reports the
  first such error in document order. ``[]byte`` fields (a Secret's ``data``) must be base64;
* a field the struct does not have, and a field given twice, are *strict decoding errors*: they
  never reach storage (the struct has nowhere to put them), and whether the request fails, warns or
  says nothing is the client's choice (``fieldValidation``, see ``fieldvalidation``). Their paths
  do carry indices and keys: ``spec.template.spec.containers[0].foo``, ``data.k``.

The field tables are the ones the protobuf decoder uses (``protobuf_schema.json``, generated from
the Go types of the same Kubernetes release as the real server), so the two decoders agree on which
fields exist; the custom JSON forms (``Time``, ``Quantity``, ``IntOrString``, raw JSON) accept what
their ``UnmarshalJSON`` accepts. Kinds without a table (none of the served built-ins today) are not
checked. ``null`` is accepted anywhere, as ``encoding/json`` leaves the zero value.

Server-side apply reads the same object through structured-merge-diff instead: an unknown field or
a wrong type there is a 500 ``failed to create typed patch object (ns/name; /v1, Kind=ConfigMap):
.extra: field not declared in schema`` (``apply_errors``).
"""

from __future__ import annotations

import binascii
import re
from dataclasses import dataclass
from typing import Any

import orjson

from controllers.sim import protobuf
from controllers.sim.codec import go_float
from controllers.sim.errors import StatusError, bad_request
from controllers.sim.protobuf import LIST, MAP, MESSAGES, Message
from controllers.sim.schema import list_strategy

_INT_RANGE = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
              "uint32": (0, 2**32 - 1), "uint64": (0, 2**64 - 1)}
# Go's name for a scalar type in "of type ..." (a []byte is a []uint8 to reflection).
_GO_SCALAR = {"bytes": "[]uint8", "float32": "float32", "float64": "float64"}
_RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
_BASE64 = re.compile(r"^[A-Za-z0-9+/\r\n]*={0,2}$")


class Duplicate(dict[str, Any]):
    """A JSON object that had a key twice: ``pairs`` keeps every occurrence in document order
    (built by ``fieldvalidation`` only when a body may hold duplicates; plain dicts otherwise)."""

    pairs: list[tuple[str, Any]]


class DecodeError(Exception):
    """Go's first ``UnmarshalTypeError`` (or a custom ``UnmarshalJSON``'s error): the text after
    ``cannot be handled as a Kind: ``."""


@dataclass(frozen=True, slots=True)
class _Slot:
    """One JSON field of a struct: its protobuf field and, for a struct type, its message."""

    field: protobuf.Field
    message: Message | None


_TABLES: dict[str, dict[str, _Slot]] = {}


def _table(msg: Message) -> dict[str, _Slot]:
    """JSON name -> slot, embedded (inline) structs' fields promoted as encoding/json does."""
    table = _TABLES.get(msg.name)
    if table is None:
        table = {}
        for f in msg.fields:
            sub = None if f.scalar else MESSAGES.get(f.type)
            if f.inline and sub is not None:
                table.update(_table(sub))
            elif f.json and f.json != "-":
                table[f.json] = _Slot(f, sub)
        _TABLES[msg.name] = table
    return table


def _go_name(type_: str) -> str:
    """``int32``, ``v1.Container``, ``intstr.IntOrString``: a type as Go's errors print it."""
    if type_ in protobuf.SCALARS:
        return _GO_SCALAR.get(type_, type_)
    package, _, short = type_.rpartition(".")
    return f"{package.rpartition('.')[2]}.{short}"


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _base64_error(text: str) -> str | None:
    """Go's ``illegal base64 data at input byte N`` for what base64.StdEncoding rejects, else None."""
    if _BASE64.match(text):
        stripped = text.replace("\r", "").replace("\n", "")
        try:
            binascii.a2b_base64(stripped, strict_mode=True)
            return None
        except binascii.Error:
            return f"illegal base64 data at input byte {max(len(text) - 1, 0)}"
    for i, ch in enumerate(text):
        if not (ch.isascii() and (ch.isalnum() or ch in "+/=\r\n")):
            return f"illegal base64 data at input byte {i}"
    return f"illegal base64 data at input byte {len(text)}"


@dataclass
class Findings:
    """What a decode found: the strict issues in document order (``unknown field "x"``,
    ``duplicate field "y"``) and the unknown fields to drop, dropped only by ``prune`` so that a
    request that fails still has the body it was sent."""

    issues: list[str]
    unknown: list[tuple[dict[str, Any], str]]

    def prune(self) -> None:
        for obj, key in self.unknown:
            obj.pop(key, None)


class _Walk:
    """One decode: the strict issues found so far and Go's first type error."""

    def __init__(self) -> None:
        self.issues: list[str] = []
        self.unknown: list[tuple[dict[str, Any], str]] = []
        self.first_error: str | None = None

    def fail(self, value: Any, struct: str, stack: list[str], go_type: str, literal: bool = False) -> None:
        if self.first_error is None:
            what = _json_kind(value)
            if literal and what == "number":
                what = f"number {value!r}"
            self.first_error = (f"json: cannot unmarshal {what} into Go struct field {struct}."
                                f"{'.'.join(stack)} of type {go_type}")

    def custom(self, message: str) -> None:
        if self.first_error is None:
            self.first_error = message

    def struct(self, obj: dict[str, Any], msg: Message, path: str, stack: list[str], top: bool = False) -> None:
        table = _table(msg)
        pairs = obj.pairs if isinstance(obj, Duplicate) else list(obj.items())
        seen: set[str] = set()
        for key, value in pairs:
            slot = table.get(key)
            if key in seen:  # encoding/json decodes every occurrence; the last one stays
                self.issues.append(f'duplicate field "{path}{key}"')
            elif slot is None and not (top and key in ("apiVersion", "kind")):
                self.unknown.append((obj, key))
                self.issues.append(f'unknown field "{path}{key}"')
            seen.add(key)
            if slot is not None and value is not None:
                self.field(value, slot, msg.short, path + key, [*stack, key])

    def field(self, value: Any, slot: _Slot, struct: str, path: str, stack: list[str]) -> None:
        f = slot.field
        if f.shape == LIST:
            if not isinstance(value, list):
                self.fail(value, struct, stack, "[]" + _go_name(f.type))
                return
            for i, item in enumerate(value):
                if item is not None:
                    self.one(item, slot, struct, f"{path}[{i}]", stack)
        elif f.shape == MAP:
            if not isinstance(value, dict):
                self.fail(value, struct, stack, "map[string]" + _go_name(f.type))
                return
            pairs = value.pairs if isinstance(value, Duplicate) else value.items()
            seen: set[str] = set()
            for key, item in pairs:
                if key in seen:
                    self.issues.append(f'duplicate field "{path}.{key}"')
                seen.add(key)
                if item is not None:
                    self.one(item, slot, struct, f"{path}.{key}", stack)
        else:
            self.one(value, slot, struct, path, stack)

    def one(self, value: Any, slot: _Slot, struct: str, path: str, stack: list[str]) -> None:
        f = slot.field
        if f.scalar:
            self.scalar(value, f.type, struct, stack)
            return
        msg = slot.message
        if msg is None:
            return
        if msg.form:
            self.form(value, msg, struct, stack)
            return
        if not isinstance(value, dict):
            self.fail(value, struct, stack, _go_name(f.type))
            return
        self.struct(value, msg, path + ".", stack)

    def scalar(self, value: Any, type_: str, struct: str, stack: list[str]) -> None:
        if type_ == "string":
            if not isinstance(value, str):
                self.fail(value, struct, stack, "string")
        elif type_ == "bool":
            if not isinstance(value, bool):
                self.fail(value, struct, stack, "bool")
        elif type_ in _INT_RANGE:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(value, struct, stack, type_)
            else:
                low, high = _INT_RANGE[type_]
                if isinstance(value, float) or not low <= value <= high:
                    self.fail(value, struct, stack, type_, literal=True)
        elif type_ == "bytes":
            if not isinstance(value, str):
                self.fail(value, struct, stack, "[]uint8")
            else:
                error = _base64_error(value)
                if error:
                    self.custom(error)
        elif isinstance(value, bool) or not isinstance(value, (int, float)):  # float32/float64
            self.fail(value, struct, stack, _go_name(type_))

    def form(self, value: Any, msg: Message, struct: str, stack: list[str]) -> None:
        """Types with their own UnmarshalJSON: what each accepts."""
        if msg.form in ("Time", "MicroTime"):
            if not isinstance(value, str):
                self.custom(f"json: cannot unmarshal {_json_kind(value)} into Go value of type string")
            elif not _RFC3339.match(value):
                self.custom(f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": cannot parse '
                            f'"{value}" as "2006"')
        elif msg.form == "Quantity":
            text = value if isinstance(value, str) else None if isinstance(value, bool) else \
                str(value) if isinstance(value, (int, float)) else None
            if text is None or not protobuf._QUANTITY.match(text):
                self.custom(f"quantities must match the regular expression '{protobuf._QUANTITY.pattern}'")
        elif msg.form == "IntOrString":
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                self.custom(f"json: cannot unmarshal {_json_kind(value)} into Go value of type int32")
        elif msg.form == "Items":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                self.fail(value, struct, stack, "[]string")
        # RawJSON (RawExtension, JSON, FieldsV1) and the JSON-schema unions take any JSON.


def message_of(api_version: str, kind: str) -> Message | None:
    name = protobuf.message_for(api_version, kind)
    return MESSAGES.get(name) if name else None


def decode(api_version: str, kind: str, obj: dict[str, Any]) -> Findings:
    """Check ``obj`` against the kind's Go type: a wrong type raises ``DecodeError``; the strict
    issues and unknown fields are returned. Kinds without a table have none."""
    msg = message_of(api_version, kind)
    walk = _Walk()
    if msg is not None:
        walk.struct(obj, msg, "", [], top=True)
    if walk.first_error is not None:
        raise DecodeError(walk.first_error)
    return Findings(walk.issues, walk.unknown)


OBJECT_META = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"


def decode_metadata(meta: Any, path: str) -> Findings:
    """``decode`` for one ObjectMeta (a custom resource's, an embedded resource's): the only typed
    part of a custom resource. ``path`` is where it sits (``metadata``, ``spec.template.metadata``)."""
    walk = _Walk()
    if isinstance(meta, dict):
        walk.struct(meta, MESSAGES[OBJECT_META], path + ".", ["metadata"])
    if walk.first_error is not None:
        raise DecodeError(walk.first_error)
    return Findings(walk.issues, walk.unknown)


def cannot_handle(kind: str, version: str, detail: str) -> StatusError:
    """The 400 of a body the kind's type cannot hold."""
    return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}')


# ---- server-side apply: structured-merge-diff's view of the same types ------------------------


def _smd_got(value: Any) -> str:
    """Go's %T of the unstructured value SMD complains about."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    return "[]interface {}" if isinstance(value, list) else "map[string]interface {}"


def _go_sharp_v(value: Any) -> str:
    """Go's ``%#v`` of an unstructured value: ``1`` for the float 1.0, ``"x"``, ``true``,
    ``[]interface {}{1}``, ``map[string]interface {}{"a":1}`` (keys sorted, as fmt sorts them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return orjson.dumps(value).decode()
    if isinstance(value, list):
        return "[]interface {}{" + ", ".join(_go_sharp_v(v) for v in value) + "}"
    if isinstance(value, dict):
        return "map[string]interface {}{" + ", ".join(
            f"{orjson.dumps(str(k)).decode()}:{_go_sharp_v(v)}" for k, v in sorted(value.items())) + "}"
    return "<nil>"


def _smd_element(key: str, item: Any, index: int) -> str:
    """A list element in an SMD path: ``[name="web"]`` by merge key, ``[="a"]`` in a set, else ``[0]``."""
    if key and isinstance(item, dict) and key in item:
        value = item[key]
        return f'[{key}="{value}"]' if isinstance(value, str) else f"[{key}={value}]"
    if key == "" and isinstance(item, (str, int, float)) and not isinstance(item, bool):
        return f'[="{item}"]' if isinstance(item, str) else f"[={item}]"
    return f"[{index}]"


class _ApplyWalk:
    """Every error ``typed.ParseableType.FromUnstructured`` finds, in document order."""

    def __init__(self, key: tuple[str, str]) -> None:
        self.key = key
        self.errors: list[str] = []

    def struct(self, obj: dict[str, Any], msg: Message, path: str, dotted: str, top: bool = False) -> None:
        table = _table(msg)
        fields = sorted((name, value) for name, value in obj.items()
                        if not (top and name in ("apiVersion", "kind")))  # TypeMeta
        # A struct with a field its type lacks is reported for those alone, before any other
        # error, and its fields are not walked (as the real server reports it).
        undeclared = [f"{path}.{name}: field not declared in schema" for name, _ in fields if name not in table]
        if undeclared:
            self.errors[:0] = undeclared
            return
        for name, value in fields:
            if value is not None:
                self.field(value, table[name], f"{path}.{name}", f"{dotted}.{name}".lstrip("."))

    def field(self, value: Any, slot: _Slot, path: str, dotted: str) -> None:
        f = slot.field
        if f.shape == LIST:
            if not isinstance(value, list):
                self.errors.append(f"{path}: expected list, got {_smd_got(value)}")
                return
            key = list_strategy(self.key, True, dotted)
            for i, item in enumerate(value):
                if item is not None:
                    self.one(item, slot, path + _smd_element(key or "", item, i) if key is not None
                             else f"{path}[{i}]", dotted)
        elif f.shape == MAP:
            if not isinstance(value, dict):
                self.errors.append(f"{path}: expected map, got {_smd_got(value)}")
                return
            for name, item in sorted(value.items()):  # smd walks a map's keys in order
                if item is not None:
                    self.one(item, slot, f"{path}.{name}", dotted)
        else:
            self.one(value, slot, path, dotted)

    def one(self, value: Any, slot: _Slot, path: str, dotted: str) -> None:
        f = slot.field
        msg = slot.message
        if f.scalar:
            kind = "string" if f.type in ("string", "bytes") else "boolean" if f.type == "bool" else "numeric"
            ok = isinstance(value, str) if kind == "string" else isinstance(value, bool) if kind == "boolean" \
                else isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok:
                got = (f"&value.valueUnstructured{{Value:{_go_sharp_v(value)}}}" if kind == "string" else
                       _smd_got(value) if kind == "numeric" else repr(value))
                self.errors.append(f"{path}: expected {kind if kind != 'numeric' else 'numeric (int or float)'}, "
                                   f"got {got}")
        elif msg is not None and not msg.form:
            if not isinstance(value, dict):
                self.errors.append(f"{path}: expected map, got {_smd_got(value)}")
            else:
                self.struct(value, msg, path, dotted)


def apply_errors(api_version: str, kind: str, key: tuple[str, str], doc: dict[str, Any]) -> list[str]:
    """Why server-side apply cannot build a typed object of ``doc`` (empty when it can)."""
    msg = message_of(api_version, kind)
    if msg is None:
        return []
    walk = _ApplyWalk(key)
    walk.struct(doc, msg, "", "", top=True)
    return walk.errors


def typed_patch_failed(doc: dict[str, Any], errors: list[str]) -> StatusError:
    """Server-side apply's 500 (no reason: a plain Go error) for a configuration its type cannot hold."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    meta = {k: v for k, v in meta.items() if isinstance(v, str)}  # Go's GetName() of a non-string is ""
    api_version = str(doc.get("apiVersion") or "")
    group, _, version = api_version.rpartition("/")
    detail = errors[0] if len(errors) == 1 else "errors:\n" + "\n".join(f"  {e}" for e in errors)
    return StatusError(500, f"failed to create typed patch object ({meta.get('namespace') or ''}/"
                            f"{meta.get('name') or ''}; {group}/{version}, Kind={doc.get('kind')}): {detail}",
                       reason="")
