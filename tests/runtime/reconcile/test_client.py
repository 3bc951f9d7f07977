"""The reconciler client (controller-runtime's client.Client) against the simulator over real HTTP:
cache reads and live reads, every write verb and patch type, optimistic-concurrency 409s surfacing
as Reconcile retries, server-side apply conflicts, the status subresource, deletes with
preconditions and propagation, finalizer and owner-reference helpers, and the event recorder."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from controllers.informers import ApiError, Backoff
from controllers.informers.http_client import KubernetesClient
from controllers.reconcile import (
    AlreadyOwnedError,
    EventType,
    Manager,
    PatchType,
    Preconditions,
    PropagationPolicy,
    Request,
    Result,
    add_finalizer,
    contains_finalizer,
    not_found_ignored,
    remove_finalizer,
    set_controller_reference,
    set_owner_reference,
)
from controllers.workqueue import ItemExponentialFailureRateLimiter

sim_server = pytest.importorskip("controllers.sim.server", reason="the simulator is not available")


@pytest.fixture
def cluster() -> Iterator[Any]:
    """The simulator with its control plane (garbage collection, the deployment controller...)."""
    cluster = sim_server.SimCluster(port=0, bookmark_interval=0.2, control_plane=True,
                                    schedule_delay=0.01, start_delay=0.01).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def api(cluster) -> KubernetesClient:
    return KubernetesClient.for_host(cluster.url)


def _manager(api: KubernetesClient, observer: Any) -> Iterator[Manager]:
    mgr = Manager(api, observer=observer, freeze_gc_after_sync=False)
    yield mgr
    mgr.stop()


@pytest.fixture
def manager(api, observer) -> Iterator[Manager]:
    yield from _manager(api, observer)


@pytest.fixture
def apiserver_manager(sim, observer) -> Iterator[Manager]:
    """A Manager on the API server alone (tests/runtime/conftest.py's ``sim``): tests that write a
    Deployment's spec and status and read them back, which the deployment controller would race."""
    yield from _manager(KubernetesClient.for_host(sim.url), observer)


def cm(name: str, ns: str = "default", **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": "default"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def test_reads_come_from_the_cache_and_are_copies(manager, api, eventually) -> None:
    client = manager.get_client(field_owner="test")
    client.create(cm("a", x="1"))
    got = client.get("v1", "ConfigMap", "a", "default")  # starts the informer, waits for its sync
    assert got["data"] == {"x": "1"}
    got["data"]["x"] = "mutated"
    assert client.get("v1", "ConfigMap", "a", "default")["data"] == {"x": "1"}
    with pytest.raises(ApiError) as missing:
        client.get("v1", "ConfigMap", "nope", "default")
    assert missing.value.is_not_found
    # A write the cache has not seen yet is visible to a live read at once.
    api.send_json("PUT", "/api/v1/namespaces/default/configmaps/a", {**api.get_json(
        "/api/v1/namespaces/default/configmaps/a"), "data": {"x": "2"}})
    assert client.get("v1", "ConfigMap", "a", "default", live=True)["data"] == {"x": "2"}
    eventually(lambda: client.get("v1", "ConfigMap", "a", "default")["data"] == {"x": "2"})
    partial = client.get("v1", "ConfigMap", "a", "default", metadata_only=True)
    assert partial["kind"] == "PartialObjectMetadata" and "data" not in partial


def test_list_filters_by_namespace_and_labels_in_the_cache_and_live(manager, api) -> None:
    client = manager.get_client()
    api.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}})
    for name, ns, labels in (("a", "default", {"app": "web", "tier": "fe"}), ("b", "default", {"app": "db"}),
                             ("c", "other", {"app": "web"})):
        obj = cm(name, ns)
        obj["metadata"]["labels"] = labels
        client.create(obj)
    for live in (False, True):
        names = lambda items: sorted(o["metadata"]["name"] for o in items)  # noqa: E731
        assert names(client.list("v1", "ConfigMap", live=live, labels={"app": "web"})) == ["a", "c"], live
        assert names(client.list("v1", "ConfigMap", "default", live=live, labels={"app": "web"})) == ["a"], live
        assert names(client.list("v1", "ConfigMap", live=live, label_selector="app in (web,db),!tier")) == ["b", "c"]
        assert all(o["kind"] == "ConfigMap" for o in client.list("v1", "ConfigMap", live=live))
    with pytest.raises(ValueError, match="unable to parse requirement"):
        client.list("v1", "ConfigMap", label_selector="app in ()")


