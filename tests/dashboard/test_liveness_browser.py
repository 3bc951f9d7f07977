"""The one liveness rule (protocol/redis-layout.md, "Liveness") on the pages, in real headless Chromium
against daphne + Redis, for a publisher that is not ctrlscope's: it writes Redis itself, as the spec
says (a reset frame through the stream and snapshot keys, a presence entry it refreshes).

Two such workers sent their last frame 60 s ago (the stream entries and the frames' ``ts`` say so:
nothing is slept). ``idle`` keeps refreshing its presence entry and stays live on the overview and
on its controller page, and ``/presence.json`` agrees; ``quiet`` stops refreshing its entry and turns
stopped everywhere 10 s (ALIVE_MS) after its last ``seen``, not before, and within a second after.
The frame-age rule alone (what the overview applied before) called both stale at once."""

from __future__ import annotations

import threading
import time
import uuid

import orjson
import pytest
import redis

from controllers.schema import ALIVE_MS, PROTOCOL_VERSION, ComponentKind, TopicKind, worker_topic
from controllers.telemetry.streams import Keys
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser

FRAME_AGE_MS = 60_000


def now_ms() -> float:
    return time.time() * 1000


class OutsideWorker:
    """A worker whose publisher is the test: one reset frame on its components topic, sent
    FRAME_AGE_MS ago (a stream entry with that id, the frame's ts, the snapshot hash as of it), and a
    presence entry whose ``seen`` the test refreshes every second until ``silence()``."""

    def __init__(self, client: redis.Redis, keys: Keys, name: str) -> None:
        self.client, self.keys, self.name = client, keys, name
        self.src = f"outside-{name}-{uuid.uuid4().hex[:6]}"
        self.started = now_ms() - 2 * FRAME_AGE_MS
        self.topic = worker_topic(name, TopicKind.COMPONENTS)
        self.refreshing = True
        self.last_seen = 0.0
        self.last_frame = 0

    def publish_last_frame(self) -> None:
        sent = self.last_frame = int(now_ms() - FRAME_AGE_MS)
        state = {f"{ComponentKind.WORKER}/{self.name}": {"kind": ComponentKind.WORKER, "name": self.name,
                                                         "runtime": "node", "protocol": PROTOCOL_VERSION,
                                                         "publisher": self.src},
                 f"{ComponentKind.CONTROLLER}/podset": {"kind": ComponentKind.CONTROLLER, "name": "podset",
                                                        "watches": [], "workers": 1, "started": True}}
        frame = {"reset": True, "r": [], "v": PROTOCOL_VERSION, "ts": sent, "src": self.src, "seq": 1}
        entry_id = f"{sent}-0"
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(self.keys.stream(self.topic), {"f": orjson.dumps(frame)}, id=entry_id)
        pipe.hset(self.keys.snapshot(self.topic), mapping={**{k: orjson.dumps(v) for k, v in state.items()},
                                                           "__id__": entry_id})
        pipe.sadd(self.keys.topics, self.topic)
        pipe.hset(self.keys.pubseq(self.topic), self.src, 1)
        pipe.execute()

    def refresh(self) -> None:
        if not self.refreshing:
            return
        self.last_seen = now_ms()
        self.client.hset(self.keys.publishers, self.src, orjson.dumps({
            "role": "worker", "name": self.name, "host": "outside", "pid": 4242, "started": self.started,
            "seen": self.last_seen, "stopped": None, "topics": [self.topic], "retention": 3600,
            "v": PROTOCOL_VERSION}))

    def silence(self) -> float:
        """Stop refreshing (the process hangs or is killed); returns the last ``seen``."""
        self.refreshing = False
        return self.last_seen


def liveness_on(page, worker: str) -> str:
    return page.get_attribute(f'.worker[data-worker="{worker}"]', "data-liveness") or ""


