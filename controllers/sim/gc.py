"""Garbage collection and namespace termination: what happens *after* a DELETE.

kube-controller-manager's garbage collector and namespace controller, reduced to their contract:

* **Background cascading**: when an owner is gone, each dependent (``ownerReferences`` → its uid) is
  deleted — unless it still has another owner that exists, in which case only the dangling reference
  is removed, as the real collector does.
* **Foreground** (``foregroundDeletion`` finalizer on the owner): dependents are deleted first
  (themselves in the foreground); when the last one is gone the finalizer is removed and the owner
  goes too — so ``kubectl delete --cascade=foreground`` waits for terminating pods. **Orphan** (``orphan`` finalizer): dependents lose
  their reference to the owner and stay.
* **Namespaces**: DELETE marks a namespace ``Terminating``; its content is deleted, and once nothing
  is left (objects with finalizers may hold it up) ``spec.finalizers`` is emptied and it is removed.

All of it runs as store *deferred work*: after the triggering write commits, in order, so watchers
see the owner's event first and the cascade after it.
"""

from __future__ import annotations

from typing import Any

from controllers.sim.errors import StatusError
from controllers.sim.resources import ResourceType
from controllers.sim.store import Store, copy_obj


class GarbageCollector:
    """Subscribes to the store's delete hooks and performs cascading deletion."""

    def __init__(self, store: Store) -> None:
        self.store = store
        store.add_delete_hooks(terminating=self._terminating, removed=self._removed)

    def _type(self, key: tuple[str, str]) -> ResourceType | None:
        return self.store.registry.storage_type(key)

    def _dependents(self, uid: str) -> list[tuple[ResourceType, dict[str, Any]]]:
        out = []
        for key, (ns, name) in sorted(self.store.dependents.get(uid, ())):
            rt = self._type(key)
            obj = self.store.find(key, ns, name)
            if rt is not None and obj is not None:
                out.append((rt, obj))
        return out

    def _find_owner(self, ref: dict[str, Any], ns: str) -> tuple[ResourceType, dict[str, Any]] | None:
        for key, bucket in self.store.buckets.items():
            rt = self._type(key)
            if rt is None or rt.kind != ref.get("kind"):
                continue
            obj = bucket.objects.get((ns if rt.namespaced else "", ref.get("name", "")))
            if obj is not None and obj["metadata"].get("uid") == ref.get("uid"):
                return rt, obj
        return None

    def _owner_alive(self, ref: dict[str, Any], ns: str) -> bool:
        return self._find_owner(ref, ns) is not None

    def _drop_owner(self, rt: ResourceType, obj: dict[str, Any], uid: str) -> None:
        new = copy_obj(obj)
        refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != uid]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        self._quiet_update(rt, new, manager="garbage-collector")

    def _quiet_update(self, rt: ResourceType, obj: dict[str, Any], manager: str) -> None:
        meta = obj["metadata"]
        try:
            self.store.update(rt, meta.get("namespace"), meta["name"], obj, manager=manager)
        except StatusError:
            pass  # gone or changed meanwhile: the next event brings us back if needed

    def _quiet_delete(self, rt: ResourceType, obj: dict[str, Any], propagation: str = "Background") -> None:
        meta = obj["metadata"]
        try:
            self.store.delete(rt, meta.get("namespace"), meta["name"], propagation=propagation)
        except StatusError:
            pass

    def _removed(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        uid = obj["metadata"].get("uid", "")
        self.store.defer(lambda: self._collect(uid))
        ns = obj["metadata"].get("namespace")
        if ns:
            self.store.defer(lambda: self._maybe_finalize_namespace(ns))
        for ref in obj["metadata"].get("ownerReferences") or []:
            self.store.defer(lambda ref=ref: self._maybe_finish_foreground(ref, ns or ""))

    def _collect(self, uid: str) -> None:
        for rt, dep in self._dependents(uid):
            meta = dep["metadata"]
            others = [r for r in meta.get("ownerReferences") or [] if r.get("uid") != uid]
            if any(self._owner_alive(r, meta.get("namespace", "")) for r in others):
                self._drop_owner(rt, dep, uid)
            else:
                self._quiet_delete(rt, dep)

    def _terminating(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        finalizers = meta.get("finalizers") or []
        if rt.key == ("", "namespaces"):
            name = meta["name"]
            self.store.defer(lambda: self._empty_namespace(name))
        elif "foregroundDeletion" in finalizers:
            self.store.defer(lambda: self._foreground(rt, meta.get("namespace"), meta["name"]))
        elif "orphan" in finalizers:
            self.store.defer(lambda: self._orphan(rt, meta.get("namespace"), meta["name"]))

    def _remove_finalizer(self, rt: ResourceType, ns: str | None, name: str, finalizer: str) -> None:
        obj = self.store.find(rt.key, ns or "", name)
        if obj is None:
            return
        new = copy_obj(obj)
        new["metadata"]["finalizers"] = [f for f in new["metadata"].get("finalizers") or [] if f != finalizer]
        self._quiet_update(rt, new, manager="garbage-collector")

    def _foreground(self, rt: ResourceType, ns: str | None, name: str) -> None:
        obj = self.store.find(rt.key, ns or "", name)
        if obj is None:
            return
        dependents = self._dependents(obj["metadata"]["uid"])
        for dep_rt, dep in dependents:
            self._quiet_delete(dep_rt, dep, propagation="Foreground")
        if not self._dependents(obj["metadata"]["uid"]):
            self._remove_finalizer(rt, ns, name, "foregroundDeletion")

    def _maybe_finish_foreground(self, ref: dict[str, Any], ns: str) -> None:
        """The owner of a removed dependent goes once its last dependent has gone (foreground)."""
        found = self._find_owner(ref, ns)
        if found is None:
            return
        rt, owner = found
        meta = owner["metadata"]
        if "foregroundDeletion" in (meta.get("finalizers") or []) and not self._dependents(meta["uid"]):
            self._remove_finalizer(rt, meta.get("namespace"), meta["name"], "foregroundDeletion")

    def _orphan(self, rt: ResourceType, ns: str | None, name: str) -> None:
        obj = self.store.find(rt.key, ns or "", name)
        if obj is None:
            return
        uid = obj["metadata"]["uid"]
        for dep_rt, dep in self._dependents(uid):
            self._drop_owner(dep_rt, dep, uid)
        self._remove_finalizer(rt, ns, name, "orphan")

    def _empty_namespace(self, ns: str) -> None:
        for key, bucket in list(self.store.buckets.items()):
            rt = self._type(key)
            if rt is None or not rt.namespaced:
                continue
            for obj in [o for (ons, _), o in bucket.objects.items() if ons == ns]:
                self._quiet_delete(rt, obj)
        self._maybe_finalize_namespace(ns)

    def _maybe_finalize_namespace(self, ns: str) -> None:
        ns_obj = self.store.find(("", "namespaces"), "", ns)
        if ns_obj is None or not ns_obj["metadata"].get("deletionTimestamp"):
            return
        for key, bucket in self.store.buckets.items():
            rt = self._type(key)
            if rt is not None and rt.namespaced and any(ons == ns for ons, _ in bucket.objects):
                return
        rt = self._type(("", "namespaces"))
        assert rt is not None
        new = copy_obj(ns_obj)
        new.setdefault("spec", {})["finalizers"] = []
        self._quiet_update(rt, new, manager="namespace-controller")
