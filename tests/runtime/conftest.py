"""Shared fixtures for the runtime tests: a fake clock, a recording observer, and ``eventually``
for effects that happen on a background thread after a fake-clock step (bounded real-time poll)."""

from __future__ import annotations

import threading
from collections.abc import Callable
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
