"""Kubernetes protobuf responses: the JSON the simulator stores, encoded as kube-apiserver writes it.

Go clients ask for protobuf first (client-go's typed clients and controller-runtime send
``Accept: application/vnd.kubernetes.protobuf,application/json``), and a real API server answers
every built-in kind that way; custom resources and the meta conversions (Table,
PartialObjectMetadata) stay JSON. This is the inverse of ``protobuf`` (which decodes request
bodies) and reads the same message table (``protobuf_schema.json``, generated from the Go types):

* an object or list is ``"k8s\\x00"`` + ``runtime.Unknown{typeMeta{apiVersion, kind}, raw,
  contentEncoding "", contentType ""}`` with ``raw`` the object's own message;
* a list is ``{1: ListMeta, 2: repeated item}`` (every ``FooList`` in k8s.io/api has that shape, so
  the table needs no list messages);
* a watch stream is a sequence of frames, each a 4-byte big-endian length and a
  ``metav1.WatchEvent{1: type, 2: RawExtension{1: raw}}`` whose raw is the object's envelope.

Fields are written as gogo-protobuf's generated marshalers write them: in field-number order,
non-pointer scalars and strings always (zero or empty included), non-pointer structs always (an
absent one as its zero message), pointers, lists and maps only when set, map entries by sorted key
with both key and value. The custom types invert the decoder's JSON forms: ``Time`` and
``MicroTime`` (seconds, nanos; an empty message for the zero time), ``Duration``, ``Quantity``,
``IntOrString``, raw JSON (``FieldsV1``, ``RawExtension``, apiextensions ``JSON``) and the CRD
schema unions. What the table cannot express (a field it does not know, a value of the wrong type)
is an ``EncodeError``: the caller answers JSON instead, which every Go client also reads.
"""

from __future__ import annotations

import base64
import calendar
import re
import struct
from collections.abc import Callable
from typing import Any

import orjson

from controllers.sim import protobuf
from controllers.sim.protobuf import LIST, MAGIC, MAP, MESSAGES, Field, Message, message_for

STATUS = "k8s.io.apimachinery.pkg.apis.meta.v1.Status"
LIST_META = "k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta"
WATCH_MEDIA_TYPE = "application/vnd.kubernetes.protobuf;stream=watch"


class EncodeError(Exception):
    """The value does not fit the message table (it could not have come from a real API server)."""


# ---- wire format ------------------------------------------------------------------------------


def _uvarint(n: int) -> bytes:
    if n < 0x80:
        return _SMALL[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


_SMALL = [bytes((i,)) for i in range(0x80)]


def _key(number: int, wire: int) -> bytes:
    return _uvarint((number << 3) | wire)


def _length_delimited(number: int, payload: bytes) -> bytes:
    return _key(number, 2) + _uvarint(len(payload)) + payload


def _int(value: Any) -> int:
    if value.__class__ is int:
        return value  # type: ignore[no-any-return]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EncodeError(f"{value!r} is not an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise EncodeError(f"{value!r} is not an integer")
        value = int(value)
    return value


def _string(value: Any) -> bytes:
    if value.__class__ is not str:
        raise EncodeError(f"{value!r} is not a string")
    data = value.encode()
    return _uvarint(len(data)) + data


def _bytes(value: Any) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"{value!r} is not base64 bytes")
    data = base64.b64decode(value)
    return _uvarint(len(data)) + data


def _bool(value: Any) -> bytes:
    if value is True:
        return b"\x01"
    if value is False:
        return b"\x00"
    raise EncodeError(f"{value!r} is not a boolean")


def _varint(value: Any) -> bytes:
    return _uvarint(_int(value) & 0xFFFFFFFFFFFFFFFF)


# Scalar type -> (wire type, encoder of one value given in its JSON form).
_SCALARS: dict[str, tuple[int, Callable[[Any], bytes]]] = {
    "string": (2, _string),
    "bytes": (2, _bytes),
    "bool": (0, _bool),
    "int32": (0, _varint),
    "int64": (0, _varint),
    "uint32": (0, _varint),
    "uint64": (0, _varint),
    "float64": (1, lambda v: struct.pack("<d", float(v))),
    "float32": (5, lambda v: struct.pack("<f", float(v))),
}


_SCALAR_ZERO: dict[str, Any] = {"string": "", "bytes": "", "bool": False, "int32": 0, "int64": 0, "uint32": 0,
                                "uint64": 0, "float64": 0, "float32": 0}


# ---- the JSON forms, inverted -----------------------------------------------------------------

_RFC3339 = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|z|[+-]\d\d:\d\d)$")


