"""`make demo`'s command: starts everything on loopback, prints the URL, and Ctrl-C stops it all."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request

import psutil

from controllers.telemetry.redisboot import free_port
from tests.conftest import ROOT


def test_demo_starts_cluster_worker_and_dashboard_and_ctrl_c_stops_them(tmp_path, redis_url, prefix):
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_RUN_DIR": str(tmp_path), "CTRLSCOPE_DB": str(tmp_path / "demo.sqlite3")}
    demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(free_port())], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    try:
        url = None
        deadline = time.monotonic() + 60
        while url is None:
            assert time.monotonic() < deadline, "demo did not print its URL:\n" + "".join(lines)
            line = demo.stdout.readline()
            assert line, "demo exited early:\n" + "".join(lines)
            lines.append(line)
            m = re.match(r"dashboard: (http://127\.0\.0\.1:\d+/)", line)
            url = m.group(1) if m else None
        lines.append(demo.stdout.readline())  # the access line follows the URL
        children = psutil.Process(demo.pid).children(recursive=True)
        names = " ".join(" ".join(c.cmdline()) for c in children)
        assert "simcluster" in names and "runcontrollers" in names and "daphne" in names
        with urllib.request.urlopen(url, timeout=5) as resp:
            assert resp.status == 200 and b"ctrlscope" in resp.read()
        assert (tmp_path / "kubeconfig-sim.yaml").exists()
        assert any("anonymous read-only is ON" in line for line in lines), "the demo must say it allows anonymous reads"
        demo.send_signal(signal.SIGINT)
        out, _ = demo.communicate(timeout=60)
        lines.append(out)
        assert demo.returncode == 0, "".join(lines)
        assert "demo stopped." in out
        time.sleep(0.5)
        assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE], \
            "every process the demo started must be gone"
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait(10)


def test_a_killed_demo_leaves_no_processes_behind(tmp_path, redis_url, prefix):
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_RUN_DIR": str(tmp_path), "CTRLSCOPE_DB": str(tmp_path / "demo.sqlite3")}
    demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(free_port())], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not demo.stdout.readline().startswith("dashboard:"):
            assert time.monotonic() < deadline and demo.poll() is None, "demo did not start"
        children = psutil.Process(demo.pid).children(recursive=True)
        assert len(children) >= 3
    finally:
        demo.kill()  # SIGKILL: the demo gets no chance to clean up
        demo.wait(10)
    gone, alive = psutil.wait_procs(children, timeout=15)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
