"""`make demo`'s command: starts everything on loopback, prints the URL, and Ctrl-C stops it all."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field

import orjson
import psutil
import pytest
import redis
import requests

from controllers import golang
from controllers.examples.podset import API_VERSION
from controllers.informers.http_client import KubernetesClient
from controllers.scenarios.base import KOPF_WORKER
from controllers.schema import ObservationMode, Runtime
from controllers.telemetry.redisboot import free_port
from controllers.telemetry.streams import Keys
from dashboard.management.commands.demo import KOPF_SAMPLE_PODSET
from tests.conftest import ROOT, wait_until


@dataclass
class Demo:
    proc: subprocess.Popen
    url: str = ""
    operator_password: str = ""
    lines: list[str] = field(default_factory=list)


def demo_env(tmp_path, redis_url: str, prefix: str) -> dict[str, str]:
    return {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
            "CTRLSCOPE_RUN_DIR": str(tmp_path), "CTRLSCOPE_DB": str(tmp_path / "demo.sqlite3")}


def start_demo(tmp_path, redis_url: str, prefix: str, *, go: bool = False, args: tuple[str, ...] = (),
               timeout: float | None = None) -> Demo:
    """Run `manage.py demo` (with ``args``) and read its output up to the operator line (the last one
    printed). With ``go`` it also builds and runs the Go samples (a cold build takes a minute or two)."""
    env = demo_env(tmp_path, redis_url, prefix)
    argv = [sys.executable, "manage.py", "demo", "--port", str(free_port()), *([] if go else ["--no-go"]), *args]
    demo = Demo(subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    deadline = time.monotonic() + (timeout or (300 if go else 60))
    while not demo.operator_password:
        assert time.monotonic() < deadline, "demo did not finish starting:\n" + "".join(demo.lines)
        line = demo.proc.stdout.readline()
        assert line, "demo exited early:\n" + "".join(demo.lines)
        demo.lines.append(line)
        if m := re.match(r"dashboard: (http://127\.0\.0\.1:\d+)/", line):
            demo.url = m.group(1)
        if m := re.match(r"operator:  log in as 'operator' / '([^']+)'", line):
            demo.operator_password = m.group(1)
    return demo


def test_demo_starts_cluster_worker_and_dashboard_and_ctrl_c_stops_them(tmp_path, redis_url, prefix):
    go = golang.find_go() is not None
    if not go and os.environ.get("CI"):
        pytest.fail("no Go toolchain in CI: the demo's Go workers are part of what this test checks")
    demo = start_demo(tmp_path, redis_url, prefix, go=go)
    try:
        children = psutil.Process(demo.proc.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "simcluster" in names and "runcontrollers" in names and "daphne" in names
        # The kopf PodSet operator runs beside the Python worker as its own worker, and so do the Go
        # samples, each announcing itself with its runtime.
        assert "runkopf" in names and KOPF_WORKER in names, "".join(demo.lines)
        if go:
            assert "deployment-informer" in names and "deployment-summary" in names, "".join(demo.lines)
        runtimes = {"demo": Runtime.PYTHON, KOPF_WORKER: Runtime.KOPF,
                    **({"go-informer": Runtime.GO, "go-summary": Runtime.GO} if go else {})}
        r = redis.Redis.from_url(redis_url)
        try:
            def announced() -> dict[str, str]:
                out = {}
                for w in runtimes:
                    raw = r.hget(Keys(prefix).snapshot(f"w/{w}/components"), f"worker/{w}")
                    out[w] = orjson.loads(raw).get("runtime") if raw else None
                return out

            wait_until(lambda: announced() == runtimes, timeout=60,
                       what="the Python, kopf and Go workers to announce themselves")

            # Both kopf modes: the operator's worker in-process, the Python worker zero-code.
            def modes() -> dict[str, str | None]:
                out = {}
                for w in ("demo", KOPF_WORKER):
                    raw = r.hget(Keys(prefix).snapshot(f"w/{w}/components"), "controller/kopf/podsets.demo.ctrlscope.dev")
                    out[w] = orjson.loads(raw).get("mode") if raw else None
                return out

            wait_until(lambda: modes() == {"demo": ObservationMode.ZERO_CODE, KOPF_WORKER: ObservationMode.IN_PROCESS},
                       timeout=60, what="the kopf operator seen in-process and zero-code")
        finally:
            r.close()
        # The kopf operator handles its sample PodSet.
        sim = KubernetesClient.from_kubeconfig(str(tmp_path / "kubeconfig-sim.yaml"))
        wait_until(lambda: (sim.get_json(f"/apis/{API_VERSION}/namespaces/default/podsets/{KOPF_SAMPLE_PODSET}")
                            .get("status") or {}).get("replicas") == 3, timeout=30, what="kopf's sample PodSet at 3")
        with urllib.request.urlopen(demo.url + "/", timeout=5) as resp:
            assert resp.status == 200 and b"ctrlscope" in resp.read()
        assert (tmp_path / "kubeconfig-sim.yaml").exists()
        assert any("anonymous read-only is ON" in line for line in demo.lines), \
            "the demo must say it allows anonymous reads"
        demo.proc.send_signal(signal.SIGINT)
        out, _ = demo.proc.communicate(timeout=60)
        assert demo.proc.returncode == 0, "".join(demo.lines) + out
        assert "demo stopped." in out
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert not alive, "every process the demo started must be gone"
    finally:
        if demo.proc.poll() is None:
            demo.proc.kill()
            demo.proc.wait(10)


def test_a_killed_demo_leaves_no_processes_behind(tmp_path, redis_url, prefix):
    demo = start_demo(tmp_path, redis_url, prefix)
    try:
        children = psutil.Process(demo.proc.pid).children(recursive=True)
        assert len(children) >= 3
    finally:
        demo.proc.kill()  # SIGKILL: the demo gets no chance to clean up
        demo.proc.wait(10)
    gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [" ".join(p.cmdline()) for p in alive]


def test_an_operator_starts_scenarios_from_the_dashboard_of_a_running_demo(tmp_path, redis_url, prefix):
    """pod-killer, then leader-failover: the demo adds a standby replica for it and removes it after."""
    from tests.dashboard.test_scenarios_page import post_start

    demo = start_demo(tmp_path, redis_url, prefix)
    try:
        session = requests.Session()
        page = session.get(demo.url + "/accounts/login/", timeout=10)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        session.post(demo.url + "/accounts/login/", timeout=10, headers={"Referer": demo.url + "/accounts/login/"},
                     data={"username": "operator", "password": demo.operator_password, "csrfmiddlewaretoken": token})
        r = redis.Redis.from_url(redis_url)
        try:
            for name in ("pod-killer", "leader-failover"):
                started = time.time() * 1000
                # The previous scenario's process may still be exiting (409 while its pid lives).
                wait_until(lambda name=name: post_start(session, demo, name, speed="0.25").status_code == 202,
                           timeout=15, interval=0.3, what=f"{name} to start")

                lines: set[str] = set()

                def finished(name=name, started=started, lines=lines):
                    raw = r.hget(Keys(prefix).snapshot("scenarios"), name)
                    state = orjson.loads(raw) if raw else {}
                    if state.get("running") and state.get("started", 0) >= started:
                        lines.add(state.get("line", ""))
                    return state if not state.get("running") and state.get("claims") and \
                        state.get("finished", 0) >= started else None

                state = wait_until(finished, timeout=120, what=f"{name} to finish")
                # While it ran, its state carried the latest narration line (what a page opened
                # mid-scenario shows at once).
                assert lines - {""}, (name, lines)
                assert all(c["held"] for c in state["claims"]), (name, state["claims"],
                                                                 (tmp_path / "scenario.log").read_text()[-3000:])
        finally:
            r.close()
        assert state["measurements"]["old_leader"] != state["measurements"]["new_leader"]
        assert not (tmp_path / "standby.want").exists()
        wait_until(lambda: not (tmp_path / "worker-standby.pid").exists(), timeout=20,
                   what="the demo to stop its standby replica")
    finally:
        demo.proc.send_signal(signal.SIGINT)
        demo.proc.communicate(timeout=60)
