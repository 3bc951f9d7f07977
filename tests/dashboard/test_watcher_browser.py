"""A raw watch loop on the dashboard (protocol v1.6 watcher), in headless Chromium against the
simulator: ``python -m controllers.examples.raw_watcher --variant stops-on-end`` gets a card of its own
on the overview (Watch → no cache → a GET per event) which says, once the server ended its watch, that
the loop no longer watches -- while its worker stays live, because the program runs on and never
notices -- and a page listing its streams (opened from where, ended how, then what) and what it did.
Then the watcher-vs-informer scenario, run as ``manage.py scenario``, fills the scenarios page's
results table: the source document's claims, each held, above the rows that measure it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.process import stop_process
from controllers.schema import ReflectorState
from controllers.sim.faults_client import SimFaults
from tests.conftest import ROOT, wait_until
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_faults_browser import sim_kubeconfig  # noqa: F401  (the simulator, publishing faults)
from tests.golang.telemetry import Published

pytestmark = pytest.mark.browser

WORKER = "rw-live"


@pytest.fixture
def dashboard(dashboard_factory, sim_kubeconfig: Path):  # noqa: F811
    return dashboard_factory(CTRLSCOPE_SIM_KUBECONFIG=str(sim_kubeconfig))


def test_a_raw_watchers_card_page_and_the_scenario_table(browser, dashboard, sim_kubeconfig, redis_url, prefix,  # noqa: F811
                                                         tmp_path, artifacts):
    client = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    client.send_json("POST", "/apis/apps/v1/namespaces/default/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "raw-watcher.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "controllers.examples.raw_watcher", "--variant", "stops-on-end",
                                 "--kubeconfig", str(sim_kubeconfig), "--worker-name", WORKER],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    published = Published(redis_url, prefix)
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    try:
        wait_until(lambda: published.records(f"w/{WORKER}/watcher/deployments", "read"), timeout=30,
                   what="the loop's GET of web")

        # The overview: the loop is a card of its own, its worker live.
        page.goto(dashboard.url + "/")
        box = f'#overview .worker[data-worker="{WORKER}"]'
        card = f'{box} .watcher-card[data-watcher="deployments"]'
        page.wait_for_selector(card, timeout=20_000)
        assert page.eval_on_selector_all(f"{card} .stage", "els => els.map(e => e.dataset.stage)") == ["watch", "nocache", "reads"]
        page.wait_for_function("(sel) => /[1-9][0-9]* GETs?/.test(document.querySelector(sel)?.innerText || '')",
                               arg=f'{card} .stage[data-stage="reads"] .stage-value', timeout=15_000)
        assert page.inner_text(f"{card} .badge.variant") == "stops-on-end"
        assert page.get_attribute(card, "data-state") == ReflectorState.WATCHING
        save_screenshot(page, artifacts, "30-watcher-card-watching.png", full_page=True)

        # The server ends the watch, as after its timeout: the loop is over, the program runs on.
        SimFaults(client).end_watches()
        page.wait_for_selector(f'{card}[data-state="{ReflectorState.STOPPED}"] .watcher-stopped', timeout=15_000)
        assert "not watching since" in page.inner_text(f"{card} .watcher-stopped")
        assert "(last stream: closed)" in page.inner_text(f"{card} .watcher-stopped")
        assert page.get_attribute(box, "data-liveness") == "live", "the worker runs on: only its loop stopped"
        assert proc.poll() is None
        save_screenshot(page, artifacts, "30-watcher-card-stopped.png", full_page=True)

        # Its page: one stream, opened from "", closed by the server, after which nothing watched.
        page.click(f"{card} .watcher-link")
        page.wait_for_url(f"**/c/{WORKER}/watcher/deployments/")
        page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
        assert page.inner_text("#h-watcher") == "deployments"
        page.wait_for_selector('#streams tr[data-reason="closed"]', timeout=10_000)
        cells = page.eval_on_selector('#streams tr[data-reason="closed"]', "tr => [...tr.cells].map(c => c.textContent)")
        assert cells[1] == '""' and int(cells[2]) >= 1 and int(cells[3]) >= 1, cells
        assert cells[6] == "the loop stopped: nothing watches any more", cells
        kinds = page.eval_on_selector_all("#wevents tr", "els => els.map(e => e.dataset.k)")
        assert {"watcher", "watch_start", "watch", "read", "watch_end", "state"} <= set(kinds), kinds
        page.wait_for_selector('#pipeline .watcher-chain .watcher-stopped', timeout=10_000)
        save_screenshot(page, artifacts, "30-watcher-page.png", full_page=True)
    finally:
        stop_process(proc)
        published.close()

    # The scenario, as an operator's "start" runs it: its results table on /scenarios/.
    run = subprocess.run([sys.executable, "manage.py", "scenario", "watcher-vs-informer", "--speed", "0.15",
                          "--kubeconfig", str(sim_kubeconfig)],
                         cwd=ROOT, env={**env, "CTRLSCOPE_RUN_DIR": str(tmp_path), "CTRLSCOPE_DEMO": "1"}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    page.goto(dashboard.url + "/scenarios/")
    section = "section.scenario#watcher-vs-informer"
    page.wait_for_selector(f"{section} .results:not([hidden]) tbody tr", timeout=15_000)
    head = page.eval_on_selector_all(f"{section} .results thead th", "els => els.map(e => e.textContent)")
    assert head == ["", "informer", "stops-on-end", "restart-from-empty", "restart-from-last"], head
    claims = page.eval_on_selector_all(f"{section} .results tr.claim-head", "els => els.map(e => [e.className, e.textContent])")
    assert len(claims) == 4 and all("held" in cls for cls, _ in claims), claims
    assert claims[0][1].startswith("✓ claim 1: an informer caches")
    rows = page.eval_on_selector_all(f"{section} .results tbody tr:not(.claim-head)",
                                     "els => els.map(e => [...e.cells].map(c => c.textContent))")
    by_label = {r[0]: r[1:] for r in rows}
    requests = by_label["API requests the server served for it"]
    assert int(requests[0].split()[0]) < min(int(c.split()[0]) for c in requests[1:]), requests
    assert page.eval_on_selector_all(f"{section} .scoreboard tbody tr", "els => els.length") == 0, \
        "a scenario with a results table shows it instead of the flat measurements"
    page.locator(section).screenshot(path=str(artifacts / "30-watcher-vs-informer-results.png"))

    # The scenario's sides were workers of their own while it ran: their cards are on the overview.
    page.goto(dashboard.url + "/")
    page.wait_for_selector('#overview .worker[data-worker="watcher-vs-informer.raw-watchers"] .watcher-card', timeout=15_000)
    assert page.eval_on_selector_all('#overview .worker[data-worker="watcher-vs-informer.raw-watchers"] .watcher-card',
                                     "els => els.map(e => e.dataset.watcher).sort()") == [
        "restart-from-empty", "restart-from-last", "stops-on-end"]
    save_screenshot(page, artifacts, "30-watcher-vs-informer-overview.png", full_page=True)
    assert not errors, errors
    page.close()
