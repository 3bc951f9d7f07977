"""Kubernetes protobuf request bodies, decoded into the JSON the API server would have stored.

Go clients send protobuf for every built-in kind: client-go's typed clients and controller-runtime
(``Content-Type: application/vnd.kubernetes.protobuf``), kubectl's typed commands (``create
namespace|configmap|secret|deployment|service``, ``expose``, ``auth can-i``, the deletes of
``drain``). The body is an envelope:

    "k8s\\x00" | runtime.Unknown{ typeMeta{apiVersion=1, kind=2} = 1, raw = 2,
                                  contentEncoding = 3, contentType = 4 }

and ``raw`` is the object's own message. Decoding happens in three layers:

1. ``read_fields`` is a generic protobuf wire-format reader (varint, 64-bit, length-delimited,
   32-bit) that knows nothing about Kubernetes;
2. ``protobuf_schema.json`` says, per message, what each field number is (its JSON name, type and
   how Go's ``encoding/json`` treats it). It is generated from the Go types of every kind the
   simulator serves by ``go/tools/protogen`` (never edited by hand), loaded once and compiled into
   ``Message`` / ``Field`` records;
3. ``_Decoder`` turns fields into JSON the way the API server does — gogo-protobuf unmarshals into
   Go structs and ``encoding/json`` marshals them back: fields in Go declaration order,
   ``omitempty`` drops zero scalars and empty slices and maps but never a struct held by value
   (hence ``resources: {}`` and ``strategy: {}``), ``omitzero`` drops a zero ``Time`` (ObjectMeta's
   ``creationTimestamp`` since k8s.io/apimachinery 0.35), a pointer appears exactly when it was on
   the wire (``null`` when absent and not omitempty), map keys come out sorted, a repeated message
   field that occurs twice is merged, and ``Time``, ``MicroTime``, ``Duration``, ``Quantity``,
   ``IntOrString``, ``[]byte``, raw JSON (``FieldsV1``, ``RawExtension``, ``apiextensions JSON``)
   and the JSON-schema unions of CRDs take their custom JSON forms.

The result then goes through the same defaulting, validation and storage as a JSON body, so a
protobuf create and a JSON create of the same object store the same thing. Anything the decoder
cannot read exactly — bad magic, truncated data, a wire type that does not match the field, a field
number outside the table (a field newer than k8s.io/api of the table) — is a 400 naming the
message and field, never a partial object or a 500.
"""

from __future__ import annotations

import base64
import math
import re
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from controllers.sim.errors import StatusError, bad_request

MEDIA_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"
SCHEMA_FILE = Path(__file__).with_name("protobuf_schema.json")

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
_WIRE_OF = {"string": LENGTH, "bytes": LENGTH, "bool": VARINT, "int32": VARINT, "int64": VARINT,
            "uint32": VARINT, "uint64": VARINT, "float64": FIXED64, "float32": FIXED32}
SCALARS = frozenset(_WIRE_OF)
ONE, LIST, MAP = "one", "list", "map"
# The JSON of an absent scalar: Go's zero value (a nil []byte is null).
_SCALAR_ZERO: dict[str, Any] = {"string": "", "bytes": None, "bool": False, "int32": 0, "int64": 0,
                                "uint32": 0, "uint64": 0, "float64": 0, "float32": 0}


class ProtobufError(Exception):
    """Malformed or undecodable protobuf; ``decode`` turns it into a 400 with the message context.

    ``where`` collects the path to the message the error happened in while the error unwinds,
    innermost first ("[0]", ".containers", ...), so the decoder builds no paths on the happy path.
    """

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.where: list[str] = []

    def path(self) -> str:
        return "".join(reversed(self.where)).lstrip(".")


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


def _read_one(data: bytes, pos: int, number: int, wire: int) -> tuple[int | bytes, int]:
    """The value of a field whose key was just read, and the position after it."""
    if wire == LENGTH:
        length, pos = _varint(data, pos)
        end = pos + length
        if end > len(data):
            raise ProtobufError(f"field {number}: length {length} runs past the end of the message")
        return data[pos:end], end
    if wire == VARINT:
        return _varint(data, pos)
    if wire == FIXED64 or wire == FIXED32:
        width = 8 if wire == FIXED64 else 4
        if pos + width > len(data):
            raise ProtobufError(f"field {number}: truncated {width * 8}-bit value")
        return int.from_bytes(data[pos:pos + width], "little"), pos + width
    raise ProtobufError(f"field {number}: unsupported wire type {wire}")


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
        value, pos = _read_one(data, pos, number, wire)
        yield number, wire, value


