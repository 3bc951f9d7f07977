"""The fidelity scenario's controller: the same Reconciler in ctrlscope's runtime and in real
controller-runtime (``go/cmd/fidelity``), so their published telemetry can be compared key by key.

It reconciles the ConfigMaps of one namespace (``CTRLSCOPE_FIDELITY_NAMESPACE``, default
``fidelity``) and does nothing but take time and, on purpose, fail:

- each reconcile takes ``CTRLSCOPE_FIDELITY_WORK`` seconds (default 0.05), so a burst of updates
  to one object lands while the key is queued (dedup) or being processed (defer, then requeue at
  done);
- a ConfigMap annotated ``ctrlscope.dev/fail-first: "N"`` fails its first N reconciles (counted
  in memory, per key) and then succeeds: the rate limiter's delays for the retries (5 ms doubling)
  are what the fidelity test compares with upstream's.

Both implementations read the same annotation and take the same time, and run at once on the same
objects against one simulator: they see the same watch events.
"""

from __future__ import annotations

import os
import threading

from controllers.reconcile import Manager, Request, Result

FAIL_FIRST = "ctrlscope.dev/fail-first"
CONTROLLER = "fidelity"


class FidelityReconciler:
    def __init__(self, configmaps, *, work: float, clock) -> None:
        self.configmaps = configmaps
        self.work = work
        self.clock = clock
        self.attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        if self.work > 0:
            self.clock.sleep(self.work)
        obj = self.configmaps.store.get_by_key(str(request))
        if obj is None:
            return Result()
        try:
            fail_first = int(((obj.get("metadata") or {}).get("annotations") or {}).get(FAIL_FIRST, "0"))
        except ValueError:
            fail_first = 0
        with self._lock:
            n = self.attempts[str(request)] = self.attempts.get(str(request), 0) + 1
        if n <= fail_first:
            raise RuntimeError(f"injected failure {n} of {fail_first} for {request}")
        return Result()


def setup(manager: Manager) -> None:
    namespace = os.environ.get("CTRLSCOPE_FIDELITY_NAMESPACE", "fidelity")
    configmaps = manager.informer_for("v1", "ConfigMap", namespace)
    work = float(os.environ.get("CTRLSCOPE_FIDELITY_WORK", "0.05"))
    controller = manager.new_controller(CONTROLLER, FidelityReconciler(configmaps, work=work, clock=manager.clock))
    controller.watch(configmaps)
