"""The scenarios page: live narration, claims and scoreboard for everyone; starting needs an operator."""

from __future__ import annotations

import time

import pytest
import requests

from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.conftest import login


def post_start(session: requests.Session, dashboard, name: str, speed: str = "0.25") -> requests.Response:
    token = session.cookies.get("csrftoken", "")
    return session.post(f"{dashboard.url}/scenarios/{name}/start", data={"speed": speed}, timeout=10,
                        headers={"X-CSRFToken": token, "Referer": dashboard.url + "/scenarios/"})


def test_only_operators_may_start_a_scenario(users):
    dashboard = users
    anonymous = requests.Session()
    anonymous.get(dashboard.url + "/scenarios/", timeout=10)
    assert post_start(anonymous, dashboard, "pod-killer").status_code == 403
    viewer = login(dashboard, "viewer")
    resp = post_start(viewer, dashboard, "pod-killer")
    assert resp.status_code == 403 and "operators only" in resp.json()["error"]
    assert not list(dashboard.run_dir.glob("scenario.pid")), "a refused start must start nothing"
    op = login(dashboard, "op")
    assert post_start(op, dashboard, "no-such-scenario").status_code == 404
    assert post_start(op, dashboard, "pod-killer", speed="fast").status_code == 400
    without_csrf = op.post(f"{dashboard.url}/scenarios/pod-killer/start", data={"speed": "1"}, timeout=10)
    assert without_csrf.status_code == 403
    started = post_start(op, dashboard, "pod-killer")
    assert started.status_code == 202 and started.json()["started"] == "pod-killer"


