"""Shared fixtures for the runtime tests: a fake clock, a recording observer, ``eventually`` for
effects that happen on a background thread after a fake-clock step (bounded real-time poll), and
``sim``, the simulated API server over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from controllers.clock import FakeClock
from controllers.observer import Observer
from tests.conftest import wait_until as shared_wait_until


class RecordingObserver(Observer):
    """Records every hook call as ``(hook, args, kwargs)``."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self._lock = threading.Lock()

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("on_"):
            def record(*args: Any, **kwargs: Any) -> None:
                with self._lock:
                    self.calls.append((name, args, kwargs))
            return record
        return super().__getattribute__(name)

    def ops(self, hook: str, field: str = "op") -> list[Any]:
        with self._lock:
            return [kw.get(field) for h, _, kw in self.calls if h == hook]

    def of(self, hook: str) -> list[dict[str, Any]]:
        with self._lock:
            return [kw for h, _, kw in self.calls if h == hook]


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
    return shared_wait_until(predicate, timeout, interval=0.001)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def observer() -> RecordingObserver:
    return RecordingObserver()


@pytest.fixture
def eventually() -> Callable[..., Any]:
    return wait_until


@pytest.fixture
def sim() -> Iterator[Any]:
    """A simulated API server on a free loopback port, no control plane, bookmarks every 0.2 s."""
    sim_server = pytest.importorskip("controllers.sim.server", reason="the simulator is not available")
    cluster = sim_server.SimCluster(port=0, bookmark_interval=0.2, control_plane=False).start()
    try:
        yield cluster
    finally:
        cluster.stop()
