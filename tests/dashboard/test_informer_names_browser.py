"""The controller page names and filters informer rows the same way whether they came with the page
(its history, loaded before the worker's components are known) or live, in real headless Chromium.

A worker publishes watch events and handler calls of two informers, v1/ConfigMap (which its
controller ``mirror`` watches, For and Owns: a ConfigMap mirror) and v1/Secret (which it does not),
before it announces either informer or the controller. The page opened then has nothing to name
the rows by; once the components arrive, every row -- history and live -- says v1/ConfigMap (never
its topic segment v1_ConfigMap), the Secret's rows are gone and stay out, and the For and Owns
handlers' calls read apart. Driven through a real TelemetryObserver, as test_panels_browser.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser

FOR, OWNS = "controller/mirror (For)", "controller/mirror (Owns)"
SHOTS = Path("/tmp/shots")  # screenshots to look at, besides artifacts/


def event_rows(page) -> list[dict[str, str]]:
    """The informer events table, newest first."""
    return page.eval_on_selector_all("#ievents tr:not(.resync-marker):not(.ev-skipped)", """trs => trs.map(tr => {
        const c = [...tr.cells].map(td => td.textContent);
        return {informer: c[1], kind: c[2], type: c[3], key: c[4], rv: c[5], handler: c[6], outcome: c[7]};
    })""")


def event(obs: TelemetryObserver, informer: str, key: str, rv: int, handler: str) -> None:
    obs.on_watch_event(informer, event_type="ADDED", key=key, resource_version=str(rv))
    obs.on_handler(informer, handler=handler, event="add", key=key, outcome="ok", duration=0.0001,
                   new={"metadata": {"resourceVersion": str(rv)}})


def test_history_and_live_rows_are_named_and_filtered_alike(browser, dashboard, publisher_factory, artifacts):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="wn")
    event(obs, "v1/ConfigMap", "default/source", 10, FOR)
    event(obs, "v1/ConfigMap", "default/source-mirror", 11, OWNS)
    event(obs, "v1/Secret", "default/token", 12, "print")
    obs.on_queue("mirror", op="add", key="default/source", depth=1)  # the page's controller topics exist
    obs.on_reconcile_start("mirror", key="default/source", worker=0)
    pub.flush()

    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + "/c/wn/mirror/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    # Nothing says yet what the controller watches: every informer's rows, from the history.
    page.wait_for_function("() => document.querySelectorAll('#ievents tr.ev-handler').length === 3", timeout=10_000)

    # The worker announces its informers and its controller.
    for informer in ("v1/ConfigMap", "v1/Secret"):
        obs.on_informer(informer, fifo="DeltaFIFO", resync_period=0.0)
    obs.on_controller("mirror", watches=["v1/ConfigMap"], workers=1, started=True)
    pub.flush()
    page.wait_for_function("() => document.querySelectorAll('#ievents tr.ev-handler').length === 2", timeout=10_000)
    rows = event_rows(page)
    assert {r["informer"] for r in rows} == {"v1/ConfigMap"}, rows
    assert sorted((r["handler"], r["key"]) for r in rows if r["kind"] == "handler") == [
        (FOR, "default/source"), (OWNS, "default/source-mirror")]
    assert page.inner_text("#ev-informers") == "v1/ConfigMap"
    assert page.eval_on_selector_all("#cache-informer option", "os => os.map(o => o.textContent)") == ["v1/ConfigMap", "v1/Secret"]
    # The handler column holds a controller's handler names whole.
    assert page.eval_on_selector_all("#ievents tr.ev-handler td:nth-child(7)", "tds => tds.every(td => td.scrollWidth <= td.clientWidth)")

    # Live: the Secret's events stay out, the ConfigMap's come in, named alike.
    event(obs, "v1/Secret", "default/token-2", 13, "print")
    event(obs, "v1/ConfigMap", "default/other", 14, FOR)
    pub.flush()
    # (on a controller's page the key is a link to its page under the controller)
    page.wait_for_selector('#ievents tr.ev-handler:has(td.key a.key-link:text-is("default/other"))', timeout=10_000)
    rows = event_rows(page)
    assert {r["informer"] for r in rows} == {"v1/ConfigMap"} and "default/token-2" not in {r["key"] for r in rows}, rows
    assert "v1_ConfigMap" not in page.inner_text("body") and "v1_Secret" not in page.inner_text("body")
    save_screenshot(page, artifacts, "informer-names.png", full_page=True)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "29b-controller-page-names.png"), full_page=True)

    # Reopened, the page knows the names from its first paint: the server resolved them.
    page.reload()
    page.wait_for_function("() => document.querySelectorAll('#ievents tr.ev-handler').length === 3", timeout=10_000)
    assert page.evaluate("JSON.parse(document.getElementById('cs-page').textContent).names") == {
        "w/wn/informer/v1_ConfigMap": "v1/ConfigMap", "w/wn/informer/v1_Secret": "v1/Secret"}
    rows = event_rows(page)
    assert {r["informer"] for r in rows} == {"v1/ConfigMap"}, rows
    close_page(page)
