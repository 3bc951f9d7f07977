"""The controller page's cache panel and pipeline overview in real headless Chromium (daphne + Redis).

A real TelemetryObserver is driven from the test (the hooks the runtime calls) and the publisher is
flushed, as in test_panels_browser.py. The cache is 100,000 objects: the table must draw only the
visible rows, scroll to the end, flash changed rows and filter; the first paint is measured.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_panels_browser import close_page, open_controller_page, seed_worker

pytestmark = pytest.mark.browser

N = 100_000
PHASES = ("Running", "Pending", "Succeeded", "Failed")


def pod(i: int, rv: int | None = None, *, deleting: bool = False) -> dict:
    meta = {"name": f"pod-{i:06d}", "namespace": "default", "resourceVersion": str(rv or 1000 + i),
            "generation": 1 + i % 3, "uid": f"uid-{i:06d}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"phase": PHASES[i % 4]}}


def key(i: int) -> str:
    return f"default/pod-{i:06d}"


def fill_cache(obs: TelemetryObserver, n: int = N) -> None:
    obs.on_list("pods", resource_version="5000000", items=n, duration=1.2)
    obs.on_store("pods", op="replace", key="", obj=[(key(i), pod(i)) for i in range(n)])


def save_screenshot(page, artifacts: Path, name: str, **kw) -> None:
    """Into artifacts/ only: tests never modify tracked files (README's docs/screenshots are refreshed
    by copying from artifacts/ by hand after looking at them)."""
    page.screenshot(path=str(artifacts / name), **kw)


def dom_rows(page) -> int:
    return page.eval_on_selector_all("#cache-spacer .cache-row", "els => els.length")


def scroll_cache(page, top: int | str) -> None:
    page.evaluate(f"(() => {{ const s = document.getElementById('cache-scroll'); s.scrollTop = {top}; }})()")


def parse_rate(text: str) -> float:
    """A stage's rate as the pipeline shows it ("1,234/s", "1.2k/s", "–" when unknown) → events/s."""
    value = text.strip().removesuffix("/s")
    if value in ("", "–"):
        return float("nan")
    return float(value[:-1]) * 1000 if value.endswith("k") else float(value.replace(",", ""))


