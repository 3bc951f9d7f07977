"""Kubernetes protobuf request bodies, decoded into the JSON the API server would have stored.

kubectl's typed clients (``kubectl create namespace|configmap|secret|deployment|service``,
``expose``, ``auth can-i``, the deletes of ``drain``) send ``Content-Type:
application/vnd.kubernetes.protobuf``. The body is an envelope:

    "k8s\\x00" | runtime.Unknown{ typeMeta{apiVersion=1, kind=2} = 1, raw = 2,
                                  contentEncoding = 3, contentType = 4 }

and ``raw`` is the object's own message. Decoding happens in three layers:

1. ``read_fields`` is a generic protobuf wire-format reader (varint, 64-bit, length-delimited,
   32-bit) that knows nothing about Kubernetes;
2. ``protobuf_messages.MESSAGES`` says, per message, what each field number is (its JSON name and
   Go type), compiled once into ``Field`` records;
3. ``_Decoder`` turns fields into JSON the way the API server does — gogo-protobuf unmarshals into
   Go structs and ``encoding/json`` marshals them back: ``omitempty`` drops zero scalars and empty
   slices and maps but never a struct held by value (hence ``resources: {}``, ``strategy: {}`` and
   ``creationTimestamp: null``), a pointer appears exactly when it was on the wire, a repeated
   message field that occurs twice is merged, and ``Time``, ``Quantity``, ``IntOrString``, ``[]byte``
   and ``FieldsV1`` take their custom JSON forms.

The result then goes through the same defaulting, validation and storage as a JSON body, so a
protobuf create and a JSON create of the same object store the same thing. Anything the decoder
cannot read exactly — bad magic, truncated data, a wire type that does not match the field, a field
number outside the table — is a 400 naming the message and field, never a partial object or a 500.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from controllers.sim.errors import StatusError, bad_request
from controllers.sim.protobuf_messages import KINDS, MESSAGES

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
SCALARS = frozenset(("string", "bytes", "bool", "int32", "int64"))
_WIRE_OF = {"string": LENGTH, "bytes": LENGTH, "bool": VARINT, "int32": VARINT, "int64": VARINT}


class ProtobufError(Exception):
    """Malformed or undecodable protobuf; ``decode`` turns it into a 400 with the message context."""


# ---- layer 1: wire format --------------------------------------------------------------------


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes")


def read_fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) for each field of one message, in wire order.

    Varints and fixed-width values are unsigned ints; length-delimited values are the raw bytes.
    Groups (wire types 3 and 4) were never used by Kubernetes and are rejected.
    """
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0 is invalid")
        if wire == VARINT:
            value, pos = _varint(data, pos)
            yield number, wire, value
        elif wire in (FIXED64, FIXED32):
            width = 8 if wire == FIXED64 else 4
            if pos + width > len(data):
                raise ProtobufError(f"field {number}: truncated {width * 8}-bit value")
            yield number, wire, int.from_bytes(data[pos:pos + width], "little")
            pos += width
        elif wire == LENGTH:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise ProtobufError(f"field {number}: length {length} runs past the end of the message")
            yield number, wire, data[pos:pos + length]
            pos += length
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire}")


# ---- layer 2: the schema table ---------------------------------------------------------------


@dataclass(frozen=True)
class Field:
    """One field of a message: how it appears in JSON and how Go's encoding/json treats it."""

    json: str
    type: str  # a scalar name or a message name
    shape: str  # "one", "list" or "map"
    pointer: bool
    omitempty: bool
    inline: bool

    @property
    def scalar(self) -> bool:
        return self.type in SCALARS


def _parse_field(spec: str) -> Field:
    name, gotype, *tags = spec.split()
    shape, pointer = "one", False
    if gotype.startswith("[]"):
        shape, gotype = "list", gotype[2:]
    elif gotype.startswith("map[string]"):
        shape, gotype = "map", gotype[len("map[string]"):]
    elif gotype.startswith("*"):
        pointer, gotype = True, gotype[1:]
    return Field(json=name, type=gotype, shape=shape, pointer=pointer, omitempty="omitempty" in tags,
                 inline="inline" in tags)


SCHEMA: dict[str, dict[int, Field]] = {
    msg: {number: _parse_field(spec) for number, spec in fields.items()} for msg, fields in MESSAGES.items()
}


# ---- layer 3: Go's JSON forms ----------------------------------------------------------------

# The upstream Quantity grammar check (resource.ParseQuantity rejects anything else).
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")


