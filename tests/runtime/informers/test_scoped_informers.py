"""The informer options big clusters need, against the simulator over real HTTP: label- and
field-selector-scoped informers (client-go's tweak-list-options), namespace-scoped factories, a
transform applied before the cache (and TransformStripManagedFields), metadata-only informers
(``PartialObjectMetadata``), and what each publishes about itself (``on_informer``'s scope)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from controllers.informers import (
    Backoff,
    DeletedFinalStateUnknown,
    ListOptions,
    SharedInformerFactory,
    transform_strip_managed_fields,
)
from controllers.informers.http_client import KubernetesClient
from controllers.reconcile import Manager

CM = "/api/v1/namespaces/{ns}/configmaps"


@pytest.fixture
def client(sim) -> KubernetesClient:
    return KubernetesClient.for_host(sim.url)


def create_cm(client: KubernetesClient, name: str, ns: str = "default", labels: dict[str, str] | None = None,
              **data: str) -> dict[str, Any]:
    return client.send_json("POST", CM.format(ns=ns), {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels or {}}, "data": data})


def relabel(client: KubernetesClient, name: str, labels: dict[str, str | None], ns: str = "default") -> None:
    client.send_json("PATCH", f"{CM.format(ns=ns)}/{name}", {"metadata": {"labels": labels}},
                     headers={"Content-Type": "application/merge-patch+json"})


class Calls:
    """Every handler call as ``(event, name)``, plus the objects handlers were given."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.objects: list[Any] = []
        self._lock = threading.Lock()

    def handlers(self) -> dict[str, Any]:
        def name(obj: Any) -> str:
            if isinstance(obj, DeletedFinalStateUnknown):
                obj = obj.obj
            return obj["metadata"]["name"]

        def note(event: str, *objs: Any) -> None:
            with self._lock:
                self.events.append((event, name(objs[-1])))
                self.objects.extend(o.obj if isinstance(o, DeletedFinalStateUnknown) else o for o in objs)

        return {"on_add": lambda o: note("add", o), "on_update": lambda old, new: note("update", old, new),
                "on_delete": lambda o: note("delete", o)}

    def of(self, name: str) -> list[str]:
        with self._lock:
            return [e for e, n in self.events if n == name]


def start(factory: SharedInformerFactory, *informers: Any) -> None:
    for informer in informers:
        informer.reflector.backoff = Backoff(initial=0.05, cap=0.2, jitter=0.0)
    factory.start()
    assert all(factory.wait_for_cache_sync(10).values())


def test_a_label_change_moves_an_object_out_of_and_into_a_selector_scoped_informer(client, eventually,
                                                                                   observer) -> None:
    create_cm(client, "web", labels={"app": "web"})
    create_cm(client, "db", labels={"app": "db"})

    def tweak(options: ListOptions) -> None:
        options.label_selector = "app=web"

    factory = SharedInformerFactory(client, tweak_list_options=tweak, observer=observer)
    informer = factory.informer_for("v1", "ConfigMap")
    calls = Calls()
    informer.add_event_handler(**calls.handlers())
    start(factory, informer)
    try:
        assert informer.store.list_keys() == ["default/web"]
        relabel(client, "web", {"app": "other"})  # leaves the selector: DELETED, as the server says
        eventually(lambda: calls.of("web") == ["add", "delete"])
        assert informer.store.list_keys() == []
        relabel(client, "db", {"app": "web"})  # enters it: ADDED
        eventually(lambda: calls.of("db") == ["add"])
        assert informer.store.list_keys() == ["default/db"]
        relabel(client, "db", {"tier": "x"})  # still matching: MODIFIED
        eventually(lambda: calls.of("db") == ["add", "update"])
        watched = [kw["event_type"] for kw in observer.of("on_watch_event") if kw["key"] == "default/web"]
        assert watched == ["DELETED"]
    finally:
        factory.shutdown()
    assert informer.name == "v1/ConfigMap labels=app=web"
    announced = observer.of("on_informer")
    assert announced[0]["scope"] == {"label_selector": "app=web"}


