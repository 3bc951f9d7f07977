"""Custom resources held to their CRD's structural schema: pruning, defaulting, validation.

A CRD version's ``openAPIV3Schema`` does three things to every custom resource the API server
decodes, in this order, and the simulator does the same:

1. *pruning* (``prune``): a field the schema does not specify is dropped -- unless an enclosing
   schema says ``x-kubernetes-preserve-unknown-fields: true`` or gives ``additionalProperties``. An
   ``type: object`` without ``properties`` keeps nothing. ``apiVersion``, ``kind`` and ``metadata``
   always stay at the root and in ``x-kubernetes-embedded-resource`` objects, their ``metadata``
   held to ObjectMeta (``typed.decode_metadata``). The dropped paths (``spec.x``,
   ``spec.items[0].y``), sorted as the server sorts them, are what ``fieldValidation`` warns
   about or rejects;
2. *defaulting* (``default``): a missing property with a ``default`` gets it, as does a ``null``
   one that is not ``nullable``; a non-nullable ``null`` without a default is dropped;
3. *validation* (``validate``, on every create and update, after admission): the OpenAPI value
   checks -- ``type`` (``x-kubernetes-int-or-string``, ``nullable``), ``enum``, ``minimum`` /
   ``maximum`` (exclusive too), ``multipleOf``, ``minLength`` / ``maxLength`` / ``pattern``,
   ``minItems`` / ``maxItems``, ``minProperties`` / ``maxProperties``, ``required``, and the
   uniqueness of ``x-kubernetes-list-type: set`` and ``map`` lists -- each failure a cause of the
   422 with the reason a real server gives (``FieldValueTypeInvalid``, ``FieldValueNotSupported``,
   ``FieldValueRequired``, ``FieldValueTooLong``, ``FieldValueTooMany``, ``FieldValueDuplicate``,
   ``FieldValueInvalid``) and its message (``spec.size in body should be less than or equal to 10``).

Not modelled: ``format`` checks, ``allOf``/``anyOf``/``oneOf``/``not``, CEL rules
(``x-kubernetes-validations``). The real server visits an object's properties in Go map order, so
the order of several causes is not fixed there; here it is the schema's.
"""

from __future__ import annotations

import copy
import math
import re
from typing import Any

from controllers.sim import typed

Cause = tuple[str, str, str]  # field, message, reason

_TYPE_OF = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return "integer"
    return _TYPE_OF.get(type(value), "object")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# ---- pruning -----------------------------------------------------------------------------------


def prune(schema: dict[str, Any], obj: dict[str, Any]) -> typed.Findings:
    """What pruning ``obj`` would drop: the paths (sorted), ObjectMeta's unknown fields before them and
    embedded resources' after, as the server reports them; nothing is dropped until ``prune()``."""
    found = typed.decode_metadata(obj.get("metadata"), "metadata")
    pruned: list[str] = []
    late = typed.Findings([], [])
    _prune_object(schema, obj, "", pruned, found.unknown, late, root=True)
    return typed.Findings(found.issues + [f'unknown field "{p}"' for p in sorted(pruned)] + late.issues,
                          found.unknown + late.unknown)


def _prune_object(schema: dict[str, Any], obj: dict[str, Any], path: str, pruned: list[str],
                  drops: list[tuple[dict[str, Any], str]], late: typed.Findings, root: bool = False) -> None:
    props = schema.get("properties") or {}
    extra = schema.get("additionalProperties")
    keep = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
    embedded = root or bool(schema.get("x-kubernetes-embedded-resource"))
    for key, value in obj.items():
        if embedded and key in ("apiVersion", "kind", "metadata"):
            if key == "metadata" and not root:
                meta = typed.decode_metadata(value, _join(path, "metadata"))
                late.issues.extend(meta.issues)
                late.unknown.extend(meta.unknown)
            continue
        sub = props.get(key)
        if sub is None and isinstance(extra, dict):
            sub = extra
        if sub is not None:
            _prune_value(sub, value, _join(path, key), pruned, drops, late)
        elif not (keep or extra is True):
            pruned.append(_join(path, key))
            drops.append((obj, key))


def _prune_value(schema: dict[str, Any], value: Any, path: str, pruned: list[str],
                 drops: list[tuple[dict[str, Any], str]], late: typed.Findings) -> None:
    if isinstance(value, dict):
        _prune_object(schema, value, path, pruned, drops, late)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _prune_value(schema["items"], item, f"{path}[{i}]", pruned, drops, late)


# ---- defaulting --------------------------------------------------------------------------------


