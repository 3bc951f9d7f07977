"""The same resource watched two ways: informer event handlers versus a Reconciler.

``watch_deployments`` is the widely copied client-go example (the informer-based operator from the
source material): a SharedInformerFactory with a 5-minute resync, a Deployment informer and
Add/Update/Delete handlers that log. Handlers are event-driven: each sees one notification, returns
nothing, and is never retried — and it sees only a *subsequence* of the states the object went
through (updates missed while disconnected arrive as one Update against the cached old object; a
delete during a gap arrives as a DeletedFinalStateUnknown tombstone).

``DeploymentSummaryReconciler`` is level-based: whatever the event, it reads the Deployment from the
cache and makes one ConfigMap, ``<name>-summary``, say what the Deployment currently wants (replicas,
images, generation), owned by the Deployment so garbage collection removes it. It watches
Deployments (EnqueueRequestForObject, GenerationChangedPredicate) and the ConfigMaps it owns
(EnqueueRequestForOwner), so someone editing or deleting a summary is repaired. A failed write
raises: the controller retries it with exponential backoff until it converges.

Run both: ``python manage.py runcontrollers --controller controllers.examples.deployments:setup``;
``deployments:setup_watch`` runs the watcher alone (read-only).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from controllers.informers import ApiError, DeletedFinalStateUnknown, SharedInformer
from controllers.reconcile import (
    Client,
    EnqueueRequestForOwner,
    GenerationChangedPredicate,
    Manager,
    Request,
    Result,
    set_controller_reference,
)

log = logging.getLogger("ctrlscope.examples.deployments")

SUMMARY_SUFFIX = "-summary"
MANAGED_BY = "ctrlscope-example"


def watch_deployments(informer: SharedInformer) -> None:
    """Attach the classic logging handlers to a Deployment informer."""

    def on_add(obj: dict[str, Any]) -> None:
        log.info("Deployment added: %s", _name(obj))

    def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
        old_rv, new_rv = _rv(old), _rv(new)
        if old_rv == new_rv:
            log.info("Deployment resynced: %s (rv %s, no change)", _name(new), new_rv)
        else:
            log.info("Deployment updated: %s (rv %s -> %s, replicas %s -> %s)", _name(new), old_rv, new_rv,
                     _replicas(old), _replicas(new))

    def on_delete(obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            log.info("Deployment deleted while we were not watching: %s (last known rv %s)", obj.key, _rv(obj.obj))
        else:
            log.info("Deployment deleted: %s", _name(obj))

    informer.add_event_handler(on_add=on_add, on_update=on_update, on_delete=on_delete, name="deployment-logger")


class DeploymentSummaryReconciler:
    """Keeps ``<deployment>-summary`` ConfigMaps in line with their Deployments (see module docs)."""

    def __init__(self, client: Client, deployments: SharedInformer) -> None:
        # The reconciler client: reads from the Manager's caches, writes to the API server.
        self.client = client
        self.deployments = deployments

    def reconcile(self, request: Request) -> Result:
        deployment = self.deployments.store.get_by_key(str(request))
        if deployment is None or deployment["metadata"].get("deletionTimestamp"):
            return Result()  # the ownerReference lets garbage collection delete the summary
        desired = self.summary_for(deployment)
        try:
            # From the ConfigMap cache: it may be behind, and then the write below meets a newer
            # object (409, or AlreadyExists for a create): raised, so the key is retried.
            current = self.client.get("v1", "ConfigMap", desired["metadata"]["name"], request.namespace)
        except ApiError as exc:
            if not exc.is_not_found:
                raise
            self.client.create(desired)
            return Result()
        if current.get("data") != desired["data"]:
            desired["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            self.client.update(desired)  # 409 on a race: retried
        return Result()

    @staticmethod
    def summary_for(deployment: dict[str, Any]) -> dict[str, Any]:
        meta = deployment["metadata"]
        containers = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("containers") or []
        summary = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": meta["name"] + SUMMARY_SUFFIX,
                "namespace": meta.get("namespace", "default"),
                "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
            },
            "data": {
                "replicas": str(_replicas(deployment)),
                "images": ",".join(c.get("image", "") for c in containers),
                "generation": str(meta.get("generation", "")),
            },
        }
        set_controller_reference(deployment, summary)  # garbage-collected with its Deployment
        return summary


def setup_watch(manager: Manager) -> None:
    """The handler-based watcher alone: it reads Deployments and writes nothing (the observing
    worker of deploy/, whose read-only ClusterRole allows exactly that)."""
    watch_deployments(manager.informer_for("apps/v1", "Deployment"))


def setup(manager: Manager) -> None:
    """Register the handler-based watcher and the reconciler on one shared Deployment informer."""
    deployments = manager.informer_for("apps/v1", "Deployment")
    watch_deployments(deployments)
    configmaps = manager.informer_for("v1", "ConfigMap")
    reconciler = DeploymentSummaryReconciler(manager.get_client(field_owner="deployment-summary"), deployments)
    controller = manager.new_controller("deployment-summary", reconciler)
    controller.watch(deployments, predicates=[GenerationChangedPredicate()])
    controller.watch(configmaps, handler=EnqueueRequestForOwner("apps/v1", "Deployment"))


def _name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}".lstrip("/")


def _rv(obj: Any) -> str:
    # An update's old from a compact cache is a LazyObject: a Mapping, not a dict.
    return ((obj or {}).get("metadata") or {}).get("resourceVersion", "") if isinstance(obj, Mapping) else ""


def _replicas(obj: dict[str, Any]) -> Any:
    return (obj.get("spec") or {}).get("replicas", 1)
