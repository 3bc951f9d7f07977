"""The informer cache: a thread-safe, indexed map from key to object (client-go ``store.go``,
``thread_safe_store.go``, ``index.go``).

Writers are the informer's delta-processing thread; readers are handlers, reconcilers and the
dashboard, from any thread. One lock guards the items and every index, so readers always see an
index consistent with the items.

How objects are held (DESIGN.md, "The cache is where Python pays"). With ``compact=True`` (the
default) each cached object is kept as its JSON encoding (``bytes``, encoded with orjson on write)
and decoded again on every read. A decoded 3.8 KB Pod is a tree of ~32 GC-tracked dicts and lists
taking ~17 KB; its encoding is one ~3.9 KB ``bytes`` the cyclic GC never looks at (~4.1 KB per
cached Pod with its key and index entries). DESIGN.md measured the cost of the alternative:
keeping 20,000 decoded Pods dropped a decode loop from ~80,000 to ~9,000 events/s, because every
full collection re-walks every cached container. The price is paid on reads: ``get``, ``list``,
``by_index`` ... decode (~10-15 us per Pod) and return a *fresh* dict each call -- equal to what
was stored, not the same object, so a caller that mutates it no longer corrupts the cache.
Objects orjson cannot encode (non-JSON values such as sets or >64-bit ints) are kept as they are
and returned by reference. Encoding turns tuples into lists; API objects never contain tuples.

With ``compact=False`` the Store keeps the objects themselves and hands out its own references
(read-only by contract), like client-go. That is the faster choice only when the GC does not walk
the cache: ``SharedInformer`` uses it together with ``freeze_gc_after_sync`` (frozen dicts cost
the GC nothing, and writes and reads skip encoding and decoding), at ~4x the memory per object.
bench/informer.py measures both.

Indexes: an index function maps an object to a list of index values; ``by_index(name, value)``
returns the objects with that value. Every Store has the ``namespace`` index; add your own with
``add_indexers`` (also after objects are cached: the new index is built from the current items).
The index values of each cached key are remembered, so a write never decodes the object it
replaces. ``Indexer`` is the same class under client-go's other name.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any

import orjson

from controllers.informers.keys import KeyFunc, Obj, object_key
from controllers.observer import NOOP_OBSERVER, Observer, StoreOp, active_observer, listens

IndexFunc = Callable[[Obj], list[str]]

NAMESPACE_INDEX = "namespace"

_dumps = orjson.dumps
_loads = orjson.loads


def namespace_index_func(obj: Obj) -> list[str]:
    """Index value for the built-in ``namespace`` index ("" for cluster-scoped objects)."""
    return [(obj.get("metadata") or {}).get("namespace") or ""]


Entry = bytes | Obj
"""What the Store keeps per key: the object's JSON encoding, or the object itself if unencodable."""


class CacheMode(StrEnum):
    """How an informer's Store holds its objects (see the module docstring)."""

    COMPACT = "compact"
    """JSON bytes, decoded on every read into a fresh dict (``Store(compact=True)``)."""
    DECODED = "decoded"
    """The decoded dicts themselves, shared with every reader (``Store(compact=False)``)."""

    @classmethod
    def for_gc_policy(cls, freeze_gc_after_sync: bool) -> CacheMode:
        """The mode that suits a GC policy: decoded dicts once the GC is kept off them (frozen, they
        cost it nothing), JSON bytes while it walks the heap."""
        return cls.DECODED if freeze_gc_after_sync else cls.COMPACT

    @classmethod
    def resolve(cls, cache: CacheMode | str | None, default: CacheMode) -> CacheMode:
        """``cache`` as a mode; ``default`` when unset."""
        if cache is None or cache == "":
            return default
        try:
            return cls(cache)
        except ValueError:
            raise ValueError(f"unknown cache mode {cache!r}: use one of {', '.join(m.value for m in cls)}") from None


def _encode(obj: Obj) -> Entry:
    try:
        raw = _dumps(obj)
    except TypeError:  # orjson.JSONEncodeError: not JSON (a set, a >64-bit int, a custom class...)
        return obj
    # orjson returns its growth buffer as is (~8 KB allocated for a 3.8 KB Pod); a long-lived
    # cache entry is worth one exact-size copy (~0.3 us).
    return memoryview(raw).tobytes()


def decode_entry(entry: Entry) -> Obj:
    """The object a Store entry holds (a new dict each call for encoded entries)."""
    return _loads(entry) if type(entry) is bytes else entry


_decode = decode_entry


