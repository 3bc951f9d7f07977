"""SimCluster(record_access=True) records each distinct resource request as RBAC authorizes it, and the
kinds deploy/ applies (ServiceAccount, PersistentVolumeClaim, StatefulSet, Job, PodDisruptionBudget, NetworkPolicy and RBAC's
four) are served like the other built-ins."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from controllers.sim import SimCluster
from controllers.sim.api import Access
from tests.sim.conftest import FAST


def _call(sim: SimCluster, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(sim.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.fixture
def recording() -> SimCluster:
    cluster = SimCluster(port=0, record_access=True, **FAST).start()
    yield cluster
    cluster.stop()


def test_accesses_are_recorded_as_rbac_sees_them(recording: SimCluster) -> None:
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}}
    assert _call(recording, "GET", "/api/v1/configmaps")[0] == 200
    assert _call(recording, "POST", "/api/v1/namespaces/default/configmaps", cm)[0] == 201
    assert _call(recording, "POST", "/api/v1/namespaces/default/configmaps?dryRun=All",
                 {**cm, "metadata": {"name": "b"}})[0] == 201
    assert _call(recording, "PUT", "/api/v1/namespaces/default/configmaps/a", cm)[0] == 200
    assert _call(recording, "GET", "/apis/coordination.k8s.io/v1/namespaces/default/leases/missing")[0] == 404
    assert _call(recording, "GET", "/api/v1/namespaces/default/pods/nope/status")[0] == 404
    assert _call(recording, "GET", "/version")[0] == 200  # not a resource: RBAC's nonResourceURLs
    assert recording.accesses() == {
        Access("list", "", "configmaps", "", "", ""),
        Access("create", "", "configmaps", "", "default", ""),
        Access("update", "", "configmaps", "", "default", "a"),
        Access("get", "coordination.k8s.io", "leases", "", "default", "missing"),
        Access("get", "", "pods", "status", "default", "nope"),
    }


def test_a_cluster_not_asked_to_record_says_so() -> None:
    cluster = SimCluster(port=0, **FAST).start()
    try:
        with pytest.raises(RuntimeError, match="record_access=True"):
            cluster.accesses()
    finally:
        cluster.stop()


@pytest.mark.parametrize(("path", "obj"), [
    ("/api/v1/namespaces/default/serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount"}),
    ("/api/v1/namespaces/default/persistentvolumeclaims",
     {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "spec": {"accessModes": ["ReadWriteMany"]}}),
    ("/apis/apps/v1/namespaces/default/statefulsets", {"apiVersion": "apps/v1", "kind": "StatefulSet"}),
    ("/apis/batch/v1/namespaces/default/jobs", {"apiVersion": "batch/v1", "kind": "Job"}),
    ("/apis/policy/v1/namespaces/default/poddisruptionbudgets",
     {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "spec": {"minAvailable": 1}}),
    ("/apis/networking.k8s.io/v1/namespaces/default/networkpolicies",
     {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "spec": {"podSelector": {}}}),
    ("/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
     {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "rules": []}),
    ("/apis/rbac.authorization.k8s.io/v1/clusterroles",
     {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "rules": []}),
])
def test_deploy_kinds_are_served_stored_and_dry_run(recording: SimCluster, path: str, obj: dict) -> None:
    dry = {**obj, "metadata": {"name": "dry"}}
    assert _call(recording, "POST", path + "?dryRun=All", dry)[0] == 201
    assert _call(recording, "GET", f"{path}/dry")[0] == 404  # a dry run stores nothing
    code, created = _call(recording, "POST", path, {**obj, "metadata": {"name": "real"}})
    assert code == 201 and created["kind"] == obj["kind"] and created["metadata"]["uid"]
    assert _call(recording, "GET", f"{path}/real")[1]["metadata"]["name"] == "real"
