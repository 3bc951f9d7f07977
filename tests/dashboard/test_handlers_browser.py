"""Protocol v1.1 on the controller page, in real headless Chromium against daphne + Redis: a kopf-like
operator's named handlers in the timeline, the Handlers and Logs panels, and the mode banner.

Data comes from the publisher API (controllers.publish), as a kopf operator would report: each
handler invocation is one reconcile naming its handler, cause and retry; a framework retry is an
``add_after`` on the controller's queue; a zero-code observer only reports what the objects store
(``progress``).
"""

from __future__ import annotations

import time

import pytest

from controllers.kopf import controller_name
from controllers.publish import ProtocolPublisher
from controllers.schema import ErrorKind, HandlerCause, HandlerProgress, LogLevel, ObservationMode, topic_part
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_overview_browser import open_overview
from tests.dashboard.test_panels_browser import close_page, seconds

pytestmark = pytest.mark.browser

WORKER = "kopf-op"
CONTROLLER = controller_name("demo.ctrlscope.dev", "podsets")  # kopf/podsets.demo.ctrlscope.dev
PAGE = f"/c/{WORKER}/{topic_part(CONTROLLER)}/"
PODSETS = "demo.ctrlscope.dev/v1/PodSet"
KEY = "default/web"
LANE = f'#lanes .lane[data-key="{KEY}"]'
ZERO_CODE_UNSEEN = ["handler calls as they run: only the progress each one leaves on the object",
                    "log lines", "events that wait while an object is being handled"]


def publisher(redis_url: str, prefix: str) -> ProtocolPublisher:
    return ProtocolPublisher(redis_url, worker=WORKER, runtime="kopf", prefix=prefix, metrics=False).start()


def open_page(browser, dashboard):
    page = browser.new_page()
    page.js_errors = []  # asserted empty by close_page
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(dashboard.url + PAGE)
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    page.wait_for_function(f"() => window.ctrlscope.client.topics.get('w/{WORKER}/components')?.cursor", timeout=10_000)
    return page


def handler_rows(page) -> list[dict[str, str]]:
    return page.eval_on_selector_all("#handlers tr[data-handler]", """trs => trs.map(tr => ({key: tr.dataset.key,
        handler: tr.dataset.handler, state: tr.dataset.state, cells: [...tr.cells].map(c => c.textContent)}))""")


