"""The runtime against the simulated API server over real HTTP: sync, bookmarks, 410 relist with
tombstones, resumed watches, convergence under API errors, and leader election on a Lease."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from controllers.informers import ApiError, Backoff, DeletedFinalStateUnknown, SharedInformer
from controllers.informers.http_client import KubernetesClient
from controllers.reconcile import KubernetesLeaseLock, Manager, Request, Result

sim_server = pytest.importorskip("controllers.sim.server", reason="the simulator is not available")

CM = "/api/v1/namespaces/default/configmaps"


def create_cm(client: KubernetesClient, name: str, **data: str) -> dict[str, Any]:
    return client.send_json("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
                                         "data": data})


def fast_informer(client: KubernetesClient, observer: Any = None) -> SharedInformer:
    informer = SharedInformer(client.list_watch("v1", "ConfigMap"), observer=observer)
    informer.reflector.backoff = Backoff(initial=0.05, cap=0.2, jitter=0.0)
    return informer


def test_informer_syncs_and_follows_the_watch(sim, eventually) -> None:
    client = KubernetesClient.for_host(sim.url)
    create_cm(client, "a")
    informer = fast_informer(client)
    added: list[str] = []
    informer.add_event_handler(on_add=lambda obj: added.append(obj["metadata"]["name"]))
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        assert "default/a" in informer.store.list_keys()
        create_cm(client, "b")
        eventually(lambda: "b" in added)
        assert informer.reflector.lists == 1
    finally:
        informer.stop()


def test_bookmarks_advance_the_resource_version(sim, eventually, observer) -> None:
    client = KubernetesClient.for_host(sim.url)
    informer = SharedInformer(client.list_watch("v1", "ConfigMap"), observer=observer)
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        client.send_json("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                        "metadata": {"name": "elsewhere"}})
        eventually(lambda: observer.of("on_bookmark"))
        eventually(lambda: int(informer.last_sync_resource_version) >= int(
            observer.of("on_bookmark")[-1]["resource_version"]))
    finally:
        informer.stop()


def test_ended_watches_resume_from_the_last_rv_without_relisting(sim, eventually, observer) -> None:
    client = KubernetesClient.for_host(sim.url)
    informer = fast_informer(client, observer)
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        create_cm(client, "a")
        eventually(lambda: "default/a" in informer.store.list_keys())
        client.send_json("POST", "/_sim/watches/end")
        create_cm(client, "b")
        eventually(lambda: "default/b" in informer.store.list_keys())
        assert informer.reflector.lists == 1
        assert len(observer.of("on_watch_start")) >= 2
    finally:
        informer.stop()


def test_forced_410_relists_with_a_tombstone_for_objects_deleted_in_the_gap(sim, eventually) -> None:
    client = KubernetesClient.for_host(sim.url)
    create_cm(client, "gone")
    create_cm(client, "kept")
    informer = fast_informer(client)
    deleted: list[Any] = []
    informer.add_event_handler(on_delete=deleted.append)
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        # Hold re-watches back, cut the watch, delete and compact in the gap.
        client.send_json("POST", "/_sim/latency", {"verb": "watch", "resource": "configmaps", "ms": 700})
        client.send_json("POST", "/_sim/watches/drop")
        client.send_json("DELETE", f"{CM}/gone")
        client.send_json("POST", "/_sim/history/compact")
        eventually(lambda: deleted)
        client.send_json("DELETE", "/_sim/latency")
    finally:
        informer.stop()
    assert isinstance(deleted[0], DeletedFinalStateUnknown) and deleted[0].key == "default/gone"
    assert informer.reflector.lists >= 2
    assert "default/kept" in informer.store.list_keys()


def test_reconciler_converges_under_a_30_percent_api_error_rate(sim, eventually) -> None:
    client = KubernetesClient.for_host(sim.url)
    for i in range(10):
        create_cm(client, f"cm-{i}")
    manager = Manager(client)
    informer = manager.informer_for("v1", "ConfigMap", "default")
    informer.reflector.backoff = Backoff(initial=0.05, cap=0.2, jitter=0.0)
    errors = 0
    lock = threading.Lock()

    def reconcile(request: Request) -> Result:
        nonlocal errors
        obj = informer.store.get_by_key(str(request))
        if obj is None or (obj.get("data") or {}).get("reconciled") == "true":
            return Result()
        try:
            fresh = client.get_json(f"{CM}/{request.name}")
            fresh["data"] = dict(fresh.get("data") or {}, reconciled="true")
            client.send_json("PUT", f"{CM}/{request.name}", fresh)
        except ApiError:
            with lock:
                errors += 1
            raise
        return Result()

    manager.new_controller("annotate", reconcile, max_concurrent_reconciles=2).watch(informer)
    client.send_json("POST", "/_sim/errors", {"verb": "*", "resource": "configmaps", "rate": 0.3, "code": 500})
    manager.start()
    try:
        def converged() -> bool:
            objs = [informer.store.get_by_key(f"default/cm-{i}") for i in range(10)]
            return all(o is not None and (o.get("data") or {}).get("reconciled") == "true" for o in objs)
        eventually(converged, timeout=30)
    finally:
        client.send_json("DELETE", "/_sim/errors")
        manager.stop()
    assert errors > 0, "the error rate should have been felt"


def test_two_managers_one_leads_and_the_other_takes_over_within_the_lease_duration(sim, eventually) -> None:
    client = KubernetesClient.for_host(sim.url)
    reconciled: dict[str, list[str]] = {"a": [], "b": []}
    managers = {}
    for identity in ("a", "b"):
        m = Manager(client, leader_election_lock=KubernetesLeaseLock(client, "default", "ctrlscope-test"),
                    identity=identity, lease_duration=1.5, renew_deadline=1.0, retry_period=0.3)
        m.new_controller("cms", lambda r, who=identity: reconciled[who].append(r.name)).watch(
            m.informer_for("v1", "ConfigMap", "default"))
        managers[identity] = m
    create_cm(client, "x")
    managers["a"].start()
    eventually(lambda: reconciled["a"])
    managers["b"].start()
    try:
        time.sleep(1.0)
        assert reconciled["b"] == []
        # "kill" a: it stops renewing without releasing the lease
        managers["a"].elector.release_on_cancel = False
        killed = time.monotonic()
        managers["a"].stop()
        eventually(lambda: reconciled["b"], timeout=10)
        took_over = time.monotonic() - killed
        lease = client.get_json("/apis/coordination.k8s.io/v1/namespaces/default/leases/ctrlscope-test")
    finally:
        managers["b"].stop()
    assert lease["spec"]["holderIdentity"] == "b" and lease["spec"]["leaseTransitions"] == 1
    assert took_over < 1.5 + 0.3 * 2.2 + 1.0  # lease duration + one jittered retry + reconcile slack


def test_streaming_list_against_the_simulator(sim, eventually) -> None:
    client = KubernetesClient.for_host(sim.url)
    create_cm(client, "a")
    informer = fast_informer(client)
    informer.reflector.use_watch_list = True
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        assert "default/a" in informer.store.list_keys()
        assert informer.reflector.use_watch_list, "the simulator supports sendInitialEvents"
        create_cm(client, "b")
        eventually(lambda: "default/b" in informer.store.list_keys())
    finally:
        informer.stop()


def test_a_reconciles_api_writes_reach_the_telemetry_of_its_controller(sim, eventually, publisher_factory) -> None:
    from controllers.telemetry.telemetry_observer import TelemetryObserver

    client = KubernetesClient.for_host(sim.url)
    create_cm(client, "source")
    telemetry = TelemetryObserver(publisher_factory(), worker="w1")
    manager = Manager(client, observer=telemetry)
    informer = manager.informer_for("v1", "ConfigMap", "default")

    def reconcile(request: Request) -> Result:
        if request.name == "source":
            client.send_json("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": "copy"}, "data": {"from": "source"}})
        return Result()

    manager.new_controller("copier", reconcile).watch(informer)
    manager.start()
    try:
        eventually(lambda: telemetry.stages()["controllers"].get("copier", {}).get("writes") == 1)
        eventually(lambda: informer.store.get_by_key("default/copy") is not None)
    finally:
        manager.stop()
    assert telemetry.stages()["controllers"]["copier"]["write_errors"] == 0
    writes = [r for topic, r in telemetry.publisher._buffer if r["k"] == "write"]
    assert [(w["method"], w["path"], w["code"]) for w in writes] == [("POST", CM, 201)], \
        "the informer's LIST and WATCH are reads, not the controller's writes"


def test_an_informer_follows_a_simulator_restarted_empty_whose_writes_pass_its_old_rv(eventually) -> None:
    """Regression (tests/chaos): a simulator killed and restarted afresh reissued resourceVersions
    from 1, so an informer re-watching from its old RV, once the new cluster's writes passed it, was
    served only the events after that RV: objects from before the restart stayed in its cache for
    good and new ones made before that RV never arrived. ``manage.py simcluster`` now starts a fresh
    cluster's RVs at the clock (``first_resource_version``), everything below compacted: the
    informer's watch gets 410 and it relists."""
    from dashboard.management.commands.simcluster import first_resource_version

    first = sim_server.SimCluster(port=0, bookmark_interval=0.2, control_plane=False,
                                  first_resource_version=first_resource_version()).start()
    port = first.port
    client = KubernetesClient.for_host(first.url)
    for name in ("old-a", "old-b"):
        create_cm(client, name)
    informer = fast_informer(client)
    informer.start()
    try:
        assert informer.wait_for_sync(10)
        old_rv = int(informer.reflector.last_sync_resource_version)
        first.stop()
        second = sim_server.SimCluster(port=port, bookmark_interval=0.2, control_plane=False,
                                       first_resource_version=first_resource_version()).start()
        try:
            assert second.store.rv > old_rv
            # The informer's next list/watch waits a second: the new cluster's writes go first.
            for verb in ("list", "watch"):
                second.call(lambda verb=verb: second.faults.set_latency(verb, "configmaps", 1000))
            for i in range(30):  # more writes than the first cluster made: past its RVs either way
                create_cm(client, f"new-{i}")
            want = {f"default/new-{i}" for i in range(30)}
            eventually(lambda: set(informer.store.list_keys()) & {"default/old-a", "default/old-b", *want} == want,
                       timeout=15)
        finally:
            second.stop()
    finally:
        informer.stop()


