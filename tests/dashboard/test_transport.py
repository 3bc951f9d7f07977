"""Worker → Redis → daphne → websocket, end to end: order, resume, retention, slow clients, bad input."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import psutil
import pytest
import redis
import websockets

from dashboard.wsclient import TelemetryWsClient
from tests.conftest import run_async


def seqs(client: TelemetryWsClient, topic: str) -> list[int]:
    return [r["seq"] for r in client.topics[topic].records]


def publish_batch(pub, topic: str, start: int, n: int, per_frame: int = 10) -> int:
    """Publish ``n`` records (seq start..start+n-1) with state, flushing every ``per_frame``."""
    for i in range(start, start + n):
        pub.publish(topic, {"seq": i})
        pub.set_state(topic, f"k{i % 40}", None if i % 9 == 0 else {"seq": i})
        if (i + 1) % per_frame == 0:
            pub.flush()
    pub.flush()
    return start + n


def client_for(dashboard, **kw) -> TelemetryWsClient:
    return TelemetryWsClient(dashboard.ws_url, origin=dashboard.url, **kw)


async def publish_past_a_stalled_client(dashboard, topic: str, publish, total: int, chunk: int) -> None:
    """Publish records ``seq`` 0..total-1 (``publish(start, n)``) and return once the server's hub has
    handed every one to each session of ``topic``, a stalled one too. Seen through a second, acking
    client of the topic on the same server: the one hub delivers each read to every session at once,
    so once it has the last record, so has the stalled session's buffer (nothing else shows from
    outside how far the hub read). Published ``chunk`` at a time, each waited for, so that the
    watcher's own buffer stays under the bound (it acks, but on a loaded machine the hub can read
    faster than its session sends, and it was resynced too)."""
    watcher = await client_for(dashboard).connect()
    await watcher.subscribe(topic)
    await watcher.wait_for(lambda: watcher.topics[topic].snapshots == 1, what="the watcher's snapshot")

    def has(seq: int) -> bool:
        records = watcher.topics[topic].records
        return bool(records) and records[-1]["seq"] == seq

    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        await asyncio.to_thread(publish, start, n)
        await watcher.wait_for(lambda last=start + n - 1: has(last), what="the hub to read every record", timeout=60)
    assert not watcher.resyncs, watcher.resyncs
    await watcher.close()


def test_all_frames_reach_the_client_in_order(dashboard, publisher_factory):
    pub = publisher_factory()
    pub.set_state("t", "seed", {"v": 0})
    pub.flush()

    async def main():
        c = await client_for(dashboard).connect()
        await c.subscribe("t")
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="snapshot")
        await asyncio.to_thread(publish_batch, pub, "t", 0, 3000)
        await c.wait_for(lambda: len(c.topics["t"].records) >= 3000, what="3000 records")
        await c.close()
        return c

    c = run_async(main())
    assert seqs(c, "t") == list(range(3000))
    assert c.duplicates == 0 and c.resyncs == []
    assert c.topics["t"].state == pub.state("t")


def test_reconnect_resumes_with_zero_loss_and_zero_duplicates(dashboard, publisher_factory):
    pub = publisher_factory()
    pub.publish("t", {"seq": -1})
    pub.flush()

    async def main():
        c = await client_for(dashboard).connect()
        await c.subscribe("t")
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="snapshot")
        pub_task = asyncio.create_task(asyncio.to_thread(publish_batch, pub, "t", 0, 2000, 5))
        await c.wait_for(lambda: len(c.topics["t"].records) >= 300, what="first records")
        await c.drop()  # killed mid-stream, no close handshake
        await asyncio.sleep(0.2)
        await c.connect()  # resubscribes with since=cursor, epoch
        await pub_task
        await c.wait_for(lambda: len(c.topics["t"].records) >= 2000, what="all records after resume")
        await c.close()
        return c

    c = run_async(main())
    assert seqs(c, "t") == list(range(2000))
    assert c.duplicates == 0
    assert c.resyncs == [] and c.topics["t"].snapshots == 1, "a resume inside retention needs no snapshot"
    assert c.topics["t"].state == pub.state("t")


def test_resume_beyond_retention_resyncs_to_a_consistent_state(dashboard, publisher_factory):
    # Retention of ~300 frames (+ up to one 100-entry node: trimming is approximate): the 1,500-frame
    # gap below exceeds it, while the 100-frame tail after the resync cannot trim the snapshot's frame.
    pub = publisher_factory(maxlen=300)

    async def main():
        c = await client_for(dashboard).connect()
        await asyncio.to_thread(publish_batch, pub, "t", 0, 20, 1)
        await c.subscribe("t")
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="snapshot")
        await c.drop()
        await asyncio.to_thread(publish_batch, pub, "t", 20, 1500, 1)
        await c.connect()
        await c.wait_for(lambda: c.topics["t"].snapshots == 2, what="fresh snapshot after resync")
        await asyncio.to_thread(publish_batch, pub, "t", 1520, 100, 1)
        await c.wait_for(lambda: c.topics["t"].records and c.topics["t"].records[-1]["seq"] == 1619, what="tail")
        await c.close()
        return c

    c = run_async(main())
    assert c.resyncs == [("t", "retention")]
    assert c.topics["t"].state == pub.state("t")
    assert c.duplicates == 0


def test_a_client_that_stops_acking_is_resynced_instead_of_buffered(dashboard_factory, publisher_factory):
    dashboard = dashboard_factory()
    pub = publisher_factory()
    pub.publish("t", {"seq": -1})
    pub.flush()
    total = 12_000

    async def main():
        c = await client_for(dashboard, auto_ack=False).connect()
        await c.subscribe("t")
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="snapshot")
        # One frame per record. The stalled session's sender took whatever was buffered when it began
        # sending (at most the 5,000-entry bound, or the buffer would have overflowed already) and
        # blocks in it at the window of 16 unacked messages; the 7,000 or more entries behind that
        # overflow the buffer whatever the split.
        await publish_past_a_stalled_client(dashboard, "t", lambda start, n: publish_batch(pub, "t", start, n, 1),
                                            total, 2000)
        await c.wait_for(lambda: c._pending_ack == 16, what="a full window of unacked messages", timeout=60)
        assert c._pending_ack == 16, "the server must stop sending at the window"
        c.auto_ack = True
        await c.send({"op": "ack", "seq": c._pending_ack})
        c._pending_ack = None
        # At least one resync: the buffer may also have overflowed before the window filled (the sender
        # busy with a big batch while the hub read on), and then again while the window was full.
        await c.wait_for(lambda: c.topics["t"].snapshots >= 2, what="resync snapshot", timeout=60)
        await asyncio.to_thread(publish_batch, pub, "t", total, 10, 1)
        await c.wait_for(lambda: c.topics["t"].records[-1]["seq"] == total + 9, what="live again", timeout=30)
        await c.close()
        return c

    c = run_async(main())
    assert ("t", "slow-client") in c.resyncs
    assert c.topics["t"].state == pub.state("t")
    assert c.duplicates == 0


def test_a_slow_client_of_big_frames_is_resynced_at_the_byte_bound(dashboard_factory, publisher_factory):
    from dashboard.session import MAX_PENDING_BYTES

    dashboard = dashboard_factory()
    pub = publisher_factory()
    pub.publish("t", {"seq": -1})
    pub.flush()
    pad = "x" * 40_000
    # Whatever the split between what the stalled session's sender holds (one batch in flight and one
    # taken, each at most the byte bound: a bigger buffer would have overflowed already) and what waits
    # behind it, three times the bound overflows it: ~690 frames, far under the 5,000-frame bound.
    frames = 3 * MAX_PENDING_BYTES // len(pad) + 60

    def publish_big(start: int, n: int) -> None:
        for i in range(start, start + n):
            pub.publish("t", {"seq": i, "pad": pad})
            pub.flush()

    async def main():
        c = await client_for(dashboard, auto_ack=False).connect()
        await c.subscribe("t")
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="snapshot")
        # Nothing acked by c: it all waits in its buffer (2 MB chunks for the watcher).
        await publish_past_a_stalled_client(dashboard, "t", publish_big, frames, 50)
        c.auto_ack = True
        await c.send({"op": "ack", "seq": c._pending_ack})
        c._pending_ack = None
        await c.wait_for(lambda: ("t", "slow-client") in c.resyncs, what="the slow-client resync", timeout=60)
        # At least one resync: the buffer may also have overflowed before the window filled (the sender
        # busy with a big batch while the hub read on), and then again while the window was full.
        await c.wait_for(lambda: c.topics["t"].snapshots >= 2, what="resync snapshot", timeout=60)
        await asyncio.to_thread(publish_big, frames, 3)
        await c.wait_for(lambda: any(r["seq"] == frames + 2 for r in c.topics["t"].records), what="live again",
                         timeout=30)
        await c.close()
        return c

    c = run_async(main())
    assert ("t", "slow-client") in c.resyncs
    assert c.duplicates == 0


def test_bad_messages_get_error_frames_and_other_clients_are_unaffected(dashboard, publisher_factory):
    pub = publisher_factory()
    pub.publish("t", {"seq": -1})
    pub.flush()

    async def main():
        good = await client_for(dashboard).connect()
        await good.subscribe("t")
        bad = await client_for(dashboard).connect()
        for msg in ["{not json", "[1,2]", '{"op":"launch"}', '{"op":"sub","topic":"no-such-topic"}',
                    '{"op":"sub","topic":"../../etc"}', '{"op":"sub","topic":"t","since":"yesterday"}',
                    '{"op":"ack","seq":999999}', b"\x00\x01binary"]:
            await bad.send(msg)
        await bad.wait_for(lambda: len(bad.errors) == 8, what="8 error frames")
        codes = [e["code"] for e in bad.errors]
        assert codes == ["bad_json", "bad_message", "unknown_op", "unknown_topic", "bad_topic",
                         "bad_since", "bad_ack", "binary"]
        await bad.send('{"op":"sub","topic":"t","pad":"' + "x" * 70_000 + '"}')
        await bad.wait_for(lambda: bad.close_code is not None, what="close after oversized message")
        assert bad.close_code == 4009
        await asyncio.to_thread(publish_batch, pub, "t", 0, 100)
        await good.wait_for(lambda: len(good.topics["t"].records) >= 100, what="good client still served")
        assert good.errors == []
        await good.close()

    run_async(main())


def test_a_wrong_origin_is_rejected(dashboard):
    async def main():
        with pytest.raises(websockets.InvalidStatus) as info:
            await websockets.connect(dashboard.ws_url, origin="http://evil.example")
        assert info.value.response.status_code == 403

    run_async(main())


def test_anonymous_is_rejected_when_auth_is_required(dashboard_factory, publisher_factory):
    dashboard = dashboard_factory(CTRLSCOPE_ALLOW_ANONYMOUS="0")

    async def main():
        ws = await websockets.connect(dashboard.ws_url, origin=dashboard.url)
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 5)
        assert ws.close_code == 4401

    run_async(main())

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    with pytest.raises(urllib.error.HTTPError) as info:
        opener.open(dashboard.url + "/")
    assert info.value.code == 302 and "/accounts/login/" in info.value.headers["Location"]


def test_an_idle_socket_outlives_redis_py_socket_timeouts(dashboard, publisher_factory):
    """redis-py 8 closes sockets idle for 5 s by default (channels_redis #422): after 7 s of silence
    the websocket and the hub's tail must still be alive and deliver at once."""
    pub = publisher_factory()
    pub.publish("t", {"seq": 0})
    pub.flush()

    async def main():
        c = await client_for(dashboard).connect()
        await c.subscribe("t")
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="snapshot")
        await asyncio.sleep(7)
        await asyncio.to_thread(publish_batch, pub, "t", 1, 10)
        await c.wait_for(lambda: len(c.topics["t"].records) >= 10, timeout=3, what="delivery after idling")
        assert c.close_code is None
        await c.close()

    run_async(main())


