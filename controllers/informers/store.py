"""The informer cache: a thread-safe, indexed map from key to object (client-go ``store.go``,
``thread_safe_store.go``, ``index.go``).

Writers are the informer's delta-processing thread; readers are handlers, reconcilers and the
dashboard, from any thread. One lock guards the items and every index, so readers always see an
index consistent with the items. Objects are raw dicts and must be treated as read-only: the cache
hands out its own references (copying 3 KB Pods on every read would cost more than the rest of the
pipeline).

Indexes: an index function maps an object to a list of index values; ``by_index(name, value)``
returns the objects with that value. Every Store has the ``namespace`` index; add your own with
``add_indexers`` (also after objects are cached: the new index is built from the current items).
``Indexer`` is the same class under client-go's other name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from controllers.informers.keys import KeyFunc, Obj, object_key
from controllers.telemetry.observer import NOOP_OBSERVER, Observer, active_observer

IndexFunc = Callable[[Obj], list[str]]

NAMESPACE_INDEX = "namespace"


def namespace_index_func(obj: Obj) -> list[str]:
    """Index value for the built-in ``namespace`` index ("" for cluster-scoped objects)."""
    return [(obj.get("metadata") or {}).get("namespace") or ""]


class Store:
    """Thread-safe, indexed object cache keyed by ``namespace/name``."""

    def __init__(self, name: str = "", *, key_func: KeyFunc = object_key,
                 indexers: dict[str, IndexFunc] | None = None,
                 observer: Observer | None = None) -> None:
        self.name = name
        self.key_func = key_func
        self.observer = observer or NOOP_OBSERVER
        self._obs = active_observer(self.observer)
        self._lock = threading.Lock()
        # Invariant: for every index name, _indices[name][value] is exactly the set of keys whose
        # item produces ``value`` under _indexers[name]; empty sets are removed.
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: namespace_index_func}
        self._indices: dict[str, dict[str, set[str]]] = {NAMESPACE_INDEX: {}}
        if indexers:
            self.add_indexers(indexers)

    # -- writes --------------------------------------------------------------------------------
    def add(self, obj: Obj) -> None:
        """Insert or replace ``obj`` under its key."""
        self.upsert(self.key_func(obj), obj)

    update = add

    def upsert(self, key: str, obj: Obj) -> Obj | None:
        """Store ``obj`` under ``key`` (already computed by the caller); return the previous object."""
        with self._lock:
            items = self._items
            old = items.get(key)
            items[key] = obj
            self._update_indices(key, old, obj)
            if self._obs is not None:
                self._obs.on_store(self.name, op="upsert", key=key, obj=obj)
            return old

    def delete(self, obj: Any) -> None:
        """Remove the object with ``obj``'s key (a tombstone works too); absent keys are ignored."""
        self.remove(self.key_func(obj))

    def remove(self, key: str) -> Obj | None:
        """Remove ``key``; return the object that was cached (``None`` if absent)."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is None:
                return None
            self._update_indices(key, old, None)
            if self._obs is not None:
                self._obs.on_store(self.name, op="delete", key=key, obj=old)
            return old

    def replace(self, objs: Iterable[Obj], resource_version: str = "") -> None:
        """Make the cache exactly ``objs`` (rebuilding every index)."""
        with self._lock:
            self._items = {self.key_func(o): o for o in objs}
            self._indices = {name: {} for name in self._indexers}
            for key, obj in self._items.items():
                self._update_indices(key, None, obj)
            if self._obs is not None:
                self._obs.on_store(self.name, op="replace", key="", obj=list(self._items.items()))

    def _update_indices(self, key: str, old: Obj | None, new: Obj | None) -> None:
        for name, func in self._indexers.items():
            old_values = func(old) if old is not None else []
            new_values = func(new) if new is not None else []
            if old_values == new_values:
                continue
            index = self._indices[name]
            for value in old_values:
                keys = index.get(value)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[value]
            for value in new_values:
                index.setdefault(value, set()).add(key)

    # -- reads ---------------------------------------------------------------------------------
    def get(self, obj: Any) -> Obj | None:
        """The cached object with ``obj``'s key, or ``None``."""
        return self.get_by_key(self.key_func(obj))

    def get_by_key(self, key: str) -> Obj | None:
        """The cached object for ``key``, or ``None``."""
        with self._lock:
            return self._items.get(key)

    def list(self) -> list[Obj]:
        """Every cached object (a new list of the cached dicts)."""
        with self._lock:
            return list(self._items.values())

    def list_keys(self) -> list[str]:
        """Every cached key."""
        with self._lock:
            return list(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # -- indexes -------------------------------------------------------------------------------
    def add_indexers(self, indexers: dict[str, IndexFunc]) -> None:
        """Add index functions; existing items are indexed immediately."""
        with self._lock:
            clash = set(indexers) & set(self._indexers)
            if clash:
                raise ValueError(f"indexer(s) already exist: {sorted(clash)}")
            for name, func in indexers.items():
                self._indexers[name] = func
                index: dict[str, set[str]] = {}
                self._indices[name] = index
                for key, obj in self._items.items():
                    for value in func(obj):
                        index.setdefault(value, set()).add(key)

    def get_indexers(self) -> dict[str, IndexFunc]:
        with self._lock:
            return dict(self._indexers)

    def _index(self, index_name: str) -> dict[str, set[str]]:
        try:
            return self._indices[index_name]
        except KeyError:
            raise KeyError(f"index {index_name!r} does not exist") from None

    def index_keys(self, index_name: str, indexed_value: str) -> list[str]:
        """Keys of the objects whose ``index_name`` values include ``indexed_value``."""
        with self._lock:
            return sorted(self._index(index_name).get(indexed_value, ()))

    def by_index(self, index_name: str, indexed_value: str) -> list[Obj]:
        """Objects whose ``index_name`` values include ``indexed_value``."""
        with self._lock:
            return [self._items[k] for k in self._index(index_name).get(indexed_value, ())]

    def index(self, index_name: str, obj: Obj) -> list[Obj]:
        """Objects sharing any ``index_name`` value with ``obj``."""
        with self._lock:
            index = self._index(index_name)
            keys: set[str] = set()
            for value in self._indexers[index_name](obj):
                keys |= index.get(value, set())
            return [self._items[k] for k in keys]

    def list_index_func_values(self, index_name: str) -> list[str]:
        """Every value currently present in ``index_name``."""
        with self._lock:
            return sorted(self._index(index_name))


Indexer = Store
"""client-go's name for a Store with indexes; in ctrlscope every Store is one."""
