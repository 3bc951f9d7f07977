"""The Faults panel through the fault proxy, on the whole stack: the real control plane, ``manage.py
faultproxy`` in front of it (publishing its faults), the worker command running the example
controllers through the proxy, Redis, daphne and headless Chromium.

The panel works as it does on the simulator (test_faults_browser.py): an operator drops every watch
and sees the fault in the fault log and as a marker among the broken watches; an error rule is a
chip until removed. What a proxy cannot do -- pause a real cluster's kubelet, reset it -- stays
disabled, with the reason on hover.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.process import stop_process
from controllers.schema import ComponentKind, TopicKind, worker_topic
from tests.conftest import ROOT, wait_until
from tests.dashboard.faults_page import open_faults_panel
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_faults_browser import DEPLOYMENT, event_rows, set_theme
from tests.dashboard.test_panels_browser import close_page
from tests.golang.telemetry import Published

pytestmark = [pytest.mark.browser, pytest.mark.realcluster]

WORKER = "faults-proxy"
PAGE = f"/c/{WORKER}/deployment-summary/"


@pytest.fixture
def proxy_kubeconfig(realcluster, tmp_path: Path, redis_url: str, prefix: str):
    """``manage.py faultproxy`` in front of the real control plane, publishing to this test's prefix."""
    kubeconfig = tmp_path / "kubeconfig-faultproxy.yaml"
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_RUN_DIR": str(tmp_path)}
    log_path = tmp_path / "faultproxy.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "manage.py", "faultproxy", "--upstream-kubeconfig",
                                 str(realcluster.kubeconfig), "--kubeconfig", str(kubeconfig)],
                                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: "faults published" in log_path.read_text() or proc.poll() is not None, timeout=30,
                   what="the fault proxy to start")
        assert proc.poll() is None, log_path.read_text()
        yield kubeconfig
    finally:
        stop_process(proc)


@pytest.fixture
def dashboard(dashboard_factory, proxy_kubeconfig: Path):
    """Overrides conftest's: this dashboard injects faults through the test's fault proxy."""
    return dashboard_factory(CTRLSCOPE_SIM_KUBECONFIG=str(proxy_kubeconfig))


@pytest.fixture
def worker(realcluster, real_namespace, proxy_kubeconfig: Path, tmp_path: Path, redis_url: str, prefix: str):
    KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig)).send_json(
        "POST", f"/apis/apps/v1/namespaces/{real_namespace}/deployments", DEPLOYMENT)
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    with open(tmp_path / "worker.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runcontrollers", "--controller", "controllers.examples.deployments:setup",
             "--kubeconfig", str(proxy_kubeconfig), "--worker-name", WORKER, "--status-every", "0",
             "--allow-writes", "--namespace", real_namespace], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    # --namespace: the control plane is shared by the session's tests; watching all of it would fill the
    # page's event list with other tests' objects and push the rows this test looks for out of view.
    published = Published(redis_url, prefix)
    try:
        # Both informers synced through the proxy before a page opens: on a loaded machine the worker's
        # start (imports, the real API server's first lists) can outlast the page's own wait for its
        # watches, and a failure here names what the worker said instead of a browser timeout.
        def synced() -> bool:
            assert proc.poll() is None, (tmp_path / "worker.log").read_text()
            entries = published.state(worker_topic(WORKER, TopicKind.COMPONENTS)).values()
            return sum(1 for e in entries if e.get("kind") == ComponentKind.INFORMER and e.get("synced")) >= 2

        try:
            wait_until(synced, timeout=90, interval=0.2, what="the worker's two informers to sync through the proxy")
        except AssertionError as e:
            raise AssertionError(f"{e}\nworker log:\n{(tmp_path / 'worker.log').read_text()[-4000:]}") from None
        yield proc
    finally:
        published.close()
        stop_process(proc)


def test_operator_injects_faults_through_the_proxy_and_what_it_cannot_do_is_disabled_with_the_reason(
        browser, users, worker, artifacts):
    dashboard = users
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    try:
        open_faults_panel(page, dashboard, PAGE, watches_timeout=30_000, panel_timeout=15_000)
        assert page.inner_text("#faults-sim").startswith("fault proxy 127.0.0.1:")
        for action in ("pause-kubelet", "resume-kubelet", "reset"):
            button = f'#faults-actions button[data-action="{action}"]'
            assert page.is_disabled(button), action
            assert page.get_attribute(button, "title").startswith("not possible here: ")
        assert "only the simulator's kubelet" in page.get_attribute('#faults-actions button[data-action="pause-kubelet"]', "title")
        assert "only the simulator resets" in page.get_attribute('#faults-actions button[data-action="reset"]', "title")
        assert page.is_enabled('#faults-actions button[data-action="drop-watches"]')
        assert page.is_enabled('#faults-actions form[data-action="kill-pods"] [type=submit]')

        page.click('#faults-panel button[data-action="drop-watches"]')
        page.wait_for_selector("#faults-result.ok", timeout=10_000)
        assert page.inner_text("#faults-result") == "✓ drop watches: 2 watches closed"  # deployments + configmaps
        page.wait_for_selector("#faults-log tr.fault-drop-watches", timeout=10_000)
        assert "watches dropped: 2 connections aborted (by op)" in page.inner_text("#faults-log")
        page.wait_for_selector("#ievents tr.marker-fault", timeout=10_000)
        wait_until(lambda: sum("watch ended" in r for r in event_rows(page)) >= 2, timeout=15,
                   what="both watches to end")

        page.select_option("#fault-errors-verb", "create")
        page.fill("#fault-errors-resource", "configmaps")
        page.fill("#fault-errors-rate", "50")
        page.click('#faults-panel form[data-action="errors"] [type=submit]')
        page.wait_for_selector("#faults-rules .fault-chip.errors", timeout=10_000)
        assert page.inner_text("#faults-rules .fault-chip.errors").startswith("errors 50% create configmaps → 500")
        for theme in ("light", "dark"):
            set_theme(page, theme)
            save_screenshot(page, artifacts, f"faults-proxy-controller-{theme}.png", full_page=True)
        page.click("#faults-rules .fault-chip.errors .chip-x")
        page.wait_for_selector("#faults-rules .fault-chip.errors", state="detached", timeout=10_000)

        # Logged out: the same panel, read-only; the proxy's limits still say why.
        browser.clear_cookies()
        page.goto(dashboard.url + "/cluster/")
        page.wait_for_selector('#faults-sim[data-state="ok"]', timeout=10_000)
        page.wait_for_selector("#faults-log tr.fault-drop-watches", timeout=10_000)
        assert page.is_disabled('#faults-panel button[data-action="drop-watches"]')
        assert page.get_attribute('#faults-panel button[data-action="pause-kubelet"]', "title").startswith(
            "not possible here: ")
        set_theme(page, "light")
        save_screenshot(page, artifacts, "faults-proxy-cluster-readonly.png", full_page=True)
    finally:
        page.evaluate("localStorage.removeItem('ctrlscope-theme'); localStorage.removeItem('ctrlscope-faults-open')")
        browser.clear_cookies()
    close_page(page)