def test_a_new_subscriber_can_ask_for_recent_history_before_its_snapshot(dashboard, publisher_factory):
    pub = publisher_factory()
    publish_batch(pub, "t", 0, 200, 10)  # 20 frames of 10 records

    async def main():
        c = await client_for(dashboard).connect()
        await c.subscribe("t", history=5)
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="snapshot")
        await asyncio.to_thread(publish_batch, pub, "t", 200, 10)
        await c.wait_for(lambda: len(c.topics["t"].records) >= 60, what="history + live records")
        await c.close()
        return c

    c = run_async(main())
    assert seqs(c, "t") == list(range(150, 210)), "the last 5 frames, then everything live"
    assert c.topics["t"].state == pub.state("t") and c.duplicates == 0


def test_one_socket_multiplexes_topics_and_one_reader_serves_all_sockets(dashboard, publisher_factory, redis_url):
    pub = publisher_factory()
    for topic in ("a", "b", "c"):
        pub.publish(topic, {"seq": -1})
    pub.flush()

    async def main():
        clients = [await client_for(dashboard).connect() for _ in range(5)]
        for c in clients:
            for topic in ("a", "b", "c"):
                await c.subscribe(topic)
        for c in clients:
            await c.wait_for(lambda c=c: all(c.topics[t].snapshots == 1 for t in "abc"), what="snapshots")
        await asyncio.sleep(0.6)
        # Every connection of this daphne blocked in XREAD is a tail reader: one for 5 sockets x 3 topics.
        daphne_ports = {c.laddr.port for c in psutil.Process(dashboard.proc.pid).net_connections("tcp")}
        r = redis.Redis.from_url(redis_url)
        try:
            blocked = []
            for _ in range(10):
                blocked.append(len([c for c in r.client_list() if c.get("cmd") == "xread" and "b" in c.get("flags", "")
                                    and int(c["addr"].rsplit(":", 1)[1]) in daphne_ports]))
                await asyncio.sleep(0.05)
        finally:
            r.close()
        assert max(blocked) == 1, blocked

        def publish_interleaved():
            for i in range(300):
                pub.publish("abc"[i % 3], {"seq": i})
                if i % 7 == 0:
                    pub.flush()
            pub.flush()

        await asyncio.to_thread(publish_interleaved)
        for c in clients:
            await c.wait_for(lambda c=c: sum(len(c.topics[t].records) for t in "abc") >= 300, what="all topics")
            await c.close()
        return clients

    for c in run_async(main()):
        for k, topic in enumerate("abc"):
            assert seqs(c, topic) == list(range(k, 300, 3))
        assert c.duplicates == 0


def test_big_snapshots_and_frames_stay_under_the_websocket_message_limit(dashboard, publisher_factory):
    """daphne will not send a message over 1 MiB: a 30,000-key state (~3 MB) arrives in parts."""
    pub = publisher_factory()
    for i in range(30_000):
        pub.set_state("big", f"default/pod-{i:06d}", {"rv": str(i), "phase": "Running", "uid": "x" * 40})
    pub.flush()

    async def main():
        c = await client_for(dashboard).connect()
        await c.subscribe("big")
        await c.wait_for(lambda: c.topics["big"].snapshots == 1, timeout=20, what="the snapshot in parts")
        for i in range(30_000):  # a relist touching every key: many frames, split into messages
            pub.set_state("big", f"default/pod-{i:06d}", {"rv": str(i + 1), "phase": "Running", "uid": "y" * 40})
        await asyncio.to_thread(pub.flush)
        await c.wait_for(lambda: c.topics["big"].state == pub.state("big"), timeout=20, what="the relist")
        assert c.close_code is None
        await c.close()
        return c

    c = run_async(main())
    assert len(c.topics["big"].state) == 30_000 and c.resyncs == []
