"""The OpenTelemetry tests' controller: it fails on purpose, takes time, and writes only what changed.

It reconciles the ConfigMaps of one namespace (``CTRLSCOPE_OTEL_NAMESPACE``, default ``default``):

- each attempt takes ``CTRLSCOPE_OTEL_WORK`` seconds (default 0.1), so a burst of updates lands while
  the key is queued (merged by dedup) or being processed (deferred to the next attempt);
- a ConfigMap annotated ``ctrlscope.dev/fail-first: "N"`` fails its first N attempts (counted per key);
- one annotated ``ctrlscope.dev/requeue-first: "S"`` asks, on its first attempt, to run again after S
  seconds (``Result(requeue_after=S)``) and does nothing else;
- then, when ``data.n`` differs from ``data.observed``, it copies it with a merge PATCH: one API write,
  whose watch event comes back to the controller and makes one more attempt that writes nothing.

``setup`` is what ``manage.py runcontrollers --controller tests.otel.reconciler:setup`` loads.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from controllers.reconcile import Manager, Request, Result

CONTROLLER = "otel-demo"
FAIL_FIRST = "ctrlscope.dev/fail-first"
REQUEUE_FIRST = "ctrlscope.dev/requeue-first"
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}


class WritingReconciler:
    def __init__(self, client: Any, configmaps: Any, *, work: float, clock: Any) -> None:
        self.client = client
        self.configmaps = configmaps
        self.work = work
        self.clock = clock
        self.attempts: dict[str, int] = {}
        self.writes = 0
        self._lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        key = str(request)
        with self._lock:
            n = self.attempts[key] = self.attempts.get(key, 0) + 1
        self.clock.sleep(self.work)
        obj = self.configmaps.store.get_by_key(key)
        if obj is None:
            return Result()
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if n <= int(annotations.get(FAIL_FIRST, "0")):
            raise RuntimeError(f"injected failure {n} of {annotations[FAIL_FIRST]} for {key}")
        if n == 1 and REQUEUE_FIRST in annotations:
            return Result(requeue_after=float(annotations[REQUEUE_FIRST]))
        data = obj.get("data") or {}
        if data.get("observed") != data.get("n"):
            path = self.client.resource_path("v1", "ConfigMap", request.namespace, request.name)
            self.client.send_json("PATCH", path, {"data": {"observed": data.get("n")}}, headers=MERGE_PATCH)
            with self._lock:
                self.writes += 1
        return Result()


def setup(manager: Manager) -> WritingReconciler:
    namespace = os.environ.get("CTRLSCOPE_OTEL_NAMESPACE", "default")
    configmaps = manager.informer_for("v1", "ConfigMap", namespace)
    reconciler = WritingReconciler(manager.api, configmaps, work=float(os.environ.get("CTRLSCOPE_OTEL_WORK", "0.1")),
                                   clock=manager.clock)
    manager.new_controller(CONTROLLER, reconciler).watch(configmaps)
    return reconciler
