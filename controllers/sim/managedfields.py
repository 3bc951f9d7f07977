"""Field ownership (``metadata.managedFields``) in the FieldsV1 format.

Server-side apply decides conflicts and removals by who owns which field, so ownership is tracked
for every write: an *Update* (PUT, patch, kubectl client-side apply) makes its manager own the
fields it changed, taking them from others; an *Apply* makes its manager own exactly the fields in
its configuration. Ownership is computed on a flattened form of the object: one entry per leaf,
keyed by a path of FieldsV1 elements (``f:spec``, ``k:{"name":"app"}`` for an item of a keyed list,
``v:"x"`` for a set member). Atomic lists and scalars are leaves.
"""

from __future__ import annotations

from typing import Any

import orjson

from controllers.sim.schema import list_strategy

Path = tuple[str, ...]
_METADATA_OWNED = ("labels", "annotations", "finalizers", "ownerReferences")


def _key_element(strategy: str, item: dict[str, Any]) -> str:
    return "k:" + orjson.dumps({strategy: item.get(strategy)}).decode()


def flatten(obj: dict[str, Any], *, key: tuple[str, str], builtin: bool, include_status: bool) -> dict[Path, Any]:
    """Leaf path → value for every field a manager can own in ``obj``."""
    out: dict[Path, Any] = {}

    def walk(val: Any, dotted: str, path: Path) -> None:
        if isinstance(val, dict) and val:
            for k, v in val.items():
                walk(v, f"{dotted}.{k}" if dotted else k, (*path, "f:" + k))
        elif isinstance(val, list):
            strategy = list_strategy(key, builtin, dotted)
            if strategy is None:
                out[path] = val
            elif strategy == "":
                for x in val:
                    out[(*path, "v:" + orjson.dumps(x).decode())] = x
            else:
                for item in val:
                    if isinstance(item, dict) and strategy in item:
                        item_path = (*path, _key_element(strategy, item))
                        out[(*item_path, ".")] = True
                        walk({k: v for k, v in item.items()}, dotted, item_path)
                    else:
                        out[path] = val
        else:
            out[path] = val

    for field, value in obj.items():
        if field in ("apiVersion", "kind"):
            continue
        if field == "metadata":
            for mk in _METADATA_OWNED:
                if mk in value:
                    walk(value[mk], f"metadata.{mk}", ("f:metadata", "f:" + mk))
        elif field == "status" and not include_status:
            continue
        else:
            walk(value, field, ("f:" + field,))
    return out


def to_fields_v1(paths: set[Path] | list[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for el in path:
            node = node.setdefault(el, {})
    return root


def from_fields_v1(fields: dict[str, Any]) -> set[Path]:
    out: set[Path] = set()

    def walk(node: dict[str, Any], path: Path) -> None:
        if not node:
            if path:
                out.add(path)
            return
        for k, v in node.items():
            walk(v if isinstance(v, dict) else {}, (*path, k))

    walk(fields, ())
    return out


def _signature(entries: list[Any]) -> list[tuple[Any, ...]]:
    return [(e.get("manager"), e.get("operation"), e.get("apiVersion"), e.get("subresource"),
             orjson.dumps(e.get("fieldsV1") or {}, option=orjson.OPT_SORT_KEYS)) for e in entries]


def is_explicit(given: Any, current: list[dict[str, Any]] | None) -> bool:
    """True when a client sent well-formed managedFields that differ from the stored ones.

    Timestamps are ignored: clients re-serialise them (``+00:00`` instead of ``Z``) on a read-modify-
    write without meaning to change ownership.
    """
    if not isinstance(given, list) or not all(
            isinstance(e, dict) and isinstance(e.get("manager"), str) and e.get("operation") in ("Apply", "Update")
            and isinstance(e.get("fieldsV1", {}), dict) for e in given):
        return False
    return _signature(given) != _signature(current or [])


def owned(entries: list[dict[str, Any]] | None) -> list[tuple[dict[str, Any], set[Path]]]:
    """Each managedFields entry with its parsed set of owned leaf paths."""
    return [(e, from_fields_v1(e.get("fieldsV1") or {})) for e in entries or []]


# Objects stamped from one template own identical field sets; sharing one (never mutated: the
# store copies objects before changing them) FieldsV1 tree among them halves a pod's memory.
_SHARED: dict[frozenset[Path], dict[str, Any]] = {}
_SHARED_LIMIT = 4096


def _shared_fields_v1(paths: set[Path]) -> dict[str, Any]:
    key = frozenset(paths)
    tree = _SHARED.get(key)
    if tree is None:
        if len(_SHARED) >= _SHARED_LIMIT:
            _SHARED.clear()
        tree = _SHARED[key] = to_fields_v1(paths)
    return tree


def _entry(manager: str, operation: str, api_version: str, now: str, paths: set[Path],
           subresource: str | None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": _shared_fields_v1(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _same_slot(e: dict[str, Any], manager: str, operation: str, subresource: str | None) -> bool:
    return (e.get("manager") == manager and e.get("operation") == operation
            and e.get("subresource") == subresource)


def track_update(old: dict[str, Any] | None, new: dict[str, Any], *, manager: str, api_version: str, now: str,
                 key: tuple[str, str], builtin: bool, subresource: str | None = None) -> list[dict[str, Any]]:
    """managedFields after an Update by ``manager``: it takes ownership of what it changed."""
    manager = manager or "unknown"
    # One flatten per version: status paths are owned through /status only, so they are filtered
    # out of what a main-resource write changed, but still count as present for other owners.
    flat_new = flatten(new, key=key, builtin=builtin, include_status=True)
    if subresource == "status":
        candidates = {p: v for p, v in flat_new.items() if p[0] == "f:status"}
    else:
        candidates = {p: v for p, v in flat_new.items() if p[0] != "f:status"}
    if old is None:
        return [_entry(manager, "Update", api_version, now, set(candidates), subresource)] if candidates else []
    flat_old = flatten(old, key=key, builtin=builtin, include_status=True)
    changed = {p for p, v in candidates.items() if p not in flat_old or flat_old[p] != v}
    present = flat_new.keys()
    result: list[dict[str, Any]] = []
    mine: set[Path] = set(changed)
    for entry, paths in owned(old.get("metadata", {}).get("managedFields")):
        if _same_slot(entry, manager, "Update", subresource):
            mine |= paths & present
            continue
        kept = (paths - changed) & present
        if kept == paths:
            result.append(entry)
        elif kept:
            result.append({**entry, "fieldsV1": to_fields_v1(kept)})
    if mine:
        result.append(_entry(manager, "Update", api_version, now, mine, subresource))
    return result


def apply_entry(manager: str, api_version: str, now: str, paths: set[Path], subresource: str | None) -> dict[str, Any]:
    return _entry(manager, "Apply", api_version, now, paths, subresource)
