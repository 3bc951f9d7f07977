"""The example pair end to end: simulator over HTTP + real kubectl + the worker command + Redis.

kubectl creates and scales a Deployment; the handler-based watcher logs each event, the reconciler
converges the summary ConfigMap, and every step reaches Redis on the worker's own topics.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import redis

from controllers.process import stop_process
from controllers.sim import SimCluster
from controllers.telemetry.streams import Keys
from tests.conftest import ROOT, wait_until
from tests.sim.conftest import FAST, KUBECTL, Kubectl
from tests.sim.test_sim_kubectl import DEPLOYMENT as SIM_DEPLOYMENT

pytestmark = pytest.mark.kubectl


# The kubectl conformance suite's Deployment (2 replicas of nginx), in the default namespace.
DEPLOYMENT = SIM_DEPLOYMENT.replace("namespace: NS", "namespace: default")


@pytest.fixture
def cluster():
    sim = SimCluster(port=0, **FAST).start()
    yield sim
    sim.stop()


def test_handlers_log_and_the_reconciler_converges_the_summary(cluster, tmp_path: Path, redis_url, prefix):
    if not os.path.exists(KUBECTL):
        pytest.skip(f"{KUBECTL} not installed")
    kubectl = Kubectl(cluster, tmp_path)
    log_path = tmp_path / "worker.log"
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    with open(log_path, "wb") as log:
        worker = subprocess.Popen(
            [sys.executable, "manage.py", "runcontrollers", "--controller", "controllers.examples.deployments:setup",
             "--kubeconfig", str(kubectl.kubeconfig), "--worker-name", "e2e", "--status-every", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        kubectl.run("apply", "-f", "-", input=DEPLOYMENT)

        def summary():
            r = kubectl.run("get", "configmap", "web-summary", "-o", "json", check=False)
            return orjson.loads(r.stdout)["data"] if r.returncode == 0 else None

        assert wait_until(summary, what="summary ConfigMap")["replicas"] == "2"
        kubectl.run("scale", "deployment", "web", "--replicas=5")
        wait_until(lambda: (summary() or {}).get("replicas") == "5", what="summary to follow the scale")
        kubectl.run("delete", "configmap", "web-summary")  # someone deletes it: the owner watch repairs it
        wait_until(lambda: (summary() or {}).get("replicas") == "5", what="summary to be recreated")

        logged = wait_until(lambda: "Deployment updated: default/web" in log_path.read_text(errors="replace"),
                            what="handler log lines")
        assert logged and "Deployment added: default/web" in log_path.read_text(errors="replace")

        r = redis.Redis.from_url(redis_url)
        keys = Keys(prefix)
        topics = wait_until(lambda: {t.decode() for t in r.smembers(keys.topics)}
                            >= {"w/e2e/controller/deployment-summary", "w/e2e/components"}
                            and {t.decode() for t in r.smembers(keys.topics)}, what="telemetry topics")
        assert any(t.startswith("w/e2e/informer/") for t in topics)
        assert any(t.startswith("w/e2e/queue/") for t in topics)
        result = wait_until(lambda: r.hget(keys.snapshot("w/e2e/controller/deployment-summary"), "default/web"),
                            what="reconcile state for default/web")
        assert orjson.loads(result)["result"] == "success"
        # The simulator says it is one (controllers/simulated.py): the worker writes without --allow-writes.
        clusters = [orjson.loads(v) for k, v in r.hgetall(keys.snapshot("w/e2e/components")).items()
                    if k.startswith(b"cluster/")]
        assert [(c["simulated"], c["writes"]) for c in clusters] == [(True, "allowed")]
        r.close()
    finally:
        stop_process(worker)
    assert worker.returncode is not None
