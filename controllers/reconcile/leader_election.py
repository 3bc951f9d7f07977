"""Leader election on a coordination.k8s.io/v1 Lease (client-go ``tools/leaderelection``).

Candidates race to hold one Lease. The holder renews ``spec.renewTime`` every ``retry_period``;
others poll every ``retry_period`` (x up to 2.2 jitter) and take over once the lease has not
changed for ``lease_duration`` -- measured on *their own* clock from when they last saw the record
change, never by comparing timestamps across machines. A leader that cannot renew within
``renew_deadline`` steps down (``on_stopped_leading``). Writes use the Lease's resourceVersion, so
two candidates cannot both win one round. There is no fencing: a paused old leader may still act
for up to ``lease_duration`` -- which is why the defaults (15 s / 10 s / 2 s) keep
lease_duration > renew_deadline > 1.2 x retry_period.

The lease is reached through a small ``LeaseLock`` protocol (``KubernetesLeaseLock`` over HTTP;
tests use an in-memory one). Transitions are reported to the observer's ``on_leader``.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from controllers.clock import Clock, RealClock, StopSignal
from controllers.informers.http_client import KubernetesClient
from controllers.informers.listwatch import ApiError
from controllers.observer import NOOP_OBSERVER, Observer, active_observer

log = logging.getLogger("ctrlscope.leaderelection")

JITTER_FACTOR = 1.2


def micro_time(wall: float) -> str:
    """Kubernetes MicroTime (RFC 3339 with microseconds, UTC)."""
    seconds = int(wall)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int((wall - seconds) * 1e6):06d}Z"


@dataclass(frozen=True)
class LeaderElectionRecord:
    """The Lease spec fields leader election reads and writes."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    leader_transitions: int = 0

    def to_spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder_identity, "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.leader_transitions}

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> LeaderElectionRecord:
        return cls(spec.get("holderIdentity") or "", int(spec.get("leaseDurationSeconds") or 0),
                   spec.get("acquireTime") or "", spec.get("renewTime") or "", int(spec.get("leaseTransitions") or 0))


class LeaseLock(Protocol):
    """Read and write one Lease. ``get`` returns ``None`` if it does not exist; ``create``/``update``
    raise ``ApiError`` (409 on a lost race) and ``update`` must be conditional on the last ``get``."""

    def get(self) -> LeaderElectionRecord | None: ...

    def create(self, record: LeaderElectionRecord) -> None: ...

    def update(self, record: LeaderElectionRecord) -> None: ...

    def describe(self) -> str: ...


class KubernetesLeaseLock:
    """A ``LeaseLock`` on ``coordination.k8s.io/v1`` Lease ``namespace/name`` over HTTP."""

    def __init__(self, client: KubernetesClient, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self._collection, _ = self.paths(namespace, name)
        self._lease: dict[str, Any] | None = None

    @staticmethod
    def paths(namespace: str, name: str) -> list[str]:
        """The two paths this lock writes: the collection (create) and the Lease (update)."""
        collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        return [collection, f"{collection}/{name}"]

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    def get(self) -> LeaderElectionRecord | None:
        try:
            self._lease = self.client.get_json(f"{self._collection}/{self.name}")
        except ApiError as exc:
            if exc.code == 404:
                return None
            raise
        return LeaderElectionRecord.from_spec(self._lease.get("spec") or {})

    def create(self, record: LeaderElectionRecord) -> None:
        self._lease = self.client.send_json("POST", self._collection, {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace}, "spec": record.to_spec()})

    def update(self, record: LeaderElectionRecord) -> None:
        if self._lease is None:
            raise ApiError(404, "NotFound", "lease not read yet")
        lease = dict(self._lease, spec=record.to_spec())
        self._lease = self.client.send_json("PUT", f"{self._collection}/{self.name}", lease)


