"""The commands a demo presenter types, run with real kubectl: each must behave as on a real cluster
(what it prints, what it stores), or fail with the error a real cluster gives."""

from __future__ import annotations

import json
import subprocess

import pytest

from controllers.sim import SimCluster
from tests.sim.conftest import Kubectl, eventually

pytestmark = pytest.mark.kubectl


def _json(kubectl: Kubectl, *args: str) -> dict:
    return json.loads(kubectl.run("get", *args, "-o", "json").stdout)


def _web(kubectl: Kubectl, ns: str, replicas: int = 2) -> list[str]:
    """A running Deployment ``web``; returns its pods' names."""
    kubectl.run("create", "deployment", "web", "-n", ns, "--image=nginx:1.27", f"--replicas={replicas}")
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=15s")
    return sorted(p["metadata"]["name"] for p in _json(kubectl, "pods", "-n", ns, "-l", "app=web")["items"])


def test_label_annotate_and_all_three_patch_types_edit_the_stored_object(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("create", "configmap", "cfg", "-n", ns, "--from-literal=a=1")
    kubectl.run("label", "configmap", "cfg", "-n", ns, "tier=web", "team=x")
    kubectl.run("label", "configmap", "cfg", "-n", ns, "team-")
    kubectl.run("annotate", "configmap", "cfg", "-n", ns, "note=hi", "owner=me")
    kubectl.run("annotate", "configmap", "cfg", "-n", ns, "owner-")
    kubectl.run("patch", "configmap", "cfg", "-n", ns, "-p", '{"data":{"b":"2"}}')
    kubectl.run("patch", "configmap", "cfg", "-n", ns, "--type=merge", "-p", '{"data":{"a":null,"c":"3"}}')
    kubectl.run("patch", "configmap", "cfg", "-n", ns, "--type=json", "-p",
                '[{"op":"replace","path":"/data/b","value":"22"}]')
    cm = _json(kubectl, "configmap", "cfg", "-n", ns)
    assert cm["metadata"]["labels"] == {"tier": "web"}
    assert cm["metadata"]["annotations"] == {"note": "hi"}
    assert cm["data"] == {"b": "22", "c": "3"}


def test_output_formats_selectors_and_get_all(kubectl: Kubectl, ns: str) -> None:
    pods = _web(kubectl, ns)
    kubectl.run("run", "solo", "-n", ns, "--image=busybox", "--labels=app=solo")
    eventually(lambda: _json(kubectl, "pod", "solo", "-n", ns)["status"].get("phase") == "Running")
    assert kubectl.run("get", "pods", "-n", ns, "-l", "app=web", "-o", "name").stdout.split() == \
        [f"pod/{p}" for p in pods]
    assert kubectl.run("get", "pods", "-n", ns, "-l", "app in (web)", "-o",
                       "jsonpath={.items[*].metadata.name}").stdout.split() == pods
    columns = kubectl.run("get", "pods", "solo", "-n", ns, "-o",
                          "custom-columns=NAME:.metadata.name,NODE:.spec.nodeName,PHASE:.status.phase").stdout
    name, node, phase = columns.splitlines()[1].split()
    assert (name, phase) == ("solo", "Running") and node.startswith("sim-node-")
    labels = kubectl.run("get", "pods", "solo", "-n", ns, "--show-labels").stdout.splitlines()
    assert labels[0].split()[-1] == "LABELS" and labels[1].split()[-1] == "app=solo"
    running = kubectl.run("get", "pods", "-n", ns, "--field-selector", "status.phase=Running", "-o", "name")
    assert len(running.stdout.split()) == 3
    on_node = kubectl.run("get", "pods", "-n", ns, "--field-selector", f"spec.nodeName={node}", "-o", "name")
    assert "pod/solo" in on_node.stdout.split()
    everything = kubectl.run("get", "all", "-n", ns).stdout
    for kind in ("pod/solo", "deployment.apps/web", "replicaset.apps/web-"):
        assert kind in everything, kind


def test_rollout_restart_makes_a_new_revision(kubectl: Kubectl, ns: str) -> None:
    _web(kubectl, ns)
    assert "restarted" in kubectl.run("rollout", "restart", "deployment/web", "-n", ns).stdout
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=15s")
    history = kubectl.run("rollout", "history", "deployment/web", "-n", ns).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]
    template = _json(kubectl, "deployment", "web", "-n", ns)["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]


def test_wait_for_delete_returns_once_the_finalizer_is_gone(kubectl: Kubectl, sim: SimCluster, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {ns}, "
                                          "finalizers: [example.com/hold]}\n")
    kubectl.run("delete", "configmap", "held", "-n", ns, "--wait=false")
    with kubectl.background("wait", "--for=delete", "configmap/held", "-n", ns, "--timeout=15s") as waiting:
        eventually(lambda: sim.call(lambda: len(sim.store.watchers.get(("", "configmaps"), ()))))
        kubectl.run("patch", "configmap", "held", "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert waiting.returncode == 0 and waiting.out.strip() == "configmap/held condition met", waiting.err


def test_logs_of_a_deployment_and_follow_streams_new_lines(kubectl: Kubectl, ns: str) -> None:
    pods = _web(kubectl, ns, replicas=1)
    out = kubectl.run("logs", "deploy/web", "-n", ns).stdout.splitlines()
    assert out[0].startswith("[nginx] starting nginx:1.27 on sim-node-")
    # -f never ends on its own: after a second, the timeout kills kubectl and hands over what it printed.
    with pytest.raises(subprocess.TimeoutExpired) as followed:
        subprocess.run(kubectl.cmd("logs", "-f", pods[0], "-n", ns), env=kubectl.env, capture_output=True,
                       timeout=1.0)
    streamed = (followed.value.stdout or b"").decode().splitlines()
    assert streamed[:len(out)] == out and len(streamed) > len(out) + 3, "lines written while following arrive"


def test_delete_by_label_and_delete_all(kubectl: Kubectl, ns: str) -> None:
    for name in ("a", "b", "c"):
        kubectl.run("create", "configmap", name, "-n", ns)
    kubectl.run("label", "configmap", "a", "b", "-n", ns, "group=ab")
    assert kubectl.run("delete", "configmap", "-l", "group=ab", "-n", ns).stdout.split("\n")[:2] == \
        ['configmap "a" deleted', 'configmap "b" deleted']
    assert kubectl.run("delete", "configmap", "--all", "-n", ns).stdout.strip() == 'configmap "c" deleted'
    assert "No resources found" in kubectl.run("get", "configmaps", "-n", ns).stderr


def test_cluster_commands_auth_and_top(kubectl: Kubectl, ns: str) -> None:
    versions = kubectl.run("api-versions").stdout.split()
    assert {"v1", "apps/v1", "authorization.k8s.io/v1", "authentication.k8s.io/v1"} <= set(versions)
    assert "Kubernetes control plane is running at http://127.0.0.1:" in kubectl.run("cluster-info").stdout
    service = kubectl.run("get", "service", "kubernetes", "-n", "default").stdout.splitlines()[1].split()
    assert service[:5] == ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    assert kubectl.run("auth", "can-i", "create", "deployments", "-n", ns).stdout.strip() == "yes"
    assert kubectl.run("auth", "can-i", "*", "*").stdout.strip() == "yes"
    rules = kubectl.run("auth", "can-i", "--list").stdout.splitlines()
    assert rules[1].split() == ["*.*", "[]", "[]", "[*]"]
    whoami = kubectl.run("auth", "whoami").stdout
    assert "ctrlscope-sim" in whoami and "system:masters" in whoami
    top = kubectl.run("top", "pods", "-n", ns, check=False)
    assert top.returncode == 1 and "Metrics API not available" in top.stderr
    explained = kubectl.run("explain", "pods").stdout
    assert "KIND:       Pod" in explained and "spec\t<PodSpec>" in explained, explained
    ports = kubectl.run("explain", "pods.spec.containers.ports").stdout
    assert "FIELD: ports <[]ContainerPort>" in ports and "containerPort\t<integer> -required-" in ports, ports
    strategy = kubectl.run("explain", "deployments.spec.strategy.type").stdout
    assert "GROUP:      apps" in strategy and "RollingUpdate" in strategy, strategy
