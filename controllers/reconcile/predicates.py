"""Predicates filter watch events before they become requests (controller-runtime
``pkg/predicate``).

Each predicate answers, per event kind, whether the event should reach the event handler. A
controller enqueues an event only if every predicate passes. Note that a filtered event is gone: the
key is not reconciled for it, which is the point (``GenerationChangedPredicate`` stops a controller
from reconciling its own status writes, the classic hot loop) and the danger.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


class Predicate:
    """Passes everything; subclass and override the event kinds you filter."""

    def create(self, obj: Obj) -> bool:
        return True

    def update(self, old: Obj, new: Obj) -> bool:
        return True

    def delete(self, obj: Obj) -> bool:
        return True

    def generic(self, obj: Obj) -> bool:
        return True


def _meta(obj: Obj | None) -> dict[str, Any] | None:
    return None if obj is None else obj.get("metadata") or {}


class GenerationChangedPredicate(Predicate):
    """Updates pass only if ``metadata.generation`` changed, i.e. the spec changed.

    Status and metadata-only writes -- and resyncs -- are filtered out. Objects without a generation
    (a few built-in kinds) never pass an update. An "update" whose uid changed always passes: it is
    another object under the same name (deleted and created again while the informer relisted, which
    reports the pair as one update), and its generation says nothing about the old one's.
    """

    def update(self, old: Obj, new: Obj) -> bool:
        old_meta, new_meta = _meta(old), _meta(new)
        if old_meta is None or new_meta is None:
            return False
        if old_meta.get("uid") != new_meta.get("uid"):
            return True
        return old_meta.get("generation") != new_meta.get("generation")


class ResourceVersionChangedPredicate(Predicate):
    """Updates pass only if ``metadata.resourceVersion`` changed: filters periodic resyncs."""

    def update(self, old: Obj, new: Obj) -> bool:
        old_meta, new_meta = _meta(old), _meta(new)
        if old_meta is None or new_meta is None:
            return False
        return old_meta.get("resourceVersion") != new_meta.get("resourceVersion")
