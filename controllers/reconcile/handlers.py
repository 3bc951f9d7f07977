"""Event handlers map a watched object's events to reconcile requests (controller-runtime
``pkg/handler``).

``EnqueueRequestForObject`` reconciles the object itself. ``EnqueueRequestForOwner`` reconciles the
owner named in the object's ``ownerReferences`` (a Deployment controller watching its ReplicaSets).
``EnqueueRequestsFromMapFunc`` runs your function (e.g. "every Ingress that routes to this Service").
Updates enqueue for both the old and the new state, so a changed owner reference reaches both owners.
Handlers only ``add`` to the queue: duplicates collapse there, which is why a reconciler never learns
which event woke it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from controllers.reconcile.request import Request

Obj = dict[str, Any]


class EventHandler(Protocol):
    """Turns one event into zero or more requests."""

    def create(self, obj: Obj) -> list[Request]: ...

    def update(self, old: Obj, new: Obj) -> list[Request]: ...

    def delete(self, obj: Obj) -> list[Request]: ...

    def generic(self, obj: Obj) -> list[Request]: ...


class EnqueueRequestForObject:
    """Enqueue the object's own ``namespace/name``."""

    def create(self, obj: Obj) -> list[Request]:
        return [Request.for_object(obj)]

    def update(self, old: Obj, new: Obj) -> list[Request]:
        return [Request.for_object(new if new is not None else old)]

    def delete(self, obj: Obj) -> list[Request]:
        return [Request.for_object(obj)]

    def generic(self, obj: Obj) -> list[Request]:
        return [Request.for_object(obj)]


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


class EnqueueRequestForOwner:
    """Enqueue the owner of type ``owner_api_version``/``owner_kind`` from ``ownerReferences``.

    Owners match on API group and kind (any version). With ``only_controller`` (the default, like
    ``handler.OnlyControllerOwner()``) only the reference with ``controller: true`` counts. Owners
    are namespaced in the object's namespace unless ``cluster_scoped_owner``.
    """

    def __init__(self, owner_api_version: str, owner_kind: str, *, only_controller: bool = True,
                 cluster_scoped_owner: bool = False) -> None:
        self.owner_group = _group(owner_api_version)
        self.owner_kind = owner_kind
        self.only_controller = only_controller
        self.cluster_scoped_owner = cluster_scoped_owner

    def _owners(self, obj: Obj | None) -> list[Request]:
        if obj is None:
            return []
        meta = obj.get("metadata") or {}
        namespace = "" if self.cluster_scoped_owner else meta.get("namespace") or ""
        out = []
        for ref in meta.get("ownerReferences") or ():
            if ref.get("kind") != self.owner_kind or _group(ref.get("apiVersion", "")) != self.owner_group:
                continue
            if self.only_controller and ref.get("controller") is not True:
                continue
            out.append(Request(namespace, ref.get("name", "")))
        return out

    def create(self, obj: Obj) -> list[Request]:
        return self._owners(obj)

    def update(self, old: Obj, new: Obj) -> list[Request]:
        requests = self._owners(old)
        return requests + [r for r in self._owners(new) if r not in requests]

    def delete(self, obj: Obj) -> list[Request]:
        return self._owners(obj)

    def generic(self, obj: Obj) -> list[Request]:
        return self._owners(obj)


class EnqueueRequestsFromMapFunc:
    """Enqueue whatever ``map_func(obj)`` returns; updates map both the old and the new object."""

    def __init__(self, map_func: Callable[[Obj], list[Request]]) -> None:
        self.map_func = map_func

    def create(self, obj: Obj) -> list[Request]:
        return list(self.map_func(obj))

    def update(self, old: Obj, new: Obj) -> list[Request]:
        requests = list(self.map_func(old)) if old is not None else []
        return requests + [r for r in self.map_func(new) if r not in requests]

    def delete(self, obj: Obj) -> list[Request]:
        return list(self.map_func(obj))

    def generic(self, obj: Obj) -> list[Request]:
        return list(self.map_func(obj))
