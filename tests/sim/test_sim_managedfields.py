"""What the store writes back, as a real kube-apiserver would: field ownership (managedFields as
structured-merge-diff computes it), Go's JSON encoding of built-in kinds, and what the registry and
admission add to a Pod. Every expectation here was read off a real v1.37.2 API server (the
differential test, tests/differential, holds the two together)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from controllers.clock import FakeClock
from controllers.sim import managedfields
from controllers.sim.resources import Registry, ResourceType
from controllers.sim.store import Store, copy_obj
from tests.sim.test_sim_protobuf import GO_DIR, _go, _go_env


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> Store:
    s = Store(Registry.with_builtins(), clock=clock)
    s.create(rt(s, "namespaces"), None, {"metadata": {"name": "default"}})
    return s


def rt(store: Store, plural: str, group: str = "", version: str = "v1") -> ResourceType:
    t = store.registry.lookup(group, version, plural)
    assert t is not None
    return t


def fields(obj: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return obj["metadata"]["managedFields"][index]["fieldsV1"]


def deployment(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}},
                     "spec": {"containers": [{"name": "web", "image": "nginx:1.27",
                                              "env": [{"name": "A", "value": "1"}]}]}}}}


def test_an_added_map_is_owned_itself_and_marked_with_a_dot(store: Store) -> None:
    created = store.create(rt(store, "configmaps"), "default",
                           {"metadata": {"name": "a", "labels": {"x": "y"}}, "data": {"k": "v"}})
    assert fields(created) == {"f:data": {".": {}, "f:k": {}}, "f:metadata": {"f:labels": {".": {}, "f:x": {}}}}


def test_go_encoding_drops_empty_maps_null_data_and_unknown_fields(store: Store) -> None:
    cms = rt(store, "configmaps")
    empty = store.create(cms, "default", {"metadata": {"name": "a", "labels": {}, "annotations": {}}, "data": {}})
    null = store.create(cms, "default", {"metadata": {"name": "b"}, "data": None, "extra": True})
    for obj in (empty, null):
        assert set(obj) == {"apiVersion", "kind", "metadata"}
        assert not {"labels", "annotations", "managedFields"} & set(obj["metadata"])


def test_an_event_gets_its_zero_fields_and_owns_involved_object_whole(store: Store) -> None:
    event = store.create(rt(store, "events"), "default", {
        "metadata": {"name": "e"}, "reason": "Test", "message": "m", "type": "Normal",
        "involvedObject": {"kind": "ConfigMap", "namespace": "default", "name": "a"}})
    assert {k: event[k] for k in ("eventTime", "firstTimestamp", "lastTimestamp", "reportingComponent",
                                  "reportingInstance", "source")} == {
        "eventTime": None, "firstTimestamp": None, "lastTimestamp": None, "reportingComponent": "",
        "reportingInstance": "", "source": {}}
    assert fields(event) == {"f:involvedObject": {}, "f:message": {}, "f:reason": {}, "f:type": {}}


def test_deployment_selector_is_atomic_and_template_has_no_creation_timestamp(store: Store) -> None:
    created = store.create(rt(store, "deployments", "apps"), "default", deployment("web"))
    assert created["spec"]["template"]["metadata"] == {"labels": {"app": "web"}}
    spec = fields(created)["f:spec"]
    assert spec["f:selector"] == {}  # a LabelSelector is owned whole
    assert "." not in spec and "." not in spec["f:strategy"]  # structs held by value are never added
    assert spec["f:strategy"]["f:rollingUpdate"]["."] == {}  # a pointer that was nil is
    web = spec["f:template"]["f:spec"]["f:containers"]['k:{"name":"web"}']
    assert web["f:env"] == {".": {}, 'k:{"name":"A"}': {".": {}, "f:name": {}, "f:value": {}}}


def test_service_ports_are_keyed_by_port_and_protocol_and_allocations_are_nobodys(store: Store) -> None:
    svc = store.create(rt(store, "services"), "default", {
        "metadata": {"name": "s"}, "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}})
    spec = fields(svc)["f:spec"]
    assert spec["f:ports"] == {".": {}, 'k:{"port":80,"protocol":"TCP"}': {
        ".": {}, "f:port": {}, "f:protocol": {}, "f:targetPort": {}}}
    assert spec["f:selector"] == {}
    assert svc["spec"]["clusterIP"] and not {"f:clusterIP", "f:clusterIPs", "f:ipFamilies"} & set(spec)


def test_pod_admission_adds_service_account_token_tolerations_and_priority(store: Store) -> None:
    pod = store.create(rt(store, "pods"), "default", {
        "metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    spec = pod["spec"]
    volume = spec["volumes"][0]["name"]
    assert volume.startswith("kube-api-access-") and len(volume) == len("kube-api-access-") + 5
    assert spec["containers"][0]["volumeMounts"] == [
        {"name": volume, "readOnly": True, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}]
    assert (spec["serviceAccountName"], spec["serviceAccount"]) == ("default", "default")
    assert [t["key"] for t in spec["tolerations"]] == ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"]
    assert (spec["priority"], spec["preemptionPolicy"], spec["enableServiceLinks"]) == (0, "PreemptLowerPriority", True)
    assert pod["metadata"]["generation"] == 1
    owned = fields(pod)["f:spec"]
    assert "f:enableServiceLinks" in owned and not {"f:volumes", "f:tolerations", "f:serviceAccountName"} & set(owned)


def test_a_no_op_keeps_the_entry_and_its_time_and_another_manager_takes_what_it_changes(
        store: Store, clock: FakeClock) -> None:
    cms = rt(store, "configmaps")
    created = store.create(cms, "default", {"metadata": {"name": "a"}, "data": {"k": "v", "j": "1"}}, manager="one")
    clock.step(5)
    same, _ = store.update(cms, "default", "a", copy_obj(created), manager="one")
    assert same["metadata"]["managedFields"] == created["metadata"]["managedFields"]
    changed = copy_obj(same)
    changed["data"]["k"] = "w"
    updated, _ = store.update(cms, "default", "a", changed, manager="two")
    one, two = updated["metadata"]["managedFields"]
    assert (one["manager"], two["manager"]) == ("one", "two")
    assert one["fieldsV1"] == {"f:data": {".": {}, "f:j": {}}} and two["fieldsV1"] == {"f:data": {"f:k": {}}}
    assert one["time"] < two["time"]


def test_a_scale_write_is_its_own_entry_without_a_time(store: Store) -> None:
    deploys = rt(store, "deployments", "apps")
    created = store.create(deploys, "default", deployment("web"))
    scaled = copy_obj(created)
    scaled["spec"]["replicas"] = 3
    stored, _ = store.update(deploys, "default", "web", scaled, manager="unknown", tracked_as="scale")
    scale, main = stored["metadata"]["managedFields"]
    assert scale == {"manager": "unknown", "operation": "Update", "apiVersion": "apps/v1", "fieldsType": "FieldsV1",
                     "fieldsV1": {"f:spec": {"f:replicas": {}}}, "subresource": "scale"}
    assert "f:replicas" not in main["fieldsV1"]["f:spec"]


def test_fields_v1_round_trips_members_with_children() -> None:
    paths = {("f:data",), ("f:data", "f:k"), ("f:spec", "f:ports", 'k:{"port":80}'),
             ("f:spec", "f:ports", 'k:{"port":80}', "f:port")}
    tree = managedfields.to_fields_v1(paths)
    assert tree["f:data"] == {".": {}, "f:k": {}}
    assert managedfields.from_fields_v1(tree) == paths


def test_generated_smd_schema_is_up_to_date() -> None:
    run = subprocess.run([_go(), "run", "./tools/smdgen"], cwd=GO_DIR, env=_go_env(), capture_output=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout == managedfields.SCHEMA_FILE.read_bytes(), (
        "controllers/sim/smd_schema.json is stale: cd go && go run ./tools/smdgen > ../controllers/sim/smd_schema.json")
