"""A real controller-runtime reconciler on its ctrlscope controller page, live: under a 50 % error
rate injected on the ConfigMaps it writes, the page shows its failed attempts, the keys backing off
with their countdowns, and convergence once the fault is cleared.

The whole stack is real: ``manage.py simcluster`` (publishing faults), the Go sample
``deployment-summary`` (controller-runtime 0.25 with ctrlscope's instrumentation), Redis, daphne
and headless Chromium.
"""

from __future__ import annotations

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.sim.faults_client import SimFaults
from tests.conftest import wait_until
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page
from tests.golang.telemetry import Published

pytestmark = pytest.mark.browser

WORKER = "go-summary"
PAGE = f"/c/{WORKER}/deployment-summary/"


def deployment(name: str) -> dict:
    return {"metadata": {"name": name, "labels": {"app": name}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": name, "image": "nginx:1.27"}]}}}}


def test_retries_and_backoff_of_a_controller_runtime_reconciler_show_live(
        browser, dashboard_factory, sim_kubeconfig, go_process, redis_url, prefix, artifacts):
    dashboard = dashboard_factory(CTRLSCOPE_SIM_KUBECONFIG=str(sim_kubeconfig))
    client = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    faults = SimFaults(client)
    # Every summary write fails at first: the rate limiter's delays grow (5 ms doubling) until the
    # backoffs last long enough to watch their countdowns.
    # (writes only: the controller's ConfigMap informer must still list and watch)
    for verb in ("create", "update"):
        faults.errors(verb=verb, resource="configmaps", rate=1.0, code=500)
    go_process("deployment-summary", "--kubeconfig", str(sim_kubeconfig), "--worker-name", WORKER)
    published = Published(redis_url, prefix)
    try:
        wait_until(lambda: published.state(f"w/{WORKER}/components").get("controller/deployment-summary"),
                   timeout=60, what="the Go controller to announce itself")
        page = browser.new_page()
        page.js_errors = []
        page.on("pageerror", lambda err: page.js_errors.append(str(err)))
        page.goto(dashboard.url + PAGE)
        page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
        for i in range(6):
            client.send_json("POST", "/apis/apps/v1/namespaces/default/deployments", deployment(f"app-{i}"))
        # Failed attempts on the timeline, and keys waiting out their backoff with a countdown.
        page.wait_for_selector("#timeline .attempt.result-error", timeout=30_000)
        page.wait_for_selector("#q-waiting td.countdown", timeout=30_000)
        save_screenshot(page, artifacts, "go-controller-backing-off.png", full_page=True)
        # Then half of the writes fail: some keys converge, others keep retrying.
        for verb in ("create", "update"):
            faults.errors(verb=verb, resource="configmaps", rate=0.5, code=500)
        page.wait_for_selector('#timeline .lane .lane-meta:has-text("success")', timeout=60_000)
        retries = published.records(f"w/{WORKER}/queue/deployment-summary", "queue")
        delays = [r["delay"] for r in retries if r["op"] == "add_rate_limited"]
        assert delays and min(delays) == pytest.approx(0.005), delays  # controller-runtime's 5 ms base
        faults.clear_errors()
        # Every key converges: its lane ends in success, nothing is left queued or waiting.
        for i in range(6):
            page.wait_for_selector(f'#timeline .lane[data-key="default/app-{i}"] .lane-meta:has-text("success")',
                                   timeout=60_000)
        page.wait_for_selector("#q-queued .count:text-is('0')", timeout=30_000)
        page.wait_for_selector("#q-waiting .count:text-is('0')", timeout=30_000)
        save_screenshot(page, artifacts, "go-controller-converged.png", full_page=True)
        close_page(page)
    finally:
        published.close()