def test_cache_panel_with_100k_objects(browser, dashboard, publisher_factory, artifacts):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    fill_cache(obs)
    pub.flush()

    started = time.monotonic()
    page = open_controller_page(browser, dashboard)
    page.wait_for_function(f"() => window.ctrlscopeCache && window.ctrlscopeCache.cache.firstPaint && "
                           f"document.getElementById('cache-count').textContent === '{N:,}'", timeout=20_000)
    wall = time.monotonic() - started
    first_paint = page.evaluate("window.ctrlscopeCache.cache.firstPaint")
    print(f"\nfirst paint with {N:,} cached objects: {first_paint:.0f} ms after navigation start "
          f"(snapshot received and table drawn); {wall * 1000:.0f} ms wall from goto in the test")
    print("timings (ms since navigation start):", page.evaluate("JSON.stringify(window.ctrlscopeTimings)"),
          "ws live:", page.evaluate("performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"))
    # That it paints from the HTTP snapshot at all, without waiting for the socket; the 1 s goal is
    # measured by bench/ui.py (a timed test on a loaded machine measures the machine).
    assert first_paint <= 15_000, f"first paint {first_paint:.0f} ms (goal ≤ 1 s, see bench/ui.py)"

    # Only the visible rows (plus overscan) are in the DOM; the spacer is as tall as 100k rows.
    page.wait_for_selector(f'#cache-spacer .cache-row[data-key="{key(0)}"]')
    assert dom_rows(page) <= 60
    row_h = page.evaluate("window.ctrlscopeCache.rowHeight")
    assert page.evaluate("document.getElementById('cache-spacer').offsetHeight") == N * row_h
    first = page.inner_text(f'#cache-spacer .cache-row[data-key="{key(0)}"]').split("\n")
    assert [c.strip() for c in first] == [key(0), "default", "pod-000000", "1000", "1", "Running"]

    # Smooth scroll: 60 animation frames, each jumping 1,600 rows; the page keeps drawing.
    frames = page.evaluate("""() => new Promise((done) => {
        const s = document.getElementById('cache-scroll'); const gaps = []; let last = performance.now(), n = 0;
        function step(t) { gaps.push(t - last); last = t; s.scrollTop += 1600 * 22; if (++n < 60) requestAnimationFrame(step); else done(gaps); }
        requestAnimationFrame(step); })""")
    worst = max(frames[1:])
    # Printed, not asserted: a frame time in a test measures the machine (a loaded CI box made one
    # frame 1.2 s). What keeps scrolling cheap is asserted: the DOM holds only the visible rows.
    print(f"scrolling 100k rows: worst frame {worst:.1f} ms, mean {sum(frames[1:]) / len(frames[1:]):.1f} ms")
    assert len(frames) == 60
    assert dom_rows(page) <= 60

    # Bottom: the last keys are drawn.
    scroll_cache(page, "s.scrollHeight")
    page.wait_for_selector(f'#cache-spacer .cache-row[data-key="{key(N - 1)}"]', timeout=5_000)
    assert dom_rows(page) <= 60
    assert page.is_visible(f'#cache-spacer .cache-row[data-key="{key(N - 1)}"]')

    # A changed object flashes, with its new rv; a watch event and a handler call become its history.
    changed = N - 5
    obs.on_watch_event("pods", event_type="MODIFIED", key=key(changed), resource_version="9000001")
    obs.on_store("pods", op="upsert", key=key(changed), obj=pod(changed, rv=9000001, deleting=True))
    obs.on_handler("pods", handler="controller/podset", event="update", key=key(changed), outcome="ok",
                   duration=0.0003, old={"metadata": {"resourceVersion": str(1000 + changed)}},
                   new={"metadata": {"resourceVersion": "9000001"}})
    pub.flush()
    flashed = page.wait_for_selector(f'#cache-spacer .cache-row.flash[data-key="{key(changed)}"]', timeout=5_000)
    assert "9000001" in flashed.inner_text() and "deleting" in flashed.inner_text()
    assert page.eval_on_selector_all("#cache-spacer .cache-row.flash", "els => els.length") == 1
    save_screenshot(page, artifacts, "cache-panel-flash.png", full_page=True)
    page.wait_for_selector(f'#cache-spacer .cache-row.flash[data-key="{key(changed)}"]', state="detached", timeout=5_000)

    # Click the row: its summary JSON, its recent history, and (no worker process answers for w1 here)
    # a clear error where the object would be, instead of a wait.
    page.click(f'#cache-spacer .cache-row[data-key="{key(changed)}"]')
    details = page.wait_for_selector("#cache-details:not([hidden])")
    text = details.inner_text()
    assert '"rv": "9000001"' in text and '"deleting": true' in text and f'"uid": "uid-{changed:06d}"' in text
    history = page.inner_text("#cache-details .cache-history")
    assert "MODIFIED rv 9000001" in history and "controller/podset ok" in history and f"{1000 + changed}→9000001" in history
    error = page.wait_for_selector("#cache-object .obj-error", timeout=5_000).inner_text()
    assert "HTTP 503" in error and "worker w1 is not running" in error
    assert f"obj=default%2Fpod-{changed:06d}" in page.url and "cache=pods" in page.url
    page.keyboard.press("Escape")
    page.wait_for_selector("#cache-details", state="hidden")
    assert "obj=" not in page.url
    page.click(f'#cache-spacer .cache-row[data-key="{key(changed)}"]')
    page.wait_for_selector("#cache-details:not([hidden])")
    save_screenshot(page, artifacts, "cache-panel.png", full_page=True)

    # Filter narrows the count (and the rows); deleting an object shrinks it.
    page.fill("#cache-filter", "pod-09999")
    page.wait_for_function("() => document.getElementById('cache-count').textContent === '10'")
    keys = page.eval_on_selector_all("#cache-spacer .cache-row", "els => els.map(e => e.dataset.key)")
    assert keys == [key(i) for i in range(N - 10, N)]
    assert "of 100,000 objects match" in page.inner_text("#cache-count-label")
    page.fill("#cache-filter", "phase:failed ns:default")
    page.wait_for_function(f"() => document.getElementById('cache-count').textContent === '{N // 4:,}'")
    page.fill("#cache-filter", "deleting")
    page.wait_for_function("() => document.getElementById('cache-count').textContent === '1'")
    page.fill("#cache-filter", "")
    obs.on_store("pods", op="delete", key=key(0), obj=None)
    pub.flush()
    page.wait_for_function(f"() => document.getElementById('cache-count').textContent === '{N - 1:,}'")
    scroll_cache(page, 0)
    page.wait_for_selector(f'#cache-spacer .cache-row[data-key="{key(1)}"]')
    assert not page.query_selector(f'#cache-spacer .cache-row[data-key="{key(0)}"]')
    close_page(page)

    # The deep link from the URL opens the same object on a fresh page.
    page = open_controller_page(browser, dashboard, f"/c/w1/podset/?cache=pods&obj={key(50_000)}")
    page.wait_for_selector(f'#cache-spacer .cache-row.selected[data-key="{key(50_000)}"]', timeout=20_000)
    assert key(50_000) in page.inner_text("#cache-details .cache-details-key")
    close_page(page)


