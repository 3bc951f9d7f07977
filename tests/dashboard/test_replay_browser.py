"""A recorded session replays into the same panels, with no cluster (browser test)."""

from __future__ import annotations

import time

import pytest

from controllers.telemetry.recording import replay
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_panels_browser import enqueue, seed_worker
from tests.telemetry.recording import recording

pytestmark = pytest.mark.browser


def test_a_recorded_session_replays_to_the_controller_page(browser, dashboard, publisher_factory, redis_url, prefix,
                                                           tmp_path, artifacts):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    seed_worker(obs)
    pub.flush()
    path = tmp_path / "session.gz"
    # The recorder runs until told to stop, and the first attempt is published only once it has
    # taken its snapshots. Timed instead (a 0.3 s head start, a 1.2 s recording) a loaded machine
    # could start it after the first attempt: that attempt was then only in the snapshots, without its
    # records, and the page drew one attempt (issue 14, the flaky test).
    with recording(redis_url, prefix, path):  # stopped at the end: it still records what Redis then has
        enqueue(obs, "default/web", rv="101")
        obs.on_queue("podset", op="get", key="default/web", depth=0)
        obs.on_reconcile_start("podset", key="default/web", worker=0)
        obs.on_reconcile_end("podset", key="default/web", worker=0, duration=0.02, result="error", error="replayed boom")
        obs.on_queue("podset", op="add_rate_limited", key="default/web", depth=0, delay=0.005, requeues=1)
        obs.on_queue("podset", op="done", key="default/web", depth=0)
        pub.flush()
        time.sleep(0.2)  # the attempts 0.2 s apart in the recording, 50 ms at 4x
        obs.on_queue("podset", op="add", key="default/web", depth=1)
        obs.on_queue("podset", op="get", key="default/web", depth=0)
        obs.on_reconcile_end("podset", key="default/web", worker=0, duration=0.01, result="success")
        obs.on_queue("podset", op="forget", key="default/web", depth=0, requeues=0)
        obs.on_queue("podset", op="done", key="default/web", depth=0)
        pub.flush()

    player = publisher_factory()
    page = browser.new_page()
    page.goto(dashboard.url + "/c/w1@replay/podset/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    replay(path, player, speed=4.0)
    player.flush()
    lane = '#lanes .lane[data-key="default/web"]'
    # At 4x the two attempts are 50 ms apart, too close to tell apart at the timeline's scale: one
    # mark, red for its error, that says what it holds; its details list both, with the error's text.
    mark = f'{lane} .attempt.mark[data-count="2"]'
    page.wait_for_selector(mark, timeout=10_000)
    assert page.inner_text(f"{mark} .mark-label").startswith("error → success in ")
    assert page.get_attribute(mark, "data-result") == "error"
    page.click(mark)
    page.wait_for_selector("#details .mark-table")
    assert page.eval_on_selector_all("#details tr.mark-attempt", "trs => trs.map(tr => tr.dataset.result)") == ["error", "success"]
    assert "replayed boom" in page.inner_text("#details")
    page.screenshot(path=str(artifacts / "controller-page-replay.png"), full_page=True)
    page.close()
