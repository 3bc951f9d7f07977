"""Redis restarted under load: worker and dashboard recover, and the gap surfaces as a resync."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from controllers.telemetry.redisboot import free_port, start_private
from controllers.telemetry.synthetic import SyntheticLoad
from dashboard.wsclient import TelemetryWsClient
from tests.conftest import run_async
from tests.dashboard.test_browser import open_developer_view


@pytest.mark.browser
def test_redis_restart_under_load_resyncs_and_goes_live_again(
        browser, dashboard_factory, publisher_factory, tmp_path, artifacts):
    port = free_port()
    redis_srv = start_private(tmp_path, port=port)
    url = redis_srv.url
    try:
        pub = publisher_factory(url=url, flush_interval=0.02).start()
        load = SyntheticLoad(pub, rate=500, objects=100, seed=11)
        stop = threading.Event()
        producer = threading.Thread(target=load.run, args=(stop,), daemon=True)
        producer.start()
        deadline = time.monotonic() + 10
        while not pub.connected or pub.frames_published < 3:
            assert time.monotonic() < deadline, "publisher never connected"
            time.sleep(0.05)
        dashboard = dashboard_factory(url=url)
        page = open_developer_view(browser, dashboard)  # the raw topics: it subscribes to "synthetic"
        page.wait_for_function("() => window.ctrlscope.client.topics.get('synthetic')?.cursor", timeout=10_000)
        page.evaluate("""() => { window.__states = []; window.__resyncs = [];
            const c = window.ctrlscope.client;
            c.on('state', s => window.__states.push(s));
            c.on('resync', (t, reason) => window.__resyncs.push(reason)); }""")

        async def watch():
            c = TelemetryWsClient(dashboard.ws_url, origin=dashboard.url, keep_records=False)
            await c.connect()
            await c.subscribe("synthetic")
            await c.wait_for(lambda: c.topics["synthetic"].snapshots == 1, what="snapshot")
            redis_srv.stop()  # Redis dies under load; nothing is persisted
            await c.wait_for(lambda: "down" in c.statuses, what="redis down status")
            await asyncio.sleep(1.0)
            restarted = start_private(tmp_path, port=port)
            await c.wait_for(lambda: "up" in c.statuses, timeout=15, what="redis up status")
            await c.wait_for(lambda: c.topics["synthetic"].snapshots >= 2, timeout=15, what="resync snapshot")
            await asyncio.sleep(0.5)
            stop.set()
            producer.join(5)
            pub.flush()
            await c.wait_for(lambda: c.topics["synthetic"].state == pub.state("synthetic"), timeout=10,
                             what="consistent state after the restart")
            await c.close()
            return c, restarted

        c, restarted = run_async(watch(), timeout=90)
        try:
            assert c.resyncs and all(reason in {"redis-reconnected", "worker-reset", "epoch-changed", "retention"}
                                     for _, reason in c.resyncs)
            assert c.duplicates == 0, "\n".join(map(str, c.recent))
            page.wait_for_function("() => window.ctrlscope.client.state === 'live'", timeout=10_000)
            states = page.evaluate("window.__states")
            assert "reconnecting" in states and states[-1] == "live"
            assert page.evaluate("window.__resyncs.length") >= 1, "the gap must surface as a resync"
            assert int(page.inner_text("#c-resyncs")) >= 1, "the resync counter shows the gap"
            page.screenshot(path=str(artifacts / "dashboard-after-redis-restart.png"), full_page=True)
            assert pub.redis_errors >= 1 and pub.connected
        finally:
            restarted.stop()
        page.close()
    finally:
        redis_srv.stop()