def test_an_idle_worker_with_fresh_presence_stays_live_and_one_whose_presence_stops_turns_stopped(
        browser, users, redis_url, prefix, artifacts):
    dashboard = users
    client = redis.Redis.from_url(redis_url)
    keys = Keys(prefix)
    client.set(keys.epoch, uuid.uuid4().hex, nx=True)
    idle, quiet = OutsideWorker(client, keys, "idle"), OutsideWorker(client, keys, "quiet")
    for w in (idle, quiet):
        w.publish_last_frame()
        w.refresh()
    stop = threading.Event()

    def refresher() -> None:
        while not stop.wait(1.0):
            for w in (idle, quiet):
                w.refresh()

    thread = threading.Thread(target=refresher, daemon=True)
    thread.start()
    overview = browser.new_page()
    overview.js_errors = []
    overview.on("pageerror", lambda err: overview.js_errors.append(str(err)))
    try:
        overview.goto(dashboard.url + "/accounts/login/?next=/")
        overview.fill("input[name=username]", "viewer")
        overview.fill("input[name=password]", "s3cret-pass-viewer")
        overview.click("form [type=submit]")
        overview.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        for name in ("idle", "quiet"):
            overview.wait_for_selector(f'.worker[data-worker="{name}"][data-liveness="live"] .ctl-card[data-controller="podset"]',
                                       timeout=15_000)
        head = overview.inner_text('.worker[data-worker="idle"] .worker-head')
        assert "live" in head and "last seen 1m" in head, head
        assert "running" in overview.inner_text('.worker[data-worker="idle"] .ctl-card')
        controller = overview.context.new_page()
        controller.js_errors = []
        controller.on("pageerror", lambda err: controller.js_errors.append(str(err)))
        controller.goto(dashboard.url + "/c/quiet/podset/")
        controller.wait_for_selector('#h-liveness[data-liveness="live"]', timeout=15_000)
        idle_page = overview.context.new_page()
        idle_page.js_errors = []
        idle_page.on("pageerror", lambda err: idle_page.js_errors.append(str(err)))
        idle_page.goto(dashboard.url + "/c/idle/podset/")
        idle_page.wait_for_selector('#h-liveness[data-liveness="live"]', timeout=15_000)

        last_seen = quiet.silence()
        # Stopped by the rule at last_seen + ALIVE_MS; the overview redraws every second, the
        # controller page ten times a second.
        controller.wait_for_selector('#h-liveness[data-liveness="stopped"]', timeout=ALIVE_MS + 5_000)
        on_controller = now_ms() - last_seen
        overview.wait_for_selector('.worker[data-worker="quiet"][data-liveness="stopped"]', timeout=5_000)
        on_overview = now_ms() - last_seen
        assert ALIVE_MS - 500 <= on_controller <= ALIVE_MS + 1_500, on_controller
        assert ALIVE_MS - 500 <= on_overview <= ALIVE_MS + 2_000, on_overview
        assert "worker quiet is not running: not heard from since" in controller.inner_text("#run-notice")
        assert "not heard from since" in overview.inner_text('.worker[data-worker="quiet"] .worker-head')

        # The idle one, 70 s and more past its last frame, is live everywhere.
        assert now_ms() - idle.last_frame >= FRAME_AGE_MS + ALIVE_MS - 1_000
        assert liveness_on(overview, "idle") == "live"
        assert overview.get_attribute('.worker[data-worker="idle"]', "data-stale") == "false"
        assert idle_page.get_attribute("#h-liveness", "data-liveness") == "live"
        assert not idle_page.is_visible("#run-notice")
        overview.screenshot(path=str(artifacts / "liveness-idle-live-quiet-stopped.png"), full_page=True)
        body = overview.evaluate("() => fetch('/presence.json').then((r) => r.json())")
        assert body["workers"]["idle"]["liveness"] == "live" and body["workers"]["quiet"]["liveness"] == "stopped"
        assert body["now"] - body["workers"]["idle"]["last_frame"] >= FRAME_AGE_MS
        for page in (controller, idle_page):
            close_page(page)
        close_page(overview)
    finally:
        stop.set()
        thread.join(5)
        client.close()
