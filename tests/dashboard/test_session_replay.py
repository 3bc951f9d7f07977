"""A session's resyncs: a replay never resends a frame the session has already sent, a resync asked
while another is under way is announced, and a catch-up Redis cuts off resumes where the page is.

When Redis comes back (``StreamHub._redis_back``) or a Redis Cluster's down topics come back on a
promoted replica (``StreamHub._check_down``), the hub reads each subscriber's position and the replay
point after it (the first entry the new server has after that position), awaiting Redis for every
topic, and only then calls ``force_resync(..., replay_from=point)``. While it awaits, the session's
own sender goes on sending the frames the tail had delivered before the outage (they wait in its
pending buffer while the page's window is full), so by the time of the resync the point may lie at or
before the session's cursor. A cluster master-kill test saw one frame delivered twice that way
(issue 33). Real parts: a Redis, a publisher, the hub and a session on one event loop; where Redis
must answer at a given moment or fail, the test wraps one reader method.
"""

from __future__ import annotations

import asyncio
import uuid

import orjson
import redis

from controllers.schema import ResyncReason
from controllers.telemetry.publisher import RedisPublisher
from dashboard.hub import StreamHub
from dashboard.session import ClientSession
from tests.conftest import delete_prefix, run_async

TOPIC = "w/replay/podsets"


