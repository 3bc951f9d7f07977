"""Nothing stale passes for live, in real headless Chromium against daphne + Redis: a worker whose run
stopped is badged "stopped" with its run on the overview and on its controller page, an operator
forgets it (its topics leave Redis and the page, the drop is listed), and a simulator that was killed
without saying so is not shown as running on the Faults panel."""

from __future__ import annotations

import time

import orjson
import pytest
import redis

from controllers.schema import FAULTS_TOPIC
from controllers.telemetry.streams import Keys
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser


def worker(publisher_factory, name: str) -> TelemetryObserver:
    telemetry = TelemetryObserver(publisher_factory(), worker=name)
    telemetry.describe_cluster(name="sim", server="https://127.0.0.1:1")
    telemetry.on_controller("podset", watches=["pods"], workers=1, started=True)
    telemetry.publisher.start()
    return telemetry


def test_a_stopped_run_is_shown_as_stopped_and_an_operator_forgets_it(browser, users, publisher_factory, redis_url,
                                                                       prefix, artifacts):
    dashboard = users
    live, old = worker(publisher_factory, "live"), worker(publisher_factory, "old")
    client = redis.Redis.from_url(redis_url)
    keys = Keys(prefix)
    # A simulator killed with -9: its state still says running, its presence entry went quiet.
    now = time.time() * 1000
    client.hset(keys.publishers, "sim-killed-run", orjson.dumps({
        "role": "simulator", "name": "http://127.0.0.1:9", "host": "h", "pid": 7, "started": now - 120_000,
        "seen": now - 60_000, "stopped": None, "topics": [FAULTS_TOPIC]}))
    live.publisher.set_state(FAULTS_TOPIC, "simulator", {"url": "http://127.0.0.1:9", "running": True,
                                                         "since": now - 120_000, "run": "sim-killed-run"})
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.on("dialog", lambda dialog: dialog.accept())
    try:
        deadline = time.time() + 10
        while len(client.hgetall(keys.publishers)) < 3 and time.time() < deadline:
            time.sleep(0.1)
        old.publisher.stop()  # a clean stop: its presence entry says when
        page.goto(dashboard.url + "/accounts/login/?next=/")
        page.fill("input[name=username]", "op")
        page.fill("input[name=password]", "s3cret-pass-op")
        page.click("form [type=submit]")
        page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        page.wait_for_selector('.worker[data-worker="old"][data-stopped="true"]', timeout=15_000)
        head = page.inner_text('.worker[data-worker="old"] .worker-head')
        assert "stopped" in head and "run started" in head and f"(pid {old.publisher._presence_entry()['pid']})" in head
        assert page.inner_text('.worker[data-worker="live"] .worker-head .badge:not(.runtime):not(.writes):not(.writes)') == "live"
        assert not page.is_visible('.worker[data-worker="live"] button[data-forget]'), "a running worker cannot be forgotten"
        page.screenshot(path=str(artifacts / "presence-stopped-worker.png"), full_page=True)

        # Its controller page says the state is that stopped run's.
        controller = page.context.new_page()
        controller.goto(dashboard.url + "/c/old/podset/")
        controller.wait_for_selector("#run-notice:not([hidden])", timeout=10_000)
        assert "worker old is not running: stopped" in controller.inner_text("#run-notice")
        controller.close()

        # The Faults panel: the killed simulator is not shown as running.
        cluster = page.context.new_page()
        cluster.goto(dashboard.url + "/cluster/")
        cluster.wait_for_function("() => document.getElementById('faults-rules').textContent.includes('not heard from since')",
                                  timeout=10_000)
        cluster.close()

        page.click('.worker[data-worker="old"] button[data-forget]')
        page.wait_for_function("() => document.getElementById('forget-result').textContent.includes('forgot worker old')",
                               timeout=10_000)
        page.wait_for_selector('.worker[data-worker="old"]', state="detached", timeout=10_000)
        page.wait_for_selector("#dropped:not([hidden])", timeout=10_000)
        page.click("#dropped > summary")
        assert "worker old" in page.inner_text("#dropped") and "forgotten by op" in page.inner_text("#dropped")
        assert not any(t.startswith(b"w/old/") for t in client.smembers(keys.topics))
        assert page.is_visible('.worker[data-worker="live"]')
        close_page(page)
    finally:
        live.publisher.stop()
        client.close()
