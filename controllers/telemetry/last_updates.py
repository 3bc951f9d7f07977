"""LastUpdates: the last ``(old, new)`` pair each key's update handler call received.

The informer cache holds only an object's current state; the version before it is gone once the
Store is written. The dashboard's object inspector (``inspector.py``) shows a diff of the last two
versions *as a handler saw them*, so the TelemetryObserver feeds every update handler call it observes
(``on_handler`` gets ``old`` and ``new``) into this bounded LRU, keyed by ``(informer, key)``.

What it keeps, and why it stays small:

- Only real changes: a resync (``old`` and ``new`` with the same resourceVersion) does not replace
  the pair, which would otherwise turn the last meaningful diff into an empty one. Several handlers on
  one informer receive the same pair; the first one's call is recorded, the others only refresh it.
  Each handler has its own thread, so one may lag behind another: a pair older than the one kept does
  not replace it (resourceVersions are compared as numbers when both are, as etcd-backed API servers'
  are; opaque ones are taken in arrival order).
- Redacted, compact: both objects are redacted (``redaction.py``) and kept as orjson bytes -- no
  decoded dicts for the cyclic GC to walk, and nothing secret even in the worker's own memory copy.
  Successive updates of a key chain (this call's ``old`` is the last call's ``new``), so in the steady
  state one object is encoded per call, not two.
- Bounded by count *and* bytes (defaults 2,000 keys / 16 MiB): the least recently updated keys are
  evicted first. A byte count is the encoded sizes plus a fixed estimate per entry. A pair larger
  than the whole budget is not kept (and drops that key's older pair, which would be stale).

``record`` runs on handler threads (encoding happens outside the lock); ``get`` on the inspector's.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import orjson

from controllers.telemetry.redaction import redact

DEFAULT_MAX_KEYS = 2000
DEFAULT_MAX_BYTES = 16 * 1024 * 1024
ENTRY_OVERHEAD = 240  # bytes per entry beyond the encodings: the key tuple, the UpdatePair, the LRU node


@dataclass(frozen=True, slots=True)
class UpdatePair:
    """One update handler call's view of a key: both objects redacted, as orjson bytes."""

    old: bytes
    new: bytes
    old_rv: str | None
    new_rv: str | None
    handler: str
    at: float  # wall ms of the call
    size: int  # what it counts against the byte budget


class LastUpdates:
    """A bounded LRU of ``(informer, key)`` → ``UpdatePair`` (see the module docstring)."""

    def __init__(self, *, max_keys: int = DEFAULT_MAX_KEYS, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_keys < 1 or max_bytes < 1:
            raise ValueError("LastUpdates needs max_keys >= 1 and max_bytes >= 1")
        self.max_keys = max_keys
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # Invariant: len(_pairs) <= max_keys and bytes == sum of the sizes in _pairs <= max_bytes;
        # iteration order is least recently recorded first.
        self._pairs: OrderedDict[tuple[str, str], UpdatePair] = OrderedDict()
        self.bytes = 0
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._pairs)

    def record(self, informer: str, key: str, *, handler: str, old: Any, new: Any, old_rv: str | None,
               new_rv: str | None, at: float) -> None:
        """Remember the pair an update handler call received (resyncs and repeats are skipped)."""
        if old_rv == new_rv:
            return
        slot = (informer, key)
        with self._lock:
            known = self._pairs.get(slot)
            if known is not None and (known.old_rv, known.new_rv) == (old_rv, new_rv):
                self._pairs.move_to_end(slot)
                return
            if known is not None and _older(new_rv, known.new_rv):
                return
        try:
            # A key's updates chain: this call's old is usually the last call's new, already encoded.
            old_b = known.new if known is not None and known.new_rv == old_rv else orjson.dumps(redact(old))
            new_b = orjson.dumps(redact(new))
        except TypeError:  # not JSON (runtime objects always are; a test fake may not be)
            return
        pair = UpdatePair(old_b, new_b, old_rv, new_rv, handler, at,
                          len(old_b) + len(new_b) + len(informer) + len(key) + ENTRY_OVERHEAD)
        with self._lock:
            gone = self._pairs.pop(slot, None)
            if gone is not None:
                self.bytes -= gone.size
            if pair.size > self.max_bytes:
                return
            self._pairs[slot] = pair
            self.bytes += pair.size
            while len(self._pairs) > self.max_keys or self.bytes > self.max_bytes:
                _, evicted = self._pairs.popitem(last=False)
                self.bytes -= evicted.size
                self.evicted += 1

    def get(self, informer: str, key: str) -> UpdatePair | None:
        """The last pair recorded for ``key`` (reading does not refresh it: updates decide what stays)."""
        with self._lock:
            return self._pairs.get((informer, key))


def _older(rv: str | None, than: str | None) -> bool:
    return bool(rv and than and rv.isdigit() and than.isdigit() and int(rv) < int(than))