# ---- scalars: wire values to their JSON -------------------------------------------------------


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _float(value: int, wire: int) -> float | int:
    number: float = struct.unpack("<d" if wire == FIXED64 else "<f", value.to_bytes(8 if wire == FIXED64 else 4,
                                                                                    "little"))[0]
    if not math.isfinite(number):
        raise ProtobufError(f"{number} cannot be represented in JSON")
    # encoding/json writes 5.0 as 5: keep integral floats integral so the stored JSON matches.
    return int(number) if number.is_integer() and abs(number) < 1e21 else number


def _string(value: bytes) -> str:
    # Go strings carry any bytes; encoding/json writes invalid UTF-8 as U+FFFD.
    return value.decode("utf-8", "replace")


def _int32(value: int) -> int:
    return value if value < 0x80000000 else _signed(value, 32)


def _int64(value: int) -> int:
    return value if value < 0x8000000000000000 else _signed(value, 64)


def _bytes(value: bytes) -> str:
    return base64.b64encode(value).decode()


# Wire value (an unsigned int or bytes) -> JSON value, per scalar type.
_CONVERT: dict[str, Callable[[Any], Any]] = {
    "string": _string,
    "bytes": _bytes,
    "bool": bool,
    "int32": _int32,
    "int64": _int64,
    "uint32": lambda v: v & 0xFFFFFFFF,
    "uint64": lambda v: v & 0xFFFFFFFFFFFFFFFF,
    "float64": lambda v: _float(v, FIXED64),
    "float32": lambda v: _float(v, FIXED32),
}


# A map entry without its value holds a zero value that is not nil ([]byte{}).
_ENTRY_ZERO: dict[str, Any] = {**_SCALAR_ZERO, "bytes": ""}


# ---- layer 2: the schema table ---------------------------------------------------------------


# What the decoder does with a field that was not on the wire (precomputed per field).
SKIP, CONST, ZERO = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: how it appears in JSON and how Go's encoding/json treats it."""

    number: int  # 0: a JSON field that is never on the wire (its zero value always marshals)
    json: str  # "-": decoded but not in JSON; "" with inline: an embedded struct
    type: str  # a scalar name or a message name
    shape: str  # ONE, LIST or MAP
    pointer: bool
    omitempty: bool
    omitzero: bool
    inline: bool
    scalar: bool
    wire: int  # the wire type of one value (a list's element, a map's value: LENGTH for entries)
    # omitempty drops false, 0, "", empty slices and maps and nil pointers; never a struct value.
    drop_if_empty: bool
    # When absent: SKIP it (omitted), write CONST (a nil pointer, slice or map, a zero scalar), or
    # write the ZERO value of its message type (a struct held by value).
    absent: int
    const: Any


def _compile_field(spec: dict[str, Any]) -> Field:
    type_ = spec["type"]
    shape = spec.get("shape") or ONE
    scalar = type_ in SCALARS
    pointer = bool(spec.get("pointer"))
    omitempty = bool(spec.get("omitempty"))
    omitzero = bool(spec.get("omitzero"))
    drop_if_empty = omitempty and not pointer and (scalar or shape != ONE)
    json_name = spec["json"]
    const: Any = None
    if json_name == "-" or (pointer and (omitempty or omitzero)) or drop_if_empty:
        absent = SKIP  # a nil pointer, or an omitempty scalar/slice/map, whose zero value is empty
    elif pointer or shape != ONE:
        absent = CONST  # null
    elif scalar:
        absent, const = CONST, _SCALAR_ZERO[type_]
    else:
        absent = ZERO
    return Field(
        number=spec["n"], json=json_name, type=type_, shape=shape, pointer=pointer, omitempty=omitempty,
        omitzero=omitzero, inline=bool(spec.get("inline")), scalar=scalar,
        wire=_WIRE_OF[type_] if scalar and shape != MAP else LENGTH,
        drop_if_empty=drop_if_empty, absent=absent, const=const,
    )


# How a decoded value is written into its parent.
P_SET, P_DROP_EMPTY, P_OMITZERO, P_INLINE, P_HIDDEN = range(5)


@dataclass(slots=True)
class Message:
    """A message's fields, plus the two per-field tables the decoder's loops run on (flat tuples:
    attribute lookups are a measurable share of decoding time)."""

    name: str  # the protobuf full name, k8s.io.api.core.v1.Pod
    short: str  # Pod, for error messages
    form: str  # "" or the custom JSON form (see FORMS)
    fields: tuple[Field, ...]  # Go declaration order: the order encoding/json writes
    by_number: dict[int, Field]
    # number -> (index in fields, expected wire type, a single scalar (the last occurrence wins))
    wire_of: dict[int, tuple[int, int, bool]]
    # per field, in order: (index, JSON name, absent action, absent constant, P_*, scalar converter)
    plan: tuple[tuple[int, str, int, Any, int, Callable[[Any], Any] | None], ...]


