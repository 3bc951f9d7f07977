"""RedisPublisher against a real Redis: frames, snapshots, idempotent retries, resets, overflow."""

from __future__ import annotations

import time

import orjson
import pytest
import redis

from controllers.telemetry.streams import NO_RECORDS_PREFIX, SNAPSHOT_ID_FIELD, Keys, parse_id


def read_stream(url: str, prefix: str, topic: str) -> list[tuple[bytes, dict]]:
    r = redis.Redis.from_url(url)
    try:
        return [(eid, orjson.loads(f[b"f"])) for eid, f in r.xrange(Keys(prefix).stream(topic))]
    finally:
        r.close()


def read_snapshot(url: str, prefix: str, topic: str) -> tuple[bytes, dict]:
    r = redis.Redis.from_url(url)
    try:
        raw = r.hgetall(Keys(prefix).snapshot(topic))
    finally:
        r.close()
    snap_id = raw.pop(SNAPSHOT_ID_FIELD.encode(), b"0-0")  # no hash: the empty state as of 0-0
    return snap_id, {k.decode(): orjson.loads(v) for k, v in raw.items()}


def fold(state: dict, frames: list[dict]) -> dict:
    state = dict(state)
    for frame in frames:
        for k, v in frame.get("s", {}).items():
            if v is None:
                state.pop(k, None)
            else:
                state[k] = v
    return state


def test_records_arrive_in_order_and_snapshot_is_stamped_with_last_frame(publisher_factory, redis_url, prefix):
    pub = publisher_factory(max_frame_items=100)
    for i in range(1000):
        pub.publish("t", {"seq": i})
        pub.set_state("t", f"k{i % 37}", {"v": i})
    while pub.flush():
        pass
    entries = read_stream(redis_url, prefix, "t")
    seqs = [r["seq"] for _, f in entries for r in f["r"]]
    assert seqs == list(range(1000))
    snap_id, state = read_snapshot(redis_url, prefix, "t")
    assert snap_id == entries[-1][0]
    assert state == pub.state("t")


