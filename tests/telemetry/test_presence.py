"""Presence and retention against a real Redis: every run says who it is and what it publishes,
its keys carry a TTL it refreshes while alive, the sweep drops and logs what outlived the retention,
and an operator can forget a stopped worker (never a running one)."""

from __future__ import annotations

import time

import orjson
import pytest
import redis

from controllers.schema import ALIVE_MS, run_alive
from controllers.telemetry import presence
from controllers.telemetry.streams import Keys
from tests.telemetry.test_publisher import read_snapshot


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def test_a_run_announces_itself_and_says_when_it_stopped(publisher_factory, client, prefix):
    pub = publisher_factory(retention=120)
    pub.describe(role="worker", name="demo")
    pub.set_state("w/demo/components", "worker/demo", {"kind": "worker"})
    pub.flush()
    pub.refresh()
    [entry] = presence.read_publishers(client, Keys(prefix))
    assert entry["src"] == pub.name and entry["role"] == "worker" and entry["name"] == "demo"
    assert entry["topics"] == ["w/demo/components"] and entry["alive"] and entry["stopped"] is None
    assert entry["retention"] == 120
    pub.start()
    pub.stop()
    [entry] = presence.read_publishers(client, Keys(prefix))
    assert not entry["alive"] and entry["stopped"] >= entry["started"]
    silent = {**entry, "stopped": None, "seen": time.time() * 1000 - ALIVE_MS - 1}
    assert not run_alive(silent, time.time() * 1000), "a killed run stops being alive by itself"


def test_topic_keys_get_the_retention_as_ttl_and_a_lost_snapshot_is_rewritten(publisher_factory, client, prefix,
                                                                                redis_url):
    pub = publisher_factory(retention=120)
    topic = "w/demo/informer/pods"
    for i in range(3):
        pub.set_state(topic, f"ns/p{i}", {"rv": str(i)})
    pub.flush()
    pub.refresh()
    keys = Keys(prefix)
    for key in (keys.snapshot(topic), keys.stream(topic)):
        assert 110_000 < client.pttl(key) <= 120_000
    client.delete(keys.snapshot(topic))  # expired during an outage, or forgotten
    pub.refresh(force=True)
    pub.flush()
    _, state = read_snapshot(redis_url, prefix, topic)
    assert set(state) == {"ns/p0", "ns/p1", "ns/p2"}, "rewritten whole by a reset frame"
    pub.refresh()
    assert client.pttl(keys.snapshot(topic)) > 110_000, "the recreated hash gets its TTL again"


def _leftover(client: redis.Redis, keys: Keys, topic: str, age_s: float) -> None:
    """What a publisher that sets no TTL (an older or other-language one) leaves: a last frame
    ``age_s`` old (by Redis' clock, which stream ids are made of), its snapshot, the set member."""
    seconds, _ = client.time()
    entry_id = f"{int((seconds - age_s) * 1000)}-0"
    client.xadd(keys.stream(topic), {"f": orjson.dumps({"r": [], "ts": 1, "src": "go-1", "seq": 1})}, id=entry_id)
    client.hset(keys.snapshot(topic), mapping={"k": b"{}", "__id__": entry_id})
    client.sadd(keys.topics, topic)


def test_the_sweep_drops_expired_and_silent_topics_and_old_runs_and_logs_them(client, prefix):
    keys = Keys(prefix)
    client.sadd(keys.topics, "w/expired/components")  # its keys' TTL ran out: only the member is left
    _leftover(client, keys, "w/old-go/components", age_s=300)
    _leftover(client, keys, "w/claimed/components", age_s=300)  # quiet, but a live run still has it
    _leftover(client, keys, "w/recent/components", age_s=1)
    now = time.time() * 1000
    runs = {"old-run": {"role": "worker", "name": "old", "started": now - 9e6, "seen": now - 8e6, "topics": []},
            "live-run": {"role": "worker", "name": "claimed", "started": now, "seen": now,
                         "topics": ["w/claimed/components"]}}
    for src, entry in runs.items():
        client.hset(keys.publishers, src, orjson.dumps({**entry, "stopped": None}))
    logged = presence.sweep(client, keys, retention=120)
    assert {t.decode() for t in client.smembers(keys.topics)} == {"w/claimed/components", "w/recent/components"}
    assert not client.exists(keys.stream("w/old-go/components"), keys.snapshot("w/old-go/components"))
    assert sorted(e["what"] for e in logged) == ["worker expired", "worker old", "worker old-go"]
    assert all(e["by"] == "retention" and "2 min" in e["reason"] for e in logged)
    assert client.hget(keys.publishers, "old-run") is None and client.hget(keys.publishers, "live-run") is not None
    assert sorted(e["what"] for e in presence.read_expired(client, keys)) == sorted(e["what"] for e in logged)
    assert presence.sweep(client, keys, retention=120) == [], "at most one sweep per SWEEP_S across replicas"


def test_forget_refuses_a_running_worker_and_drops_a_stopped_one(publisher_factory, client, prefix):
    keys = Keys(prefix)
    pub = publisher_factory(retention=120)
    pub.describe(role="worker", name="demo")
    pub.set_state("w/demo/components", "worker/demo", {"kind": "worker"})
    pub.publish("w/demo/queue/podset", {"k": "queue", "op": "add", "key": "ns/a"})
    pub.flush()
    pub.refresh()
    with pytest.raises(RuntimeError, match="worker demo is running"):
        presence.forget_worker(client, keys, "demo", by="alice")
    pub.start()
    pub.stop()
    entry = presence.forget_worker(client, keys, "demo", by="alice")
    assert entry["topics"] == 2 and entry["reason"] == "forgotten by alice"
    assert not client.smembers(keys.topics) and not client.exists(keys.stream("w/demo/queue/podset"))
    assert presence.read_publishers(client, keys) == []
    assert presence.read_expired(client, keys)[0]["what"] == "worker demo"
    with pytest.raises(LookupError, match="no worker named demo"):
        presence.forget_worker(client, keys, "demo", by="alice")


@pytest.mark.parametrize(("raw", "seconds"), [(None, 3600), ("", 3600), ("90", 90), ("90m", 5400), ("6h", 21600),
                                              ("2d", 172800), (" 1.5h ", 5400)])
def test_retention_parses_durations(raw, seconds):
    assert presence.parse_retention(raw) == seconds


@pytest.mark.parametrize(("raw", "message"), [("soon", "a duration like"), ("10", "at least 60 s"), ("-5m", "a duration")])
def test_bad_retention_is_a_clear_error(raw, message):
    with pytest.raises(ValueError, match=message):
        presence.parse_retention(raw)
