"""The metrics panel and the overview against the real stack: the simulated API server over HTTP, the
worker command running the demo's example controllers, Redis, daphne and headless Chromium.

Nothing is driven by hand here: Deployments created through the API make the controllers reconcile,
the worker samples its Prometheus registry once a second, and the page must draw it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.process import stop_process
from controllers.sim import SimCluster
from dashboard.management.commands.demo import DEFAULT_CONTROLLERS
from dashboard.management.commands.demo import Command as Demo
from tests.conftest import ROOT
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.sim.conftest import FAST

pytestmark = pytest.mark.browser

DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"


@pytest.fixture
def demo_worker(tmp_path, redis_url, prefix):
    """A simulated cluster with the demo's sample objects and a worker named "demo" watching it."""
    sim = SimCluster(port=0, **FAST).start()
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig.yaml")
    Demo()._create_samples(str(kubeconfig))
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    args = [sys.executable, "manage.py", "runcontrollers", "--kubeconfig", str(kubeconfig), "--worker-name", "demo",
            "--cluster-name", "simulated", "--status-every", "0"]
    for spec in DEFAULT_CONTROLLERS:
        args += ["--controller", spec]
    with open(tmp_path / "worker.log", "wb") as log:
        worker = subprocess.Popen(args, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield KubernetesClient.from_kubeconfig(str(kubeconfig))
    finally:
        stop_process(worker)
        sim.stop()


def deployment(name: str, replicas: int) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}


def drawn_pixels(page, chart: str) -> int:
    """Pixels of the chart's canvas that are not transparent (axes, grid and data)."""
    return page.evaluate(f"""() => {{
        const c = document.querySelector('#metrics-charts .metric[data-chart="{chart}"] canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0; for (let i = 3; i < d.length; i += 4) if (d[i]) n++; return n; }}""")


def series(page, chart: str) -> dict[str, list]:
    return page.evaluate(f"""() => Object.fromEntries(window.ctrlscopeMetrics.charts()
        .find(c => c.id === '{chart}').series.map(s => [s.label, s.values]))""")


def test_metrics_charts_and_overview_follow_a_real_worker(browser, dashboard, demo_worker, artifacts):
    client = demo_worker
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(dashboard.url + "/c/demo/deployment-summary/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=20_000)
    # The worker publishes a sample a second once its controllers are set up.
    page.wait_for_function("() => window.ctrlscopeMetrics.samples.length >= 2", timeout=30_000)
    empty = drawn_pixels(page, "reconciles")

    # Reconciles: every new Deployment gets a summary ConfigMap written by the reconciler.
    for i in range(6):
        client.send_json("POST", DEPLOYMENTS, deployment(f"load-{i}", 1 + i % 3))
        page.wait_for_timeout(300)
    page.wait_for_function("""() => {
        const c = window.ctrlscopeMetrics.charts().find(c => c.id === 'reconciles');
        return c && c.series.find(s => s.label === 'success').values.some(v => v > 0); }""", timeout=15_000)
    reconciles = series(page, "reconciles")
    assert max(v for v in reconciles["success"] if v is not None) > 0
    assert drawn_pixels(page, "reconciles") > empty, "the series is drawn on the canvas, not only computed"
    page.wait_for_function("""() => window.ctrlscopeMetrics.charts().find(c => c.id === 'reconcile-time')
        .series.every(s => s.values.some(v => v !== null && v > 0))""", timeout=10_000)
    # One read of the chart: two reads could straddle a new sample (loop 8 of 20 under load saw
    # p99 one value longer than p50).
    timing = series(page, "reconcile-time")
    p50, p99 = timing["p50"], timing["p99"]
    last = [(a, b) for a, b in zip(p50, p99, strict=True) if a is not None][-1]
    assert 0 < last[0] <= last[1] < 60, last
    assert max(v or 0 for v in series(page, "adds")["adds"]) > 0
    assert max(v or 0 for v in series(page, "workers")["max"]) == 1  # max_concurrent_reconciles
    assert "controller_runtime_reconcile_total" in page.inner_text('.metric[data-chart="reconciles"] .metric-expr')
    assert "histogram_quantile" in page.inner_text('.metric[data-chart="reconcile-time"]')
    # The pipeline's last stage: the reconciler's writes (its ConfigMaps) reached the page.
    page.wait_for_function("""() => !/^0 writes/.test(document.querySelector('#pipeline .stage[data-stage="writes"] .stage-value').textContent)""",
                           timeout=10_000)
    page.locator("#metrics-panel").screenshot(path=str(artifacts / "metrics-panel.png"))
    page.evaluate("document.documentElement.dataset.theme = 'dark'")  # what the theme toggle sets
    page.wait_for_timeout(300)  # the charts redraw with the dark theme's colours at once
    page.locator("#metrics-panel").screenshot(path=str(artifacts / "metrics-panel-dark.png"))
    page.evaluate("delete document.documentElement.dataset.theme")

    # A fresh page draws the history the stream still holds at once, instead of starting empty.
    fresh = browser.new_page()
    fresh.on("pageerror", lambda err: errors.append(str(err)))
    fresh.goto(dashboard.url + "/c/demo/deployment-summary/")
    fresh.wait_for_function("""() => window.ctrlscopeMetrics.samples.length >= 5 && window.ctrlscopeMetrics.charts()
        .find(c => c.id === 'reconciles').series.length""", timeout=10_000)
    assert fresh.evaluate("window.ctrlscopeMetrics.samples[0].ts") <= page.evaluate("window.ctrlscopeMetrics.samples[0].ts")
    assert max(v or 0 for v in series(fresh, "reconciles")["success"]) > 0
    fresh.close()

    # The overview: the simulated cluster, the worker, both demo controllers as live pipelines.
    page.goto(dashboard.url + "/")
    worker = '#overview .cluster[data-cluster="simulated"] .worker[data-worker="demo"]'
    page.wait_for_selector(f'{worker}[data-stale="false"] .ctl-card[data-controller="podset"]', timeout=10_000)
    cards = page.eval_on_selector_all(f"{worker} .ctl-card", "els => els.map(e => e.dataset.controller)")
    assert cards == ["deployment-summary", "podset"]
    for ctl in cards:
        card = f'{worker} .ctl-card[data-controller="{ctl}"]'
        assert "running" in page.inner_text(f"{card} .ctl-card-head")
        badges = page.eval_on_selector_all(f'{card} .stage[data-stage="reflector"] .badge', "els => els.map(e => e.textContent)")
        assert badges and set(badges) == {"watching", "synced"}, badges
        page.wait_for_function(f"""() => document.querySelector('{card} .stage[data-stage="reconcile"] .rate').textContent !== '–'""")
    assert "Kubernetes v1.32" in page.inner_text('.cluster[data-cluster="simulated"] .cluster-head')
    save_screenshot(page, artifacts, "overview-demo.png", full_page=True)
    page.evaluate("document.documentElement.dataset.theme = 'dark'")
    save_screenshot(page, artifacts, "overview-demo-dark.png", full_page=True)
    page.close()
    assert errors == []
