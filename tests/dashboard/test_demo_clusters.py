"""`manage.py demo`'s cluster options without the real control plane: what it refuses before starting
anything, and `--kubeconfig` on "your own cluster" (read-only unless `--allow-writes`).

Your own cluster is the simulator behind tests/examples/test_read_only.py's recording proxy: it says
it is not the simulator and records every request that reaches it. The demo runs as a user runs it
(a subprocess, real Redis, daphne, workers); `demo --real` itself is tests/dashboard/test_demo_real.py.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import orjson
import psutil
import pytest
import redis
import yaml

from controllers.informers.http_client import KubernetesClient
from controllers.telemetry.streams import Keys
from dashboard.management.commands.demo import LogRelay, fault_scenarios
from tests.conftest import ROOT, wait_until
from tests.dashboard.test_demo import demo_env, start_demo
from tests.examples.test_deployments_end_to_end import DEPLOYMENT
from tests.examples.test_read_only import cluster_entry, simulator_behind_a_proxy


@pytest.mark.parametrize(("args", "env", "says"), [
    (["--real", "--kubeconfig", "k.yaml"], {}, "--real and --kubeconfig are mutually exclusive"),
    (["--real"], {"CTRLSCOPE_KUBECONFIG": "k.yaml"},
     "--real and --kubeconfig (here from CTRLSCOPE_KUBECONFIG) are mutually exclusive"),
    (["--context", "prod"], {}, "--context chooses a context of --kubeconfig's file: give --kubeconfig too"),
    (["--kubeconfig", "k.yaml", "--kopf"], {}, "--kopf on your own cluster needs --allow-writes"),
    (["--replicas", "0"], {}, "--replicas must be at least 1"),
], ids=["real-and-kubeconfig", "real-and-env-kubeconfig", "context-alone", "kopf-read-only", "no-replicas"])
def test_the_demo_refuses_contradictory_options_before_starting_anything(tmp_path, redis_url, prefix, args, env,
                                                                        says):
    done = subprocess.run([sys.executable, "manage.py", "demo", "--no-go", *args], cwd=ROOT,
                          env={**demo_env(tmp_path, redis_url, prefix), **env}, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0 and says in done.stderr, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "logs").exists(), "nothing may start"


def test_log_relay_says_each_complete_line_once(tmp_path):
    log, said = tmp_path / "child.log", []
    relay = LogRelay(log, said.append)
    assert relay() is False and said == []  # no log yet
    log.write_bytes(b"realcluster: building kube-apiserver 10%\nrealcluster: buil")
    relay()
    with open(log, "ab") as fh:
        fh.write(b"ding etcd\n\nplain line\n")
    relay()
    relay()
    assert said == ["building kube-apiserver 10%", "building etcd", "plain line"]


@pytest.fixture
def your_cluster(tmp_path: Path):
    """(the simulator, a proxy in front of it that says it is a real API server, a kubeconfig for the proxy)."""
    path = tmp_path / "yours.kubeconfig"
    with simulator_behind_a_proxy(path) as (sim, proxy):
        KubernetesClient.for_host(sim.url).send_json("POST", "/apis/apps/v1/namespaces/default/deployments",
                                                     yaml.safe_load(DEPLOYMENT))
        yield sim, proxy, path


def _stop(demo) -> str:
    demo.proc.send_signal(signal.SIGINT)
    out, _ = demo.proc.communicate(timeout=60)
    return out


def _cmdlines(demo) -> list[str]:
    return [" ".join(c.cmdline()) for c in psutil.Process(demo.proc.pid).children(recursive=True)]


def test_the_demo_on_your_cluster_only_observes_unless_told_to_write(your_cluster, tmp_path, redis_url, prefix):
    sim, proxy, kubeconfig = your_cluster
    r, keys = redis.Redis.from_url(redis_url), Keys(prefix)
    run = tmp_path / "read-only"
    run.mkdir()
    demo = start_demo(run, redis_url, prefix, args=("--kubeconfig", str(kubeconfig)))
    try:
        out = "".join(demo.lines)
        assert f"cluster:   {kubeconfig} (your cluster, read-only: the workers only observe it" in out, out
        assert '"refused: read-only"; --allow-writes lets them write' in out, out
        assert (f"faults:    unavailable: the Faults panel and the scenarios that inject faults "
                f"({', '.join(fault_scenarios())}) need the simulated cluster or --real") in out, out
        assert "example controllers write" not in out and "write ConfigMaps" not in out
        cmdlines = _cmdlines(demo)
        worker = next(c for c in cmdlines if "runcontrollers" in c)
        assert "--allow-writes" not in worker and "--leader-elect" not in worker, worker
        assert not any("runkopf" in c or "simcluster" in c for c in cmdlines), cmdlines
        entry = wait_until(lambda: cluster_entry(r, keys, "demo"), timeout=30, what="the worker's cluster entry")
        assert (entry["writes"], entry["server"]) == ("read-only", proxy.url)

        def refused():
            raw = r.hget(keys.snapshot("w/demo/controller/deployment-summary"), "default/web")
            row = orjson.loads(raw) if raw else {}
            return row if row.get("result") == "terminal" else None

        row = wait_until(refused, timeout=30, what="the summary's Reconcile to end on the refused write")
        assert row["error"].startswith("read-only: POST /api/v1/namespaces/default/configmaps was not sent")
        # The scenarios are told not to drive your cluster.
        assert orjson.loads((run / "demo.json").read_bytes())["kubeconfig"] is None
    finally:
        out = _stop(demo)
    assert demo.proc.returncode == 0, out
    assert proxy.writes() == [], "the read-only demo sent a write to your cluster"

    # --allow-writes: the same demo acts, through the proxy.
    run = tmp_path / "acting"
    run.mkdir()
    demo = start_demo(run, redis_url, prefix, args=("--kubeconfig", str(kubeconfig), "--allow-writes"))
    try:
        out = "".join(demo.lines)
        assert f"cluster:   {kubeconfig} (your cluster; --allow-writes: the example controllers write to it" in out
        worker = next(c for c in _cmdlines(demo) if "runcontrollers" in c)
        assert "--allow-writes" in worker, worker
        wait_until(lambda: (cluster_entry(r, keys, "demo") or {}).get("writes") == "allowed", timeout=30,
                   what="the acting worker's cluster entry")
        wait_until(lambda: ("POST", "/api/v1/namespaces/default/configmaps") in proxy.writes(), timeout=30,
                   what="the summary ConfigMap written through the proxy")
    finally:
        out = _stop(demo)
        r.close()
    assert demo.proc.returncode == 0, out


def test_a_scenario_that_injects_faults_refuses_a_cluster_without_a_fault_api(your_cluster, tmp_path, redis_url,
                                                                              prefix):
    _, proxy, kubeconfig = your_cluster
    done = subprocess.run([sys.executable, "manage.py", "scenario", "retry-storm", "--kubeconfig", str(kubeconfig)],
                          cwd=ROOT, env=demo_env(tmp_path, redis_url, prefix), capture_output=True, text=True,
                          timeout=60)
    assert done.returncode != 0, done.stdout
    assert f"retry-storm injects faults, and {proxy.url} serves no fault API" in done.stderr, done.stderr
    assert proxy.writes() == []
