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

Every component gets the Manager's clock and an observer that fans out to the caller's observer
(e.g. the telemetry publisher) and the metrics -- the API client too, if it can report its requests.

A Manager owns its process the way controller-runtime's does, so it turns on the informers'
``freeze_gc_after_sync`` by default: the cyclic GC stops re-walking the cache, which roughly doubles
informer throughput (bench/informer.py). Pass ``freeze_gc_after_sync=False`` when embedding a
Manager in a process that must keep full control of its garbage collector.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from controllers.clock import Clock, RealClock
from controllers.informers.factory import ListWatchClient, SharedInformerFactory
from controllers.informers.shared_informer import SharedInformer
from controllers.reconcile.controller import DEFAULT_CACHE_SYNC_TIMEOUT, Controller, ReconcileFunc
from controllers.reconcile.leader_election import LeaderElector, LeaseLock
from controllers.reconcile.metrics import MetricsObserver
from controllers.reconcile.request import Reconciler
from controllers.telemetry.observer import FanoutObserver, Observer
from controllers.workqueue import RateLimiter

log = logging.getLogger("ctrlscope.manager")


class Manager:
    """Runs controllers on shared informers, with metrics and optional leader election."""

    def __init__(self, client: ListWatchClient, *, resync_period: float = 0.0, clock: Clock | None = None,
                 observer: Observer | None = None, metrics_port: int | None = None,
                 metrics_addr: str = "127.0.0.1", leader_election_lock: LeaseLock | None = None,
                 identity: str = "", lease_duration: float = 15.0, renew_deadline: float = 10.0,
                 retry_period: float = 2.0, cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT,
                 freeze_gc_after_sync: bool = True) -> None:
        self.clock: Clock = clock or RealClock()
        self.metrics = MetricsObserver(clock=self.clock)
        self.observer = FanoutObserver(observer, self.metrics)
        # A client that reports its requests (KubernetesClient) reports them to the same observers:
        # that is how a Reconcile's API writes reach the dashboard.
        set_observer = getattr(client, "set_observer", None)
        if set_observer is not None:
            set_observer(self.observer)
        self.factory = SharedInformerFactory(client, resync_period, clock=self.clock, observer=self.observer,
                                             freeze_gc_after_sync=freeze_gc_after_sync)
        self.cache_sync_timeout = cache_sync_timeout
        self.metrics_port = metrics_port
        self.metrics_addr = metrics_addr
        self.controllers: list[Controller] = []
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
        self._controllers_started = False
        self._lock = threading.Lock()

    # -- building ------------------------------------------------------------------------------
    def informer_for(self, api_version: str, kind: str, namespace: str | None = None) -> SharedInformer:
        """The shared informer for a kind (created on first use, started by ``start``)."""
        return self.factory.informer_for(api_version, kind, namespace)

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

    def _stop_controllers(self) -> None:
        for controller in self.controllers:
            if controller.started:
                controller.stop()

    def stop(self) -> None:
        """Stop controllers (draining running reconciles), leader election, informers and metrics."""
        if self.elector is not None:
            self.elector.stop()
        self._stop_controllers()
        self.factory.shutdown()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server.server_close()
        self._done.set()
