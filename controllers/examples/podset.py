"""PodSet: one custom resource, two controllers — event handlers versus a Reconciler.

A ``PodSet`` (``demo.ctrlscope.dev/v1``) asks for ``spec.replicas`` pods made from
``spec.template``. The label ``demo.ctrlscope.dev/implementation`` says which controller owns it, so
both run side by side in one worker on separate PodSets:

- ``handlers`` — the event-handler approach. ``on_add`` creates ``replicas`` pods, ``on_update``
  creates or deletes the *difference* between the old and new ``replicas``, and nothing watches the
  pods. Each side effect happens once: an API error is logged and counted, never retried; a pod that
  dies is never replaced. The handler also only sees a subsequence of states: two quick scale
  changes can arrive as one update, and the difference it computes is against the cached old object.
- ``reconciler`` — level-based. Whatever triggered it, ``reconcile`` compares the pods that exist
  (from a Pod informer indexed by owner) with ``spec.replicas``, creates or deletes to close the gap,
  writes ``status``, and raises on any API error so the workqueue retries with exponential backoff.
  Like the ReplicaSet controller it keeps *expectations*: pods it created but the cache has not shown
  yet are counted as existing for a few seconds, so a reconcile racing its own writes does not create
  duplicates.

``FlakyReconciler`` wraps any reconciler with a configurable failure rate and latency to make
backoff visible. Run: ``runcontrollers --controller controllers.examples.podset:setup``.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from typing import Any

from controllers.clock import Clock, RealClock
from controllers.informers import ApiError, SharedInformer
from controllers.reconcile import (
    EnqueueRequestForOwner,
    GenerationChangedPredicate,
    Manager,
    Predicate,
    Request,
    Result,
)

log = logging.getLogger("ctrlscope.examples.podset")

GROUP = "demo.ctrlscope.dev"
API_VERSION = f"{GROUP}/v1"
KIND = "PodSet"
IMPLEMENTATION_LABEL = f"{GROUP}/implementation"
OWNER_INDEX = "owner-uid"
EXPECTATION_TTL = 5.0

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"podsets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "podsets", "singular": "podset", "kind": KIND, "shortNames": ["ps"]},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                     "statusReplicasPath": ".status.replicas"}},
            "additionalPrinterColumns": [
                {"name": "Implementation", "type": "string",
                 "jsonPath": ".metadata.labels.demo\\.ctrlscope\\.dev/implementation"},
                {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "Current", "type": "integer", "jsonPath": ".status.replicas"},
            ],
            "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
        }],
    },
}


def podset(name: str, implementation: str, replicas: int, *, namespace: str = "default",
           image: str = "nginx:1.27") -> dict[str, Any]:
    """A PodSet manifest for ``implementation`` ``handlers`` or ``reconciler``."""
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "labels": {IMPLEMENTATION_LABEL: implementation}},
            "spec": {"replicas": replicas,
                     "template": {"metadata": {"labels": {"podset": name}},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def ensure_crd(client: Any) -> None:
    """Create the PodSet CRD if it is missing (409 means someone else did)."""
    try:
        client.send_json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    except ApiError as exc:
        if exc.code != 409:
            raise


def replicas_of(obj: dict[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) and value >= 0 else 0


def implementation_of(obj: dict[str, Any]) -> str:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(IMPLEMENTATION_LABEL, "")


def pod_for(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    template = (owner.get("spec") or {}).get("template") or {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": meta["name"] + "-", "namespace": meta.get("namespace", "default"),
                         "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                         "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": template.get("spec") or {"containers": [{"name": "app", "image": "nginx:1.27"}]}}


def _pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def _owned_by(pod: dict[str, Any]) -> list[str]:
    return [ref.get("uid", "") for ref in (pod.get("metadata") or {}).get("ownerReferences") or []
            if ref.get("controller")]


class ImplementationIs(Predicate):
    """Passes only objects labelled for one implementation."""

    def __init__(self, implementation: str) -> None:
        self.implementation = implementation

    def create(self, obj: Any) -> bool:
        return implementation_of(obj) == self.implementation

    def update(self, old: Any, new: Any) -> bool:
        return implementation_of(new) == self.implementation

    def delete(self, obj: Any) -> bool:
        return implementation_of(obj) == self.implementation

    def generic(self, obj: Any) -> bool:
        return implementation_of(obj) == self.implementation


class HandlerPodSets:
    """The event-handler implementation (see module docstring). Counts what it did and lost.

    A Manager runnable: its handlers are registered on ``start`` -- once this replica leads, when
    leader election runs, as a client-go operator starts its informer handlers from
    ``OnStartedLeading`` -- and removed on ``stop``. Registering after the informer synced means
    the first calls are an ``on_add`` for every cached PodSet, blind to the pods that exist: the
    handler approach's restart (and failover) problem, shown by the scenarios."""

    def __init__(self, client: Any, podsets: SharedInformer) -> None:
        self.client = client
        self.podsets = podsets
        self.handler_calls = 0
        self.api_calls = 0
        self.failed_side_effects = 0
        self._registration: Any = None

    def start(self) -> None:
        if self._registration is None:
            self._registration = self.podsets.add_event_handler(
                on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete, name="podset-handlers")

    def stop(self) -> None:
        if self._registration is not None:
            self.podsets.remove_event_handler(self._registration)
            self._registration = None

    def _mine(self, obj: Any) -> bool:
        return isinstance(obj, dict) and implementation_of(obj) == "handlers"

    def on_add(self, obj: dict[str, Any]) -> None:
        if self._mine(obj):
            self.handler_calls += 1
            self._create(obj, replicas_of(obj))

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        if not self._mine(new):
            return
        self.handler_calls += 1
        diff = replicas_of(new) - replicas_of(old)  # against the *cached* old object
        if diff > 0:
            self._create(new, diff)
        elif diff < 0:
            self._delete(new, -diff)

    def on_delete(self, obj: Any) -> None:
        if self._mine(obj):
            self.handler_calls += 1  # pods go with their owner (garbage collection)

    def _create(self, owner: dict[str, Any], count: int) -> None:
        ns = owner["metadata"].get("namespace", "default")
        for _ in range(count):
            self.api_calls += 1
            try:
                self.client.send_json("POST", _pods_path(ns), pod_for(owner))
            except (ApiError, OSError) as exc:
                self.failed_side_effects += 1  # no retry: this pod is simply never created
                log.warning("handlers: creating a pod for %s failed and is lost: %s", owner["metadata"]["name"], exc)

    def _delete(self, owner: dict[str, Any], count: int) -> None:
        ns = owner["metadata"].get("namespace", "default")
        uid = owner["metadata"]["uid"]
        try:
            self.api_calls += 1
            pods = self.client.get_json(_pods_path(ns))["items"]
        except (ApiError, OSError) as exc:
            self.failed_side_effects += 1
            log.warning("handlers: listing pods of %s failed; the scale-down is lost: %s", owner["metadata"]["name"], exc)
            return
        mine = [p for p in pods if uid in _owned_by(p) and not p["metadata"].get("deletionTimestamp")]
        for pod in mine[:count]:
            self.api_calls += 1
            try:
                self.client.send_json("DELETE", f"{_pods_path(ns)}/{pod['metadata']['name']}")
            except (ApiError, OSError) as exc:
                self.failed_side_effects += 1
                log.warning("handlers: deleting %s failed and is lost: %s", pod["metadata"]["name"], exc)


