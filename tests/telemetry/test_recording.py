"""Record a live session from Redis and replay it, with no cluster, under renamed topics."""

from __future__ import annotations

import gzip
import time

import orjson
import pytest
import redis

from controllers.telemetry.recording import RecordingError, read_recording, replay, replay_topic
from controllers.telemetry.streams import Keys, StreamReader
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.telemetry.recording import recording


class SleepingClock:
    """Moves only when ``replay`` sleeps: the replay's timing is read, not raced against a loaded machine."""

    def __init__(self) -> None:
        self.t = 100.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def wall(self) -> float:
        return 1_700_000_000.0 + self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def drive(obs: TelemetryObserver, n: int) -> None:
    for i in range(n):
        key = f"default/k{i % 3}"
        obs.on_queue("podset", op="add", key=key, depth=1)
        obs.on_queue("podset", op="get", key=key, depth=0)
        obs.on_reconcile_end("podset", key=key, worker=0, duration=0.01, result="error" if i % 4 == 0 else "success",
                             error="boom" if i % 4 == 0 else None)
        obs.on_queue("podset", op="done", key=key, depth=0)
        obs.publisher.flush()
        time.sleep(0.01)


def test_a_recorded_session_replays_the_same_records_and_state(publisher_factory, redis_url, prefix, tmp_path):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    drive(obs, 3)  # state exists before recording begins: it must come from the snapshots
    path = tmp_path / "session.ctrlscope.gz"
    with recording(redis_url, prefix, path):
        drive(obs, 20)
    header, items = read_recording(path)
    frames = [i for i in items if "topic" in i]
    length = (max(i["ts"] for i in items) - header["started"]) / 1000
    assert {i["snapshot"] for i in items if "snapshot" in i} >= {"w/w1/controller/podset", "w/w1/queue/podset"}
    recorded = [r for f in frames if f["topic"] == "w/w1/controller/podset" for r in f["r"]]
    assert len(recorded) == 20

    player = publisher_factory()
    clock = SleepingClock()
    assert replay(path, player, speed=4.0, clock=clock) == len(frames)
    # 4x: the replay waits a quarter of the recording's length in all, spread between its items.
    assert sum(clock.slept) == pytest.approx(length / 4, abs=1e-6), clock.slept
    assert len(clock.slept) >= len(frames) // 2
    player.flush()
    topic = replay_topic("w/w1/controller/podset")
    assert topic == "w/w1@replay/controller/podset"
    assert player.state(topic) == {k: {**v, "at": player.state(topic)[k]["at"]} for k, v in pub.state("w/w1/controller/podset").items()}


# mtime=0: the gzip header's timestamp would otherwise be part of each test id, and xdist workers that
# collect in different seconds refuse to run ("Different tests were collected").
@pytest.mark.parametrize(("content", "message"), [
    (b"not gzip at all", "not a gzip'd recording"),
    (gzip.compress(b'{"format": "something-else", "version": 1}\n', mtime=0), "not a ctrlscope-recording"),
    (gzip.compress(b'{"format": "ctrlscope-recording", "version": 1, "started": 1}\n{oops\n', mtime=0), ":2: bad JSON"),
    (gzip.compress(b'{"format": "ctrlscope-recording", "version": 1, "started": 1}\n[1,2]\n', mtime=0), "neither"),
    (gzip.compress(b'{"format": "ctrlscope-recording", "version": 1, "started": 1}\n{"topic": "t", "r": []}\n', mtime=0),
     "neither"),
])
def test_bad_recordings_are_refused_with_the_place(content, message, tmp_path):
    path = tmp_path / "bad.gz"
    path.write_bytes(content)
    with pytest.raises(RecordingError, match=message):
        read_recording(path)


def test_a_replay_at_speed_keeps_the_order_of_records_across_frames(publisher_factory, redis_url, prefix, tmp_path):
    """Two frames of two topics, 20 ms apart, whose records are 2 ms apart (a record waits up to a
    flush interval for its frame): replayed at 4x, the first record still comes first (the key page
    merges topics by time). Moving each record by its frame's offset put the second 13 ms before it."""
    started = 1_800_000_000_000.0
    lines = [{"format": "ctrlscope-recording", "version": 1, "started": started},
             {"topic": "w/w1/queue/podset", "ts": started + 20, "r": [{"k": "queue", "op": "add", "key": "default/a", "depth": 1,
                                                                     "ts": started + 19}], "s": {}},
             {"topic": "w/w1/controller/podset", "ts": started + 40, "r": [{"k": "reconcile_start", "key": "default/a", "worker": 0,
                                                                          "ts": started + 21}], "s": {}}]
    path = tmp_path / "two-frames.gz"
    path.write_bytes(gzip.compress(b"".join(orjson.dumps(line) + b"\n" for line in lines), mtime=0))
    player = publisher_factory()
    assert replay(path, player, speed=4.0, clock=SleepingClock()) == 2  # 10 ms of waiting
    player.flush()
    reader = StreamReader(redis.Redis.from_url(redis_url), Keys(prefix))
    ts = [orjson.loads(raw)["r"][0]["ts"] for topic in ("w/w1@replay/queue/podset", "w/w1@replay/controller/podset")
          for _, raw in reader.read_range(topic, "-", "+") if not raw.startswith(b'{"reset"') or b'"r":[{' in raw]
    assert len(ts) == 2 and ts[0] < ts[1] and ts[1] - ts[0] == pytest.approx(0.5), ts
    reader.client.close()
