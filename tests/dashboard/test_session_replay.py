"""A resync's replay never resends a frame the session has already sent.

When Redis comes back (``StreamHub._redis_back``) or a Redis Cluster's down topics come back on a
promoted replica (``StreamHub._check_down``), the hub reads each subscriber's position and the replay
point after it (the first entry the new server has after that position), awaiting Redis for every
topic, and only then calls ``force_resync(..., replay_from=point)``. While it awaits, the session's
own sender goes on sending the frames the tail had delivered before the outage (they wait in its
pending buffer while the page's window is full), so by the time of the resync the point may lie at or
before the session's cursor. A cluster master-kill test saw one frame delivered twice that way
(issue 33). Real parts: a Redis, a publisher, the hub and a session on one event loop.
"""

from __future__ import annotations

import asyncio
import uuid

import orjson

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


async def _scenario(redis_url: str, prefix: str) -> list[dict]:
    pub = RedisPublisher(redis_url, prefix=prefix, flush_interval=0.01).start()
    hub = StreamHub(redis_url, prefix)
    sent: list[dict] = []
    acking = [True]

    async def send(text: str) -> None:
        sent.append(orjson.loads(text))

    session = ClientSession(hub, send, window=2)

    async def ack() -> None:
        while True:
            if acking[0] and session._acked_seq < session._sent_seq:
                await session.handle(orjson.dumps({"op": "ack", "seq": session._sent_seq}).decode())
            await asyncio.sleep(0.002)

    acker = asyncio.create_task(ack())
    try:
        for i in range(3):
            pub.set_state(TOPIC, f"k{i}", {"n": i})
            pub.publish(TOPIC, {"i": i})
        await asyncio.to_thread(pub.flush)
        await session.start()
        await session.handle(orjson.dumps({"op": "sub", "topic": TOPIC}).decode())
        await _until(lambda: session.subs[TOPIC].live, "the first sync")
        # The page stops acking: what the tail delivers now waits in the session (window 2).
        acking[0] = False
        for i in range(3, 23):
            pub.publish(TOPIC, {"i": i})
            await asyncio.to_thread(pub.flush)
        await _until(lambda: session.subs[TOPIC].pending or len(_frames(sent)) >= 2, "the tail delivering")
        # The hub's side of a comeback (StreamHub._check_down, _redis_back): the subscriber's
        # position, then, awaiting Redis, the replay point after it.
        point = await hub.reader.replay_point(TOPIC, session.position(TOPIC))
        assert point is not None, "frames after the position are in the stream"
        # Meanwhile the page acks again and the session sends what it held.
        acking[0] = True
        await _until(lambda: _records(sent)[-1:] == [22], "the held frames sent")
        session.force_resync(TOPIC, ResyncReason.REDIS_RECONNECTED, replay_from=point)
        await _until(lambda: session.subs[TOPIC].live and sent[-1].get("t") == "snapshot", "the resync's snapshot")
        pub.publish(TOPIC, {"i": 23})
        await asyncio.to_thread(pub.flush)
        await _until(lambda: _records(sent)[-1:] == [23], "the frame after the resync")
        return sent
    finally:
        acker.cancel()
        await session.close()
        await hub.close()
        pub.stop()


def test_a_replay_point_the_session_has_since_passed_resends_nothing(redis_url: str) -> None:
    prefix = f"ctrlscope-test-replay-{uuid.uuid4().hex[:8]}:"
    try:
        sent = run_async(asyncio.wait_for(_scenario(redis_url, prefix), 60))
    finally:
        delete_prefix(redis_url, prefix)
    ids = [eid for eid, _ in _frames(sent)]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    assert [m["reason"] for m in sent if m.get("t") == "resync"] == [ResyncReason.REDIS_RECONNECTED]
    assert not twice, f"{len(twice)} frame(s) sent twice, e.g. {twice[:3]}"
    assert _records(sent) == list(range(3, 24)), "every record after the first snapshot, once, in order"
