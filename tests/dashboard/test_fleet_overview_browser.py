"""The overview at fleet size: 20 clusters × 200 controllers (bench/fleet.py) in real headless Chromium.

The fleet publishes through the real runtime (40 workers, each with its RedisPublisher, telemetry and
metrics observers and sampler) into the test's Redis, and keeps a steady rate of updates from a
thread while the page is used; the troubled controllers' findings are opened by the real detectors.
"""

from __future__ import annotations

import threading
from urllib.parse import parse_qs, urlparse

import pytest

from bench.fleet import Fleet, Trouble
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser

CONTROLLERS, CLUSTERS = 200, 20
SECTIONS = "els => els.map(e => [e.dataset.cluster, Number(e.dataset.problems), e.dataset.collapsed, Number(e.dataset.controllers)])"


@pytest.fixture
def fleet(publisher_factory, redis_url, prefix):
    f = Fleet(redis_url, prefix, clusters=CLUSTERS, controllers=CONTROLLERS, workers=40, publisher=publisher_factory)
    f.publish_initial()
    stop = threading.Event()
    runner = threading.Thread(target=f.run, args=(float("inf"), 20.0), kwargs={"stop": stop.is_set}, daemon=True)
    runner.start()
    yield f
    stop.set()
    runner.join(10)


def open_overview(browser, dashboard, query: str = ""):
    """The overview as a browser that never chose which groups to collapse (the test browser's
    localStorage is shared by the session's tests: the choices of an earlier one are forgotten)."""
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + "/" + query)
    page.evaluate("localStorage.removeItem('ctrlscope.overview.collapsed')")
    page.reload()
    page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
    # The whole fleet counted, every box drawn, and the stuck controllers' findings open (2 s).
    page.wait_for_function(f"""() => {{ const o = window.ctrlscope.overview;
        return o.idle && o.stats.controllers === {CONTROLLERS} && o.stats.clusters === {CLUSTERS} && o.stats.problems >= 17; }}""",
                           timeout=60_000)
    return page


def query(page) -> dict[str, list[str]]:
    return parse_qs(urlparse(page.url).query)


