"""Property: arbitrary request bodies never produce a 5xx, and a rejected write changes nothing."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controllers.sim import SimCluster
from tests.sim.conftest import make_namespace
from tests.sim.test_sim_bad_input import http


@pytest.fixture(scope="module")
def quiet() -> Iterator[tuple[SimCluster, str]]:
    """A cluster where only the requests under test write: no controllers, kubelet paused."""
    cluster = SimCluster(port=0, control_plane=False).start()
    cluster.call(cluster.kubelet.pause)
    yield cluster, make_namespace(cluster)
    cluster.stop()

SCALARS = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.text(max_size=8)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(["metadata", "name", "spec", "status", "data", "labels", "containers", "replicas", "image",
                     "apiVersion", "kind", "$patch", "$retainKeys", "op", "path", "value", "finalizers", "x"]),
    inner, max_size=4), max_leaves=12)
METADATA = st.fixed_dictionaries({"name": st.sampled_from(["f", "g"])}, optional={
    key: JSON for key in ("labels", "annotations", "finalizers", "ownerReferences", "managedFields", "uid",
                          "resourceVersion", "namespace", "generateName", "deletionTimestamp")})
OBJECT = st.fixed_dictionaries({"metadata": METADATA},
                               optional={"spec": JSON, "data": JSON, "status": JSON, "kind": JSON,
                                         "apiVersion": JSON})
BODY = st.one_of(JSON, OBJECT, st.binary(max_size=40)).map(
    lambda v: v if isinstance(v, bytes) else json.dumps(v).encode())
TARGETS = st.sampled_from([
    ("", "configmaps"), ("", "pods"), ("apps", "deployments"), ("", "services"), ("coordination.k8s.io", "leases")])
VERBS = st.sampled_from([
    ("POST", "", "application/json"), ("POST", "", "application/yaml"), ("PUT", "/f", "application/json"),
    ("POST", "", "application/vnd.kubernetes.protobuf"), ("DELETE", "/f", "application/vnd.kubernetes.protobuf"),
    ("PATCH", "/f", "application/merge-patch+json"), ("PATCH", "/f", "application/json-patch+json"),
    ("PATCH", "/f", "application/strategic-merge-patch+json"), ("PATCH", "/f", "application/apply-patch+yaml"),
    ("PATCH", "/f/status", "application/merge-patch+json"), ("DELETE", "/f", "application/json"),
    ("PATCH", "/f/scale", "application/merge-patch+json"),
])


@settings(max_examples=int(os.environ.get("SIM_FUZZ_EXAMPLES", "250")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(target=TARGETS, verb=VERBS, body=BODY)
def test_random_requests_never_fail_with_a_server_error(quiet: tuple[SimCluster, str], target: tuple[str, str],
                                                        verb: tuple[str, str, str], body: bytes) -> None:
    sim, ns = quiet
    group, plural = target
    method, suffix, ctype = verb
    if suffix.endswith("/scale") and plural not in ("deployments",):
        suffix = "/f"
    base = f"/apis/{group}/v1" if group else "/api/v1"
    path = f"{base}/namespaces/{ns}/{plural}{suffix}"
    if ctype == "application/apply-patch+yaml":
        path += "?fieldManager=fuzz"
    before = sim.call(lambda: sim.store.rv)
    status, payload = http(sim, method, path, body, ctype)
    assert status < 500, payload
    if status >= 400:
        assert payload.get("kind") == "Status" and payload.get("code") == status
        assert sim.call(lambda: sim.store.rv) == before, "a rejected request must not change state"
    # Whatever was stored must still be readable, printable as a Table and watchable.
    listing = f"{base}/namespaces/{ns}/{plural}"
    for query, accept in (("", None), ("", "application/json;as=Table;v=v1;g=meta.k8s.io")):
        read_status, read_payload = _read(sim, listing + query, accept)
        assert read_status == 200, read_payload


@pytest.mark.parametrize("accept", [None, "application/json;as=Table;v=v1;g=meta.k8s.io"])
def test_everything_the_fuzzer_stored_can_be_watched(quiet: tuple[SimCluster, str], accept: str | None) -> None:
    sim, ns = quiet
    for group, plural in ([("", "configmaps"), ("", "pods"), ("apps", "deployments"), ("", "services"),
                           ("coordination.k8s.io", "leases")]):
        base = f"/apis/{group}/v1" if group else "/api/v1"
        status, _ = _read(sim, f"{base}/namespaces/{ns}/{plural}?watch=true&resourceVersion=0&timeoutSeconds=1",
                          accept)
        assert status == 200


def _read(sim: SimCluster, path: str, accept: str | None) -> tuple[int, object]:
    import urllib.request

    req = urllib.request.Request(sim.url + path, headers={"Accept": accept} if accept else {})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()[:200]
    except urllib.error.HTTPError as e:
        return e.code, e.read()[:500]
