"""snapshot.json streamed (dashboard/snapshot_body.py) against a real Redis and a real daphne: the
parts join to the body the view used to build whole, and a snapshot read while a publisher writes
frames is exactly the state its ``__id__`` names (what the page resumes the stream from)."""

from __future__ import annotations

import http.client
import threading
import time

import orjson
import redis

from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.streams import NO_RECORDS_PREFIX, Keys, StreamReader
from dashboard import snapshot_body

TOPIC = "w/w1/informer/pods"
URL = "/c/w1/informer/pods/snapshot.json"


def whole_body(reader: StreamReader, topic: str, history: int) -> bytes:
    """The view's body before it was streamed (its code until 2026-12-06), the reference."""
    epoch = reader.epoch()
    snap_id, state = reader.snapshot(topic)
    rows: list[bytes] = []
    if history:
        size = 0
        for eid, frame in reversed(reader.read_before(topic, snap_id, history)):
            if frame.startswith(NO_RECORDS_PREFIX):
                continue
            size += len(frame)
            if size > snapshot_body.HISTORY_BYTES:
                break
            rows.append(b'["' + eid + b'",' + frame + b"]")
        rows.reverse()
    return b"".join((
        b'{"topic":', orjson.dumps(topic), b',"id":"', snap_id, b'","epoch":', orjson.dumps(epoch),
        b',"size":', str(len(state)).encode(),
        b',"state":{', b",".join(orjson.dumps(k.decode()) + b":" + state[k] for k in sorted(state)),
        b'},"history":[', b",".join(rows), b"]}"))


def streamed(reader: StreamReader, topic: str, history: int, per_part: int, form: str = "object") -> bytes:
    snap = snapshot_body.read(reader, topic, reader.epoch(), history)
    return b"".join(snapshot_body.parts(snap, per_part, form))


def as_object(columns: bytes) -> dict:
    """The columns form read back into the object form's shape (its key order kept)."""
    body = orjson.loads(columns)
    assert len(body["keys"]) == len(body["values"]) == body["size"]
    state = dict(zip(body.pop("keys"), body.pop("values"), strict=True))
    return {**body, "state": state}


def same_body(columns: bytes, whole: bytes) -> None:
    got, want = as_object(columns), orjson.loads(whole)
    assert got == want and list(got["state"]) == list(want["state"])  # the same pairs, in the same order


def redis_reader(url: str, prefix: str) -> StreamReader:
    return StreamReader(redis.Redis.from_url(url), Keys(prefix))


def get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_streamed_parts_join_to_the_whole_body(redis_url, prefix, publisher_factory):
    pub = publisher_factory()
    reader = StreamReader(redis.Redis.from_url(redis_url), Keys(prefix))
    assert streamed(reader, TOPIC, 10, 3) == whole_body(reader, TOPIC, 10)  # no hash: empty state at 0-0
    # Keys that need JSON escaping (a quote, a backslash, a control character) and non-ASCII ones,
    # beside plain namespace/name keys, in several frames with records among them (the history).
    odd = ['a"quote', "back\\slash", "tab\there", "ns/ä-😀", "z/last"]
    for i in range(50):
        pub.set_state(TOPIC, f"default/pod-{i:04d}", {"rv": str(1000 + i), "phase": "Running"})
        if i % 10 == 0:
            pub.publish(TOPIC, {"k": "watch", "key": f"default/pod-{i:04d}"})
            pub.flush()
    pub.flush()
    plain = whole_body(reader, TOPIC, 10)
    for per_part in (1, 7, 50, 8192):
        assert streamed(reader, TOPIC, 10, per_part) == plain
        assert streamed(reader, TOPIC, 0, per_part) == whole_body(reader, TOPIC, 0)
        same_body(streamed(reader, TOPIC, 10, per_part, "columns"), plain)
    for k in odd:
        pub.set_state(TOPIC, k, {"rv": "1"})
    pub.flush()
    escaped = whole_body(reader, TOPIC, 10)
    assert list(orjson.loads(escaped)["state"])[:2] == ["a\"quote", "back\\slash"]
    for per_part in (1, 4, 8192):
        assert streamed(reader, TOPIC, 10, per_part) == escaped
        same_body(streamed(reader, TOPIC, 10, per_part, "columns"), escaped)
    same_body(streamed(redis_reader(redis_url, "nothing:"), TOPIC, 0, 3, "columns"), b'{"topic":"w/w1/informer/pods",'
              b'"id":"0-0","epoch":"","size":0,"state":{},"history":[]}')