def default(schema: dict[str, Any], value: Any) -> None:
    """Fill in defaults and drop non-nullable nulls, top-down, in place."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, sub in props.items():
            if not isinstance(sub, dict):
                continue
            if key not in value:
                if "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
            elif value[key] is None and not sub.get("nullable"):
                if "default" in sub:
                    value[key] = copy.deepcopy(sub["default"])
                else:
                    del value[key]
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if key in props else extra if isinstance(extra, dict) else None
            if isinstance(sub, dict):
                default(sub, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            default(schema["items"], item)


# ---- validation --------------------------------------------------------------------------------


def _render(value: Any) -> str:
    """A value as Go's field errors print it: strings quoted, numbers bare."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _number(value: Any) -> str:
    return _render(value)


def validate(schema: dict[str, Any], obj: dict[str, Any]) -> list[Cause]:
    """The causes of a 422 for ``obj`` against the schema (empty when it is valid)."""
    causes: list[Cause] = []
    props = schema.get("properties") or {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind", "metadata") or key not in props:
            continue
        _validate(props[key], value, key, causes)
    for key in schema.get("required") or []:
        if key not in obj and key not in ("apiVersion", "kind", "metadata"):
            causes.append((key, "Required value", "FieldValueRequired"))
    duplicates: list[Cause] = []
    _list_uniqueness(schema, obj, "", duplicates)
    return causes + duplicates


def _type_ok(schema: dict[str, Any], value: Any) -> tuple[bool, str]:
    if value is None:
        return bool(schema.get("nullable")), schema.get("type") or ""
    if schema.get("x-kubernetes-int-or-string"):
        return _type_name(value) in ("integer", "string"), "integer,string"
    want = schema.get("type")
    if not want:
        return True, ""
    have = _type_name(value)
    return have == want or (want == "number" and have == "integer"), want


def _validate(schema: dict[str, Any], value: Any, path: str, causes: list[Cause]) -> None:
    if not isinstance(schema, dict):
        return
    ok, want = _type_ok(schema, value)
    if not ok:
        have = _type_name(value)
        causes.append((path, f'Invalid value: "{have}": {path} in body must be of type {want}: "{have}"',
                       "FieldValueTypeInvalid"))
        return
    if value is None:
        return
    enum = schema.get("enum")
    if enum is not None and value not in enum:
        supported = ", ".join(_render(v) for v in enum)
        causes.append((path, f"Unsupported value: {_render(value)}: supported values: {supported}",
                       "FieldValueNotSupported"))
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        _numeric(schema, value, path, causes)
    elif isinstance(value, str):
        _string(schema, value, path, causes)
    elif isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            causes.append((path, f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                           "FieldValueTooMany"))
        if "minItems" in schema and len(value) < schema["minItems"]:
            causes.append((path, f"Invalid value: {len(value)}: {path} in body should have at least "
                                 f"{schema['minItems']} items", "FieldValueInvalid"))
        items = schema.get("items")
        if isinstance(items, dict):
            for i, item in enumerate(value):
                _validate(items, item, f"{path}[{i}]", causes)
    elif isinstance(value, dict):
        if "maxProperties" in schema and len(value) > schema["maxProperties"]:
            causes.append((path, f"Too many: {len(value)}: must have at most {schema['maxProperties']} items",
                           "FieldValueTooMany"))
        if "minProperties" in schema and len(value) < schema["minProperties"]:
            causes.append((path, f"Invalid value: {len(value)}: {path} in body should have at least "
                                 f"{schema['minProperties']} properties", "FieldValueInvalid"))
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key) if key in props else extra if isinstance(extra, dict) else None
            if sub is not None:
                _validate(sub, item, f"{path}.{key}", causes)
        for key in schema.get("required") or []:
            if key not in value:
                causes.append((f"{path}.{key}", "Required value", "FieldValueRequired"))


def _numeric(schema: dict[str, Any], value: float, path: str, causes: list[Cause]) -> None:
    if "maximum" in schema:
        high = schema["maximum"]
        if schema.get("exclusiveMaximum") and value >= high:
            causes.append((path, f"Invalid value: {_number(value)}: {path} in body should be less than "
                                 f"{_number(high)}", "FieldValueInvalid"))
        elif value > high:
            causes.append((path, f"Invalid value: {_number(value)}: {path} in body should be less than or "
                                 f"equal to {_number(high)}", "FieldValueInvalid"))
    if "minimum" in schema:
        low = schema["minimum"]
        if schema.get("exclusiveMinimum") and value <= low:
            causes.append((path, f"Invalid value: {_number(value)}: {path} in body should be greater than "
                                 f"{_number(low)}", "FieldValueInvalid"))
        elif value < low:
            causes.append((path, f"Invalid value: {_number(value)}: {path} in body should be greater than or "
                                 f"equal to {_number(low)}", "FieldValueInvalid"))
    factor = schema.get("multipleOf")
    if factor:
        ratio = value / factor
        if not math.isclose(ratio, round(ratio), rel_tol=0, abs_tol=1e-9):
            causes.append((path, f"Invalid value: {_number(value)}: {path} in body should be a multiple of "
                                 f"{_number(factor)}", "FieldValueInvalid"))


