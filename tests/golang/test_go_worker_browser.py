"""A Go worker on the overview, in Chromium: live with its runtime label while it runs; killed with
SIGKILL (no chance to say goodbye) it is marked stopped once its presence entry is 10 s old (the one
liveness rule, protocol/redis-layout.md), with when it was last heard from, exactly as a Python worker
is, and its controller page still shows what it last published."""

from __future__ import annotations

import signal

import pytest

from tests.conftest import wait_until
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page
from tests.golang.telemetry import Published

pytestmark = pytest.mark.browser

WORKER = '#overview .worker[data-worker="go-informer"]'


def test_a_killed_go_worker_is_marked_stopped_like_any_other(browser, dashboard_factory, sim_kubeconfig, go_process,
                                                           redis_url, prefix, artifacts):
    dashboard = dashboard_factory()
    proc = go_process("deployment-informer", "--kubeconfig", str(sim_kubeconfig), "--worker-name", "go-informer")
    published = Published(redis_url, prefix)
    try:
        wait_until(lambda: published.records("w/go-informer/metrics", "metrics"), timeout=60,
                   what="the Go worker's first metrics sample")
    finally:
        published.close()
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + "/")
    # The program has no controller: its informer is a card of its own.
    page.wait_for_selector(f'{WORKER}[data-liveness="live"] .informer-card[data-informer="apps/v1/Deployment"]',
                           timeout=20_000)
    # The runtime label comes with the worker's own entry (worker/go-informer), which may arrive after
    # its controller's: the card can be drawn first, its label hidden until then (CI saw "").
    page.wait_for_selector(f'{WORKER}[data-runtime="go"] .badge.runtime', timeout=10_000)
    assert page.inner_text(f"{WORKER} .badge.runtime") == "go"
    cache = f'{WORKER} .informer-chain[data-informer="apps/v1/Deployment"] .stage[data-stage="cache"]'
    page.wait_for_selector(cache, timeout=10_000)
    save_screenshot(page, artifacts, "go-worker-live.png", full_page=True)
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait(10)
    # Its entry was refreshed at most 2 s before the kill: stopped 10 s after that, drawn within 1 s.
    page.wait_for_selector(f'{WORKER}[data-liveness="stopped"][data-stale="true"]', timeout=15_000)
    head = page.inner_text(f"{WORKER} .worker-head")
    assert "stopped" in head and "not heard from since" in head and "killed" in head, head
    save_screenshot(page, artifacts, "go-worker-stopped.png", full_page=True)
    close_page(page)
