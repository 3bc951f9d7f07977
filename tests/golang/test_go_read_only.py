"""The Go controller-runtime sample against a cluster that is not the simulator, as a user runs it:
without ``--allow-writes`` it only observes. Its Reconcile's write is refused before it is sent
(clientgo.GuardWrites), published as refused (not a failed API write), and the Reconcile ends
terminal once instead of being retried with backoff forever (ctrlruntime.Reconciler).

The "real cluster" is the simulator behind tests/examples/test_read_only.py's recording proxy,
which answers ``/version`` as a real API server does and records every request it forwards.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from controllers.informers.http_client import KubernetesClient
from tests.conftest import wait_until
from tests.examples.test_deployments_end_to_end import DEPLOYMENT
from tests.examples.test_read_only import simulator_behind_a_proxy
from tests.golang.telemetry import Published

CONTROLLER = "w/go-summary/controller/deployment-summary"


@pytest.fixture
def proxied(tmp_path: Path):
    """(the simulator, the proxy in front of it, a kubeconfig pointing at the proxy)."""
    path = tmp_path / "real-cluster.kubeconfig"
    with simulator_behind_a_proxy(path) as (sim, proxy):
        yield sim, proxy, path


def test_the_go_reconciler_on_a_read_only_worker_refuses_its_write_once_and_is_terminal(
        proxied, go_process, redis_url, prefix):
    # (proxied first: it is torn down after the Go worker, whose open watches would hold the proxy)
    sim, proxy, kubeconfig = proxied
    client = KubernetesClient.for_host(sim.url)  # someone else creates the Deployment, directly
    client.send_json("POST", "/apis/apps/v1/namespaces/default/deployments", yaml.safe_load(DEPLOYMENT))
    published = Published(redis_url, prefix)
    try:
        go_process("deployment-summary", "--kubeconfig", str(kubeconfig), "--worker-name", "go-summary")

        def terminal():
            row = published.state(CONTROLLER).get("default/web") or {}
            return row if row.get("result") == "terminal" else None

        row = wait_until(terminal, timeout=60, what="the Go Reconcile to end terminal on the refused write")
        assert "read-only: POST /api/v1/namespaces/default/configmaps was not sent" in row["error"], row
        assert "--allow-writes" in row["error"]
        time.sleep(1.5)  # controller-runtime's 5 ms backoff, doubling: a retried key would have run again
        row = published.state(CONTROLLER)["default/web"]
        assert (row["attempts"], row["result"]) == (1, "terminal"), "a refused write is not retried"
        writes = [(w["method"], w["code"], w.get("refused")) for w in published.records(CONTROLLER, "write")]
        assert writes == [("POST", 0, "read-only")]
        cluster = next(v for k, v in published.state("w/go-summary/components").items() if k.startswith("cluster/"))
        assert cluster["writes"] == "read-only"
        assert proxy.writes() == [], "a read-only Go worker sent a write"
    finally:
        published.close()