def _string(schema: dict[str, Any], value: str, path: str, causes: list[Cause]) -> None:
    # The first failing check only, as kube-openapi's string validator stops there.
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        causes.append((path, f"Too long: may not be more than {schema['maxLength']} bytes", "FieldValueTooLong"))
    elif "minLength" in schema and len(value) < schema["minLength"]:
        causes.append((path, f"Invalid value: {_render(value)}: {path} in body should be at least "
                             f"{schema['minLength']} chars long", "FieldValueInvalid"))
    elif "pattern" in schema and not _matches(schema["pattern"], value):
        causes.append((path, f"Invalid value: {_render(value)}: {path} in body should match "
                             f"'{schema['pattern']}'", "FieldValueInvalid"))


_PATTERNS: dict[str, re.Pattern[str] | None] = {}


def _matches(pattern: str, value: str) -> bool:
    """ECMA/RE2 patterns match anywhere unless anchored; one Python cannot compile passes."""
    compiled = _PATTERNS.get(pattern, ...)
    if compiled is ...:
        try:
            compiled = re.compile(pattern)
        except re.error:
            compiled = None
        _PATTERNS[pattern] = compiled
    return compiled is None or compiled.search(value) is not None


def _list_uniqueness(schema: dict[str, Any], value: Any, path: str, out: list[Cause]) -> None:
    """Duplicates in ``set`` and ``map`` lists: checked after the value validation, reported after it."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if path == "" and key in ("apiVersion", "kind", "metadata"):
                continue
            sub = props.get(key) if key in props else extra if isinstance(extra, dict) else None
            if isinstance(sub, dict):
                _list_uniqueness(sub, item, _join(path, key), out)
    elif isinstance(value, list):
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        kind = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or []
        seen: list[Any] = []
        for i, item in enumerate(value):
            if kind == "set":
                if item in seen:
                    out.append((f"{path}[{i}]", f"Duplicate value: {_render(item)}", "FieldValueDuplicate"))
                seen.append(item)
            elif kind == "map" and isinstance(item, dict):
                key = {k: item.get(k) for k in keys}
                if key in seen:
                    shown = ",".join(f'"{k}":{_render(v)}' for k, v in key.items())
                    out.append((f"{path}[{i}]", f"Duplicate value: map[string]interface {{}}{{{shown}}}",
                                "FieldValueDuplicate"))
                seen.append(key)
            _list_uniqueness(items, item, f"{path}[{i}]", out)


# ---- server-side apply -------------------------------------------------------------------------


def apply_errors(schema: dict[str, Any], doc: dict[str, Any]) -> list[str]:
    """Why server-side apply cannot build a typed object of ``doc`` from the CRD's schema: fields the
    schema does not declare (ObjectMeta's included) and values of the wrong type, in document order."""
    errors: list[str] = []
    props = schema.get("properties") or {}
    for key, value in doc.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            if isinstance(value, dict):
                found = typed.decode_metadata(value, ".metadata")
                errors.extend(f"{issue.split(chr(34))[1]}: field not declared in schema"
                              for issue in found.issues if issue.startswith("unknown"))
            continue
        _apply_value(props.get(key), value, f".{key}", errors, schema)
    return errors


def _apply_value(schema: dict[str, Any] | None, value: Any, path: str, errors: list[str],
                 parent: dict[str, Any]) -> None:
    if schema is None:
        extra = parent.get("additionalProperties")
        if not (parent.get("x-kubernetes-preserve-unknown-fields") or extra is True or isinstance(extra, dict)):
            errors.append(f"{path}: field not declared in schema")
            return
        if not isinstance(extra, dict):
            return
        schema = extra
    if value is None or schema.get("x-kubernetes-int-or-string"):
        return
    want = schema.get("type")
    have = _type_name(value)
    if want in ("integer", "number") and have not in ("integer", "number"):
        errors.append(f"{path}: expected numeric (int or float), got {typed._smd_got(value)}")
    elif want == "string" and have != "string":
        errors.append(f"{path}: expected string, got &value.valueUnstructured{{Value:{value!r}}}")
    elif want == "boolean" and have != "boolean":
        errors.append(f"{path}: expected boolean, got {value!r}")
    elif want == "array":
        if have != "array":
            errors.append(f"{path}: expected list, got {typed._smd_got(value)}")
        elif isinstance(schema.get("items"), dict):
            for i, item in enumerate(value):
                _apply_value(schema["items"], item, f"{path}[{i}]", errors, schema)
    elif want == "object" or schema.get("properties"):
        if have != "object":
            errors.append(f"{path}: expected map, got {typed._smd_got(value)}")
            return
        props = schema.get("properties") or {}
        embedded = schema.get("x-kubernetes-embedded-resource")
        for key, item in value.items():
            if not (embedded and key in ("apiVersion", "kind", "metadata")):
                _apply_value(props.get(key), item, f"{path}.{key}", errors, schema)
