"""The object inspector over a real Redis: the worker's Inspector answers from a real Store and
LastUpdates, the dashboard's ``ask`` waits a bounded time, and bad or excessive requests change
nothing."""

from __future__ import annotations

import time

import orjson
import pytest
import redis

from controllers.clock import FakeClock
from controllers.informers.store import Store
from controllers.telemetry import inspector as insp
from controllers.telemetry.inspector import Inspector, ask
from controllers.telemetry.last_updates import LastUpdates
from controllers.telemetry.redaction import LAST_APPLIED
from controllers.telemetry.streams import Keys

CLEAR = "aHVudGVyMg=="


def cm(name: str, rv: int, value: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv), "uid": f"uid-{name}"},
            "data": {"greeting": value}}


def secret(rv: int = 3) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": "db", "namespace": "default", "resourceVersion": str(rv), "uid": "uid-db",
                         "annotations": {LAST_APPLIED: '{"data":{"password":"' + CLEAR + '"}}'}},
            "data": {"password": CLEAR}}


@pytest.fixture
def client(redis_url):
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


@pytest.fixture
def worker(redis_url, prefix):
    """An Inspector over two real Stores (not started: tests drive it or start it themselves)."""
    stores = {"v1/ConfigMap": Store("v1/ConfigMap"), "v1/Secret": Store("v1/Secret")}
    made: list[Inspector] = []

    def make(**kw) -> Inspector:
        inspector = Inspector(redis_url, prefix=prefix, worker="w1", last_updates=LastUpdates(),
                              stores=lambda: stores, **kw)
        inspector.caches = stores
        made.append(inspector)
        return inspector

    yield make
    for i in made:
        i.stop()


def body(answer: insp.Answer) -> dict:
    return orjson.loads(answer.body)


def test_answers_the_current_object_and_the_pair_the_update_handler_saw(worker):
    w = worker()
    cms = w.caches["v1/ConfigMap"]
    cms.add(cm("greet", 5, "hello"))
    first = body(w.answer("v1_ConfigMap", "default/greet"))
    assert first["status"] == 200 and first["cached"] and first["current"]["data"] == {"greeting": "hello"}
    assert first["previous"] is None and first["update"] is None and "no update seen" in first["note"]

    cms.add(cm("greet", 6, "hi"))
    w.last_updates.record("v1/ConfigMap", "default/greet", handler="controller/x", old=cm("greet", 5, "hello"),
                          new=cm("greet", 6, "hi"), old_rv="5", new_rv="6", at=123.0)
    second = body(w.answer("v1_ConfigMap", "default/greet"))
    assert second["current_rv"] == "6" and second["previous_rv"] == "5"
    assert second["previous"]["data"] == {"greeting": "hello"} and second["current"]["data"] == {"greeting": "hi"}
    assert second["update"] == {"handler": "controller/x", "at": 123.0, "old_rv": "5", "new_rv": "6", "new": None}

    cms.add(cm("greet", 7, "hey"))  # the cache moved on; no handler call yet: the pair's new is sent
    assert body(w.answer("v1_ConfigMap", "default/greet"))["update"]["new"]["data"] == {"greeting": "hi"}

    cms.remove("default/greet")  # deleted: the last state an update handler saw
    gone = body(w.answer("v1_ConfigMap", "default/greet"))
    assert not gone["cached"] and gone["current"] is None and gone["update"]["new"]["data"] == {"greeting": "hi"}


def test_a_secret_is_answered_redacted_including_its_last_applied_annotation(worker):
    w = worker()
    w.caches["v1/Secret"].add(secret())
    answer = w.answer("v1_Secret", "default/db")
    assert CLEAR.encode() not in answer.body and CLEAR[:8].encode() not in answer.body
    current = body(answer)["current"]
    assert current["data"]["password"].startswith("<redacted> (12 chars, #")
    assert current["metadata"]["annotations"][LAST_APPLIED].startswith("<redacted>")
    assert w.caches["v1/Secret"].get_by_key("default/db")["data"]["password"] == CLEAR, "the cache is untouched"


@pytest.mark.parametrize(("informer", "key", "status", "says"), [
    ("v1_ConfigMap", "default/nope", 404, "is not in the v1/ConfigMap cache"),
    ("v1_Pod", "default/greet", 404, "has no informer v1_Pod"),
    ("v1_ConfigMap", "default/has space", 400, "key namespace/name"),
    ("v1_ConfigMap", "a/b/c", 400, "key namespace/name"),
    ("v1/ConfigMap", "default/greet", 400, "topic segment"),
    ("v1_ConfigMap", "x" * 600, 400, "key namespace/name"),
])
def test_unknown_and_malformed_requests_get_a_clear_error(worker, informer, key, status, says):
    answer = worker().answer(informer, key)
    assert answer.status == status and says in body(answer)["error"]