def test_pipeline_overview_shows_stage_rates_badges_and_sync_progress(browser, dashboard, publisher_factory,
                                                                       artifacts):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    obs.on_informer("pods", fifo="DeltaFIFO", resync_period=30.0)
    obs.on_reflector_state("pods", state="listing")
    obs.on_list("pods", resource_version="100", items=1000, duration=0.05)
    for i in range(400):
        obs.on_store("pods", op="upsert", key=key(i), obj=pod(i))
    pub.flush()
    page = open_controller_page(browser, dashboard)
    stage = '#pipeline .stage[data-stage="{}"]'
    page.wait_for_selector(stage.format("fifo") + " >> text=DeltaFIFO", timeout=10_000)
    page.wait_for_selector(stage.format("reflector") + " >> text=initial sync 400 / 1,000")
    assert "listing" in page.inner_text(stage.format("reflector"))
    assert page.evaluate("document.querySelector('#pipeline progress').value") == 400
    save_screenshot(page, artifacts, "pipeline-initial-sync.png", clip=page.query_selector(".ctl-head").bounding_box())

    # Synced and watching; live traffic through every stage.
    for i in range(400, 1000):
        obs.on_store("pods", op="upsert", key=key(i), obj=pod(i))
    obs.on_watch_start("pods", resource_version="100")
    obs.on_reflector_state("pods", state="watching")
    obs.on_reflector_state("pods", state="synced")
    pub.flush()
    page.wait_for_selector(stage.format("reflector") + " .badge.ok >> text=synced", timeout=10_000)
    assert not page.query_selector("#pipeline progress")
    assert "watching" in page.inner_text(stage.format("reflector"))
    # One status write from a Reconcile that lost an optimistic-concurrency race.
    obs.on_reconcile_start("podset", key=key(0), worker=0)
    obs.on_request(method="PUT", path="/apis/demo.ctrlscope.dev/v1/namespaces/default/podsets/a/status", code=409,
                   duration=0.001)
    obs.on_reconcile_end("podset", key=key(0), worker=0, duration=0.002, result="error", error="conflict")
    for burst in range(3):
        for i in range(200):
            k = key(i)
            obs.on_watch_event("pods", event_type="MODIFIED", key=k, resource_version=str(2000 + burst * 200 + i))
            obs.on_fifo("pods", op="queued", key=k, delta="Updated", depth=1)
            obs.on_store("pods", op="upsert", key=k, obj=pod(i, rv=2000 + burst * 200 + i))
            obs.on_handler("pods", handler="controller/podset", event="update", key=k, outcome="ok", duration=0.0002)
            obs.on_queue("podset", op="add", key=k, depth=3)
            if i % 4 == 0:
                obs.on_queue("podset", op="get", key=k, depth=2, duration=0.001)
                obs.on_reconcile_end("podset", key=k, worker=0, duration=0.002,
                                     result="error" if i % 8 == 0 else "success", error="boom" if i % 8 == 0 else None)
        pub.flush()
        time.sleep(0.3)

    # 600 of each informer record within the 3 s window → ~200/s; 150 reconciles → ~50/s. The rates
    # are over the last 3 s of worker time, so they hold only while the bursts are in that window:
    # read every stage in one evaluation, as often as the page redraws, until they show what the
    # bursts make (reading them one by one, once, raced the window on a loaded machine: 67/s).
    names = ("reflector", "fifo", "cache", "handlers", "workqueue", "workers", "reconcile")

    def expected(rates: dict[str, float]) -> bool:
        return (all(100 <= rates[n] <= 400 for n in names[:5])
                and 25 <= rates["workers"] <= 100 and 25 <= rates["reconcile"] <= 100)

    deadline = time.monotonic() + 10
    while True:
        texts = page.evaluate("(names) => Object.fromEntries(names.map(n => [n, document.querySelector("
                              "`#pipeline .stage[data-stage=\"${n}\"] .rate`).textContent]))", list(names))
        rates = {n: parse_rate(t) for n, t in texts.items()}
        if expected(rates) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    print(f"\nstage rates: {rates}")
    assert expected(rates), rates
    assert "failing" in page.inner_text(stage.format("reconcile"))
    assert "1,000 objects" in page.inner_text(stage.format("cache"))
    assert "depth 3" in page.inner_text(stage.format("workqueue"))
    assert "1 failed (1 × 409 conflict)" in page.inner_text(stage.format("writes"))
    # The overview redraws at most a few times a second: the last burst's calls may land a redraw later.
    page.wait_for_function("() => document.querySelector('#pipeline .stage[data-stage=\"handlers\"]').textContent"
                           ".includes('600 calls')", timeout=5_000)
    save_screenshot(page, artifacts, "pipeline-overview.png", clip=page.query_selector(".ctl-head").bounding_box())
    # The rates decay back to zero once the traffic stops (a window of the last 3 s).
    page.wait_for_function("() => document.querySelector('#pipeline .stage[data-stage=\"reflector\"] .rate').textContent === '0/s'",
                           timeout=8_000)
    close_page(page)


