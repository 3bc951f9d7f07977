"""Scenarios end to end against the simulator with the PodSet controllers running (shortened timings)."""

from __future__ import annotations

import pytest

from controllers.examples.podset import setup
from controllers.informers.http_client import KubernetesClient
from controllers.reconcile import Manager
from controllers.scenarios import SCENARIOS, ScenarioContext
from controllers.scenarios.telemetry import TelemetryReader
from controllers.sim import SimCluster
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.sim.conftest import FAST


class ManagerWorker:
    """In-process stand-in for the demo's supervised worker: kill stops the Manager, a new one starts."""

    def __init__(self, client, publisher) -> None:
        self.client = client
        self.publisher = publisher
        self.manager = self._start()

    def _start(self) -> Manager:
        manager = Manager(self.client, freeze_gc_after_sync=False, observer=TelemetryObserver(self.publisher, worker="scn"))
        setup(manager)
        manager.start()
        return manager

    def kill(self) -> None:
        self.manager.stop()

    def wait_restarted(self, timeout: float) -> bool:
        self.manager = self._start()
        return True


@pytest.fixture
def running(tmp_path, redis_url, prefix):
    sim = SimCluster(port=0, **FAST).start()
    client = KubernetesClient.from_kubeconfig(str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
    publisher = RedisPublisher(redis_url, prefix=prefix).start()
    worker = ManagerWorker(client, publisher)
    reader = TelemetryReader(redis_url, prefix=prefix, worker="scn")
    yield client, reader, worker
    reader.close()
    worker.manager.stop()
    publisher.stop()
    sim.stop()


@pytest.mark.parametrize("name", ["retry-storm", "pod-killer", "burst-coalescing", "watch-break", "controller-restart"])
def test_scenario_claims_hold(name, running):
    client, reader, worker = running
    said: list[str] = []
    ctx = ScenarioContext(client, time_scale=0.15, say=said.append, telemetry=reader, workers=worker,
                          actor=f"scenario {name}")
    before = len(ctx.faults.status()["events"])
    result = SCENARIOS[name].run(ctx)
    assert said, "a scenario narrates what to watch"
    assert result.ok, [(c.text, c.detail) for c in result.claims if not c.held]
    # The simulator's fault log names the scenario as who injected each of its faults.
    assert {e.get("by") for e in ctx.faults.status()["events"][before:]} <= {f"scenario {name}"}


def test_leader_failover_with_two_worker_processes(tmp_path, redis_url, prefix):
    """Two real `runcontrollers` replicas on a Lease (short timings); the scenario SIGKILLs the leader."""
    import os
    import subprocess
    import sys

    from controllers.process import stop_process
    from controllers.scenarios.base import LeaseHolder
    from tests.conftest import ROOT, wait_until

    sim = SimCluster(port=0, **FAST).start()
    kubeconfig = str(sim.write_kubeconfig(tmp_path / "kubeconfig"))
    client = KubernetesClient.from_kubeconfig(kubeconfig)
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    workers = [subprocess.Popen(
        [sys.executable, "manage.py", "runcontrollers", "--kubeconfig", kubeconfig, "--worker-name", f"r{i}",
         "--controller", "controllers.examples.podset:setup", "--leader-elect", "--lease", "default/failover",
         "--lease-duration", "2", "--renew-deadline", "1.5", "--retry-period", "0.3", "--status-every", "0"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(2)]
    try:
        lease = LeaseHolder(client, "default", "failover")
        wait_until(lease.holder, timeout=30, what="a leader")
        said: list[str] = []
        result = SCENARIOS["leader-failover"].run(ScenarioContext(client, time_scale=0.15, say=said.append, lease=lease))
        assert result.ok, [(c.text, c.detail) for c in result.claims if not c.held]
        assert result.measurements["old_leader"] != result.measurements["new_leader"]
        assert result.measurements["converged_s"] < 15
        assert sum(w.poll() is None for w in workers) == 1, "exactly the killed leader is gone"
    finally:
        for w in workers:
            stop_process(w)
        sim.stop()
