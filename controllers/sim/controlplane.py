"""The simulated control plane: the deployment and replica set controllers.

These stand in for kube-controller-manager so that ``kubectl apply -f deployment.yaml`` ends with
running pods. They are deliberately *not* ctrlscope's controller runtime (which observes clusters
and must not be tested against itself); they are small level-triggered loops over the store:

* **Deployment** → one ReplicaSet per pod template (named ``<deployment>-<pod-template-hash>``,
  owned by the deployment). The current template's set is scaled to ``spec.replicas``, older sets to
  zero (a rollout without surge accounting); status counts the sets' replicas.
* **ReplicaSet** → pods created from the template (``generateName``, ``ownerReferences``) or deleted
  (not-ready first) until the count matches; status counts pods and ready pods.

Store listeners only mark keys dirty; a task drains the dirty set on the event loop, so controller
writes are ordinary later writes with their own resourceVersions, as on a real cluster.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import orjson

from controllers.sim.background import BackgroundLoop
from controllers.sim.errors import StatusError
from controllers.sim.events import EventRecorder
from controllers.sim.resources import ResourceType
from controllers.sim.selectors import parse_label_selector, selector_from_label_selector
from controllers.sim.store import Store, copy_obj, rfc3339
from controllers.sim.watch import WatchEvent

DEPLOYMENTS = ("apps", "deployments")
REPLICASETS = ("apps", "replicasets")
PODS = ("", "pods")
_HASH_CHARS = "bcdfghjklmnpqrstvwxz2456789"
log = logging.getLogger(__name__)


def template_hash(template: dict[str, Any]) -> str:
    digest = int.from_bytes(hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).digest()[:8], "big")
    return "".join(_HASH_CHARS[(digest >> (5 * i)) % len(_HASH_CHARS)] for i in range(10))


def _owner_ref(obj: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def _controller_uid(obj: dict[str, Any]) -> str | None:
    for ref in obj["metadata"].get("ownerReferences") or []:
        if ref.get("controller"):
            return ref.get("uid")
    return None


_REVISION = "deployment.kubernetes.io/revision"


def _revision(rs: dict[str, Any]) -> int:
    try:
        return int((rs["metadata"].get("annotations") or {}).get(_REVISION, "0"))
    except ValueError:
        return 0


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


class ControlPlane(BackgroundLoop):
    """Deployment and ReplicaSet controllers reconciling on the server's event loop."""

    def __init__(self, store: Store, *, tick: float = 0.01, events: EventRecorder | None = None) -> None:
        self.store = store
        self.events = events
        self.tick = tick
        # Keys waiting for reconciliation; a set, so a burst of events costs one reconcile.
        self._dirty: set[tuple[tuple[str, str], str, str]] = set()
        self._wake = asyncio.Event()
        store.listeners.append(self._on_event)

    def _type(self, key: tuple[str, str]) -> ResourceType:
        rt = self.store.registry.storage_type(key)
        assert rt is not None
        return rt

    def _on_event(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        ns = meta.get("namespace", "")
        if ev.key == DEPLOYMENTS:
            self._mark(DEPLOYMENTS, ns, meta["name"])
        elif ev.key in (REPLICASETS, PODS):
            if ev.key == REPLICASETS:
                self._mark(REPLICASETS, ns, meta["name"])
            for ref in meta.get("ownerReferences") or []:
                if ref.get("controller"):
                    owner = DEPLOYMENTS if ref.get("kind") == "Deployment" else REPLICASETS
                    self._mark(owner, ns, ref.get("name", ""))

    def _mark(self, key: tuple[str, str], ns: str, name: str) -> None:
        self._dirty.add((key, ns, name))
        self._wake.set()

    def resync(self) -> None:
        """Mark every deployment and replica set dirty (after loading state or a reset)."""
        for key in (DEPLOYMENTS, REPLICASETS):
            for ns, name in list(self.store.bucket(key).objects):
                self._mark(key, ns, name)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            # Let a burst of writes land before reconciling (kube-controller-manager batches too).
            await asyncio.sleep(self.tick)
            self.drain()

    def drain(self) -> None:
        batch, self._dirty = self._dirty, set()
        for key, ns, name in sorted(batch):
            try:
                if key == DEPLOYMENTS:
                    self._sync_deployment(ns, name)
                else:
                    self._sync_replicaset(ns, name)
            except Exception:
                # A malformed object must not stop the control plane for everyone else.
                log.exception("simulated controller failed on %s %s/%s", key[1], ns, name)

    def _owned(self, owner: dict[str, Any], key: tuple[str, str]) -> list[dict[str, Any]]:
        uid = owner["metadata"]["uid"]
        out = []
        for dep_key, (ns, name) in self.store.dependents.get(uid, ()):
            if dep_key == key:
                obj = self.store.find(key, ns, name)
                if obj is not None and _controller_uid(obj) == uid:
                    out.append(obj)
        return sorted(out, key=lambda o: o["metadata"]["name"])

    def _write(self, key: tuple[str, str], obj: dict[str, Any], *, status: bool = False) -> dict[str, Any] | None:
        meta = obj["metadata"]
        try:
            stored, _ = self.store.update(self._type(key), meta.get("namespace"), meta["name"], obj,
                                          subresource="status" if status else None,
                                          manager="deployment-controller" if key == DEPLOYMENTS
                                          else "replicaset-controller")
            return stored
        except StatusError:
            self._mark(key, meta.get("namespace", ""), meta["name"])  # retry on the next pass
            return None

    def _record(self, obj: dict[str, Any], reason: str, message: str, component: str) -> None:
        if self.events is not None:
            self.events.record(obj, reason=reason, message=message, component=component)

    # ---- deployments -------------------------------------------------------------------------

    def _sync_deployment(self, ns: str, name: str) -> None:
        d = self.store.find(DEPLOYMENTS, ns, name)
        if d is None or d["metadata"].get("deletionTimestamp"):
            return
        spec = d.get("spec") or {}
        template = spec.get("template") or {}
        replicas = int(spec.get("replicas", 1))
        h = template_hash(template)
        sets = self._owned(d, REPLICASETS)
        current = next((rs for rs in sets if (rs["metadata"].get("labels") or {}).get("pod-template-hash") == h),
                       None)
        revision = 1 + max((_revision(rs) for rs in sets), default=0)
        if current is not None and _revision(current) < revision - 1:
            # Rolling back to an older template reuses its replica set under a new revision.
            new = copy_obj(current)
            new["metadata"].setdefault("annotations", {})[_REVISION] = str(revision)
            current = self._write(REPLICASETS, new) or current
        if current is None:
            rs_template = copy_obj(template)
            rs_template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = h
            selector = copy_obj(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = h
            rs = {
                "apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": f"{name}-{h}", "namespace": ns,
                             "labels": dict(rs_template["metadata"]["labels"]),
                             "annotations": {_REVISION: str(revision),
                                             "deployment.kubernetes.io/desired-replicas": str(replicas)},
                             "ownerReferences": [_owner_ref(d)]},
                "spec": {"replicas": replicas, "selector": selector, "template": rs_template},
            }
            try:
                current = self.store.create(self._type(REPLICASETS), ns, rs, manager="deployment-controller")
            except StatusError:
                self._mark(DEPLOYMENTS, ns, name)
                return
            self._record(d, "ScalingReplicaSet", f"Scaled up replica set {name}-{h} to {replicas}",
                         "deployment-controller")
        elif (current.get("spec") or {}).get("replicas") != replicas:
            before = (current.get("spec") or {}).get("replicas", 0)
            new = copy_obj(current)
            new["spec"]["replicas"] = replicas
            current = self._write(REPLICASETS, new) or current
            self._record(d, "ScalingReplicaSet", f"Scaled {'up' if replicas > before else 'down'} replica set "
                         f"{current['metadata']['name']} from {before} to {replicas}", "deployment-controller")
        for rs in sets:
            if rs["metadata"]["name"] != current["metadata"]["name"] and (rs.get("spec") or {}).get("replicas", 0):
                before = rs["spec"]["replicas"]
                new = copy_obj(rs)
                new["spec"]["replicas"] = 0
                self._write(REPLICASETS, new)
                self._record(d, "ScalingReplicaSet", f"Scaled down replica set {rs['metadata']['name']} from "
                             f"{before} to 0", "deployment-controller")
        if (d["metadata"].get("annotations") or {}).get(_REVISION) != str(_revision(current)):
            annotated = copy_obj(d)
            annotated["metadata"].setdefault("annotations", {})[_REVISION] = str(_revision(current))
            self._write(DEPLOYMENTS, annotated)
        self._deployment_status(ns, name, current)

    def _deployment_status(self, ns: str, name: str, current: dict[str, Any]) -> None:
        d = self.store.find(DEPLOYMENTS, ns, name)
        if d is None:
            return
        sets = self._owned(d, REPLICASETS)
        total = sum((rs.get("status") or {}).get("replicas", 0) for rs in sets)
        ready = sum((rs.get("status") or {}).get("readyReplicas", 0) for rs in sets)
        updated = (current.get("status") or {}).get("replicas", 0)
        desired = (d.get("spec") or {}).get("replicas", 1)
        old = d.get("status") or {}
        now = rfc3339(self.store.clock.wall())

        def condition(type: str, ok: bool, reason: str, message: str) -> dict[str, Any]:
            prev = next((c for c in old.get("conditions") or [] if c.get("type") == type), None)
            status = "True" if ok else "False"
            changed = prev is None or prev.get("status") != status or prev.get("reason") != reason
            stamp = now if changed else prev.get("lastTransitionTime", now)
            return {"type": type, "status": status, "lastUpdateTime": stamp if changed else
                    prev.get("lastUpdateTime", now), "lastTransitionTime": stamp, "reason": reason,
                    "message": message}

        complete = updated == desired and ready >= desired and total == desired
        rs_name = current["metadata"]["name"]
        status: dict[str, Any] = {
            "observedGeneration": d["metadata"].get("generation", 1),
            "replicas": total,
            "updatedReplicas": updated,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "conditions": [
                condition("Available", ready >= desired, "MinimumReplicasAvailable" if ready >= desired
                          else "MinimumReplicasUnavailable", "Deployment has minimum availability."
                          if ready >= desired else "Deployment does not have minimum availability."),
                condition("Progressing", True, "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                          f'ReplicaSet "{rs_name}" has successfully progressed.' if complete
                          else f'ReplicaSet "{rs_name}" is progressing.'),
            ],
        }
        if total - ready > 0:
            status["unavailableReplicas"] = total - ready
        for field in ("readyReplicas", "availableReplicas", "updatedReplicas", "replicas"):
            if status[field] == 0:
                del status[field]
        if status != old:
            new = copy_obj(d)
            new["status"] = status
            self._write(DEPLOYMENTS, new, status=True)

    # ---- replica sets ------------------------------------------------------------------------

    def _sync_replicaset(self, ns: str, name: str) -> None:
        rs = self.store.find(REPLICASETS, ns, name)
        if rs is None or rs["metadata"].get("deletionTimestamp"):
            return
        spec = rs.get("spec") or {}
        want = int(spec.get("replicas", 1))
        match = parse_label_selector(selector_from_label_selector(spec.get("selector")))
        pods = [p for p in self._owned(rs, PODS) if not p["metadata"].get("deletionTimestamp") and match(p)]
        pod_rt = self._type(PODS)
        if len(pods) < want:
            template = spec.get("template") or {}
            for _ in range(want - len(pods)):
                pod = {
                    "apiVersion": "v1", "kind": "Pod",
                    "metadata": {"generateName": f"{name}-", "namespace": ns,
                                 "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                                 "annotations": dict((template.get("metadata") or {}).get("annotations") or {}),
                                 "ownerReferences": [_owner_ref(rs)]},
                    "spec": copy_obj(template.get("spec") or {}),
                }
                if not pod["metadata"]["annotations"]:
                    del pod["metadata"]["annotations"]
                try:
                    created = self.store.create(pod_rt, ns, pod, manager="replicaset-controller")
                except StatusError:
                    self._mark(REPLICASETS, ns, name)
                    break
                pods.append(created)
                self._record(rs, "SuccessfulCreate", f"Created pod: {created['metadata']['name']}",
                             "replicaset-controller")
        elif len(pods) > want:
            doomed = sorted(pods, key=lambda p: (_ready(p), p["metadata"].get("creationTimestamp", "")))
            for pod in doomed[: len(pods) - want]:
                try:
                    self.store.delete(pod_rt, ns, pod["metadata"]["name"])
                except StatusError:
                    continue
                self._record(rs, "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}",
                             "replicaset-controller")
            pods = [p for p in pods if p not in doomed[: len(pods) - want]]
        rs = self.store.find(REPLICASETS, ns, name)
        if rs is None:
            return
        ready = sum(1 for p in pods if _ready(p))
        status: dict[str, Any] = {"replicas": len(pods), "fullyLabeledReplicas": len(pods), "readyReplicas": ready,
                                  "availableReplicas": ready,
                                  "observedGeneration": rs["metadata"].get("generation", 1)}
        for field in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
            if status[field] == 0:
                del status[field]
        if status != (rs.get("status") or {}):
            new = copy_obj(rs)
            new["status"] = status
            self._write(REPLICASETS, new, status=True)
