"""Server-side apply: merge a manager's configuration and track who owns which field.

An apply request carries the *whole intent* of one field manager (``fieldManager`` is required).
The server, as structured-merge-diff's ``Updater.Apply`` does:

1. merges the configuration into the live object -- maps recursively, keyed lists (containers by
   name, a Service's ports by port and protocol) item by item in the order the two lists agree on,
   sets as unions, atomic lists and structs and scalars replaced;
2. removes fields this manager applied before but no longer mentions, provided nobody else owns
   them -- this is how removing a container from the file removes it from the cluster;
3. refuses (409 Conflict) when the merge changes a field another manager owns, unless
   ``force=true``, in which case ownership moves to the applier; setting a field to the value it
   already has is no conflict, and the two managers then share it;
4. records the manager's exact field set (``managedfields.to_field_set`` of the configuration) as an
   ``Apply`` entry in ``managedFields``.

A first apply creates the object (201). Paths and list identity come from ``managedfields.py``.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

from controllers.sim import managedfields
from controllers.sim.errors import StatusError
from controllers.sim.managedfields import Path, Ref
from controllers.sim.resources import ResourceType
from controllers.sim.store import copy_obj


def _merge_list(live: list[Any], applied: list[Any], lst: dict[str, Any]) -> list[Any]:
    """Keyed list items merged in structured-merge-diff's order: the applied list's order for the
    items it names, items only on the server staying where they were between them."""
    live_pes = managedfields.item_elements(lst, live)
    applied_pes = managedfields.item_elements(lst, applied)
    live_items = dict(zip(live_pes, live, strict=True))
    applied_items = dict(zip(applied_pes, applied, strict=True))
    shared = [pe for pe in applied_pes if pe in live_items]
    next_shared = shared.pop(0) if shared else None
    merged_applied: set[str] = set()
    out: list[Any] = []
    li = ai = 0
    elem = lst["elem"]
    while li < len(live_pes) or ai < len(applied_pes):
        if li < len(live_pes) and ai < len(applied_pes):
            pe = live_pes[li]
            if pe == applied_pes[ai]:
                merged_applied.add(pe)
                out.append(_merge(live_items[pe], applied_items[pe], elem))
                li += 1
                ai += 1
                next_shared = shared.pop(0) if shared else None
                continue
            if pe in applied_items and next_shared is not None and next_shared != pe:
                li += 1  # a shared item, but not the one this round places
                continue
        if li < len(live_pes):
            pe = live_pes[li]
            if pe not in applied_items:
                out.append(live[li])
                li += 1
                continue
            if pe in merged_applied:
                li += 1
        if ai < len(applied_pes):
            pe = applied_pes[ai]
            merged_applied.add(pe)
            out.append(_merge(live_items[pe], applied_items[pe], elem) if pe in live_items
                       else copy_obj(applied_items[pe]))
            ai += 1
            if next_shared is not None and next_shared == pe:
                next_shared = shared.pop(0) if shared else None
    return out


def _merge(live: Any, applied: Any, ref: Ref) -> Any:
    """``applied`` merged into ``live`` (structured-merge-diff's Merge)."""
    scalar, lst, mp = managedfields.atom(ref)
    if isinstance(applied, dict) and isinstance(live, dict) and mp is not None and mp.get("rel") != "atomic":
        fields, elem = mp.get("fields") or {}, managedfields.element_of(mp)
        out = dict(live)
        for k, v in applied.items():
            out[k] = _merge(live[k], v, fields.get(k) or elem) if k in live else copy_obj(v)
        return out
    if isinstance(applied, list) and isinstance(live, list) and lst is not None and lst.get("rel") == "associative":
        return _merge_list(live, applied, lst)
    return copy_obj(applied)


def _remove_path(obj: Any, path: Path) -> None:
    """Remove the field (or whole list item) a path names, if it is there."""
    cur = obj
    for i, el in enumerate(path):
        last = i == len(path) - 1
        if el.startswith("f:"):
            name = el[2:]
            if not isinstance(cur, dict) or name not in cur:
                return
            if last:
                del cur[name]
                return
            cur = cur[name]
        elif el.startswith(("k:", "v:")) and isinstance(cur, list):
            want = orjson.loads(el[2:])
            if el.startswith("k:"):
                idx = next((j for j, x in enumerate(cur) if isinstance(x, dict)
                            and all(x.get(k) == v for k, v in want.items())), None)
            else:
                idx = next((j for j, x in enumerate(cur) if x == want), None)
            if idx is None:
                return
            if last:
                cur.pop(idx)
                return
            cur = cur[idx]
        else:
            return


def _print_manager(entry: dict[str, Any]) -> str:
    """A conflicting manager as the field manager names it: quoted, with its subresource, and for
    an Update (which owns fields of one version) the version: ``"kubectl" using v1``."""
    text = json.dumps(entry.get("manager", ""))
    if entry.get("subresource"):
        text += f" with subresource {json.dumps(entry['subresource'])}"
    if entry.get("operation") == "Update":
        text += f" using {entry.get('apiVersion', '')}"
    return text


def describe(path: Path) -> str:
    """A path as structured-merge-diff prints it: ``.spec.containers[name="web"].image``."""
    out = []
    for el in path:
        if el.startswith("f:"):
            out.append("." + el[2:])
        elif el.startswith("k:"):
            key = orjson.loads(el[2:])
            out.append("[" + ",".join(f"{k}={orjson.dumps(v).decode()}" for k, v in key.items()) + "]")
        elif el.startswith("v:"):
            out.append(f"[={el[2:]}]")
        else:
            out.append(f"[{el[2:]}]")
    return "".join(out)


def server_side_apply(rt: ResourceType, live: dict[str, Any] | None, applied: dict[str, Any], *, manager: str,
                      force: bool, now: str, subresource: str | None = None
                      ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(object to store, its managedFields) for ``manager`` applying ``applied`` over ``live``."""
    meta = applied.get("metadata") or {}
    if meta.get("managedFields"):
        raise StatusError(400, "metadata.managedFields must be nil")
    root = managedfields.root_of(rt)
    mine = managedfields.owned_by_write(managedfields.to_field_set(applied, root), rt, subresource)
    if live is None:
        return copy_obj(applied), [managedfields.apply_entry(manager, rt.api_version, now, mine, subresource)]
    entries = managedfields.owned(live["metadata"].get("managedFields"))
    previous: set[Path] = set()
    others: set[Path] = set()
    for entry, paths in entries:
        if managedfields.same_slot(entry, manager, "Apply", subresource):
            previous = paths
        else:
            others |= paths
    merged = _merge(copy_obj(live), applied, root)
    # What this manager applied last time and no longer does goes, unless someone still owns it
    # (or a field beneath it: a list item another manager added a field to stays).
    keep = mine | others
    gone: list[Path] = []
    for p in sorted(previous - keep, key=len):  # a whole list item before its fields (its key among them)
        if any(p[:len(g)] == g for g in gone):
            continue
        if not any(len(o) > len(p) and o[:len(p)] == p for o in keep):
            _remove_path(merged, p)
            gone.append(p)
    cmp = managedfields.compare(live, merged, root)
    changed = managedfields.owned_by_write(cmp.added | cmp.modified, rt, subresource)
    removed = managedfields.owned_by_write(cmp.removed, rt, subresource)
    conflicts: list[tuple[str, Path]] = []
    for entry, paths in entries:
        if not managedfields.same_slot(entry, manager, "Apply", subresource):
            conflicts.extend((_print_manager(entry), p) for p in paths & changed)
    if conflicts and not force:
        conflicts.sort(key=lambda c: (c[0], describe(c[1])))
        lines = [f"conflict with {m}: {describe(p)}" for m, p in conflicts]
        message = (f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
                   + "; ".join(lines))
        # The field manager's ConflictError names no object: its details are the causes alone.
        raise StatusError(409, message, reason="Conflict",
                          causes=[{"reason": "FieldManagerConflict", "message": f"conflict with {m}",
                                   "field": describe(p)} for m, p in conflicts])
    new_entries: list[dict[str, Any]] = []
    for entry, paths in entries:
        if managedfields.same_slot(entry, manager, "Apply", subresource):
            continue
        kept = paths - changed - removed
        if kept == paths:
            new_entries.append(entry)
        elif kept:
            new_entries.append({**entry, "fieldsV1": managedfields.to_fields_v1(kept)})
    new_entries.append(managedfields.apply_entry(manager, rt.api_version, now, mine, subresource))
    new_entries = managedfields.sort_entries(new_entries)
    merged.setdefault("metadata", {})["managedFields"] = new_entries
    return merged, new_entries