def test_a_reconcile_that_hits_a_refused_write_runs_once_and_is_terminal(sim, eventually, publisher_factory) -> None:
    """A read-only worker (the guard told the server is not the simulator) refuses the Reconcile's
    write: the key is not retried with backoff (no retry can make the worker writable), the result
    is terminal with the read-only error, and the write is counted as refused, not as a failed one."""
    from controllers.informers.write_guard import WriteGuard
    from controllers.telemetry.telemetry_observer import TelemetryObserver

    client = KubernetesClient.for_host(sim.url)
    create_cm(client, "source")
    client.write_guard = WriteGuard(server=sim.url, simulated=False)
    telemetry = TelemetryObserver(publisher_factory(), worker="w1")
    manager = Manager(client, observer=telemetry)
    informer = manager.informer_for("v1", "ConfigMap", "default")
    attempts: list[str] = []

    def reconcile(request: Request) -> Result:
        attempts.append(request.name)
        client.send_json("POST", CM, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "copy"}})
        return Result()

    controller = manager.new_controller("copier", reconcile)
    controller.watch(informer)
    manager.start()
    try:
        eventually(lambda: attempts)
        # The default rate limiter starts at 5 ms and doubles: a retried key would have run ~8 times.
        time.sleep(1.5)
        assert attempts == ["source"]
        # Nowhere in the queue: not queued, not waiting for a retry, no requeues counted.
        assert controller.queue.items() == {}
    finally:
        manager.stop()
    m = controller.metrics
    assert (m.terminal_reconcile_errors_total, m.reconcile_errors_total) == (1, 1)
    stages = telemetry.stages()["controllers"]["copier"]
    assert (stages["writes"], stages["write_errors"], stages["writes_refused"]) == (0, 0, 1)
    assert stages["last_result"] == "terminal"
    records = [r for _, r in telemetry.publisher._buffer]
    writes = [r for r in records if r["k"] == "write"]
    assert [(w["method"], w["path"], w["code"], w["refused"]) for w in writes] == [("POST", CM, 0, "read-only")]
    ends = [r for r in records if r["k"] == "reconcile"]
    assert [e["result"] for e in ends] == ["terminal"]
    assert ends[0]["error"].startswith(f"read-only: POST {CM} was not sent: {sim.url} is not the simulated cluster")
    try:
        client.get_json(f"{CM}/copy")
    except ApiError as exc:
        assert exc.code == 404  # nothing was sent
    else:
        raise AssertionError("the refused write reached the server")