def test_the_overview_holds_20_clusters_and_200_controllers_problems_first(browser, dashboard, fleet, artifacts):
    page = open_overview(browser, dashboard)
    sections = page.eval_on_selector_all("#overview .cluster", SECTIONS)
    assert len(sections) == CLUSTERS and sum(s[3] for s in sections) == CONTROLLERS, sections
    # Problems first: the five clusters in trouble on top, open and flagged; the healthy ones after
    # them, collapsed (the fleet is large, and nobody chose otherwise).
    troubled = {fw.cluster for fw, c in fleet.controllers if c.trouble}
    assert {s[0] for s in sections[:5]} == troubled and all(s[1] > 0 and s[2] == "false" for s in sections[:5]), sections
    assert all(s[1] == 0 and s[2] == "true" for s in sections[5:]), sections
    assert page.eval_on_selector_all("#overview .cluster.collapsed .worker", "els => els.length") == 0
    head = page.inner_text(f'#overview .cluster[data-cluster="{sections[0][0]}"] .cluster-head')
    assert "10 controllers · 2 workers" in head and "failing" in head, head
    # Within a worker, its controllers in trouble come first, worst first; each row its state.
    order = {"looping": 0, "failing": 1, "stuck": 2}
    for rows in page.eval_on_selector_all("#overview .worker .ctl-cards",
                                          "els => els.map(e => [...e.children].map(r => r.dataset.health))"):
        ranks = [order.get(h, 3) for h in rows]
        assert ranks == sorted(ranks), rows
    health = page.eval_on_selector_all("#overview .ctl-row.problem", "els => els.map(e => e.dataset.health)")
    assert sorted(set(health)) == ["failing", "looping", "stuck"], health
    assert page.inner_text("#f-count").startswith("200 controllers in 20 clusters")
    save_screenshot(page, artifacts, "fleet-overview.png")
    save_screenshot(page, artifacts, "fleet-overview-full.png", full_page=True)
    page.emulate_media(color_scheme="dark")
    save_screenshot(page, artifacts, "fleet-overview-dark.png")
    page.emulate_media(color_scheme="light")

    # Search: every word must match; groups with matches open, the others are not listed; in the URL.
    page.fill("#f-q", "certificate")
    page.wait_for_function("() => document.getElementById('f-count').textContent.startsWith('20 of 200 controllers match') "
                           "&& window.ctrlscope.overview.idle")
    names = page.eval_on_selector_all("#overview .ctl-row", "els => els.map(e => e.dataset.controller)")
    assert names == ["certificate"] * 20, names
    assert query(page) == {"q": ["certificate"]}
    # A namespace finds the controllers with trouble there (their findings' keys).
    page.fill("#f-q", "team-1")
    page.wait_for_function("() => document.getElementById('f-count').textContent.includes('of 200 controllers match') "
                           "&& window.ctrlscope.overview.idle && new URL(location.href).searchParams.get('q') === 'team-1'")
    rows = page.eval_on_selector_all("#overview .ctl-row", "els => els.map(e => e.dataset.health)")
    assert rows and all(h in order for h in rows), rows

    # Filters: one state, one cluster, one worker; all in the URL.
    page.fill("#f-q", "")
    page.select_option("#f-state", "failing")
    page.wait_for_function("() => new URL(location.href).searchParams.get('state') === 'failing'")
    page.wait_for_function("() => window.ctrlscope.overview.idle")
    health = page.eval_on_selector_all("#overview .ctl-row", "els => els.map(e => e.dataset.health)")
    assert len(health) == 10 and set(health) == {"failing"}, health
    cluster = sections[0][0]
    page.select_option("#f-cluster", cluster)
    page.select_option("#f-state", "")
    page.wait_for_function("() => window.ctrlscope.overview.idle && !new URL(location.href).searchParams.has('state')")
    assert page.eval_on_selector_all("#overview .cluster", "els => els.map(e => e.dataset.cluster)") == [cluster]
    worker = f"{cluster}-w1"
    assert page.eval_on_selector_all("#f-worker option", "els => els.map(e => e.value)") == ["", f"{cluster}-w0", worker]
    page.select_option("#f-worker", worker)
    page.wait_for_function("() => window.ctrlscope.overview.idle && new URL(location.href).searchParams.has('worker')")
    assert page.eval_on_selector_all("#overview .worker", "els => els.map(e => e.dataset.worker)") == [worker]
    assert query(page) == {"cluster": [cluster], "worker": [worker]}

    # The URL is the view: opened elsewhere, it shows the same, with the controls set.
    shared = page.url
    other = open_overview(browser, dashboard, query="?" + urlparse(shared).query + "&state=problem")
    assert other.eval_on_selector("#f-cluster", "s => s.value") == cluster
    assert other.eval_on_selector("#f-state", "s => s.value") == "problem"
    rows = other.eval_on_selector_all("#overview .ctl-row", "els => els.map(e => e.dataset.health)")
    assert rows and all(h in order for h in rows) and other.eval_on_selector_all(
        "#overview .worker", "els => els.map(e => e.dataset.worker)") == [worker]
    assert other.js_errors == []
    close_page(other)

    # Collapse a group by keyboard; remembered in this browser: a reload keeps it collapsed.
    page.click("#f-clear")
    page.wait_for_function("() => window.ctrlscope.overview.idle && location.search === ''")
    toggle = f'#overview .cluster[data-cluster="{cluster}"] .cluster-toggle'
    assert page.get_attribute(toggle, "aria-expanded") == "true"
    page.focus(toggle)
    page.keyboard.press("Enter")
    page.wait_for_selector(f'{toggle}[aria-expanded="false"]')
    assert page.eval_on_selector_all(f'#overview .cluster[data-cluster="{cluster}"] .worker', "els => els.length") == 0
    page.reload()
    page.wait_for_function("() => window.ctrlscope.overview.idle && window.ctrlscope.overview.stats.controllers === 200 "
                           "&& window.ctrlscope.overview.stats.clusters === 20")
    assert page.get_attribute(toggle, "aria-expanded") == "false"
    page.focus(toggle)
    page.keyboard.press("Space")
    page.wait_for_selector(f'#overview .cluster[data-cluster="{cluster}"] .worker')
    # Expand all / collapse all.
    page.click("#f-expand")
    try:
        page.wait_for_function(f"() => window.ctrlscope.overview.idle && document.querySelectorAll('#overview .ctl-row').length === {CONTROLLERS}")
    except Exception:
        print(page.evaluate("""() => [document.querySelectorAll('#overview .ctl-row').length, JSON.stringify(window.ctrlscope.overview.stats),
          window.ctrlscope.overview.idle, [...document.querySelectorAll('#overview .cluster')].map(e => e.dataset.collapsed + e.dataset.cluster).join(','),
          localStorage.getItem('ctrlscope.overview.collapsed'), location.href]"""))
        raise
    page.click("#f-collapse")
    page.wait_for_function("() => document.querySelectorAll('#overview .worker').length === 0")
    assert page.js_errors == []
    close_page(page)


def test_an_update_to_one_controller_changes_its_row_in_place(browser, dashboard, fleet, artifacts):
    page = open_overview(browser, dashboard)
    healthy = next(fw.cluster for fw, c in fleet.controllers if not c.trouble and fw.cluster.startswith("prod-eu1"))
    fw, ctl = next((fw, c) for fw, c in fleet.controllers if fw.cluster == healthy and c.trouble == Trouble.HEALTHY)
    page.click(f'#overview .cluster[data-cluster="{healthy}"] .cluster-toggle')
    row = f'#overview .worker[data-worker="{fw.name}"] .ctl-row[data-controller="{ctl.name}"]'
    page.wait_for_selector(f'{row}[data-health="ok"]')
    handle = page.query_selector(row)
    # Its numbers move with the fleet's updates, in place.
    page.wait_for_function("(r) => /reconciles [0-9.]+\\/s/.test(r.querySelector('[data-cell=reconciles]').textContent)", arg=handle,
                           timeout=15_000)
    fleet.fail(fw.name, ctl.name)
    page.wait_for_selector(f'{row}[data-health="failing"]', timeout=15_000)
    assert handle.evaluate("r => r.isConnected"), "the row was rebuilt instead of updated"
    assert "failing" in handle.inner_text()
    # Its cluster is now in trouble: flagged, and sorted among the troubled ones, above the healthy.
    page.wait_for_function(f"""() => {{ const s = [...document.querySelectorAll('#overview .cluster')];
        const i = s.findIndex(e => e.dataset.cluster === {healthy!r});
        return Number(s[i].dataset.problems) === 1 && s.slice(0, i).every(e => Number(e.dataset.problems) > 0); }}""", timeout=10_000)
    # Its row is first in its worker's box (problems first).
    first = page.eval_on_selector(f'#overview .worker[data-worker="{fw.name}"] .ctl-cards', "e => e.firstElementChild.dataset.controller")
    assert first == ctl.name
    save_screenshot(page, artifacts, "fleet-overview-one-failing.png")
    assert page.js_errors == []
    close_page(page)
