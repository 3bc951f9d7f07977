"""Label and field selectors, parsed once per request and matched per object.

Label selectors follow apimachinery's grammar: comma-separated requirements ``k``, ``!k``,
``k=v``/``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``. Field selectors only support the
fields a real API server indexes for each kind (``metadata.name``/``metadata.namespace`` everywhere,
``involvedObject.*`` on events, a few pod fields); anything else is a 400, which is what clients
that probe for support rely on. Both selectors compile to a predicate over a raw object dict so the
watch fan-out can test thousands of objects without re-parsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from controllers.sim.errors import StatusError, bad_request

Matcher = Callable[[dict[str, Any]], bool]

LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
LABEL_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                         r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def _always(_obj: dict[str, Any]) -> bool:
    return True


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``in (...)`` value sets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return parts


def _check_key(key: str, source: str) -> str:
    key = key.strip()
    if not key or len(key) > 316 or not LABEL_NAME.match(key):
        raise bad_request(f"unable to parse requirement: invalid label key \"{key}\" in selector \"{source}\"")
    return key


def _check_value(value: str, source: str) -> str:
    value = value.strip()
    if len(value) > 63 or not LABEL_VALUE.match(value):
        raise bad_request(f"unable to parse requirement: invalid label value: \"{value}\" in selector \"{source}\"")
    return value


_SET_RE = re.compile(r"^\s*(?P<key>[^\s!=()]+)\s+(?P<op>in|notin)\s*\((?P<vals>[^()]*)\)\s*$")


def parse_label_selector(text: str | None) -> Matcher:
    """Compile a label selector string; raises 400 on a syntax error."""
    if not text or not text.strip():
        return _always
    preds: list[Callable[[dict[str, str]], bool]] = []
    for raw in _split_top_level(text):
        req = raw.strip()
        if not req:
            raise bad_request(f"unable to parse requirement: found '', expected: identifier in selector \"{text}\"")
        m = _SET_RE.match(req)
        if m:
            key = _check_key(m["key"], text)
            vals = frozenset(_check_value(v, text) for v in m["vals"].split(",")) if m["vals"].strip() else None
            if vals is None:
                raise bad_request(f"unable to parse requirement: for 'in', 'notin' operators, values set can't be empty in selector \"{text}\"")
            if m["op"] == "in":
                preds.append(lambda labels, k=key, vs=vals: labels.get(k) in vs)
            else:
                preds.append(lambda labels, k=key, vs=vals: labels.get(k) not in vs)
            continue
        if req.startswith("!"):
            key = _check_key(req[1:], text)
            preds.append(lambda labels, k=key: k not in labels)
            continue
        for op in ("!=", "==", "="):
            if op in req:
                key, _, value = req.partition(op)
                key = _check_key(key, text)
                value = _check_value(value, text)
                if op == "!=":
                    preds.append(lambda labels, k=key, v=value: labels.get(k) != v)
                else:
                    preds.append(lambda labels, k=key, v=value: labels.get(k) == v)
                break
        else:
            if any(c in req for c in "()<> "):
                raise bad_request(f"unable to parse requirement: found '{req}', expected: identifier in selector \"{text}\"")
            key = _check_key(req, text)
            preds.append(lambda labels, k=key: k in labels)

    def match(obj: dict[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(p(labels) for p in preds)

    return match


def selector_from_label_selector(sel: dict[str, Any] | None) -> str:
    """Render a ``metav1.LabelSelector`` (matchLabels/matchExpressions) as a selector string."""
    if not sel:
        return ""
    parts = [f"{k}={v}" for k, v in sorted((sel.get("matchLabels") or {}).items())]
    for expr in sel.get("matchExpressions") or []:
        key, op, values = expr.get("key", ""), expr.get("operator", ""), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


# Boolean fields: the API server's field sets format them with strconv.FormatBool, absent as "false".
_BOOL_FIELDS = frozenset(("spec.unschedulable", "spec.hostNetwork"))


def _path_getter(path: str) -> Callable[[dict[str, Any]], str]:
    keys = path.split(".")
    boolean = path in _BOOL_FIELDS

    def get(obj: dict[str, Any]) -> str:
        cur: Any = obj
        for k in keys:
            if not isinstance(cur, dict):
                cur = None
                break
            cur = cur.get(k)
        if boolean:
            return "true" if cur is True else "false"
        if cur is None:
            return ""
        return str(cur)

    return get


_COMMON_FIELDS = {"metadata.name", "metadata.namespace"}
_KIND_FIELDS: dict[str, set[str]] = {
    "events": {
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
        "reason", "reportingComponent", "source", "type",
    },
    "pods": {
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName",
    },
    "secrets": {"type"},
    "nodes": {"spec.unschedulable"},
    "namespaces": {"status.phase"},
    "replicasets": {"status.replicas"},
}


def parse_field_selector(text: str | None, plural: str, builtin: bool = True) -> Matcher:
    """Compile a field selector for ``plural``; unsupported fields are a 400 like the real server."""
    if not text or not text.strip():
        return _always
    allowed = _COMMON_FIELDS | (_KIND_FIELDS.get(plural, set()) if builtin else set())
    preds: list[Matcher] = []
    for raw in text.split(","):
        req = raw.strip()
        if not req:
            continue
        for op in ("!=", "==", "="):
            if op in req:
                field, _, value = req.partition(op)
                field = field.strip()
                break
        else:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{req}'")
        if field not in allowed:
            raise StatusError(400, f'field label not supported: {field}')
        getter = _path_getter(field)
        if field == "source" and plural == "events":
            getter = _path_getter("source.component")
        value = value.strip()
        if op == "!=":
            preds.append(lambda o, g=getter, v=value: g(o) != v)
        else:
            preds.append(lambda o, g=getter, v=value: g(o) == v)
    return lambda obj: all(p(obj) for p in preds)
