"""WriteGuard: read-only by default anywhere but the simulated cluster (write_guard.py)."""

from __future__ import annotations

import pytest

from controllers.informers.write_guard import ReadOnlyError, WriteGuard
from controllers.simulated import SIMULATOR_GIT_COMMIT, is_simulated

SERVER = "https://prod.example:6443"


def test_reads_pass_and_writes_are_refused_with_what_to_do():
    guard = WriteGuard(server=SERVER, simulated=False)
    for method in ("GET", "get", "HEAD", "OPTIONS"):
        guard.check(method, "/api/v1/pods")
    for method in ("POST", "PUT", "PATCH", "DELETE", "delete"):
        with pytest.raises(ReadOnlyError) as err:
            guard.check(method, "/api/v1/namespaces/a/configmaps/c")
        assert str(err.value).startswith(f"read-only: {method.upper()} /api/v1/namespaces/a/configmaps/c was not sent")
        assert "is not the simulated cluster" in str(err.value) and "--allow-writes" in str(err.value)
    assert guard.mode == "read-only" and not guard.writes_allowed


def test_the_simulator_and_allow_writes_permit_writes():
    assert WriteGuard(server=SERVER, simulated=True).mode == "allowed"
    guard = WriteGuard(server=SERVER, simulated=False, allow_writes=True)
    guard.check("DELETE", "/api/v1/namespaces/a/pods/p")
    assert guard.mode == "allowed"


def test_only_the_exempt_paths_may_be_written_read_only():
    lease = "/apis/coordination.k8s.io/v1/namespaces/ns/leases/worker"
    guard = WriteGuard(server=SERVER, simulated=False, exempt=[lease])
    guard.check("PUT", lease)
    with pytest.raises(ReadOnlyError):
        guard.check("PUT", lease + "-other")


def test_an_unknown_server_is_asked_again_on_the_first_write_and_not_knowing_is_not_permission():
    answers = [None, None, True]
    changed = []
    guard = WriteGuard(server=SERVER, probe=lambda: answers.pop(0), on_change=changed.append)
    with pytest.raises(ReadOnlyError, match="did not say whether it is the simulated cluster"):
        guard.check("POST", "/api/v1/namespaces/a/configmaps")
    with pytest.raises(ReadOnlyError):
        guard.check("POST", "/api/v1/namespaces/a/configmaps")
    guard.check("POST", "/api/v1/namespaces/a/configmaps")  # the server answered: it is the simulator
    assert guard.simulated is True and changed == [guard] and answers == []
    guard.check("POST", "/api/v1/namespaces/a/configmaps")  # known now: not asked again


def test_a_real_servers_answer_is_kept():
    calls = []
    guard = WriteGuard(server=SERVER, probe=lambda: calls.append(1) or False)
    for _ in range(3):
        with pytest.raises(ReadOnlyError, match="is not the simulated cluster"):
            guard.check("PATCH", "/api/v1/nodes/n")
    assert calls == [1]


def test_the_simulator_is_told_by_its_version_answer():
    assert is_simulated({"gitCommit": SIMULATOR_GIT_COMMIT, "gitVersion": "v1.31.0"})
    assert not is_simulated({"gitCommit": "0123456789abcdef0123456789abcdef01234567"})
    assert not is_simulated(None) and not is_simulated(["gitCommit"]) and not is_simulated({})