async def _until(predicate, what: str, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def _frames(sent: list[dict]) -> list[tuple[str, dict]]:
    return [(eid, frame) for msg in sent if msg.get("t") == "frames" for eid, frame in msg["topics"].get(TOPIC, [])]


def _records(sent: list[dict]) -> list[int]:
    return [r["i"] for _, frame in _frames(sent) for r in frame.get("r", []) if "i" in r]


async def _session(redis_url: str, prefix: str, window: int = 2):  # type: ignore[no-untyped-def]
    """A publisher with three records on TOPIC, a hub, and a live session whose page acks while ``acking[0]``."""
    pub = RedisPublisher(redis_url, prefix=prefix, flush_interval=0.01).start()
    hub = StreamHub(redis_url, prefix)
    sent: list[dict] = []
    acking = [True]

    async def send(text: str) -> None:
        sent.append(orjson.loads(text))

    session = ClientSession(hub, send, window=window)

    async def ack() -> None:
        while True:
            if acking[0] and session._acked_seq < session._sent_seq:
                await session.handle(orjson.dumps({"op": "ack", "seq": session._sent_seq}).decode())
            await asyncio.sleep(0.002)

    acker = asyncio.create_task(ack())
    for i in range(3):
        pub.set_state(TOPIC, f"k{i}", {"n": i})
        pub.publish(TOPIC, {"i": i})
    await asyncio.to_thread(pub.flush)
    await session.start()
    await session.handle(orjson.dumps({"op": "sub", "topic": TOPIC}).decode())
    await _until(lambda: session.subs[TOPIC].live, "the first sync")
    return pub, hub, session, sent, acking, acker


async def _close(pub, hub, session, acker) -> None:  # type: ignore[no-untyped-def]
    acker.cancel()
    await session.close()
    await hub.close()
    pub.stop()


async def _scenario(redis_url: str, prefix: str) -> tuple[list[dict], int]:
    pub, hub, session, sent, acking, acker = await _session(redis_url, prefix)
    try:
        # The page stops acking: what the tail delivers now waits in the session (window 2).
        acking[0] = False

        def held() -> bool:
            # The window is full, so the sender waits and the cursor stays where its last batch put
            # it, and the tail has delivered frames after it: the stream has frames past the position.
            return session._sent_seq - session._acked_seq >= session.window and bool(session.subs[TOPIC].pending)

        # At least 20 frames, one per flush, and more until some are held: on a busy machine the tail
        # can deliver every frame before the sender runs once, which then sends them all in one batch.
        i = 3
        while i < 23 or not held():
            assert i < 200, "the session never held a frame back"
            pub.publish(TOPIC, {"i": i})
            await asyncio.to_thread(pub.flush)
            i += 1
            if i >= 23:
                await asyncio.sleep(0.05)  # the tail's delivery of this one
        last = i - 1
        # The hub's side of a comeback (StreamHub._check_down, _redis_back): the subscriber's
        # position, then, awaiting Redis, the replay point after it.
        point = await hub.reader.replay_point(TOPIC, session.position(TOPIC))
        assert point is not None, "frames after the position are in the stream"
        # Meanwhile the page acks again and the session sends what it held.
        acking[0] = True
        await _until(lambda: _records(sent)[-1:] == [last], "the held frames sent")
        session.force_resync(TOPIC, ResyncReason.REDIS_RECONNECTED, replay_from=point)
        await _until(lambda: session.subs[TOPIC].live and sent[-1].get("t") == "snapshot", "the resync's snapshot")
        pub.publish(TOPIC, {"i": last + 1})
        await asyncio.to_thread(pub.flush)
        await _until(lambda: _records(sent)[-1:] == [last + 1], "the frame after the resync")
        return sent, last + 1
    finally:
        await _close(pub, hub, session, acker)


def test_a_replay_point_the_session_has_since_passed_resends_nothing(redis_url: str) -> None:
    prefix = f"ctrlscope-test-replay-{uuid.uuid4().hex[:8]}:"
    try:
        sent, end = run_async(asyncio.wait_for(_scenario(redis_url, prefix), 60))
    finally:
        delete_prefix(redis_url, prefix)
    ids = [eid for eid, _ in _frames(sent)]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert [m["reason"] for m in sent if m.get("t") == "resync"] == [ResyncReason.REDIS_RECONNECTED]
    assert not twice, f"{len(twice)} frame(s) sent twice, e.g. {twice[:3]}"
    assert _records(sent) == list(range(3, end + 1)), "every record after the first snapshot, once, in order"


def _unannounced_snapshots(sent: list[dict]) -> list[str]:
    """Ids of snapshots after the first that no resync message announced since the one before."""
    out, seen, announced = [], False, False
    for msg in sent:
        if msg.get("t") == "resync":
            announced = True
        elif msg.get("t") == "snapshot" and not msg.get("more"):
            if seen and not announced:
                out.append(msg["id"])
            seen, announced = True, False
    return out


async def _resync_during_a_sync(redis_url: str, prefix: str) -> list[dict]:
    pub, hub, session, sent, acking, acker = await _session(redis_url, prefix)
    snapshot = hub.reader.snapshot
    calls = [0]

    async def asked_again_meanwhile(topic: str):  # type: ignore[no-untyped-def]
        # While the first resync's sync awaits its snapshot, the hub asks again (its tail found a
        # reset frame, or the master failed over again): the second reason is the next sync's.
        calls[0] += 1
        snap = await snapshot(topic)
        if calls[0] == 1:
            pub.publish(TOPIC, {"i": 3})
            await asyncio.to_thread(pub.flush)
            session.force_resync(TOPIC, ResyncReason.WORKER_RESET)
        return snap

    try:
        hub.reader.snapshot = asked_again_meanwhile  # type: ignore[method-assign]
        session.force_resync(TOPIC, ResyncReason.REDIS_RECONNECTED)
        await _until(lambda: calls[0] >= 2 and session.subs[TOPIC].live, "both syncs done")
        pub.publish(TOPIC, {"i": 4})
        await asyncio.to_thread(pub.flush)
        await _until(lambda: _records(sent)[-1:] == [4], "the frame after the resyncs")
        return sent
    finally:
        await _close(pub, hub, session, acker)


def test_a_resync_asked_while_another_is_under_way_is_announced(redis_url: str) -> None:
    """The cluster master-kill test's silent gaps (issue 32): a resync asked while the previous one's sync
    awaited Redis or the page had its reason cleared by that sync, so the next snapshot came
    unannounced and the frames before it were skipped without notice."""
    prefix = f"ctrlscope-test-replay-{uuid.uuid4().hex[:8]}:"
    try:
        sent = run_async(asyncio.wait_for(_resync_during_a_sync(redis_url, prefix), 60))
    finally:
        delete_prefix(redis_url, prefix)
    reasons = [m["reason"] for m in sent if m.get("t") == "resync"]
    assert reasons == [ResyncReason.REDIS_RECONNECTED, ResyncReason.WORKER_RESET], reasons
    assert _unannounced_snapshots(sent) == []
    ids = [eid for eid, _ in _frames(sent)]
    assert len(ids) == len(set(ids)), "no frame twice"


async def _catch_up_cut_off(redis_url: str, prefix: str) -> tuple[list[dict], int]:
    pub, hub, session, sent, acking, acker = await _session(redis_url, prefix, window=64)
    reads = [0]
    read_after_many = hub.reader.read_after_many

    async def failing_once(positions: dict[str, bytes], count: int = 1000):  # type: ignore[no-untyped-def]
        # Redis fails under the catch-up read after the resync's snapshot (a cluster node going away).
        reads[0] += 1
        if reads[0] == 1:
            raise redis.ConnectionError("connection reset by the test")
        return await read_after_many(positions, count)

    try:
        # Frames the page lacks after the snapshot the resync will take: published while the
        # session is cut off from the tail (not live: they come by the catch-up read).
        session.force_resync(TOPIC, ResyncReason.REDIS_RECONNECTED)
        hub.reader.read_after_many = failing_once  # type: ignore[method-assign]
        for i in range(3, 13):
            pub.publish(TOPIC, {"i": i})
            await asyncio.to_thread(pub.flush)
        await _until(lambda: reads[0] >= 2 and session.subs[TOPIC].live, "the catch-up retried", timeout=20)
        pub.publish(TOPIC, {"i": 13})
        await asyncio.to_thread(pub.flush)
        await _until(lambda: _records(sent)[-1:] == [13], "the frame after the retry")
        return sent, reads[0]
    finally:
        await _close(pub, hub, session, acker)


def test_a_catch_up_redis_cut_off_resumes_from_the_page_without_a_second_snapshot(redis_url: str) -> None:
    prefix = f"ctrlscope-test-replay-{uuid.uuid4().hex[:8]}:"
    try:
        sent, reads = run_async(asyncio.wait_for(_catch_up_cut_off(redis_url, prefix), 60))
    finally:
        delete_prefix(redis_url, prefix)
    assert reads >= 2
    assert _unannounced_snapshots(sent) == []
    records = _records(sent)
    assert len(records) == len(set(records)), "no record twice"
    resync_at = next(i for i, m in enumerate(sent) if m.get("t") == "resync")
    after = [r for m in sent[resync_at:] if m.get("t") == "frames" for _e, f in m["topics"].get(TOPIC, [])
             for r in f.get("r", [])]
    snap = [m for m in sent[resync_at:] if m.get("t") == "snapshot"]
    assert len(snap) == 1, "one snapshot for the one resync"
    assert [r["i"] for r in after] == list(range(min(r["i"] for r in after), 14)), "no frame skipped after it"
