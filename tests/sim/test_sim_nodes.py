"""Simulated nodes: registered like kubelets register them, kept alive by lease renewal, and the
scheduler's placement (spread, cordon, drain, nodeSelector, Unschedulable) seen through real kubectl."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kubernetes import client

from controllers.clock import FakeClock
from controllers.sim import SimCluster
from tests.sim.conftest import FAST, Kubectl, api_client_for, eventually

NODES = ["sim-node-1", "sim-node-2", "sim-node-3"]


def _json(kubectl: Kubectl, *args: str) -> dict:
    return json.loads(kubectl.run("get", *args, "-o", "json").stdout)


def _running(kubectl: Kubectl, ns: str, count: int) -> list[dict]:
    def check() -> list[dict] | None:
        pods = [p for p in _json(kubectl, "pods", "-n", ns)["items"] if not p["metadata"].get("deletionTimestamp")]
        ok = len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)
        return pods if ok else None

    return eventually(check, timeout=10)


@pytest.mark.kubectl
def test_get_and_describe_nodes_show_a_small_real_cluster(kubectl: Kubectl, ns: str) -> None:
    table = kubectl.run("get", "nodes").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert [row.split()[:3] + row.split()[4:] for row in table[1:]] == [[n, "Ready", "<none>", "v1.32.0"]
                                                                       for n in NODES]
    wide = kubectl.run("get", "nodes", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[5:] == ["INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"]
    assert [row.split()[5] for row in wide[1:]] == ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    kubectl.run("run", "solo", "-n", ns, "--image=nginx")
    pod = _running(kubectl, ns, 1)[0]
    node = _json(kubectl, "node", pod["spec"]["nodeName"])
    address = {a["type"]: a["address"] for a in node["status"]["addresses"]}["InternalIP"]
    assert pod["status"]["hostIP"] == address
    assert pod["status"]["podIP"].rsplit(".", 1)[0] == node["spec"]["podCIDR"].rsplit(".", 1)[0]
    described = kubectl.run("describe", "node", pod["spec"]["nodeName"]).stdout
    for text in ("KubeletReady", "kubelet is posting ready status", "HolderIdentity:  " + pod["spec"]["nodeName"],
                 "pods:               110", "Non-terminated Pods:", f"{ns}  ", "solo", "Registered Node"):
        assert text in described, text


def test_scheduler_spreads_replicas_and_respects_cordon_and_drain(fresh_kubectl: Kubectl) -> None:
    kubectl = fresh_kubectl
    kubectl.run("create", "deployment", "web", "--image=nginx", "--replicas=3")
    assert sorted(p["spec"]["nodeName"] for p in _running(kubectl, "default", 3)) == NODES
    kubectl.run("cordon", "sim-node-1")
    assert "Ready,SchedulingDisabled" in kubectl.run("get", "node", "sim-node-1").stdout
    cordoned = kubectl.run("get", "nodes", "--field-selector", "spec.unschedulable=true", "-o", "name").stdout
    assert cordoned.split() == ["node/sim-node-1"]
    kubectl.run("drain", "sim-node-1", "--ignore-daemonsets", "--timeout=20s")
    placed = [p["spec"]["nodeName"] for p in _running(kubectl, "default", 3)]
    assert "sim-node-1" not in placed and sorted(set(placed)) == ["sim-node-2", "sim-node-3"]
    kubectl.run("uncordon", "sim-node-1")
    kubectl.run("scale", "deployment", "web", "--replicas=4")
    assert "sim-node-1" in [p["spec"]["nodeName"] for p in _running(kubectl, "default", 4)]


def test_pod_no_node_fits_stays_pending_until_one_does(fresh_kubectl: Kubectl) -> None:
    kubectl = fresh_kubectl
    kubectl.run("run", "picky", "--image=nginx", "--overrides",
                json.dumps({"spec": {"nodeSelector": {"disk": "ssd"}}}))

    def unschedulable() -> dict | None:
        conditions = _json(kubectl, "pod", "picky")["status"].get("conditions") or []
        return next((c for c in conditions if c["type"] == "PodScheduled" and c["status"] == "False"), None)

    condition = eventually(unschedulable)
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    assert "FailedScheduling" in kubectl.run("describe", "pod", "picky").stdout
    kubectl.run("label", "node", "sim-node-2", "disk=ssd")
    assert _running(kubectl, "default", 1)[0]["spec"]["nodeName"] == "sim-node-2"


def test_kubelet_renews_node_leases_on_the_injected_clock_until_paused(tmp_path: Path) -> None:
    clock = FakeClock()
    options = {**FAST, "lease_interval": 10.0}
    with SimCluster(port=0, clock=clock, **options) as sim, api_client_for(sim, tmp_path) as api:
        leases = client.CoordinationV1Api(api)

        def renewed() -> set[str]:
            return {lease.spec.renew_time.isoformat() for lease in leases.list_namespaced_lease("kube-node-lease").items}

        first = renewed()
        assert [lease.spec.holder_identity for lease in leases.list_namespaced_lease("kube-node-lease").items] == NODES
        clock.step(10.0)
        second = eventually(lambda: (r := renewed()) != first and r)
        sim.kubelet.pause()
        clock.step(30.0)
        time.sleep(0.2)  # ten kubelet ticks: waiting for something that must not happen
        assert renewed() == second, "a paused kubelet (a node that stopped reporting) renews nothing"
