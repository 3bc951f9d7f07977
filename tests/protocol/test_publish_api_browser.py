"""A process that uses only the publisher API shows up on the overview and its controller page."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_overview_browser import open_overview
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser


def test_an_api_only_process_is_a_worker_like_any_other(browser, dashboard, redis_url, prefix, artifacts):
    proc = subprocess.Popen([sys.executable, "-m", "tests.protocol.api_only_worker", redis_url, prefix], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        page = open_overview(browser, dashboard)
        card = '#overview .worker[data-worker="kopf-demo"] .ctl-card[data-controller="podsets"]'
        page.wait_for_selector(card, timeout=10_000)
        page.wait_for_selector(f"{card} .ctl-card-head:has-text('running')", timeout=5_000)
        cache = f'{card} .informer-chain[data-informer="v1/Pod"] .stage[data-stage="cache"]'
        page.wait_for_selector(f"{cache}:has-text('3 objects')", timeout=5_000)
        save_screenshot(page, artifacts, "api-only-overview.png", full_page=True)
        page.click(f'{card} a[href="/c/kopf-demo/podsets/"]')
        page.wait_for_url("**/c/kopf-demo/podsets/")
        page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
        page.wait_for_function("() => window.ctrlscope.client.topics.get('w/kopf-demo/queue/podsets')?.cursor", timeout=10_000)
        proc.stdin.write("reconcile\n")  # only now: the page is subscribed to the queue it is to see
        proc.stdin.flush()
        # The flaky key backs off in the waiting group with its requeue count, then converges.
        page.wait_for_selector('#q-waiting tr[data-key="default/flaky"]', timeout=10_000)
        assert proc.stdout.readline().strip() == "converged"
        # Two failed attempts, then the third succeeds; nothing is left queued or waiting.
        page.wait_for_function("""() => document.querySelector('#timeline .lane[data-key="default/flaky"] .lane-meta')
            ?.textContent === '3× · 2 failed → success'""", timeout=10_000)
        assert page.eval_on_selector_all("#timeline .attempt.result-error", "els => els.length") == 2
        page.wait_for_selector("#q-queued .count:text-is('0')", timeout=5_000)
        page.wait_for_selector("#q-waiting .count:text-is('0')", timeout=5_000)
        save_screenshot(page, artifacts, "api-only-controller.png", full_page=True)
        close_page(page)
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
    assert proc.returncode == 0
