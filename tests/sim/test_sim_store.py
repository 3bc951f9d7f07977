"""Store semantics without HTTP: RVs, history and 410, generation, status split, finalizers, GC."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.clock import FakeClock
from controllers.sim.errors import StatusError
from controllers.sim.gc import GarbageCollector
from controllers.sim.resources import Registry, ResourceType
from controllers.sim.selectors import parse_label_selector
from controllers.sim.store import Store, copy_obj


@pytest.fixture
def store() -> Store:
    s = Store(Registry.with_builtins(), clock=FakeClock(), history_limit=5)
    GarbageCollector(s)
    s.create(rt(s, "namespaces"), None, {"metadata": {"name": "default"}})
    return s


def rt(store: Store, plural: str, group: str = "") -> ResourceType:
    t = store.registry.lookup(group, "apps/v1".split("/")[1] if group else "v1", plural)
    assert t is not None
    return t


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": dict(data)}


def drain(store: Store, w: Any) -> list[tuple[str, str]]:
    out = []
    while w.pending:
        type_, _, obj = w.pending.popleft()
        out.append((type_, obj["metadata"]["name"]))
    return out


def test_every_write_takes_the_next_global_resource_version(store: Store) -> None:
    a = store.create(rt(store, "configmaps"), "default", cm("a"))
    b = store.create(rt(store, "secrets"), "default", {"metadata": {"name": "b"}})
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1


def test_noop_update_keeps_resource_version_and_emits_nothing(store: Store) -> None:
    t = rt(store, "configmaps")
    a = store.create(t, "default", cm("a", x="1"))
    history = len(store.history)
    same, _ = store.update(t, "default", "a", copy_obj(a))
    assert same["metadata"]["resourceVersion"] == a["metadata"]["resourceVersion"]
    assert len(store.history) == history


def test_watch_from_rv_older_than_history_window_is_410(store: Store) -> None:
    t = rt(store, "configmaps")
    first = store.create(t, "default", cm("a"))
    for i in range(6):
        store.create(t, "default", cm(f"x{i}"))
    with pytest.raises(StatusError) as err:
        store.watch(t, "default", resource_version=first["metadata"]["resourceVersion"],
                    label_match=lambda o: True, field_match=lambda o: True, filtered=False)
    assert err.value.code == 410
    recent = store.history[0].rv
    w = store.watch(t, "default", resource_version=str(recent), label_match=lambda o: True,
                    field_match=lambda o: True, filtered=False)
    assert len(w.pending) == len(store.history) - 1


def test_label_selector_transitions_become_added_and_deleted(store: Store) -> None:
    t = rt(store, "configmaps")
    a = store.create(t, "default", {"metadata": {"name": "a", "labels": {"tier": "web"}}})
    w = store.watch(t, "default", resource_version=a["metadata"]["resourceVersion"],
                    label_match=parse_label_selector("tier=db"), field_match=lambda o: True, filtered=True)
    moved = copy_obj(a)
    moved["metadata"]["labels"]["tier"] = "db"
    moved, _ = store.update(t, "default", "a", moved)
    back = copy_obj(moved)
    back["metadata"]["labels"]["tier"] = "web"
    store.update(t, "default", "a", back)
    assert drain(store, w) == [("ADDED", "a"), ("DELETED", "a")]


def test_generation_counts_spec_changes_only(store: Store) -> None:
    t = rt(store, "deployments", "apps")
    d = store.create(t, "default", {"metadata": {"name": "d"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"a": "b"}},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}})
    assert d["metadata"]["generation"] == 1
    labelled = copy_obj(d)
    labelled["metadata"]["labels"] = {"x": "y"}
    labelled, _ = store.update(t, "default", "d", labelled)
    assert labelled["metadata"]["generation"] == 1
    with_status = copy_obj(labelled)
    with_status["status"] = {"replicas": 5}
    with_status, _ = store.update(t, "default", "d", with_status, subresource="status")
    assert with_status["metadata"]["generation"] == 1 and with_status["status"] == {"replicas": 5}
    scaled = copy_obj(with_status)
    scaled["spec"]["replicas"] = 3
    scaled["status"] = {"replicas": 0}
    scaled, _ = store.update(t, "default", "d", scaled)
    assert scaled["metadata"]["generation"] == 2
    assert scaled["status"] == {"replicas": 5}, "writes to the main resource ignore .status"


def test_finalizers_hold_deletion_until_emptied(store: Store) -> None:
    t = rt(store, "configmaps")
    store.create(t, "default", {"metadata": {"name": "a", "finalizers": ["x/y"]}})
    obj, removed = store.delete(t, "default", "a")
    assert not removed and obj["metadata"]["deletionTimestamp"]
    cleared = copy_obj(obj)
    cleared["metadata"]["finalizers"] = []
    store.update(t, "default", "a", cleared)
    assert store.find(t.key, "default", "a") is None
    assert store.history[-1].type == "DELETED"


def _owned_cm(store: Store, name: str, owners: list[dict[str, Any]]) -> None:
    store.create(rt(store, "configmaps"), "default", {"metadata": {"name": name, "ownerReferences": [
        {"apiVersion": "v1", "kind": o["kind"], "name": o["metadata"]["name"], "uid": o["metadata"]["uid"]}
        for o in owners]}})


def test_background_gc_deletes_dependents_but_keeps_those_with_live_owners(store: Store) -> None:
    t = rt(store, "configmaps")
    owner = {**store.create(t, "default", cm("owner")), "kind": "ConfigMap"}
    other = {**store.create(t, "default", cm("other")), "kind": "ConfigMap"}
    _owned_cm(store, "only-owner", [owner])
    _owned_cm(store, "two-owners", [owner, other])
    store.delete(t, "default", "owner")
    assert store.find(t.key, "default", "only-owner") is None
    survivor = store.find(t.key, "default", "two-owners")
    assert survivor is not None
    assert [r["name"] for r in survivor["metadata"]["ownerReferences"]] == ["other"]


def test_orphan_propagation_keeps_dependents_without_owner(store: Store) -> None:
    t = rt(store, "configmaps")
    owner = {**store.create(t, "default", cm("owner")), "kind": "ConfigMap"}
    _owned_cm(store, "dep", [owner])
    store.delete(t, "default", "owner", propagation="Orphan")
    assert store.find(t.key, "default", "owner") is None
    assert "ownerReferences" not in store.find(t.key, "default", "dep")["metadata"]


def test_namespace_deletion_removes_content_then_namespace(store: Store) -> None:
    ns_t = rt(store, "namespaces")
    store.create(ns_t, None, {"metadata": {"name": "doomed"}})
    store.create(rt(store, "configmaps"), "doomed", cm("a"))
    store.delete(ns_t, None, "doomed")
    assert store.find(("", "configmaps"), "doomed", "a") is None
    assert store.find(ns_t.key, "", "doomed") is None


def test_namespace_with_finalized_content_stays_terminating(store: Store) -> None:
    ns_t = rt(store, "namespaces")
    t = rt(store, "configmaps")
    store.create(ns_t, None, {"metadata": {"name": "slow"}})
    store.create(t, "slow", {"metadata": {"name": "held", "finalizers": ["x/y"]}})
    store.delete(ns_t, None, "slow")
    assert store.find(ns_t.key, "", "slow")["status"]["phase"] == "Terminating"
    with pytest.raises(StatusError) as err:
        store.create(t, "slow", cm("new"))
    assert err.value.code == 403
    held = copy_obj(store.find(t.key, "slow", "held"))
    held["metadata"]["finalizers"] = []
    store.update(t, "slow", "held", held)
    assert store.find(ns_t.key, "", "slow") is None


def test_pagination_continue_token_expires_after_compaction(store: Store) -> None:
    t = rt(store, "configmaps")
    for i in range(4):
        store.create(t, "default", cm(f"c{i}"))
    items, _, token, remaining = store.list(t, "default", limit=2)
    assert [o["metadata"]["name"] for o in items] == ["c0", "c1"] and remaining == 2
    store.create(t, "default", cm("later"))
    store.compact()
    with pytest.raises(StatusError) as err:
        store.list(t, "default", limit=2, continue_token=token)
    assert err.value.code == 410


def test_foreground_deletion_waits_for_dependents(store: Store) -> None:
    t = rt(store, "configmaps")
    owner = {**store.create(t, "default", cm("owner")), "kind": "ConfigMap"}
    _owned_cm(store, "dep", [owner])
    held = copy_obj(store.find(t.key, "default", "dep"))
    held["metadata"]["finalizers"] = ["x/hold"]
    store.update(t, "default", "dep", held)
    store.delete(t, "default", "owner", propagation="Foreground")
    assert store.find(t.key, "default", "owner")["metadata"]["finalizers"] == ["foregroundDeletion"]
    dep = copy_obj(store.find(t.key, "default", "dep"))
    assert dep["metadata"]["deletionTimestamp"]
    dep["metadata"]["finalizers"] = []
    store.update(t, "default", "dep", dep)
    assert store.find(t.key, "default", "dep") is None
    assert store.find(t.key, "default", "owner") is None


def test_watch_from_a_future_resource_version_is_rejected(store: Store) -> None:
    with pytest.raises(StatusError) as err:
        store.watch(rt(store, "configmaps"), "default", resource_version=str(store.rv + 100),
                    label_match=lambda o: True, field_match=lambda o: True, filtered=False)
    assert err.value.code == 504 and err.value.details["causes"][0]["reason"] == "ResourceVersionTooLarge"


def test_terminating_object_accepts_no_new_finalizers_and_keeps_its_uid(store: Store) -> None:
    t = rt(store, "configmaps")
    store.create(t, "default", {"metadata": {"name": "a", "finalizers": ["x/y"]}})
    obj, _ = store.delete(t, "default", "a")
    more = copy_obj(obj)
    more["metadata"]["finalizers"] = ["x/y", "x/z"]
    with pytest.raises(StatusError) as err:
        store.update(t, "default", "a", more)
    assert err.value.code == 422
    other = copy_obj(obj)
    other["metadata"]["uid"] = "not-this-one"
    with pytest.raises(StatusError) as err:
        store.update(t, "default", "a", other)
    assert err.value.code == 409


def test_node_ports_are_allocated_free_and_kept_across_updates(store: Store) -> None:
    svc = rt(store, "services")

    def node_port(name: str, **port: Any) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"type": "NodePort", "ports": [{"port": 80, **port}]}}

    taken = store.create(svc, "default", node_port("pinned", nodePort=31009))  # the allocator's first pick
    first = store.create(svc, "default", node_port("auto"))["spec"]["ports"][0]["nodePort"]
    assert 30000 <= first <= 32767 and first != taken["spec"]["ports"][0]["nodePort"]
    labelled = copy_obj(store.find(svc.key, "default", "auto"))
    labelled["metadata"]["labels"] = {"tier": "edge"}
    del labelled["spec"]["ports"][0]["nodePort"]
    updated, _ = store.update(svc, "default", "auto", labelled)
    assert updated["spec"]["ports"][0]["nodePort"] == first
