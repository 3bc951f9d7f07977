"""Prometheus metrics with controller-runtime's names and labels, fed by Observer hooks.

``MetricsObserver`` turns the workqueue and reconcile hooks into the series controller-runtime
exports (``controller_runtime_reconcile_total{controller,result}``, ``workqueue_depth{name,controller}``,
...), in its own registry, so existing Grafana dashboards for controller-runtime work unchanged.
Like client-go's metrics provider it is just another observer: nothing is measured unless a
Manager (or you) installs it. ``serve(port)`` exposes ``/metrics``. It sits beside the Observer
interface rather than in ``reconcile``: it needs nothing of the runtime, and the publisher API
(``controllers/publish.py``) gives processes without ctrlscope's runtime the same series.

Reconcile results ``terminal`` and ``panic`` (ctrlscope's finer observer labels) are counted as
``result="error"`` plus the terminal/panic counters, as controller-runtime does.
"""

from __future__ import annotations

import threading
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from controllers.clock import Clock, RealClock
from controllers.observer import Observer
from controllers.schema import FAILED_RESULTS, QueueOp, ReconcileResult

RECONCILE_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
                     0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
                     40, 50, 60)
QUEUE_BUCKETS = tuple(10.0 ** e for e in range(-8, 2))
FAMILIES = (
    "controller_runtime_reconcile_total", "controller_runtime_reconcile_errors_total",
    "controller_runtime_terminal_reconcile_errors_total", "controller_runtime_reconcile_panics_total",
    "controller_runtime_reconcile_time_seconds", "controller_runtime_max_concurrent_reconciles",
    "controller_runtime_active_workers", "workqueue_depth", "workqueue_adds_total",
    "workqueue_queue_duration_seconds", "workqueue_work_duration_seconds", "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds", "workqueue_retries_total",
)
"""Every family ``MetricsObserver`` exports, by the name ``/metrics`` shows (what a Grafana panel queries)."""
_METRIC_RESULTS = (ReconcileResult.ERROR, ReconcileResult.REQUEUE_AFTER, ReconcileResult.REQUEUE, ReconcileResult.SUCCESS)
"""The ``result`` label values controller-runtime exports (terminal and panic count as error)."""


