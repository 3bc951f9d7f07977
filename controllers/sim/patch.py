"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

These are the two schema-free patch types: a merge patch recursively merges maps, replaces lists
whole and deletes keys set to ``null``; a JSON patch is a list of pointer operations applied in
order, all or nothing. A malformed patch document is a 400 (``codec.decode_patch``); a patch that
cannot be applied (a missing path, a failed ``test``, an unknown op) is a 422 that, as on a real
API server, does not say why -- where, too, a ``replace`` of a key an existing object lacks adds
it. Neither ever mutates its input: the store only sees the finished object.
"""

from __future__ import annotations

from typing import Any

from controllers.sim.errors import StatusError
from controllers.sim.store import copy_obj


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: the result of merging ``patch`` into ``target`` (a new value)."""
    if not isinstance(patch, dict):
        return copy_obj(patch)
    result = copy_obj(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            result.pop(k, None)
        else:
            result[k] = merge_patch(result.get(k), v)
    return result


def _unprocessable(message: str) -> StatusError:
    """A patch that does not apply. The API server keeps json-patch's reason to itself (``message``
    documents it here): a generic 422 whose details are empty."""
    del message
    return StatusError(422, "the server rejected our request due to an error in our request", reason="Invalid",
                       generic=True)


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str):
        raise _unprocessable(f"invalid JSON pointer: {path!r}")
    if path == "":
        return []
    # json-patch v4 splits on "/" and drops the first part, whatever it is: "data/x" names the
    # top-level "x" (which the kind's type then drops), not an error.
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def _index(container: list[Any], token: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token[0] == "0"):
        raise _unprocessable(f"invalid array index: {token}")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise _unprocessable(f"array index out of bounds: {i}")
    return i


def _parent(doc: Any, tokens: list[str]) -> Any:
    cur = doc
    for t in tokens[:-1]:
        if isinstance(cur, dict):
            if t not in cur:
                raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")
            cur = cur[t]
        elif isinstance(cur, list):
            cur = cur[_index(cur, t, allow_end=False)]
        else:
            raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")
    return cur


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, allow_end=False)]
    raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")


def _remove(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        raise _unprocessable("cannot remove the whole document")
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        if last not in parent:
            raise _unprocessable(f"unable to remove nonexistent key: {last}: missing value")
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, allow_end=False))
    raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")


def _add(doc: Any, tokens: list[str], value: Any, replace: bool = False) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        # A replace of a key the object lacks adds it: the API server's json-patch (evanphx v4)
        # only checks that the parent exists.
        parent[last] = value
    elif isinstance(parent, list):
        if replace:
            parent[_index(parent, last, allow_end=False)] = value
        else:
            parent.insert(_index(parent, last, allow_end=True), value)
    else:
        raise _unprocessable(f"doc is missing path: /{'/'.join(tokens)}")
    return doc


def json_patch(target: Any, ops: list[dict[str, Any]]) -> Any:
    """RFC 6902 as json-patch v4 applies it: ``ops`` (a list of objects, ``codec.decode_patch``)
    to a copy of ``target``; all-or-nothing. A missing ``value`` is null."""
    doc = copy_obj(target)
    for op in ops:
        kind = op.get("op")
        tokens = _pointer(op.get("path"))
        if kind == "add":
            doc = _add(doc, tokens, copy_obj(op.get("value")))
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind == "replace":
            doc = _add(doc, tokens, copy_obj(op.get("value")), replace=True)
        elif kind == "move":
            value = _remove(doc, _pointer(op.get("from")))
            doc = _add(doc, tokens, value)
        elif kind == "copy":
            doc = _add(doc, tokens, copy_obj(_get(doc, _pointer(op.get("from")))))
        elif kind == "test":
            if _get(doc, tokens) != op.get("value"):
                raise _unprocessable(f"testing value {op.get('path')} failed")
        else:
            raise _unprocessable(f"Unexpected kind: {kind}")
    return doc
