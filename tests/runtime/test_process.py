"""Supervisor: restarts supervised children, gives up on crash loops and unsupervised exits, hands a
standby in and out by its want file. Real child processes (short Python scripts); a fake clock for
the restart window."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from controllers.clock import FakeClock
from controllers.process import RESTART_LIMIT, RESTART_WINDOW, Child, ChildExited, NotReady, Supervisor

EXIT_AT_ONCE = "import sys; print('bye'); sys.exit(3)"
RUN_LONG = "import time; time.sleep(60)"


def child(tmp_path: Path, name: str, script: str, *, clock: FakeClock, supervised: bool = False) -> Child:
    return Child(name, [sys.executable, "-c", script], {}, tmp_path / f"{name}.log", cwd=tmp_path,
                 pid_file=tmp_path / f"{name}.pid" if supervised else None, clock=clock)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def said() -> list[str]:
    return []


@pytest.fixture
def supervisor(clock: FakeClock, said: list[str], tmp_path: Path):
    s = Supervisor(clock=clock, say=said.append, want_standby=tmp_path / "standby.want")
    yield s
    s.stop_all()


def test_a_supervised_child_that_exits_is_restarted_and_its_pid_file_follows(supervisor, clock, said, tmp_path):
    worker = supervisor.start(child(tmp_path, "worker", EXIT_AT_ONCE, clock=clock, supervised=True))
    first = worker.proc.pid
    worker.proc.wait()
    supervisor.check()
    assert worker.proc.pid != first and (tmp_path / "worker.pid").read_text() == str(worker.proc.pid)
    assert said == [f"worker exited with 3; restarted (pid {worker.proc.pid})"]


def test_a_crash_looping_child_ends_supervision_until_the_window_has_passed(supervisor, clock, tmp_path):
    worker = supervisor.start(child(tmp_path, "worker", EXIT_AT_ONCE, clock=clock, supervised=True))
    for _ in range(RESTART_LIMIT):
        worker.proc.wait()
        supervisor.check()
    worker.proc.wait()
    with pytest.raises(ChildExited, match="worker exited with 3"):
        supervisor.check()
    clock.step(RESTART_WINDOW)
    supervisor.check()  # the old restarts are out of the window: restarted again


def test_an_unsupervised_child_that_exits_ends_supervision_with_its_log(supervisor, clock, tmp_path):
    supervisor.start(child(tmp_path, "dashboard", EXIT_AT_ONCE, clock=clock)).proc.wait()
    with pytest.raises(ChildExited, match=r"(?s)dashboard exited with 3; last lines of .*bye"):
        supervisor.check()


def test_the_standby_runs_while_its_want_file_exists_and_stops_before_the_last_child(supervisor, clock, said,
                                                                                       tmp_path):
    supervisor.make_standby = lambda: child(tmp_path, "standby", RUN_LONG, clock=clock, supervised=True)
    worker = supervisor.start(child(tmp_path, "worker", RUN_LONG, clock=clock, supervised=True))
    dashboard = supervisor.start(child(tmp_path, "dashboard", RUN_LONG, clock=clock))
    supervisor.check()
    assert supervisor.standby is None
    (tmp_path / "standby.want").touch()
    supervisor.check()
    standby = supervisor.standby
    assert standby is not None and standby.alive()
    assert supervisor.children == [worker, standby, dashboard]
    supervisor.check()
    assert supervisor.standby is standby, "one standby, however long the file stays"
    (tmp_path / "standby.want").unlink()
    supervisor.check()
    assert supervisor.standby is None and not standby.alive() and supervisor.children == [worker, dashboard]
    assert not (tmp_path / "standby.pid").exists()
    assert said == [f"standby:   standby started (pid {standby.proc.pid})", "standby:   standby stopped"]


def test_wait_ready_fails_fast_when_a_child_dies_during_start_up(supervisor, clock, tmp_path):
    supervisor.start(child(tmp_path, "cluster", EXIT_AT_ONCE, clock=clock)).proc.wait()
    with pytest.raises(ChildExited, match="cluster exited during start-up"):
        supervisor.wait_ready(lambda: False, "the cluster did not start")


def test_wait_ready_gives_up_after_its_timeout(supervisor, clock):
    def not_yet() -> bool:
        clock.step(5.0)  # the check itself outlasts the timeout: no (fake-clock) sleep follows
        return False

    with pytest.raises(NotReady, match="the kubeconfig did not appear within 3s"):
        supervisor.wait_ready(not_yet, "the kubeconfig did not appear", timeout=3.0)
