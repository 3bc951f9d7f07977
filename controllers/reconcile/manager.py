"""The Manager: one process's informers, controllers, metrics and leader election
(controller-runtime ``pkg/manager``).

A Manager owns a ``SharedInformerFactory`` (controllers watching the same kind share one informer),
the controllers built on it, a ``MetricsObserver`` (``/metrics`` with controller-runtime's series)
and, optionally, a ``LeaderElector``. ``start``:

1. starts ``/metrics`` (if ``metrics_port`` is set) and every informer -- caches run on every
   replica, leader or not, so a new leader starts warm;
2. without leader election, starts every controller (each waits for its caches to sync);
   with it, campaigns and starts the controllers only once leading. Losing the lease stops the
   controllers and ends ``run`` -- controller-runtime exits the process at that point, and so
   should a ctrlscope worker.

Anything else with ``start()``/``stop()`` joins through ``add_runnable`` (controller-runtime's
``mgr.Add(Runnable)``). Like upstream, a runnable runs only on the leader unless it says otherwise
with ``need_leader_election = False`` (``LeaderElectionRunnable``): work that writes to the cluster
-- a controller, or informer event handlers that act -- must not run in two replicas at once.

The cache options of controller-runtime's ``cache.Options`` pass through to the factory:
``namespace`` (``DefaultNamespaces``, one namespace), ``tweak_list_options`` (``DefaultLabelSelector``
/ ``DefaultFieldSelector``: set them on the ``ListOptions`` it is given) and ``transform``
(``DefaultTransform``, e.g. ``transform_strip_managed_fields()``); ``informer_for(...,
metadata_only=True)`` is ``builder.OnlyMetadata``.

``get_client()`` is the reconciler's client (``client.py``: reads from these informers, writes to the
API server) and ``get_event_recorder_for(component)`` its EventRecorder.

Every component gets the Manager's clock and an observer that fans out to the caller's observer
(e.g. the telemetry publisher) and the metrics -- the API client too, if it can report its requests.

A Manager owns its process the way controller-runtime's does, so, like the factory, it keeps the
cyclic GC off its informers by default (``freeze_gc_after_sync``, ``gc_freeze.py``), and with the
GC off the cache it keeps decoded dicts (``cache="decoded"``): reads cost nothing, at ~4x the
memory of the compact cache. Pass ``freeze_gc_after_sync=False`` when embedding a Manager in a
process that must keep full control of its garbage collector.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol

from controllers.clock import Clock, RealClock
from controllers.informers.factory import ListWatchClient, SharedInformerFactory, TweakListOptionsFunc
from controllers.informers.reflector import MIN_WATCH_TIMEOUT
from controllers.informers.shared_informer import SharedInformer
from controllers.informers.store import CacheMode
from controllers.informers.transform import TransformFunc
from controllers.metrics import MetricsObserver
from controllers.observer import FanoutObserver, Observer
from controllers.reconcile.client import Client, EventRecorder
from controllers.reconcile.controller import DEFAULT_CACHE_SYNC_TIMEOUT, Controller, ReconcileFunc
from controllers.reconcile.leader_election import LeaderElector, LeaseLock
from controllers.reconcile.request import Reconciler
from controllers.workqueue import RateLimiter

log = logging.getLogger("ctrlscope.manager")


class Runnable(Protocol):
    """Something the Manager starts and stops (controller-runtime ``manager.Runnable``). Set
    ``need_leader_election = False`` to run it on every replica (default: only on the leader)."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


def needs_leader_election(runnable: Any) -> bool:
    return bool(getattr(runnable, "need_leader_election", True))


