"""A plain informer -- the source document's program: a SharedInformerFactory Deployment informer
with Add/Update/Delete handlers that print, and no controller -- has a home on the dashboard, in Go
(go/cmd/deployment-informer) and in Python (controllers.examples.deployments:setup_watch) alike:
its own card on the overview, its chain ending at its handlers, and a page with every handler's
calls, its watch events and its cache, in headless Chromium against the simulator.

The informer is named as the worker names it (apps/v1/Deployment) everywhere the page shows it --
live rows, the rows loaded with the page, the cache dropdown -- never by its topic segment
(apps_v1_Deployment); and a handler row never comes before the watch event that caused it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controllers.process import stop_process
from tests.conftest import ROOT, wait_until
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_informer_names_browser import SHOTS, event_rows
from tests.dashboard.test_panels_browser import close_page
from tests.golang.telemetry import Published
from tests.golang.test_go_samples import kubectl

pytestmark = pytest.mark.browser

INFORMER = "apps/v1/Deployment"
SEGMENT = "apps_v1_Deployment"
# runtime -> (worker name, the handler's name in the program)
PROGRAMS = {"go": ("go-printer", "print"), "python": ("py-printer", "deployment-logger")}


@pytest.fixture
def dashboard(dashboard_factory, sim_kubeconfig: Path):
    return dashboard_factory(CTRLSCOPE_SIM_KUBECONFIG=str(sim_kubeconfig))


@pytest.fixture
def start_program(request, sim_kubeconfig: Path, redis_url: str, prefix: str, tmp_path: Path):
    """``start(runtime)``: the plain informer program of ``runtime``, run as its users run it (the Go
    one built only when asked for)."""
    started: list[subprocess.Popen] = []

    def start(runtime: str) -> None:
        worker, _ = PROGRAMS[runtime]
        if runtime == "go":
            request.getfixturevalue("go_process")("deployment-informer", "--kubeconfig", str(sim_kubeconfig), "--worker-name", worker)
            return
        env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
        with open(tmp_path / "worker.log", "wb") as log:
            started.append(subprocess.Popen(
                [sys.executable, "manage.py", "runcontrollers", "--controller", "controllers.examples.deployments:setup_watch",
                 "--kubeconfig", str(sim_kubeconfig), "--worker-name", worker, "--status-every", "0"],
                cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT))

    yield start
    for proc in started:
        stop_process(proc)


def shot(page, artifacts: Path, name: str) -> None:
    save_screenshot(page, artifacts, name, full_page=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=True)


@pytest.mark.parametrize("runtime", ["go", "python"])
def test_a_plain_informers_card_and_page_show_its_handler_calls(runtime, start_program, browser, dashboard,
                                                                sim_kubeconfig, redis_url, prefix, tmp_path, artifacts):
    worker, handler = PROGRAMS[runtime]
    topic = f"w/{worker}/informer/{SEGMENT}"
    published = Published(redis_url, prefix)
    try:
        # One Deployment before the program starts (its add comes from the initial list), then a
        # create, a scale and a delete through kubectl (watch events, each a handler call).
        kubectl(sim_kubeconfig, tmp_path, "create", "deployment", "before", "--image=nginx:1.27")
        start_program(runtime)
        wait_until(lambda: published.state(f"w/{worker}/components").get(f"informer/{INFORMER}", {}).get("synced"),
                   timeout=60, what=f"the {runtime} informer to sync")
        kubectl(sim_kubeconfig, tmp_path, "create", "deployment", "web", "--image=nginx:1.27")
        wait_until(lambda: "default/web" in published.state(topic), timeout=15, what="web in the cache")
        kubectl(sim_kubeconfig, tmp_path, "scale", "deployment", "web", "--replicas=3")
        kubectl(sim_kubeconfig, tmp_path, "delete", "deployment", "before")
        wait_until(lambda: {(r["event"], r["key"]) for r in published.records(topic, "handler")}
                   >= {("add", "default/before"), ("add", "default/web"), ("update", "default/web"), ("delete", "default/before")},
                   timeout=20, what="the handler calls")
        components = published.state(f"w/{worker}/components")
        assert not [k for k in components if k.startswith("controller/")], "a plain informer program announces no controller"
    finally:
        published.close()

    # The overview: the informer is a card of its own, ending at its handlers.
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + "/")
    box = f'#overview .worker[data-worker="{worker}"]'
    card = f'{box} .informer-card[data-informer="{INFORMER}"]'
    page.wait_for_selector(card, timeout=20_000)
    assert page.eval_on_selector_all(f"{box} .ctl-card:not(.informer-card)", "els => els.length") == 0
    assert page.eval_on_selector_all(f"{card} .stage", "els => els.map(e => e.dataset.stage)") == [
        "reflector", "fifo", "cache", "handlers"]
    # The handler calls come with the worker's stage samples, a second apart.
    page.wait_for_function("""(sel) => { const m = /([0-9,]+) calls?/.exec(document.querySelector(sel)?.innerText || "");
                                         return m && Number(m[1].replace(/,/g, "")) >= 4; }""",
                           arg=f'{card} .stage[data-stage="handlers"] .stage-value', timeout=15_000)
    assert page.inner_text(f"{card} .informer-link") == INFORMER
    shot(page, artifacts, f"29b-{runtime}-overview.png")

    # Its page: the handler's calls, the events by key, the cache -- all named apps/v1/Deployment.
    page.click(f"{card} .informer-link")
    page.wait_for_url(f"**/c/{worker}/informer/{SEGMENT}/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    assert page.inner_text("#h-informer") == INFORMER
    calls = f'#handler-calls tr[data-handler="{handler}"]'
    page.wait_for_function("""(sel) => { const tr = document.querySelector(sel);
        return tr && Number(tr.querySelector('[data-event="delete"]').textContent) >= 1; }""", arg=calls, timeout=15_000)
    counts = page.eval_on_selector(calls, "tr => [...tr.querySelectorAll('[data-event]')].map(td => [td.dataset.event, Number(td.textContent)])")
    counts = dict(counts)
    assert counts["add"] >= 2 and counts["update"] >= 1 and counts["delete"] >= 1, counts
    page.wait_for_function("(sel) => document.querySelectorAll(sel).length >= 4",
                           arg="#ievents tr.ev-handler", timeout=15_000)

    def check_rows() -> list[dict[str, str]]:
        rows = event_rows(page)
        assert rows and {r["informer"] for r in rows} == {INFORMER}, {r["informer"] for r in rows}
        mine = [(r["type"], r["key"]) for r in rows if r["kind"] == "handler" and r["handler"] == handler]
        assert {("add", "default/before"), ("add", "default/web"), ("update", "default/web"),
                ("delete", "default/before")} <= set(mine), mine
        # Causal order: a handler row comes after (above, newest first) the watch event it answers.
        watch = {(r["key"], r["rv"]): i for i, r in enumerate(rows) if r["kind"] == "watch"}
        for i, r in enumerate(rows):
            if r["kind"] == "handler" and (r["key"], r["rv"]) in watch:
                assert watch[(r["key"], r["rv"])] > i, f"handler row {r} is older than its watch event: {rows}"
        return rows

    check_rows()
    assert page.eval_on_selector_all("#cache-informer option", "os => os.map(o => o.textContent)") == [INFORMER]
    assert page.inner_text("#cache-topic") == INFORMER
    page.wait_for_selector('#cache-spacer .cache-row[data-key="default/web"]', timeout=10_000)
    assert SEGMENT not in page.inner_text("body"), "a topic segment is shown"
    shot(page, artifacts, f"29b-{runtime}-informer-page.png")

    # Live: a new Deployment's watch event and handler call arrive on the open page.
    kubectl(sim_kubeconfig, tmp_path, "create", "deployment", "live", "--image=nginx:1.27")
    page.wait_for_selector('#ievents tr.ev-handler:has(td.key:text-is("default/live"))', timeout=15_000)
    check_rows()

    # Reloaded, the same rows come from the page's history (snapshot.json), named as live ones were.
    page.reload()
    page.wait_for_selector('#ievents tr.ev-handler:has(td.key:text-is("default/live"))', timeout=15_000)
    check_rows()
    assert SEGMENT not in page.inner_text("body"), "a topic segment is shown"
    close_page(page)
