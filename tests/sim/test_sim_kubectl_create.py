"""``kubectl create <kind>`` and ``kubectl expose``: kubectl >= 1.32 sends protobuf bodies, and the
simulator must store exactly what a real API server stores for them — the same object older kubectl
minors produce by sending the same Go struct as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controllers.sim import SimCluster, protobuf
from tests.sim.conftest import FAST, Kubectl, make_namespace

pytestmark = pytest.mark.kubectl

# Fields the server fills per cluster (identity, time, allocations): equal in kind, not in value.
_VOLATILE_META = ("uid", "resourceVersion", "creationTimestamp")


def _stored(kubectl: Kubectl, *args: str) -> dict[str, Any]:
    obj = json.loads(kubectl.run("get", *args, "-o", "json", "--show-managed-fields").stdout)
    meta = obj["metadata"]
    for key in _VOLATILE_META:
        assert meta.pop(key), f"server-owned metadata.{key} is missing"
    # Entries are ordered by time to the second (as a real API server orders them), which two runs
    # need not share: compared by manager instead, times left out.
    meta["managedFields"] = sorted(((m["manager"], m["operation"], m["fieldsV1"])
                                    for m in meta.get("managedFields", [])), key=lambda m: m[:2])
    return obj


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Kinds the simulator decoded from protobuf during the test (proves kubectl really sent protobuf)."""
    kinds: list[str] = []
    real = protobuf.decode

    def spy(body: bytes) -> dict[str, Any]:
        obj = real(body)
        kinds.append(obj["kind"])
        return obj

    monkeypatch.setattr(protobuf, "decode", spy)
    return kinds


def test_create_namespace_configmap_and_secret_store_exact_objects(kubectl: Kubectl, ns: str,
                                                                    decoded: list[str]) -> None:
    name = f"{ns}-x"
    kubectl.run("create", "namespace", name)
    kubectl.run("create", "configmap", "cfg", "-n", ns, "--from-literal=a=b", "--from-literal=c=")
    kubectl.run("create", "secret", "generic", "sec", "-n", ns, "--from-literal=k=v")
    assert decoded == ["Namespace", "ConfigMap", "Secret"]
    created = [("kubectl-create", "Update")]
    got = _stored(kubectl, "namespace", name)
    assert [m[:2] for m in got["metadata"].pop("managedFields")] == created
    assert got == {"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}},
                   "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}
    got = _stored(kubectl, "configmap", "cfg", "-n", ns)
    assert [m[:2] for m in got["metadata"].pop("managedFields")] == created
    assert got == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": ns},
                   "data": {"a": "b", "c": ""}}
    got = _stored(kubectl, "secret", "sec", "-n", ns)
    assert [m[:2] for m in got["metadata"].pop("managedFields")] == created
    assert got == {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec", "namespace": ns},
                   "data": {"k": "dg=="}, "type": "Opaque"}


def test_create_deployment_stores_the_defaulted_object_and_rolls_out(kubectl: Kubectl, ns: str,
                                                                     decoded: list[str]) -> None:
    kubectl.run("create", "deployment", "web", "-n", ns, "--image=nginx:1.27", "--replicas=3", "--port=80")
    assert decoded == ["Deployment"]
    kubectl.run("rollout", "status", "deployment/web", "-n", ns, "--timeout=15s")
    got = _stored(kubectl, "deployment", "web", "-n", ns)
    assert got["metadata"]["labels"] == {"app": "web"} and got["metadata"]["generation"] == 1
    assert got["spec"] == {
        "progressDeadlineSeconds": 600, "replicas": 3, "revisionHistoryLimit": 10,
        "selector": {"matchLabels": {"app": "web"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "imagePullPolicy": "IfNotPresent",
                                     "ports": [{"containerPort": 80, "protocol": "TCP"}], "resources": {},
                                     "terminationMessagePath": "/dev/termination-log",
                                     "terminationMessagePolicy": "File"}],
                     "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                     "securityContext": {}, "terminationGracePeriodSeconds": 30}}}
    assert got["status"]["readyReplicas"] == 3


def test_create_service_variants_store_what_the_api_server_allocates(kubectl: Kubectl, ns: str,
                                                                     decoded: list[str]) -> None:
    kubectl.run("create", "service", "clusterip", "api", "-n", ns, "--tcp=80:8080")
    kubectl.run("create", "service", "nodeport", "np", "-n", ns, "--tcp=80:8080")
    kubectl.run("create", "service", "externalname", "ext", "-n", ns, "--external-name=example.com")
    kubectl.run("create", "service", "loadbalancer", "lb", "-n", ns, "--tcp=443")
    assert decoded == ["Service"] * 4
    got = _stored(kubectl, "service", "api", "-n", ns)
    got["metadata"].pop("managedFields")
    ip = got["spec"]["clusterIP"]
    assert got == {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": "api", "namespace": ns, "labels": {"app": "api"}},
                   "spec": {"clusterIP": ip, "clusterIPs": [ip], "internalTrafficPolicy": "Cluster",
                            "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack",
                            "ports": [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}],
                            "selector": {"app": "api"}, "sessionAffinity": "None", "type": "ClusterIP"},
                   "status": {"loadBalancer": {}}}
    node_port = _stored(kubectl, "service", "np", "-n", ns)["spec"]
    assert node_port["externalTrafficPolicy"] == "Cluster" and 30000 <= node_port["ports"][0]["nodePort"] <= 32767
    kubectl.run("label", "service", "np", "-n", ns, "tier=edge")
    assert _stored(kubectl, "service", "np", "-n", ns)["spec"]["ports"] == node_port["ports"], \
        "an update keeps the allocated node port"
    assert _stored(kubectl, "service", "lb", "-n", ns)["spec"]["allocateLoadBalancerNodePorts"] is True
    ext = _stored(kubectl, "service", "ext", "-n", ns)["spec"]
    assert ext == {"externalName": "example.com", "selector": {"app": "ext"}, "sessionAffinity": "None",
                   "type": "ExternalName"}
    table = kubectl.run("get", "services", "-n", ns).stdout.splitlines()
    rows = {line.split()[0]: line.split()[1:5] for line in table[1:]}
    assert rows["ext"] == ["ExternalName", "<none>", "example.com", "<none>"]
    assert rows["np"][3] == f"80:{node_port['ports'][0]['nodePort']}/TCP"
    assert rows["lb"][2] == "<pending>"