@pytest.mark.browser
def test_page_shows_live_narration_claims_and_scoreboard(browser, dashboard, publisher_factory, artifacts):
    pub = publisher_factory()
    page = browser.new_page()
    page.goto(dashboard.url + "/scenarios/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    pub.set_state("scenarios", "pod-killer", {"title": "Pod killer", "running": True})
    pub.publish("scenarios", {"k": "narration", "scenario": "pod-killer", "text": "Chaos: two pods die.", "ts": 1})
    pub.flush()
    section = 'section.scenario[data-name="pod-killer"]'
    page.wait_for_selector(f"{section} .live li", timeout=10_000)
    assert page.get_attribute(f"{section} .state", "data-state") == "running"
    pub.set_state("scenarios", "pod-killer", {
        "title": "Pod killer", "running": False,
        "claims": [{"text": "the reconciler restored 4 pods", "held": True, "detail": "4 pods"},
                   {"text": "the handler-only PodSet stays at 2 pods", "held": True, "detail": "2 pods"}],
        "measurements": {"reconciler_restored_after_s": 0.41, "handler_pods": 2, "desired": 4}})
    pub.flush()
    page.wait_for_selector(f'{section} .state[data-state="held"]', timeout=10_000)
    assert page.locator(f"{section} .claims tr.held").count() == 2
    assert "handler pods" in page.inner_text(f"{section} .scoreboard")
    page.screenshot(path=str(artifacts / "scenarios-page.png"), full_page=True)
    page.close()


SCORE = {"podsets": 2, "converged": 1, "desired": 8, "actual": 6, "converging_s": 4.2, "last_converge_s": 0.35,
         "handler_calls": 7, "reconciles": 0, "api_calls": 9, "lost_side_effects": 2, "retried_errors": 0}


def publish_scoreboard(obs: TelemetryObserver, at: float | None = None) -> None:
    at = time.time() * 1000 if at is None else at
    obs.on_status("podset-scoreboard", key="handlers", value={**SCORE, "at": at})
    obs.on_status("podset-scoreboard", key="reconciler", value={
        **SCORE, "converged": 2, "actual": 8, "converging_s": None, "handler_calls": 0, "reconciles": 23,
        "api_calls": 31, "lost_side_effects": 0, "retried_errors": 5, "at": at})


@pytest.mark.browser
def test_live_scoreboard_compares_the_two_implementations(browser, dashboard, publisher_factory, artifacts):
    pub = publisher_factory()
    publish_scoreboard(TelemetryObserver(pub, worker="demo"))
    # A worker that stopped reporting a minute ago (a removed standby): its rows stay hidden.
    publish_scoreboard(TelemetryObserver(pub, worker="gone"), at=time.time() * 1000 - 60_000)
    pub.flush()
    page = browser.new_page()
    page.goto(dashboard.url + "/scenarios/")
    page.wait_for_selector("#scoreboards table.scoreboard-live", timeout=10_000)
    page.wait_for_timeout(300)
    assert page.locator("#scoreboards .board:visible").count() == 1
    assert "worker demo" in page.inner_text("#scoreboards") and "worker gone" not in page.inner_text("#scoreboards")
    rows = {r[0]: r[1:] for r in page.eval_on_selector_all(
        "#scoreboards tbody tr", "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")}
    assert rows["pods wanted → running"] == ["8 → 6", "8 → 8"]
    assert rows["PodSets matching their spec"] == ["1 / 2", "2 / 2"]
    assert rows["diverged for (oldest open gap)"] == ["4.2 s", "—"]
    assert rows["handler calls / reconciles"] == ["7 handler calls", "23 reconciles"]
    assert rows["failures"] == ["2 lost, never retried", "5 raised, retried with backoff"]
    assert page.locator("#scoreboards td.off").count() >= 3 and page.locator("#scoreboards td.good").count() >= 3
    assert "kopf operator" not in page.inner_text("#scoreboards thead")  # no kopf PodSet: no column
    page.screenshot(path=str(artifacts / "scenarios-scoreboard.png"), full_page=True)

    # A kopf PodSet appears: a third column, its counts from the caches, the rest on the kopf worker.
    obs = TelemetryObserver(pub, worker="demo")
    obs.on_status("podset-scoreboard", key="kopf", value={
        **SCORE, "converged": 1, "podsets": 1, "desired": 3, "actual": 3, "converging_s": None, "handler_calls": None,
        "reconciles": None, "api_calls": None, "lost_side_effects": None, "retried_errors": None,
        "at": time.time() * 1000})
    pub.flush()
    page.wait_for_function("() => document.querySelector('#scoreboards thead').textContent.includes('kopf operator')",
                           timeout=10_000)
    rows = {r[0]: r[1:] for r in page.eval_on_selector_all(
        "#scoreboards tbody tr", "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")}
    assert rows["pods wanted → running"] == ["8 → 6", "8 → 8", "3 → 3"]
    assert rows["API calls made"][2] == rows["handler calls / reconciles"][2] == "on the kopf worker's page"
    page.close()


@pytest.mark.browser
def test_a_running_scenario_is_narrated_on_the_controller_page(browser, dashboard, publisher_factory):
    from tests.dashboard.test_panels_browser import close_page, open_controller_page, seed_worker

    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    publish_scoreboard(obs)
    started = time.time() * 1000
    pub.set_state("scenarios", "retry-storm", {"title": "Retry storm", "running": True, "started": started,
                                               "line": "Phase 1: steady state."})
    pub.flush()
    page = open_controller_page(browser, dashboard)
    page.wait_for_selector("#scenario-banner:not([hidden])", timeout=10_000)
    # Opened mid-scenario: the latest line so far is there at once.
    page.wait_for_function("() => document.getElementById('scenario-banner').textContent.includes('Phase 1: steady state.')",
                           timeout=10_000)
    pub.publish("scenarios", {"k": "narration", "scenario": "retry-storm", "text": "Half of all pod creations fail.",
                              "ts": time.time() * 1000})
    pub.flush()
    page.wait_for_function("() => document.getElementById('scenario-banner').textContent.includes('Half of all pod creations fail.')",
                           timeout=10_000)
    text = page.inner_text("#scenario-banner")
    assert "Retry storm" in text and "handler-only 6 pods for 8 wanted" in text and "Reconciler 8 pods for 8 wanted" in text
    pub.set_state("scenarios", "retry-storm", {"title": "Retry storm", "running": False, "finished": time.time() * 1000,
                                               "claims": [{"text": "converged", "held": True, "detail": ""}]})
    pub.flush()
    page.wait_for_function("() => document.getElementById('scenario-banner').textContent.includes('1 / 1 claims held')",
                           timeout=10_000)
    page.click("#scenario-banner .sb-close")
    assert page.locator("#scenario-banner").is_hidden()
    close_page(page)


@pytest.mark.browser
def test_theme_toggle_cycles_and_is_remembered(browser, dashboard):
    page = browser.new_page()
    page.goto(dashboard.url + "/scenarios/")
    page.evaluate("localStorage.removeItem('ctrlscope-theme')")
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") is None  # auto: the OS decides
    page.click("#theme-toggle")
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.keyboard.press("t")
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == bg == "rgb(17, 21, 26)"
    page.evaluate("localStorage.removeItem('ctrlscope-theme')")
    page.close()


def test_scenarios_that_inject_faults_are_unavailable_without_the_simulator(dashboard_factory):
    """`demo --real` / `--kubeconfig` run the dashboard with fault injection off: the page says which
    scenarios need the simulator instead of offering them, and starting one is refused."""
    import re
    import subprocess
    import sys

    from controllers.scenarios import SCENARIOS
    from tests.conftest import ROOT
    from tests.dashboard.conftest import CREATE_USERS

    dashboard = dashboard_factory(CTRLSCOPE_SIM_KUBECONFIG="")
    subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_USERS], cwd=ROOT, env=dashboard.env,
                   check=True, capture_output=True, timeout=60)
    op = login(dashboard, "op")
    html = op.get(dashboard.url + "/scenarios/", timeout=10).text
    sections = dict(re.findall(r'<section class="panel scenario" data-name="([^"]+)".*?(.*?)</section>', html, re.S))
    assert set(sections) == set(SCENARIOS)
    for name, scenario in SCENARIOS.items():
        if scenario.needs_faults:
            assert "unavailable here" in sections[name] and 'class="start"' not in sections[name], name
        else:
            assert 'class="start"' in sections[name] and "unavailable here" not in sections[name], name
    assert {n for n, s in SCENARIOS.items() if s.needs_faults} == {"retry-storm", "watch-break", "kopf-vs-reconciler",
                                                                   "watcher-vs-informer"}
    pid_file = dashboard.run_dir / "scenario.pid"  # (the run dir is shared: another test may have left one)
    before = pid_file.read_text() if pid_file.exists() else None
    resp = post_start(op, dashboard, "retry-storm")
    assert resp.status_code == 409 and "injects the simulated cluster's faults" in resp.json()["error"]
    assert (pid_file.read_text() if pid_file.exists() else None) == before, "a refused start must start nothing"
