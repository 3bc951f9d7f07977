"""Every vector in protocol/vectors/ through the Python implementation (see tests/protocol/vectors.py)."""

from __future__ import annotations

import orjson
import pytest

from controllers.schema import rate_limiter_delay, rate_limiter_step, topic_part, worker_liveness
from controllers.telemetry.topic_state import TopicState
from tests.protocol import vectors

ENCODE = vectors.load("encode")
QUEUE = vectors.load("queue")
DERIVE = vectors.load("derive")
LIVENESS = vectors.load("liveness")
NAMES = vectors.load("names")
BACKOFF = vectors.load("backoff")


def test_there_are_vectors_of_every_family():
    assert len(ENCODE) >= 5 and len(QUEUE) >= 4 and len(DERIVE) >= 5 and len(LIVENESS) >= 4


@pytest.mark.parametrize(("path", "vector"), ENCODE, ids=[p.stem for p, _ in ENCODE])
def test_encode_vector(path, vector, redis_url, prefix):
    frames, snapshots, stages = vectors.run_encode(vector, redis_url, prefix)
    for raw in (f for fs in frames.values() for f in fs):
        vectors.check_frame_bytes(raw)
    assert {t: [orjson.loads(f) for f in fs] for t, fs in frames.items()} == vector["frames"]
    assert snapshots == vector["snapshots"]
    if "stages" in vector:
        assert stages == vector["stages"]


@pytest.mark.parametrize(("path", "vector"), QUEUE, ids=[p.stem for p, _ in QUEUE])
def test_queue_vector(path, vector):
    assert vectors.run_queue(vector) == vector["after"]


@pytest.mark.parametrize(("path", "vector"), DERIVE, ids=[p.stem for p, _ in DERIVE])
def test_derive_vector(path, vector):
    topic = TopicState()
    topic.snapshot(vector["snapshot"]["id"], vector["snapshot"]["state"])
    handed_on = []
    for entry_id, frame in vector["entries"]:
        records = topic.apply(entry_id, frame)
        if records:
            handed_on.append([entry_id, records])
    if "later_snapshot" in vector:
        topic.snapshot(vector["later_snapshot"]["id"], vector["later_snapshot"]["state"])
    expect = vector["expect"]
    assert topic.state == expect["state"]
    assert topic.cursor == expect["cursor"]
    assert handed_on == expect["records"]
    assert (topic.duplicates, topic.dropped, topic.unknown_records) == (
        expect["duplicates"], expect["dropped"], expect["unknown_records"])
    assert (topic.unsupported, topic.unsupported_seen, topic.needs_snapshot) == (
        expect["unsupported"], expect["unsupported_seen"], expect["needs_snapshot"])


@pytest.mark.parametrize(("path", "vector"), LIVENESS, ids=[p.stem for p, _ in LIVENESS])
def test_liveness_vector(path, vector):
    got = {worker: str(worker_liveness(vector["publishers"], worker, now_ms=vector["now"],
                                       last_frame_ms=case["last_frame"]))
           for worker, case in vector["workers"].items()}
    assert got == {worker: case["expect"] for worker, case in vector["workers"].items()}


@pytest.mark.parametrize(("path", "vector"), NAMES, ids=[p.stem for p, _ in NAMES])
def test_names_vector(path, vector):
    assert [[name, topic_part(name)] for name, _ in vector["cases"]] == vector["cases"]


@pytest.mark.parametrize(("path", "vector"), BACKOFF, ids=[p.stem for p, _ in BACKOFF])
def test_backoff_vector(path, vector):
    spec = vector["rate_limiter"]
    got = [[n, delay, (rate_limiter_step(spec, n, delay) or {}).get("type"), rate_limiter_delay(spec, n + 1)]
           for n, delay, _, _ in vector["cases"]]
    assert got == vector["cases"]
