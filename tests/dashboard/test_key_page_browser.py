"""The key page (/c/<worker>/<controller>/k/<namespace>/<name>) in real headless Chromium, against
daphne and Redis: a retried key's whole story, read back from the retained streams and then live;
the same page on a replayed recording."""

from __future__ import annotations

import time

import pytest

from controllers.informers.store import Store
from controllers.schema import QueueOp, ReconcileResult
from controllers.telemetry.inspector import Inspector
from controllers.telemetry.recording import replay
from tests.dashboard.key_story_data import CONTROLLER, KEY, WORKER, announce, attempt, observer, podset, retried_key
from tests.telemetry.recording import recording

pytestmark = pytest.mark.browser

STORY = [
    # (what, parts of its detail): the rows of default/web's story, in order
    ("watch ADDED", "rv 101"), ("cache", "rv 101"), ("handler", "add → ok"),
    ("create event", "→ queued this key · via controller/podset (For)"), ("queued", "added"),
    ("taken", "a worker took it after 1 ms in the queue"), ("attempt 1 starts", "1 trigger: 1 create event"),
    ("write", "PUT /apis/demo.ctrlscope.dev/v1/namespaces/default/podsets/web/status → 200 · rv 103 · came back as an update event"),
    ("attempt 1 ends", "error in 4 ms · Conflict: the object has been modified"),
    ("backoff", "retry 1 in 5 ms · exponential: 5 ms × 2^0"), ("done", ""),
    ("watch MODIFIED", "rv 103"), ("cache", "rv 103"), ("handler", "update → ok"),
    ("update event", "rv 101 → 103 · changed status.readyReplicas · own write"), ("queued", "added"),
    ("dedup", "already queued"), ("taken", ""),
    ("attempt 2 starts", "2 triggers merged: 1 retry, 1 update event · 1 caused by its own writes"),
    ("attempt 2 ends", "success"), ("forget", ""), ("done", ""),
]


def story_rows(page) -> list[tuple[str, str]]:
    return page.eval_on_selector_all("#story tr.story-row", "trs => trs.map(tr => [tr.cells[2].innerText, tr.cells[3].innerText])")


def assert_story(rows: list[tuple[str, str]], expected=STORY) -> None:
    assert [what for what, _ in rows] == [what for what, _ in expected], "\n".join(" | ".join(r) for r in rows)
    for (what, detail), (_, parts) in zip(rows, expected, strict=True):
        for part in parts.split(" · "):
            assert part in detail, (what, detail, part)


def screenshots(page, artifacts, name: str, **kw) -> None:
    """``{name}-light.png`` and ``{name}-dark.png`` in artifacts/ (the theme toggle's setting), back to light."""
    for theme in ("light", "dark"):
        page.evaluate(f"document.documentElement.dataset.theme = '{theme}'")
        page.screenshot(path=str(artifacts / f"{name}-{theme}.png"), **kw)
    page.evaluate("document.documentElement.dataset.theme = 'light'")


def open_key_page(browser, dashboard, worker: str = WORKER):
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    # The browser's own line for an HTTP error (the inspector's 503 where no worker runs) is not a script's.
    page.on("console", lambda msg: page.js_errors.append(msg.text)
            if msg.type == "error" and not msg.text.startswith("Failed to load resource") else None)
    page.goto(f"{dashboard.url}/c/{worker}/{CONTROLLER}/k/{KEY}")
    page.wait_for_selector('#conn[data-state="live"]', timeout=10_000)
    return page


@pytest.fixture
def inspector(redis_url, prefix):
    """Worker w1's object inspector, answering from a real Store of informer podsets (its cache)."""
    store = Store("podsets")
    made = []

    def start(obs):
        made.append(Inspector(redis_url, prefix=prefix, worker=WORKER, last_updates=obs.last_updates,
                              stores=lambda: {"podsets": store}).start())
        return store

    yield start
    for i in made:
        i.stop()


