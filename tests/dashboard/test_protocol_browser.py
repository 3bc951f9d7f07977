"""Protocol versions and forward compatibility, in real headless Chromium against daphne + Redis.

A worker that speaks another major version of the telemetry protocol is not interpreted: the page
says so (not a crash, not silence) and keeps showing every other worker. Records of a kind the page
does not know (a newer minor's addition) are dropped and counted; the known ones render as always.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from controllers.schema import ComponentKind, RecordKind, TopicKind, worker_topic
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_overview_browser import Worker, open_overview
from tests.dashboard.test_panels_browser import close_page, open_controller_page, seed_worker

pytestmark = pytest.mark.browser


class VersionedPublisher(RedisPublisher):
    """A RedisPublisher whose frames say ``"v": version``: a publisher of another protocol version."""

    def __init__(self, *args: Any, version: str, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.version = version

    def _build_frames(self, records: dict[str, list[Any]]) -> list[tuple[str, list[Any]]]:
        frames = []
        for topic, (frame, *rest) in super()._build_frames(records):
            # Appended last: a reset frame must still start with {"reset":true (streams.RESET_PREFIX).
            frames.append((topic, [orjson.dumps({**orjson.loads(frame), "v": self.version}), *rest]))
        return frames


def worker_entry(pub: RedisPublisher, worker: str, *, runtime: str, protocol: str) -> None:
    """The publisher's own components entry, worker/{name}: its runtime label and protocol version."""
    pub.set_state(worker_topic(worker, TopicKind.COMPONENTS), f"{ComponentKind.WORKER}/{worker}",
                  {"kind": ComponentKind.WORKER.value, "name": worker, "runtime": runtime, "protocol": protocol})


def test_a_worker_of_another_major_version_is_named_on_the_overview_and_the_others_keep_working(
        browser, dashboard, publisher_factory, redis_url, prefix, artifacts):
    ok = Worker(publisher_factory, "w1")
    worker_entry(ok.pub, "w1", runtime="go", protocol="1.0")
    ok.publish_one_synced_controller()
    # w9's frames say v2.0; w8's frames carry no "v" (1.0) but its components entry says 2.1.
    v2 = VersionedPublisher(redis_url, prefix=prefix, version="2.0")
    try:
        obs = TelemetryObserver(v2, worker="w9")
        obs.on_informer("pods", fifo="DeltaFIFO", resync_period=0.0)
        obs.on_controller("podset", watches=["pods"], workers=2, started=True)
        v2.flush()
        w8 = publisher_factory()
        TelemetryObserver(w8, worker="w8").on_controller("podset", watches=[], workers=1, started=True)
        worker_entry(w8, "w8", runtime="kopf", protocol="2.1")
        w8.flush()

        page = open_overview(browser, dashboard)
        for name, version in (("w9", "2.0"), ("w8", "2.1")):
            notice = page.wait_for_selector(f'.worker[data-worker="{name}"] .protocol-notice', timeout=10_000)
            assert notice.inner_text() == (f"worker {name} speaks telemetry protocol v2; this dashboard speaks v1 "
                                           "— its data is not shown")
            assert page.get_attribute(f'.worker[data-worker="{name}"]', "data-protocol") == version
            assert page.query_selector(f'.worker[data-worker="{name}"] .ctl-card') is None
        assert page.evaluate("[...window.ctrlscope.client.unsupported]") == [
            [worker_topic("w9", TopicKind.COMPONENTS), "2.0"]]
        # The v1 worker is drawn as ever, with its runtime label; later frames keep arriving.
        page.wait_for_selector('.worker[data-worker="w1"] .ctl-card[data-controller="podset"]', timeout=10_000)
        assert page.inner_text('.worker[data-worker="w1"] .runtime') == "go"
        assert page.is_hidden('.worker[data-worker="w9"] .runtime')
        ok.controller("second", ["pods"], started=True)
        ok.tick()
        page.wait_for_selector('.worker[data-worker="w1"] .ctl-card[data-controller="second"]', timeout=10_000)
        save_screenshot(page, artifacts, "protocol-notice-overview.png", full_page=True)
        close_page(page)
    finally:
        v2.stop()


def test_a_controller_page_of_an_unsupported_worker_says_so(browser, dashboard, redis_url, prefix, artifacts):
    v2 = VersionedPublisher(redis_url, prefix=prefix, version="2.0")
    try:
        obs = TelemetryObserver(v2, worker="w1")
        seed_worker(obs)
        obs.on_controller("podset", watches=["pods"], workers=2, started=True)
        obs.on_queue("podset", op="add", key="default/web", depth=1)
        v2.flush()
        page = open_controller_page(browser, dashboard)
        notice = page.wait_for_selector("#protocol-notice:not([hidden])", timeout=10_000)
        assert notice.inner_text() == "worker w1 speaks telemetry protocol v2; this dashboard speaks v1 — its data is not shown"
        assert page.inner_text("#q-queued .count") == "0"  # the v2 queue record was not interpreted
        assert page.is_hidden("#pipeline") and page.is_hidden("#components"), "no pipeline forever 'waiting'"
        save_screenshot(page, artifacts, "protocol-notice-controller.png")
        close_page(page)
    finally:
        v2.stop()


def test_records_of_an_unknown_kind_are_dropped_and_counted_and_the_known_ones_render(
        browser, dashboard, publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    pub.flush()
    page = open_controller_page(browser, dashboard)
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type in ("error", "warning") else None)
    page.wait_for_selector("#components .comp.informer >> text=pods", timeout=10_000)

    informer = worker_topic("w1", TopicKind.INFORMER, "pods")
    pub.publish(informer, {"k": "frobnicate", "ts": 1, "key": "default/x"})  # a newer publisher's kind
    obs.on_watch_event("pods", event_type="ADDED", key="default/web-1", resource_version="101")
    pub.publish(informer, {"k": "frobnicate", "ts": 2})
    pub.publish(worker_topic("w1", TopicKind.QUEUE, "podset"), {"k": "queue_v9", "op": "add", "key": "default/web-1"})
    obs.on_queue("podset", op="add", key="default/web-1", depth=1)
    pub.flush()

    page.wait_for_selector("#ievents tr.ev-" + RecordKind.WATCH + " >> text=default/web-1", timeout=10_000)
    page.wait_for_selector('#q-queued tr[data-key="default/web-1"]', timeout=10_000)
    stats = page.evaluate("(({unknown, unknownKinds}) => [unknown, [...unknownKinds]])(window.ctrlscope.client.stats)")
    assert stats == [3, [["frobnicate", 2], ["queue_v9", 1]]]
    page.wait_for_selector('#conn[data-unknown="3"]', timeout=5_000)
    assert "3 records of unknown kinds ignored (frobnicate ×2, queue_v9 ×1)" in page.get_attribute("#conn", "title")
    assert page.inner_text("#ievents").count("frobnicate") == 0
    assert console == []
    close_page(page)