def _post(f: Field) -> int:
    if f.inline:
        return P_INLINE
    if f.json == "-":
        return P_HIDDEN
    if f.drop_if_empty:
        return P_DROP_EMPTY
    return P_OMITZERO if f.omitzero else P_SET


def _load(path: Path) -> tuple[dict[str, Message], dict[str, str]]:
    doc = orjson.loads(path.read_bytes())
    messages: dict[str, Message] = {}
    for name, spec in doc["messages"].items():
        fields = tuple(_compile_field(f) for f in spec["fields"])
        single = [f.scalar and f.shape == ONE for f in fields]
        messages[name] = Message(
            name=name, short=name.rsplit(".", 1)[-1], form=spec.get("form", ""), fields=fields,
            by_number={f.number: f for f in fields if f.number},
            wire_of={f.number: (i, f.wire, single[i]) for i, f in enumerate(fields) if f.number},
            plan=tuple((i, f.json, f.absent, f.const, _post(f), _CONVERT[f.type] if single[i] else None)
                       for i, f in enumerate(fields)),
        )
    return messages, doc["kinds"]


MESSAGES, KINDS = _load(SCHEMA_FILE)
# The older view some callers and tests read: message name -> field number -> Field.
SCHEMA: dict[str, dict[int, Field]] = {name: msg.by_number for name, msg in MESSAGES.items()}


def _kind_fallbacks(kinds: dict[str, str]) -> dict[str, str]:
    """Kind -> message for kinds that mean one message whatever the apiVersion says (the apiVersion is
    checked against the URL later, like any body's). DeleteOptions is registered in every group."""
    by_kind: dict[str, set[str]] = {}
    for key, msg in kinds.items():
        by_kind.setdefault(key.rsplit("/", 1)[-1], set()).add(msg)
    return {kind: next(iter(msgs)) for kind, msgs in by_kind.items() if len(msgs) == 1}


_BY_KIND = _kind_fallbacks(KINDS)


def message_for(api_version: str, kind: str) -> str | None:
    """The message name of a top-level object, or None when the simulator has no schema for it."""
    return KINDS.get(f"{api_version}/{kind}") or _BY_KIND.get(kind)


# ---- layer 3: Go's JSON forms ----------------------------------------------------------------

# The upstream Quantity grammar check (resource.ParseQuantity rejects anything else).
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GO_ZERO_TIME = datetime(1, 1, 1, tzinfo=UTC)  # time.Time{}: IsZero, so it marshals as null


def _moment(micros: int) -> datetime | None:
    try:
        moment = _EPOCH + timedelta(microseconds=micros)
    except OverflowError:
        raise ProtobufError(f"time out of range: {micros // 1_000_000}s") from None
    return None if moment == _GO_ZERO_TIME else moment


def _rfc3339(m: datetime, micro: bool) -> str:
    frac = f".{m.microsecond:06d}" if micro else ""
    return f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}{frac}Z"


def _time(fields: dict[str, Any], empty: bool) -> str | None:
    # metav1.Time: an empty message is the zero time (null); the rest is time.Unix(seconds, 0) —
    # nanos are dropped on read, as the API server does — in RFC 3339 to the second.
    if empty:
        return None
    moment = _moment(fields["seconds"] * 1_000_000)
    return None if moment is None else _rfc3339(moment, micro=False)


def _micro_time(fields: dict[str, Any], empty: bool) -> str | None:
    # metav1.MicroTime: nanos truncated toward zero to microseconds, RFC 3339 with six digits.
    if empty:
        return None
    nanos = fields["nanos"]
    micros = nanos // 1000 if nanos >= 0 else -(-nanos // 1000)
    moment = _moment(fields["seconds"] * 1_000_000 + micros)
    return None if moment is None else _rfc3339(moment, micro=True)


def _frac(value: int, digits: int) -> str:
    whole, rest = divmod(value, 10**digits)
    tail = f"{rest:0{digits}d}".rstrip("0")
    return f"{whole}.{tail}" if tail else str(whole)


