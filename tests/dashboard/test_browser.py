"""The dashboard shell in real headless Chromium against daphne + Redis + a publishing worker."""

from __future__ import annotations

import threading

import pytest

from controllers.telemetry.synthetic import SyntheticLoad

pytestmark = pytest.mark.browser


def open_developer_view(browser, dashboard):
    """The index with its developer disclosure open: while open it subscribes to every topic."""
    page = browser.new_page()
    page.goto(dashboard.url + "/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    page.click("#dev > summary")
    return page


def test_page_goes_live_and_receives_every_frame_in_order(browser, dashboard, publisher_factory, artifacts):
    pub = publisher_factory()
    pub.set_state("synthetic", "seed", {"rv": "1"})
    pub.flush()
    page = open_developer_view(browser, dashboard)
    page.wait_for_function("() => window.ctrlscope.client.topics.get('synthetic')?.cursor", timeout=10_000)
    page.evaluate("""() => { window.__seqs = [];
        window.ctrlscope.client.on('records', (t, rs) => rs.forEach(r => window.__seqs.push(r.seq))); }""")
    load = SyntheticLoad(pub, rate=1, objects=50, seed=7)
    for _ in range(40):
        load.step(50)
        pub.flush()
    page.wait_for_function("() => window.__seqs.length >= 2000", timeout=15_000)
    seqs = page.evaluate("window.__seqs")
    assert seqs == list(range(1, 2001))
    state = page.evaluate("Object.fromEntries(window.ctrlscope.client.topics.get('synthetic').state)")
    assert state == pub.state("synthetic")
    page.wait_for_function("() => document.querySelectorAll('#events tr').length >= 100")
    assert page.inner_text("#c-records").replace(",", "") == "2000"
    assert page.evaluate("window.ctrlscope.client.stats.duplicates") == 0
    page.screenshot(path=str(artifacts / "dashboard-live.png"), full_page=True)
    page.close()


def test_page_resumes_after_the_websocket_is_killed(browser, dashboard, publisher_factory):
    pub = publisher_factory()
    pub.publish("synthetic", {"seq": 0})
    pub.flush()
    page = open_developer_view(browser, dashboard)
    page.wait_for_function("() => window.ctrlscope.client.topics.get('synthetic')?.cursor", timeout=10_000)
    page.evaluate("""() => { window.__seqs = []; window.__states = [];
        const c = window.ctrlscope.client;
        c.on('records', (t, rs) => rs.forEach(r => window.__seqs.push(r.seq)));
        c.on('state', s => window.__states.push(s)); }""")
    stop = threading.Event()
    load = SyntheticLoad(pub, rate=1, objects=20, seed=3)

    def produce():
        while not stop.is_set() and load.seq < 1500:
            load.step(10)
            pub.flush()
            stop.wait(0.005)

    producer = threading.Thread(target=produce)
    producer.start()
    page.wait_for_function("() => window.__seqs.length > 200", timeout=10_000)
    page.evaluate("window.ctrlscope.client.ws.close()")  # the socket dies mid-stream
    producer.join(30)
    page.wait_for_function("() => window.__seqs.length >= 1500", timeout=15_000)
    stop.set()
    assert page.evaluate("window.__seqs") == list(range(1, 1501))
    assert "reconnecting" in page.evaluate("window.__states")
    assert page.get_attribute("#conn", "data-state") == "live"
    assert page.evaluate("window.ctrlscope.client.stats.resyncs") == 0
    page.close()
