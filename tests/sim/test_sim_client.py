"""The official ``kubernetes`` Python client (v37) against the simulator, unchanged."""

from __future__ import annotations

import urllib.request

import pytest
from kubernetes import client, watch

from controllers.sim import SimCluster
from tests.sim.conftest import make_namespace


def _post(sim: SimCluster, path: str) -> None:
    urllib.request.urlopen(urllib.request.Request(sim.url + path, method="POST"), timeout=5).read()


def _pod(name: str, env: list[tuple[str, str]] | None = None) -> client.V1Pod:
    return client.V1Pod(metadata=client.V1ObjectMeta(name=name, labels={"app": "x"}),
                        spec=client.V1PodSpec(containers=[client.V1Container(
                            name="c", image="busybox", env=[client.V1EnvVar(name=k, value=v) for k, v in env or []])]))


def test_create_list_and_read_configmaps(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    created = v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"x": "1"}})
    assert created.metadata.uid and created.metadata.resource_version
    listed = v1.list_namespaced_config_map(ns)
    assert [c.metadata.name for c in listed.items] == ["a"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    assert v1.read_namespaced_config_map("a", ns).data == {"x": "1"}


def test_create_twice_is_already_exists(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    with pytest.raises(client.ApiException) as err:
        v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    assert err.value.status == 409 and '"reason":"AlreadyExists"' in err.value.body


def test_patch_merge_json_and_strategic(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"x": "1"}})
    assert v1.patch_namespaced_config_map("a", ns, {"data": {"y": "2"}}).data == {"x": "1", "y": "2"}
    assert v1.patch_namespaced_config_map("a", ns, [{"op": "remove", "path": "/data/x"}]).data == {"y": "2"}
    v1.create_namespaced_pod(ns, _pod("p", env=[("A", "1"), ("B", "2")]))
    patched = v1.patch_namespaced_pod("p", ns, {"spec": {"containers": [
        {"name": "c", "image": "busybox:2", "env": [{"name": "B", "$patch": "delete"}]}]}})
    container = patched.spec.containers[0]
    assert container.image == "busybox:2" and [(e.name, e.value) for e in container.env] == [("A", "1")]


def test_stale_resource_version_is_conflict(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    cm = v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}, "data": {"x": "1"}})
    v1.patch_namespaced_config_map("a", ns, {"data": {"x": "2"}})
    cm.data = {"x": "3"}
    with pytest.raises(client.ApiException) as err:
        v1.replace_namespaced_config_map("a", ns, cm)
    assert err.value.status == 409
    assert "the object has been modified" in err.value.body


def test_delete_then_read_is_not_found(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    status = v1.delete_namespaced_config_map("a", ns)
    assert (status["status"] if isinstance(status, dict) else status.status) == "Success"
    with pytest.raises(client.ApiException) as err:
        v1.read_namespaced_config_map("a", ns)
    assert err.value.status == 404


def test_watch_from_list_resource_version_sees_only_later_changes(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "before"}})
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "after"}})
    v1.patch_namespaced_config_map("after", ns, {"data": {"k": "v"}})
    v1.delete_namespaced_config_map("after", ns)
    seen = []
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=1):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 3:
            w.stop()
    assert seen == [("ADDED", "after"), ("MODIFIED", "after"), ("DELETED", "after")]