def go_duration(nanos: int) -> str:
    """Go's time.Duration.String: 1h2m3.5s, 1.5ms, 0s."""
    if nanos == 0:
        return "0s"
    sign, u = ("-", -nanos) if nanos < 0 else ("", nanos)
    if u < 1000:
        return f"{sign}{u}ns"
    if u < 1_000_000:
        return f"{sign}{_frac(u, 3)}µs"
    if u < 1_000_000_000:
        return f"{sign}{_frac(u, 6)}ms"
    seconds, frac = divmod(u, 1_000_000_000)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = _frac(secs * 1_000_000_000 + frac, 9) + "s"
    if hours:
        return f"{sign}{hours}h{minutes}m{text}"
    if minutes:
        return f"{sign}{minutes}m{text}"
    return sign + text


def _duration(fields: dict[str, Any], empty: bool) -> str:
    return go_duration(fields["duration"])


def _quantity(fields: dict[str, Any], empty: bool) -> str:
    # The string as sent: Go clients send canonical quantities (Quantity.Marshal writes String()).
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


def _raw_json(fields: dict[str, Any], empty: bool) -> Any:
    # FieldsV1, RawExtension, apiextensions JSON carry their JSON verbatim (null when unset); the
    # decoder has base64-encoded the bytes, like any []byte.
    raw = base64.b64decode(fields["raw"]) if fields["raw"] else b""
    if not raw:
        return None
    if raw[:3] == b"\xd9\xd9\xf7":
        raise ProtobufError("CBOR inside a raw extension is not supported; send JSON")
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise ProtobufError(f"embedded raw JSON is not JSON: {e}") from None


def _items(fields: dict[str, Any], empty: bool) -> list[Any] | None:
    return fields["items"]  # a named slice (ExtraValue) in a message of its own on the wire


def _schema_or_array(fields: dict[str, Any], empty: bool) -> Any:
    return fields["jSONSchemas"] or fields.get("schema")


def _schema_or_bool(fields: dict[str, Any], empty: bool) -> Any:
    return fields["schema"] if fields.get("schema") is not None else bool(fields["allows"])


def _schema_or_string_array(fields: dict[str, Any], empty: bool) -> Any:
    return fields["property"] or fields.get("schema")


FORMS: dict[str, Callable[[dict[str, Any], bool], Any]] = {
    "Time": _time,
    "MicroTime": _micro_time,
    "Duration": _duration,
    "Quantity": _quantity,
    "IntOrString": _int_or_string,
    "RawJSON": _raw_json,
    "Items": _items,
    "SchemaOrArray": _schema_or_array,
    "SchemaOrBool": _schema_or_bool,
    "SchemaOrStringArray": _schema_or_string_array,
}
# A zero Time marshals as null; omitzero (Go 1.24) drops exactly those.
_NULL_WHEN_ZERO = frozenset(("Time", "MicroTime"))


