"""Manager: controllers on shared informers converge; /metrics speaks controller-runtime's names;
with leader election only the leader reconciles and a standby takes over."""

from __future__ import annotations

import threading
import urllib.request

from controllers.reconcile import EnqueueRequestForOwner, Manager, Request, Result
from tests.runtime.informers.fake_apiserver import FakeClient
from tests.runtime.reconcile.lease_fake import LeaseServer, MemoryLeaseLock


class Recorder:
    def __init__(self) -> None:
        self.seen: list[Request] = []
        self.lock = threading.Lock()

    def reconcile(self, request: Request) -> Result:
        with self.lock:
            self.seen.append(request)
        return Result()


def test_controllers_share_one_informer_and_reconcile_every_object(clock, eventually) -> None:
    client = FakeClient()
    pods = client.list_watch("v1", "Pod")
    pods.create("a")
    manager = Manager(client, clock=clock)
    by_pod, by_owner = Recorder(), Recorder()
    informer = manager.informer_for("v1", "Pod")
    manager.new_controller("pods", by_pod).watch(informer)
    manager.new_controller("owners", by_owner).watch(informer, EnqueueRequestForOwner("apps/v1", "ReplicaSet"))
    assert manager.informer_for("v1", "Pod") is informer
    manager.start()
    try:
        eventually(lambda: by_pod.seen)
        pods.create("b")
        eventually(lambda: {r.name for r in by_pod.seen} == {"a", "b"})
        assert by_owner.seen == []
    finally:
        manager.stop()


def test_metrics_endpoint_serves_controller_runtime_series(clock, eventually) -> None:
    client = FakeClient()
    client.list_watch("v1", "Pod").create("a")
    manager = Manager(client, clock=clock, metrics_port=0)
    recorder = Recorder()
    manager.new_controller("pods", recorder, max_concurrent_reconciles=2).watch(manager.informer_for("v1", "Pod"))
    manager.start()
    try:
        eventually(lambda: recorder.seen)
        eventually(lambda: manager.metrics.reconcile_total.labels("pods", "success")._value.get() == 1)
        text = urllib.request.urlopen(manager.metrics_url, timeout=5).read().decode()
    finally:
        manager.stop()
    assert 'controller_runtime_reconcile_total{controller="pods",result="success"} 1.0' in text
    assert 'controller_runtime_max_concurrent_reconciles{controller="pods"} 2.0' in text
    assert 'workqueue_adds_total{controller="pods",name="pods"} 1.0' in text
    assert 'workqueue_depth{controller="pods",name="pods"} 0.0' in text
    assert "workqueue_queue_duration_seconds_bucket" in text and "workqueue_longest_running_processor_seconds" in text


def test_only_the_leader_reconciles_and_a_standby_takes_over(clock, eventually, observer) -> None:
    client = FakeClient()
    client.list_watch("v1", "Pod").create("a")
    lease = LeaseServer()
    first, second = Recorder(), Recorder()
    a = Manager(client, clock=clock, leader_election_lock=MemoryLeaseLock(lease), identity="a", observer=observer)
    b = Manager(client, clock=clock, leader_election_lock=MemoryLeaseLock(lease), identity="b")
    a.new_controller("pods", first).watch(a.informer_for("v1", "Pod"))
    b.new_controller("pods", second).watch(b.informer_for("v1", "Pod"))
    a.start()
    eventually(lambda: first.seen)
    b.start()
    try:
        eventually(lambda: b.informer_for("v1", "Pod").has_synced())
        assert clock.wait_for_waiters(2)  # a renewing, b campaigning
        clock.step(2.5)
        assert second.seen == [], "a standby must not reconcile"
        a.stop()  # releases the lease
        eventually(lambda: lease.record.holder_identity in ("", "b"))  # released (b may already hold it)
        for _ in range(3):
            clock.wait_for_waiters()
            clock.step(5)
            if second.seen:
                break
        eventually(lambda: second.seen)
        assert lease.record.holder_identity == "b"
    finally:
        b.stop()
    assert observer.of("on_leader")[0] == {"identity": "a", "leader": True, "holder": "a"}


class Switch:
    """A runnable that records its starts and stops."""

    def __init__(self, need_leader_election: bool = True, fail: bool = False) -> None:
        self.need_leader_election = need_leader_election
        self.fail = fail
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")
        if self.fail:
            raise RuntimeError("user code failed to start")

    def stop(self) -> None:
        self.calls.append("stop")


def test_runnables_start_with_the_manager_without_leader_election_and_failures_are_contained(clock) -> None:
    manager = Manager(FakeClient(), clock=clock)
    plain, broken = Switch(), Switch(fail=True)
    manager.add_runnable(plain)
    manager.add_runnable(broken)
    manager.start()
    late = Switch()
    manager.add_runnable(late)  # added while running: started at once
    manager.stop()
    assert plain.calls == ["start", "stop"] and late.calls == ["start", "stop"]
    assert broken.calls == ["start", "stop"]


def test_leader_runnables_start_only_when_leading_and_stop_when_leadership_ends(clock, eventually) -> None:
    lease = LeaseServer()
    holder = Manager(FakeClient(), clock=clock, leader_election_lock=MemoryLeaseLock(lease), identity="a")
    standby = Manager(FakeClient(), clock=clock, leader_election_lock=MemoryLeaseLock(lease), identity="b")
    on_leader, everywhere = Switch(), Switch(need_leader_election=False)
    standby.add_runnable(on_leader)
    standby.add_runnable(everywhere)
    holder.start()
    eventually(lambda: lease.record is not None and lease.record.holder_identity == "a")
    standby.start()
    try:
        assert everywhere.calls == ["start"], "need_leader_election=False runs on every replica"
        assert clock.wait_for_waiters(2)
        clock.step(2.5)
        assert on_leader.calls == [], "a standby must not run leader-only work"
        holder.stop()  # releases the lease
        for _ in range(3):
            clock.wait_for_waiters()
            clock.step(5)
            if on_leader.calls:
                break
        eventually(lambda: on_leader.calls == ["start"])
    finally:
        standby.stop()
    assert on_leader.calls == ["start", "stop"] and everywhere.calls == ["start", "stop"]