def test_pipeline_says_how_an_informer_is_narrowed(browser, dashboard, publisher_factory, artifacts):
    """Issue 16: a scoped informer's card names its scope where it acts: the selector, namespace and
    metadata-only on the Reflector (what the server sends), the transform on the Cache (what is kept)."""
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    obs.on_informer("pods", fifo="DeltaFIFO", resync_period=0.0,
                    scope={"namespace": "team-a", "label_selector": "app=web", "metadata_only": True,
                           "transform": "strip managedFields", "field_selector": ""})
    obs.on_reflector_state("pods", state="watching")
    obs.on_reflector_state("pods", state="synced")
    pub.flush()
    page = open_controller_page(browser, dashboard)
    stage = '#pipeline .stage[data-stage="{}"]'
    page.wait_for_selector(stage.format("reflector") + ' .badge.scope[data-scope="label_selector"]', timeout=10_000)
    reflector = page.eval_on_selector_all(stage.format("reflector") + " .badge.scope",
                                          "els => els.map(e => [e.dataset.scope, e.textContent, e.title])")
    assert [(f, t) for f, t, _ in reflector] == [("namespace", "namespace team-a"), ("label_selector", "selector app=web"),
                                                  ("metadata_only", "metadata only")]
    assert all(title for _, _, title in reflector), "every badge explains itself on hover"
    cache = page.eval_on_selector_all(stage.format("cache") + " .badge.scope", "els => els.map(e => e.textContent)")
    assert cache == ["transform: strip managedFields"]
    assert not page.query_selector('#pipeline .badge.scope[data-scope="field_selector"]'), "an empty selector says nothing"
    save_screenshot(page, artifacts, "pipeline-scoped-informer.png", clip=page.query_selector(".ctl-head").bounding_box())
    close_page(page)


def test_a_flood_of_records_summarises_and_keeps_the_cache_panel_responsive(browser, dashboard, publisher_factory,
                                                                           artifacts):
    pub = publisher_factory(max_frame_items=10_000)
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    fill_cache(obs, 20_000)
    pub.flush()
    page = open_controller_page(browser, dashboard)
    page.wait_for_function("() => document.getElementById('cache-count').textContent === '20,000'", timeout=15_000)
    page.evaluate("""() => { window.__gaps = []; let last = performance.now();
        (function tick(t) { window.__gaps.push(t - last); last = t; requestAnimationFrame(tick); })(last); }""")
    # ~3 s of 8,000 records/s plus 2,000 cache writes/s.
    for second in range(3):
        for step in range(4):
            for i in range(2000):
                n = (second * 4 + step) * 2000 + i
                obs.on_watch_event("pods", event_type="MODIFIED", key=key(n % 20_000), resource_version=str(10_000_000 + n))
            for i in range(500):
                n = (second * 4 + step) * 500 + i
                obs.on_store("pods", op="upsert", key=key(n % 20_000), obj=pod(n % 20_000, rv=10_000_000 + n))
            pub.flush()
            time.sleep(0.25)
        if second == 1:
            # The badge and the cache note change together, once a second, and the rate can dip
            # under the threshold at the next boundary on a loaded machine: read both at one moment
            # (two reads straddled a boundary: badge shown, then a note already without it).
            page.wait_for_function("""() => { const badge = document.getElementById('summarising');
                return !badge.hidden && /^summarising · [0-9,]+ records\\/s$/.test(badge.textContent)
                    && document.getElementById('cache-note').textContent.includes('summarising'); }""", timeout=5_000)
    page.locator("#cache-panel").scroll_into_view_if_needed()
    save_screenshot(page, artifacts, "cache-panel-summarising.png", full_page=False)
    gaps = page.evaluate("window.__gaps.slice(1)")
    worst = max(gaps)
    print(f"\nflood: {len(gaps)} animation frames in ~3 s, worst gap {worst:.0f} ms")
    assert worst < 3000, "the page froze for seconds (bench/ui.py measures long tasks against its goals)"
    assert dom_rows(page) <= 60
    assert page.eval_on_selector_all("#ievents tr", "els => els.length") <= 300
    # The table stays usable while summarising: scroll and filter.
    scroll_cache(page, "s.scrollHeight")
    page.wait_for_selector(f'#cache-spacer .cache-row[data-key="{key(19_999)}"]', timeout=5_000)
    page.fill("#cache-filter", "pod-01999")
    page.wait_for_function("() => document.getElementById('cache-count').textContent === '10'", timeout=5_000)
    # When the flood stops the badge goes away.
    page.wait_for_selector("#summarising", state="hidden", timeout=5_000)
    close_page(page)