class Store:
    """Thread-safe, indexed object cache keyed by ``namespace/name``."""

    def __init__(self, name: str = "", *, key_func: KeyFunc = object_key,
                 indexers: dict[str, IndexFunc] | None = None,
                 observer: Observer | None = None, compact: bool = True) -> None:
        self.name = name
        self.key_func = key_func
        self.compact = compact
        self.observer = observer or NOOP_OBSERVER
        # None when nobody listens to ``on_store`` (``listens``): no call, and a delete decodes nothing.
        obs = active_observer(self.observer)
        self._obs = obs if listens(obs, "on_store") else None
        self._lock = threading.Lock()
        # key -> encoded object, or the object itself if not compact (see the module docstring).
        self._items: dict[str, Entry] = {}
        self._indexers: dict[str, IndexFunc] = {NAMESPACE_INDEX: namespace_index_func}
        # Invariant: for every index name, _indices[name][value] is exactly the set of keys whose
        # item produces ``value`` under _indexers[name]; empty sets are removed.
        self._indices: dict[str, dict[str, set[str]]] = {NAMESPACE_INDEX: {}}
        # Invariant: _values[key] is the tuple, per indexer in _indexers order, of the values of
        # the item cached under key (tuples of str: the GC untracks them). Lets a write update the
        # indexes without decoding the object it replaces.
        self._values: dict[str, tuple[tuple[str, ...], ...]] = {}
        if indexers:
            self.add_indexers(indexers)

    # -- writes --------------------------------------------------------------------------------
    def add(self, obj: Obj) -> None:
        """Insert or replace ``obj`` under its key."""
        self.upsert_entry(self.key_func(obj), obj)

    update = add

    def upsert(self, key: str, obj: Obj) -> Obj | None:
        """Store ``obj`` under ``key`` (already computed by the caller); return the previous object."""
        old = self.upsert_entry(key, obj)
        return None if old is None else _decode(old)

    def upsert_entry(self, key: str, obj: Obj) -> Entry | None:
        """``upsert`` returning the previous *entry* undecoded (``decode_entry`` turns it into the
        object): the informer hands it to handler threads, which decode it only when delivering."""
        entry = _encode(obj) if self.compact else obj  # outside the lock: it only reads ``obj``
        with self._lock:
            items = self._items
            old = items.get(key)
            items[key] = entry
            # Under the lock: ``add_indexers`` may change the index functions concurrently.
            values = self._index_values(obj)
            # Most writes are updates that leave every index value as it was.
            if old is None or self._values.get(key) != values:
                self._update_indices(key, values)
            if self._obs is not None:
                self._obs.on_store(self.name, op=StoreOp.UPSERT, key=key, obj=obj)
            return old

    def delete(self, obj: Any) -> None:
        """Remove the object with ``obj``'s key (a tombstone works too); absent keys are ignored."""
        with self._lock:
            self._remove_locked(self.key_func(obj))

    def remove(self, key: str) -> Obj | None:
        """Remove ``key``; return the object that was cached (``None`` if absent)."""
        with self._lock:
            old = self._remove_locked(key)
        return None if old is None else _decode(old)

    def _remove_locked(self, key: str) -> Entry | None:
        old = self._items.pop(key, None)
        if old is None:
            return None
        self._update_indices(key, None)
        if self._obs is not None:
            self._obs.on_store(self.name, op=StoreOp.DELETE, key=key, obj=_decode(old))
        return old

    def replace(self, objs: Iterable[Obj], resource_version: str = "") -> None:
        """Make the cache exactly ``objs`` (rebuilding every index)."""
        fresh = {self.key_func(o): o for o in objs}
        entries = {key: _encode(o) for key, o in fresh.items()} if self.compact else dict(fresh)
        with self._lock:
            self._items = entries
            self._values = {}
            self._indices = {name: {} for name in self._indexers}
            for key, o in fresh.items():
                self._update_indices(key, self._index_values(o))
            if self._obs is not None:
                self._obs.on_store(self.name, op=StoreOp.REPLACE, key="", obj=list(fresh.items()))

    def _index_values(self, obj: Obj) -> tuple[tuple[str, ...], ...]:
        if len(self._indexers) == 1:  # only the namespace index: skip the generic loop
            meta = obj.get("metadata")
            return (((meta.get("namespace") or "") if meta else "",),)
        return tuple([tuple(func(obj)) for func in self._indexers.values()])

    def _update_indices(self, key: str, new: tuple[tuple[str, ...], ...] | None) -> None:
        """Move ``key`` from its remembered index values to ``new`` (``None``: key removed)."""
        old = self._values.pop(key, None) if new is None else self._values.get(key)
        if new is not None:
            self._values[key] = new
        if old == new:
            return
        for n, name in enumerate(self._indexers):
            old_values = old[n] if old is not None else ()
            new_values = new[n] if new is not None else ()
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
    # Compact: every read decodes outside the lock and returns new dicts (see the module docstring).
    def get(self, obj: Any) -> Obj | None:
        """The cached object with ``obj``'s key, or ``None``."""
        return self.get_by_key(self.key_func(obj))

    def get_by_key(self, key: str) -> Obj | None:
        """The cached object for ``key``, or ``None``."""
        with self._lock:
            entry = self._items.get(key)
        return None if entry is None else _decode(entry)

    def list(self) -> list[Obj]:
        """Every cached object (decoded: ~10 us per Pod; prefer ``list_keys`` or an index)."""
        with self._lock:
            entries = list(self._items.values())
        return [_decode(e) for e in entries]

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
                for key, entry in self._items.items():
                    values = tuple(func(_decode(entry)))
                    self._values[key] += (values,)
                    for value in values:
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
            entries = [self._items[k] for k in self._index(index_name).get(indexed_value, ())]
        return [_decode(e) for e in entries]

    def index(self, index_name: str, obj: Obj) -> list[Obj]:
        """Objects sharing any ``index_name`` value with ``obj``."""
        with self._lock:
            index = self._index(index_name)
            keys: set[str] = set()
            for value in self._indexers[index_name](obj):
                keys |= index.get(value, set())
            entries = [self._items[k] for k in keys]
        return [_decode(e) for e in entries]

    def list_index_func_values(self, index_name: str) -> list[str]:
        """Every value currently present in ``index_name``."""
        with self._lock:
            return sorted(self._index(index_name))


Indexer = Store
"""client-go's name for a Store with indexes; in ctrlscope every Store is one."""
