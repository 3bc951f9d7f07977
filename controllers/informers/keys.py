"""Cache keys and deletion tombstones (client-go ``store.go`` key funcs, ``delta_fifo.go``).

An object's key is ``namespace/name``, or ``name`` for cluster-scoped objects. Objects are raw
Kubernetes JSON dicts decoded with orjson; nothing here builds model objects.

``DeletedFinalStateUnknown`` is the tombstone for "this object was deleted while we were not
watching": a relist no longer contains it, so the informer knows it is gone but not its final state.
``obj`` is the last state the cache knew. Delete handlers receive the tombstone and must unwrap it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

Obj = dict[str, Any]


class DeletedFinalStateUnknown(NamedTuple):
    """Tombstone: ``key`` was deleted while disconnected; ``obj`` is its last known state."""

    key: str
    obj: Any


KeyFunc = Callable[[Any], str]


def object_key(obj: Any) -> str:
    """``namespace/name`` (or ``name``) of a raw object; a tombstone's own key."""
    if type(obj) is DeletedFinalStateUnknown:
        return obj.key
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else meta["name"]


def split_key(key: str) -> tuple[str, str]:
    """``(namespace, name)`` from a key; namespace is "" for cluster-scoped keys."""
    namespace, _, name = key.rpartition("/")
    return namespace, name


def resource_version(obj: Any) -> str:
    """``metadata.resourceVersion`` of a raw object ("" if absent)."""
    return (obj.get("metadata") or {}).get("resourceVersion", "")
