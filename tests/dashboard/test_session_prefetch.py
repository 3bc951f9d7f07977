"""A session with many topics to sync reads their snapshots in one round, and loses nothing for it.

``ClientSession._prefetch`` reads the snapshot and epoch of every due subscription in one pipeline
(issue 33: a page with 200 topics on a busy hub took tens of seconds to have them live, two round trips
per topic, one topic after another). A snapshot read that way is older than one read at its sync; the
catch-up after it must still send every frame after its id exactly once, and a resync asked between
the read and the sync must get a snapshot of its own, announced. Real parts: a Redis, a publisher, the
hub and a session on one event loop; the reader's methods are wrapped only to count them.
"""

from __future__ import annotations

import asyncio
import uuid

import orjson
import redis

from controllers.schema import ResyncReason
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.streams import Keys, parse_id
from dashboard.hub import StreamHub
from dashboard.session import ClientSession
from tests.conftest import delete_prefix, run_async
from tests.dashboard.test_session_replay import _unannounced_snapshots, _until

TOPICS = [f"w/prefetch/t{i:02d}" for i in range(40)]


class _Page:
    """A session whose page acks everything, and what it was sent."""

    def __init__(self, hub: StreamHub) -> None:
        self.sent: list[dict] = []
        self.session = ClientSession(hub, self._send, window=8)

    async def _send(self, text: str) -> None:
        msg = orjson.loads(text)
        self.sent.append(msg)
        if "seq" in msg:
            asyncio.get_running_loop().call_soon(
                lambda: asyncio.ensure_future(self.session.handle(orjson.dumps({"op": "ack", "seq": msg["seq"]}).decode())))

    def live(self) -> bool:
        return all(topic in self.session.subs and self.session.subs[topic].live for topic in TOPICS)


def _counting(hub: StreamHub) -> dict[str, list]:
    """Wrap the reader's snapshot reads to record which topics each call read."""
    calls: dict[str, list] = {"snapshot": [], "snapshots": []}
    one, many = hub.reader.snapshot, hub.reader.snapshots

    async def snapshot(topic: str):  # type: ignore[no-untyped-def]
        calls["snapshot"].append(topic)
        return await one(topic)

    async def snapshots(topics: list[str]):  # type: ignore[no-untyped-def]
        calls["snapshots"].append(list(topics))
        return await many(topics)

    hub.reader.snapshot = snapshot  # type: ignore[method-assign]
    hub.reader.snapshots = snapshots  # type: ignore[method-assign]
    return calls


def _check_every_frame_once(redis_url: str, prefix: str, sent: list[dict]) -> None:
    """Per topic: after each snapshot, every entry the stream has after its id, once and in order."""
    client = redis.Redis.from_url(redis_url)
    keys = Keys(prefix)
    for topic in TOPICS:
        stream = [eid.decode() for eid, _ in client.xrange(keys.stream(topic))]
        snaps = [i for i, m in enumerate(sent) if m.get("t") == "snapshot" and m["topic"] == topic and not m["more"]]
        assert snaps, f"{topic}: no snapshot"
        last = sent[snaps[-1]]
        got = [eid for m in sent[snaps[-1]:] if m.get("t") == "frames" for eid, _ in m["topics"].get(topic, [])]
        want = [eid for eid in stream if parse_id(eid) > parse_id(last["id"])]
        assert got == want, f"{topic}: after snapshot {last['id']} sent {len(got)} frames, the stream has {len(want)}"
    client.close()