def test_a_kopf_operators_handlers_retries_logs_and_mode(browser, dashboard, redis_url, prefix, artifacts):
    pub = publisher(redis_url, prefix)
    try:
        podsets = pub.informer(PODSETS)
        podsets.listed([{"metadata": {"namespace": "default", "name": "web", "resourceVersion": "7", "uid": "u-web"}}],
                       resource_version="7")
        podsets.synced()
        ctl = pub.controller(CONTROLLER, watches=[PODSETS], mode=ObservationMode.IN_PROCESS)
        queue = pub.queue(CONTROLLER)
        pub.publisher.flush()
        page = open_page(browser, dashboard)
        page.wait_for_selector("#mode:not([hidden])", timeout=10_000)
        assert not page.is_visible("#handlers-panel") and not page.is_visible("#logs-panel"), "hidden until there is data"
        # The retry waits 1 s: record what the page shows meanwhile rather than racing it.
        page.evaluate(f"""() => {{ window.seen = {{}}; new MutationObserver(() => {{
            if (document.querySelector('{LANE} .next-retry')) window.seen.marker = true;
            if (document.querySelector('#q-waiting tr[data-key="{KEY}"]')) window.seen.waiting = true;
          }}).observe(document.body, {{subtree: true, childList: true}}); }}""")

        ctl.event("create", KEY)
        queue.add(KEY)
        for retry in range(3):
            queue.get(KEY)
            with ctl.reconcile(KEY, handler="create_fn", cause=HandlerCause.CREATE, retry=retry) as attempt:
                ctl.log(KEY, LogLevel.INFO, f"creating 3 pods (attempt {retry + 1})", handler="create_fn")
                time.sleep(0.05)
                if retry < 2:
                    ctl.log(KEY, LogLevel.WARNING, "pods not ready yet", handler="create_fn")
                    attempt.retry_after(1, "TemporaryError: pods not ready", kind=ErrorKind.TEMPORARY)
            if retry == 0:
                with ctl.reconcile(KEY, handler="audit", cause=HandlerCause.CREATE, retry=0) as attempt:
                    ctl.log(KEY, LogLevel.ERROR, "audit sink refused the record", handler="audit")
                    time.sleep(0.02)
                    attempt.give_up("PermanentError: audit sink refused the record", kind=ErrorKind.PERMANENT)
            if retry < 2:
                queue.add_after(KEY, 1)  # kopf runs the handler again in 1 s
                queue.done(KEY)
                pub.publisher.flush()
                time.sleep(1)
                queue.add(KEY)
        queue.done(KEY)
        pub.publisher.flush()

        # Timeline: create_fn's three attempts (error, error, success) and audit's terminal one.
        page.wait_for_selector(f'{LANE} .attempt[data-handler="create_fn"][data-result="success"]', timeout=10_000)
        results = page.eval_on_selector_all(f'{LANE} .attempt[data-handler="create_fn"]', "els => els.map(e => e.dataset.result)")
        assert results == ["error", "error", "success"]
        assert page.eval_on_selector_all(f"{LANE} .attempt", "els => els.map(e => e.className.split(' ')[1])") == [
            "result-error", "result-terminal", "result-error", "result-success"]
        assert page.get_attribute(f"{LANE} .lane-meta", "data-handlers") == "create_fn audit"
        assert page.evaluate("window.seen") == {"marker": True, "waiting": True}, "the 1 s retry was marked while waiting"
        first = page.query_selector(f'{LANE} .attempt[data-handler="create_fn"]')
        assert "create_fn · create · retry 0 · error · temporary" in first.get_attribute("title")
        assert "retried in 1 s" in first.get_attribute("title")

        first.click()
        details = page.wait_for_selector("#details:not([hidden])").inner_text()
        assert "handler\ncreate_fn" in details and "cause\ncreate" in details and "retry\n0 (first attempt)" in details
        assert "error kind\ntemporary" in details and "next\nretried in 1 s" in details
        assert "TemporaryError: pods not ready" in details
        logged = page.inner_text("#details .attempt-logs")
        assert "creating 3 pods (attempt 1)" in logged and "pods not ready yet" in logged
        assert "audit" not in logged and "attempt 2" not in logged, "only this attempt's lines"
        page.click(f'{LANE} .attempt[data-handler="audit"]')
        details = page.inner_text("#details")
        assert "error kind\npermanent" in details and "next\ngiven up" in details
        assert "audit sink refused the record" in page.inner_text("#details .attempt-logs")
        page.click(f'{LANE} .attempt[data-handler="create_fn"][data-result="success"]')
        details = page.inner_text("#details")
        assert "retry\n2 (attempt 3)" in details and "error kind" not in details and "no error" in details

        # Handlers: failed first; create_fn succeeded after 2 retries.
        page.wait_for_selector("#handlers-panel:not([hidden])")
        rows = handler_rows(page)
        assert [(r["key"], r["handler"], r["state"]) for r in rows] == [
            (KEY, "audit", HandlerProgress.FAILED), (KEY, "create_fn", HandlerProgress.SUCCEEDED)]
        audit, create = (r["cells"] for r in rows)
        assert audit[2:5] == ["create", "failed", "1"] and audit[6] == "PermanentError: audit sink refused the record"
        assert create[2:5] == ["create", "succeeded", "2"] and create[5] == "" and create[6] == ""
        bg = page.eval_on_selector_all("#handlers .badge.progress", "els => els.map(e => getComputedStyle(e).backgroundColor)")
        assert bg == ["rgb(196, 61, 61)", "rgb(31, 138, 76)"]  # --r-error, --r-success

        # Logs: newest first, with level and handler.
        page.wait_for_selector("#logs-panel:not([hidden])")
        lines = page.eval_on_selector_all("#logs tr", "trs => trs.map(tr => [...tr.cells].slice(1).map(c => c.textContent))")
        assert lines == [
            [KEY, "info", "create_fn", "creating 3 pods (attempt 3)"],
            [KEY, "warning", "create_fn", "pods not ready yet"],
            [KEY, "info", "create_fn", "creating 3 pods (attempt 2)"],
            [KEY, "error", "audit", "audit sink refused the record"],
            [KEY, "warning", "create_fn", "pods not ready yet"],
            [KEY, "info", "create_fn", "creating 3 pods (attempt 1)"],
        ]
        assert page.inner_text("#logs-note") == "6 lines"

        # The mode banner.
        banner = page.inner_text("#mode")
        assert "in-process" in banner and "published from inside the operator" in banner and "cannot see" not in banner
        page.click(f'{LANE} .attempt[data-handler="create_fn"]')
        page.click("#window button[data-window='10']")
        page.wait_for_timeout(200)
        save_screenshot(page, artifacts, "controller-kopf-handlers.png", full_page=True)
        page.locator("#timeline-panel").screenshot(path=str(artifacts / "controller-kopf-timeline.png"))
        page.emulate_media(color_scheme="dark")
        page.wait_for_timeout(300)
        save_screenshot(page, artifacts, "controller-kopf-handlers-dark.png", full_page=True)
        page.emulate_media(color_scheme="light")
        close_page(page)

        # The overview: the worker's runtime label and the controller's mode.
        overview = open_overview(browser, dashboard)
        card = f'#overview .worker[data-worker="{WORKER}"] .ctl-card[data-controller="{topic_part(CONTROLLER)}"]'
        assert overview.wait_for_selector(f"{card} .mode-badge", timeout=10_000).inner_text() == "in-process"
        # The label comes with worker/{name}, which may arrive after the controller's card.
        overview.wait_for_selector(f'#overview .worker[data-worker="{WORKER}"][data-runtime="kopf"] .badge.runtime',
                                   timeout=10_000)
        assert overview.inner_text(f'#overview .worker[data-worker="{WORKER}"] .badge.runtime') == "kopf"
        save_screenshot(overview, artifacts, "overview-kopf.png", full_page=True)
        close_page(overview)
    finally:
        pub.stop()


