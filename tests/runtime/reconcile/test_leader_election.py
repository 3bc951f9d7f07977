"""Leader election on a Lease: acquire, renew, expiry measured on the candidate's own clock,
optimistic concurrency, release, step-down, and the run loop -- on a fake clock."""

from __future__ import annotations

import threading

import pytest

from controllers.reconcile import LeaderElector
from controllers.reconcile.leader_election import LeaderElectionRecord
from tests.runtime.reconcile.lease_fake import LeaseServer, MemoryLeaseLock


class PartitionableLock(MemoryLeaseLock):
    """A candidate whose own network can fail while the others still reach the lease."""

    def __init__(self, server: LeaseServer) -> None:
        super().__init__(server)
        self.partitioned = False

    def _check(self) -> None:
        if self.partitioned:
            raise ConnectionRefusedError("partitioned")


def elector(server: LeaseServer, identity: str, clock, **kwargs) -> LeaderElector:
    lock = kwargs.pop("lock", None) or MemoryLeaseLock(server)
    return LeaderElector(lock, identity, clock=clock, rand=lambda: 0.0, **kwargs)


def test_first_candidate_creates_the_lease_and_leads(clock) -> None:
    server = LeaseServer()
    a = elector(server, "a", clock)
    assert a.try_acquire_or_renew() and a.is_leader()
    assert server.record.holder_identity == "a" and server.record.lease_duration_seconds == 15
    assert server.record.leader_transitions == 0


def test_other_candidates_wait_while_the_lease_is_renewed(clock) -> None:
    server = LeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    a.try_acquire_or_renew()
    for _ in range(20):
        clock.step(2)
        assert a.try_acquire_or_renew()
        assert not b.try_acquire_or_renew()
    assert b.leader == "a"


def test_renewal_keeps_acquire_time_and_transitions(clock) -> None:
    server = LeaseServer()
    a = elector(server, "a", clock)
    a.try_acquire_or_renew()
    first = server.record
    clock.step(2)
    a.try_acquire_or_renew()
    assert server.record.acquire_time == first.acquire_time
    assert server.record.renew_time != first.renew_time


def test_takeover_once_the_lease_is_unchanged_for_its_duration(clock) -> None:
    server = LeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()  # b first observes the record now
    clock.step(14.9)
    assert not b.try_acquire_or_renew()
    clock.step(0.2)
    assert b.try_acquire_or_renew() and b.is_leader()
    assert server.record.holder_identity == "b" and server.record.leader_transitions == 1


def test_expiry_is_measured_from_when_the_candidate_saw_the_record_change(clock) -> None:
    server = LeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    a.try_acquire_or_renew()
    clock.step(100)  # b never looked during this time: no record age to trust
    assert not b.try_acquire_or_renew()
    clock.step(15.1)
    assert b.try_acquire_or_renew()


def test_a_lost_race_fails_the_round(clock) -> None:
    server = LeaseServer()
    a = elector(server, "a", clock)
    a.try_acquire_or_renew()

    class RacingLock(MemoryLeaseLock):
        def get(self) -> LeaderElectionRecord | None:
            record = super().get()
            a.try_acquire_or_renew()  # a renews between b's read and b's write
            return record

    b = elector(server, "b", clock, lock=RacingLock(server))
    b.try_acquire_or_renew()
    clock.step(16)
    assert not b.try_acquire_or_renew()
    assert server.record.holder_identity == "a"


def test_released_lease_is_taken_at_once(clock) -> None:
    server = LeaseServer()
    a, b = elector(server, "a", clock), elector(server, "b", clock)
    a.try_acquire_or_renew()
    a._release()
    assert server.record.holder_identity == ""
    assert b.try_acquire_or_renew()


def test_timings_must_nest() -> None:
    server = LeaseServer()
    with pytest.raises(ValueError):
        LeaderElector(MemoryLeaseLock(server), "a", lease_duration=10, renew_deadline=10)
    with pytest.raises(ValueError):
        LeaderElector(MemoryLeaseLock(server), "a", renew_deadline=2.4, retry_period=2)


def test_leader_that_cannot_renew_steps_down_and_another_takes_over(clock, eventually, observer) -> None:
    server = LeaseServer()
    lock_a = PartitionableLock(server)
    started = threading.Event()
    stopped = threading.Event()
    a = elector(server, "a", clock, lock=lock_a, on_started_leading=started.set, on_stopped_leading=stopped.set,
                observer=observer)
    b = elector(server, "b", clock)
    ta = threading.Thread(target=a.run, daemon=True)
    ta.start()
    assert started.wait(2)
    assert not b.try_acquire_or_renew()
    lock_a.partitioned = True
    stepped = 0
    while not stopped.is_set():
        assert clock.wait_for_waiters() or stopped.is_set()
        if stopped.is_set():
            break
        clock.step(2)
        stepped += 2
        assert stepped <= 12, "a leader must give up within renew_deadline (+ one retry period)"
        eventually(lambda: stopped.is_set() or clock.wait_for_waiters(timeout=0.05))
    ta.join(2)
    assert not a.is_leader()
    assert not b.try_acquire_or_renew()  # b has seen the last renewal only now: not expired for b yet
    clock.step(15.1)
    assert b.try_acquire_or_renew()
    assert [c["leader"] for c in observer.of("on_leader")] == [True, False]


def test_stop_releases_the_lease(clock, eventually) -> None:
    server = LeaseServer()
    started = threading.Event()
    a = elector(server, "a", clock, on_started_leading=started.set)
    t = threading.Thread(target=a.run, daemon=True)
    t.start()
    assert started.wait(2)
    a.stop()
    t.join(2)
    assert server.record.holder_identity == ""
