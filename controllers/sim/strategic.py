"""Strategic merge patch, as the API server applies it to built-in kinds.

A strategic merge patch is a merge patch that knows which lists are really maps: ``containers`` are
merged by ``name``, ``ports`` by ``containerPort`` (see ``schema.py``), so a patch listing one
container changes that container instead of replacing the list. ``kubectl apply`` computes such a
patch from three versions (last-applied, file, live) and uses these directives:

* ``null`` deletes a map key;
* ``{"$patch": "delete", "name": "x"}`` in a keyed list removes item ``x``; ``{"$patch": "replace"}``
  in a list or map replaces it whole; ``$patch: delete`` in a map deletes that map;
* ``$setElementOrder/<list>`` gives the final order of a keyed list (items only on the server keep
  their place relative to the ordered ones); without it the patch's own items set the order, so an
  item a patch adds comes first, as on a real API server;
* ``$deleteFromPrimitiveList/<list>`` removes values from a set of strings (finalizers);
* ``$retainKeys`` lists the keys of a map that survive (a union type such as a deployment strategy
  or a volume source switching members).

None of the directives may reach the stored object: a naive merge would store them verbatim, which is
exactly how fake API servers get ``kubectl apply`` wrong.
"""

from __future__ import annotations

from typing import Any

from controllers.sim.errors import bad_request
from controllers.sim.schema import list_strategy
from controllers.sim.store import copy_obj

_DIRECTIVE = "$patch"
_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"
_RETAIN = "$retainKeys"


class StrategicMerge:
    """Applies strategic merge patches for one resource type (its list merge keys)."""

    def __init__(self, key: tuple[str, str], builtin: bool = True) -> None:
        self.key = key
        self.builtin = builtin

    def apply(self, original: dict[str, Any], patch: Any) -> dict[str, Any]:
        if not isinstance(patch, dict):
            raise bad_request("strategic merge patch must be a JSON object")
        result = self._merge_map(copy_obj(original), copy_obj(patch), "")
        return result if result is not None else {}

    def _merge_map(self, original: dict[str, Any], patch: dict[str, Any], path: str) -> dict[str, Any] | None:
        directive = patch.pop(_DIRECTIVE, None)
        if directive == "replace":
            return self._merge_map({}, patch, path)
        if directive == "delete":
            return None
        if directive not in (None, "merge"):
            raise bad_request(f"Unknown patch type: {directive!r}")
        retain = patch.pop(_RETAIN, None)
        if retain is not None:
            if not isinstance(retain, list) or not all(isinstance(k, str) for k in retain):
                raise bad_request("$retainKeys must be a list of strings")
            keep = set(retain)
            original = {k: v for k, v in original.items() if k in keep}
        orders: dict[str, list[Any]] = {}
        for k in [k for k in patch if k.startswith(_ORDER)]:
            order = patch.pop(k)
            if not isinstance(order, list):
                raise bad_request(f"{k} must be a list")
            orders[k[len(_ORDER):]] = order
        for k in [k for k in patch if k.startswith(_DELETE_PRIMITIVE)]:
            field = k[len(_DELETE_PRIMITIVE):]
            doomed = patch.pop(k)
            if isinstance(original.get(field), list) and isinstance(doomed, list):
                original[field] = [x for x in original[field] if x not in doomed]
        for k, v in patch.items():
            sub = f"{path}.{k}" if path else k
            if v is None:
                original.pop(k, None)
                continue
            cur = original.get(k)
            if isinstance(v, dict):
                merged = self._merge_map(cur if isinstance(cur, dict) else {}, v, sub)
                if merged is None:
                    original.pop(k, None)
                else:
                    original[k] = merged
            elif isinstance(v, list):
                original[k] = self._merge_list(cur if isinstance(cur, list) else [], v, sub, orders.get(k))
            else:
                original[k] = v
        # An order for a list the patch did not otherwise touch still reorders it.
        for field, order in orders.items():
            if field not in patch and isinstance(original.get(field), list):
                original[field] = self._merge_list(original[field], [], f"{path}.{field}" if path else field, order)
        return original

    def _merge_list(self, original: list[Any], patch: list[Any], path: str, order: list[Any] | None) -> list[Any]:
        strategy = list_strategy(self.key, self.builtin, path)
        if strategy is None:
            return [self._strip(x, path) for x in patch]
        if any(isinstance(x, dict) and x.get(_DIRECTIVE) == "replace" for x in patch):
            return [self._strip(x, path) for x in patch if not (isinstance(x, dict) and _DIRECTIVE in x)]
        if strategy == "":
            merged = list(original)
            for x in patch:
                if x not in merged:
                    merged.append(x)
            return _normalize_order(merged, order if order is not None else patch, original, None)
        merged = list(original)
        kept: list[Any] = []  # the patch's items other than deletions: the order the result takes
        for item in patch:
            if not isinstance(item, dict):
                raise bad_request(f"{path}: expected an object with merge key {strategy!r}, got {item!r}")
            if strategy not in item:
                raise bad_request(f"map: {item} does not contain declared merge key: {strategy}")
            key_value = item[strategy]
            idx = next((i for i, x in enumerate(merged) if isinstance(x, dict) and x.get(strategy) == key_value),
                       None)
            if item.get(_DIRECTIVE) == "delete":
                if idx is not None:
                    merged.pop(idx)
                continue
            kept.append(item)
            if idx is None:
                merged.append(self._merge_map({}, dict(item), path))
            else:
                result = self._merge_map(merged[idx], dict(item), path)
                if result is None:
                    merged.pop(idx)
                else:
                    merged[idx] = result
        return _normalize_order(merged, order if order is not None else kept, original, strategy)

    def _strip(self, value: Any, path: str) -> Any:
        """A value taken whole from the patch, with any directives inside it applied."""
        if isinstance(value, dict):
            result = self._merge_map({}, dict(value), path)
            return result if result is not None else {}
        return value


def _normalize_order(merged: list[Any], order: list[Any], original: list[Any], key: str | None) -> list[Any]:
    """The order the API server gives a merged list (strategicpatch ``normalizeElementOrder``): the
    items the patch (or its ``$setElementOrder``) names, in that order, interleaved with the items
    only the server had, which keep their live order and go before a patch item only when the live
    list had them before it. A patch that adds an item therefore puts it first."""

    def ident(x: Any) -> str:
        return repr(x.get(key) if key is not None and isinstance(x, dict) else x)

    wanted = {ident(o): i for i, o in reversed(list(enumerate(order)))}
    live = {ident(o): i for i, o in reversed(list(enumerate(original)))}
    patched = sorted((x for x in merged if ident(x) in wanted), key=lambda x: wanted[ident(x)])
    server_only = sorted((x for x in merged if ident(x) not in wanted), key=lambda x: live.get(ident(x), len(live)))
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patched):
        if j >= len(patched):
            out.append(server_only[i])
            i += 1
        elif i >= len(server_only):
            out.append(patched[j])
            j += 1
        else:
            left, right = live.get(ident(server_only[i])), live.get(ident(patched[j]))
            if left is not None and right is not None and left < right:
                out.append(server_only[i])
                i += 1
            else:
                out.append(patched[j])
                j += 1
    return out
