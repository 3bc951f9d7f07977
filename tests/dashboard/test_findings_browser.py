"""Provenance and findings (protocol 1.7) where they happen, in real headless Chromium against daphne
and Redis: an attempt's triggers in its details, a self-triggered attempt marked on its bar, the open
findings as badges by a key's lane and an informer's name, and listed on the overview worst first,
each linking to the key's page or the informer's.

The worker is a real TelemetryObserver with its detectors on, driven through the runtime's hooks on a
fake clock: a reconciler that writes its status on every attempt (its writes come back as update
events: a hot loop), a key that fails five times in a row (failing), a key retried once and updated
five times while it waited (six merged triggers), and an informer that never syncs (not synced, with
a 1 s timeout). Nothing is published by hand: what the page shows is what the observer decided.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from controllers.clock import FakeClock
from controllers.schema import FindingKind, QueueOp, ReconcileResult, WatchEventType
from controllers.telemetry.detectors import DetectionConfig
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_key_page_browser import screenshots
from tests.dashboard.test_panels_browser import close_page, open_controller_page

pytestmark = pytest.mark.browser

CONTROLLER, SOURCE = "podset", "controller/podset (For)"
LOOP, BAD, BUSY, BURST = "default/loop", "default/bad", "default/busy", "default/burst"
LIMITER = {"type": "exponential", "base": 0.005, "max": 1000.0}


def podset(key: str, rv: int, ready: int) -> dict[str, Any]:
    ns, name = key.split("/")
    return {"apiVersion": "demo.ctrlscope.dev/v1", "kind": "PodSet",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv), "generation": 1},
            "spec": {"replicas": 2}, "status": {"readyReplicas": ready, "observedAt": f"t{rv}"}}


def status_path(key: str) -> str:
    ns, name = key.split("/")
    return f"/apis/demo.ctrlscope.dev/v1/namespaces/{ns}/podsets/{name}/status"


class Worker:
    def __init__(self, publisher_factory) -> None:
        self.clock = FakeClock(start=1000.0, wall_offset=time.time() - 1000.0 - 30.0)
        self.pub = publisher_factory(clock=self.clock)
        self.obs = TelemetryObserver(self.pub, worker="w1", clock=self.clock,
                                     detection=DetectionConfig(sync_timeout=1.0))
        self.rv = 100

    def event(self, key: str, old: dict[str, Any] | None, new: dict[str, Any]) -> None:
        self.obs.on_watch_event("podsets", event_type=WatchEventType.MODIFIED if old else WatchEventType.ADDED, key=key,
                                resource_version=new["metadata"]["resourceVersion"])
        self.obs.on_event(CONTROLLER, event="update" if old else "create", key=key, requests=[key], source=SOURCE,
                          old=old, new=new)
        self.obs.on_queue(CONTROLLER, op=QueueOp.ADD, key=key, depth=1)

    def attempt(self, key: str, result: str, *, write: bool = False, after: float = 0.01) -> str | None:
        """``after`` seconds: get → reconcile → (a status write: its rv) → result → (backoff) → done.
        Attempts seconds apart have bars of their own on the timeline (closer ones make one mark)."""
        o = self.obs
        self.clock.step(after)
        o.on_queue(CONTROLLER, op=QueueOp.GET, key=key, depth=0, duration=0.001)
        o.on_reconcile_start(CONTROLLER, key=key, worker=0)
        rv = None
        if write:
            self.rv += 1
            rv = str(self.rv)
            o.on_request(method="PUT", path=status_path(key), code=200, duration=0.002, controller=CONTROLLER, rv=rv)
        self.clock.step(0.004)
        error = "Conflict: the object has been modified" if result == ReconcileResult.ERROR else None
        o.on_reconcile_end(CONTROLLER, key=key, worker=0, duration=0.004, result=result, error=error)
        if result == ReconcileResult.ERROR:
            o.on_queue(CONTROLLER, op=QueueOp.ADD_RATE_LIMITED, key=key, depth=0, delay=0.005, requeues=1)
        o.on_queue(CONTROLLER, op=QueueOp.DONE, key=key, depth=0, duration=0.005)
        return rv

    def run(self) -> None:
        o = self.obs
        for informer in ("podsets", "pods"):
            o.on_informer(informer, fifo="DeltaFIFO", resync_period=0.0)
        o.on_list("podsets", resource_version="100", items=3, duration=0.01)
        o.on_reflector_state("podsets", state="synced")
        o.on_controller(CONTROLLER, watches=["podsets", "pods"], workers=1, started=True, rate_limiter=LIMITER)
        self.pub.flush()
        # A hot loop: every attempt writes status, and the write comes back as the next trigger.
        obj = podset(LOOP, 100, 0)
        self.event(LOOP, None, obj)
        for i in range(5):
            rv = self.attempt(LOOP, ReconcileResult.SUCCESS, write=True, after=2.0)
            new = podset(LOOP, int(rv), i + 1)
            self.event(LOOP, obj, new)
            obj = new
            self.pub.flush()
        # Failing: five errors in a row.
        self.event(BAD, None, podset(BAD, 50, 0))
        for _ in range(5):
            self.attempt(BAD, ReconcileResult.ERROR)
            self.clock.step(0.006)
        # Busy: a retry and five updates merged into its next attempt.
        busy = podset(BUSY, 60, 0)
        self.event(BUSY, None, busy)
        self.attempt(BUSY, ReconcileResult.ERROR)
        for i in range(5):
            new = podset(BUSY, 61 + i, 0)
            new["spec"]["replicas"] = 3 + i
            self.event(BUSY, busy, new)
            busy = new
        self.attempt(BUSY, ReconcileResult.SUCCESS, after=2.0)
        # A burst: 25 updates while queued, more than the 20 a reconcile_start lists.
        burst = podset(BURST, 70, 0)
        self.event(BURST, None, burst)
        self.attempt(BURST, ReconcileResult.SUCCESS)
        for i in range(25):
            new = podset(BURST, 71 + i, 0)
            new["spec"]["replicas"] = 3 + i
            self.event(BURST, burst, new)
            burst = new
        self.attempt(BURST, ReconcileResult.SUCCESS, after=2.0)
        self.pub.flush()
        # The pods informer never syncs: past its 1 s timeout, the next flush states it.
        self.clock.step(2.0)
        self.pub.flush()
        self.pub.flush()


def test_triggers_self_triggering_and_findings_where_they_happen(browser, dashboard, publisher_factory, artifacts):
    w = Worker(publisher_factory)
    w.run()
    page = open_controller_page(browser, dashboard)
    lane = '#lanes .lane[data-key="%s"]'
    # Findings by the lanes of their keys, and by the informer's name in the header.
    page.wait_for_selector(lane % LOOP + " .lane-findings .badge.finding-hot_loop", timeout=10_000)
    assert re.fullmatch(r"hot loop ×\d+", page.inner_text(lane % LOOP + " .lane-findings .badge"))
    page.wait_for_selector(lane % BAD + " .lane-findings .badge.finding-failing")
    assert page.inner_text(lane % BUSY + " .lane-findings") == ""
    page.wait_for_selector("#components .comp.informer:has-text('pods') .badge.finding-not_synced")
    assert not page.query_selector("#components .comp.informer:has-text('podsets') .badge.finding")

    # The loop's attempts after the first are self-triggered: a ring on their bars.
    assert page.eval_on_selector_all(lane % LOOP + " .attempt", "els => els.map(e => e.classList.contains('self-triggered'))") \
        == [False, True, True, True, True]
    page.click(lane % LOOP + " .attempt.self-triggered >> nth=-1")
    details = page.wait_for_selector("#details:not([hidden])")
    assert "self-triggered" in page.inner_text("#details .details-head .self-badge")
    assert "why it ran" in details.inner_text().lower()
    summary = page.inner_text("#details details.triggers summary")
    assert summary == "1 trigger: 1 update event · caused by its own writes", summary
    page.click("#details details.triggers summary")
    trigger = page.inner_text("#details li.trigger")
    assert "update event" in trigger and LOOP in trigger and "own write" in trigger and f"via {SOURCE}" in trigger
    assert "status.observedAt" in trigger and "status.readyReplicas" in trigger
    assert page.get_attribute("#details a.details-story", "href").endswith(f"/c/w1/{CONTROLLER}/k/{LOOP}")

    # The failing key's five attempts are one mark: its table, and why the first of them ran.
    page.click(lane % BAD + " .attempt.mark")
    page.wait_for_selector("#details:not([hidden]) table.mark-table")
    assert page.eval_on_selector_all("#details tr.mark-attempt", "trs => trs.length") == 5
    assert "why the first ran" in page.inner_text("#details").lower()
    assert page.inner_text("#details details.triggers summary") == "1 trigger: 1 create event"

    # The busy key's second attempt absorbed its retry and the five updates made while it waited.
    page.click(lane % BUSY + " .attempt >> nth=-1")
    page.wait_for_selector("#details:not([hidden]) details.triggers")
    summary = page.inner_text("#details details.triggers summary")
    assert summary == "6 triggers merged: 1 retry, 5 update events", summary
    page.click("#details details.triggers summary")
    rows = page.locator("#details li.trigger").all_inner_texts()
    assert len(rows) == 6 and "after error" in rows[0] and all("spec.replicas" in r for r in rows[1:])
    assert not page.query_selector(lane % BUSY + " .attempt.self-triggered")
    # More triggers than a record lists: counted, the listed ones described.
    page.click(lane % BURST + " .attempt >> nth=-1")
    page.wait_for_selector("#details:not([hidden]) details.triggers")
    summary = page.inner_text("#details details.triggers summary")
    assert summary == "25 triggers merged: 20 update events, and 5 earlier not listed", summary
    screenshots(page, artifacts, "31-controller-triggers", full_page=True)

    # Every row naming a key links to its page: the lanes, the queue's rows, the informer's events.
    story = f"/c/w1/{CONTROLLER}/k/{LOOP}"
    assert page.get_attribute(lane % LOOP + " a.lane-story", "href").endswith(story)
    assert page.get_attribute(f'#q-queued tr[data-key="{LOOP}"] a.key-link', "href").endswith(story)
    page.wait_for_selector(f"#ievents tr.ev-watch a.key-link:text-is('{LOOP}')", timeout=10_000)
    assert page.get_attribute(f"#ievents tr.ev-watch a.key-link:text-is('{LOOP}') >> nth=0", "href").endswith(story)
    page.click(lane % LOOP + " a.lane-story")
    page.wait_for_selector("#h-key:has-text('default/loop')")
    page.wait_for_selector("#key-findings .badge.finding-hot_loop", timeout=10_000)
    page.wait_for_selector("#story tr.story-row.finding", timeout=10_000)
    # The hot loop opened at the third self-triggered attempt and was updated at each one after it.
    whats = page.eval_on_selector_all("#story tr.story-row.finding td.what", "tds => tds.map(td => td.innerText)")
    assert whats[0] == "finding open" and whats[1:] and set(whats[1:]) == {"finding updated"}, whats
    assert "self-triggered" in page.inner_text("#story")
    screenshots(page, artifacts, "31-key-page-hot-loop", full_page=True)
    close_page(page)


def test_the_overview_lists_the_problems_worst_first_linking_where_they_happen(browser, dashboard, publisher_factory, artifacts):
    w = Worker(publisher_factory)
    w.run()
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(dashboard.url + "/")
    page.wait_for_selector("#problems-panel:not([hidden]) #problems li", timeout=10_000)
    page.wait_for_function("() => document.querySelectorAll('#problems li').length >= 3", timeout=10_000)
    items = page.eval_on_selector_all("#problems li", "lis => lis.map(li => [li.dataset.finding, li.dataset.subject])")
    assert items == [[FindingKind.HOT_LOOP, LOOP], [FindingKind.FAILING, BAD], [FindingKind.NOT_SYNCED, "pods"]], items
    first = page.locator("#problems li").first
    assert first.locator("a").get_attribute("href").endswith(f"/c/w1/{CONTROLLER}/k/{LOOP}")
    assert "w1 › podset ›" in first.inner_text() and "since" in first.inner_text()
    informer = page.locator("#problems li[data-finding='not_synced'] a")
    assert informer.get_attribute("href").endswith("/c/w1/informer/pods/")
    # And counted on the controller's card.
    card = page.locator(".ctl-card[data-controller='podset'] .ctl-badges")
    assert "hot loop" in card.inner_text() and "failing" in card.inner_text()
    screenshots(page, artifacts, "31-overview-problems", full_page=True)
    informer.click()
    page.wait_for_selector("#components .comp.informer.current .badge.finding-not_synced", timeout=10_000)
    assert errors == [], errors
    page.close()
