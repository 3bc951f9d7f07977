"""The Python runtime's informers against a real kube-apiserver (v1.37, etcd 3.7), each test in its
own namespace: LIST + WATCH through churn until the cache equals a fresh LIST, the watch-list
protocol's initial-events-end bookmark (raw and through the reflector's watch-list mode), and a real
410 from a second API server whose fresh watch cache cannot serve a compacted resourceVersion."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from controllers.informers import ApiError, Backoff, Reflector, SharedInformer, Store
from controllers.informers.http_client import KubernetesClient
from controllers.observer import Observer
from controllers.realcluster.cluster import write_kubeconfig
from controllers.schema import WatchEndReason
from tests.conftest import wait_until

pytestmark = pytest.mark.realcluster

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def cm_path(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def create_cm(cluster: Any, namespace: str, name: str, **data: str) -> dict[str, Any]:
    code, body = cluster.api("POST", cm_path(namespace), {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": name}, "data": data})
    assert code == 201, body
    return body


def api_state(cluster: Any, namespace: str, server: str | None = None) -> dict[str, str]:
    """name -> resourceVersion from a consistent LIST (quorum read from etcd)."""
    code, body = cluster.api("GET", cm_path(namespace), server=server)
    assert code == 200, body
    return {item["metadata"]["name"]: item["metadata"]["resourceVersion"] for item in body["items"]}


def cache_state(objs: list[dict[str, Any]]) -> dict[str, str]:
    return {obj["metadata"]["name"]: obj["metadata"]["resourceVersion"] for obj in objs}


class WatchEnds(Observer):
    """Records why each of a reflector's watches ended."""

    def __init__(self) -> None:
        self.reasons: list[WatchEndReason] = []

    def on_watch_end(self, informer: str, *, reason: WatchEndReason, error: str | None = None) -> None:
        self.reasons.append(reason)


def fast(reflector: Reflector) -> None:
    reflector.backoff = Backoff(initial=0.05, cap=0.5, jitter=0.0)


def test_informer_cache_equals_a_list_after_100_changes_of_churn(realcluster, real_namespace) -> None:
    ns = real_namespace
    client = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    for i in range(5):
        create_cm(realcluster, ns, f"pre-{i}", v="0")
    informer = SharedInformer(client.list_watch("v1", "ConfigMap", ns))
    fast(informer.reflector)
    seen: dict[str, list[str]] = {"add": [], "update": [], "delete": []}
    lock = threading.Lock()

    def record(kind: str, obj: Any) -> None:
        name = obj["metadata"]["name"] if isinstance(obj, dict) else obj.key.rpartition("/")[2]
        with lock:
            seen[kind].append(name)

    informer.add_event_handler(on_add=lambda o: record("add", o), on_update=lambda old, new: record("update", new),
                               on_delete=lambda o: record("delete", o))
    informer.start()
    try:
        assert informer.wait_for_sync(30)
        changes = 0
        for i in range(40):  # 40 creates, 40 updates, 20 deletes: 100 changes
            create_cm(realcluster, ns, f"cm-{i}", v="0")
            changes += 1
        for i in range(40):
            obj = realcluster.api("GET", cm_path(ns, f"cm-{i}"))[1]
            obj["data"] = {"v": "1"}
            code, body = realcluster.api("PUT", cm_path(ns, f"cm-{i}"), obj)
            assert code == 200, body
            changes += 1
        for i in range(0, 40, 2):
            code, body = realcluster.api("DELETE", cm_path(ns, f"cm-{i}"))
            assert code == 200, body
            changes += 1
        assert changes == 100
        expected = api_state(realcluster, ns)
        wait_until(lambda: cache_state(informer.store.list()) == expected, timeout=30,
                   what="the informer's cache to equal a LIST")
    finally:
        informer.stop()
    assert cache_state(informer.store.list()) == api_state(realcluster, ns)
    with lock:
        assert {f"pre-{i}" for i in range(5)} | {f"cm-{i}" for i in range(40)} <= set(seen["add"])
        assert {f"cm-{i}" for i in range(40)} <= set(seen["update"])
        assert sorted(seen["delete"]) == sorted(f"cm-{i}" for i in range(0, 40, 2))


