"""``fieldValidation``: what a write does with fields its type does not have.

Every create, update and patch body is decoded into its kind's type before anything else happens
(``typed`` for built-in kinds, ``structural`` pruning for custom resources). Fields the type has no
place for -- unknown ones, and JSON keys given twice -- never reach storage; the request's
``fieldValidation`` parameter decides what the client hears about them:

* ``Strict``: the request fails. A create or update is a 400 ``ConfigMap in version "v1" cannot be
  handled as a ConfigMap: strict decoding error: unknown field "extra", duplicate field "data.k"``;
  a patch, whose result is what gets decoded, is a 422 with one cause on the field ``patch``;
* ``Warn``, and the default when the parameter is absent: the write succeeds and each issue comes
  back as a ``Warning: 299 - "unknown field \\"extra\\""`` header (kubectl prints them);
* ``Ignore``: the write succeeds silently.

Any other value is a 422 on ``CreateOptions``/``UpdateOptions``/``PatchOptions``. A value of the wrong
type is not a strict issue: it fails the request whatever the mode (400, or 422 for a patch). Server-side
apply is stricter still: it builds a typed object first, and any unknown field or wrong type is
its 500 (``typed`` has the wording) -- the mode does not matter there either.

Duplicate keys are invisible once JSON is parsed into a dict, so a body is parsed a second time,
keeping every key, only when it may hold one: when re-encoding the parsed body loses a ``:``
(each dropped occurrence takes its key's colon with it) or the body has ``\\u`` escapes that could
hide one. Protobuf bodies are typed already and YAML duplicates are not looked for.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from controllers.sim import structural, typed
from controllers.sim.errors import StatusError, patch_invalid
from controllers.sim.resources import ResourceType

IGNORE, WARN, STRICT = "Ignore", "Warn", "Strict"
_MODES = ("", IGNORE, STRICT, WARN)


def directive(value: str | None, options_kind: str) -> str:
    """The mode a request asked for (``Warn`` when it did not say); 422 for an unsupported one."""
    if not value:
        return WARN
    if value in _MODES:
        return value
    supported = ", ".join(f'"{m}"' for m in _MODES)
    detail = f'Unsupported value: "{value}": supported values: {supported}'
    raise StatusError(422, f'{options_kind}.meta.k8s.io "" is invalid: fieldValidation: {detail}', reason="Invalid",
                      group="meta.k8s.io", kind=options_kind,
                      causes=[{"reason": "FieldValueNotSupported", "message": detail, "field": "fieldValidation"}])


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    dup = typed.Duplicate(obj)
    dup.pairs = pairs
    return dup


def _may_repeat_keys(raw: bytes, obj: Any) -> bool:
    return b"\\u" in raw or raw.count(b":") != orjson.dumps(obj).count(b":")


def with_duplicates(raw: bytes | None, obj: Any) -> tuple[Any, bool]:
    """The body parsed keeping every occurrence of a repeated key (``typed.Duplicate``), when it may
    have one; else ``obj`` itself. The flag says whether the result needs ``plain`` once checked."""
    if raw is None or not _may_repeat_keys(raw, obj):
        return obj, False
    reparsed = json.loads(raw, object_pairs_hook=_pairs)
    return reparsed, True


def plain(obj: Any) -> Any:
    """Plain dicts again (the last occurrence of each key) after a ``with_duplicates`` parse."""
    return orjson.loads(orjson.dumps(obj))


def _findings(rt: ResourceType, obj: dict[str, Any], api_version: str | None, kind: str | None) -> typed.Findings:
    if api_version and kind:  # a subresource's own type
        return typed.decode(api_version, kind, obj)
    if rt.builtin:
        return typed.decode(rt.api_version, rt.kind, obj)
    if rt.schema is not None:
        return structural.prune(rt.schema, obj)
    return typed.decode_metadata(obj.get("metadata"), "metadata")


def decode(rt: ResourceType, obj: dict[str, Any], mode: str, *, raw: bytes | None = None, patch: bool = False,
           api_version: str | None = None, kind: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """``obj`` as its type holds it -- unknown fields dropped, custom resources defaulted -- and the
    warnings to send; raises as ``mode`` says (see the module docstring). ``raw`` is the JSON body
    (for duplicate keys); ``patch`` marks a patch's result; ``api_version``/``kind`` name another
    type than ``rt``'s (a ``/scale`` body is an ``autoscaling/v1`` Scale)."""
    version, kind_ = api_version or rt.api_version, kind or rt.kind
    checked, reparsed = with_duplicates(raw, obj) if mode != IGNORE else (obj, False)
    try:
        found = _findings(rt, checked, api_version, kind)
    except typed.DecodeError as e:
        if patch:
            raise patch_invalid(obj, str(e)) from None
        raise typed.cannot_handle(kind_, version.rpartition("/")[2], str(e)) from None
    if found.issues and mode == STRICT:
        detail = "strict decoding error: " + ", ".join(found.issues)
        if patch:
            raise patch_invalid(obj, detail)
        raise typed.cannot_handle(kind_, version.rpartition("/")[2], detail)
    found.prune()
    if reparsed:
        checked = plain(checked)
    if not rt.builtin and rt.schema is not None and kind is None:
        structural.default(rt.schema, checked)
    warnings = list(dict.fromkeys(found.issues)) if mode == WARN else []
    return checked, warnings


def warning_header(text: str) -> str:
    """A ``Warning`` header value: code 299, no agent, the text quoted as Go's strconv.Quote does."""
    return '299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
