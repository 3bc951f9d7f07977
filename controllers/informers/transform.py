"""Transform functions: change an object before it enters an informer's cache (client-go
``cache.TransformFunc``, set with ``informers.WithTransform`` / ``SharedInformer.SetTransform``).

The DeltaFIFO calls the transform once per object, as the reflector hands it over (a watch event
or an item of a LIST), before the object is keyed, queued or cached. So no handler and no cache
read ever sees what a transform removed, and the cache holds only the smaller object -- the reason
big clusters use them: ``managedFields`` is often a third of a Pod's JSON and no controller reads
it from a cache. Rules it keeps, as client-go does:

* Not called for ``Sync`` deltas (resync re-delivers cached objects: they were transformed when
  they entered) nor for ``DeletedFinalStateUnknown`` tombstones (they carry a cached object).
* It may return the object it was given, changed in place: the object is the reflector's freshly
  decoded dict and nothing else holds it.
* A transform that raises on a watch event loses that event (logged, as client-go's reflector
  logs a failed store add and goes on); one that raises on a LIST item fails the LIST, which the
  reflector retries with backoff, so a failing transform is seen, not silently skipped.

A transform should be cheap (it runs on the reflector's thread for every event) and idempotent.
What the dashboard shows for one (``transform:`` on the pipeline card) is ``describe_transform``:
its ``description`` attribute, else its name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

TransformFunc = Callable[[Any], Any]


class StripManagedFields:
    """Drop ``metadata.managedFields`` (server-side apply's field ownership) from every object:
    controller-runtime's ``cache.TransformStripManagedFields`` (client-go's ``SetTransform`` is the
    hook it plugs into). Objects that are not dicts (a test's fake) pass unchanged."""

    description = "strip managedFields"

    def __call__(self, obj: Any) -> Any:
        if type(obj) is dict:
            meta = obj.get("metadata")
            if type(meta) is dict and "managedFields" in meta:
                del meta["managedFields"]
        return obj

    def __repr__(self) -> str:
        return "transform_strip_managed_fields()"


def transform_strip_managed_fields() -> TransformFunc:
    """The ready-made transform that strips ``managedFields`` (controller-runtime
    ``cache.TransformStripManagedFields``)."""
    return StripManagedFields()


def describe_transform(transform: TransformFunc | None) -> str | None:
    """How the dashboard names a transform: its ``description``, else its qualified name."""
    if transform is None:
        return None
    description = getattr(transform, "description", None)
    if isinstance(description, str) and description:
        return description
    return getattr(transform, "__qualname__", None) or type(transform).__name__