def test_malformed_expired_and_excess_requests_are_refused_without_work(worker, client, prefix):
    clock = FakeClock()
    w = worker(clock=clock, rate=3)
    keys = Keys(prefix)
    w.caches["v1/ConfigMap"].add(cm("greet", 5, "hello"))
    assert w.handle(b"not-an-id") is None and w.rejected == 1
    assert w.handle(b"0" * 32) is None and w.expired == 1, "no request key: the asker gave up"
    for rid, raw in (("1" * 32, b"[1, 2]"), ("2" * 32, b"x" * 2000)):
        client.set(keys.inspect_request(rid), raw, px=2000)
        assert w.handle(rid.encode()).status == 400
        assert client.lpop(keys.inspect_reply(rid)).startswith(b'{"status":400')
    request = orjson.dumps({"informer": "v1_ConfigMap", "key": "default/greet"})
    statuses = []
    for n in range(5):
        rid = f"{n + 10:032x}"
        client.set(keys.inspect_request(rid), request, px=2000)
        statuses.append(w.handle(rid.encode()).status)
        assert client.exists(keys.inspect_request(rid)) == 0, "an answered request is deleted"
        assert 0 < client.pttl(keys.inspect_reply(rid)) <= insp.REPLY_TTL_MS, "replies expire"
    assert statuses == [200, 200, 200, 429, 429] and w.limited == 2
    clock.step(1.0)
    rid = "f" * 32
    client.set(keys.inspect_request(rid), request, px=2000)
    assert w.handle(rid.encode()).status == 200, "the token bucket refills"


def test_ask_reports_unknown_and_dead_workers_and_times_out_on_a_silent_one(client, prefix):
    keys = Keys(prefix)
    answer = ask(client, keys, worker="ghost", informer="v1_ConfigMap", key="default/a")
    assert answer.status == 404 and "no worker named ghost" in body(answer)["error"]
    client.sadd(keys.topics, "w/dead/components")  # it published once, and has no heartbeat now
    answer = ask(client, keys, worker="dead", informer="v1_ConfigMap", key="default/a")
    assert answer.status == 503 and "is not running" in body(answer)["error"]
    # A heartbeat, but nobody answers (e.g. the worker hangs): the wait is bounded.
    client.set(keys.inspect_alive("silent"), orjson.dumps({"informers": {"v1_ConfigMap": "v1/ConfigMap"}}), px=5000)
    started = time.monotonic()
    answer = ask(client, keys, worker="silent", informer="v1_ConfigMap", key="default/a", timeout=0.3)
    assert answer.status == 504 and "did not answer within 0.3 s" in body(answer)["error"]
    assert time.monotonic() - started < 1.0
    assert not list(client.scan_iter(match=keys.inspect_request("*"))), "the abandoned request is withdrawn"
    answer = ask(client, keys, worker="silent", informer="v1_Secret", key="default/a")
    assert answer.status == 404 and "(it has: v1/ConfigMap)" in body(answer)["error"]


def test_a_flood_of_asks_is_rate_limited_and_leaves_only_a_bounded_queue(client, prefix):
    keys = Keys(prefix)
    clock = FakeClock()
    client.set(keys.inspect_alive("busy"), orjson.dumps({"informers": {"cms": "cms"}}), px=5000)
    statuses = []
    for _ in range(2):  # nobody answers: each accepted ask times out and leaves its id queued
        statuses += [ask(client, keys, worker="busy", informer="cms", key=f"default/k{i}", timeout=0.01,
                         clock=clock).status for i in range(20)]
        clock.step(1.0)
    per_second = [504] * insp.RATE_PER_SECOND + [429] * (20 - insp.RATE_PER_SECOND)
    assert statuses == per_second * 2
    assert client.llen(keys.inspect_queue("busy")) == insp.MAX_QUEUED, "the queue is trimmed"
    for k in client.scan_iter(match=prefix + "inspect:*"):
        assert client.pttl(k) > 0, f"{k!r} must expire"


def test_a_running_inspector_answers_ask_and_withdraws_its_heartbeat_on_stop(worker, client, prefix):
    w = worker()
    w.caches["v1/ConfigMap"].add(cm("greet", 5, "hello"))
    w.start()
    keys = Keys(prefix)
    client.sadd(keys.topics, "w/w1/components")
    deadline = time.monotonic() + 5
    while client.get(keys.inspect_alive("w1")) is None and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    answer = ask(client, keys, worker="w1", informer="v1_ConfigMap", key="default/greet")
    elapsed = time.monotonic() - started
    assert answer.status == 200 and body(answer)["current"]["data"] == {"greeting": "hello"}
    print(f"\ninspect round trip through Redis: {elapsed * 1000:.1f} ms")
    assert elapsed < 1.0
    w.stop()
    assert client.get(keys.inspect_alive("w1")) is None
    assert ask(client, keys, worker="w1", informer="v1_ConfigMap", key="default/greet").status == 503
