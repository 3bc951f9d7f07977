"""Fault injection from the page, on the whole stack: ``manage.py simcluster`` (publishing its faults),
the worker command running the example controllers, Redis, daphne and headless Chromium.

An operator drops every watch from the controller page's Faults panel: the fault appears in the
fault log and, as a "⚡ fault" marker, in the informer events next to the broken watches it causes.
Anonymous visitors see the same panel with every control disabled ("operators only").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.process import stop_process
from tests.conftest import ROOT, wait_until
from tests.dashboard.faults_page import open_faults_panel
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser

WORKER = "faults"
PAGE = f"/c/{WORKER}/deployment-summary/"
DEPLOYMENT = {"metadata": {"name": "web", "labels": {"app": "web"}},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


@pytest.fixture
def sim_kubeconfig(tmp_path: Path, redis_url: str, prefix: str):
    """``manage.py simcluster`` as the demo runs it, publishing to this test's prefix."""
    kubeconfig = tmp_path / "kubeconfig-sim.yaml"
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_RUN_DIR": str(tmp_path)}
    with open(tmp_path / "simcluster.log", "wb") as log:
        proc = subprocess.Popen([sys.executable, "manage.py", "simcluster", "--port", "0", "--kubeconfig",
                                 str(kubeconfig), "--start-delay", "0.05"], cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT)
    try:
        # A start, not a race: a cold manage.py (Django, kubernetes, the simulator) took over 20 s on a
        # loaded CI machine. Wait for the line or the process's end, whichever comes first, and show
        # the log when it does not start.
        log_path = tmp_path / "simcluster.log"
        wait_until(lambda: "faults published" in log_path.read_text() or proc.poll() is not None, timeout=120,
                   what="the simulator to start")
        assert "faults published" in log_path.read_text(), f"simcluster exited {proc.returncode}:\n{log_path.read_text()}"
        yield kubeconfig
    finally:
        stop_process(proc)


@pytest.fixture
def dashboard(dashboard_factory, sim_kubeconfig: Path):
    """Overrides conftest's: this dashboard injects faults into the test's simulator."""
    return dashboard_factory(CTRLSCOPE_SIM_KUBECONFIG=str(sim_kubeconfig))


@pytest.fixture
def worker(sim_kubeconfig: Path, tmp_path: Path, redis_url: str, prefix: str):
    KubernetesClient.from_kubeconfig(str(sim_kubeconfig)).send_json(
        "POST", "/apis/apps/v1/namespaces/default/deployments", DEPLOYMENT)
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    with open(tmp_path / "worker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runcontrollers", "--controller", "controllers.examples.deployments:setup",
             "--kubeconfig", str(sim_kubeconfig), "--worker-name", WORKER, "--status-every", "0"],
            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    yield proc
    stop_process(proc)


def event_rows(page) -> list[str]:
    return page.eval_on_selector_all("#ievents tr", "trs => trs.map(tr => tr.textContent)")


def set_theme(page, theme: str) -> None:
    while page.evaluate("document.documentElement.dataset.theme || 'auto'") != theme:
        page.click("#theme-toggle")


def test_operator_drops_watches_from_the_page_and_sees_the_fault_next_to_the_reconnect(
        browser, users, worker, artifacts):
    dashboard = users
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    try:
        open_faults_panel(page, dashboard, PAGE, watches_timeout=20_000, panel_timeout=10_000)
        assert page.is_enabled('#faults-panel button[data-action="drop-watches"]')

        page.click('#faults-panel button[data-action="drop-watches"]')
        page.wait_for_selector("#faults-result.ok", timeout=10_000)
        assert page.inner_text("#faults-result") == "✓ drop watches: 2 watches closed"  # deployments + configmaps
        page.wait_for_selector("#faults-log tr.fault-drop-watches", timeout=10_000)
        assert "watches dropped: 2 connections aborted (by op)" in page.inner_text("#faults-log")
        page.wait_for_selector("#ievents tr.marker-fault", timeout=10_000)
        # Both informers' watches break and restart: the marker sits among those rows.
        wait_until(lambda: sum("watch ended" in r for r in event_rows(page)) >= 2, timeout=10,
                   what="both watches to end")
        rows = event_rows(page)
        at = next(i for i, r in enumerate(rows) if "⚡ fault: watches dropped: 2 connections aborted (by op)" in r)
        assert any("watch ended" in r for r in rows[max(0, at - 3):at + 4]), rows[:10]

        # An error rule from the form shows as a chip on every page until it is removed.
        page.select_option("#fault-errors-verb", "create")
        page.fill("#fault-errors-resource", "configmaps")
        page.fill("#fault-errors-rate", "50")
        page.click('#faults-panel form[data-action="errors"] [type=submit]')
        page.wait_for_selector("#faults-rules .fault-chip.errors", timeout=10_000)
        assert page.inner_text("#faults-rules .fault-chip.errors").startswith("errors 50% create configmaps → 500")
        page.wait_for_selector("#ievents tr.marker-fault:has-text('50% of create on configmaps')", timeout=10_000)
        for theme in ("light", "dark"):
            set_theme(page, theme)
            page.locator("#events-panel").scroll_into_view_if_needed()
            save_screenshot(page, artifacts, f"faults-controller-{theme}.png", full_page=True)

        page.goto(dashboard.url + "/cluster/")
        page.wait_for_selector("#faults-log tr.fault-drop-watches", timeout=10_000)
        page.wait_for_selector('#faults-sim[data-state="ok"]', timeout=10_000)
        for theme in ("light", "dark"):
            set_theme(page, theme)
            save_screenshot(page, artifacts, f"faults-cluster-{theme}.png", full_page=True)
        page.click("#faults-rules .fault-chip.errors .chip-x")
        page.wait_for_selector("#faults-rules .fault-chip.errors", state="detached", timeout=10_000)

        # Logged out, the same panel is read-only: every control disabled, operators only.
        browser.clear_cookies()
        page.goto(dashboard.url + "/cluster/")
        page.wait_for_selector('#faults-sim[data-state="ok"]', timeout=10_000)
        page.wait_for_selector("#faults-log tr.fault-drop-watches", timeout=10_000)
        assert page.is_disabled('#faults-panel button[data-action="drop-watches"]')
        assert page.get_attribute('#faults-panel button[data-action="reset"]', "title").startswith("operators only")
        assert "only operators may inject faults" in page.inner_text("#faults-actions")
        set_theme(page, "light")
        save_screenshot(page, artifacts, "faults-cluster-readonly.png", full_page=True)
    finally:
        page.evaluate("localStorage.removeItem('ctrlscope-theme'); localStorage.removeItem('ctrlscope-faults-open')")
        browser.clear_cookies()
    close_page(page)