class _Decoder:
    """Decodes message trees; errors carry the path to where they happened (``ProtobufError.where``)."""

    def __init__(self, messages: dict[str, Message]) -> None:
        self.messages = messages
        # The JSON of each message's zero value, serialized: absent struct fields still marshal.
        self._zeros: dict[str, Any] = {}

    def message(self, data: bytes, name: str) -> Any:
        msg = self.messages[name]
        wire_of = msg.wire_of
        # field index -> its value (a single scalar: the last occurrence) or its occurrences (a list)
        seen: dict[int, Any] = {}
        pos, end = 0, len(data)
        # Reading the wire: the one-byte varints that are nearly every key and length are decoded
        # inline (this loop and the next are most of the decoder's time).
        while pos < end:
            key = data[pos]
            if key < 0x80:
                pos += 1
            else:
                key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 7
            known = wire_of.get(number)
            if wire == LENGTH and known is not None:
                length = data[pos] if pos < end else 0x80
                if length < 0x80:
                    pos += 1
                else:
                    length, pos = _varint(data, pos)
                stop = pos + length
                if stop > end:
                    raise ProtobufError(f"field {number}: length {length} runs past the end of the message")
                value: Any = data[pos:stop]
                pos = stop
            else:
                if number == 0:
                    raise ProtobufError("field number 0 is invalid")
                value, pos = _read_one(data, pos, number, wire)  # a malformed field is reported first
                if known is None:
                    raise ProtobufError(f"unknown field {number} in {msg.short} (not decoded by the simulator; "
                                        f"send JSON instead)")
            index, expected, single = known
            if wire != expected:
                field = msg.fields[index]
                if field.shape == LIST and wire == LENGTH:
                    seen.setdefault(index, []).extend(self._packed(value, expected))
                    continue
                raise ProtobufError(f"field {number} ({field.json or field.type}) of {msg.short} has wire "
                                    f"type {wire}, expected {expected}")
            if single:
                seen[index] = value
            else:
                values = seen.get(index)
                if values is None:
                    seen[index] = [value]
                else:
                    values.append(value)
        # Writing JSON, in Go declaration order.
        out: dict[str, Any] = {}
        for index, json_name, absent, const, post, convert in msg.plan:
            raw = seen.get(index)
            if raw is None:
                if absent == SKIP:
                    continue
                if absent == CONST:
                    out[json_name] = const
                    continue
                value = self.zero(msg.fields[index].type)
            else:
                try:
                    value = convert(raw) if convert is not None else self._value(msg.fields[index], raw)
                except ProtobufError as e:
                    if post != P_INLINE:
                        e.where.append("." + json_name)
                    raise
            if post == P_SET:
                out[json_name] = value
            elif post == P_DROP_EMPTY:
                if value:
                    out[json_name] = value
            elif post == P_INLINE:
                out.update(value)
            elif post == P_OMITZERO:
                if value is not None:
                    out[json_name] = value
        if not msg.form:
            return out
        return FORMS[msg.form](out, not data)

    def zero(self, name: str) -> Any:
        """The JSON of a Go zero value of a message, fresh each time (callers may mutate it)."""
        cached = self._zeros.get(name)
        if cached is None:
            value = self.message(b"", name)
            cached = self._zeros[name] = (value, orjson.dumps(value) if isinstance(value, dict | list) else None)
        value, serialized = cached
        if serialized is None:
            return value
        return {} if serialized == b"{}" else orjson.loads(serialized)

    @staticmethod
    def _packed(data: bytes, wire: int) -> list[int]:
        values: list[int] = []
        if wire == VARINT:
            pos = 0
            while pos < len(data):
                value, pos = _varint(data, pos)
                values.append(value)
            return values
        width = 8 if wire == FIXED64 else 4
        if len(data) % width:
            raise ProtobufError(f"packed {width * 8}-bit values of {len(data)} bytes")
        return [int.from_bytes(data[i:i + width], "little") for i in range(0, len(data), width)]

    def _value(self, field: Field, values: list[Any]) -> Any:
        type_ = field.type
        if field.shape == LIST:
            if field.scalar:
                convert = _CONVERT[type_]
                return [convert(v) for v in values]
            out = []
            for i, v in enumerate(values):
                try:
                    out.append(self.message(v, type_))
                except ProtobufError as e:
                    e.where.append(f"[{i}]")
                    raise
            return out
        if field.shape == MAP:
            entries: dict[str, Any] = {}
            for raw in values:
                key, value = self._entry(field, raw)
                entries[key] = value
            return dict(sorted(entries.items())) if len(entries) > 1 else entries  # Go sorts map keys
        # proto: occurrences of an embedded message merge, which is decoding their concatenation.
        return self.message(values[0] if len(values) == 1 else b"".join(values), type_)

    def _entry(self, field: Field, raw: bytes) -> tuple[str, Any]:
        key: Any = b""
        value: int | bytes | None = None
        value_wire = _WIRE_OF[field.type] if field.scalar else LENGTH
        for number, wire, v in read_fields(raw):
            if number == 1 and wire == LENGTH:
                key = v
            elif number == 2 and wire == value_wire:
                value = v
            else:
                raise ProtobufError(f"map entry field {number} with wire type {wire} is invalid")
        assert isinstance(key, bytes)
        name = key.decode("utf-8", "replace")
        if field.scalar:
            return name, _ENTRY_ZERO[field.type] if value is None else _CONVERT[field.type](value)
        if value is None:
            return name, self.zero(field.type)
        try:
            assert isinstance(value, bytes)
            return name, self.message(value, field.type)
        except ProtobufError as e:
            e.where.append(f"[{name}]")
            raise


_DECODER = _Decoder(MESSAGES)


def zero_value(name: str) -> Any:
    """The JSON of the Go zero value of message ``name`` (a fresh copy): ``{}``-like for a struct,
    the custom form's zero (``null`` Time, ``0`` IntOrString, ``"0"`` Quantity) otherwise."""
    return _DECODER.zero(name)


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
    except ProtobufError as e:
        raise bad_request(f"unable to decode protobuf body: {e.detail}") from None
    msg = message_for(api_version, kind)
    if msg is None:
        raise StatusError(415, f"the simulator cannot decode protobuf {kind or 'objects without a kind'} "
                               f"({api_version or 'no apiVersion'}); send it as application/json",
                          reason="UnsupportedMediaType")
    try:
        obj = _DECODER.message(raw, msg)
    except ProtobufError as e:
        raise bad_request(f"unable to decode protobuf body: {e.path() or MESSAGES[msg].short}: {e.detail}") from None
    # encoding/json writes the inline TypeMeta first: kind, then apiVersion.
    return {"kind": kind, "apiVersion": api_version, **obj}
