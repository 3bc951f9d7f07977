"""LazyObject: an update handler's ``old`` from the compact cache, decoded only if it is read.

Why: the compact Store (``store.py``) keeps each object as its JSON bytes, so the object an update
replaces is bytes too, and handing it to ``on_update(old, new)`` as a dict means decoding it:
~10-15 us for a 3.8 KB Pod, the largest single cost of a MODIFIED event, paid on every update
for every handler -- although most handlers (an enqueue of ``new``'s key, controller-runtime's
default ``EnqueueRequestForObject``) never look at ``old``.

The contract (``SharedInformer``'s docstring and the README say the same):

* ``old`` is a read-only ``Mapping`` over the object that was cached before the update: the first
  read of any kind (``old["metadata"]``, ``old.get``, ``in``, iteration, ``len``, ``==``) decodes
  the bytes once; later reads return the same nested values. What it holds is exactly what
  ``Store.get`` would have returned for the key before the update (equal, and as fresh: mutating
  it never touches the cache).
* A handler that never reads it pays for this wrapper (~0.2 us) and nothing else.
* It is not a ``dict``: ``isinstance(old, dict)`` is false and encoders that want a dict
  (``orjson.dumps``, ``json.dumps``) refuse it with a ``TypeError``. ``old.object`` (or
  ``decoded(old)``, which passes anything else through) is the decoded ``dict`` itself;
  ``dict(old)`` a shallow copy.

Each delivery gets its own LazyObject (one per handler), so two handlers never share a decoded
dict, as they never shared one when ``old`` was decoded per handler. The decoded cache
(``cache="decoded"``) and objects the compact cache could not encode hand out the cached object
itself, as before.
"""

from __future__ import annotations

from collections.abc import Iterator, KeysView, Mapping
from typing import Any

import orjson

_loads = orjson.loads


class LazyObject(Mapping[str, Any]):
    """A cached object's JSON bytes, decoded on first read (see the module docstring)."""

    __slots__ = ("_raw", "_obj")

    def __init__(self, raw: bytes) -> None:
        self._raw = raw
        self._obj: dict[str, Any] | None = None

    @property
    def object(self) -> dict[str, Any]:
        """The decoded object (decoded on the first call, the same dict afterwards)."""
        obj = self._obj
        if obj is None:
            obj = self._obj = _loads(self._raw)
        return obj

    @property
    def is_decoded(self) -> bool:
        """Whether anything has read it yet (for tests and diagnostics; reading this decodes nothing)."""
        return self._obj is not None

    # The Mapping protocol, each through the decoded dict (Mapping's generic mixins would go
    # through __getitem__ one key at a time).
    def __getitem__(self, key: str) -> Any:
        return self.object[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.object)

    def __len__(self) -> int:
        return len(self.object)

    def __contains__(self, key: object) -> bool:
        return key in self.object

    def get(self, key: str, default: Any = None) -> Any:
        return self.object.get(key, default)

    def keys(self) -> KeysView[str]:
        return self.object.keys()

    def items(self) -> Any:
        return self.object.items()

    def values(self) -> Any:
        return self.object.values()

    def copy(self) -> dict[str, Any]:
        """A shallow copy, as ``dict.copy`` (a ``dict``)."""
        return self.object.copy()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LazyObject):
            other = other.object
        return self.object == other

    __hash__ = None  # type: ignore[assignment]  # like dict's: unhashable

    def __repr__(self) -> str:
        return f"LazyObject({self.object!r})"


def decoded(obj: Any) -> Any:
    """``obj.object`` for a ``LazyObject``, anything else as it is: for code that needs a real
    ``dict`` (a JSON encoder, a ``type(x) is dict`` walk) and may be given an update's ``old``."""
    return obj.object if type(obj) is LazyObject else obj
