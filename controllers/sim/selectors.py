"""Label and field selectors, parsed once per request and matched per object.

Label selectors follow apimachinery's grammar (``controllers.labels``, shared with the runtime's
reconciler client; here a selector that does not parse is a 400). Field selectors only support the
fields a real API server indexes for each kind (``metadata.name``/``metadata.namespace`` everywhere,
``involvedObject.*`` on events, a few pod fields); anything else is a 400, which is what clients
that probe for support rely on. Both selectors compile to a predicate over a raw object dict so the
watch fan-out can test thousands of objects without re-parsing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controllers.labels import LABEL_NAME, LABEL_VALUE, Matcher, SelectorError, everything, selector_from_label_selector
from controllers.labels import parse_label_selector as _parse_label_selector
from controllers.sim.errors import StatusError, bad_request

__all__ = ["LABEL_NAME", "LABEL_VALUE", "Matcher", "parse_field_selector", "parse_label_selector",
           "selector_from_label_selector"]


def parse_label_selector(text: str | None) -> Matcher:
    """Compile a label selector string (``controllers.labels``); a syntax error is a 400."""
    try:
        return _parse_label_selector(text)
    except SelectorError as exc:
        raise bad_request(str(exc)) from None


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
# Kinds that register their own field label conversion with the API server (k8s.io/kubernetes
# pkg/apis/*/v1/conversion.go): exactly these fields, and "field label not supported" for others.
# Every other built-in kind takes only the common two, refused with apimachinery's
# DefaultMetaV1FieldSelectorConversion message. (apps/v1 registers none: a ReplicaSet's indexed
# status.replicas is not selectable through apps/v1.)
_KIND_FIELDS: dict[str, set[str]] = {
    "events": {
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
        "involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
        "reason", "reportingComponent", "source", "type", *_COMMON_FIELDS,
    },
    "pods": {
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
        "spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName",
        *_COMMON_FIELDS,
    },
    "secrets": {"type", *_COMMON_FIELDS},
    "services": {"spec.clusterIP", "spec.type", *_COMMON_FIELDS},
    "jobs": {"status.successful", *_COMMON_FIELDS},
    "nodes": {"metadata.name", "spec.unschedulable"},
    "namespaces": {"metadata.name", "status.phase"},
}


def _unsupported(field: str, plural: str, builtin: bool) -> StatusError:
    if builtin and plural not in _KIND_FIELDS:
        return bad_request(f'"{field}" is not a known field selector: only "metadata.name", "metadata.namespace"')
    return bad_request(f"field label not supported: {field}")


def parse_field_selector(text: str | None, plural: str, builtin: bool = True) -> Matcher:
    """Compile a field selector for ``plural``; unsupported fields are a 400 like the real server."""
    if not text or not text.strip():
        return everything
    allowed = _KIND_FIELDS.get(plural, _COMMON_FIELDS) if builtin else _COMMON_FIELDS
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
        if field == "spec.host" and plural == "pods":
            field = "spec.nodeName"  # what old v1 clients send, converted as the API server does
        if field not in allowed:
            raise _unsupported(field, plural, builtin)
        getter = _path_getter(field)
        if field == "source" and plural == "events":
            getter = _path_getter("source.component")
        value = value.strip()
        if op == "!=":
            preds.append(lambda o, g=getter, v=value: g(o) != v)
        else:
            preds.append(lambda o, g=getter, v=value: g(o) == v)
    return lambda obj: all(p(obj) for p in preds)
