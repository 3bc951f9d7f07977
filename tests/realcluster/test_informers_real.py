"""The Python runtime's informers against a real kube-apiserver (v1.37, etcd 3.7), each test in its
own namespace: LIST + WATCH through churn until the cache equals a fresh LIST, the watch-list
protocol's initial-events-end bookmark (raw and through the reflector's watch-list mode), a real
410 from a second API server whose fresh watch cache cannot serve a compacted resourceVersion, and
what a SharedInformer's handlers hear after such a 410: the relist's Replaced deltas, and a
``DeletedFinalStateUnknown`` tombstone for each object deleted while its watch was down."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from controllers.informers import ApiError, Backoff, DeletedFinalStateUnknown, Reflector, SharedInformer, Store
from controllers.informers.http_client import KubernetesClient, KubernetesListWatch
from controllers.observer import Observer
from controllers.realcluster.cluster import write_kubeconfig
from controllers.schema import DeltaType, FifoOp, ReflectorState, WatchEndReason
from controllers.telemetry.redisboot import free_port
from tests.conftest import wait_until

pytestmark = pytest.mark.realcluster

INITIAL_EVENTS_END = "k8s.io/initial-events-end"
ROOT_CA = "kube-root-ca.crt"


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


def watch_answer(list_watch: Any, resource_version: str) -> int:
    """The status a raw watch from ``resource_version`` gets: an HTTP error's code, the code of an
    ERROR event's Status, or 0 if the watch ended without one."""
    try:
        stream = list_watch.watch(resource_version=resource_version, timeout_seconds=10)
    except ApiError as exc:
        return exc.code
    try:
        for event in stream:
            if event.type == "ERROR":
                return int(event.obj.get("code") or 0)
            raise AssertionError(f"{event.type} from RV {resource_version}: {event.obj}")
    finally:
        stream.close()
    return 0


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

    assert watch_answer(second_lw, old_rv) == 410

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


