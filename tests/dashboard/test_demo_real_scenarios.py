"""The demo on the real control plane runs the fault scenarios through its fault proxy: an operator
starts ``retry-storm`` and ``watcher-vs-informer`` from the dashboard of ``manage.py demo --real``
(the real kube-apiserver, controller-manager, scheduler and kwok nodes, with ``manage.py faultproxy``
in front), and every claim holds -- the faults, and the request counts by User-Agent the watcher
scenario measures, come from the proxy; the real server has neither."""

from __future__ import annotations

import re
import signal
import time

import orjson
import pytest
import redis
import requests

from controllers.telemetry.streams import Keys
from tests.conftest import wait_until
from tests.dashboard.test_demo import start_demo
from tests.dashboard.test_scenarios_page import post_start

pytestmark = pytest.mark.realcluster


def test_an_operator_runs_the_fault_scenarios_on_the_real_control_plane(tmp_path, redis_url, prefix):
    demo = start_demo(tmp_path, redis_url, prefix, args=("--real",), timeout=3600)
    try:
        session = requests.Session()
        page = session.get(demo.url + "/accounts/login/", timeout=10)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        session.post(demo.url + "/accounts/login/", timeout=10, headers={"Referer": demo.url + "/accounts/login/"},
                     data={"username": "operator", "password": demo.operator_password, "csrfmiddlewaretoken": token})
        r = redis.Redis.from_url(redis_url)
        try:
            states = {}
            for name in ("retry-storm", "watcher-vs-informer"):
                started = time.time() * 1000
                wait_until(lambda name=name: post_start(session, demo, name, speed="0.25").status_code == 202,
                           timeout=15, interval=0.3, what=f"{name} to start")

                def finished(name=name, started=started):
                    raw = r.hget(Keys(prefix).snapshot("scenarios"), name)
                    state = orjson.loads(raw) if raw else {}
                    return state if not state.get("running") and state.get("claims") and \
                        state.get("finished", 0) >= started else None

                states[name] = wait_until(finished, timeout=170, what=f"{name} to finish")
                assert all(c["held"] for c in states[name]["claims"]), (
                    name, states[name]["claims"], (tmp_path / "scenario.log").read_text()[-3000:])
        finally:
            r.close()
        table = states["watcher-vs-informer"]["table"]
        requests_row = next(row["cells"] for row in table["rows"] if row["label"] == "API requests the server served for it")
        assert all(cell != "0" for cell in requests_row), "the proxy counted every side's requests"
    finally:
        demo.proc.send_signal(signal.SIGINT)
        demo.proc.communicate(timeout=60)
