"""The controller page's panels in real headless Chromium against daphne + Redis.

Data is driven deterministically: the test calls a real TelemetryObserver's hooks (what the runtime
calls) and flushes the publisher, then asserts what the page shows.
"""

from __future__ import annotations

import re
import time
import urllib.request

import pytest

from controllers.clock import FakeClock
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.conftest import delete_prefix

pytestmark = pytest.mark.browser

ERROR_TEXT = "Conflict: Operation cannot be fulfilled on podsets \"web\": the object has been modified"
RGB = {"success": "rgb(31, 138, 76)", "error": "rgb(196, 61, 61)"}  # --r-success / --r-error (light)


def seconds(text: str) -> float:
    """'2.6 s' / '850 ms' / '1m 3s' → seconds."""
    text = text.strip()
    if m := re.fullmatch(r"([\d.]+) ms", text):
        return float(m.group(1)) / 1000
    if m := re.fullmatch(r"([\d.]+) s", text):
        return float(m.group(1))
    if m := re.fullmatch(r"(\d+)m (\d+)s", text):
        return int(m.group(1)) * 60 + int(m.group(2))
    raise AssertionError(f"not a duration: {text!r}")


def seed_worker(obs: TelemetryObserver) -> None:
    obs.on_informer("pods", fifo="DeltaFIFO", resync_period=30.0)
    obs.on_reflector_state("pods", state="listing")
    obs.on_list("pods", resource_version="100", items=3, duration=0.012)
    obs.on_watch_start("pods", resource_version="100")
    obs.on_reflector_state("pods", state="watching")
    obs.on_reflector_state("pods", state="synced")


def enqueue(obs: TelemetryObserver, key: str, *, rv: str, event: str = "update", depth: int = 1) -> None:
    """What the runtime reports for one watch event that reaches the controller's queue."""
    obs.on_watch_event("pods", event_type={"update": "MODIFIED", "create": "ADDED"}[event], key=key, resource_version=rv)
    obs.on_handler("pods", handler="controller/podset", event=event, key=key, outcome="ok", duration=0.0004,
                   new={"metadata": {"resourceVersion": rv}})
    obs.on_event("podset", event=event, key=key, requests=[key])
    obs.on_queue("podset", op="add", key=key, depth=depth)


def open_controller_page(browser, dashboard, path: str = "/c/w1/podset/"):
    page = browser.new_page()
    page.js_errors = []  # asserted empty by the tests that close the page through close_page
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + path)
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    page.wait_for_function("() => window.ctrlscope.client.topics.get('w/w1/components')?.cursor", timeout=10_000)
    return page


def close_page(page) -> None:
    assert page.js_errors == [], page.js_errors
    page.close()


def countdown(page, key: str) -> float:
    return seconds(page.inner_text(f'#q-waiting tr[data-key="{key}"] td.countdown'))