def test_a_field_selector_scopes_the_list_and_the_watch(client, eventually) -> None:
    create_cm(client, "a")
    create_cm(client, "b")
    factory = SharedInformerFactory(client, tweak_list_options=lambda o: setattr(o, "field_selector",
                                                                                 "metadata.name=b"))
    informer = factory.informer_for("v1", "ConfigMap")
    calls = Calls()
    informer.add_event_handler(**calls.handlers())
    start(factory, informer)
    try:
        assert informer.store.list_keys() == ["default/b"]
        client.send_json("PUT", f"{CM.format(ns='default')}/a", {**client.get_json(f"{CM.format(ns='default')}/a"),
                                                                "data": {"x": "1"}})
        client.send_json("PUT", f"{CM.format(ns='default')}/b", {**client.get_json(f"{CM.format(ns='default')}/b"),
                                                                "data": {"x": "1"}})
        eventually(lambda: calls.of("b") == ["add", "update"])
        assert calls.of("a") == []
    finally:
        factory.shutdown()
    assert informer.scope == {"field_selector": "metadata.name=b"}


def test_a_namespace_scoped_factory_sees_one_namespace_only(client, eventually, observer) -> None:
    for ns in ("team-a", "team-b"):
        client.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": ns}})
        create_cm(client, "settings", ns=ns)
    factory = SharedInformerFactory(client, namespace="team-a", observer=observer)
    informer = factory.informer_for("v1", "ConfigMap")
    assert factory.informer_for("v1", "ConfigMap", "team-a") is informer
    with pytest.raises(ValueError, match="namespace 'team-a' only"):
        factory.informer_for("v1", "ConfigMap", "team-b")
    calls = Calls()
    informer.add_event_handler(**calls.handlers())
    start(factory, informer)
    try:
        assert informer.store.list_keys() == ["team-a/settings"]
        create_cm(client, "late", ns="team-b")
        create_cm(client, "late", ns="team-a")
        # The cache is written before handlers hear of it: wait for the handler, then check both.
        eventually(lambda: calls.events == [("add", "settings"), ("add", "late")])
        assert sorted(informer.store.list_keys()) == ["team-a/late", "team-a/settings"]
    finally:
        factory.shutdown()
    assert observer.of("on_informer")[0]["scope"] == {"namespace": "team-a"}


def test_strip_managed_fields_keeps_them_from_every_handler_and_the_cache(client, eventually, observer) -> None:
    created = create_cm(client, "a", x="1")
    assert created["metadata"].get("managedFields"), "the simulator tracks field managers on create"
    factory = SharedInformerFactory(client, transform=transform_strip_managed_fields(), observer=observer)
    informer = factory.informer_for("v1", "ConfigMap")
    calls = Calls()
    informer.add_event_handler(**calls.handlers())
    start(factory, informer)
    try:
        path = f"{CM.format(ns='default')}/a"
        client.send_json("PUT", path, {**client.get_json(path), "data": {"x": "2"}})
        create_cm(client, "b")
        client.send_json("DELETE", f"{CM.format(ns='default')}/b")
        eventually(lambda: calls.of("b") == ["add", "delete"] and calls.of("a") == ["add", "update"])
        assert calls.objects and all("managedFields" not in o["metadata"] for o in calls.objects)
        assert all("managedFields" not in o["metadata"] for o in informer.store.list())
        assert informer.store.get_by_key("default/a")["data"] == {"x": "2"}
    finally:
        factory.shutdown()
    assert observer.of("on_informer")[0]["scope"] == {"transform": "strip managedFields"}


def test_a_transform_that_raises_on_a_watch_event_loses_that_event_only(client, eventually) -> None:
    def picky(obj: dict[str, Any]) -> dict[str, Any]:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("no")
        obj["metadata"].setdefault("annotations", {})["seen"] = "yes"
        return obj

    factory = SharedInformerFactory(client, transform=picky)
    informer = factory.informer_for("v1", "ConfigMap")
    start(factory, informer)
    try:
        create_cm(client, "bad")
        create_cm(client, "good")
        eventually(lambda: "default/good" in informer.store.list_keys())
        assert informer.store.list_keys() == ["default/good"]
        assert informer.store.get_by_key("default/good")["metadata"]["annotations"] == {"seen": "yes"}
        assert informer.reflector.lists == 1  # the watch went on
    finally:
        factory.shutdown()