def _time(fields: dict[str, Any], empty: bool) -> str | None:
    # metav1.Time marshals a zero time (written as an empty message) as null, else RFC 3339 in seconds.
    if empty:
        return None
    try:
        moment = datetime.fromtimestamp(fields["seconds"] + fields["nanos"] / 1e9, UTC)
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"time out of range: {fields['seconds']}s") from None
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _micro_time(fields: dict[str, Any], empty: bool) -> str | None:
    # metav1.MicroTime: like Time, but RFC 3339 with six fractional digits (Lease renewTime, eventTime).
    if empty:
        return None
    try:
        moment = datetime.fromtimestamp(fields["seconds"], UTC).replace(microsecond=fields["nanos"] // 1000)
    except (OverflowError, OSError, ValueError):
        raise ProtobufError(f"time out of range: {fields['seconds']}s / {fields['nanos']}ns") from None
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _quantity(fields: dict[str, Any], empty: bool) -> str:
    text = fields["string"]
    if empty:
        return "0"
    if not _QUANTITY.match(text):
        raise ProtobufError(f"quantity {text!r}: quantities must match the regular expression "
                            f"'{_QUANTITY.pattern}'")
    return text


def _int_or_string(fields: dict[str, Any], empty: bool) -> int | str:
    if fields["type"] == 0:
        return int(fields["intVal"])
    if fields["type"] == 1:
        return str(fields["strVal"])
    raise ProtobufError(f"IntOrString type {fields['type']} is neither 0 (int) nor 1 (string)")


def _fields_v1(fields: dict[str, Any], empty: bool) -> Any:
    # FieldsV1 carries its JSON verbatim (null when unset); the decoder has base64-encoded the bytes.
    raw = base64.b64decode(fields["Raw"])
    if not raw:
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ProtobufError(f"FieldsV1 is not JSON: {e}") from None


def _extra_value(fields: dict[str, Any], empty: bool) -> list[str] | None:
    return fields["items"]  # ExtraValue is a []string on the Go side


_JSON_FORMS: dict[str, Callable[[dict[str, Any], bool], Any]] = {
    "Time": _time,
    "MicroTime": _micro_time,
    "Quantity": _quantity,
    "IntOrString": _int_or_string,
    "FieldsV1": _fields_v1,
    "ExtraValue": _extra_value,
}


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


_SCALAR_ZERO: dict[str, Any] = {"string": "", "bytes": "", "bool": False, "int32": 0, "int64": 0}


class _Decoder:
    """Decodes one message tree; ``path`` names where in the object an error happened."""

    def message(self, data: bytes, msg: str, path: str) -> Any:
        schema = SCHEMA[msg]
        seen: dict[int, list[int | bytes]] = {}
        try:
            for number, wire, value in read_fields(data):
                field = schema.get(number)
                if field is None:
                    raise ProtobufError(f"unknown field {number} in {msg} (not decoded by the simulator; "
                                        f"send JSON instead)")
                expected = _WIRE_OF[field.type] if field.scalar and field.shape != "map" else LENGTH
                if field.shape == "list" and expected == VARINT and wire == LENGTH:
                    assert isinstance(value, bytes)
                    seen.setdefault(number, []).extend(self._packed(value))
                    continue
                if wire != expected:
                    raise ProtobufError(f"field {number} ({field.json}) of {msg} has wire type {wire}, "
                                        f"expected {expected}")
                seen.setdefault(number, []).append(value)
        except ProtobufError as e:
            raise ProtobufError(f"{path or msg}: {e}") from None
        out: dict[str, Any] = {}
        for number, field in schema.items():
            where = f"{path}.{field.json}" if path else field.json
            if number in seen:
                value = self._value(field, seen[number], where)
            elif field.pointer:
                continue  # a nil pointer
            elif field.shape != "one":
                value = None  # a nil slice or map
            else:
                value = self._zero(field.type, where)
            if field.inline:
                out.update(value)
            # omitempty drops zero scalars and empty slices and maps; never a struct or a set pointer.
            elif not (field.omitempty and not field.pointer and (field.scalar or field.shape != "one")
                      and not value):
                out[field.json] = value
        form = _JSON_FORMS.get(msg)
        if form is None:
            return out
        try:
            return form(out, not data)
        except ProtobufError as e:
            raise ProtobufError(f"{path or msg}: {e}") from None

    def _zero(self, type_: str, path: str) -> Any:
        """The JSON of a Go zero value: absent value-typed fields still marshal."""
        return _SCALAR_ZERO[type_] if type_ in _SCALAR_ZERO else self.message(b"", type_, path)

    @staticmethod
    def _packed(data: bytes) -> list[int | bytes]:
        values: list[int | bytes] = []
        pos = 0
        while pos < len(data):
            value, pos = _varint(data, pos)
            values.append(value)
        return values

    def _value(self, field: Field, values: list[int | bytes], path: str) -> Any:
        if field.shape == "list":
            return [self._one(field.type, v, f"{path}[{i}]") for i, v in enumerate(values)]
        if field.shape == "map":
            entries: dict[str, Any] = {}
            for raw in values:
                assert isinstance(raw, bytes)
                key, value = self._entry(field, raw, path)
                entries[key] = value
            return entries
        if field.scalar:
            return self._one(field.type, values[-1], path)  # proto: the last occurrence wins
        # proto: occurrences of an embedded message merge, which is decoding their concatenation.
        return self._one(field.type, b"".join(v for v in values if isinstance(v, bytes)), path)

    def _entry(self, field: Field, raw: bytes, path: str) -> tuple[str, Any]:
        key: Any = ""
        value: int | bytes | None = None
        try:
            for number, wire, v in read_fields(raw):
                if number == 1 and wire == LENGTH:
                    key = v
                elif number == 2 and wire == (LENGTH if not field.scalar else _WIRE_OF[field.type]):
                    value = v
                else:
                    raise ProtobufError(f"map entry field {number} with wire type {wire} is invalid")
        except ProtobufError as e:
            raise ProtobufError(f"{path}: {e}") from None
        name = key.decode("utf-8", "replace") if isinstance(key, bytes) else ""
        if value is None:
            return name, self._zero(field.type, f"{path}[{name}]")
        return name, self._one(field.type, value, f"{path}[{name}]")

    def _one(self, type_: str, value: int | bytes, path: str) -> Any:
        if type_ == "string":
            assert isinstance(value, bytes)
            # Go strings carry any bytes; encoding/json writes invalid UTF-8 as U+FFFD.
            return value.decode("utf-8", "replace")
        if type_ == "bytes":
            assert isinstance(value, bytes)
            return base64.b64encode(value).decode()
        if type_ == "bool":
            return bool(value)
        if type_ == "int32":
            assert isinstance(value, int)
            return _signed(value, 32)
        if type_ == "int64":
            assert isinstance(value, int)
            return _signed(value, 64)
        assert isinstance(value, bytes)
        return self.message(value, type_, path)


def _envelope(body: bytes) -> tuple[str, str, bytes]:
    """(apiVersion, kind, raw) of a ``k8s\\x00`` + ``runtime.Unknown`` body."""
    if body[:4] != MAGIC:
        raise ProtobufError("the body does not start with the Kubernetes protobuf magic number 6b 38 73 00")
    type_meta, raw, encoding, ctype = b"", b"", b"", b""
    for number, wire, value in read_fields(body[4:]):
        if wire != LENGTH:
            raise ProtobufError(f"runtime.Unknown field {number} has wire type {wire}, expected {LENGTH}")
        assert isinstance(value, bytes)
        if number == 1:
            type_meta = value
        elif number == 2:
            raw = value
        elif number == 3:
            encoding = value
        elif number == 4:
            ctype = value
        else:
            raise ProtobufError(f"unknown field {number} in runtime.Unknown")
    if encoding or ctype:
        raise ProtobufError(f"runtime.Unknown with contentEncoding {encoding!r} / contentType {ctype!r} is not "
                            "supported (raw must be a protobuf message)")
    api_version = kind = ""
    for number, wire, value in read_fields(type_meta):
        if wire != LENGTH or number not in (1, 2):
            raise ProtobufError(f"runtime.TypeMeta field {number} (wire type {wire}) is invalid")
        assert isinstance(value, bytes)
        if number == 1:
            api_version = value.decode("utf-8", "replace")
        else:
            kind = value.decode("utf-8", "replace")
    return api_version, kind, raw


def decode(body: bytes) -> dict[str, Any]:
    """The JSON object a protobuf request body stands for; 400 when it cannot be decoded exactly."""
    try:
        api_version, kind, raw = _envelope(body)
        msg = KINDS.get(kind)
        if msg is None:
            raise StatusError(415, f"the simulator cannot decode protobuf {kind or 'objects without a kind'} "
                                   f"({api_version or 'no apiVersion'}); send it as application/json",
                              reason="UnsupportedMediaType")
        obj = _Decoder().message(raw, msg, "")
    except ProtobufError as e:
        raise bad_request(f"unable to decode protobuf body: {e}") from None
    return {"apiVersion": api_version, "kind": kind, **obj}
