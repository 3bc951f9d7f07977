"""Server-side apply: merge a manager's configuration and track who owns which field.

An apply request carries the *whole intent* of one field manager (``fieldManager`` is required).
The server:

1. merges the configuration into the live object — maps recursively, keyed lists (containers by
   name, ...) item by item, atomic lists and scalars replaced;
2. refuses (409 Conflict) when another manager owns a field the configuration sets to a different
   value, unless ``force=true``, in which case ownership moves to the applier;
3. removes fields this manager applied before but no longer mentions, provided nobody else owns
   them — this is how removing a container from the file removes it from the cluster;
4. records the manager's exact field set as an ``Apply`` entry in ``managedFields``.

A first apply creates the object (201). Ownership and paths come from ``managedfields.py``.
"""

from __future__ import annotations

from typing import Any

import orjson

from controllers.sim import managedfields
from controllers.sim.errors import StatusError
from controllers.sim.managedfields import Path
from controllers.sim.resources import ResourceType
from controllers.sim.schema import list_strategy
from controllers.sim.store import copy_obj


def _merge(live: Any, applied: Any, rt: ResourceType, dotted: str) -> Any:
    if isinstance(applied, dict) and isinstance(live, dict):
        out = dict(live)
        for k, v in applied.items():
            out[k] = _merge(live.get(k), v, rt, f"{dotted}.{k}" if dotted else k)
        return out
    if isinstance(applied, list) and isinstance(live, list):
        strategy = list_strategy(rt.key, rt.builtin, dotted)
        if strategy:
            out = list(live)
            for item in applied:
                if not isinstance(item, dict):
                    return copy_obj(applied)
                idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(strategy) == item.get(strategy)),
                           None)
                if idx is None:
                    out.append(copy_obj(item))
                else:
                    out[idx] = _merge(out[idx], item, rt, dotted)
            return out
        if strategy == "":
            return list(live) + [x for x in applied if x not in live]
    return copy_obj(applied)


def _remove_path(obj: Any, path: Path) -> None:
    """Remove the field named by a FieldsV1 leaf path (a whole list item for ``k:...`` + ``.``)."""
    cur = obj
    for i, el in enumerate(path):
        last = i == len(path) - 1 or (i == len(path) - 2 and path[-1] == ".")
        if el.startswith("f:"):
            name = el[2:]
            if not isinstance(cur, dict) or name not in cur:
                return
            if last:
                del cur[name]
                return
            cur = cur[name]
        elif el.startswith("k:"):
            want = orjson.loads(el[2:])
            if not isinstance(cur, list):
                return
            idx = next((j for j, x in enumerate(cur) if isinstance(x, dict)
                        and all(x.get(k) == v for k, v in want.items())), None)
            if idx is None:
                return
            if last:
                cur.pop(idx)
                return
            cur = cur[idx]
        elif el.startswith("v:"):
            value = orjson.loads(el[2:])
            if isinstance(cur, list) and value in cur:
                cur.remove(value)
            return
        else:
            return


def _describe(path: Path) -> str:
    return "".join("." + el[2:] if el.startswith("f:") else f"[{el[2:]}]" for el in path if el != ".")


def server_side_apply(rt: ResourceType, live: dict[str, Any] | None, applied: dict[str, Any], *, manager: str,
                      force: bool, now: str, subresource: str | None = None
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(object to store, its managedFields) for ``manager`` applying ``applied`` over ``live``."""
    meta = applied.get("metadata") or {}
    if meta.get("managedFields"):
        raise StatusError(400, "metadata.managedFields must be nil")
    include_status = subresource == "status"
    flat_applied = managedfields.flatten(applied, key=rt.key, builtin=rt.builtin, include_status=include_status)
    mine: set[Path] = set(flat_applied)
    if live is None:
        return copy_obj(applied), [managedfields.apply_entry(manager, rt.api_version, now, mine, subresource)]
    flat_live = managedfields.flatten(live, key=rt.key, builtin=rt.builtin, include_status=True)
    entries = managedfields.owned(live["metadata"].get("managedFields"))
    previous: set[Path] = set()
    conflicts: list[tuple[str, Path]] = []
    for entry, paths in entries:
        if entry.get("manager") == manager and entry.get("operation") == "Apply" \
                and entry.get("subresource") == subresource:
            previous = paths
            continue
        for p in paths & mine:
            if p[-1] != "." and flat_live.get(p) != flat_applied.get(p):
                conflicts.append((entry.get("manager", ""), p))
    if conflicts and not force:
        lines = [f'conflict with "{m}": {_describe(p)}' for m, p in sorted(conflicts)]
        message = (f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
                   + "; ".join(lines))
        raise StatusError(409, message, reason="Conflict", name=meta.get("name"), group=rt.group, kind=rt.plural,
                          causes=[{"reason": "FieldManagerConflict", "message": line, "field": _describe(p)}
                                  for line, (_, p) in zip(lines, sorted(conflicts), strict=True)])
    stolen = {p for _, p in conflicts}
    merged = _merge(copy_obj(live), applied, rt, "")
    others: set[Path] = set()
    new_entries: list[dict[str, Any]] = []
    for entry, paths in entries:
        if entry.get("manager") == manager and entry.get("operation") == "Apply" \
                and entry.get("subresource") == subresource:
            continue
        kept = paths - stolen
        others |= kept
        if kept == paths:
            new_entries.append(entry)
        elif kept:
            new_entries.append({**entry, "fieldsV1": managedfields.to_fields_v1(kept)})
    doomed = previous - mine - others
    # A whole list item goes as one: removing its key field first would make it unfindable.
    items = {p[:-1] for p in doomed if p[-1] == "."}
    for p in sorted(doomed, key=len, reverse=True):
        if p[-1] != "." and any(p[: len(i)] == i for i in items):
            continue
        prefix = p[:-1] if p[-1] == "." else p
        if not any(o[: len(prefix)] == prefix for o in others):
            _remove_path(merged, p)
    new_entries.append(managedfields.apply_entry(manager, rt.api_version, now, mine, subresource))
    merged.setdefault("metadata", {})["managedFields"] = new_entries
    return merged, new_entries
