"""``manage.py realcluster`` as a user runs it: a real control plane on loopback from one command.

The command builds (a no-op here: make test built it first), starts etcd, kube-apiserver, the
controller-manager, the scheduler and kwok nodes, and writes the kubeconfig only when the cluster
takes pods; kubectl then works unchanged, a Deployment becomes Running pods on the fake nodes, and
SIGTERM leaves no process behind.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.conftest import ROOT, LoggedProcess, wait_until

pytestmark = [pytest.mark.realcluster, pytest.mark.kubectl]
KUBECTL = "/usr/bin/kubectl"


def _kubectl(kubeconfig: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([KUBECTL, "--kubeconfig", str(kubeconfig), *args], capture_output=True, text=True,
                          timeout=timeout)


def _processes_under(path: Path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(str(path) in arg for arg in proc.info["cmdline"] or []):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def test_realcluster_runs_a_control_plane_that_kubectl_and_a_deployment_use_and_stops_clean(
        realcluster_binaries, tmp_path: Path):
    if not os.path.exists(KUBECTL):
        pytest.skip("kubectl is not at /usr/bin/kubectl")
    kubeconfig, data = tmp_path / "kubeconfig.yaml", tmp_path / "cluster"
    proc = LoggedProcess([sys.executable, "-m", "dashboard", "realcluster", "--kubeconfig", str(kubeconfig),
                          "--data-dir", str(data), "--nodes", "2"],
                         {**os.environ, "CTRLSCOPE_DEMO": "1"}, tmp_path / "realcluster.log", cwd=ROOT)
    try:
        proc.wait_for_output("realcluster: ready", timeout=180)
        assert kubeconfig.exists(), "ready was said before the kubeconfig was written"
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600", "the admin kubeconfig holds a token"
        version = json.loads(_kubectl(kubeconfig, "version", "-o", "json").stdout)
        assert version["serverVersion"]["gitVersion"] == realcluster_binaries.kubernetes_version
        nodes = _kubectl(kubeconfig, "get", "nodes", "--no-headers")
        assert nodes.returncode == 0, nodes.stderr
        assert nodes.stdout.count(" Ready ") == 2, nodes.stdout

        made = _kubectl(kubeconfig, "create", "deployment", "web", "--image=nginx:1.27", "--replicas=3")
        assert made.returncode == 0, made.stderr

        def running() -> int:
            pods = json.loads(_kubectl(kubeconfig, "get", "pods", "-l", "app=web", "-o", "json").stdout)["items"]
            return sum(p["status"].get("phase") == "Running" for p in pods)

        wait_until(lambda: running() == 3, timeout=90, what="3 Running pods of the Deployment", interval=0.5)
        status = json.loads(_kubectl(kubeconfig, "get", "deployment", "web", "-o", "json").stdout)["status"]
        wait_until(lambda: json.loads(_kubectl(kubeconfig, "get", "deployment", "web", "-o", "json").stdout)
                   ["status"].get("availableReplicas") == 3, timeout=60, what="3 available replicas", interval=0.5)
        assert status["replicas"] == 3
        components = sorted(Path(p.info["cmdline"][0]).name for p in _processes_under(data) if p.pid != proc.proc.pid)
        assert components == ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
    finally:
        proc.proc.send_signal(signal.SIGTERM)
        proc.proc.wait(60)
    out = proc.output()
    assert proc.proc.returncode == 0, out[-3000:]
    assert "realcluster: stopped" in out
    assert not kubeconfig.exists(), "a stopped cluster's kubeconfig must not be left for a later waiter"
    wait_until(lambda: not _processes_under(data), timeout=15, what="no component left running")


def test_a_taken_port_is_one_clear_sentence_and_starts_nothing(realcluster_binaries, tmp_path: Path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "dashboard", "realcluster", "--port", str(port),
                               "--kubeconfig", str(tmp_path / "k.yaml"), "--data-dir", str(tmp_path / "d")],
                              cwd=ROOT, env={**os.environ, "CTRLSCOPE_DEMO": "1"}, capture_output=True, text=True,
                              timeout=120)
    assert done.returncode != 0
    assert f"port {port} on 127.0.0.1 is taken" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 60
    assert not _processes_under(tmp_path / "d")