def test_every_patch_type_and_update(apiserver_manager) -> None:
    client = apiserver_manager.get_client(field_owner="patcher")
    created = client.create(deployment("web"))
    merged = client.patch(created, {"metadata": {"labels": {"a": "1"}}})
    assert merged["metadata"]["labels"] == {"a": "1"}
    jsoned = client.patch(created, [{"op": "add", "path": "/metadata/labels/b", "value": "2"}], PatchType.JSON)
    assert jsoned["metadata"]["labels"] == {"a": "1", "b": "2"}
    strategic = client.patch(created, {"spec": {"template": {"spec": {"containers": [
        {"name": "sidecar", "image": "busybox"}]}}}}, PatchType.STRATEGIC)
    # The container the patch adds comes first, as a real API server orders a merged list.
    assert [c["name"] for c in strategic["spec"]["template"]["spec"]["containers"]] == ["sidecar", "c"]
    strategic["spec"]["replicas"] = 3
    updated = client.update(strategic)
    assert updated["spec"]["replicas"] == 3
    assert any(m["manager"] == "patcher" for m in updated["metadata"]["managedFields"])
    with pytest.raises(ValueError, match="list of operations"):
        client.patch(created, {"op": "add"}, PatchType.JSON)


def test_a_stale_update_is_a_409_conflict(manager) -> None:
    client = manager.get_client()
    first = client.create(cm("a", x="1"))
    client.update({**first, "data": {"x": "2"}})
    with pytest.raises(ApiError) as conflict:
        client.update({**first, "data": {"x": "3"}})  # first's resourceVersion is stale now
    assert conflict.value.is_conflict and not conflict.value.is_already_exists
    with pytest.raises(ApiError) as exists:
        client.create(cm("a"))
    assert exists.value.is_already_exists


def test_optimistic_concurrency_conflicts_surface_as_reconcile_retries(manager, api, observer, eventually) -> None:
    client = manager.get_client(field_owner="counter")
    client.create(cm("counted", n="0"))
    interfered = threading.Event()
    attempts: list[str] = []

    def reconcile(request: Request) -> Result:
        obj = client.get("v1", "ConfigMap", request.name, request.namespace)  # from the cache
        if obj["data"].get("done"):
            return Result()
        if not interfered.is_set():
            # Someone else writes between our read and our write: our copy is stale now.
            interfered.set()
            api.send_json("PUT", f"/api/v1/namespaces/default/configmaps/{request.name}",
                          {**api.get_json(f"/api/v1/namespaces/default/configmaps/{request.name}"),
                           "data": {"n": "41"}})
        attempts.append(obj["data"]["n"])
        obj["data"] = {"n": str(int(obj["data"]["n"]) + 1), "done": "yes"}
        client.update(obj)  # a 409 raises: the key is requeued with backoff
        return Result()

    controller = manager.new_controller("counter", reconcile,
                                        rate_limiter=ItemExponentialFailureRateLimiter(0.01, 0.1))
    controller.watch(manager.informer_for("v1", "ConfigMap"))
    for informer in manager.factory.informers():
        informer.reflector.backoff = Backoff(initial=0.05, cap=0.2, jitter=0.0)
    manager.start()
    eventually(lambda: api.get_json("/api/v1/namespaces/default/configmaps/counted")["data"].get("done"))
    assert api.get_json("/api/v1/namespaces/default/configmaps/counted")["data"]["n"] == "42"
    assert attempts[0] == "0" and attempts[-1] == "41"  # the retry read the other writer's value

    def put_codes() -> list[int]:
        return [kw["code"] for kw in observer.of("on_request") if kw["method"] == "PUT" and "counted" in kw["path"]]

    # A 409, then a retry that succeeded. (Not "the last PUT is a 200": the success's own MODIFIED
    # event reconciles once more, and a cache still behind the server then gets another 409; and a
    # request is reported once its response is read, a moment after the server has the object.)
    eventually(lambda: 409 in put_codes() and 200 in put_codes()[put_codes().index(409):])
    results = [kw.get("error") for kw in observer.of("on_reconcile_end") if kw.get("key") == "default/counted"]
    assert any(e and "409" in e for e in results)


def test_server_side_apply_conflicts_need_force(manager) -> None:
    client = manager.get_client()
    client.apply(cm("a", owner="alice"), field_manager="alice")
    with pytest.raises(ApiError) as conflict:
        client.apply(cm("a", owner="bob"), field_manager="bob")
    assert conflict.value.is_conflict and "conflict" in conflict.value.message.lower()
    forced = client.apply(cm("a", owner="bob"), field_manager="bob", force=True)
    assert forced["data"] == {"owner": "bob"}
    with pytest.raises(ValueError, match="field manager"):
        client.apply(cm("a"))


