"""Server-side printing: ``Table`` responses for ``kubectl get``.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` and prints whatever columns the
server defines; without Table support it can only show NAME and AGE. Each row carries the cells and
the object's metadata as ``PartialObjectMetadata`` (kubectl takes NAMESPACE for ``-A`` from there).
Columns mirror kube-apiserver's printers for the built-in kinds; CRDs get their
``additionalPrinterColumns`` (a small JSONPath subset: ``.a.b``, ``.a[0].b``), or Age when they have none.
"""

from __future__ import annotations

import calendar
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from controllers.sim.resources import PrinterColumn, ResourceType

Row = list[Any]
Column = tuple[str, str, str, int, str]  # name, type, format, priority, description


def parse_time(ts: str | None) -> float | None:
    if not ts:
        return None
    try:
        return float(calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's short durations: 5s, 3m12s, 4h, 12d, 2y."""
    s = max(0, int(seconds))
    if s < 120:
        return f"{s}s"
    m = s // 60
    if m < 10:
        return f"{m}m{s % 60}s" if s % 60 else f"{m}m"
    if m < 180:
        return f"{m}m"
    h = m // 60
    if h < 8:
        return f"{h}h{m % 60}m" if m % 60 else f"{h}h"
    if h < 48:
        return f"{h}h"
    d = h // 24
    if d < 365 * 2:
        return f"{d}d"
    return f"{d // 365}y"


def _age(obj: dict[str, Any], now: float) -> str:
    created = parse_time(obj["metadata"].get("creationTimestamp"))
    return "<unknown>" if created is None else human_duration(now - created)


def _pod_cells(obj: dict[str, Any], now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    statuses = status.get("containerStatuses") or []
    total = len(spec.get("containers") or [])
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount", 0)) for c in statuses)
    reason = status.get("reason") or status.get("phase") or "Pending"
    for c in statuses:
        waiting = (c.get("state") or {}).get("waiting")
        terminated = (c.get("state") or {}).get("terminated")
        if waiting and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated and terminated.get("reason"):
            reason = terminated["reason"]
    if obj["metadata"].get("deletionTimestamp"):
        reason = "Terminating"
    return [obj["metadata"]["name"], f"{ready}/{total}", reason, restarts, _age(obj, now),
            status.get("podIP") or "<none>", spec.get("nodeName") or "<none>", "<none>", "<none>"]


def _deployment_cells(obj: dict[str, Any], now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [obj["metadata"]["name"], f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
            status.get("updatedReplicas", 0), status.get("availableReplicas", 0), _age(obj, now),
            ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers),
            _selector_text((spec.get("selector") or {}).get("matchLabels"))]


def _replicaset_cells(obj: dict[str, Any], now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    return [obj["metadata"]["name"], spec.get("replicas", 0), status.get("replicas", 0),
            status.get("readyReplicas", 0), _age(obj, now), ",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers),
            _selector_text((spec.get("selector") or {}).get("matchLabels"))]


def _selector_text(labels: dict[str, str] | None) -> str:
    return ",".join(f"{k}={v}" for k, v in (labels or {}).items()) or "<none>"


def _service_external_ip(spec: dict[str, Any], status: dict[str, Any]) -> str:
    kind = spec.get("type", "ClusterIP")
    if kind == "ExternalName":
        return str(spec.get("externalName") or "<none>")
    external = list(spec.get("externalIPs") or [])
    if kind == "LoadBalancer":
        ingress = [i.get("ip") or i.get("hostname") for i in (status.get("loadBalancer") or {}).get("ingress") or []]
        return ",".join([*filter(None, ingress), *external]) or "<pending>"
    return ",".join(external) or "<none>"


def _service_cells(obj: dict[str, Any], now: float) -> Row:
    spec = obj.get("spec") or {}
    ports = ",".join(f"{p.get('port')}:{p['nodePort']}/{p.get('protocol', 'TCP')}" if p.get("nodePort")
                     else f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in spec.get("ports") or []) or "<none>"
    return [obj["metadata"]["name"], spec.get("type", "ClusterIP"), spec.get("clusterIP") or "<none>",
            _service_external_ip(spec, obj.get("status") or {}), ports, _age(obj, now),
            _selector_text(spec.get("selector"))]


_ROLE_PREFIX = "node-role.kubernetes.io/"


def _node_cells(obj: dict[str, Any], now: float) -> Row:
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = ["Ready" if ready == "True" else "NotReady" if ready == "False" else "Unknown"]
    if spec.get("unschedulable"):
        state.append("SchedulingDisabled")
    labels = obj["metadata"].get("labels") or {}
    roles = sorted({k[len(_ROLE_PREFIX):] for k in labels if k.startswith(_ROLE_PREFIX)}
                   | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set()))
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    info = status.get("nodeInfo") or {}
    return [obj["metadata"]["name"], ",".join(state), ",".join(roles) or "<none>", _age(obj, now),
            info.get("kubeletVersion", ""), addresses.get("InternalIP") or "<none>",
            addresses.get("ExternalIP") or "<none>", info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>", info.get("containerRuntimeVersion") or "<unknown>"]


def _event_cells(obj: dict[str, Any], now: float) -> Row:
    """printEvent's wide row (the API server's Tables are wide): last seen, type, reason, object,
    subobject, source, message, first seen, count, name."""
    io = obj.get("involvedObject") or {}
    source = obj.get("source") or {}

    def since(ts: str | None) -> str:
        at = parse_time(ts)
        return human_duration(now - at) if at is not None else "<unknown>"

    first = since(obj.get("firstTimestamp") or obj.get("eventTime"))
    last = since(obj["lastTimestamp"]) if obj.get("lastTimestamp") else first
    count = obj.get("count") or 1
    series = obj.get("series")
    if isinstance(series, dict):
        last, count = since(series.get("lastObservedTime")), series.get("count", count)
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    target = f"{(io.get('kind') or '').lower()}/{io['name']}" if io.get("name") else (io.get("kind") or "").lower()
    return [last, obj.get("type", ""), obj.get("reason", ""), target, io.get("fieldPath", ""),
            f"{component}, {instance}" if instance else component, (obj.get("message") or "").strip(), first, count,
            obj["metadata"]["name"]]


# kube-apiserver's column definitions for the kinds printed here (names, types, priorities and the
# descriptions it takes from the API documentation), generated from the Go types by go/tools/printcols.
_COLUMNS: dict[str, list[dict[str, Any]]] = orjson.loads(
    Path(__file__).with_name("printer_columns.json").read_bytes())["columns"]


def _columns(plural: str) -> list[Column]:
    return [(c["name"], c["type"], c["format"], c["priority"], c["description"]) for c in _COLUMNS[plural]]


_BUILTIN: dict[str, tuple[list[Column], Callable[[dict[str, Any], float], Row]]] = {
    "pods": (_columns("pods"), _pod_cells),
    "deployments": (_columns("deployments"), _deployment_cells),
    "replicasets": (_columns("replicasets"), _replicaset_cells),
    "services": (_columns("services"), _service_cells),
    "nodes": (_columns("nodes"), _node_cells),
    "configmaps": (_columns("configmaps"),
                   lambda o, now: [o["metadata"]["name"], len(o.get("data") or {}) + len(o.get("binaryData") or {}),
                                   _age(o, now)]),
    "secrets": (_columns("secrets"),
                lambda o, now: [o["metadata"]["name"], o.get("type", "Opaque"), len(o.get("data") or {}),
                                _age(o, now)]),
    "namespaces": (_columns("namespaces"),
                   lambda o, now: [o["metadata"]["name"], (o.get("status") or {}).get("phase", "Active"),
                                   _age(o, now)]),
    "events": (_columns("events"), _event_cells),
    "leases": (_columns("leases"),
               lambda o, now: [o["metadata"]["name"], (o.get("spec") or {}).get("holderIdentity", ""),
                               _age(o, now)]),
    "customresourcedefinitions": ([_columns("")[0], ("Created At", "date", "", 0, _columns("")[1][4])],
                                  lambda o, now: [o["metadata"]["name"], o["metadata"].get("creationTimestamp")]),
}

# A field may contain backslash-escaped dots, as label keys in printer columns do:
# ``.metadata.labels.app\.kubernetes\.io/name``.
_JSONPATH_TOKEN = re.compile(r"\.((?:[^.\[\]\\]|\\.)+)|\[(\d+)\]|\['([^']+)'\]")


def jsonpath_value(obj: Any, path: str) -> Any:
    """Evaluate the simple JSONPath subset CRD printer columns use; None if absent."""
    cur = obj
    for m in _JSONPATH_TOKEN.finditer(path.strip().lstrip("{").rstrip("}")):
        field, index, quoted = m.groups()
        if index is not None:
            if not isinstance(cur, list) or int(index) >= len(cur):
                return None
            cur = cur[int(index)]
        else:
            name = re.sub(r"\\(.)", r"\1", field) if field is not None else quoted
            if not isinstance(cur, dict) or name not in cur:
                return None
            cur = cur[name]
    return cur


def _column_defs(columns: list[Column]) -> list[dict[str, Any]]:
    return [{"name": n, "type": t, "format": f, "description": d or n, "priority": p} for n, t, f, p, d in columns]


# metav1.ObjectMeta's field docs, which a custom resource's default columns are described by.
_NAME_DOC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
             "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
             "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
             "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
_CREATED_DOC = ("CreationTimestamp is a timestamp representing the server time when this object was created. It is "
                "not guaranteed to be set in happens-before order across separate operations. Clients may not set "
                "this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. "
                "Null for lists. More info: "
                "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
_DEFAULT_CR_COLUMNS = (PrinterColumn(name="Age", type="date", json_path=".metadata.creationTimestamp",
                                     description=_CREATED_DOC),)


def _custom(rt: ResourceType) -> tuple[list[Column], Callable[[dict[str, Any], float], Row]]:
    """A custom resource's columns: Name, then its ``additionalPrinterColumns`` -- or, when it has
    none, Age (apiextensions' serveDefaultColumnsIfEmpty)."""
    printers = list(rt.printer_columns) or list(_DEFAULT_CR_COLUMNS)
    columns: list[Column] = [("Name", "string", "name", 0, _NAME_DOC)]
    columns += [(c.name, c.type, c.format, c.priority,
                 c.description or f"Custom resource definition column (in JSONPath format): {c.json_path}")
                for c in printers]

    def cells(obj: dict[str, Any], now: float) -> Row:
        row: Row = [obj["metadata"]["name"]]
        for c in printers:
            value = jsonpath_value(obj, c.json_path)
            if c.type == "date" and isinstance(value, str):
                created = parse_time(value)
                value = human_duration(now - created) if created is not None else value
            if isinstance(value, dict | list):
                value = orjson.dumps(value).decode()
            row.append(value)
        return row

    return columns, cells


def printer(rt: ResourceType) -> tuple[list[Column], Callable[[dict[str, Any], float], Row]]:
    if rt.builtin and rt.plural in _BUILTIN:
        return _BUILTIN[rt.plural]
    if rt.builtin:
        return [_columns("pods")[0], _columns("pods")[4]], lambda o, now: [o["metadata"]["name"], _age(o, now)]
    return _custom(rt)


def partial_object_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the API server's ``as=PartialObjectMetadata`` conversion answers it, and as a
    Table row embeds it: all of its metadata (``managedFields`` too), nothing else."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def table(rt: ResourceType, objects: list[dict[str, Any]], *, now: float, resource_version: str,
          include_object: str = "Metadata", continue_token: str | None = None,
          remaining: int | None = None, headers: bool = True) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table for ``objects``."""
    columns, cells = printer(rt)
    rows = []
    for obj in objects:
        if include_object == "None":
            embedded: Any = None
        elif include_object == "Object":
            embedded = obj
        else:
            embedded = partial_object_metadata(obj)
        try:
            row_cells = cells(obj, now)
        except (AttributeError, TypeError, ValueError, KeyError):
            # Objects the typed printers cannot read (custom garbage in a field) still get a row.
            row_cells = [obj["metadata"].get("name", "")] + ["<unknown>"] * (len(columns) - 1)
        row: dict[str, Any] = {"cells": row_cells, "object": embedded}
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    if remaining is not None:
        meta["remainingItemCount"] = remaining
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
            "columnDefinitions": _column_defs(columns) if headers else [], "rows": rows}