class Manager:
    """Runs controllers on shared informers, with metrics and optional leader election."""

    def __init__(self, client: ListWatchClient, *, resync_period: float = 0.0, clock: Clock | None = None,
                 observer: Observer | None = None, metrics_port: int | None = None,
                 metrics_addr: str = "127.0.0.1", leader_election_lock: LeaseLock | None = None,
                 identity: str = "", lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT,
                 freeze_gc_after_sync: bool = True, min_watch_timeout: float = MIN_WATCH_TIMEOUT,
                 namespace: str | None = None, tweak_list_options: TweakListOptionsFunc | None = None,
                 transform: TransformFunc | None = None, cache: CacheMode | str | None = None) -> None:
        self.clock: Clock = clock or RealClock()
        self.api = client
        self.identity = identity
        self.metrics = MetricsObserver(clock=self.clock)
        self.observer = FanoutObserver(observer, self.metrics)
        # A client that reports its requests (KubernetesClient) reports them to the same observers:
        # that is how a Reconcile's API writes reach the dashboard.
        set_observer = getattr(client, "set_observer", None)
        if set_observer is not None:
            set_observer(self.observer)
        self.factory = SharedInformerFactory(client, resync_period, clock=self.clock, observer=self.observer,
                                             freeze_gc_after_sync=freeze_gc_after_sync,
                                             min_watch_timeout=min_watch_timeout, namespace=namespace,
                                             tweak_list_options=tweak_list_options, transform=transform,
                                             cache=CacheMode.resolve(cache, CacheMode.for_gc_policy(freeze_gc_after_sync)))
        self.cache_sync_timeout = cache_sync_timeout
        self.metrics_port = metrics_port
        self.metrics_addr = metrics_addr
        self.controllers: list[Controller] = []
        self._lock = threading.Lock()
        # Runnables other than controllers, in the order added; _running: those started, not stopped.
        self.runnables: list[Runnable] = []
        self._running: list[Runnable] = []
        self.elector: LeaderElector | None = None
        if leader_election_lock is not None:
            if not identity:
                raise ValueError("leader election needs an identity (e.g. the pod name)")
            self.elector = LeaderElector(leader_election_lock, identity, lease_duration=lease_duration,
                                         renew_deadline=renew_deadline, retry_period=retry_period,
                                         on_started_leading=self._start_controllers,
                                         on_stopped_leading=self._stop_controllers, clock=self.clock,
                                         observer=self.observer)
        self._metrics_server: Any = None
        self._done = threading.Event()
        self._started = False
        self._controllers_started = False

    # -- building ------------------------------------------------------------------------------
    def informer_for(self, api_version: str, kind: str, namespace: str | None = None, *,
                     metadata_only: bool = False) -> SharedInformer:
        """The shared informer for a kind (created on first use, started by ``start``);
        ``metadata_only``: one that caches ``PartialObjectMetadata`` (``builder.OnlyMetadata``)."""
        return self.factory.informer_for(api_version, kind, namespace, metadata_only=metadata_only)

    def get_client(self, *, field_owner: str = "") -> Client:
        """A client that reads from this Manager's informer cache and writes to its API server
        (``mgr.GetClient()``); ``field_owner`` names its writes in managedFields."""
        return Client(self.api, self.factory, field_owner=field_owner,  # type: ignore[arg-type]
                      cache_sync_timeout=self.cache_sync_timeout)

    def get_event_recorder_for(self, component: str) -> EventRecorder:
        """An EventRecorder whose Events say they come from ``component`` (``mgr.GetEventRecorderFor``)."""
        return EventRecorder(self.api, component, clock=self.clock, host=self.identity)  # type: ignore[arg-type]

    def new_controller(self, name: str, reconciler: Reconciler | ReconcileFunc, *,
                       max_concurrent_reconciles: int = 1, rate_limiter: RateLimiter | None = None) -> Controller:
        """A Controller wired to this Manager's clock, observer and metrics; call ``watch`` on it."""
        controller = Controller(name, reconciler, max_concurrent_reconciles, rate_limiter, clock=self.clock,
                                observer=self.observer, cache_sync_timeout=self.cache_sync_timeout)
        self.add(controller)
        return controller

    def add(self, controller: Controller) -> None:
        """Run ``controller`` with this Manager (build it with the Manager's observer to get metrics)."""
        self.controllers.append(controller)
        self.metrics.register_controller(controller.name, controller.max_concurrent_reconciles)

    def add_runnable(self, runnable: Runnable) -> None:
        """Start ``runnable`` with the Manager: once leading, or at once if it does not need
        leader election (or no election runs); stop it with the Manager or when leadership ends."""
        self.runnables.append(runnable)
        with self._lock:
            started = self._controllers_started
        if started or (self._started and not needs_leader_election(runnable)):
            self._start_runnable(runnable)

    # -- running -------------------------------------------------------------------------------
    @property
    def metrics_url(self) -> str | None:
        """``http://addr:port/metrics`` once serving."""
        if self._metrics_server is None:
            return None
        return f"http://{self.metrics_addr}:{self._metrics_server.server_port}/metrics"

    def start(self) -> None:
        """Start metrics, informers and (directly or once leading) the controllers; returns."""
        if self.metrics_port is not None:
            self._metrics_server = self.metrics.serve(self.metrics_port, self.metrics_addr)
        self.factory.start()
        self._started = True
        for runnable in self.runnables:
            if not needs_leader_election(runnable):
                self._start_runnable(runnable)
        if self.elector is None:
            self._start_controllers()
        else:
            threading.Thread(target=self._campaign, name="leader-election", daemon=True).start()

    def _campaign(self) -> None:
        self.elector.run()  # type: ignore[union-attr]
        self._done.set()

    def run(self) -> None:
        """``start``, then block until ``stop`` or until leadership is lost."""
        self.start()
        self._done.wait()

    def _start_controllers(self) -> None:
        with self._lock:
            if self._controllers_started:
                return
            self._controllers_started = True
        for controller in self.controllers:
            try:
                controller.start()
            except (TimeoutError, RuntimeError) as exc:
                log.error("manager: controller %s did not start: %s", controller.name, exc)
        for runnable in self.runnables:
            if needs_leader_election(runnable):
                self._start_runnable(runnable)

    def _start_runnable(self, runnable: Runnable) -> None:
        with self._lock:
            if any(r is runnable for r in self._running):
                return
            self._running.append(runnable)
        try:
            runnable.start()
        except Exception:  # noqa: BLE001 -- user code: shown in the log, never fatal to the Manager
            log.exception("manager: runnable %r did not start", runnable)

    def _stop_controllers(self) -> None:
        for controller in self.controllers:
            if controller.started:
                controller.stop()
        for runnable in self.runnables:
            if needs_leader_election(runnable):
                self._stop_runnable(runnable)

    def _stop_runnable(self, runnable: Runnable) -> None:
        with self._lock:
            if not any(r is runnable for r in self._running):
                return
            self._running = [r for r in self._running if r is not runnable]
        try:
            runnable.stop()
        except Exception:  # noqa: BLE001 -- user code: shown in the log, never fatal to the Manager
            log.exception("manager: runnable %r did not stop cleanly", runnable)

    def stop(self) -> None:
        """Stop controllers (draining running reconciles), leader election, informers and metrics."""
        if self.elector is not None:
            self.elector.stop()
        self._stop_controllers()
        for runnable in self.runnables:
            if not needs_leader_election(runnable):
                self._stop_runnable(runnable)
        self.factory.shutdown()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        self._done.set()
