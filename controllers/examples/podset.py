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

A third value, ``kopf``, belongs to the kopf operator in ``kopf_podsets.py`` (its own process): both
implementations here leave those PodSets alone, and the scoreboard reports them beside their own.

``FlakyReconciler`` wraps any reconciler with a configurable failure rate and latency to make
backoff visible. Run: ``runcontrollers --controller controllers.examples.podset:setup``.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Mapping
from typing import Any

from controllers.clock import Clock, RealClock, StopSignal, wall_ms
from controllers.informers import ApiError, SharedInformer
from controllers.reconcile import (
    Client,
    EnqueueRequestForOwner,
    GenerationChangedPredicate,
    Manager,
    Predicate,
    Request,
    Result,
    not_found_ignored,
    set_controller_reference,
)
from controllers.schema import SCOREBOARD_TABLE

log = logging.getLogger("ctrlscope.examples.podset")

GROUP = "demo.ctrlscope.dev"
API_VERSION = f"{GROUP}/v1"
KIND = "PodSet"
IMPLEMENTATION_LABEL = f"{GROUP}/implementation"
KOPF = "kopf"
"""The implementation label value of PodSets the kopf operator (``kopf_podsets.py``) owns."""
OWNER_INDEX = "owner-uid"
EXPECTATION_TTL = 5.0
CRD_ESTABLISHED_TIMEOUT = 60.0
"""Seconds ``ensure_crd`` waits for a new CRD to be served (a real API server: about a second)."""

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
    """A PodSet manifest for ``implementation`` ``handlers``, ``reconciler`` or ``kopf``."""
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "labels": {IMPLEMENTATION_LABEL: implementation}},
            "spec": {"replicas": replicas,
                     "template": {"metadata": {"labels": {"podset": name}},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def ensure_crd(client: Any, *, timeout: float = CRD_ESTABLISHED_TIMEOUT, clock: Clock | None = None) -> None:
    """Create the PodSet CRD if it is missing (AlreadyExists means someone else did) and wait until
    the API server serves PodSets. ``client``: a reconciler ``Client``, or the API client one is made
    of.

    A real API server serves a new CRD's resource only once the CRD is Established, a moment after the
    create: until then its discovery document and every PodSet request are 404, and an informer set
    up at once fails. So this waits until discovery lists ``podsets`` (the discovery controller adds
    a version only once its CRD is Established), as envtest's ``WaitForCRDs`` and ``kubectl wait
    --for condition=established`` wait. The simulator serves a CRD at once: no wait there."""
    crd_client = client if isinstance(client, Client) else Client(client)
    try:
        crd_client.create(CRD)
    except ApiError as exc:
        if not exc.is_already_exists:
            raise
    clock = clock or RealClock()
    deadline = clock.now() + timeout
    while not _podsets_served(crd_client):
        if clock.now() > deadline:
            raise TimeoutError(f"the API server did not serve {API_VERSION} podsets within {timeout:g} s of "
                               f"creating CRD {CRD['metadata']['name']}")
        clock.sleep(0.2)


def _podsets_served(client: Client) -> bool:
    try:
        resources = client.api.get_json(f"/apis/{API_VERSION}").get("resources") or []
    except ApiError as exc:
        if exc.is_not_found:
            return False
        raise
    return any(entry.get("name") == CRD["spec"]["names"]["plural"] for entry in resources)


def replicas_of(obj: dict[str, Any]) -> int:
    value = (obj.get("spec") or {}).get("replicas", 1)
    return value if isinstance(value, int) and value >= 0 else 0


def implementation_of(obj: dict[str, Any]) -> str:
    return ((obj.get("metadata") or {}).get("labels") or {}).get(IMPLEMENTATION_LABEL, "")


def pod_for(owner: dict[str, Any]) -> dict[str, Any]:
    meta = owner["metadata"]
    template = (owner.get("spec") or {}).get("template") or {}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"generateName": meta["name"] + "-", "namespace": meta.get("namespace", "default"),
                        "labels": dict((template.get("metadata") or {}).get("labels") or {})},
           "spec": template.get("spec") or {"containers": [{"name": "app", "image": "nginx:1.27"}]}}
    set_controller_reference(owner, pod)  # the garbage collector deletes the pods with their PodSet
    return pod


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
    handler approach's restart (and failover) problem, shown by the scenarios.

    It is no controller (no queue, no Reconcile), and is shown as what it is: the PodSet informer's
    handler ``podset-handlers``, whose calls are that informer's handler records, key by key. Alone
    in a worker (``setup_handlers``) the informer is watched by no controller and the dashboard gives
    it a card and a page of its own; beside the Reconciler (``setup``) its calls are on the podset
    controller's page too, the PodSet informer being that controller's as well."""

    NAME = "podset-handlers"

    def __init__(self, client: Client, podsets: SharedInformer) -> None:
        self.client = client
        self.podsets = podsets
        self.handler_calls = 0
        self.api_calls = 0
        self.failed_side_effects = 0
        self._registration: Any = None

    def start(self) -> None:
        if self._registration is None:
            self._registration = self.podsets.add_event_handler(
                on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete, name=self.NAME)

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
        for _ in range(count):
            self.api_calls += 1
            try:
                self.client.create(pod_for(owner))
            except (ApiError, OSError) as exc:
                self.failed_side_effects += 1  # no retry: this pod is simply never created
                log.warning("handlers: creating a pod for %s failed and is lost: %s", owner["metadata"]["name"], exc)

    def _delete(self, owner: dict[str, Any], count: int) -> None:
        ns = owner["metadata"].get("namespace", "default")
        uid = owner["metadata"]["uid"]
        try:
            self.api_calls += 1
            pods = self.client.list("v1", "Pod", ns, live=True)  # no Pod cache in this approach
        except (ApiError, OSError) as exc:
            self.failed_side_effects += 1
            log.warning("handlers: listing pods of %s failed; the scale-down is lost: %s", owner["metadata"]["name"], exc)
            return
        mine = [p for p in pods if uid in _owned_by(p) and not p["metadata"].get("deletionTimestamp")]
        for pod in mine[:count]:
            self.api_calls += 1
            try:
                self.client.delete(pod)
            except (ApiError, OSError) as exc:
                self.failed_side_effects += 1
                log.warning("handlers: deleting %s failed and is lost: %s", pod["metadata"]["name"], exc)


class PodSetReconciler:
    """The level-based implementation (see module docstring)."""

    def __init__(self, client: Client, podsets: SharedInformer, pods: SharedInformer, *,
                 clock: Clock | None = None) -> None:
        self.client = client
        self.podsets = podsets
        self.pods = pods
        self.clock = clock or RealClock()
        self.api_calls = 0
        self.reconciles = 0
        self.errors = 0  # raised: the workqueue retries them with backoff
        self._expected: dict[str, dict[str, float]] = {}  # owner uid -> created pod name -> deadline
        self._lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        self.reconciles += 1
        try:
            return self._reconcile(request)
        except Exception:
            self.errors += 1
            raise

    def _reconcile(self, request: Request) -> Result:
        owner = self.podsets.store.get_by_key(str(request))
        if owner is None or implementation_of(owner) != "reconciler" or owner["metadata"].get("deletionTimestamp"):
            return Result()
        uid = owner["metadata"]["uid"]
        live = [p for p in self.pods.store.by_index(OWNER_INDEX, uid) if not p["metadata"].get("deletionTimestamp")]
        names = {p["metadata"]["name"] for p in live}
        pending = self._pending(uid, names)
        want = replicas_of(owner)
        have = len(live) + len(pending)
        for _ in range(want - have):
            self.api_calls += 1
            created = self.client.create(pod_for(owner))  # raises: retried
            self._expect(uid, created["metadata"]["name"])
        if have > want and not pending:
            for pod in sorted(live, key=lambda p: p["metadata"]["name"])[: have - want]:
                self.api_calls += 1
                with not_found_ignored():  # gone already: that is what we wanted
                    self.client.delete(pod)
        written = self._write_status(owner, len(live))
        if pending:
            return Result(requeue_after=0.5)
        # A conflict means the cache is behind: try again (rate-limited) rather than wait for an
        # event, which may never pass the predicates (a metadata-only write does not).
        return Result() if written else Result(requeue=True)

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

    def _write_status(self, owner: dict[str, Any], current: int) -> bool:
        """Write ``status`` if it changed; False when the write met a newer object (409)."""
        status = owner.get("status") or {}
        if status.get("replicas") == current and status.get("observedGeneration") == owner["metadata"].get("generation"):
            return True
        meta = owner["metadata"]
        body = {"apiVersion": API_VERSION, "kind": KIND,
                "metadata": {"name": meta["name"], "namespace": meta.get("namespace", "default"),
                             "resourceVersion": meta["resourceVersion"]},
                "status": {"replicas": current, "observedGeneration": meta.get("generation")}}
        self.api_calls += 1
        try:
            self.client.status().update(body)
        except ApiError as exc:
            if not exc.is_conflict:
                raise
            return False  # a stale cache: the caller requeues
        return True


class PodSetScoreboard:
    """The comparison the demo is about, live: per implementation, how many pods the PodSets want
    and how many exist, how many PodSets match, how long the last convergence took, the API calls
    made, and handler calls versus reconciles.

    PodSets labelled ``kopf`` (owned by the kopf operator ``kopf_podsets.py``, another process) get
    a ``kopf`` row too, once the cache holds one: its PodSets, pods and convergence come from this
    worker's caches like the others', but what kopf did -- handler calls, API calls, retries -- this
    worker cannot know, so those fields are ``None``. They are on the kopf worker's own telemetry
    (controller ``kopf/podsets.demo.ctrlscope.dev``: a ``reconcile`` record per handler attempt, a
    ``write`` per API write), which the ``kopf-vs-reconciler`` scenario counts.

    Convergence is tracked per PodSet from the informers' events (its own handlers on the PodSet
    and Pod informers), so a divergence repaired in 50 ms is measured as 50 ms: a PodSet
    *diverges* when its live pods stop matching ``spec.replicas`` and *converges* when they match
    again. Once a second (on the Manager's clock) one row per implementation is reported with
    ``observer.on_status("podset-scoreboard", ...)`` for the dashboard's scenarios page; it reads
    the caches only, never the API. A leader-only runnable: a standby replica reports nothing.
    """

    TABLE = SCOREBOARD_TABLE

    def __init__(self, podsets: SharedInformer, pods: SharedInformer, *, observer: Any,
                 handlers: HandlerPodSets | None, reconciler: PodSetReconciler | None,
                 clock: Clock | None = None, interval: float = 1.0) -> None:
        self.podsets = podsets
        self.pods = pods
        self.observer = observer
        self.handlers = handlers
        self.reconciler = reconciler
        self.clock = clock or RealClock()
        self.interval = interval
        self._lock = threading.Lock()
        self._owners: dict[str, str] = {}  # PodSet uid -> cache key
        self._diverged_at: dict[str, float] = {}  # PodSet key -> when it stopped matching
        self._last_converge: dict[str, float] = {}  # implementation -> seconds the last convergence took
        self._registrations: list[tuple[SharedInformer, Any]] = []
        self._stop = StopSignal(self.clock)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._registrations = [
            (self.podsets, self.podsets.add_event_handler(
                on_add=self._podset_changed, on_update=lambda old, new: self._podset_changed(new),
                on_delete=self._podset_changed, name="podset-scoreboard")),
            (self.pods, self.pods.add_event_handler(
                on_add=self._pod_changed, on_update=lambda old, new: self._pod_changed(old, new),
                on_delete=self._pod_changed, name="podset-scoreboard")),
        ]
        self._stop = StopSignal(self.clock)
        self._thread = threading.Thread(target=self._run, args=(self._stop,), name="podset-scoreboard", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.stop()
        for informer, registration in self._registrations:
            informer.remove_event_handler(registration)
        self._registrations = []
        if self._thread is not None:
            self._thread.join(5)

    def _run(self, stop: StopSignal) -> None:
        while not stop.stopped:
            try:
                self.tick()
            except Exception:  # noqa: BLE001 -- a report must never take the worker down
                log.exception("podset scoreboard failed")
            stop.wait(self.interval)

    # -- convergence, from events ----------------------------------------------------------------
    def _podset_changed(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)  # a DeletedFinalStateUnknown carries the last known state
        meta = (obj or {}).get("metadata") or {}
        if not meta.get("uid"):
            return
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self._lock:
            self._owners[meta["uid"]] = key
        self._check(key)

    def _pod_changed(self, *pods: Any) -> None:
        for pod in pods:
            # A tombstone's last state; an update's old may be a LazyObject (a Mapping).
            pod = getattr(pod, "obj", pod)
            if not isinstance(pod, Mapping):
                continue
            for uid in _owned_by(pod):
                with self._lock:
                    key = self._owners.get(uid)
                if key is not None:
                    self._check(key)

    def _check(self, key: str) -> None:
        owner = self.podsets.store.get_by_key(key)
        now = self.clock.now()
        with self._lock:
            if owner is None or owner["metadata"].get("deletionTimestamp"):
                self._diverged_at.pop(key, None)
                return
            if self._matches(owner):
                started = self._diverged_at.pop(key, None)
                if started is not None:
                    self._last_converge[implementation_of(owner)] = now - started
            else:
                self._diverged_at.setdefault(key, now)

    def _live_pods(self, owner: dict[str, Any]) -> int:
        return sum(1 for p in self.pods.store.by_index(OWNER_INDEX, owner["metadata"]["uid"])
                   if not p["metadata"].get("deletionTimestamp"))

    def _matches(self, owner: dict[str, Any]) -> bool:
        return self._live_pods(owner) == replicas_of(owner)

    # -- the report ------------------------------------------------------------------------------
    def tick(self) -> dict[str, dict[str, Any]]:
        """Compute and report the rows now (also what the thread does every ``interval``)."""
        now = self.clock.now()
        owners = self.podsets.store.list()
        kopf = any(implementation_of(owner) == KOPF for owner in owners)
        shown = (("handlers", self.handlers is not None), ("reconciler", self.reconciler is not None), (KOPF, kopf))
        rows = {impl: {"podsets": 0, "converged": 0, "desired": 0, "actual": 0, "converging_s": None}
                for impl, present in shown if present}
        for owner in owners:
            row = rows.get(implementation_of(owner))
            if row is None or owner["metadata"].get("deletionTimestamp"):
                continue
            key = f"{owner['metadata'].get('namespace', '')}/{owner['metadata']['name']}"
            live = self._live_pods(owner)
            row["podsets"] += 1
            row["desired"] += replicas_of(owner)
            row["actual"] += live
            with self._lock:
                started = self._diverged_at.get(key)
            if live == replicas_of(owner):
                row["converged"] += 1
            elif started is not None:
                row["converging_s"] = max(row["converging_s"] or 0.0, now - started)
        if self.handlers is not None:
            rows["handlers"].update(handler_calls=self.handlers.handler_calls, reconciles=0,
                                    api_calls=self.handlers.api_calls,
                                    lost_side_effects=self.handlers.failed_side_effects, retried_errors=0)
        if self.reconciler is not None:
            rows["reconciler"].update(handler_calls=0, reconciles=self.reconciler.reconciles,
                                      api_calls=self.reconciler.api_calls, lost_side_effects=0,
                                      retried_errors=self.reconciler.errors)
        if kopf:
            rows[KOPF].update(handler_calls=None, reconciles=None, api_calls=None, lost_side_effects=None,
                              retried_errors=None)
        with self._lock:
            last = dict(self._last_converge)
        for impl, row in rows.items():
            row.update(last_converge_s=last.get(impl), at=wall_ms(self.clock))
            self.observer.on_status(self.TABLE, key=impl, value=row)
        return rows


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
    ensure_crd(manager.get_client())
    podsets = manager.informer_for(API_VERSION, KIND)
    pods = manager.informer_for("v1", "Pod")
    if OWNER_INDEX not in pods.store.get_indexers():
        pods.store.add_indexers({OWNER_INDEX: _owned_by})
    # One field owner per implementation: managedFields says which one wrote what.
    handler_impl = (HandlerPodSets(manager.get_client(field_owner=HandlerPodSets.NAME), podsets)
                    if handlers else None)
    if handler_impl is not None:
        manager.add_runnable(handler_impl)
    reconciler_impl = None
    if reconciler:
        reconciler_impl = PodSetReconciler(manager.get_client(field_owner="podset-reconciler"), podsets, pods,
                                           clock=manager.clock)
        impl: Any = reconciler_impl
        if flaky is not None:
            flaky.inner = impl
            impl = flaky
        controller = manager.new_controller("podset", impl)
        # GenerationChangedPredicate: our own status writes must not trigger reconciles (the classic
        # "Reconcile is triggered after status update" hot loop, controller-runtime #2831).
        controller.watch(podsets, predicates=[ImplementationIs("reconciler"), GenerationChangedPredicate()])
        controller.watch(pods, handler=EnqueueRequestForOwner(API_VERSION, KIND))
    manager.add_runnable(PodSetScoreboard(podsets, pods, observer=manager.observer, handlers=handler_impl,
                                          reconciler=reconciler_impl, clock=manager.clock))


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