def test_watch_without_resource_version_starts_with_synthetic_added(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for name in ("a", "b"):
        v1.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    w = watch.Watch()
    seen = []
    for ev in w.stream(v1.list_namespaced_config_map, ns, timeout_seconds=1):
        seen.append((ev["type"], ev["object"].metadata.name))
        if len(seen) == 2:
            w.stop()
    assert seen == [("ADDED", "a"), ("ADDED", "b")]


def test_bookmarks_carry_current_resource_version(api: client.ApiClient, sim: SimCluster, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    w = watch.Watch()
    for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=rv, allow_watch_bookmarks=True,
                       timeout_seconds=2):
        assert ev["type"] == "BOOKMARK"
        obj = ev["raw_object"]
        assert obj["kind"] == "ConfigMap" and int(obj["metadata"]["resourceVersion"]) >= int(rv)
        w.stop()


def test_send_initial_events_ends_with_annotated_bookmark(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for name in ("a", "b"):
        v1.create_namespaced_config_map(ns, {"metadata": {"name": name}})
    w = watch.Watch()
    seen = []
    for ev in w.stream(v1.list_namespaced_config_map, ns, send_initial_events=True,
                       resource_version_match="NotOlderThan", allow_watch_bookmarks=True, timeout_seconds=2):
        raw = ev["raw_object"]
        seen.append((ev["type"], raw["metadata"].get("name"),
                     (raw["metadata"].get("annotations") or {}).get("k8s.io/initial-events-end")))
        if ev["type"] == "BOOKMARK":
            w.stop()
    assert seen == [("ADDED", "a", None), ("ADDED", "b", None), ("BOOKMARK", None, "true")]


def test_watch_across_forced_410_raises_expired(fresh_api: client.ApiClient, fresh_sim: SimCluster) -> None:
    ns = make_namespace(fresh_sim)
    v1 = client.CoreV1Api(fresh_api)
    rv = v1.list_namespaced_config_map(ns).metadata.resource_version
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
    _post(fresh_sim, "/_sim/history/compact")
    with pytest.raises(client.ApiException) as err:
        for _ in watch.Watch().stream(v1.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=1):
            pass
    assert err.value.status == 410
    # The informer's answer to 410: relist, then watch from the new list RV.
    relist = v1.list_namespaced_config_map(ns)
    assert [c.metadata.name for c in relist.items] == ["a"]
    w = watch.Watch()
    v1.create_namespaced_config_map(ns, {"metadata": {"name": "b"}})
    for ev in w.stream(v1.list_namespaced_config_map, ns, resource_version=relist.metadata.resource_version,
                       timeout_seconds=1):
        assert (ev["type"], ev["object"].metadata.name) == ("ADDED", "b")
        w.stop()


def test_list_pagination_keeps_resource_version_and_covers_everything(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for i in range(7):
        v1.create_namespaced_config_map(ns, {"metadata": {"name": f"cm-{i}"}})
    names, token, rvs = [], None, set()
    while True:
        page = v1.list_namespaced_config_map(ns, limit=3, _continue=token)
        names += [c.metadata.name for c in page.items]
        rvs.add(page.metadata.resource_version)
        token = page.metadata._continue
        if not token:
            break
        assert page.metadata.remaining_item_count == 7 - len(names)
    assert names == [f"cm-{i}" for i in range(7)] and len(rvs) == 1


def test_label_and_field_selectors(api: client.ApiClient, ns: str) -> None:
    v1 = client.CoreV1Api(api)
    for name, tier in (("a", "web"), ("b", "db"), ("c", "web")):
        v1.create_namespaced_config_map(ns, {"metadata": {"name": name, "labels": {"tier": tier}}})
    assert [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="tier=web").items] == ["a", "c"]
    assert [c.metadata.name for c in v1.list_namespaced_config_map(ns, label_selector="tier notin (web)").items] == ["b"]
    assert [c.metadata.name for c in v1.list_namespaced_config_map(ns, field_selector="metadata.name=b").items] == ["b"]
    with pytest.raises(client.ApiException) as err:
        v1.list_namespaced_config_map(ns, field_selector="data.x=1")
    # A kind without field label conversions of its own (ConfigMap) names the two it takes, as the
    # real API server does; kinds with their own (Pod, Secret...) say "field label not supported".
    assert err.value.status == 400 and '\\"data.x\\" is not a known field selector' in err.value.body
    with pytest.raises(client.ApiException) as err:
        v1.list_namespaced_secret(ns, field_selector="data.x=1")
    assert err.value.status == 400 and "field label not supported: data.x" in err.value.body


def test_deployment_status_and_scale_subresources(api: client.ApiClient, ns: str) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "d"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
    scale = apps.patch_namespaced_deployment_scale("d", ns, {"spec": {"replicas": 3}})
    assert scale.spec.replicas == 3 and scale.status.selector == "app=d"
    before = apps.read_namespaced_deployment("d", ns)
    assert before.metadata.generation == 2
    apps.patch_namespaced_deployment_status("d", ns, {"status": {"observedGeneration": 99}, "spec": {"replicas": 9}})
    after = apps.read_namespaced_deployment("d", ns)
    assert after.spec.replicas == 3 and after.metadata.generation == 2


def test_dynamic_client_discovers_builtin_and_custom_kinds(api: client.ApiClient, ns: str) -> None:
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    assert deployments.namespaced and "scale" in deployments.subresources
    configmaps = dyn.resources.get(api_version="v1", kind="ConfigMap")
    configmaps.create(body={"metadata": {"name": "dyn"}, "data": {"a": "1"}}, namespace=ns)
    assert [i.metadata.name for i in configmaps.get(namespace=ns).items] == ["dyn"]


def test_lease_with_python_datetimes_round_trips(api: client.ApiClient, ns: str) -> None:
    import datetime

    leases = client.CoordinationV1Api(api)
    now = datetime.datetime.now(datetime.UTC)
    leases.create_namespaced_lease(ns, client.V1Lease(
        metadata=client.V1ObjectMeta(name="lock"),
        spec=client.V1LeaseSpec(holder_identity="me", lease_duration_seconds=15, acquire_time=now, renew_time=now)))
    read = leases.read_namespaced_lease("lock", ns)
    assert read.spec.holder_identity == "me"
    assert abs((read.spec.renew_time - now).total_seconds()) < 1