def test_informer_snapshot_over_http_is_sorted_resumable_and_needs_access(dashboard_factory, publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    for i in (3, 1, 2):
        obs.on_store("pods", op="upsert", key=key(i), obj=pod(i))
    obs.on_watch_event("pods", event_type="ADDED", key=key(3), resource_version="1003")
    pub.flush()
    server = dashboard_factory()
    with urllib.request.urlopen(server.url + "/c/w1/informer/pods/snapshot.json?history=10", timeout=5) as resp:
        snap = json.loads(resp.read())
    assert snap["topic"] == "w/w1/informer/pods" and snap["size"] == 3 and snap["epoch"]
    assert list(snap["state"]) == [key(1), key(2), key(3)]  # sorted for the page
    assert snap["state"][key(2)] == {"rv": "1002", "gen": 3, "uid": "uid-000002", "phase": "Succeeded"}
    assert snap["id"] == snap["history"][-1][0]  # the frames up to (and including) the snapshot's id
    assert any(r.get("k") == "watch" for _, frame in snap["history"] for r in frame["r"])
    # A relist's state-only frames (1,000 keys each) are left out of the history: the snapshot has them.
    obs.on_store("pods", op="replace", key="", obj=[(key(i), pod(i)) for i in range(3000)])
    pub.flush()
    with urllib.request.urlopen(server.url + "/c/w1/informer/pods/snapshot.json?history=10", timeout=5) as resp:
        snap = json.loads(resp.read())
    assert snap["size"] == 3000 and snap["history"] and all(frame["r"] for _, frame in snap["history"])
    with urllib.request.urlopen(server.url + "/c/w1/informer/nothing/snapshot.json", timeout=5) as resp:
        assert json.loads(resp.read())["size"] == 0
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(server.url + "/c/w1/informer/bad%20name/snapshot.json", timeout=5)
    assert err.value.code == 404
    closed = dashboard_factory(CTRLSCOPE_ALLOW_ANONYMOUS="0")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(closed.url + "/c/w1/informer/pods/snapshot.json", timeout=5)
    assert err.value.code == 403


def test_a_relist_of_30k_keys_reaches_the_page_without_dropping_the_socket(browser, dashboard, publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    fill_cache(obs, 1000)
    pub.flush()
    page = open_controller_page(browser, dashboard)
    page.wait_for_function("() => document.getElementById('cache-count').textContent === '1,000'", timeout=15_000)
    # Changing 30,000 keys at once is ~2.5 MB of state: more than daphne sends in one websocket message
    # (1 MiB). The publisher splits it into frames of 1,000 keys and the server batches frames under
    # 512 KiB per message, so the socket stays up and no reload is needed.
    page.evaluate("() => { window.__states = []; window.ctrlscope.client.on('state', s => window.__states.push(s)); }")
    fill_cache(obs, 30_000)
    pub.flush()
    page.wait_for_function("() => document.getElementById('cache-count').textContent === '30,000'", timeout=20_000)
    assert page.evaluate("window.__states") == [], "the socket must not drop or resync"
    obs.on_store("pods", op="upsert", key=key(29_999), obj=pod(29_999, rv=77))
    pub.flush()
    scroll_cache(page, "s.scrollHeight")
    page.wait_for_selector(f'#cache-spacer .cache-row[data-key="{key(29_999)}"] >> text=77', timeout=10_000)
    close_page(page)