class PodSetReconciler:
    """The level-based implementation (see module docstring)."""

    def __init__(self, client: Any, podsets: SharedInformer, pods: SharedInformer, *,
                 clock: Clock | None = None) -> None:
        self.client = client
        self.podsets = podsets
        self.pods = pods
        self.clock = clock or RealClock()
        self.api_calls = 0
        self._expected: dict[str, dict[str, float]] = {}  # owner uid -> created pod name -> deadline
        self._lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        owner = self.podsets.store.get_by_key(str(request))
        if owner is None or implementation_of(owner) != "reconciler" or owner["metadata"].get("deletionTimestamp"):
            return Result()
        uid = owner["metadata"]["uid"]
        ns = request.namespace
        live = [p for p in self.pods.store.by_index(OWNER_INDEX, uid) if not p["metadata"].get("deletionTimestamp")]
        names = {p["metadata"]["name"] for p in live}
        pending = self._pending(uid, names)
        want = replicas_of(owner)
        have = len(live) + len(pending)
        for _ in range(want - have):
            self.api_calls += 1
            created = self.client.send_json("POST", _pods_path(ns), pod_for(owner))  # raises: retried
            self._expect(uid, created["metadata"]["name"])
        if have > want and not pending:
            for pod in sorted(live, key=lambda p: p["metadata"]["name"])[: have - want]:
                self.api_calls += 1
                try:
                    self.client.send_json("DELETE", f"{_pods_path(ns)}/{pod['metadata']['name']}")
                except ApiError as exc:
                    if exc.code != 404:
                        raise
        self._write_status(owner, len(live))
        return Result(requeue_after=0.5) if pending else Result()

    def _pending(self, uid: str, seen: set[str]) -> list[str]:
        now = self.clock.now()
        with self._lock:
            expected = self._expected.get(uid, {})
            for name in [n for n, deadline in expected.items() if n in seen or deadline < now]:
                del expected[name]
            return list(expected)

    def _expect(self, uid: str, name: str) -> None:
        with self._lock:
            self._expected.setdefault(uid, {})[name] = self.clock.now() + EXPECTATION_TTL

    def _write_status(self, owner: dict[str, Any], current: int) -> None:
        status = owner.get("status") or {}
        if status.get("replicas") == current and status.get("observedGeneration") == owner["metadata"].get("generation"):
            return
        meta = owner["metadata"]
        body = {"apiVersion": API_VERSION, "kind": KIND,
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace", "default"),
                             "resourceVersion": meta["resourceVersion"]},
                "status": {"replicas": current, "observedGeneration": meta.get("generation")}}
        self.api_calls += 1
        try:
            self.client.send_json("PUT", f"/apis/{API_VERSION}/namespaces/{body['metadata']['namespace']}"
                                         f"/podsets/{meta['name']}/status", body)
        except ApiError as exc:
            if exc.code != 409:  # stale cache: the next event brings the new version
                raise


