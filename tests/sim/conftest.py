"""Fixtures for the simulated cluster: a running ``SimCluster`` on a free loopback port, kubectl
pointed at it through a throwaway HOME/KUBECONFIG/cache dir, and the official client configured
from the kubeconfig the simulator writes (the same path users take)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client, config

from controllers.sim import SimCluster
from tests.conftest import ROOT, wait_until

KUBECTL = "/usr/bin/kubectl"
# Short kubelet delays and bookmark interval keep the suite fast without sleeping in tests. Node
# leases renew hourly instead of every 10 s, so that no background write races a test comparing the
# global resourceVersion before and after a rejected request (test_sim_nodes covers renewal).
# The root-CA publisher is off: these tests count a namespace's objects exactly (tests/differential
# and the demo run the simulator with it, as a real cluster has it).
FAST = {"schedule_delay": 0.02, "start_delay": 0.05, "bookmark_interval": 0.2, "log_interval": 0.05,
        "lease_interval": 3600.0, "publish_root_ca": False}


@pytest.fixture(scope="session")
def sim() -> Iterator[SimCluster]:
    """One cluster for the session; tests isolate themselves with their own namespace."""
    cluster = SimCluster(port=0, **FAST).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def fresh_sim() -> Iterator[SimCluster]:
    """A private cluster for tests that break things globally (compaction, dropped watches, reset)."""
    cluster = SimCluster(port=0, **FAST).start()
    yield cluster
    cluster.stop()


def make_namespace(cluster: SimCluster) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    rt = cluster.registry.lookup("", "v1", "namespaces")
    assert rt is not None
    cluster.call(lambda: cluster.store.create(rt, None, {"metadata": {"name": name}}))
    return name


def namespace_state(cluster: SimCluster, ns: str) -> dict[tuple[str, str, str], str]:
    """Every object of namespace ``ns`` ((group, resource, name) → its resourceVersion), read on the
    simulator's loop: what a request confined to ``ns`` could change. Not the store's revision: the
    session's simulator runs a control plane and kubelet that finish earlier tests' objects in the
    background, and one of their writes landed during a rejected request in a CI run."""
    def read() -> dict[tuple[str, str, str], str]:
        return {(*key, name): obj["metadata"]["resourceVersion"]
                for key, bucket in cluster.store.buckets.items()
                for (obj_ns, name), obj in bucket.objects.items() if obj_ns == ns}
    return cluster.call(read)


@pytest.fixture
def ns(sim: SimCluster) -> str:
    return make_namespace(sim)


class Kubectl:
    """Runs the real kubectl binary against one cluster, never touching the user's config."""

    def __init__(self, cluster: SimCluster, home: Path) -> None:
        self._use(cluster.write_kubeconfig(home / "kubeconfig"), home)

    @classmethod
    def for_kubeconfig(cls, kubeconfig: Path, home: Path) -> Kubectl:
        """kubectl for a cluster this process does not run (``manage.py simcluster``'s kubeconfig)."""
        kubectl = cls.__new__(cls)
        kubectl._use(kubeconfig, home)
        return kubectl

    def _use(self, kubeconfig: Path, home: Path) -> None:
        self.home = home
        self.kubeconfig = kubeconfig
        self.env = {"HOME": str(home), "KUBECONFIG": str(self.kubeconfig), "PATH": os.environ.get("PATH", ""),
                    "KUBECTL_KUBERC": "false"}

    def cmd(self, *args: str) -> list[str]:
        return [KUBECTL, "--cache-dir", str(self.home / "cache"), *args]

    def run(self, *args: str, input: str | None = None, timeout: float = 20, check: bool = True
            ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(self.cmd(*args), input=input, env=self.env, capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}")
        return result

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(self.cmd(*args), env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)

    @contextlib.contextmanager
    def background(self, *args: str, timeout: float = 10) -> Iterator[Output]:
        """Run ``kubectl args`` while the block runs; on leaving it, wait up to ``timeout`` for kubectl
        to exit and collect what it printed into the yielded ``Output`` (killed if it hangs or the
        block fails)."""
        proc = self.popen(*args)
        result = Output(proc)
        try:
            yield result
            result.out, result.err = proc.communicate(timeout=timeout)
            result.returncode = proc.returncode
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()

    @contextlib.contextmanager
    def watching(self, cluster: SimCluster, *args: str) -> Iterator[Output]:
        """Run ``kubectl get -w ...`` while the block runs, then end all watches cleanly (kubectl exits
        0 on a clean close) and collect what it printed."""
        with self.background("get", *args, "-w") as result:
            eventually(lambda: cluster.call(lambda: len(cluster.store.all_watchers())) >= 1)
            yield result
            time.sleep(0.3)  # let the last events reach kubectl before the stream ends
            urllib.request.urlopen(urllib.request.Request(cluster.url + "/_sim/watches/end", method="POST"),
                                   timeout=5)


@dataclasses.dataclass
class Output:
    """What a background kubectl printed, once it has exited."""

    proc: subprocess.Popen[str]
    out: str = ""
    err: str = ""
    returncode: int | None = None

    def events(self) -> list[list[str]]:
        """Rows after the header, split into columns."""
        return [line.split() for line in self.out.splitlines()[1:]]


def _require_kubectl() -> None:
    if not (os.path.exists(KUBECTL) and shutil.which(KUBECTL)):
        pytest.skip(f"{KUBECTL} is not installed on this machine; kubectl conformance needs the real binary")


@pytest.fixture
def kubectl(sim: SimCluster, tmp_path: Path) -> Kubectl:
    _require_kubectl()
    return Kubectl(sim, tmp_path)


@pytest.fixture
def fresh_kubectl(fresh_sim: SimCluster, tmp_path: Path) -> Kubectl:
    _require_kubectl()
    return Kubectl(fresh_sim, tmp_path)


def api_client_for(cluster: SimCluster, tmp: Path) -> client.ApiClient:
    path = cluster.write_kubeconfig(tmp / f"kubeconfig-{cluster.port}")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    return client.ApiClient(configuration)


@pytest.fixture
def api(sim: SimCluster, tmp_path: Path) -> Iterator[client.ApiClient]:
    with api_client_for(sim, tmp_path) as c:
        yield c


@pytest.fixture
def fresh_api(fresh_sim: SimCluster, tmp_path: Path) -> Iterator[client.ApiClient]:
    with api_client_for(fresh_sim, tmp_path) as c:
        yield c


def eventually(check, timeout: float = 5.0, interval: float = 0.02):  # type: ignore[no-untyped-def]
    """Poll ``check`` until it returns a truthy value (returned) or fail after ``timeout`` seconds."""
    return wait_until(check, timeout, interval=interval)


@contextlib.contextmanager
def simcluster_command(*args: str, env: dict[str, str]) -> Iterator[subprocess.Popen[str]]:
    """``manage.py simcluster --port 0 ARGS`` as a child process (text pipes); killed if the block
    leaves it running. Stop it inside the block with ``terminate(proc)``."""
    proc = subprocess.Popen([sys.executable, "manage.py", "simcluster", "--port", "0", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def terminate(proc: subprocess.Popen[str], timeout: float = 20) -> tuple[str, str]:
    """SIGTERM (the graceful stop) and wait; returns what the process wrote (stdout, stderr)."""
    proc.send_signal(signal.SIGTERM)
    return proc.communicate(timeout=timeout)
