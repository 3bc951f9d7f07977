"""The real API server the benchmarks hold ctrlscope to: a kube-apiserver v1.37.2 with etcd, started by
``controllers/realcluster`` (built from upstream, cached outside the clone), reached over HTTPS with a
bearer token as any client reaches a cluster.

What bench/simcluster.py and bench/informer.py share:

* ``Target``: where an API server is and how a client authenticates (no token for the simulator);
* ``real_cluster``: a control plane without kwok nodes, started for the length of a ``with`` block,
  yielding the cluster (its kubeconfig, for clients that read one) and its ``Target``, whose ``pids``
  are kube-apiserver's and etcd's (the processes whose CPU a write costs);
* ``ensure_namespaces``: namespaces created through the API, waiting for each one's ``default``
  ServiceAccount (the controller-manager makes it; the API server refuses Pods until it exists);
* ``UNSCHEDULED``: the ``schedulerName`` benchmark Pods carry. No scheduler of that name runs, so they
  stay Pending and nothing else (scheduler, kubelets, pod GC) writes to them: every event on them is
  the benchmark's own.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.request
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

UNSCHEDULED = "ctrlscope-bench-unscheduled"


@dataclass
class Target:
    """An API server under test: where it is and how a client authenticates (none for the simulator)."""

    name: str
    url: str
    token: str = ""
    cafile: str = ""
    pids: list[int] = field(default_factory=list)  # server processes whose CPU counts

    def ssl(self) -> ssl.SSLContext | None:
        return ssl.create_default_context(cafile=self.cafile) if self.cafile else None

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def get(self, path: str, timeout: float = 300, accept: str = "application/json") -> bytes:
        request = urllib.request.Request(self.url + path, headers={**self.headers(), "Accept": accept})
        with urllib.request.urlopen(request, timeout=timeout, context=self.ssl()) as resp:
            return resp.read()


@contextmanager
def real_cluster(run_dir: Path, say: Any = print) -> Iterator[tuple[Any, Target]]:
    """A real control plane (no nodes) in ``run_dir`` until the block ends: (RealCluster, Target).
    The first call on a machine builds it (minutes; ``say`` reports the progress)."""
    from controllers.realcluster import RealCluster, ensure_built

    cluster = RealCluster(ensure_built(say=lambda line: say(line)), run_dir / "realcluster", nodes=0,
                          say=lambda line: None)
    cluster.start(run_dir / "kubeconfig-real.yaml")
    try:
        yield cluster, Target("real", cluster.server, cluster.token, str(cluster.ca_file),
                              [c.proc.pid for c in cluster.children if c.name in ("kube-apiserver", "etcd")])
    finally:
        cluster.stop()


async def ensure_namespaces(session: Any, target: Target, names: Iterable[str]) -> None:
    """Create ``names`` (existing ones are fine) through an aiohttp ``session`` that carries the
    target's headers, then wait until each has its ``default`` ServiceAccount: a real API server
    refuses Pods in a namespace without it. The simulator has it at once."""
    names = list(names)
    for ns in names:
        async with session.post(f"{target.url}/api/v1/namespaces", data=orjson.dumps({"metadata": {"name": ns}}),
                                headers={"Content-Type": "application/json"}) as resp:
            assert resp.status in (201, 409), await resp.text()
    deadline = time.monotonic() + 60
    for ns in names:
        while True:
            async with session.get(f"{target.url}/api/v1/namespaces/{ns}/serviceaccounts/default") as resp:
                if resp.status == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"namespace {ns} got no default ServiceAccount within 60 s")
            await asyncio.sleep(0.1)
