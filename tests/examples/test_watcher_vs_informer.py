"""The watcher-vs-informer scenario on the simulator (shortened timings), and the raw watch loop's
variants one by one, read back from their published telemetry (protocol v1.6 watcher topics)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest

from controllers.examples import raw_watcher
from controllers.informers.http_client import KubernetesClient
from controllers.publish import ProtocolPublisher
from controllers.scenarios import SCENARIOS, ScenarioContext
from controllers.scenarios import watcher_vs_informer as wvi
from controllers.scenarios.telemetry import TelemetryReader
from controllers.schema import ComponentKind, RecordKind, ReflectorState, TopicKind, WatchEndReason, WatcherVariant
from controllers.sim import SimCluster
from controllers.sim.faults_client import SimFaults
from tests.conftest import ROOT, wait_until
from tests.faultproxy.conftest import proxy_in_front  # noqa: F401  (a FaultProxy in front of a cluster)
from tests.sim.conftest import FAST

SCALE = 0.15


@pytest.fixture
def cluster(tmp_path):
    sim = SimCluster(port=0, **FAST).start()
    kubeconfig = str(sim.write_kubeconfig(tmp_path / "kubeconfig"))
    yield kubeconfig, KubernetesClient.from_kubeconfig(kubeconfig)
    sim.stop()


def run_scenario(client, kubeconfig, redis_url, prefix):
    said: list[str] = []
    ctx = ScenarioContext(client, time_scale=SCALE, say=said.append, actor="scenario watcher-vs-informer",
                          kubeconfig=kubeconfig, redis_url=redis_url, prefix=prefix)
    return SCENARIOS["watcher-vs-informer"].run(ctx), said


def test_watcher_vs_informer_claims_hold_on_the_simulator(cluster, redis_url, prefix):
    kubeconfig, client = cluster
    result, said = run_scenario(client, kubeconfig, redis_url, prefix)
    assert said, "the scenario narrates what to watch"
    assert result.ok, [(c.text, c.detail) for c in result.claims if not c.held]
    m = result.measurements
    # The load the cache saves, by the server's own count: each raw loop made at least one GET per
    # Deployment it was told about, the informer none, and its whole run took fewer requests than a
    # single raw loop's GETs.
    for variant in ("stops_on_end", "restart_from_empty", "restart_from_last"):
        assert m[f"{variant}_api_reads"] >= wvi.DEPLOYMENTS
        assert m["informer_requests"] < m[f"{variant}_api_reads"] <= m[f"{variant}_requests"]
    assert m["informer_api_reads"] == 0 and m["informer_memory_reads"] > 0
    # Missed changes: none for the informer; stops-on-end missed everything after the server closed
    # its watch (at least the probe and the 6 changes of the two outages), restart-from-empty the
    # two deletes made while no watch was open, restart-from-last everything after the 410.
    assert m["informer_missed"] == 0
    assert m["stops_on_end_missed"] >= 9
    assert m["restart_from_empty_missed"] == 2
    assert m["restart_from_last_missed"] >= 4
    # restart-from-empty's re-watches from "" re-deliver every existing Deployment as ADDED.
    assert m["restart_from_empty_duplicates"] >= wvi.DEPLOYMENTS
    assert m["bytes_per_cached_object"] > 0
    table = result.table
    assert table["columns"] == ["", "informer", "stops-on-end", "restart-from-empty", "restart-from-last"]
    rows = {r["label"]: r["cells"] for r in table["rows"]}
    assert rows["cache equals the API server afterwards"][0] == "yes"
    assert rows["after: 410 Expired (history compacted)"][3] == "never: did not see the next change"
    assert rows["longest time a stream end went unanswered"][1].startswith("never noticed")
    assert all(r["claim"] is not None for r in table["rows"]), "every row measures one of the document's claims"


@pytest.mark.parametrize("variant", [v.value for v in WatcherVariant])
def test_a_raw_watch_loop_publishes_what_it_does(variant, cluster, redis_url, prefix):
    """Each variant against the simulator: its GETs, its stream's end, and what it does then, as the
    dashboard reads them from the watcher topic and the components entry."""
    kubeconfig, client = cluster
    path = "/apis/apps/v1/namespaces/default/deployments"
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    client.send_json("POST", path, deployment)
    stop = threading.Event()
    publisher = ProtocolPublisher(redis_url, worker="rw", prefix=prefix).start()
    reader = TelemetryReader(redis_url, prefix=prefix, worker="rw")
    try:
        report = publisher.watcher("deployments", resource=raw_watcher.RESOURCE, namespace="default", variant=variant)
        apps = raw_watcher.apps_api(kubeconfig, user_agent=f"raw-watcher/{variant}")
        loop = threading.Thread(target=raw_watcher.run_loop, args=(variant, apps, "default", report),
                                kwargs={"stop": stop, "retry_delay": 0.1}, daemon=True)
        loop.start()

        def records(kind=None):
            return reader.records(TopicKind.WATCHER, 0, 1e15, lambda r: kind is None or r["k"] == kind, name="deployments")

        wait_until(lambda: records(RecordKind.READ), timeout=10, what="the loop's GET of the Deployment")
        client.send_json("POST", "/_sim/watches/end", {})  # the server ends the watch, as after its timeout
        if variant == WatcherVariant.STOPS_ON_END:
            wait_until(lambda: not loop.is_alive(), timeout=10, what="the loop to return")
            wait_until(lambda: records(RecordKind.STATE)[-1]["state"] == ReflectorState.STOPPED, timeout=5,
                       what="the loop reported stopped")
            component = reader.components()[f"{ComponentKind.WATCHER}/deployments"]
            assert (component["variant"], component["state"], component["last_end"]) == (
                variant, ReflectorState.STOPPED, WatchEndReason.CLOSED)
            return
        wait_until(lambda: len(records(RecordKind.WATCH_START)) >= 2, timeout=10, what="a second watch")
        starts = [r["rv"] for r in records(RecordKind.WATCH_START)]

        def after_second_start():
            every = records()
            second = [i for i, r in enumerate(every) if r["k"] == RecordKind.WATCH_START][1]
            return every[:second], every[second + 1:]

        if variant == WatcherVariant.RESTART_FROM_EMPTY:
            assert starts[:2] == ["", ""]
            # From "": the Deployment arrives as ADDED again, and is read again.
            wait_until(lambda: [r for r in after_second_start()[1] if r["k"] == RecordKind.READ], timeout=10,
                       what="the GET after the second watch's first event")
            assert next(r for r in after_second_start()[1] if r["k"] == RecordKind.WATCH)["type"] == "ADDED"
        else:
            # The second watch resumes from the last resourceVersion the first one delivered.
            last_seen = [r["rv"] for r in after_second_start()[0] if r["k"] == RecordKind.WATCH][-1]
            assert starts[0] == "" and starts[1] == last_seen
            # Re-watching is held back (API latency) until a change is made and history
            # is compacted: the resume from before the change gets 410.
            faults = SimFaults(client)
            faults.latency(verb="watch", resource="deployments", ms=1000)
            faults.drop_watches()
            client.send_json("PATCH", f"{path}/web", {"spec": {"replicas": 3}}, headers={"Content-Type": "application/merge-patch+json"})
            faults.compact_history()
            faults.clear_latency()
            wait_until(lambda: sum(r["reason"] == WatchEndReason.EXPIRED for r in records(RecordKind.WATCH_END)) >= 2,
                       timeout=10, what="410 after 410: the loop retries the same resourceVersion")
            assert loop.is_alive()
    finally:
        stop.set()
        client.send_json("POST", "/_sim/watches/end", {})
        publisher.stop()
        reader.close()


def test_the_raw_watcher_runs_as_a_program(cluster, redis_url, prefix):
    """``python -m controllers.examples.raw_watcher``: a worker of its own on the dashboard, whose loop
    is reported stopped while the process runs on."""
    kubeconfig, client = cluster
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "controllers.examples.raw_watcher", "--variant", "stops-on-end",
                             "--kubeconfig", kubeconfig, "--worker-name", "rw-cli"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    reader = TelemetryReader(redis_url, prefix=prefix, worker="rw-cli")
    try:
        entry = f"{ComponentKind.WATCHER}/deployments"
        wait_until(lambda: reader.components().get(entry, {}).get("state") == ReflectorState.WATCHING, timeout=30,
                   what="the program's loop watching")
        client.send_json("POST", "/_sim/watches/end", {})
        wait_until(lambda: reader.components()[entry].get("state") == ReflectorState.STOPPED, timeout=10,
                   what="its loop stopped")
        assert proc.poll() is None, "the program runs on, watching nothing"
    finally:
        proc.terminate()
        proc.wait(10)
        reader.close()


@pytest.mark.realcluster
def test_watcher_vs_informer_claims_hold_on_the_real_control_plane_through_the_fault_proxy(
        realcluster, real_namespace, proxy_in_front, redis_url, prefix):  # noqa: F811
    """The same scenario on a real kube-apiserver (controller-manager writing every Deployment's status,
    so every side sees more events than the scenario's own changes), its faults and its request counts
    by User-Agent from the fault proxy in front of it (the real server counts requests by verb and
    resource only: ``apiserver_request_total`` has no user agent label)."""
    proxied = proxy_in_front(realcluster.kubeconfig)
    client = proxied.client()
    said: list[str] = []
    ctx = ScenarioContext(client, namespace=real_namespace, time_scale=0.25, say=said.append,
                          actor="scenario watcher-vs-informer", kubeconfig=str(proxied.kubeconfig),
                          redis_url=redis_url, prefix=prefix)
    result = SCENARIOS["watcher-vs-informer"].run(ctx)
    assert result.ok, [(c.text, c.detail) for c in result.claims if not c.held]
    m = result.measurements
    for variant in ("stops_on_end", "restart_from_empty", "restart_from_last"):
        assert m["informer_requests"] < m[f"{variant}_api_reads"] <= m[f"{variant}_requests"]
    assert m["informer_missed"] == 0 and m["informer_api_reads"] == 0
    assert m["stops_on_end_missed"] >= 9 and m["restart_from_empty_missed"] == 2 and m["restart_from_last_missed"] >= 4
    # Every fault went through the proxy, which published each as the simulator does.
    assert {"end-watches", "drop-watches", "compact", "latency", "stall"} <= {f["fault"] for f in proxied.published}
