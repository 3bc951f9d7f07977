"""go/cmd/raw-watcher against the simulator: client-go's Deployments(ns).Watch in a for loop, in its
three variants, published as a protocol v1.6 watcher (the Go twin of
controllers/examples/raw_watcher.py, whose variants tests/examples/test_watcher_vs_informer.py runs)."""

from __future__ import annotations

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.schema import ComponentKind, RecordKind, ReflectorState, WatchEndReason, WatcherVariant
from controllers.sim import SimCluster
from controllers.sim.faults_client import SimFaults
from tests.conftest import wait_until
from tests.golang.telemetry import Published
from tests.sim.conftest import FAST

PATH = "/apis/apps/v1/namespaces/default/deployments"


@pytest.fixture
def cluster(tmp_path):
    sim = SimCluster(port=0, **FAST).start()
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    client = KubernetesClient.from_kubeconfig(str(kubeconfig))
    client.send_json("POST", PATH, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    yield kubeconfig, client
    sim.stop()


@pytest.mark.parametrize("variant", [v.value for v in WatcherVariant])
def test_the_go_raw_watcher_publishes_what_its_loop_does(variant, cluster, go_process, redis_url, prefix):
    kubeconfig, client = cluster
    faults = SimFaults(client)
    worker = f"go-rw-{variant}"
    proc = go_process("raw-watcher", "--kubeconfig", str(kubeconfig), "--variant", variant, "--worker-name", worker)
    published = Published(redis_url, prefix)
    topic, components = f"w/{worker}/watcher/deployments", f"w/{worker}/components"
    try:
        def records(kind):
            return published.records(topic, kind)

        wait_until(lambda: records(RecordKind.READ), timeout=30, what="the loop's GET of the Deployment")
        entry = published.state(components)[f"{ComponentKind.WATCHER}/deployments"]
        assert (entry["resource"], entry["namespace"], entry["variant"]) == ("apps/v1/deployments", "default", variant)
        assert records(RecordKind.READ)[0]["code"] == 200
        # The server counted the loop's requests under its own User-Agent. The records first: a read is
        # published after its answer, so the server has counted every read already published (read in
        # the other order, a GET of the loop between the two reads was a record the count lacked).
        agent = f"raw-watcher/{variant} (go)"
        reads = len(records(RecordKind.READ))
        gets = sum(r["count"] for r in faults.requests()["requests"] if r["userAgent"] == agent and r["verb"] == "get")
        assert gets >= reads >= 1
        faults.end_watches()  # as the server does after a watch's timeout
        if variant == WatcherVariant.STOPS_ON_END:
            wait_until(lambda: published.state(components)[f"{ComponentKind.WATCHER}/deployments"].get("state")
                       == ReflectorState.STOPPED, timeout=10, what="the loop reported stopped")
            assert records(RecordKind.WATCH_END)[-1]["reason"] == WatchEndReason.CLOSED
            assert proc.proc.poll() is None, "the program runs on, watching nothing"
            return
        wait_until(lambda: len(records(RecordKind.WATCH_START)) >= 2, timeout=10, what="a second watch")
        starts = [r["rv"] for r in records(RecordKind.WATCH_START)]
        if variant == WatcherVariant.RESTART_FROM_EMPTY:
            assert starts[:2] == ["", ""]
            return
        assert starts[0] == "" and starts[1] not in ("", None)
        # Re-watching is held back (API latency) until a change is made and history
        # is compacted: the resume from before the change gets 410.
        faults.latency(verb="watch", resource="deployments", ms=1000)
        faults.drop_watches()
        client.send_json("PATCH", f"{PATH}/web", {"spec": {"replicas": 3}},
                         headers={"Content-Type": "application/merge-patch+json"})
        faults.compact_history()
        faults.clear_latency()
        wait_until(lambda: sum(r["reason"] == WatchEndReason.EXPIRED for r in records(RecordKind.WATCH_END)) >= 2,
                   timeout=15, what="410 after 410: the loop retries the same resourceVersion")
        assert published.state(components)[f"{ComponentKind.WATCHER}/deployments"]["last_end"] == WatchEndReason.EXPIRED
    finally:
        published.close()
