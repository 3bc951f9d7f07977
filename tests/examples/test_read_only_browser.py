"""What a read-only worker's refused writes look like in headless Chromium: "refused: read-only",
never "failed".

Real parts end to end: the simulator behind tests/examples/test_read_only.py's recording proxy (a
cluster that says it is not the simulator), the example worker command without ``--allow-writes``,
Redis, daphne, Chromium. Three Deployments make three Reconciles, each refusing its ConfigMap
write: the overview's pipeline card (from the worker's stage counters) and the controller page's
(from the live write records) both count 0 API writes, no failures and 3 refused writes, and each
Reconcile ends terminal, once.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from controllers.informers.http_client import KubernetesClient
from controllers.process import stop_process
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page
from tests.examples.test_deployments_end_to_end import DEPLOYMENT
from tests.examples.test_read_only import RecordingProxy, cluster, start_worker  # noqa: F401  (cluster: a fixture)

pytestmark = pytest.mark.browser

NAMES = ("web", "api", "db")
WRITES = '.controller-chain .stage[data-stage="writes"]'


def open_page(browser, url: str):
    page = browser.new_page()
    page.set_viewport_size({"width": 1400, "height": 900})
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(url)
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    return page


def test_refused_writes_show_as_refused_read_only_never_as_failed(cluster, browser, dashboard, redis_url, prefix,  # noqa: F811
                                                                  tmp_path: Path, artifacts):
    proxy = RecordingProxy(cluster.url).start()
    config = cluster.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = proxy.url
    proxied = tmp_path / "real-cluster.kubeconfig"
    proxied.write_text(yaml.safe_dump(config))
    client = KubernetesClient.for_host(cluster.url)  # someone else creates the Deployments
    for name in NAMES:
        body = copy.deepcopy(yaml.safe_load(DEPLOYMENT))
        body["metadata"]["name"] = name
        client.send_json("POST", "/apis/apps/v1/namespaces/default/deployments", body)
    worker = start_worker(proxied, "observer", tmp_path / "observer.log", redis_url, prefix)
    try:
        page = open_page(browser, dashboard.url + "/")
        card = '#overview .worker[data-worker="observer"] .ctl-card[data-controller="deployment-summary"]'
        # The overview draws the card from the worker's once-a-second stage counters.
        page.wait_for_function("(sel) => document.querySelector(sel)?.innerText.includes('3 refused: read-only')",
                               arg=f"{card} {WRITES}", timeout=30_000)
        writes = page.inner_text(f"{card} {WRITES}")
        assert "0 writes" in writes and "failed" not in writes, writes
        assert page.locator(f"{card} {WRITES} .stage-err").count() == 0
        refused = page.locator(f"{card} {WRITES} .stage-refused")
        assert "never reached the API server" in refused.get_attribute("title")
        assert "terminal" in page.inner_text(f'{card} .stage[data-stage="reconcile"]')
        assert page.inner_text('.worker[data-worker="observer"] .badge.writes') == "read-only"
        save_screenshot(page, artifacts, "overview-refused-writes.png", full_page=True)
        close_page(page)

        # The controller page counts the live write records the same way.
        page = open_page(browser, dashboard.url + "/c/observer/deployment-summary/")
        page.wait_for_function("(sel) => document.querySelector(sel)?.innerText.includes('3 refused: read-only')",
                               arg=f"#pipeline {WRITES}", timeout=15_000)
        writes = page.inner_text(f"#pipeline {WRITES}")
        assert "0 writes" in writes and "failed" not in writes, writes
        # One terminal attempt per key, not a retry storm; its details say why and that it is not retried.
        page.wait_for_selector('#lanes .attempt[data-result="terminal"]', timeout=10_000)
        results = page.eval_on_selector_all("#lanes .attempt", "els => els.map(e => e.dataset.result)")
        assert results == ["terminal"] * len(NAMES), results
        page.click('#lanes .attempt[data-result="terminal"]')
        details = page.wait_for_selector("#details:not([hidden])").inner_text()
        assert "not retried: a terminal error" in details, details
        assert "read-only: POST /api/v1/namespaces/default/configmaps was not sent" in details, details
        save_screenshot(page, artifacts, "controller-refused-writes.png", full_page=True)
        close_page(page)
        assert proxy.writes() == [], "a read-only worker sent a write"
    finally:
        stop_process(worker)
        proxy.stop()
