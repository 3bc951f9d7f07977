"""Request bodies in, response bodies out.

Bodies are decoded by Content-Type the way the API server negotiates them: an empty Content-Type
means JSON (the Python client's ``create`` sends none), YAML is accepted for plain writes and for
server-side apply, Kubernetes protobuf (what Go clients and kubectl's typed commands send) for plain writes and
delete options (see ``protobuf``), the four patch types are told apart by their media type and
anything else is a 415. A body over 3 MiB is a 413 before it is parsed. Malformed JSON or YAML is a 400. Encoding is
orjson everywhere; YAML parsing is only paid for by clients that send YAML.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
import yaml

from controllers.sim import protobuf
from controllers.sim.errors import StatusError, bad_request

MAX_BODY = 3 * 1024 * 1024

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_PATCH)


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def unsupported_media(ctype: str, accepted: tuple[str, ...]) -> StatusError:
    return StatusError(415, f"the body of the request was in an unknown format - accepted media types include: "
                            f"{', '.join(accepted)}", reason="UnsupportedMediaType")


MAX_DEPTH = 100


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without anchors/aliases: a few aliases can expand to gigabytes ("billion laughs").

    Booleans are YAML 1.1's as go-yaml v2 (under sigs.k8s.io/yaml) resolves them, which adds
    ``y``/``Y``/``n``/``N`` to PyYAML's set: the real server reads ``name: y`` as ``true``."""

    bool_values = {**yaml.SafeLoader.bool_values, "y": True, "n": False}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not supported")
        return super().compose_node(parent, index)


_NoAliasLoader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))


def _check_depth(doc: Any) -> Any:
    """400 for documents nested deeper than any Kubernetes object (recursion would fail later)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise bad_request(f"object nesting exceeds the maximum depth of {MAX_DEPTH}")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return doc


class _Undecodable(Exception):
    """A body that is not the JSON or YAML it claims to be; the message is Go's wording of why."""


# What the API server unmarshals a body into first, only to read its apiVersion and kind.
_TYPE_META = 'struct { APIVersion string "json:\\"apiVersion,omitempty\\""; Kind string "json:\\"kind,omitempty\\"" }'


def go_json_type(value: Any) -> str:
    """encoding/json's name for a JSON value's type, as its UnmarshalTypeError says it."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return {str: "string", list: "array", dict: "object"}.get(type(value), "null")


def _go_syntax_error(e: orjson.JSONDecodeError) -> str:
    """encoding/json's SyntaxError text for what orjson refused."""
    doc = e.doc if isinstance(e.doc, str) else ""
    if e.pos >= len(doc.rstrip()):
        return "unexpected end of JSON input"
    if "after document" in e.msg:
        where = "after top-level value"
    elif "string key" in e.msg:
        where = "looking for beginning of object key string"
    elif "':'" in e.msg:
        where = "after object key"
    else:
        where = "looking for beginning of value"
    return f"invalid character {doc[e.pos]!r} {where}"


