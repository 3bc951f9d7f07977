"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902).

These are the two schema-free patch types: a merge patch recursively merges maps, replaces lists
whole and deletes keys set to ``null``; a JSON patch is a list of pointer operations applied in
order, all or nothing. A malformed patch document is a 400; a well-formed patch that cannot be
applied (a missing path, a failed ``test``) is a 422, as on a real API server -- where, too, a
``replace`` of a key an existing object lacks adds it. Neither ever mutates its input: the store
only sees the finished object.
"""

from __future__ import annotations

from typing import Any

from controllers.sim.errors import StatusError, bad_request
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
    return StatusError(422, f"the server rejected our request due to an error in our request: {message}",
                       reason="Invalid")


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise bad_request(f"invalid JSON pointer: {path!r}")
    if path == "":
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


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


def json_patch(target: Any, ops: Any) -> Any:
    """RFC 6902: apply ``ops`` to a copy of ``target``; all-or-nothing."""
    if not isinstance(ops, list):
        raise bad_request("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    doc = copy_obj(target)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise bad_request("json patch operation must be an object with an \"op\"")
        kind = op["op"]
        tokens = _pointer(op.get("path"))
        if kind in ("add", "replace", "test") and "value" not in op:
            raise bad_request(f"missing value for {kind} operation")
        if kind == "add":
            doc = _add(doc, tokens, copy_obj(op["value"]))
        elif kind == "remove":
            _remove(doc, tokens)
        elif kind == "replace":
            doc = _add(doc, tokens, copy_obj(op["value"]), replace=True)
        elif kind == "move":
            value = _remove(doc, _pointer(op.get("from")))
            doc = _add(doc, tokens, value)
        elif kind == "copy":
            doc = _add(doc, tokens, copy_obj(_get(doc, _pointer(op.get("from")))))
        elif kind == "test":
            if _get(doc, tokens) != op["value"]:
                raise _unprocessable(f"testing value {op.get('path')} failed")
        else:
            raise bad_request(f"Unexpected kind: {kind}")
    return doc