class InformerTrail(Observer):
    """What one informer did: its reflector's states, why its watches ended and why it backed off,
    and the deltas that entered its DeltaFIFO, as (delta type, key)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.states: list[ReflectorState] = []
        self.watch_ends: list[tuple[WatchEndReason, str | None]] = []
        self.backoffs: list[str] = []
        self.deltas: list[tuple[DeltaType, str]] = []

    def on_backoff(self, informer: str, *, delay: float, reason: str) -> None:
        with self.lock:
            self.backoffs.append(reason)

    def on_reflector_state(self, informer: str, *, state: ReflectorState) -> None:
        with self.lock:
            self.states.append(state)

    def on_watch_end(self, informer: str, *, reason: WatchEndReason, error: str | None = None) -> None:
        with self.lock:
            self.watch_ends.append((reason, error))

    def on_fifo(self, informer: str, *, op: FifoOp, key: str, delta: DeltaType, depth: int) -> None:
        if op is FifoOp.QUEUED:
            with self.lock:
                self.deltas.append((delta, key))


def test_after_a_real_410_the_relist_reaches_handlers_as_replaced_updates_and_tombstones(
        realcluster, real_namespace, tmp_path: Path) -> None:
    ns = real_namespace
    # The controller-manager publishes the cluster's CA into every namespace: let it, first, so the
    # only changes are the test's.
    wait_until(lambda: realcluster.api("GET", cm_path(ns, ROOT_CA))[0] == 200, timeout=30, what=f"{ROOT_CA} in {ns}")
    for name in ("keep", "changed", "gone-0", "gone-1"):
        create_cm(realcluster, ns, name, v="0")
    first = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    first_lw = first.list_watch("v1", "ConfigMap", ns)
    trail = InformerTrail()
    # Watches the server ends after 2-3 s, so the informer soon opens its next one from wherever
    # its list_watch points by then. Not 1 s: the server's timer starts before the client's, so a
    # 1 s watch without events can look "very short" to the informer, which then relists instead
    # of watching again -- and a relist at the old RV is served, never a 410.
    informer = SharedInformer(first_lw, observer=trail, min_watch_timeout=2)
    fast(informer.reflector)
    heard: list[tuple[str, Any, Any]] = []
    lock = threading.Lock()

    def hear(event: str, old: Any, new: Any) -> None:
        with lock:
            heard.append((event, old, new))

    informer.add_event_handler(on_add=lambda o: hear("add", None, o), on_update=lambda o, n: hear("update", o, n),
                               on_delete=lambda o: hear("delete", None, o))
    informer.start()
    try:
        assert informer.wait_for_sync(30)
        cached = {o["metadata"]["name"]: o for o in informer.store.list()}
        assert set(cached) == {ROOT_CA, "keep", "changed", "gone-0", "gone-1"}

        # The API server goes away: the informer's next watch meets a closed port (a real refused
        # connection), and it backs off and tries again, keeping its cache and its resourceVersion.
        down = tmp_path / "down.kubeconfig"
        write_kubeconfig(down, server=f"https://127.0.0.1:{free_port()}", ca_file=realcluster.ca_file,
                         token=realcluster.token)
        informer.reflector.list_watch = KubernetesListWatch(
            KubernetesClient.from_kubeconfig(str(down)), first_lw.path, api_version="v1", kind="ConfigMap", namespace=ns)
        with trail.lock:
            before, backoffs_before = len(trail.states), len(trail.backoffs)
        wait_until(lambda: ReflectorState.BACKING_OFF in trail.states[before:] and any(
            reason.startswith("watch failed: ConnectionRefusedError") for reason in trail.backoffs[backoffs_before:]),
            timeout=30, what="the informer's watch to end and its next one to be refused")
        last_rv = informer.reflector.last_sync_resource_version

        # Meanwhile: two deletes, an update and a create it cannot see, then etcd compacts them away.
        for name in ("gone-0", "gone-1"):
            assert realcluster.api("DELETE", cm_path(ns, name))[0] == 200
        changed = realcluster.api("GET", cm_path(ns, "changed"))[1]
        changed["data"] = {"v": "1"}
        assert realcluster.api("PUT", cm_path(ns, "changed"), changed)[0] == 200
        create_cm(realcluster, ns, "new", v="0")
        assert realcluster.compact_etcd() > int(last_rv)
        with lock:
            assert heard[len(cached):] == [], "the informer heard of changes while its watch was down"

        # Back on a (second, fresh) API server: the watch from the compacted RV is a real 410, the
        # informer relists, and its handlers hear what the watch missed.
        second_url = realcluster.start_second_apiserver()
        second = tmp_path / "second.kubeconfig"
        write_kubeconfig(second, server=second_url, ca_file=realcluster.ca_file, token=realcluster.token)
        second_lw = KubernetesClient.from_kubeconfig(str(second)).list_watch("v1", "ConfigMap", ns)
        # Once its watch cache is ready (until then a watch may just wait out its timeout), the
        # second server answers the informer's RV with 410.
        wait_until(lambda: watch_answer(second_lw, last_rv) == 410, timeout=60, interval=0.5,
                   what="the second API server to answer a watch from the compacted RV with 410")
        with trail.lock:
            deltas_before = len(trail.deltas)
        informer.reflector.min_watch_timeout, informer.reflector.max_watch_timeout = 30, 60
        informer.reflector.list_watch = second_lw
        wait_until(lambda: cache_state(informer.store.list()) == api_state(realcluster, ns, server=second_url),
                   timeout=60, what="the relisted cache to equal the API")

        def handled(event: str, name: str) -> list[tuple[Any, Any]]:
            with lock:
                return [(old, new) for e, old, new in heard if e == event and name in (
                    new.key.rpartition("/")[2] if isinstance(new, DeletedFinalStateUnknown) else new["metadata"]["name"])]

        wait_until(lambda: handled("delete", "gone-0") and handled("delete", "gone-1") and handled("update", "changed")
                   and handled("add", "new"), timeout=30, what="the handlers to hear the relist")
    finally:
        informer.stop()
    # The 410, as the real server sent it: an HTTP 410 opening the watch, or a 410 ERROR event in it.
    assert any(reason.startswith("ApiError: 410") for reason in trail.backoffs) or \
        any(reason is WatchEndReason.EXPIRED for reason, _ in trail.watch_ends), (trail.backoffs, trail.watch_ends)
    assert informer.reflector.lists >= 2
    for name in ("gone-0", "gone-1"):
        ((_, tombstone),) = handled("delete", name)
        assert isinstance(tombstone, DeletedFinalStateUnknown), tombstone
        assert tombstone.key == f"{ns}/{name}"
        assert tombstone.obj["metadata"]["resourceVersion"] == cached[name]["metadata"]["resourceVersion"]
    ((old, new),) = handled("update", "changed")
    assert (old["data"], new["data"]) == ({"v": "0"}, {"v": "1"})
    assert not handled("update", "keep"), "an unchanged relisted object is a resync: no handler is due one"
    relist = trail.deltas[deltas_before:]
    assert (DeltaType.REPLACED, f"{ns}/changed") in relist and (DeltaType.REPLACED, f"{ns}/keep") in relist
    assert (DeltaType.REPLACED, f"{ns}/new") in relist
    assert {(DeltaType.DELETED, f"{ns}/gone-0"), (DeltaType.DELETED, f"{ns}/gone-1")} <= set(relist)