def _yaml(raw: bytes) -> Any:
    """YAML to a JSON-compatible value; ``_Undecodable`` worded as go-yaml words it."""
    try:
        doc = yaml.load(raw.decode("utf-8"), Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as e:
        # go-yaml names the line of the construct it was parsing, PyYAML where it gave up.
        mark = e.context_mark or e.problem_mark
        problem = e.problem or e.context or "invalid YAML"
        if problem.startswith("expected the node content"):
            problem = "did not find expected node content"
        raise _Undecodable(f"yaml: line {mark.line + 1 if mark else 1}: {problem}") from None
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as e:
        raise _Undecodable(f"yaml: {str(e).splitlines()[0] if str(e) else e!r}") from None
    return _check_depth(_json_compatible(doc))


def _json_compatible(doc: Any) -> Any:
    """YAML can carry what JSON cannot (dates, non-string keys, NaN): reject it as the server does."""
    try:
        return orjson.loads(orjson.dumps(_string_keys(doc)))
    except (TypeError, orjson.JSONEncodeError) as e:
        raise _Undecodable(f"error converting YAML to JSON: {e}") from None


def _string_keys(doc: Any) -> Any:
    """sigs.k8s.io/yaml turns scalar keys into strings as Go formats them (``n: x`` is
    ``{"false": "x"}``, ``1: x`` is ``{"1": "x"}``, ``~: x`` is ``{"null": "x"}``)."""
    if isinstance(doc, list):
        return [_string_keys(v) for v in doc]
    if not isinstance(doc, dict):
        return doc
    out: dict[Any, Any] = {}
    for key, value in doc.items():
        if isinstance(key, bool):
            key = "true" if key else "false"
        elif key is None:
            key = "null"
        elif isinstance(key, (int, float)):
            key = str(key) if isinstance(key, int) else go_float(key)
        out[key] = _string_keys(value)
    return out


def go_float(value: float) -> str:
    """strconv.FormatFloat(f, 'g', -1, 64), as Go's %v prints a float64: ``1`` for 1.0, ``2.5``, ``1e+21``."""
    if value != value or value in (float("inf"), float("-inf")):
        return {True: "+Inf", False: "-Inf"}[value > 0] if value == value else "NaN"
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exp = text.split("e")
        return f"{mantissa}e{'-' if exp.startswith('-') else '+'}{int(exp.lstrip('+-')):02d}"
    return text


def _json(raw: bytes) -> Any:
    """JSON to a value; ``_Undecodable`` with encoding/json's SyntaxError text."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise _Undecodable(_go_syntax_error(e)) from None
    return _check_depth(doc)


def _summary(raw: bytes, limit: int = 30) -> str:
    """How the API server quotes a body it could not read (apimachinery's summarizeData)."""
    if not raw:
        return "<empty>"
    if raw[:1] == b"{":
        return raw.decode(errors="replace") if len(raw) <= limit else raw[:limit].decode(errors="replace") + " ..."
    return raw.hex() if len(raw) <= limit else raw[:limit].hex() + " ..."


def _type_meta(doc: Any) -> dict[str, Any]:
    """The object a JSON or YAML body holds, once its apiVersion and kind could be read; ``null``
    decodes into an empty one."""
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise _Undecodable(f"couldn't get version/kind; json parse error: json: cannot unmarshal "
                           f"{go_json_type(doc)} into Go value of type {_TYPE_META}")
    for field in ("apiVersion", "kind"):
        if doc.get(field) is not None and not isinstance(doc[field], str):
            raise _Undecodable(f"couldn't get version/kind; json parse error: json: cannot unmarshal "
                               f"{go_json_type(doc[field])} into Go struct field .{field} of type string")
    return doc


def decode_object(raw: bytes, content_type: str | None, *, kind: str | None = None) -> Any:
    """Body of a POST/PUT (``kind``: the type the URL expects) or DELETE options (no ``kind``):
    JSON (also when no Content-Type is given), YAML or protobuf. A body that cannot be read is a
    400 that says so: ``the object provided is unrecognized (must be of type ConfigMap): ...``."""
    ctype = media_type(content_type)
    if ctype == protobuf.MEDIA_TYPE:
        if not raw.strip():
            raise bad_request("the body of the request was empty")
        return protobuf.decode(raw)
    is_yaml = ctype in ("application/yaml", "application/x-yaml", "text/yaml")
    if not is_yaml and ctype not in ("", "application/json", "*/*"):
        raise unsupported_media(ctype, ("application/json", "application/yaml", protobuf.MEDIA_TYPE))
    try:
        if is_yaml:
            doc = _yaml(raw)
        else:
            try:
                doc = _json(raw)
            except _Undecodable as e:
                raise _Undecodable(f"couldn't get version/kind; json parse error: {e}") from None
        return _type_meta(doc)
    except _Undecodable as e:
        if kind is None:
            raise bad_request(str(e)) from None
        raise bad_request(f"the object provided is unrecognized (must be of type {kind}): {e} "
                          f"({_summary(raw)})") from None


def patch_type(content_type: str | None) -> str:
    """The patch type a PATCH's Content-Type names; anything else is the handler's bare 415."""
    ctype = media_type(content_type)
    if ctype not in PATCH_TYPES:
        raise StatusError(415, "415: Unsupported Media Type", reason="UnsupportedMediaType", generic=True)
    return ctype


def _apply_document(raw: bytes) -> dict[str, Any]:
    """An apply configuration: YAML (JSON is YAML too), worded as the patch handler words its
    failures -- converting YAML is "encoding" the patch, reading the result into a map "decoding" it."""
    try:
        doc = _json(raw)
    except _Undecodable:
        try:
            doc = _yaml(raw)
        except _Undecodable as e:
            if raw.lstrip()[:1] == b"{":
                raise bad_request(f"error decoding patch: error converting YAML to JSON: {e}") from None
            raise bad_request(f"error encoding patch: {e}") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise bad_request("error decoding patch: error unmarshaling JSON: while decoding JSON: json: cannot "
                          f"unmarshal {go_json_type(doc)} into Go value of type map[string]interface {{}}")
    return doc


def decode_patch(raw: bytes, ptype: str) -> Any:
    """The document of a PATCH body of type ``ptype`` (from ``patch_type``): a list of operations
    for a JSON patch, an object for the others; a 400 worded as the API server's patch handler words it."""
    if ptype == APPLY_PATCH:
        return _apply_document(raw)
    try:
        doc = _json(raw)
    except _Undecodable:
        raise bad_request("invalid JSON patch") from None
    if ptype == JSON_PATCH:
        if doc is None:
            return []
        if not isinstance(doc, list):
            raise bad_request(f"error decoding patch: json: cannot unmarshal {go_json_type(doc)} into Go value of "
                              "type []handlers.jsonPatchOp")
        for op in doc:
            if not isinstance(op, dict):
                raise bad_request(f"error decoding patch: json: cannot unmarshal {go_json_type(op)} into Go value "
                                  "of type handlers.jsonPatchOp")
        return doc
    if doc is None:
        if ptype == MERGE_PATCH:
            raise bad_request("Invalid JSON Patch")
        return {}
    if not isinstance(doc, dict):
        prefix = "error decoding patch: " if ptype == MERGE_PATCH else ""
        raise bad_request(f"{prefix}json: cannot unmarshal {go_json_type(doc)} into Go value of type "
                          "map[string]interface {}")
    return doc


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)