class MetricsObserver(Observer):
    """Maintains controller-runtime's Prometheus series from observer hooks."""

    def __init__(self, *, clock: Clock | None = None, registry: CollectorRegistry | None = None) -> None:
        self.clock: Clock = clock or RealClock()
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_total = Counter("controller_runtime_reconcile", "Total number of reconciliations per controller",
                                       ["controller", "result"], registry=r)
        self.reconcile_errors = Counter("controller_runtime_reconcile_errors",
                                        "Total number of reconciliation errors per controller", ["controller"],
                                        registry=r)
        self.terminal_errors = Counter("controller_runtime_terminal_reconcile_errors",
                                       "Total number of terminal reconciliation errors per controller",
                                       ["controller"], registry=r)
        self.panics = Counter("controller_runtime_reconcile_panics",
                              "Total number of reconciliation panics per controller", ["controller"], registry=r)
        self.reconcile_time = Histogram("controller_runtime_reconcile_time_seconds",
                                        "Length of time per reconciliation per controller", ["controller"],
                                        buckets=RECONCILE_BUCKETS, registry=r)
        self.max_concurrent = Gauge("controller_runtime_max_concurrent_reconciles",
                                    "Maximum number of concurrent reconciles per controller", ["controller"],
                                    registry=r)
        self.active_workers = Gauge("controller_runtime_active_workers",
                                    "Number of currently used workers per controller", ["controller"], registry=r)
        labels = ["name", "controller"]
        self.depth = Gauge("workqueue_depth", "Current depth of workqueue", labels, registry=r)
        self.adds = Counter("workqueue_adds", "Total number of adds handled by workqueue", labels, registry=r)
        self.queue_duration = Histogram("workqueue_queue_duration_seconds",
                                        "How long in seconds an item stays in workqueue before being requested",
                                        labels, buckets=QUEUE_BUCKETS, registry=r)
        self.work_duration = Histogram("workqueue_work_duration_seconds",
                                       "How long in seconds processing an item from workqueue takes",
                                       labels, buckets=QUEUE_BUCKETS, registry=r)
        self.unfinished = Gauge("workqueue_unfinished_work_seconds",
                                "How many seconds of work has been done that is in progress", labels, registry=r)
        self.longest = Gauge("workqueue_longest_running_processor_seconds",
                             "How many seconds has the longest running processor for workqueue been running",
                             labels, registry=r)
        self.retries = Counter("workqueue_retries", "Total number of retries handled by workqueue", labels,
                               registry=r)
        self._lock = threading.Lock()
        # queue name -> key -> clock time the key was handed to a worker
        self._processing: dict[str, dict[str, float]] = {}

    def register_controller(self, name: str, max_concurrent_reconciles: int) -> None:
        """Create a controller's series at zero, as controller-runtime's ``initMetrics`` and client-go's
        queue metrics do, so that ``rate()`` starts from 0 rather than from a series' first increment."""
        for result in _METRIC_RESULTS:
            self.reconcile_total.labels(name, result)
        for counter in (self.reconcile_errors, self.terminal_errors, self.panics):
            counter.labels(name)
        self.reconcile_time.labels(name)
        self.max_concurrent.labels(name).set(max_concurrent_reconciles)
        self.active_workers.labels(name).set(0)
        for series in (self.depth, self.adds, self.queue_duration, self.work_duration, self.retries):
            series.labels(name, name)
        self.unfinished.labels(name, name).set_function(lambda: self._unfinished(name))
        self.longest.labels(name, name).set_function(lambda: self._longest(name))

    def _started(self, queue: str) -> list[float]:
        with self._lock:
            return list(self._processing.get(queue, {}).values())

    def _unfinished(self, queue: str) -> float:
        now = self.clock.now()
        return sum(now - t for t in self._started(queue))

    def _longest(self, queue: str) -> float:
        now = self.clock.now()
        return max((now - t for t in self._started(queue)), default=0.0)

    # -- hooks ---------------------------------------------------------------------------------
    def on_queue(self, queue: str, *, op: QueueOp, key: str, depth: int, delay: float | None = None,
                 requeues: int | None = None, duration: float | None = None) -> None:
        self.depth.labels(queue, queue).set(depth)
        if op in (QueueOp.ADD, QueueOp.DEFER):
            self.adds.labels(queue, queue).inc()
        elif op == QueueOp.GET:
            with self._lock:
                self._processing.setdefault(queue, {})[key] = self.clock.now()
            if duration is not None:
                self.queue_duration.labels(queue, queue).observe(duration)
        elif op == QueueOp.DONE:
            with self._lock:
                self._processing.get(queue, {}).pop(key, None)
            if duration is not None:
                self.work_duration.labels(queue, queue).observe(duration)
        elif op == QueueOp.ADD_RATE_LIMITED:
            self.retries.labels(queue, queue).inc()

    def on_reconcile_start(self, controller: str, *, key: str, worker: int, **_: Any) -> None:
        self.active_workers.labels(controller).inc()

    def on_reconcile_end(self, controller: str, *, key: str, worker: int, duration: float,
                         result: ReconcileResult, requeue_after: float = 0.0, error: str | None = None,
                         **_: Any) -> None:
        self.active_workers.labels(controller).dec()
        self.reconcile_time.labels(controller).observe(duration)
        if result in FAILED_RESULTS:
            self.reconcile_total.labels(controller, ReconcileResult.ERROR).inc()
            self.reconcile_errors.labels(controller).inc()
            if result == ReconcileResult.TERMINAL:
                self.terminal_errors.labels(controller).inc()
            elif result == ReconcileResult.PANIC:
                self.panics.labels(controller).inc()
        else:
            self.reconcile_total.labels(controller, result).inc()

    def serve(self, port: int, addr: str = "127.0.0.1") -> Any:
        """Serve ``/metrics`` on ``addr:port`` (0 = any free port); returns the WSGI server."""
        server, _ = start_http_server(port, addr=addr, registry=self.registry)
        return server