def _moment(value: Any) -> tuple[int, int] | None:
    """(seconds, nanos) of an RFC 3339 time; None for null (the zero time)."""
    if value is None:
        return None
    m = _RFC3339.match(value) if isinstance(value, str) else None
    if m is None:
        raise EncodeError(f"{value!r} is not an RFC 3339 time")
    year, month, day, hour, minute, second, frac, zone = m.groups()
    seconds = calendar.timegm((int(year), int(month), int(day), int(hour), int(minute), int(second)))
    if zone not in ("Z", "z"):
        sign = 1 if zone[0] == "+" else -1
        seconds -= sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    nanos = int((frac or "0")[:9].ljust(9, "0"))
    return seconds, nanos


def _time(value: Any) -> dict[str, Any] | None:
    moment = _moment(value)
    return None if moment is None else {"seconds": moment[0], "nanos": 0}  # metav1.Time keeps seconds


def _micro_time(value: Any) -> dict[str, Any] | None:
    moment = _moment(value)
    return None if moment is None else {"seconds": moment[0], "nanos": moment[1] // 1000 * 1000}


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_NANOS = {"ns": 1, "us": 1_000, "µs": 1_000, "μs": 1_000, "ms": 1_000_000, "s": 1_000_000_000,
               "m": 60_000_000_000, "h": 3_600_000_000_000}


def parse_go_duration(text: Any) -> int:
    """Go's time.ParseDuration, in nanoseconds."""
    if not isinstance(text, str) or not text:
        raise EncodeError(f"{text!r} is not a duration")
    sign, rest = (-1, text[1:]) if text[0] == "-" else (1, text.lstrip("+"))
    if rest == "0":
        return 0
    total, pos = 0, 0
    for m in _DURATION_PART.finditer(rest):
        if m.start() != pos:
            break
        number, unit = m.groups()
        whole, _, frac = number.partition(".")
        scale = _UNIT_NANOS[unit]
        total += int(whole or "0") * scale + (int(frac) * scale // 10 ** len(frac) if frac else 0)
        pos = m.end()
    if pos != len(rest) or pos == 0:
        raise EncodeError(f"{text!r} is not a duration")
    return sign * total


def _quantity(value: Any) -> dict[str, Any]:
    if value is None:
        return {"string": "0"}  # the zero Quantity's String()
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise EncodeError(f"{value!r} is not a quantity")
    return {"string": value if isinstance(value, str) else orjson.dumps(value).decode()}


def _int_or_string(value: Any) -> dict[str, Any]:
    if value is None:
        value = 0
    if isinstance(value, str):
        return {"type": 1, "intVal": 0, "strVal": value}
    return {"type": 0, "intVal": _int(value), "strVal": ""}


def _raw_json(value: Any) -> dict[str, Any]:
    return {"raw": base64.b64encode(orjson.dumps(value)).decode()} if value is not None else {}


def _schema_or_array(value: Any) -> dict[str, Any]:
    return {"jSONSchemas": value} if isinstance(value, list) else {"schema": value}


def _schema_or_bool(value: Any) -> dict[str, Any]:
    return {"allows": value} if isinstance(value, bool) else {"allows": True, "schema": value}


def _schema_or_string_array(value: Any) -> dict[str, Any]:
    return {"property": value} if isinstance(value, list) else {"schema": value}


# JSON form -> the message's fields by JSON name (None: the empty message, the zero Time).
UNFORMS: dict[str, Callable[[Any], dict[str, Any] | None]] = {
    "Time": _time,
    "MicroTime": _micro_time,
    "Duration": lambda v: {"duration": 0 if v is None else parse_go_duration(v)},
    "Quantity": _quantity,
    "IntOrString": _int_or_string,
    "RawJSON": _raw_json,
    "Items": lambda v: {"items": v or []},
    "SchemaOrArray": _schema_or_array,
    "SchemaOrBool": _schema_or_bool,
    "SchemaOrStringArray": _schema_or_string_array,
}


# ---- messages ---------------------------------------------------------------------------------


# How a field is written (the first item of its plan entry).
_SCALAR_ONE, _MESSAGE_ONE, _SCALAR_LIST, _MESSAGE_LIST, _MAP, _INLINE = range(6)


class _Plan:
    """A message's wire fields in field-number order, each as a flat tuple the encoder's loop runs
    on: (how, JSON name, key bytes, scalar encoder or message name, write when absent, absent
    value, map value key), and every JSON name it (with its inlined structs) claims."""

    __slots__ = ("fields", "names")

    def __init__(self, fields: list[tuple[Any, ...]], names: frozenset[str]) -> None:
        self.fields = fields
        self.names = names


def _plan_entry(f: Field) -> tuple[Any, ...]:
    if f.inline:
        return (_INLINE, f.json, _key(f.number, 2), f.type, True, None, b"")
    # gogo writes every non-pointer field: a scalar's zero, a struct's zero message (a nil []byte
    # excepted: it is left out); pointers, lists and maps only when set.
    always = not f.pointer and f.type != "bytes" and f.shape not in (LIST, MAP)
    if f.shape == MAP:
        value_key = _key(2, _SCALARS[f.type][0]) if f.scalar else _key(2, 2)
        return (_MAP, f.json, _key(f.number, 2), _SCALARS[f.type][1] if f.scalar else f.type, False, None,
                value_key)
    if f.scalar:
        wire, fn = _SCALARS[f.type]
        return (_SCALAR_LIST if f.shape == LIST else _SCALAR_ONE, f.json, _key(f.number, wire), fn, always,
                _SCALAR_ZERO[f.type], b"")
    return (_MESSAGE_LIST if f.shape == LIST else _MESSAGE_ONE, f.json, _key(f.number, 2), f.type, always, None, b"")


class Encoder:
    """Encodes JSON values into messages of the table (``protobuf.MESSAGES``)."""

    def __init__(self, messages: dict[str, Message]) -> None:
        self.messages = messages
        self._plans: dict[str, _Plan] = {}

    def plan(self, name: str) -> _Plan:
        plan = self._plans.get(name)
        if plan is None:
            msg = self.messages[name]
            names: set[str] = set()
            for f in msg.fields:
                if f.inline:
                    names |= self.plan(f.type).names
                elif f.json != "-":
                    names.add(f.json)
            wire = [_plan_entry(f) for f in sorted((f for f in msg.fields if f.number), key=lambda f: f.number)]
            plan = self._plans[name] = _Plan(wire, frozenset(names))
        return plan

    def message(self, value: Any, name: str, ignore: frozenset[str] = frozenset()) -> bytes:
        """The message ``name`` holding ``value`` (its JSON); ``ignore``: top-level keys that live
        elsewhere on the wire (an object's kind and apiVersion are the envelope's)."""
        msg = self.messages[name]
        if msg.form:
            value = UNFORMS[msg.form](value)
            if value is None:
                return b""
        elif value is None:
            value = {}
        if value.__class__ is not dict:
            raise EncodeError(f"{msg.short}: {type(value).__name__} where an object belongs")
        plan = self._plans.get(name) or self.plan(name)
        names = plan.names
        for k in value:
            if k not in names and k not in ignore:
                raise EncodeError(f"{msg.short} has no field {k!r}")
        out = bytearray()
        message = self.message
        for how, json_name, key, enc, always, zero, value_key in plan.fields:
            v = value.get(json_name)
            if how == _SCALAR_ONE:
                if v is None:
                    if not always:
                        continue
                    v = zero
                out += key
                out += enc(v)
            elif how == _MESSAGE_ONE:
                if v is None and not always:
                    continue
                data = message(v, enc)
                out += key
                out += _uvarint(len(data))
                out += data
            elif how == _MESSAGE_LIST or how == _SCALAR_LIST:
                if v is None:
                    continue
                if v.__class__ is not list:
                    raise EncodeError(f"{msg.short}.{json_name} is not a list")
                for item in v:
                    if how == _SCALAR_LIST:
                        out += key
                        out += enc(item)
                    else:
                        data = message(item, enc)
                        out += key
                        out += _uvarint(len(data))
                        out += data
            elif how == _MAP:
                if v is None:
                    continue
                if v.__class__ is not dict:
                    raise EncodeError(f"{msg.short}.{json_name} is not a map")
                for k in sorted(v):
                    kb = k.encode()
                    if isinstance(enc, str):
                        data = message(v[k], enc)
                        value_bytes = _uvarint(len(data)) + data
                    else:
                        value_bytes = enc(v[k])
                    entry = b"\n" + _uvarint(len(kb)) + kb + value_key + value_bytes
                    out += key
                    out += _uvarint(len(entry))
                    out += entry
            else:  # _INLINE: the embedded struct's fields sit in this object (keys checked above)
                data = message(value, enc, frozenset(value))
                out += key
                out += _uvarint(len(data))
                out += data
        return bytes(out)


_ALL = frozenset(("kind", "apiVersion"))
ENCODER = Encoder(MESSAGES)


def _unknown(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = _length_delimited(1, api_version.encode()) + _length_delimited(2, kind.encode())
    return MAGIC + _length_delimited(1, type_meta) + _length_delimited(2, raw) + b"\x1a\x00\x22\x00"


def _message_of(body: dict[str, Any]) -> tuple[str, str, str, bool]:
    """(apiVersion, kind, message name, is a list) of a response body."""
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        raise EncodeError("no apiVersion or kind")
    if kind == "Status":
        return api_version, kind, STATUS, False
    name = message_for(api_version, kind)
    if name is not None:
        return api_version, kind, name, False
    if kind.endswith("List"):
        name = message_for(api_version, kind[:-4])
        if name is not None:
            return api_version, kind, name, True
    raise EncodeError(f"no message for {api_version} {kind}")


def encodable(api_version: str, kind: str) -> bool:
    """Whether objects of this kind have a protobuf form (built-in kinds do, custom resources don't)."""
    return message_for(api_version, kind) is not None


class MessageCache:
    """Encoded messages of stored objects, by (uid, resourceVersion, apiVersion, kind): a stored
    object never changes in place (a write stores a new one with a new resourceVersion), so an
    informer's relist of 10,000 pods encodes only what changed since the last. Bounded by bytes,
    oldest first out."""

    def __init__(self, limit: int = 64 << 20) -> None:
        self.limit = limit
        self.size = 0
        self.entries: dict[tuple[str, str, str, str], bytes] = {}

    def message(self, obj: Any, name: str, api_version: str, kind: str) -> bytes:
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        uid = meta.get("uid") if isinstance(meta, dict) else None
        rv = meta.get("resourceVersion") if uid else None
        if not uid or not rv:
            return ENCODER.message(obj, name, _ALL)
        key = (uid, rv, api_version, kind)
        data = self.entries.get(key)
        if data is None:
            data = self.entries[key] = ENCODER.message(obj, name, _ALL)
            self.size += len(data)
            while self.size > self.limit and self.entries:
                self.size -= len(self.entries.pop(next(iter(self.entries))))
        return data


# Stored objects' encoded messages, shared by every simulated cluster in the process (keyed by uid).
CACHE = MessageCache()


def raw_message(body: dict[str, Any], cache: MessageCache | None = None) -> tuple[str, str, bytes]:
    """(apiVersion, kind, the object's own message) of an object or list; ``cache`` only for
    objects as stored (a list's items, a get), never for what a write or dry run computed."""
    api_version, kind, name, is_list = _message_of(body)
    if not is_list:
        if cache is not None and name != STATUS:
            return api_version, kind, cache.message(body, name, api_version, kind)
        return api_version, kind, ENCODER.message(body, name, _ALL)
    meta = ENCODER.message(body.get("metadata") or {}, LIST_META)
    items = body.get("items") or []
    if not isinstance(items, list):
        raise EncodeError("items is not a list")
    out = bytearray(_length_delimited(1, meta))
    item_kind = kind[:-4]
    for item in items:
        data = (cache.message(item, name, api_version, item_kind) if cache is not None
                else ENCODER.message(item, name, _ALL))
        out += b"\x12"
        out += _uvarint(len(data))
        out += data
    return api_version, kind, bytes(out)


def encode(body: dict[str, Any], cache: MessageCache | None = None) -> bytes:
    """A response body (object, list or Status) as the API server writes it in protobuf."""
    return _unknown(*raw_message(body, cache))


def watch_frame(event_type: str, obj: dict[str, Any], cache: MessageCache | None = None) -> bytes:
    """One watch event as a length-prefixed frame of ``application/vnd.kubernetes.protobuf;stream=watch``."""
    event = _length_delimited(1, event_type.encode()) + _length_delimited(2, _length_delimited(1, encode(obj, cache)))
    return struct.pack(">I", len(event)) + event


def decode_response(body: bytes) -> dict[str, Any]:
    """The JSON of an enveloped response body, list or object (what a Go client reads back): the
    request decoder (``protobuf``) for objects, plus the list shape around it. Tests read the
    simulator's protobuf answers with it."""
    api_version, kind, raw = protobuf._envelope(body)
    if kind == "Status" or not kind.endswith("List") or message_for(api_version, kind) is not None:
        name = STATUS if kind == "Status" else message_for(api_version, kind)
        if name is None:
            raise EncodeError(f"no message for {api_version} {kind}")
        return {"kind": kind, "apiVersion": api_version, **protobuf._DECODER.message(raw, name)}
    item = message_for(api_version, kind[:-4])
    if item is None:
        raise EncodeError(f"no message for {api_version} {kind}")
    meta: dict[str, Any] = {}
    items = []
    for number, _, value in protobuf.read_fields(raw):
        assert isinstance(value, bytes)
        if number == 1:
            meta = protobuf._DECODER.message(value, LIST_META)
        elif number == 2:
            items.append(protobuf._DECODER.message(value, item))
    return {"kind": kind, "apiVersion": api_version, "metadata": meta, "items": items}