def test_snapshot_plus_later_frames_reproduce_current_state(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    for i in range(300):
        pub.set_state("t", f"k{i % 50}", {"v": i})
    pub.flush()
    snap_id, snap_state = read_snapshot(redis_url, prefix, "t")
    for i in range(300, 700):
        pub.set_state("t", f"k{i % 60}", None if i % 7 == 0 else {"v": i})
        if i % 50 == 0:
            pub.flush()
    pub.flush()
    later = [f for eid, f in read_stream(redis_url, prefix, "t") if parse_id(eid) > parse_id(snap_id)]
    assert fold(snap_state, later) == pub.state("t")


def test_frame_retried_after_lost_reply_is_written_once(publisher_factory, redis_url, prefix, monkeypatch):
    pub = publisher_factory()
    pub.publish("t", {"seq": 1})
    pub.flush()
    pub.publish("t", {"seq": 2})
    real_pipeline = pub._redis.pipeline

    class LostReply:
        def __init__(self) -> None:
            self.pipe = real_pipeline(transaction=False)

        def __getattr__(self, name):
            return getattr(self.pipe, name)

        def execute(self):
            self.pipe.execute()  # Redis applied the frame...
            raise redis.ConnectionError("connection reset while reading the reply")  # ...the reply is lost

    monkeypatch.setattr(pub._redis, "pipeline", lambda transaction=False: LostReply())
    with pytest.raises(redis.ConnectionError):
        pub.flush()
    monkeypatch.setattr(pub._redis, "pipeline", real_pipeline)
    pub.publish("t", {"seq": 3})
    pub.flush()  # retries the in-flight frame unchanged (skipped by seq), then sends seq 3
    pub.flush()
    seqs = [r["seq"] for _, f in read_stream(redis_url, prefix, "t") for r in f["r"]]
    assert seqs == [1, 2, 3]


def test_lost_redis_data_is_rewritten_as_a_reset_frame(publisher_factory, redis_url, prefix):
    from tests.conftest import delete_prefix

    pub = publisher_factory()
    for i in range(20):
        pub.set_state("t", f"k{i}", {"v": i})
    pub.publish("t", {"seq": 1})
    pub.flush()
    delete_prefix(redis_url, prefix)  # what a Redis restart without persistence looks like
    pub.set_state("t", "k0", {"v": "new"})
    pub.publish("t", {"seq": 2})
    pub.flush()
    entries = read_stream(redis_url, prefix, "t")
    assert len(entries) == 1
    raw = redis.Redis.from_url(redis_url).xrange(Keys(prefix).stream("t"))[0][1][b"f"]
    assert raw.startswith(b'{"reset":true'), "the dashboard recognises resets by this prefix"
    assert [r["seq"] for r in entries[0][1]["r"]] == [2]
    _, state = read_snapshot(redis_url, prefix, "t")
    assert state == pub.state("t") and state["k0"] == {"v": "new"} and len(state) == 20


def test_full_buffer_drops_oldest_records_and_reports_the_count(publisher_factory, redis_url, prefix):
    pub = publisher_factory(buffer_limit=10)
    for i in range(25):
        pub.publish("t", {"seq": i})
    pub.flush()
    (_, frame), = read_stream(redis_url, prefix, "t")
    assert [r["seq"] for r in frame["r"]] == list(range(15, 25))
    assert frame["dropped"] == 15
    assert pub.records_dropped == 15


def test_publisher_thread_flushes_within_the_interval(publisher_factory, redis_url, prefix):
    pub = publisher_factory(flush_interval=0.05).start()
    t0 = time.monotonic()
    pub.publish("t", {"seq": 1})
    while not read_stream(redis_url, prefix, "t"):
        assert time.monotonic() - t0 < 2, "frame not published"
        time.sleep(0.005)
    assert time.monotonic() - t0 < 0.5


def test_unreachable_redis_buffers_without_blocking_the_producer(publisher_factory):
    from controllers.telemetry.redisboot import free_port

    pub = publisher_factory(url=f"redis://127.0.0.1:{free_port()}/0", buffer_limit=100).start()
    t0 = time.monotonic()
    for i in range(1000):
        pub.publish("t", {"seq": i})
    assert time.monotonic() - t0 < 0.5
    time.sleep(0.3)
    assert not pub.connected and pub.redis_errors >= 1
    assert pub.records_dropped == 900


def test_drops_are_reported_even_for_a_topic_that_publishes_nothing_more(publisher_factory, redis_url, prefix):
    pub = publisher_factory(buffer_limit=5)
    for i in range(3):
        pub.publish("quiet", {"seq": i})
    for i in range(5):
        pub.publish("busy", {"seq": i})  # pushes the three "quiet" records out of the full buffer
    pub.flush()
    pub.flush()
    frames = [f for _, f in read_stream(redis_url, prefix, "quiet")]
    assert sum(f.get("dropped", 0) for f in frames) == 3


def test_a_relist_of_a_big_cache_goes_out_as_bounded_frames(publisher_factory, redis_url, prefix):
    from controllers.telemetry.publisher import STATE_KEYS_PER_FRAME

    pub = publisher_factory()
    pub.publish("t", {"seq": 0})
    pub.flush()
    for i in range(5 * STATE_KEYS_PER_FRAME + 10):
        pub.set_state("t", f"default/pod-{i:06d}", {"rv": str(i), "phase": "Running"})
    pub.publish("t", {"seq": 1})
    pub.flush()
    entries = read_stream(redis_url, prefix, "t")[1:]
    assert len(entries) == 6 and all(len(f["s"]) <= STATE_KEYS_PER_FRAME for _, f in entries)
    assert [r["seq"] for _, f in entries for r in f["r"]] == [1]
    snap_id, state = read_snapshot(redis_url, prefix, "t")
    assert snap_id == entries[-1][0] and state == pub.state("t")


def test_a_frame_without_records_is_recognisable_by_its_raw_prefix(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    pub.publish("t", {"seq": 0})
    pub.flush()
    pub.set_state("t", "default/a", {"rv": "1"})
    pub.flush()
    r = redis.Redis.from_url(redis_url)
    try:
        raw = [fields[b"f"] for _, fields in r.xrange(Keys(prefix).stream("t"))]
    finally:
        r.close()
    assert [frame.startswith(NO_RECORDS_PREFIX) for frame in raw] == [False, True]


def test_a_topic_can_keep_fewer_frames_than_the_publisher(publisher_factory, redis_url, prefix):
    pub = publisher_factory(maxlen=10_000)
    pub.retain("metrics", 50)
    for i in range(600):
        pub.publish("metrics", {"seq": i})
        pub.publish("events", {"seq": i})
        pub.flush()
    kept = read_stream(redis_url, prefix, "metrics")
    # MAXLEN ~ trims whole stream nodes (100 entries): about 50 are kept, never fewer, the newest ones.
    assert 50 <= len(kept) <= 150 and kept[-1][1]["r"] == [{"seq": 599}]
    assert len(read_stream(redis_url, prefix, "events")) == 600
    assert pub.state_len("metrics") == 0
    with pytest.raises(ValueError):
        pub.retain("metrics", 0)


def test_a_stream_of_big_frames_is_bounded_by_bytes_but_keeps_the_dashboards_history(publisher_factory, redis_url,
                                                                                      prefix):
    from controllers.telemetry.publisher import MIN_STREAM_LEN

    pub = publisher_factory(maxlen=10_000, stream_bytes=1024 * 1024)
    for i in range(2_500):
        pub.publish("medium", {"seq": i, "pad": "m" * 380})  # ~420 B frames: the budget holds ~2,500
        pub.publish("big", {"seq": i, "pad": "b" * 4000})  # ~4 KB frames: the budget alone would keep 256
        pub.publish("small", {"seq": i})
        pub.flush()
    medium, big = read_stream(redis_url, prefix, "medium"), read_stream(redis_url, prefix, "big")
    # The publisher divides by its moving average of the frames' sizes, which differ by a few bytes
    # (the digits of ts and seq): the length is the budget over ~one frame's size, give or take 2 %.
    per_frame = len(orjson.dumps(medium[-1][1]))
    budget_len = 1024 * 1024 // per_frame
    assert budget_len < 2_500
    assert 0.98 * budget_len <= len(medium) <= 1.02 * budget_len + 100 and medium[-1][1]["r"][0]["seq"] == 2_499
    assert MIN_STREAM_LEN <= len(big) <= MIN_STREAM_LEN + 100 and big[-1][1]["r"][0]["seq"] == 2_499
    assert len(read_stream(redis_url, prefix, "small")) == 2_500


@pytest.mark.parametrize(("raw", "expected"), [("", 32 * 1024 ** 2), ("64M", 64 * 1024 ** 2), ("1g", 1024 ** 3),
                                               ("2097152", 2 * 1024 ** 2), ("1.5M", int(1.5 * 1024 ** 2))])
def test_the_stream_byte_budget_comes_from_the_environment(monkeypatch, raw, expected):
    from controllers.telemetry.publisher import stream_bytes_from_env

    monkeypatch.setenv("CTRLSCOPE_STREAM_BYTES", raw)
    assert stream_bytes_from_env() == expected


@pytest.mark.parametrize("raw", ["lots", "12", "0.5M", "-3G", "M"])
def test_a_bad_stream_byte_budget_is_a_clear_error(monkeypatch, raw):
    from controllers.telemetry.publisher import stream_bytes_from_env

    monkeypatch.setenv("CTRLSCOPE_STREAM_BYTES", raw)
    with pytest.raises(ValueError, match="CTRLSCOPE_STREAM_BYTES"):
        stream_bytes_from_env()
