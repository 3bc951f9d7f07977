"""Conformance with the real kubectl binary: what users type must behave as on a real cluster."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
import yaml

from controllers.sim import SimCluster
from tests.sim.conftest import Kubectl, eventually

pytestmark = pytest.mark.kubectl

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: nginx:1.25
        ports: [{containerPort: 80}]
        env:
        - {name: MODE, value: prod}
        - {name: DEBUG, value: "1"}
      - name: sidecar
        image: busybox:1.36
"""

CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
"""


def _deployment(ns: str) -> str:
    return DEPLOYMENT.replace("NS", ns)


def _get_json(kubectl: Kubectl, *args: str) -> dict:
    return json.loads(kubectl.run("get", *args, "-o", "json").stdout)


def test_get_prints_server_side_table_columns(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    eventually(lambda: "2/2" in kubectl.run("get", "deploy", "-n", ns).stdout)
    out = kubectl.run("get", "pods", "-n", ns).stdout
    assert out.splitlines()[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert "Running" in out
    wide = kubectl.run("get", "pods", "-n", ns, "-o", "wide").stdout.splitlines()
    assert wide[0].split()[5:7] == ["IP", "NODE"]
    assert all(row.split()[6].startswith("sim-node-") for row in wide[1:])


def test_get_all_namespaces_takes_namespace_from_row_metadata(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c1, namespace: {ns}}}\n")
    out = kubectl.run("get", "configmaps", "-A").stdout
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert any(line.split()[:2] == [ns, "c1"] for line in out.splitlines())


def test_get_yaml_and_json_output(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c1, namespace: {ns}}}\n"
                                          "data: {k: v}\n")
    as_yaml = yaml.safe_load(kubectl.run("get", "cm", "c1", "-n", ns, "-o", "yaml").stdout)
    as_json = _get_json(kubectl, "cm", "c1", "-n", ns)
    assert as_yaml["data"] == as_json["data"] == {"k": "v"}
    assert as_json["metadata"]["resourceVersion"].isdigit()
    assert "managedFields" not in as_json["metadata"]  # kubectl hides them, so they must be well formed


def test_get_watch_receives_added_modified_deleted(kubectl: Kubectl, sim: SimCluster, ns: str) -> None:
    cm = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: w, namespace: {ns}}}\n"
    with kubectl.watching(sim, "configmaps", "-n", ns, "--output-watch-events") as watch:
        kubectl.run("apply", "-f", "-", input=cm + "data: {a: '1'}\n")
        kubectl.run("apply", "-f", "-", input=cm + "data: {a: '2', b: '3'}\n")
        kubectl.run("delete", "cm", "w", "-n", ns)
    assert [e[:2] for e in watch.events()] == [["ADDED", "w"], ["MODIFIED", "w"], ["DELETED", "w"]], watch.err
    assert watch.returncode == 0


def test_apply_change_image_remove_env_and_container_stores_exact_object(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    changed = (_deployment(ns).replace("nginx:1.25", "nginx:1.26")
               .replace('        - {name: DEBUG, value: "1"}\n', "")
               .replace("      - name: sidecar\n        image: busybox:1.36\n", ""))
    out = kubectl.run("apply", "-f", "-", input=changed).stdout
    assert "configured" in out
    d = _get_json(kubectl, "deploy", "web", "-n", ns)
    containers = d["spec"]["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["app"]
    assert containers[0]["image"] == "nginx:1.26"
    assert containers[0]["env"] == [{"name": "MODE", "value": "prod"}]
    assert containers[0]["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert "$setElementOrder" not in json.dumps(d) and "$patch" not in json.dumps(d)
    last = json.loads(d["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"])
    assert last["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert d["metadata"]["generation"] == 2
    # Re-applying the same file is a no-op: no new generation, nothing to configure.
    assert "unchanged" in kubectl.run("apply", "-f", "-", input=changed).stdout


def test_apply_server_side_creates_and_removes_dropped_fields(kubectl: Kubectl, ns: str) -> None:
    first = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ssa, namespace: {ns}}}\ndata: {{a: '1', b: '2'}}\n"
    assert "serverside-applied" in kubectl.run("apply", "--server-side", "-f", "-", input=first).stdout
    second = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ssa, namespace: {ns}}}\ndata: {{a: '3'}}\n"
    kubectl.run("apply", "--server-side", "-f", "-", input=second)
    cm = _get_json(kubectl, "cm", "ssa", "-n", ns, "--show-managed-fields")
    assert cm["data"] == {"a": "3"}
    assert [(m["manager"], m["operation"]) for m in cm["metadata"]["managedFields"]] == [("kubectl", "Apply")]


def test_client_side_apply_then_server_side_migrates_ownership(kubectl: Kubectl, ns: str) -> None:
    cm = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: mig, namespace: {ns}}}\n"
    kubectl.run("apply", "-f", "-", input=cm + "data: {a: '1', b: '2'}\n")
    kubectl.run("apply", "--server-side", "-f", "-", input=cm + "data: {a: '1', c: '3'}\n")
    got = _get_json(kubectl, "cm", "mig", "-n", ns, "--show-managed-fields")
    assert got["data"] == {"a": "1", "c": "3"}, "kubectl moved the client-side fields to its apply manager"
    assert [(m["manager"], m["operation"]) for m in got["metadata"]["managedFields"]] == [("kubectl", "Apply")]


def test_apply_server_side_conflict_then_force(kubectl: Kubectl, ns: str) -> None:
    cm = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: own, namespace: {ns}}}\ndata: {{a: '1'}}\n"
    kubectl.run("apply", "--server-side", "--field-manager=alice", "-f", "-", input=cm)
    other = cm.replace("'1'", "'2'")
    result = kubectl.run("apply", "--server-side", "--field-manager=bob", "-f", "-", input=other, check=False)
    assert result.returncode != 0 and "conflict" in result.stderr.lower()
    kubectl.run("apply", "--server-side", "--field-manager=bob", "--force-conflicts", "-f", "-", input=other)
    assert _get_json(kubectl, "cm", "own", "-n", ns)["data"] == {"a": "2"}


def test_scale_deployment_runs_more_pods(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    assert "scaled" in kubectl.run("scale", "deployment", "web", "-n", ns, "--replicas=4").stdout
    eventually(lambda: _get_json(kubectl, "deploy", "web", "-n", ns).get("status", {}).get("readyReplicas") == 4)
    pods = _get_json(kubectl, "pods", "-n", ns)["items"]
    assert len(pods) == 4 and all(p["status"]["phase"] == "Running" for p in pods)


def test_delete_deployment_cascades_to_replicasets_and_pods(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    eventually(lambda: len(_get_json(kubectl, "pods", "-n", ns)["items"]) == 2)
    kubectl.run("delete", "deployment", "web", "-n", ns)
    eventually(lambda: not _get_json(kubectl, "rs,pods", "-n", ns)["items"])


def test_delete_foreground_returns_after_dependents_are_gone(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    eventually(lambda: len([p for p in _get_json(kubectl, "pods", "-n", ns)["items"]
                            if p["status"].get("phase") == "Running"]) == 2)
    kubectl.run("delete", "deployment", "web", "-n", ns, "--cascade=foreground", "--timeout=15s")
    assert _get_json(kubectl, "deploy,rs,pods", "-n", ns)["items"] == []


def test_delete_waits_for_finalizer_removal(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: held, namespace: {ns}, "
                                          "finalizers: [example.com/hold]}\n")
    with kubectl.background("delete", "cm", "held", "-n", ns, "--timeout=15s") as deleting:
        eventually(lambda: _get_json(kubectl, "cm", "held", "-n", ns)["metadata"].get("deletionTimestamp"))
        assert deleting.proc.poll() is None, "kubectl must wait while the finalizer is present"
        kubectl.run("patch", "cm", "held", "-n", ns, "--type=merge", "-p", '{"metadata":{"finalizers":null}}')
    assert deleting.returncode == 0, deleting.err
    assert 'configmap "held" deleted' in deleting.out
    assert kubectl.run("get", "cm", "held", "-n", ns, check=False).returncode != 0


def test_api_resources_lists_every_served_kind(kubectl: Kubectl) -> None:
    out = kubectl.run("api-resources").stdout
    names = {line.split()[0] for line in out.splitlines()[1:]}
    assert {"pods", "deployments", "replicasets", "configmaps", "secrets", "services", "events", "leases",
            "namespaces", "customresourcedefinitions"} <= names


def test_crd_serves_custom_resources_for_get_apply_and_watch(kubectl: Kubectl, sim: SimCluster, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=CRD)
    assert "widgets" in kubectl.run("api-resources", "--api-group=example.com").stdout
    widget = f"apiVersion: example.com/v1\nkind: Widget\nmetadata: {{name: w1, namespace: {ns}}}\nspec: {{size: 3}}\n"
    with kubectl.watching(sim, "widgets", "-n", ns, "--output-watch-events") as watch:
        assert "created" in kubectl.run("apply", "-f", "-", input=widget).stdout
        assert "configured" in kubectl.run("apply", "-f", "-", input=widget.replace("size: 3", "size: 5")).stdout
    assert [e[0] for e in watch.events()] == ["ADDED", "MODIFIED"]
    table = kubectl.run("get", "wd", "-n", ns).stdout.splitlines()
    # Printer columns replace the default Age column (a real API server adds Age only without them).
    assert table[0].split() == ["NAME", "SIZE"]
    assert table[1].split()[:2] == ["w1", "5"]
    assert _get_json(kubectl, "widget", "w1", "-n", ns)["metadata"]["generation"] == 2


def test_logs_returns_synthetic_container_output(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns).replace("replicas: 2", "replicas: 1"))
    running = eventually(lambda: [p for p in _get_json(kubectl, "pods", "-n", ns)["items"]
                                  if p["status"].get("phase") == "Running"])[0]
    pod = running["metadata"]["name"]
    out = kubectl.run("logs", pod, "-n", ns, "-c", "app").stdout
    assert out.splitlines()[0] == f"[app] starting nginx:1.25 on {running['spec']['nodeName']}"
    assert len(kubectl.run("logs", pod, "-n", ns, "-c", "app", "--tail=1").stdout.splitlines()) == 1


def test_describe_shows_pod_state_and_events(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns).replace("replicas: 2", "replicas: 1"))
    running = eventually(lambda: [p for p in _get_json(kubectl, "pods", "-n", ns)["items"]
                                  if p["status"].get("phase") == "Running"])[0]["metadata"]
    pod = running["name"]
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{pod}.1", "namespace": ns},
             "involvedObject": {"kind": "Pod", "name": pod, "namespace": ns, "apiVersion": "v1",
                                "uid": running["uid"]},
             "reason": "Pulled", "message": "Container image already present", "type": "Normal",
             "source": {"component": "kubelet"}, "count": 1}
    kubectl.run("apply", "-f", "-", input=json.dumps(event))
    out = kubectl.run("describe", "pod", pod, "-n", ns).stdout
    # The labels' column width follows the longest label (Service Account, with admission's defaults).
    assert re.search(r"^Status:\s+Running$", out, re.MULTILINE), out
    assert "Controlled By:  ReplicaSet/web-" in out
    assert "Pulled" in out and "Container image already present" in out
    assert "Started container app" in out and "default-scheduler" in out  # the simulated kubelet's own events
    deployment = kubectl.run("describe", "deployment", "web", "-n", ns).stdout
    assert "NewReplicaSetAvailable" in deployment and "Scaled up replica set web-" in deployment


def test_not_found_error_matches_real_server_wording(kubectl: Kubectl, ns: str) -> None:
    result = kubectl.run("get", "deployment", "nope", "-n", ns, check=False)
    assert result.returncode == 1
    assert 'Error from server (NotFound): deployments.apps "nope" not found' in result.stderr


def test_dry_run_server_validates_without_storing(kubectl: Kubectl, ns: str) -> None:
    assert "server dry run" in kubectl.run("apply", "--dry-run=server", "-f", "-", input=_deployment(ns)).stdout
    assert "No resources found" in kubectl.run("get", "deploy", "-n", ns).stderr


def test_rollout_status_and_wait_follow_deployment_conditions(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    assert "successfully rolled out" in kubectl.run("rollout", "status", "deployment/web", "-n", ns,
                                                    "--timeout=15s").stdout
    kubectl.run("set", "image", "deployment/web", "app=nginx:1.27", "-n", ns)
    assert "successfully rolled out" in kubectl.run("rollout", "status", "deployment/web", "-n", ns,
                                                    "--timeout=15s").stdout
    assert "condition met" in kubectl.run("wait", "--for=condition=Available", "deployment/web", "-n", ns,
                                          "--timeout=15s").stdout


def test_rollout_undo_restores_the_previous_template_as_a_new_revision(kubectl: Kubectl, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    kubectl.run("set", "image", "deployment/web", "app=nginx:1.27", "-n", ns)
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=15s")
    assert "rolled back" in kubectl.run("rollout", "undo", "deployment/web", "-n", ns).stdout
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=15s")
    d = _get_json(kubectl, "deploy", "web", "-n", ns)
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.25"
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    history = kubectl.run("rollout", "history", "deployment/web", "-n", ns).stdout
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["2", "3"]


def test_delete_namespace_removes_everything_in_it(kubectl: Kubectl, sim: SimCluster, ns: str) -> None:
    kubectl.run("apply", "-f", "-", input=_deployment(ns))
    eventually(lambda: len(_get_json(kubectl, "pods", "-n", ns)["items"]) == 2)
    kubectl.run("delete", "namespace", ns, "--timeout=15s")
    assert ns not in kubectl.run("get", "ns").stdout
    assert sim.call(lambda: [k for k, b in sim.store.buckets.items() if any(n == ns for n, _ in b.objects)]) == []


@pytest.mark.parametrize("minor", [27, 28, 29, 30, 31, 33])
def test_other_kubectl_minors_apply_and_scale(minor: int, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """/usr/bin/kubectl dispatches on the server's /version: each shipped minor must work too."""
    from tests.sim.conftest import FAST

    with SimCluster(port=0, git_version=f"v1.{minor}.0", **FAST) as cluster:
        k = Kubectl(cluster, tmp_path)
        assert f"v1.{minor}" in k.run("version", "-o", "json").stdout
        k.run("apply", "-f", "-", input=_deployment("default"))
        k.run("apply", "-f", "-", input=_deployment("default").replace("nginx:1.25", "nginx:1.26")
              .replace("      - name: sidecar\n        image: busybox:1.36\n", ""))
        d = _get_json(k, "deploy", "web")
        assert [c["image"] for c in d["spec"]["template"]["spec"]["containers"]] == ["nginx:1.26"]
        k.run("apply", "--server-side", "-f", "-", input="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n")
        assert "scaled" in k.run("scale", "deploy", "web", "--replicas=1").stdout


def test_get_watch_exits_zero_when_the_connection_drops(fresh_kubectl: Kubectl, fresh_sim: SimCluster) -> None:
    with fresh_kubectl.background("get", "namespaces", "-w") as watch:
        eventually(lambda: fresh_sim.call(lambda: len(fresh_sim.store.all_watchers())) == 1)
        urllib.request.urlopen(urllib.request.Request(fresh_sim.url + "/_sim/watches/drop", method="POST"),
                               timeout=5)
    assert watch.returncode == 0 and "default" in watch.out