def test_a_key_that_is_not_utf8_is_shown_not_a_failure(redis_url, prefix, publisher_factory):
    pub = publisher_factory()
    pub.set_state(TOPIC, "default/a", {"rv": "1"})
    pub.flush()
    client = redis.Redis.from_url(redis_url)
    client.hset(Keys(prefix).snapshot(TOPIC), b"bad/\xff", b'{"rv":"2"}')  # not from a publisher of ours
    reader = StreamReader(client, Keys(prefix))
    body = orjson.loads(streamed(reader, TOPIC, 0, 8192))
    assert body["state"] == {"bad/\ufffd": {"rv": "2"}, "default/a": {"rv": "1"}}


def test_the_view_streams_the_same_body(dashboard, redis_url, prefix, publisher_factory):
    pub = publisher_factory()
    for i in range(20_000):
        pub.set_state(TOPIC, f"default/pod-{i:06d}", {"rv": str(1000 + i), "uid": f"uid-{i:06d}", "phase": "Running"})
    pub.publish(TOPIC, {"k": "watch", "key": "default/pod-000001"})
    pub.flush()
    reader = StreamReader(redis.Redis.from_url(redis_url), Keys(prefix))
    status, headers, body = get(dashboard.port, URL + "?history=500")
    assert status == 200 and headers["content-type"] == "application/json" and headers["cache-control"] == "no-store"
    # Streamed: the length is not known when the answer begins.
    assert "content-length" not in headers and headers.get("transfer-encoding") == "chunked"
    assert body == whole_body(reader, TOPIC, 500)
    assert orjson.loads(body)["size"] == 20_000
    status, headers, columns = get(dashboard.port, URL + "?history=500&form=columns")
    assert status == 200 and "content-length" not in headers
    same_body(columns, body)
    status, _, error = get(dashboard.port, URL + "?form=table")
    assert status == 400 and orjson.loads(error) == {"error": "?form= must be one of object, columns"}


def test_a_snapshot_read_under_concurrent_writes_is_exact_as_of_its_id(dashboard, redis_url, prefix):
    """A publisher rewrites a different 600 of 2,000 keys in every frame while the page's request
    runs again and again: each body's state must be what replaying the stream up to its ``id`` gives
    (a hash read in chunks, e.g. HSCAN, would mix frames and fail this), and its history must end at
    that id, so the page resumes from there without a gap or a repeat."""
    pub = RedisPublisher(redis_url, prefix=prefix)
    # The publisher's first frame is a reset frame: it rewrites the hash from the publisher's state
    # and carries no "s" (protocol/redis-layout.md, Frames), so the replay starts from that state.
    for i in range(2000):
        pub.set_state(TOPIC, f"default/pod-{i:04d}", {"g": 0})
    pub.flush()
    at_reset = pub.state(TOPIC)
    stop = threading.Event()
    frames = [0]

    def write() -> None:
        gen = 0
        while not stop.is_set():
            gen += 1
            for i in range(600):
                pub.set_state(TOPIC, f"default/pod-{(gen * 611 + i) % 2000:04d}", {"g": gen})
            if gen % 3 == 0:
                pub.set_state(TOPIC, f"default/pod-{gen % 2000:04d}", None)  # deletes too
            pub.publish(TOPIC, {"k": "watch", "g": gen})
            pub.flush()
            frames[0] = gen

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    client = redis.Redis.from_url(redis_url)
    stream = Keys(prefix).stream(TOPIC)
    checked = 0
    try:
        deadline = time.monotonic() + 60
        while checked < 8 and time.monotonic() < deadline:
            if frames[0] < 2:
                time.sleep(0.01)
                continue
            status, _, body = get(dashboard.port, URL + "?history=5")
            assert status == 200
            snap = orjson.loads(body)
            assert snap["history"][-1][0] == snap["id"]  # the frames up to and including its id
            replayed: dict[str, object] = {}
            for _, fields in client.xrange(stream, min="-", max=snap["id"]):
                frame = orjson.loads(fields[b"f"])
                if frame.get("reset"):
                    replayed = dict(at_reset)
                for k, v in frame.get("s", {}).items():
                    if v is None:
                        replayed.pop(k, None)
                    else:
                        replayed[k] = v
            assert snap["state"] == replayed, f"snapshot {snap['id']} is not the state as of its id"
            assert snap["size"] == len(replayed)
            checked += 1
    finally:
        stop.set()
        writer.join(10)
        pub.stop()
    assert checked == 8, f"only {checked} snapshots read in 60 s"
    # Nothing was trimmed off the front: the first entry is still the publisher's reset frame (Redis
    # 6.2, which the no-Redis pass runs on, has no XINFO "entries-added" to compare with the length).
    (_, first), = client.xrange(stream, count=1)
    assert first[b"f"].startswith(b'{"reset":true'), "the replay needs every frame since the first"
    assert sum(1 for _, f in client.xrange(stream) if f[b"f"].startswith(b'{"reset":true')) == 1
    assert frames[0] > 8, "the writer kept writing while the snapshots were read"
