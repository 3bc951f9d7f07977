"""An in-memory Lease with resourceVersion semantics, for leader-election tests."""

from __future__ import annotations

from controllers.informers import ApiError
from controllers.reconcile.leader_election import LeaderElectionRecord


class LeaseServer:
    """One Lease with a resourceVersion, shared by the candidates' locks."""

    def __init__(self) -> None:
        self.record: LeaderElectionRecord | None = None
        self.rv = 0
        self.down = False


class MemoryLeaseLock:
    def __init__(self, server: LeaseServer) -> None:
        self.server = server
        self.seen_rv = -1

    def describe(self) -> str:
        return "kube-system/ctrlscope"

    def _check(self) -> None:
        if self.server.down:
            raise ConnectionRefusedError("partitioned")

    def get(self) -> LeaderElectionRecord | None:
        self._check()
        self.seen_rv = self.server.rv
        return self.server.record

    def create(self, record: LeaderElectionRecord) -> None:
        self._check()
        if self.server.record is not None:
            raise ApiError(409, "AlreadyExists", "lease exists")
        self.server.record, self.server.rv = record, self.server.rv + 1
        self.seen_rv = self.server.rv

    def update(self, record: LeaderElectionRecord) -> None:
        self._check()
        if self.seen_rv != self.server.rv:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.server.record, self.server.rv = record, self.server.rv + 1
        self.seen_rv = self.server.rv
