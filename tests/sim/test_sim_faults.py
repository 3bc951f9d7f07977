"""Fault injection under /_sim/: each fault behaves as documented and is recorded as an event."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import pytest
import urllib3
from kubernetes import client, watch

from controllers.sim import SimCluster
from tests.sim.conftest import FAST, api_client_for, eventually, make_namespace


def sim_post(sim: SimCluster, path: str, body: dict[str, Any] | None = None, method: str = "POST") -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(sim.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def _watch_in_thread(sim: SimCluster, api: client.ApiClient) -> tuple[client.CoreV1Api, str, threading.Thread,
                                                                    dict[str, Any]]:
    """Start a Python-client watch of a fresh namespace on a thread; returns once it is connected."""
    ns = make_namespace(sim)
    v1 = client.CoreV1Api(api)
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    result: dict[str, Any] = {"events": []}

    def run() -> None:
        try:
            w = watch.Watch()
            # No timeout_seconds: with it, Watch.stream would not re-watch after a clean end.
            for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, _request_timeout=15):
                result["events"].append(ev["type"])
                if result.get("stop"):
                    w.stop()
            result["ended"] = "clean"
        except Exception as e:  # recorded for the assertion
            result["error"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    eventually(lambda: sim.call(lambda: len(sim.store.all_watchers())) == 1)
    return v1, ns, t, result


def test_drop_watches_aborts_connections(fresh_sim: SimCluster, fresh_api: client.ApiClient) -> None:
    _, _, t, result = _watch_in_thread(fresh_sim, fresh_api)
    assert sim_post(fresh_sim, "/_sim/watches/drop")["closed"] == 1
    t.join(10)
    assert isinstance(result.get("error"), urllib3.exceptions.ProtocolError), result


def test_end_watches_closes_cleanly_and_client_rewatches(fresh_sim: SimCluster, fresh_api: client.ApiClient) -> None:
    v1, ns, t, result = _watch_in_thread(fresh_sim, fresh_api)
    sim_post(fresh_sim, "/_sim/watches/end")
    # Python's Watch re-watches from its last RV after a clean end: a new watcher appears.
    eventually(lambda: fresh_sim.call(lambda: len(fresh_sim.store.all_watchers())) == 1)
    result["stop"] = True
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "after-end"}})
    t.join(10)
    assert "error" not in result and result["events"] == ["ADDED"]


def test_error_rate_fails_matching_requests_only(fresh_sim: SimCluster, fresh_api: client.ApiClient) -> None:
    ns = make_namespace(fresh_sim)
    v1 = client.CoreV1Api(fresh_api)
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    sim_post(fresh_sim, "/_sim/errors", {"verb": "patch", "resource": "configmaps", "rate": 1.0, "code": 500})
    with pytest.raises(client.ApiException) as err:
        v1.patch_namespaced_config_map("a", ns, {"data": {"x": "1"}})
    assert err.value.status == 500 and '"kind":"Status"' in err.value.body
    assert v1.read_namespaced_config_map("a", ns).data is None  # reads unaffected, write never happened
    sim_post(fresh_sim, "/_sim/errors", method="DELETE")
    assert v1.patch_namespaced_config_map("a", ns, {"data": {"x": "1"}}).data == {"x": "1"}


def test_partial_error_rate_is_reproducible_with_seed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    outcomes = []
    for _ in range(2):
        with SimCluster(port=0, seed=7, **FAST) as sim, api_client_for(sim, tmp_path) as api:
            v1 = client.CoreV1Api(api)
            sim_post(sim, "/_sim/errors", {"verb": "list", "resource": "*", "rate": 0.3, "code": 503})
            run = []
            for _ in range(30):
                try:
                    v1.list_namespaced_config_map("default")
                    run.append(200)
                except client.ApiException as e:
                    run.append(e.status)
            outcomes.append(run)
    assert outcomes[0] == outcomes[1] and 503 in outcomes[0] and 200 in outcomes[0]


def test_latency_delays_matching_requests(fresh_sim: SimCluster, fresh_api: client.ApiClient) -> None:
    v1 = client.CoreV1Api(fresh_api)
    sim_post(fresh_sim, "/_sim/latency", {"verb": "list", "resource": "configmaps", "ms": 200})
    start = time.monotonic()
    v1.list_namespaced_config_map("default")
    assert time.monotonic() - start >= 0.2
    start = time.monotonic()
    v1.list_namespaced_secret("default")
    assert time.monotonic() - start < 0.2


def _deploy(apps: client.AppsV1Api, ns: str, replicas: int) -> None:
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "d"},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})


def test_kill_pods_then_replica_set_replaces_them(fresh_sim: SimCluster, fresh_api: client.ApiClient) -> None:
    ns = make_namespace(fresh_sim)
    v1, apps = client.CoreV1Api(fresh_api), client.AppsV1Api(fresh_api)
    _deploy(apps, ns, 3)
    before = eventually(lambda: {p.metadata.name for p in v1.list_namespaced_pod(ns).items
                                 if p.status.phase == "Running"} if len(v1.list_namespaced_pod(ns).items) == 3 else None)
    killed = sim_post(fresh_sim, "/_sim/pods/kill", {"count": 2, "namespace": ns})["killed"]
    assert len(killed) == 2
    after = eventually(lambda: {p.metadata.name for p in v1.list_namespaced_pod(ns).items
                                if p.status.phase == "Running"} if len(v1.list_namespaced_pod(ns).items) == 3 else None)
    assert len(after & before) == 1


def test_pause_kubelet_freezes_pods_until_resume(fresh_sim: SimCluster, fresh_api: client.ApiClient) -> None:
    ns = make_namespace(fresh_sim)
    v1 = client.CoreV1Api(fresh_api)
    sim_post(fresh_sim, "/_sim/kubelet/pause")
    v1.create_namespaced_pod(ns, {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    time.sleep(0.3)
    assert v1.read_namespaced_pod("p", ns).status.phase == "Pending"
    sim_post(fresh_sim, "/_sim/kubelet/resume")
    eventually(lambda: v1.read_namespaced_pod("p", ns).status.phase == "Running")


def test_reset_clears_objects_and_faults_and_records_every_fault(tmp_path) -> None:  # type: ignore[no-untyped-def]
    published: list[dict[str, Any]] = []
    with SimCluster(port=0, on_fault=published.append, **FAST) as sim, api_client_for(sim, tmp_path) as api:
        v1 = client.CoreV1Api(api)
        v1.create_namespaced_config_map("default", {"metadata": {"name": "a"}})
        sim_post(sim, "/_sim/errors", {"verb": "get", "resource": "pods", "rate": 0.5, "code": 429})
        sim_post(sim, "/_sim/history/compact")
        sim_post(sim, "/_sim/reset")
        assert v1.list_namespaced_config_map("default").items == []
        assert {n.metadata.name for n in v1.list_namespace().items} >= {"default", "kube-system"}
        assert [n.metadata.name for n in v1.list_node().items] == ["sim-node-1", "sim-node-2", "sim-node-3"]
        state = urllib.request.urlopen(sim.url + "/_sim/faults", timeout=5).read()
        faults = json.loads(state)
        assert faults["errors"] == [] and not faults["kubeletPaused"]
        assert [e["fault"] for e in faults["events"]] == ["errors", "compact", "reset"]
        assert [e["fault"] for e in published] == ["errors", "compact", "reset"]
        assert all(e["type"] == "fault" and e["time"] and e["resourceVersion"] for e in published)


def test_a_watch_from_before_a_reset_expires_so_informers_relist(fresh_sim: SimCluster) -> None:
    """Reset deletes objects without DELETED events: only a 410 tells a watcher its cache is stale."""
    sim_post(fresh_sim, "/api/v1/namespaces/default/configmaps", {"metadata": {"name": "doomed"}})
    rv = sim_post(fresh_sim, "/api/v1/namespaces/default/configmaps", method="GET")["metadata"]["resourceVersion"]
    sim_post(fresh_sim, "/_sim/reset")
    url = f"{fresh_sim.url}/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1"
    with urllib.request.urlopen(url, timeout=5) as resp:
        event = json.loads(resp.readline())
    assert event["type"] == "ERROR" and event["object"]["code"] == 410, event


def test_unknown_sim_endpoint_is_404(fresh_sim: SimCluster) -> None:
    req = urllib.request.Request(fresh_sim.url + "/_sim/nope", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 404


def test_each_fault_records_who_asked_for_it_and_a_bad_actor_header_changes_nothing(fresh_sim: SimCluster) -> None:
    from controllers.informers.http_client import KubernetesClient
    from controllers.sim.faults_client import SimFaults

    faults = SimFaults(KubernetesClient.for_host(fresh_sim.url))
    before = len(faults.status()["events"])
    faults.as_actor("José (operator)").errors(verb="get", resource="pods", rate=0.25, code=503)
    faults.clear_errors()  # nobody said who
    events = faults.status()["events"][before:]
    assert [(e["fault"], e.get("by")) for e in events] == [("errors", "José (operator)"), ("errors-cleared", None)]
    for bad in ("x" * 129, "line%0Abreak"):
        req = urllib.request.Request(fresh_sim.url + "/_sim/kubelet/pause", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json", "X-Ctrlscope-Actor": bad})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 400
        assert "X-Ctrlscope-Actor" in json.loads(err.value.read())["message"]
    status = faults.status()
    assert not status["kubeletPaused"] and len(status["events"]) == before + 2


def test_stall_holds_every_response_and_watch_silent_without_closing_them(fresh_sim: SimCluster) -> None:
    """A network stall: requests wait, watches go silent (no event, no bookmark, no end), nothing is
    closed; when it ends the held request is answered and the same watch delivers what it buffered."""
    from controllers.informers.http_client import KubernetesClient

    api = KubernetesClient.for_host(fresh_sim.url)
    ns = make_namespace(fresh_sim)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    rv = api.get_json(path)["metadata"]["resourceVersion"]
    lw = api.list_watch("v1", "ConfigMap", ns)
    stream = lw.watch(resource_version=rv, timeout_seconds=30)
    arrived: list[tuple[str, float]] = []
    reader = threading.Thread(target=lambda: arrived.extend((e.type, time.monotonic()) for e in stream), daemon=True)
    reader.start()
    eventually(lambda: fresh_sim.call(lambda: len(fresh_sim.store.all_watchers())) == 1)

    started = time.monotonic()
    assert sim_post(fresh_sim, "/_sim/stall", {"seconds": 1.2}) == {"ok": True}
    status = sim_post(fresh_sim, "/_sim/faults", method="GET")  # the fault API itself keeps answering
    assert 0 < status["stalledFor"] <= 1.2 and status["events"][-1]["fault"] == "stall"
    created = api.send_json("POST", path, {"metadata": {"name": "held"}})  # waits out the stall
    answered = time.monotonic() - started
    assert 1.0 <= answered < 3.0, answered
    eventually(lambda: [t for t, _ in arrived if t != "BOOKMARK"] == ["ADDED"], timeout=5)
    added_at = next(at for t, at in arrived if t == "ADDED")
    assert added_at - started >= 1.0, "a watch event went out during the stall"
    assert not [t for t, at in arrived if t == "BOOKMARK" and 0.05 < at - started < 1.0], "a bookmark during the stall"
    # The same connection goes on: the next event arrives on it.
    api.send_json("PUT", f"{path}/held", {**created, "data": {"k": "v"}})
    eventually(lambda: "MODIFIED" in [t for t, _ in arrived], timeout=5)
    assert reader.is_alive(), "the stall closed the watch"
    stream.close()
    reader.join(5)
    assert fresh_sim.call(lambda: fresh_sim.faults.rules())["stalledFor"] == 0


def test_stall_is_ended_by_delete_and_by_reset(fresh_sim: SimCluster) -> None:
    sim_post(fresh_sim, "/_sim/stall", {"seconds": 60})
    assert sim_post(fresh_sim, "/_sim/faults", method="GET")["stalledFor"] > 50
    sim_post(fresh_sim, "/_sim/stall", method="DELETE")
    with urllib.request.urlopen(fresh_sim.url + "/api/v1/namespaces", timeout=2) as resp:
        assert resp.status == 200
    sim_post(fresh_sim, "/_sim/stall", {"seconds": 60})
    sim_post(fresh_sim, "/_sim/reset")
    with urllib.request.urlopen(fresh_sim.url + "/api/v1/namespaces", timeout=2) as resp:
        assert resp.status == 200
    faults = [e["fault"] for e in sim_post(fresh_sim, "/_sim/faults", method="GET")["events"]]
    assert faults == ["stall", "stall", "stall", "reset"]
    with pytest.raises(urllib.error.HTTPError) as err:
        sim_post(fresh_sim, "/_sim/stall", {"seconds": -1})
    assert err.value.code == 400
