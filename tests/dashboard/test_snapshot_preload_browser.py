"""The informer caches a page loads are its first requests (informer_snapshots.js), in real headless
Chromium against daphne and Redis: the head preloads each snapshot.json before the page's scripts,
the page takes the preloaded answer over (one request, not two) and draws the cache from it; an
informer that appears later is loaded then, through the same code."""

from __future__ import annotations

import pytest

from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_cache_panel_browser import fill_cache
from tests.dashboard.test_panels_browser import close_page, open_controller_page, seed_worker

pytestmark = pytest.mark.browser

RESOURCES_JS = """() => performance.getEntriesByType("resource").map((e) => ({
  name: new URL(e.name).pathname + new URL(e.name).search, start: e.startTime, request: e.requestStart }))"""


def wait_for_cache(page, n: int) -> None:
    page.wait_for_function(f"() => window.ctrlscopeCache && window.ctrlscopeCache.cache.firstPaint && "
                           f"document.getElementById('cache-count').textContent === '{n:,}'", timeout=20_000)


@pytest.mark.parametrize("path", ["/c/w1/podset/", "/c/w1/informer/pods/"])
def test_the_cache_is_the_pages_first_request_and_is_fetched_once(browser, dashboard, publisher_factory, path):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    fill_cache(obs, 2000)
    pub.flush()
    page = open_controller_page(browser, dashboard, path)
    wait_for_cache(page, 2000)
    resources = page.evaluate(RESOURCES_JS)
    snapshots = [r for r in resources if r["name"].endswith("/snapshot.json?history=500&form=columns")]
    # One request: the page's fetch took the preloaded answer over instead of asking again.
    assert [r["name"] for r in snapshots] == ["/c/w1/informer/pods/snapshot.json?history=500&form=columns"], resources
    scripts = [r for r in resources if r["name"].endswith(".js")]
    assert scripts and all(snapshots[0]["start"] <= r["start"] for r in scripts), \
        f"snapshot.json was not asked for before the page's scripts: {resources}"
    row = page.inner_text('#cache-spacer .cache-row[data-key="default/pod-000000"]').split("\n")
    assert [c.strip() for c in row][:4] == ["default/pod-000000", "default", "pod-000000", "1000"]
    close_page(page)


def test_an_informer_that_appears_later_is_loaded_when_it_does(browser, dashboard, publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    obs.on_reconcile_start("podset", key="default/a", worker=0)
    obs.on_reconcile_end("podset", key="default/a", worker=0, duration=0.001, result="success")
    pub.flush()
    page = open_controller_page(browser, dashboard)  # no informer yet: nothing preloaded
    assert page.evaluate("document.querySelectorAll('link[rel=preload]').length") == 0
    seed_worker(obs)
    fill_cache(obs, 300)
    pub.flush()
    wait_for_cache(page, 300)
    assert [r["name"] for r in page.evaluate(RESOURCES_JS) if "/snapshot.json" in r["name"]] == \
        ["/c/w1/informer/pods/snapshot.json?history=500&form=columns"]
    close_page(page)
