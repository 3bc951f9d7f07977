"""How ``bench/soak.py`` holds Redis to its goal: RSS growth after warm-up, less what the streams
still filling their byte budget gained (``_trimmed``: a stream the publisher never trimmed holds
every frame written to it; its growth is bounded data, not a leak). A trimmed stream's growth, and
anything else Redis gains, still counts."""

from __future__ import annotations

import orjson
import redis

from bench import soak
from bench.procmeter import Measured
from controllers.telemetry.streams import Keys

MiB = 2**20


def _redis_result(warm_mib: float, end_mib: float, filling_mib: float) -> tuple[soak.SoakResult, Measured]:
    samples = [(0.0, 10 * MiB), (600.0, int(warm_mib * MiB)), (4200.0, int(end_mib * MiB))]
    m = Measured("redis", 1, samples=samples, anon=samples)
    r = soak.SoakResult(minutes=60, rate=300, warmup_s=600, elapsed_s=4200, processes=[m], tabs=[], writes_ok=1,
                        writes_failed=0, worker_records=0, worker_frames=0, worker_dropped=0,
                        redis_used_mib=(1.0, 2.0, 2.0), started="", machine="", stream_budget=4 * MiB,
                        filling_mib=filling_mib, filling=["podset-scoreboard 1.00 → 2.00"] if filling_mib else [])
    return r, m


def test_redis_is_held_to_the_goal_without_what_its_filling_streams_gained():
    r, m = _redis_result(28, 30, 1.0)  # +7.1 % RSS, of which 1 MiB a stream never trimmed gained
    assert round(r.growth(m), 1) == 7.1 and round(r.goal_growth(m), 1) == 3.6
    assert r.failures() == []
    text = soak.table(r)
    assert "| +7.1 % |" in text and "PASS" in text.split("| redis |")[1].split("\n")[0]
    assert "Redis held to the goal: +3.6 % = its RSS growth less 1.00 MiB" in text and "podset-scoreboard 1.00 → 2.00" in text


def test_growth_beyond_the_filling_streams_still_fails_the_goal():
    r, m = _redis_result(28, 32, 1.0)  # 4 MiB more, only 1 of it in streams still filling
    assert round(r.goal_growth(m), 1) == 10.7
    assert r.failures() == ["redis RSS grew 14.3 % after warm-up (+10.7 % less its filling streams' data) (goal < 5 %)"]
    r, m = _redis_result(28, 30, 0.0)  # no stream still filling: the RSS growth is the goal's
    assert r.goal_growth(m) == r.growth(m) and r.failures()[0].startswith("redis RSS grew 7.1 % after warm-up (goal")


def test_a_stream_counts_as_trimmed_once_it_holds_fewer_frames_than_were_written(redis_url, prefix):
    client = redis.Redis.from_url(redis_url)
    stream = Keys(prefix).stream("w/soak/queue/podset")
    assert soak._written(client, stream) == (0, 0) and not soak._trimmed(client, stream)
    for seq in range(1, 6):
        client.xadd(stream, {"f": orjson.dumps({"seq": seq, "r": []})})
    assert soak._written(client, stream) == (5, 5) and not soak._trimmed(client, stream), "every frame still there: filling"
    client.xtrim(stream, maxlen=3, approximate=False)
    assert soak._written(client, stream) == (3, 5) and soak._trimmed(client, stream)
    client.xadd(stream, {"f": b"not json"})  # a frame without a seq: its length is all it says
    assert soak._written(client, stream) == (4, 4)
    client.close()
