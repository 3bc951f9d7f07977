"""The publisher API (controllers/publish.py) against a real Redis: what a process that has none of
ctrlscope's runtime publishes when it reports its informers, queues and reconciles."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest

from controllers.clock import FakeClock
from controllers.publish import ProtocolPublisher
from controllers.schema import PROTOCOL_VERSION, QueueOp, TopicKind, worker_topic
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.telemetry_observer import TelemetryObserver
from controllers.workqueue import RateLimitingQueue, default_controller_rate_limiter, describe_rate_limiter
from tests.conftest import ROOT
from tests.telemetry.test_publisher import read_snapshot, read_stream


@pytest.fixture
def api(redis_url, prefix):
    made: list[ProtocolPublisher] = []

    def make(worker: str = "api-worker", **kw) -> ProtocolPublisher:
        pub = ProtocolPublisher(redis_url, worker=worker, prefix=prefix, metrics=False, **kw)
        made.append(pub)
        return pub

    yield make
    for pub in made:
        pub.stop()


def flush(pub: RedisPublisher) -> None:
    while pub.flush():
        pass


def records(url: str, prefix: str, topic: str) -> list[dict]:
    return [rec for _, frame in read_stream(url, prefix, topic) for rec in frame["r"]]


def frames(url: str, prefix: str, topic: str) -> list[dict]:
    return [frame for _, frame in read_stream(url, prefix, topic)]


def snapshot(url: str, prefix: str, topic: str) -> dict:
    return read_snapshot(url, prefix, topic)[1]


def test_add_is_reported_as_add_dedup_or_defer_from_the_queue_item_model(api, redis_url, prefix):
    pub = api(clock=FakeClock())
    q = pub.queue("podsets")
    q.add("default/a")
    q.add("default/a")  # already queued: absorbed
    q.get("default/a")
    q.add("default/a")  # being processed: marked dirty
    q.add("default/a")  # dirty already: absorbed
    q.done("default/a")  # dirty: queued again
    flush(pub.publisher)
    topic = worker_topic("api-worker", TopicKind.QUEUE, "podsets")
    ops = [(r["op"], r["depth"]) for r in records(redis_url, prefix, topic)]
    assert ops == [("add", 1), ("dedup", 1), ("get", 0), ("defer", 0), ("dedup", 0), ("done", 0), ("requeue", 1)]
    assert snapshot(redis_url, prefix, topic)["default/a"]["s"] == "queued"


def test_the_api_queue_tells_the_same_story_as_ctrlscopes_own_queue(api, redis_url, prefix, publisher_factory):
    """One sequence of calls, once on the runtime's RateLimitingQueue (observed by a TelemetryObserver),
    once through QueueReport: the same ops, depths and per-key state reach Redis."""
    clock = FakeClock()
    runtime_pub = publisher_factory(clock=clock)
    observer = TelemetryObserver(runtime_pub, worker="runtime", clock=clock)
    real = RateLimitingQueue("q", clock=clock, observer=observer)
    api_pub = api(clock=clock)
    report = api_pub.queue("q")
    steps = [("add", "a"), ("add", "b"), ("add", "a"), ("get", "a"), ("add", "a"), ("done", "a"),
             ("get", "b"), ("rate", "b"), ("done", "b"), ("get", "a"), ("forget", "a"), ("done", "a")]
    for op, key in steps:
        if op == "add":
            real.add(key)
            report.add(key)
        elif op == "get":
            got, _ = real.get()
            assert got == key
            report.get(key)
        elif op == "done":
            real.done(key)
            report.done(key)
        elif op == "rate":
            delay = real.rate_limiter.when(key)  # what the limiter would choose for this retry
            real.rate_limiter.forget(key)
            real.add_rate_limited(key)
            report.add_rate_limited(key, delay=delay, requeues=real.num_requeues(key))
        elif op == "forget":
            real.forget(key)
            report.forget(key)
    flush(runtime_pub)
    flush(api_pub.publisher)
    ours = [(r["op"], r["key"], r["depth"], r.get("requeues")) for r in
            records(redis_url, prefix, worker_topic("runtime", TopicKind.QUEUE, "q"))]
    theirs = [(r["op"], r["key"], r["depth"], r.get("requeues")) for r in
              records(redis_url, prefix, worker_topic("api-worker", TopicKind.QUEUE, "q"))]
    assert theirs == ours
    assert snapshot(redis_url, prefix, worker_topic("api-worker", TopicKind.QUEUE, "q")) == \
        snapshot(redis_url, prefix, worker_topic("runtime", TopicKind.QUEUE, "q"))


def test_reconcile_results_errors_and_writes(api, redis_url, prefix):
    pub = api(clock=FakeClock())
    ctl = pub.controller("podsets", watches=["v1/Pod"])
    ctl.event("update", "default/a")
    ctl.event("update", "default/b", filtered_by="GenerationChanged")
    with ctl.reconcile("default/a") as attempt:
        ctl.write(method="PATCH", path="/api/v1/namespaces/default/pods/a", code=409, duration=0.01)
        attempt.requeue_after(5)
    with pytest.raises(RuntimeError), ctl.reconcile("default/a"):
        raise RuntimeError("boom")
    with ctl.reconcile("default/b") as attempt:
        attempt.terminal("spec is invalid")
    ctl.write(method="POST", path="/api/v1/namespaces/default/pods", code=201, duration=0.01)  # not in a reconcile
    flush(pub.publisher)
    topic = worker_topic("api-worker", TopicKind.CONTROLLER, "podsets")
    recs = records(redis_url, prefix, topic)
    assert [(r["k"], r.get("result") or r.get("method") or r.get("event")) for r in recs] == [
        ("event", "update"), ("event", "update"), ("reconcile_start", None), ("write", "PATCH"),
        ("reconcile", "requeue_after"), ("reconcile_start", None), ("reconcile", "error"),
        ("reconcile_start", None), ("reconcile", "terminal"), ("finding", None)]
    assert recs[1]["requests"] == [] and recs[1]["filtered_by"] == "GenerationChanged"
    # v1.7: the first attempt absorbed the mapped event, the second its requeue_after; the terminal
    # result is stated as an open finding
    assert [t["kind"] for t in recs[2]["triggers"]] == ["event"] and recs[5]["triggers"][0]["delay"] == 5
    assert (recs[9]["finding"], recs[9]["subject"], recs[9]["open"]) == ("terminal", "default/b", True)
    assert recs[6]["error"] == "RuntimeError: boom"
    state = snapshot(redis_url, prefix, topic)
    assert state["default/a"]["attempts"] == 2 and state["default/a"]["result"] == "error"
    stages = pub.telemetry.stages()["controllers"]["podsets"]
    assert (stages["writes"], stages["write_errors"], stages["write_conflicts"]) == (1, 1, 1)


def test_a_controller_describes_its_rate_limiter_for_the_page(api, redis_url, prefix):
    """v1.5: the limiter a process's queue retries with, so the page can say which part chose each
    delay and what the next will be; a later announcement without it keeps it."""
    pub = api(clock=FakeClock())
    spec = describe_rate_limiter(default_controller_rate_limiter())
    pub.controller("podsets", watches=["v1/Pod"], rate_limiter=spec)
    pub.controller("podsets", watches=["v1/Pod", "v1/ConfigMap"])
    flush(pub.publisher)
    entry = snapshot(redis_url, prefix, worker_topic("api-worker", TopicKind.COMPONENTS))["controller/podsets"]
    assert entry["rate_limiter"] == spec


def test_a_refused_write_is_published_as_refused_not_as_a_failed_write(api, redis_url, prefix):
    pub = api(clock=FakeClock())
    ctl = pub.controller("summary", watches=["apps/v1/Deployment"])
    with ctl.reconcile("default/web") as attempt:
        ctl.write_refused(method="POST", path="/api/v1/namespaces/default/configmaps")
        attempt.terminal("read-only: POST /api/v1/namespaces/default/configmaps was not sent")
    with pytest.raises(ValueError):
        ctl.write_refused(method="POST", path="/x", reason="because")  # not a WriteRefusal
    flush(pub.publisher)
    writes = [r for r in records(redis_url, prefix, worker_topic("api-worker", TopicKind.CONTROLLER, "summary"))
              if r["k"] == "write"]
    assert [(w["method"], w["code"], w["duration"], w["refused"]) for w in writes] == [("POST", 0, 0.0, "read-only")]
    stages = pub.telemetry.stages()["controllers"]["summary"]
    assert (stages["writes"], stages["write_errors"], stages["writes_refused"]) == (0, 0, 1)


def test_informer_cache_follows_list_and_watch_and_never_carries_object_data(api, redis_url, prefix):
    pub = api(clock=FakeClock())
    inf = pub.informer("v1/Secret")

    def secret(name: str, rv: str) -> dict:
        return {"kind": "Secret", "metadata": {"namespace": "default", "name": name, "resourceVersion": rv,
                                               "uid": f"u-{name}"}, "data": {"password": "aHVudGVyMg=="}}

    inf.listed([secret("a", "1"), secret("b", "2")], resource_version="2")
    inf.synced()
    inf.watch_started("2")
    inf.watch_event("MODIFIED", secret("a", "3"))
    inf.watch_event("DELETED", secret("b", "4"))
    inf.watch_ended("expired")
    with pytest.raises(ValueError):
        inf.watch_ended("no such reason")  # the closed set is enforced before anything is published
    with inf.handling("on_update", "update", "default/a", old=secret("a", "1"), new=secret("a", "3")):
        pass
    flush(pub.publisher)
    topic = worker_topic("api-worker", TopicKind.INFORMER, "v1/Secret")
    assert snapshot(redis_url, prefix, topic) == {"default/a": {"rv": "3", "gen": None, "uid": "u-a"}}
    recs = records(redis_url, prefix, topic)
    assert [r["k"] for r in recs] == ["informer", "list", "state", "state", "watch_start", "watch", "watch",
                                      "watch_end", "handler"]
    raw = b"".join(orjson.dumps(f) for f in frames(redis_url, prefix, topic))
    assert b"aHVudGVyMg" not in raw
    comps = snapshot(redis_url, prefix, worker_topic("api-worker", TopicKind.COMPONENTS))
    assert comps["informer/v1/Secret"]["synced"] is True


def test_every_frame_carries_the_version_and_the_worker_says_its_runtime(api, redis_url, prefix):
    pub = api(worker="kopf-op", runtime="kopf", clock=FakeClock())
    pub.queue("q").add("a")
    flush(pub.publisher)
    for topic in (worker_topic("kopf-op", TopicKind.QUEUE, "q"), worker_topic("kopf-op", TopicKind.COMPONENTS)):
        assert {f["v"] for f in frames(redis_url, prefix, topic)} == {PROTOCOL_VERSION}
    worker = snapshot(redis_url, prefix, worker_topic("kopf-op", TopicKind.COMPONENTS))["worker/kopf-op"]
    assert (worker["runtime"], worker["protocol"]) == ("kopf", PROTOCOL_VERSION)
    assert QueueOp.ADD in {r["op"] for r in records(redis_url, prefix, worker_topic("kopf-op", TopicKind.QUEUE, "q"))}


def test_importing_the_api_does_not_import_the_runtime():
    """A kopf operator pays for what it uses: no informers, workqueue or reconcile loop come along."""
    code = ("import sys, controllers.publish; "
            "print(sorted(m for m in sys.modules if m.startswith(('controllers.informers', 'controllers.workqueue', "
            "'controllers.reconcile'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