class FlakyReconciler:
    """Wraps a reconciler: fails ``failure_rate`` of calls and adds ``latency`` seconds to each."""

    def __init__(self, inner: Any, *, failure_rate: float = 0.3, latency: float = 0.05,
                 clock: Clock | None = None, seed: int | None = None) -> None:
        if not 0.0 <= failure_rate <= 1.0:
            raise ValueError(f"failure_rate must be within [0, 1], got {failure_rate}")
        self.inner = inner
        self.failure_rate = failure_rate
        self.latency = latency
        self.clock = clock or RealClock()
        self._random = random.Random(seed)

    def reconcile(self, request: Request) -> Result:
        if self.latency > 0:
            self.clock.sleep(self.latency)
        if self._random.random() < self.failure_rate:
            raise RuntimeError(f"injected failure for {request} (flaky, rate {self.failure_rate:.0%})")
        return self.inner.reconcile(request)


def _wire(manager: Manager, *, handlers: bool, reconciler: bool, flaky: FlakyReconciler | None = None) -> None:
    client = manager.factory.client
    ensure_crd(client)
    podsets = manager.informer_for(API_VERSION, KIND)
    if handlers:
        manager.add_runnable(HandlerPodSets(client, podsets))
    if reconciler:
        pods = manager.informer_for("v1", "Pod")
        pods.store.add_indexers({OWNER_INDEX: _owned_by})
        impl: Any = PodSetReconciler(client, podsets, pods, clock=manager.clock)
        if flaky is not None:
            flaky.inner = impl
            impl = flaky
        controller = manager.new_controller("podset", impl)
        # GenerationChangedPredicate: our own status writes must not trigger reconciles (the classic
        # "Reconcile is triggered after status update" hot loop, controller-runtime #2831).
        controller.watch(podsets, predicates=[ImplementationIs("reconciler"), GenerationChangedPredicate()])
        controller.watch(pods, handler=EnqueueRequestForOwner(API_VERSION, KIND))


def setup(manager: Manager) -> None:
    """Both implementations side by side (label your PodSets ``handlers`` or ``reconciler``)."""
    _wire(manager, handlers=True, reconciler=True)


def setup_handlers(manager: Manager) -> None:
    _wire(manager, handlers=True, reconciler=False)


def setup_reconciler(manager: Manager) -> None:
    _wire(manager, handlers=False, reconciler=True)


def setup_flaky(manager: Manager) -> None:
    """The reconciler behind FlakyReconciler; ``CTRLSCOPE_FLAKY_RATE`` / ``CTRLSCOPE_FLAKY_LATENCY``."""
    flaky = FlakyReconciler(None, failure_rate=float(os.environ.get("CTRLSCOPE_FLAKY_RATE", "0.3")),
                            latency=float(os.environ.get("CTRLSCOPE_FLAKY_LATENCY", "0.05")), clock=manager.clock)
    _wire(manager, handlers=False, reconciler=True, flaky=flaky)