def test_controller_page_shows_queue_timeline_details_and_informer_events(browser, dashboard, publisher_factory,
                                                                           artifacts, redis_url, prefix):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    pub.flush()
    page = open_controller_page(browser, dashboard)
    page.wait_for_selector("#components .comp.informer >> text=pods", timeout=10_000)
    # The page subscribed to the informer topic it found in the components.
    page.wait_for_function("() => window.ctrlscope.client.topics.get('w/w1/informer/pods')?.cursor", timeout=10_000)

    # A watch event reaches the controller; a second one is absorbed by the queue (dedup).
    enqueue(obs, "default/web", rv="101")
    obs.on_queue("podset", op="dedup", key="default/web", depth=1)
    obs.on_queue("podset", op="get", key="default/web", depth=0, duration=0.002)
    obs.on_reconcile_start("podset", key="default/web", worker=0)
    # Two more keys: one only queued, one being processed.
    enqueue(obs, "default/db", rv="102")
    enqueue(obs, "default/api", rv="103", event="create", depth=2)
    obs.on_queue("podset", op="get", key="default/api", depth=1, duration=0.001)
    obs.on_reconcile_start("podset", key="default/api", worker=1)
    pub.flush()
    time.sleep(0.2)
    obs.on_reconcile_end("podset", key="default/web", worker=0, duration=0.2, result="error", error=ERROR_TEXT)
    backoff_ends = time.monotonic() + 4.0
    obs.on_queue("podset", op="add_rate_limited", key="default/web", depth=1, delay=4.0, requeues=1)
    obs.on_queue("podset", op="done", key="default/web", depth=1, duration=0.2)
    pub.flush()

    # Workqueue: a waiting key with its requeue count and a countdown that goes down.
    # Read through a locator: the panel redraws its rows (replaceChildren) on every frame and countdown
    # tick, and a row handle taken before a redraw is detached, its innerText without the cells' tabs.
    row = '#q-waiting tr[data-key="default/web"]'
    page.wait_for_selector(row, timeout=5_000)
    assert page.locator(f"{row} td.requeues").inner_text().strip() == "1"
    first = countdown(page, "default/web")
    assert 1.0 < first <= 4.0
    page.wait_for_timeout(400)
    second = countdown(page, "default/web")
    assert second < first - 0.2, (first, second)
    page.wait_for_selector('#q-queued tr[data-key="default/db"]')
    page.wait_for_selector('#q-processing tr[data-key="default/api"] td.age')
    page.wait_for_function("() => document.getElementById('dedup-adds').textContent === '4'")
    assert page.inner_text("#dedup-reconciles") == "2"
    assert "1 adds absorbed" in page.inner_text("#dedup-note")

    # The backoff passes, the delaying queue adds the key back, and the retry succeeds. (An add
    # before then would leave the delayed add pending: the key would still be waiting.)
    time.sleep(max(0.0, backoff_ends - time.monotonic()) + 0.05)
    obs.on_queue("podset", op="add", key="default/web", depth=2)
    obs.on_queue("podset", op="get", key="default/web", depth=1, duration=0.001)
    obs.on_reconcile_start("podset", key="default/web", worker=0)
    time.sleep(0.1)
    obs.on_reconcile_end("podset", key="default/web", worker=0, duration=0.1, result="success")
    obs.on_queue("podset", op="forget", key="default/web", depth=1)
    obs.on_queue("podset", op="done", key="default/web", depth=1, duration=0.1)
    obs.on_reconcile_end("podset", key="default/api", worker=1, duration=1.3, result="requeue_after", requeue_after=30.0)
    obs.on_queue("podset", op="forget", key="default/api", depth=1)
    obs.on_queue("podset", op="add_after", key="default/api", depth=1, delay=30.0)
    obs.on_queue("podset", op="done", key="default/api", depth=1, duration=1.3)
    pub.flush()

    # Timeline: the web lane shows an error attempt, then a success attempt, in the result colours.
    lane = '#lanes .lane[data-key="default/web"]'
    page.wait_for_selector(f"{lane} .attempt.result-success", timeout=5_000)
    bars = page.eval_on_selector_all(f"{lane} .attempt", """els => els.map(e => ({cls: e.className,
        bg: getComputedStyle(e).backgroundColor, left: e.getBoundingClientRect().left,
        width: e.getBoundingClientRect().width}))""")
    assert [b["cls"].split()[1] for b in bars] == ["result-error", "result-success"]
    assert [b["bg"] for b in bars] == [RGB["error"], RGB["success"]]
    assert bars[0]["left"] < bars[1]["left"] and all(b["width"] >= 3 for b in bars)
    assert page.inner_text(f"{lane} .lane-meta") == "2× · 1 failed → success"  # not only the last result
    page.wait_for_selector('#lanes .lane[data-key="default/api"] .attempt.result-requeue_after')
    assert page.eval_on_selector_all("#lanes .lane", "els => els.map(e => e.dataset.key)")[0] in ("default/web", "default/api")
    assert not page.query_selector('#q-waiting tr[data-key="default/web"]:not(.waited)'), "forgotten and done: not waiting"
    # ...but for a few seconds after its wait it says what it waited (a 5 ms wait is never drawn live).
    assert page.inner_text('#q-waiting tr.waited[data-key="default/web"] td.waited-for') == "waited 4.0 s, retry 1"
    page.wait_for_selector('#q-waiting tr[data-key="default/api"]')

    # Click the failed attempt: its error text and the event that enqueued it.
    page.click(f"{lane} .attempt.result-error")
    details = page.wait_for_selector("#details:not([hidden])")
    text = details.inner_text()
    assert ERROR_TEXT in text and "attempt 1 of default/web" in text
    # Why it ran (protocol 1.7 provenance): the one update event that queued it, expandable.
    assert page.inner_text("#details details.triggers summary") == "1 trigger: 1 update event"
    page.click("#details details.triggers summary")
    assert re.search(r"update event\s+default/web", page.inner_text("#details li.trigger"))
    page.click(f"{lane} .attempt.result-success")
    assert "no error" in page.inner_text("#details") and "since previous attempt" in page.inner_text("#details")
    page.click(f"{lane} .attempt.result-error")
    # 'f' focuses the selected attempt's key: highlighted lane, filtered events, shareable URL.
    page.keyboard.press("f")
    page.wait_for_selector('#lanes .lane.focus[data-key="default/web"]')
    assert page.url.endswith("/c/w1/podset/?key=default%2Fweb") and page.input_value("#filter") == "default/web"
    page.keyboard.press("f")
    page.wait_for_function("() => !document.querySelector('#lanes .lane.focus') && !location.search")
    assert page.input_value("#filter") == ""

    # Informer events: watch events and handler calls with type, key, rv and outcome.
    page.wait_for_selector("#ievents tr.ev-watch >> text=default/web")
    watch = page.eval_on_selector_all("#ievents tr.ev-watch", "els => els.map(e => e.innerText)")
    assert any("MODIFIED" in w and "default/web" in w and "101" in w for w in watch)
    assert any("ADDED" in w and "default/api" in w for w in watch)
    handler = page.inner_text("#ievents tr.ev-handler:has-text('default/web')")
    assert "controller/podset" in handler and "ok" in handler and "101" in handler

    # A periodic informer resync: one marker row for the burst of Sync deltas.
    for key in ("default/web", "default/db", "default/api"):
        obs.on_fifo("pods", op="queued", key=key, delta="Sync", depth=1)
    pub.flush()
    marker = page.wait_for_selector("#ievents tr.resync-marker.marker-resync")
    assert "3 cached objects re-delivered" in marker.inner_text()
    page.click("#window button[data-window='10']")  # zoom in for the picture (a slow run may crop it)
    page.screenshot(path=str(artifacts / "controller-page.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.wait_for_timeout(300)  # sparklines pick up the theme's colours on their next redraw
    assert page.evaluate("getComputedStyle(document.body).backgroundColor") == "rgb(17, 21, 26)"
    page.screenshot(path=str(artifacts / "controller-page-dark.png"), full_page=True)
    page.emulate_media(color_scheme="light")
    page.click("#window button[data-window='60']")

    # Filter: '/' focuses the box; only matching rows remain (markers always stay).
    page.keyboard.press("Escape")
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "filter"
    page.keyboard.type("default/db")
    page.wait_for_function("""() => [...document.querySelectorAll('#ievents tr:not(.resync-marker)')]
        .every(tr => tr.innerText.includes('default/db'))""")
    assert page.eval_on_selector_all("#ievents tr:not(.resync-marker)", "els => els.length") >= 2
    page.fill("#filter", "type:added ns:default")
    page.wait_for_function("""() => [...document.querySelectorAll('#ievents tr:not(.resync-marker)')]
        .every(tr => tr.innerText.includes('ADDED') || tr.innerText.includes('create'))""")
    assert "default/api" in page.inner_text("#ievents tr.ev-watch")
    page.fill("#filter", "")
    page.keyboard.press("Escape")  # leave the filter box so 'p' is a shortcut again

    # Pause: new events are held (and counted), resume shows them.
    page.keyboard.press("p")
    assert page.get_attribute("#pause", "aria-pressed") == "true"
    obs.on_watch_event("pods", event_type="MODIFIED", key="default/paused", resource_version="200")
    pub.flush()
    page.wait_for_function("() => window.ctrlscope.events.heldSince >= 1")
    page.wait_for_timeout(150)
    assert not page.query_selector("#ievents tr:has-text('default/paused')")
    assert "1 new events held" in page.inner_text("#paused-note")
    page.keyboard.press("p")
    page.wait_for_selector("#ievents tr.ev-watch:has-text('default/paused')")

    # The stream itself resyncs (Redis lost its data, the worker rewrites it): a marker row.
    delete_prefix(redis_url, prefix)
    obs.on_watch_event("pods", event_type="MODIFIED", key="default/web", resource_version="300")
    obs.on_queue("podset", op="add", key="default/web", depth=2)
    pub.flush()
    marker = page.wait_for_selector("#ievents tr.resync-marker.marker-stream", timeout=10_000)
    assert "stream resynced" in marker.inner_text()
    assert "stream resynced" in page.wait_for_selector("#tl-resync:not([hidden])", timeout=10_000).inner_text()
    page.wait_for_selector('#q-queued tr[data-key="default/web"]', timeout=10_000)
    # The hub replays a worker-reset frame's records, but when it reports the gap as "retention"
    # they are skipped (the marker says so): assert on the events that follow the resync.
    obs.on_watch_event("pods", event_type="DELETED", key="default/db", resource_version="301")
    pub.flush()
    page.wait_for_selector("#ievents tr.ev-watch:has-text('301')", timeout=10_000)
    page.screenshot(path=str(artifacts / "controller-page-resync.png"), full_page=True)
    close_page(page)


def test_key_deep_link_focuses_the_key(browser, dashboard, publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    for key in ("default/a", "default/b"):
        enqueue(obs, key, rv="5")
        obs.on_reconcile_end("podset", key=key, worker=0, duration=0.01, result="terminal", error="bad spec")
    pub.flush()
    page = open_controller_page(browser, dashboard, "/c/w1/podset/?key=default/b")
    page.wait_for_selector('#lanes .lane.focus[data-key="default/b"] .attempt.result-terminal', timeout=10_000)
    assert not page.query_selector('#lanes .lane.focus[data-key="default/a"]')
    assert page.input_value("#filter") == "default/b"
    page.wait_for_selector("#ievents tr.ev-watch:has-text('default/b')")
    assert not page.query_selector("#ievents tr.ev-watch:has-text('default/a')")
    close_page(page)


def test_controller_page_needs_the_same_access_as_the_index(dashboard_factory):
    server = dashboard_factory(CTRLSCOPE_ALLOW_ANONYMOUS="0")
    with urllib.request.urlopen(server.url + "/c/w1/podset/", timeout=5) as resp:
        assert "/accounts/login/" in resp.url and "next=/c/w1/podset/" in resp.url
    open_server = dashboard_factory()
    with urllib.request.urlopen(open_server.url + "/c/w1/podset/", timeout=5) as resp:
        assert resp.status == 200 and b'id="cs-page"' in resp.read()
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(open_server.url + "/c/w1/bad%20name/", timeout=5)
    assert err.value.code == 404


def open_for_a_burst(browser, dashboard, publisher_factory):
    """A seeded worker whose frames hold up to 10,000 records (a burst lands in one message), and its
    controller page, live on the informer topic."""
    pub = publisher_factory(max_frame_items=10_000)
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    pub.flush()
    page = open_controller_page(browser, dashboard)
    page.wait_for_function("() => window.ctrlscope.client.topics.get('w/w1/informer/pods')?.cursor", timeout=10_000)
    return pub, obs, page


def test_a_burst_keeps_the_dom_bounded_and_says_what_it_summarised(browser, dashboard, publisher_factory, artifacts):
    pub, obs, page = open_for_a_burst(browser, dashboard, publisher_factory)
    for i in range(5000):
        obs.on_watch_event("pods", event_type="MODIFIED", key=f"default/p{i % 500}", resource_version=str(1000 + i))
    for i in range(150):  # 150 keys backing off, 80 of them with a failed reconcile
        key = f"default/k{i:03d}"
        obs.on_queue("podset", op="add_rate_limited", key=key, depth=0, delay=60.0, requeues=i % 7 + 1)
        if i < 80:
            obs.on_reconcile_end("podset", key=key, worker=0, duration=0.01, result="error", error="boom")
    pub.flush()
    page.wait_for_function("() => window.ctrlscope.client.stats.records >= 5000 + 150 + 80", timeout=15_000)
    page.wait_for_function("() => document.querySelector('#q-waiting .count').textContent === '150'")
    page.wait_for_timeout(200)
    assert page.eval_on_selector_all("#ievents tr", "els => els.length") <= 300
    assert "counted, not drawn" in page.inner_text("#paused-note")
    assert page.eval_on_selector_all("#q-waiting tbody tr[data-key]", "els => els.length") == 100
    assert page.inner_text("#q-waiting tr.more") == "+50 more"
    assert page.eval_on_selector_all("#lanes .lane", "els => els.length") == 50
    # The newest rows are the ones drawn.
    assert "default/p499" in page.inner_text("#ievents tr:first-child") and "5999" in page.inner_text("#ievents tr:first-child")
    page.screenshot(path=str(artifacts / "controller-page-burst.png"), full_page=False)
    close_page(page)


def test_the_timeline_keeps_at_most_its_attempt_budget_over_every_key(browser, dashboard, publisher_factory):
    """200 attempts per key, but 20,000 over every key (timeline_panel.js MAX_TOTAL_ATTEMPTS): a
    controller with thousands of keys must not keep 2,000 × 200. 500 keys × 60 attempts, one key after
    the other: the keys active longest ago give up their oldest attempts first, each keeps its last,
    and the most recent keys keep all of theirs."""
    pub, obs, page = open_for_a_burst(browser, dashboard, publisher_factory)
    keys, per_key = 500, 60
    for i in range(keys):
        for _ in range(per_key):
            obs.on_reconcile_end("podset", key=f"default/k{i:03d}", worker=0, duration=0.001, result="success")
        if i % 100 == 99:
            pub.flush()
    pub.flush()
    page.wait_for_function(f"() => window.ctrlscope.client.stats.records >= {keys * per_key}", timeout=30_000)
    kept = page.evaluate("""() => { const out = {}; for (const [k, l] of window.ctrlscope.lanes) out[k] = l.attempts.length;
                                     return out; }""")
    total = sum(kept.values())
    assert len(kept) == keys and total <= 20_000 + 1_000, total  # counted every 1,000 attempts added
    assert total < keys * per_key
    assert all(n >= 1 for n in kept.values()), "every key keeps its last attempt"
    assert all(kept[f"default/k{i:03d}"] == per_key for i in range(keys - 100, keys)), "the newest keys keep all"
    assert kept["default/k000"] < per_key, "the oldest keys gave theirs up first"
    close_page(page)


def test_the_timeline_keeps_the_details_of_its_newest_attempts_and_lets_go_of_bars_out_of_its_window(
        browser, dashboard, publisher_factory):
    """An attempt's triggers (up to 20, with their changed fields) are kept for the newest 2,000
    attempts over every key (timeline_panel.js MAX_DETAILED_ATTEMPTS); an older one keeps the line
    that sums them up, and its details say where the rest is. A bar that leaves the window is let go
    of (2026-12-07's real soak: a tab's JS heap grew ~2 MiB a minute for an hour, its DOM 27,000 →
    92,000 nodes, with every attempt's triggers and every bar once drawn kept)."""
    pub, obs, page = open_for_a_burst(browser, dashboard, publisher_factory)
    keys, rounds = 100, 30  # 3,000 attempts: 1,000 past the budget
    obs.clock = clock = FakeClock(start=0.0, wall_offset=time.time() - 600)
    for n in range(rounds):
        if n == rounds - 1:
            clock.step(570.0)  # the last round 30 s ago: in the 1-minute window, out of the 10-second one
        for i in range(keys):
            key = f"default/k{i:03d}"
            obs.on_event("podset", event="update", key=key, requests=[key])
            obs.on_reconcile_start("podset", key=key, worker=0)
            clock.step(0.001)
            obs.on_reconcile_end("podset", key=key, worker=0, duration=0.001, result="success")
        pub.flush()
    page.wait_for_function(f"() => window.ctrlscope.client.stats.records >= {keys * rounds * 3}", timeout=30_000)
    attempts = """() => [...window.ctrlscope.lanes.values()].flatMap((l) => l.attempts)"""
    kept = page.evaluate(f"""() => ({attempts})().sort((a, b) => a.id - b.id).map((a) => ({{
        id: a.id, triggers: a.prov && a.prov.triggers ? a.prov.triggers.length : null, summary: a.prov && a.prov.summary }}))""")
    assert len(kept) == keys * rounds
    detailed = [a for a in kept if a["triggers"] is not None]
    assert 2_000 <= len(detailed) <= 2_500, len(detailed)  # trimmed to 2,000 each time it passes 2,500
    assert detailed == kept[-len(detailed):], "the newest attempts keep their triggers"
    assert all(a["triggers"] == 1 for a in detailed)
    oldest, newest = kept[0], kept[-1]
    assert oldest["summary"].startswith("1 trigger: 1 update event"), oldest

    page.evaluate(f"() => window.ctrlscope.showDetails({oldest['id']})")
    why = page.inner_text("#details .enqueued-by")
    assert why.startswith("1 trigger: 1 update event") and "newest 2,000 attempts" in why, why
    assert "/k/default/k000" in page.get_attribute("#details .enqueued-by a", "href")
    page.evaluate(f"() => window.ctrlscope.showDetails({newest['id']})")
    assert page.query_selector("#details details.triggers li.trigger"), "a recent attempt lists its triggers"
    page.click("#details-close")

    # The last round's bars are drawn in the 1-minute window; in the 10-second one they are let go of.
    held = f"() => ({attempts})().filter((a) => a.el).length"
    page.wait_for_function(f"() => ({held})() >= 50", timeout=10_000)  # 50 lanes drawn
    page.click("button[data-window='10']")
    page.wait_for_function(f"() => ({held})() === 0", timeout=10_000)
    close_page(page)


def test_rows_a_busy_frame_skips_are_marked_and_pausing_draws_them(browser, dashboard, publisher_factory):
    pub, obs, page = open_for_a_burst(browser, dashboard, publisher_factory)
    # A calm start: 150 rows, 30 a flush, each flush drawn before the next (no frame skips any), and
    # a second apart in the worker's time: 100 rows within a second make the table busy (BUSY_RATE),
    # which trims it to 60 rows, and the page can draw five flushes within one.
    obs.clock = FakeClock(start=0.0, wall_offset=time.time() - 30)
    for batch in range(5):
        obs.clock.step(1.0)
        for i in range(30):
            obs.on_watch_event("pods", event_type="MODIFIED", key=f"default/calm{batch}-{i}", resource_version=str(100 + i))
        pub.flush()
        page.wait_for_function(f"() => document.querySelectorAll('#ievents tr.ev-watch').length >= {30 * (batch + 1)}",
                               timeout=10_000)
    assert not page.query_selector("#ievents tr.ev-skipped")
    # One frame's worth of rows can only be told apart from the next by timing; 400 in one flush land in
    # one message, so the frame that draws them has 400 new rows: it draws the newest 50.
    for i in range(400):
        obs.on_watch_event("pods", event_type="MODIFIED", key=f"default/q{i:03d}", resource_version=str(5000 + i))
    pub.flush()
    page.wait_for_selector("#ievents tr.ev-skipped", timeout=10_000)
    drawn = page.eval_on_selector_all("#ievents tr.ev-watch td.key", "tds => tds.map(td => td.textContent)")
    assert drawn[:50] == [f"default/q{i:03d}" for i in range(399, 349, -1)]
    assert "default/q349" not in drawn
    skipped = page.inner_text("#ievents tr.ev-skipped")
    assert "350 more not drawn" in skipped, skipped
    assert "counted, not drawn" in page.inner_text("#paused-note")
    # A busy frame also trims the table to the rows a reader can follow (BUSY_EVENT_ROWS = 60, of the
    # 150-odd drawn before it), so the next frames re-paint 60 shifted rows, not 300.
    assert page.eval_on_selector_all("#ievents tr", "trs => trs.length") == 60
    # Pause: every kept row, in order, and no marker (nothing is missing any more).
    page.keyboard.press("p")
    page.wait_for_function("() => !document.querySelector('#ievents tr.ev-skipped')")
    drawn = page.eval_on_selector_all("#ievents tr.ev-watch td.key", "tds => tds.map(td => td.textContent)")
    assert drawn[:300] == [f"default/q{i:03d}" for i in range(399, 99, -1)]
    # A filter typed while paused applies at once, to what was there before the pause.
    obs.on_watch_event("pods", event_type="MODIFIED", key="default/q377", resource_version="9999")
    pub.flush()
    page.wait_for_function("() => window.ctrlscope.events.heldSince >= 1")
    page.fill("#filter", "q377")
    page.wait_for_function("() => document.querySelectorAll('#ievents tr.ev-watch').length === 1")
    assert "5377" in page.inner_text("#ievents tr.ev-watch")
    page.fill("#filter", "")
    page.focus("#pause")
    page.keyboard.press("p")
    page.wait_for_selector("#ievents tr.ev-watch:first-child:has-text('9999')")
    close_page(page)


def test_a_fast_steady_stream_keeps_the_table_short_and_pausing_draws_every_kept_row(browser, dashboard,
                                                                                  publisher_factory):
    pub, obs, page = open_for_a_burst(browser, dashboard, publisher_factory)
    # ~400 rows a second in flushes of 40: no frame has more than it draws (50), but the table is busy
    # (BUSY_RATE, 100 rows/s): it keeps 60 rows, not 300, so a frame repaints 60 shifted rows.
    n = 0
    for _ in range(25):
        for _ in range(40):
            obs.on_watch_event("pods", event_type="MODIFIED", key=f"default/s{n:04d}", resource_version=str(2000 + n))
            n += 1
        pub.flush()
        time.sleep(0.1)
    page.wait_for_function(f"() => document.querySelector('#ievents tr.ev-watch td.key')?.textContent === 'default/s{n - 1:04d}'",
                           timeout=10_000)
    assert not page.query_selector("#ievents tr.ev-skipped"), "no frame had to skip rows"
    assert page.evaluate("window.ctrlscope.events.busy") is True
    assert page.eval_on_selector_all("#ievents tr", "trs => trs.length") <= 60
    page.keyboard.press("p")
    page.wait_for_function("() => document.querySelectorAll('#ievents tr.ev-watch').length === 300")
    drawn = page.eval_on_selector_all("#ievents tr.ev-watch td.key", "tds => tds.map(td => td.textContent)")
    assert drawn == [f"default/s{i:04d}" for i in range(n - 1, n - 301, -1)]
    close_page(page)


def test_countdowns_follow_the_workers_clock_when_the_browsers_is_off_by_an_hour(browser, dashboard,
                                                                                 publisher_factory):
    from controllers.clock import FakeClock

    ahead = FakeClock(start=1000.0, wall_offset=time.time() + 3600 - 1000.0)  # the worker is 1 h ahead
    pub = publisher_factory(clock=ahead)
    obs = TelemetryObserver(pub, worker="w1", clock=ahead)
    seed_worker(obs)
    pub.flush()
    page = open_controller_page(browser, dashboard)
    page.wait_for_function("() => window.ctrlscope.client.topics.get('w/w1/informer/pods')?.cursor", timeout=10_000)
    # The offset is learnt from live frames (history is old by design): any live traffic will do.
    # The page learns it as (arrival - frame ts), so a frame delayed by a loaded machine makes the
    # countdown short by that delay, and the row is read some time after its frame: the lower bound
    # is 5 s less the time from this frame to the read, measured, not a fixed 1.5 s.
    sent = time.monotonic()
    obs.on_watch_event("pods", event_type="MODIFIED", key="default/late", resource_version="7")
    pub.flush()
    page.wait_for_function("() => window.ctrlscope.skew() !== 0", timeout=10_000)
    obs.on_queue("podset", op="add_rate_limited", key="default/late", depth=0, delay=5.0, requeues=2)
    pub.flush()
    page.wait_for_selector('#q-waiting tr[data-key="default/late"]', timeout=10_000)
    first = countdown(page, "default/late")
    elapsed = time.monotonic() - sent
    # 0.1 s: the countdown is shown to a tenth of a second. An hour off would be far outside.
    assert 5.0 - elapsed - 0.1 < first <= 5.0, (first, elapsed)
    page.wait_for_timeout(400)
    assert countdown(page, "default/late") < first - 0.2
    assert 3590_000 < page.evaluate("-window.ctrlscope.skew()") < 3610_000
    close_page(page)


def test_events_panel_shows_only_the_controllers_informers_and_folds_bookmarks(browser, dashboard, publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    obs.on_informer("nodes", fifo="DeltaFIFO", resync_period=0.0)
    obs.on_controller("podset", watches=["pods"], workers=1, started=True)
    for rv in range(100, 105):
        obs.on_bookmark("pods", resource_version=str(rv))
    obs.on_watch_event("nodes", event_type="MODIFIED", key="node-1", resource_version="106")
    enqueue(obs, "default/web", rv="107")
    pub.flush()
    page = open_controller_page(browser, dashboard)
    page.wait_for_function("() => [...document.querySelectorAll('#ievents td.key')].some(td => td.textContent === 'default/web')",
                           timeout=10_000)
    rows = page.eval_on_selector_all("#ievents tr", "trs => trs.map(tr => [...tr.cells].map(c => c.textContent))")
    assert not any("node-1" in cells for cells in rows), "another controller's informer stays out of this page"
    bookmarks = [cells for cells in rows if cells[2] == "bookmark"]
    assert bookmarks == [bookmarks[0]] and bookmarks[0][3] == "BOOKMARK ×5" and bookmarks[0][5] == "100 → 104"
    assert page.inner_text("#ev-informers") == "pods"
    close_page(page)


@pytest.mark.browser
def test_cache_panel_opens_on_the_controllers_own_informer_and_keeps_the_users_choice(browser, dashboard,
                                                                                       publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    # Another controller's informer, first in alphabetical order, and this one's For() informer.
    for name in ("apps-deployments", "podsets"):
        obs.on_informer(name, fifo="DeltaFIFO", resync_period=0.0)
        obs.on_store(name, op="upsert", key=f"default/{name}-1", obj={"metadata": {"name": f"{name}-1"}})
    obs.on_controller("summary", watches=["apps-deployments"], workers=1, started=True)
    obs.on_controller("podset", watches=["podsets", "pods"], workers=1, started=True)
    pub.flush()
    page = open_controller_page(browser, dashboard)
    selected = "document.querySelector('#cache-informer').selectedOptions[0]?.textContent"
    page.wait_for_function(f"() => {selected} === 'podsets'", timeout=10_000)
    options = page.eval_on_selector_all("#cache-informer option", "os => os.map(o => o.textContent)")
    assert options == ["apps-deployments", "pods", "podsets"], "every informer of the worker stays selectable"
    page.select_option("#cache-informer", label="apps-deployments")
    obs.on_controller("podset", watches=["podsets", "pods"], workers=1, started=True)  # a components update
    pub.flush()
    page.wait_for_timeout(500)
    assert page.evaluate(selected) == "apps-deployments", "the user's choice is kept"
    close_page(page)