def test_the_key_page_of_a_retried_key_tells_its_whole_story_and_goes_on_live(browser, dashboard, publisher_factory,
                                                                             inspector, artifacts):
    pub = publisher_factory()
    obs, clock = observer(pub, ago=5.0)
    store = inspector(obs)
    retried_key(obs, clock, flush=pub.flush)
    store.add(podset(103, 1))
    page = open_key_page(browser, dashboard)
    page.wait_for_function(f"() => document.querySelectorAll('#story tr.story-row').length >= {len(STORY)}", timeout=10_000)
    assert_story(story_rows(page))
    # The head says where the key is now, and how its last attempt went.
    assert "not in the queue" in page.inner_text("#key-now")
    assert "2 attempts since the worker started" in page.inner_text("#key-now")
    assert "cached at rv 103 by informer podsets" in page.inner_text("#key-now")
    # The second attempt's triggers, expanded: the retry, and the update its own write caused.
    second = page.locator("#story tr.story-row", has_text="attempt 2 starts")
    second.locator("details.triggers summary").click()
    triggers = second.locator("li.trigger").all_inner_texts()
    assert len(triggers) == 2 and "retry" in triggers[0] and "after error" in triggers[0]
    assert "update event" in triggers[1] and "rv 103" in triggers[1] and "status.readyReplicas" in triggers[1]
    assert "own write" in triggers[1] and "via controller/podset (For)" in triggers[1]
    # The object now, from the worker's cache, and the last update its handler received as a diff.
    page.wait_for_selector("#object .obj-yaml")
    assert "readyReplicas: 1" in page.inner_text("#object .obj-yaml")
    page.click("#object button.tab[data-tab=diff]")
    assert "  readyReplicas: 0" in page.eval_on_selector_all("#object .obj-diff .dl.del", "ds => ds.map(d => d.innerText).join(\"\\n\")")
    # The versions its informer's stream carried, and which one its own write made.
    versions = page.eval_on_selector_all("#versions tr", "trs => trs.map(tr => tr.innerText)")
    assert len(versions) == 2 and "first seen" in versions[0]
    assert "status.readyReplicas" in versions[1] and "own write" in versions[1]
    screenshots(page, artifacts, "31-key-page", full_page=True)

    # Live: a third attempt, published after the page loaded, is appended to the story.
    clock.step(0.5)
    obs.on_queue(CONTROLLER, op=QueueOp.ADD, key=KEY, depth=1)
    attempt(obs, clock, KEY, triggers=[], result=ReconcileResult.REQUEUE)
    pub.flush()
    page.wait_for_selector("#story tr.story-row:has-text('attempt 3 ends')", timeout=10_000)
    assert "requeue" in page.inner_text("#story tr.story-row:has-text('attempt 3 ends')")
    assert "no trigger recorded" in page.inner_text("#story tr.story-row:has-text('attempt 3 starts')")
    page.wait_for_function("() => document.querySelector('#key-now').innerText.includes('3 attempts')", timeout=10_000)
    assert page.js_errors == [], page.js_errors
    page.close()


def test_a_replayed_recording_shows_the_same_key_page(browser, dashboard, publisher_factory, redis_url, prefix, tmp_path, artifacts):
    pub = publisher_factory()
    obs, clock = observer(pub, ago=5.0)
    # The worker runs before the recording starts, as a recorded worker usually does: the recording
    # opens with its topics' snapshots, and every frame after them carries its state changes (the
    # object's versions). A topic born during a recording starts with a reset frame, whose state is
    # recorded as a snapshot, not as versions.
    announce(obs)
    pub.flush()
    path = tmp_path / "session.gz"
    with recording(redis_url, prefix, path):

        def batch() -> None:  # frames as far apart as a live worker's batches: the replay keeps them apart
            pub.flush()
            time.sleep(0.1)

        # The replay's first frame of a topic is a reset (its state goes to the snapshot, not the frame):
        # the recorded frames begin a batch later, as they would in a recording of a running worker.
        time.sleep(0.1)
        retried_key(obs, clock, flush=batch, announced=True)

    # At 1x, as `manage.py replay` does by default, with the player's own flush thread. (Faster,
    # recorded frames closer than the player's flush interval are published as one, and a key's
    # versions in between are lost: a frame carries a key's last state only.)
    player = publisher_factory().start()
    replay(path, player, speed=1.0)
    page = open_key_page(browser, dashboard, worker=f"{WORKER}@replay")
    page.wait_for_function(f"() => document.querySelectorAll('#story tr.story-row').length >= {len(STORY)}", timeout=10_000)
    assert_story(story_rows(page))
    assert "status.readyReplicas" in page.inner_text("#versions")
    # No worker runs a replay: its object is not to be had, and the page says why.
    page.wait_for_selector("#object .obj-error")
    assert "is not running" in page.inner_text("#object .obj-error")
    screenshots(page, artifacts, "31-key-page-replay", full_page=True)
    assert page.js_errors == [], page.js_errors
    page.close()