def test_status_writes_never_touch_spec_and_spec_writes_never_touch_status(apiserver_manager) -> None:
    client = apiserver_manager.get_client(field_owner="status-test")
    created = client.create(deployment("web", replicas=1))
    changed = {**created, "spec": {**created["spec"], "replicas": 5}, "status": {"observedGeneration": 7}}
    after_status = client.status().update(changed)
    assert after_status["spec"]["replicas"] == 1 and after_status["status"]["observedGeneration"] == 7
    patched = client.status().patch(after_status, {"status": {"observedGeneration": 8}, "spec": {"replicas": 9}})
    assert patched["spec"]["replicas"] == 1 and patched["status"]["observedGeneration"] == 8
    after_update = client.update({**patched, "spec": {**patched["spec"], "replicas": 2}, "status": {}})
    assert after_update["spec"]["replicas"] == 2 and after_update["status"]["observedGeneration"] == 8


def test_delete_with_preconditions_and_propagation(manager, api, eventually) -> None:
    client = manager.get_client()
    owner = client.create(cm("owner"))
    dependent = cm("dependent")
    set_controller_reference(owner, dependent)
    dependent = client.create(dependent)
    with pytest.raises(ApiError) as wrong:
        client.delete(owner, preconditions=Preconditions(uid="not-its-uid"))
    assert wrong.value.is_conflict
    client.delete(owner, preconditions=Preconditions(uid=owner["metadata"]["uid"]),
                  propagation_policy=PropagationPolicy.ORPHAN)
    eventually(lambda: not api.get_json("/api/v1/namespaces/default/configmaps/dependent")["metadata"]
               .get("ownerReferences"))
    with not_found_ignored():
        client.delete(owner)  # gone already: not an error here
    with pytest.raises(ApiError) as gone:
        client.delete(owner)
    assert gone.value.is_not_found


def test_finalizer_and_owner_reference_helpers() -> None:
    obj = cm("a")
    assert add_finalizer(obj, "example.com/cleanup") and not add_finalizer(obj, "example.com/cleanup")
    assert contains_finalizer(obj, "example.com/cleanup")
    assert remove_finalizer(obj, "example.com/cleanup") and not remove_finalizer(obj, "example.com/cleanup")
    owner = {**cm("owner"), "metadata": {"name": "owner", "namespace": "default", "uid": "u1"}}
    other = {**cm("other"), "metadata": {"name": "other", "namespace": "default", "uid": "u2"}}
    set_owner_reference(other, obj)
    set_controller_reference(owner, obj)
    set_controller_reference(owner, obj)  # idempotent
    refs = obj["metadata"]["ownerReferences"]
    assert [(r["uid"], r.get("controller", False)) for r in refs] == [("u2", False), ("u1", True)]
    with pytest.raises(AlreadyOwnedError):
        set_controller_reference(other, obj)
    with pytest.raises(ValueError, match="cross-namespace"):
        set_owner_reference({**owner, "metadata": {**owner["metadata"], "namespace": "x"}}, obj)
    with pytest.raises(ValueError, match="uid"):
        set_owner_reference(cm("no-uid"), obj)


def test_the_event_recorder_posts_and_deduplicates_events(manager, api, observer) -> None:
    client = manager.get_client()
    target = client.create(cm("target"))
    recorder = manager.get_event_recorder_for("podset-controller")
    first = recorder.event(target, EventType.WARNING, "Failed", "could not reach the backend")
    assert first is not None and first["count"] == 1
    again = recorder.eventf(target, EventType.WARNING, "Failed", "could not reach the %s", "backend")
    assert again is not None and again["metadata"]["name"] == first["metadata"]["name"] and again["count"] == 2
    recorder.event(target, EventType.NORMAL, "Synced", "ok")
    events = api.get_json("/api/v1/namespaces/default/events")["items"]
    mine = {(e["reason"], e["count"]) for e in events if e["involvedObject"]["name"] == "target"}
    assert mine == {("Failed", 2), ("Synced", 1)}
    event = next(e for e in events if e["reason"] == "Failed")
    assert event["involvedObject"]["uid"] == target["metadata"]["uid"]
    assert event["source"]["component"] == "podset-controller" and event["type"] == "Warning"
    posts = [kw["code"] for kw in observer.of("on_request") if "/events" in kw["path"] and kw["method"] != "GET"]
    assert posts == [201, 200, 201]
    # A failing post is counted and logged, never raised.
    assert recorder.event({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "gone"}},
                          EventType.NORMAL, "R", "m") is None
    assert recorder.errors == 1 and "404" in (recorder.last_error or "")