def test_a_transform_that_raises_on_a_list_item_fails_the_list_and_is_retried(client, eventually,
                                                                                observer) -> None:
    create_cm(client, "bad")
    broken = threading.Event()
    broken.set()

    def flaky(obj: dict[str, Any]) -> dict[str, Any]:
        if broken.is_set():
            raise ValueError("transform not ready")
        return obj

    factory = SharedInformerFactory(client, transform=flaky, observer=observer)
    informer = factory.informer_for("v1", "ConfigMap")
    informer.reflector.backoff = Backoff(initial=0.05, cap=0.2, jitter=0.0)
    factory.start()
    try:
        eventually(lambda: any("transform not ready" in kw["reason"] for kw in observer.of("on_backoff")))
        assert not informer.has_synced() and len(informer.store) == 0
        broken.clear()
        assert informer.wait_for_sync(10)
        assert informer.store.list_keys() == ["default/bad"]
    finally:
        factory.shutdown()


def test_a_metadata_only_informer_caches_partial_object_metadata(client, eventually, observer) -> None:
    create_cm(client, "a", labels={"app": "web"}, secret_looking="value-in-data")
    client.send_json("POST", "/api/v1/namespaces/default/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="}})
    manager = Manager(client, observer=observer, freeze_gc_after_sync=False)
    configmaps = manager.informer_for("v1", "ConfigMap", metadata_only=True)
    full = manager.informer_for("v1", "ConfigMap")
    secrets = manager.informer_for("v1", "Secret", metadata_only=True)
    assert configmaps is not full and configmaps.name == "v1/ConfigMap metadata"
    calls = Calls()
    configmaps.add_event_handler(**calls.handlers())
    start(manager.factory, configmaps, full, secrets)
    try:
        cached = configmaps.store.get_by_key("default/a")
        assert cached["kind"] == "PartialObjectMetadata" and cached["apiVersion"] == "meta.k8s.io/v1"
        assert set(cached) == {"kind", "apiVersion", "metadata"}
        assert cached["metadata"]["labels"] == {"app": "web"}
        assert full.store.get_by_key("default/a")["data"] == {"secret_looking": "value-in-data"}
        assert set(secrets.store.get_by_key("default/s")) == {"kind", "apiVersion", "metadata"}
        relabel(client, "a", {"app": "api"})
        eventually(lambda: calls.of("a") == ["add", "update"])
        assert configmaps.store.get_by_key("default/a")["metadata"]["labels"] == {"app": "api"}
        client.send_json("DELETE", f"{CM.format(ns='default')}/a")
        eventually(lambda: calls.of("a") == ["add", "update", "delete"])
        assert all(set(o) == {"kind", "apiVersion", "metadata"} for o in calls.objects)
    finally:
        manager.factory.shutdown()
    scopes = {kw["scope"] and tuple(kw["scope"].items()) for kw in observer.of("on_informer")}
    assert scopes == {(("metadata_only", True),), None}


def test_options_combine_and_name_the_informer(client) -> None:
    factory = SharedInformerFactory(client, namespace="default", transform=transform_strip_managed_fields(),
                                    tweak_list_options=lambda o: setattr(o, "label_selector", "app=web"))
    informer = factory.informer_for("v1", "Pod", metadata_only=True)
    assert informer.name == "v1/Pod ns=default labels=app=web metadata"
    assert informer.scope == {"namespace": "default", "label_selector": "app=web", "metadata_only": True,
                              "transform": "strip managedFields"}
    assert informer.snapshot()["scope"] == informer.scope
    informer.set_transform(None)
    assert "transform" not in informer.scope
