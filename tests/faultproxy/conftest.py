"""Fixtures for the fault proxy: in front of the simulator (fast) or of the real control plane.

``proxy_in_front(kubeconfig)`` starts an in-process ``FaultProxy`` (its own thread and loop, as the
simulator runs in tests), writes its kubeconfig and returns a ``Proxied``: the proxy, that
kubeconfig, and the faults it published (its ``on_fault`` callback, which ``manage.py faultproxy``
hands to its telemetry). Every proxy stops at the end of the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from controllers.faultproxy.server import FaultProxy
from controllers.faultproxy.upstream import Upstream
from controllers.informers.http_client import KubernetesClient
from controllers.sim import SimCluster
from controllers.sim.faults_client import SimFaults
from tests.golang.conftest import go_process, go_programs  # noqa: F401  (the Go programs, built once)
from tests.sim.conftest import FAST


class Proxied(NamedTuple):
    proxy: FaultProxy
    kubeconfig: Path
    published: list[dict[str, Any]]

    def client(self) -> KubernetesClient:
        return KubernetesClient.from_kubeconfig(str(self.kubeconfig))

    def faults(self) -> SimFaults:
        """``SimFaults`` as the scenarios and the dashboard use it, through the proxy."""
        return SimFaults(self.client(), timeout=30)


@pytest.fixture
def proxy_in_front(tmp_path: Path) -> Iterator[Callable[..., Proxied]]:
    started: list[FaultProxy] = []

    def start(upstream_kubeconfig: str | Path, **options: Any) -> Proxied:
        published: list[dict[str, Any]] = []
        proxy = FaultProxy(Upstream.from_kubeconfig(str(upstream_kubeconfig)), on_fault=published.append,
                           **options).start()
        started.append(proxy)
        return Proxied(proxy, proxy.write_kubeconfig(tmp_path / f"proxy-{len(started)}.yaml"), published)

    yield start
    for proxy in reversed(started):
        proxy.stop()


@pytest.fixture
def sim_upstream(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    """A fresh simulator and its kubeconfig: the upstream of a proxy that needs no real cluster."""
    with SimCluster(port=0, **FAST) as sim:
        yield sim, sim.write_kubeconfig(tmp_path / "sim.yaml")