def test_zero_code_progress_shows_countdowns_and_removals(browser, dashboard, redis_url, prefix, artifacts):
    pub = publisher(redis_url, prefix)
    try:
        ctl = pub.controller(CONTROLLER, watches=[PODSETS], mode=ObservationMode.ZERO_CODE,
                             unseen=ZERO_CODE_UNSEEN)
        pub.publisher.flush()
        page = open_page(browser, dashboard)
        banner = page.wait_for_selector("#mode:not([hidden])", timeout=10_000).inner_text()
        assert "zero-code" in banner and "reconstructed from the objects' stored progress" in banner
        assert page.eval_on_selector_all("#mode .mode-unseen li", "lis => lis.map(li => li.textContent)") == ZERO_CODE_UNSEEN
        assert "cannot see:" in banner

        key = "default/db"
        ctl.progress(key, "create_fn", HandlerProgress.RETRYING, retries=2, next_at=(time.time() + 6) * 1000,
                     cause=HandlerCause.CREATE, error="TemporaryError: waiting for 3 pods")
        ctl.progress(key, "update_fn", HandlerProgress.SUCCEEDED, cause=HandlerCause.UPDATE)
        pub.publisher.flush()
        row = f'#handlers tr[data-key="{key}"][data-handler="create_fn"]'
        page.wait_for_selector(f"{row} td.countdown:not(:empty)", timeout=10_000)
        assert [(r["handler"], r["state"]) for r in handler_rows(page)] == [
            ("create_fn", HandlerProgress.RETRYING), ("update_fn", HandlerProgress.SUCCEEDED)]
        first = seconds(page.inner_text(f"{row} td.countdown"))
        assert 4.0 < first <= 6.0, first
        page.wait_for_timeout(400)
        assert seconds(page.inner_text(f"{row} td.countdown")) < first - 0.2
        # No queue topic: the timeline marks the retry from the stored next_at, and lists the handlers.
        lane = f'#lanes .lane[data-key="{key}"]'
        page.wait_for_selector(f"{lane} .next-retry")
        assert page.inner_text(f"{lane} .lane-meta") == "no attempts yet · create_fn, update_fn"
        save_screenshot(page, artifacts, "controller-kopf-zero-code.png", full_page=True)

        # The object no longer stores create_fn's progress: its row goes; then update_fn's: the panel hides.
        ctl.progress(key, "create_fn", None)
        pub.publisher.flush()
        page.wait_for_selector(row, state="detached", timeout=10_000)
        assert [r["handler"] for r in handler_rows(page)] == ["update_fn"]
        ctl.progress(key, "update_fn", None)
        pub.publisher.flush()
        page.wait_for_selector("#handlers-panel", state="hidden", timeout=10_000)
        page.wait_for_function(f"() => !document.querySelector('{lane} .next-retry')")
        close_page(page)
    finally:
        pub.stop()