class LeaderElector:
    """Acquire, renew and release leadership of one Lease for ``identity``."""

    def __init__(self, lock: LeaseLock, identity: str, *, name: str = "",
                 lease_duration: float = 15.0, renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_started_leading: Callable[[], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None,
                 release_on_cancel: bool = True, clock: Clock | None = None,
                 observer: Observer | None = None, rand: Callable[[], float] = random.random) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renew_deadline must be greater than 1.2 x retry_period")
        self.lock = lock
        self.identity = identity
        self.name = name or lock.describe()
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.release_on_cancel = release_on_cancel
        self.clock: Clock = clock or RealClock()
        self.observer: Observer = observer or NOOP_OBSERVER
        self._obs = active_observer(self.observer)
        self._rand = rand
        self._observed: LeaderElectionRecord | None = None
        self._observed_time = 0.0
        self._reported_leader: str | None = None
        self._stop = StopSignal(self.clock)

    # -- state ---------------------------------------------------------------------------------
    def is_leader(self) -> bool:
        return self._observed is not None and self._observed.holder_identity == self.identity

    @property
    def leader(self) -> str | None:
        """The last observed holder ("" or None if nobody holds the lease)."""
        return self._observed.holder_identity if self._observed else None

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + self.lease_duration > now

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self.clock.now()

    # -- one attempt ---------------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """One round: take or renew the lease if we may. True if we hold it afterwards."""
        now = self.clock.now()
        stamp = micro_time(self.clock.wall())
        record = LeaderElectionRecord(self.identity, int(self.lease_duration), stamp, stamp, 0)
        try:
            current = self.lock.get()
            if current is None:
                self.lock.create(record)
                self._set_observed(record)
                return True
            if current != self._observed:
                self._set_observed(current)
            if current.holder_identity and self._lease_valid(now) and not self.is_leader():
                return False
            if self.is_leader():
                record = LeaderElectionRecord(self.identity, int(self.lease_duration), current.acquire_time, stamp,
                                              current.leader_transitions)
            else:
                record = LeaderElectionRecord(self.identity, int(self.lease_duration), stamp, stamp,
                                              current.leader_transitions + 1)
            self.lock.update(record)
        except (ApiError, ConnectionError) as exc:
            log.info("leader election %s: %s", self.name, exc)
            return False
        self._set_observed(record)
        return True

    def _report_transition(self) -> None:
        holder = self.leader
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if self._obs is not None:
            self._obs.on_leader(self.name, identity=self.identity, leader=holder == self.identity, holder=holder)
        if self.on_new_leader is not None and holder:
            self.on_new_leader(holder)

    # -- loop ----------------------------------------------------------------------------------
    def run(self) -> None:
        """Block: acquire, lead (``on_started_leading`` on its own thread) and renew until the
        lease is lost or ``stop`` is called; then ``on_stopped_leading``."""
        if not self._acquire():
            return
        if self.on_started_leading is not None:
            threading.Thread(target=self.on_started_leading, name=f"leading-{self.name}", daemon=True).start()
        try:
            self._renew()
        finally:
            self._report_transition()
            if self.on_stopped_leading is not None:
                self.on_stopped_leading()

    def stop(self) -> None:
        """Stop campaigning or leading (releasing the lease if ``release_on_cancel``)."""
        self._stop.stop()

    def _acquire(self) -> bool:
        while not self._stop.stopped:
            acquired = self.try_acquire_or_renew()
            self._report_transition()
            if acquired:
                return True
            if not self._stop.wait(self.retry_period * (1 + self._rand() * JITTER_FACTOR)):
                break
        return False

    def _renew(self) -> None:
        while not self._stop.stopped:
            deadline = self.clock.now() + self.renew_deadline
            renewed = False
            while not self._stop.stopped:
                if self.try_acquire_or_renew():
                    renewed = True
                    break
                if self.clock.now() + self.retry_period > deadline or not self._stop.wait(self.retry_period):
                    break
            self._report_transition()
            if not renewed:
                if not self._stop.stopped:
                    log.warning("leader election %s: failed to renew lease, stepping down", self.name)
                    self._observed = None
                break
            if not self._stop.wait(self.retry_period):
                break
        if self._stop.stopped and self.release_on_cancel and self.is_leader():
            self._release()

    def _release(self) -> None:
        stamp = micro_time(self.clock.wall())
        transitions = self._observed.leader_transitions if self._observed else 0
        record = LeaderElectionRecord("", 1, stamp, stamp, transitions)
        try:
            self.lock.update(record)
            self._set_observed(record)
        except (ApiError, ConnectionError) as exc:
            log.info("leader election %s: release failed: %s", self.name, exc)
