"""Fixtures for the Go module's programs: built once per session with the machine's Go (or the one
``make`` got into .venv), run against ``manage.py simcluster`` and a real Redis.

Without a Go toolchain these tests are skipped on a developer's machine and fail in CI, which
always has one (``make test`` gets it).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers import golang
from tests.conftest import LoggedProcess
from tests.dashboard.test_faults_browser import sim_kubeconfig  # noqa: F401  (the simulator, publishing faults)

PROGRAMS = (*golang.SAMPLES, "fidelity", "scoped-informer", "raw-watcher", "status-writer")


@pytest.fixture(scope="session")
def go_programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    if golang.find_go() is None:
        if os.environ.get("CI"):
            pytest.fail("no Go toolchain in CI: make test should have provided one (scripts/go-toolchain)")
        pytest.skip("no Go toolchain (CTRLSCOPE_GO, go on PATH or /usr/local/go/bin/go)")
    try:
        return golang.build(tmp_path_factory.mktemp("go-bin"), programs=PROGRAMS)
    except golang.GoUnavailable as exc:
        pytest.fail(str(exc))


class GoProcess(LoggedProcess):
    """One Go program run as a user would: flags, REDIS_URL and CTRLSCOPE_PREFIX; output to a log."""

    def __init__(self, path: Path, args: list[str], *, redis_url: str, prefix: str, log: Path,
                 env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, **(env or {})}
        super().__init__([str(path), *args], full_env, log)


@pytest.fixture
def go_process(go_programs: dict[str, Path], redis_url: str, prefix: str, tmp_path: Path) -> Iterator:
    started: list[GoProcess] = []

    def start(program: str, *args: str, **env: str) -> GoProcess:
        p = GoProcess(go_programs[program], list(args), redis_url=redis_url, prefix=prefix,
                      log=tmp_path / f"{program}-{len(started)}.log", env=env)
        started.append(p)
        return p

    yield start
    for p in reversed(started):
        p.stop()
