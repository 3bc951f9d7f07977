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


def test_an_operator_starts_a_scenario_from_the_dashboard_of_a_running_demo(tmp_path, redis_url, prefix):
    import orjson
    import redis
    import requests

    from controllers.telemetry.streams import Keys
    from tests.conftest import wait_until
    from tests.dashboard.test_scenarios_page import post_start

    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_RUN_DIR": str(tmp_path), "CTRLSCOPE_DB": str(tmp_path / "demo.sqlite3")}
    demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(free_port())], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = password = None
        deadline = time.monotonic() + 60
        while password is None:
            assert time.monotonic() < deadline and demo.poll() is None, "demo did not start"
            line = demo.stdout.readline()
            if m := re.match(r"dashboard: (http://\S+)/", line):
                url = m.group(1)
            if m := re.match(r"operator:  log in as 'operator' / '([^']+)'", line):
                password = m.group(1)

        class Dashboard:  # what post_start needs
            pass

        board = Dashboard()
        board.url = url
        session = requests.Session()
        page = session.get(url + "/accounts/login/", timeout=10)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        session.post(url + "/accounts/login/", data={"username": "operator", "password": password,
                                                     "csrfmiddlewaretoken": token},
                     headers={"Referer": url + "/accounts/login/"}, timeout=10)
        assert post_start(session, board, "pod-killer", speed="0.25").status_code == 202
        r = redis.Redis.from_url(redis_url)
        try:
            raw = wait_until(lambda: (lambda v: v if v and not orjson.loads(v).get("running") else None)(
                r.hget(Keys(prefix).snapshot("scenarios"), "pod-killer")), timeout=60, what="the scenario to finish")
        finally:
            r.close()
        claims = orjson.loads(raw)["claims"]
        assert claims and all(c["held"] for c in claims), claims
    finally:
        demo.send_signal(signal.SIGINT)
        demo.communicate(timeout=60)