# Every create variant a presenter types. kubectl 1.32 and 1.33 send them as protobuf, 1.31 as JSON
# (the same Go structs through encoding/json): all three clusters must store the same objects.
VARIANTS = [
    (("create", "configmap", "cm", "--from-literal=a=b", "--from-file=bin=/bin/true"), ("configmap", "cm")),
    (("create", "secret", "generic", "gen", "--from-literal=k=v", "--type=example.com/t"), ("secret", "gen")),
    (("create", "secret", "docker-registry", "reg", "--docker-server=r.io", "--docker-username=u",
      "--docker-password=p"), ("secret", "reg")),
    (("create", "deployment", "cmd", "--image=busybox", "--replicas=2", "--", "sleep", "3600"),
     ("deployment", "cmd")),
    (("create", "deployment", "two", "--image=nginx", "--image=redis:7"), ("deployment", "two")),
    (("create", "service", "loadbalancer", "lb", "--tcp=443:8443", "--tcp=80"), ("service", "lb")),
    (("expose", "deployment", "two", "--port=8080", "--target-port=80", "--name=exposed"), ("service", "exposed")),
]
PROTOBUF_KINDS = ["ConfigMap", "Secret", "Secret", "Deployment", "Deployment", "Service"]  # expose sends JSON


@pytest.fixture(scope="module")
def other_minors() -> Iterator[dict[str, SimCluster]]:
    clusters = {v: SimCluster(port=0, git_version=v, **FAST).start() for v in ("v1.31.0", "v1.33.0")}
    yield clusters
    for cluster in clusters.values():
        cluster.stop()


def _comparable(kubectl: Kubectl, args: tuple[str, ...]) -> dict[str, Any]:
    obj = _stored(kubectl, *args)
    obj.pop("status", None)
    obj["metadata"].pop("namespace")
    obj["metadata"].get("annotations", {}).pop("deployment.kubernetes.io/revision", None)
    spec = obj.get("spec", {})
    for key in ("clusterIP", "clusterIPs"):
        spec.pop(key, None)
    for port in spec.get("ports", []) if obj["kind"] == "Service" else []:
        port.pop("nodePort", None)
    return obj


def _create_all(kubectl: Kubectl, ns: str) -> list[dict[str, Any]]:
    for command, _ in VARIANTS:
        kubectl.run("-n", ns, *command)  # before the command: a "--" in it ends the flags
    return [_comparable(kubectl, (*target, "-n", ns)) for _, target in VARIANTS]


def test_protobuf_creates_store_what_json_creates_store(kubectl: Kubectl, ns: str,
                                                        other_minors: dict[str, SimCluster], tmp_path: Path,
                                                        decoded: list[str]) -> None:
    stored = {"v1.32.0": _create_all(kubectl, ns)}
    for version, cluster in other_minors.items():
        stored[version] = _create_all(Kubectl(cluster, tmp_path / version), make_namespace(cluster))
    assert decoded == PROTOBUF_KINDS * 2, "kubectl 1.32 and 1.33 send these as protobuf"
    for i, (_, target) in enumerate(VARIANTS):
        assert stored["v1.32.0"][i] == stored["v1.31.0"][i] == stored["v1.33.0"][i], target


def test_create_for_a_kind_the_simulator_does_not_serve_fails_as_kubectl_does(kubectl: Kubectl, ns: str,
                                                                              tmp_path: Path) -> None:
    # CronJob: batch/v1 is served (Jobs), its CronJobs are not.
    typed = kubectl.run("create", "cronjob", "j", "--image=busybox", "--schedule=* * * * *", "-n", ns, check=False)
    assert typed.returncode == 1
    assert typed.stderr.strip() == "error: failed to create cronjob: the server could not find the requested resource"
    manifest = tmp_path / "cronjob.yaml"
    manifest.write_text("apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: j}\nspec: {}\n")
    mapped = kubectl.run("create", "-f", str(manifest), "-n", ns, check=False)
    assert mapped.returncode == 1 and 'no matches for kind "CronJob" in version "batch/v1"' in mapped.stderr
    listed = kubectl.run("get", "cronjobs", "-n", ns, check=False)
    assert listed.returncode == 1 and 'the server doesn\'t have a resource type "cronjobs"' in listed.stderr