def test_watch_list_ends_initial_events_with_a_bookmark_and_the_reflector_syncs_from_it(
        realcluster, real_namespace) -> None:
    ns = real_namespace
    for i in range(6):
        create_cm(realcluster, ns, f"cm-{i}")
    client = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    list_watch = client.list_watch("v1", "ConfigMap", ns)
    added: list[str] = []
    bookmark: dict[str, Any] | None = None
    # A streaming watch (sendInitialEvents=true&resourceVersionMatch=NotOlderThan) from RV "0".
    stream = list_watch.watch(resource_version="0", timeout_seconds=20, allow_watch_bookmarks=True,
                              send_initial_events=True)
    try:
        for event in stream:
            if event.type == "ADDED":
                added.append(event.obj["metadata"]["name"])
            elif event.type == "BOOKMARK":
                bookmark = event.obj
                break
            else:
                raise AssertionError(f"unexpected {event.type} before the bookmark: {event.obj}")
    finally:
        stream.close()
    assert bookmark is not None, "the watch ended without a bookmark"
    assert bookmark["metadata"]["annotations"][INITIAL_EVENTS_END] == "true"
    expected = api_state(realcluster, ns)
    assert sorted(added) == sorted(expected)
    assert int(bookmark["metadata"]["resourceVersion"]) >= max(int(rv) for rv in expected.values())

    informer = SharedInformer(list_watch)
    informer.reflector.use_watch_list = True
    fast(informer.reflector)
    informer.start()
    try:
        assert informer.wait_for_sync(30)
        assert informer.reflector.use_watch_list, "v1.37 serves sendInitialEvents: no fallback to LIST"
        assert cache_state(informer.store.list()) == expected
        create_cm(realcluster, ns, "later")
        wait_until(lambda: cache_state(informer.store.list()) == api_state(realcluster, ns), timeout=30,
                   what="the watch-list informer to follow a create")
    finally:
        informer.stop()


def test_a_real_410_from_a_second_apiserver_and_the_reflector_relists(realcluster, real_namespace,
                                                                        tmp_path: Path) -> None:
    ns = real_namespace
    for i in range(5):
        create_cm(realcluster, ns, f"old-{i}")
    first = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    store = Store("real-410")
    ends = WatchEnds()
    reflector = Reflector(first.list_watch("v1", "ConfigMap", ns), store, observer=ends)
    fast(reflector)
    reflector.list()  # one LIST: the store and an RV that is about to be compacted away
    old_rv = reflector.last_sync_resource_version
    assert int(old_rv) > 0
    for i in range(5):
        create_cm(realcluster, ns, f"new-{i}")
    for i in range(3):
        assert realcluster.api("DELETE", cm_path(ns, f"old-{i}"))[0] == 200
    compacted = realcluster.compact_etcd()
    assert compacted > int(old_rv)
    second_url = realcluster.start_second_apiserver()
    kubeconfig = tmp_path / "second.kubeconfig"
    write_kubeconfig(kubeconfig, server=second_url, ca_file=realcluster.ca_file, token=realcluster.token)
    second = KubernetesClient.from_kubeconfig(str(kubeconfig))
    second_lw = second.list_watch("v1", "ConfigMap", ns)

    # A raw watch from the compacted RV: HTTP 410, or an ERROR event carrying a 410 Status.
    code = 0
    try:
        stream = second_lw.watch(resource_version=old_rv, timeout_seconds=10)
    except ApiError as exc:
        code = exc.code
    else:
        try:
            for event in stream:
                if event.type == "ERROR":
                    code = int(event.obj.get("code") or 0)
                    break
                raise AssertionError(f"{event.type} from a compacted RV: {event.obj}")
        finally:
            stream.close()
    assert code == 410

    # The reflector, now pointed at the second server, watches from its old RV: 410 Expired...
    reflector.list_watch = second_lw
    outcome: list[Any] = []

    def watch_once() -> None:
        try:
            reflector.watch()
            outcome.append("returned")
        except ApiError as exc:
            outcome.append(exc)

    watcher = threading.Thread(target=watch_once, daemon=True)
    watcher.start()
    watcher.join(30)
    assert outcome, "the watch from a compacted RV did not end"
    # Either the server answered HTTP 410 (the watch raises it) or sent a 410 ERROR event (the
    # watch ends as EXPIRED); nothing was applied from it either way.
    if outcome[0] == "returned":
        assert ends.reasons == [WatchEndReason.EXPIRED]
    else:
        assert isinstance(outcome[0], ApiError) and outcome[0].is_expired, outcome[0]
    assert reflector.lists == 1 and reflector.last_sync_resource_version == old_rv
    # ... and running it relists: the cache equals the API, the gap's deletes gone.
    runner = threading.Thread(target=reflector.run, daemon=True)
    runner.start()
    try:
        expected = api_state(realcluster, ns, server=second_url)
        wait_until(lambda: cache_state(store.list()) == expected, timeout=30,
                   what="the relisted cache to equal the API")
    finally:
        reflector.stop()
        runner.join(10)
    assert reflector.lists >= 2
    assert not {f"old-{i}" for i in range(3)} & set(cache_state(store.list()))