async def _many_topics(redis_url: str, prefix: str, resync_one_meanwhile: bool) -> tuple[list[dict], dict]:
    pub = RedisPublisher(redis_url, prefix=prefix, flush_interval=0.01).start()
    hub = StreamHub(redis_url, prefix)
    page = _Page(hub)
    calls = _counting(hub)
    stop = asyncio.Event()

    async def publishing() -> None:
        # Frames on every topic all along: each prefetched snapshot is behind its stream by the
        # time its sync runs, and the catch-up must send what came after it.
        n = 0
        while not stop.is_set():
            topic = TOPICS[n % len(TOPICS)]
            pub.set_state(topic, f"k{n % 5}", {"n": n})
            pub.publish(topic, {"i": n})
            n += 1
            if n % 20 == 0:
                await asyncio.to_thread(pub.flush)

    try:
        for topic in TOPICS:
            pub.set_state(topic, "k0", {"n": -1})
            pub.publish(topic, {"i": -1})
        await asyncio.to_thread(pub.flush)
        writer = asyncio.create_task(publishing())
        await page.session.start()
        for topic in TOPICS:
            await page.session.handle(orjson.dumps({"op": "sub", "topic": topic}).decode())
        await _until(page.live, "every topic live", timeout=30)
        if resync_one_meanwhile:
            many = hub.reader.snapshots

            async def then_asked_again(topics: list[str]):  # type: ignore[no-untyped-def]
                got = await many(topics)
                # Read, not yet used: the hub asks again for the first topic (a reset frame).
                page.session.force_resync(TOPICS[0], ResyncReason.WORKER_RESET)
                return got

            hub.reader.snapshots = then_asked_again  # type: ignore[method-assign]
            calls["snapshot"].clear()
            for topic in TOPICS:
                page.session.force_resync(topic, ResyncReason.REDIS_RECONNECTED)
            await _until(page.live, "every topic live again", timeout=30)
        stop.set()
        await writer
        await asyncio.to_thread(pub.flush)
        await asyncio.sleep(0.3)  # the tail delivers the last frames
        await _until(lambda: not any(s.pending for s in page.session.subs.values()), "the last frames sent")
        return page.sent, calls
    finally:
        stop.set()
        await page.session.close()
        await hub.close()
        pub.stop()


def _run_many_topics(redis_url: str, resync_one_meanwhile: bool) -> tuple[list[dict], dict]:
    """_many_topics under a fresh prefix, every frame checked against the streams, the prefix deleted."""
    prefix = f"ctrlscope-test-prefetch-{uuid.uuid4().hex[:8]}:"
    try:
        sent, calls = run_async(asyncio.wait_for(_many_topics(redis_url, prefix, resync_one_meanwhile), 90))
        _check_every_frame_once(redis_url, prefix, sent)
    finally:
        delete_prefix(redis_url, prefix)
    return sent, calls


def test_a_page_with_many_topics_gets_their_snapshots_in_few_rounds_and_every_frame_after(redis_url: str) -> None:
    sent, calls = _run_many_topics(redis_url, False)
    batched = sum(len(topics) for topics in calls["snapshots"])
    assert batched + len(calls["snapshot"]) >= len(TOPICS)
    # The first subscription's sync may start before the page's other subscriptions arrive; the
    # rest wait for it and are read together.
    assert len(calls["snapshot"]) <= 3, f"{len(calls['snapshot'])} of {len(TOPICS)} topics read one by one"
    assert len(calls["snapshots"]) <= 5, f"{len(calls['snapshots'])} rounds for {len(TOPICS)} topics"
    assert [m for m in sent if m.get("t") == "resync"] == [], "a first sync announces no resync"


def test_a_resync_asked_after_the_batched_read_gets_a_snapshot_of_its_own(redis_url: str) -> None:
    sent, calls = _run_many_topics(redis_url, True)
    # The Redis-reconnected resync of every topic was read in one round; the first topic's later
    # reason was read on its own, and announced as that reason.
    assert calls["snapshot"] == [TOPICS[0]], calls["snapshot"]
    reasons = {t: [m["reason"] for m in sent if m.get("t") == "resync" and m["topic"] == t] for t in TOPICS}
    assert reasons[TOPICS[0]] == [ResyncReason.WORKER_RESET]
    assert all(reasons[t] == [ResyncReason.REDIS_RECONNECTED] for t in TOPICS[1:]), reasons
    assert _unannounced_snapshots([m for m in sent if m.get("topic", TOPICS[0]) == TOPICS[0]]) == []
