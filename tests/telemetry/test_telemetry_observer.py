"""TelemetryObserver: runtime hooks become records and snapshot state, and update pairs are kept."""

from __future__ import annotations

from controllers.clock import FakeClock
from controllers.telemetry.telemetry_observer import TelemetryObserver, summarize
from tests.telemetry.test_publisher import read_stream


def pod(name: str, rv: str, phase: str = "Running") -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "resourceVersion": rv,
                                        "uid": f"uid-{name}", "generation": 1}, "status": {"phase": phase}}


def test_cache_state_follows_upserts_deletes_and_replace(publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1", clock=FakeClock())
    obs.on_store("pods", op="upsert", key="default/a", obj=pod("a", "5"))
    obs.on_store("pods", op="upsert", key="default/b", obj=pod("b", "6", "Pending"))
    obs.on_store("pods", op="delete", key="default/a", obj=pod("a", "5"))
    topic = obs.topic("informer", "pods")
    assert topic == "w/w1/informer/pods"
    assert pub.state(topic) == {"default/b": summarize(pod("b", "6", "Pending"))}
    obs.on_store("pods", op="replace", key="", obj=[("default/c", pod("c", "9"))])
    assert set(pub.state(topic)) == {"default/c"}


def test_queue_state_tracks_each_key_through_add_get_backoff_and_done(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    clock = FakeClock()
    obs = TelemetryObserver(pub, worker="w1", clock=clock)
    topic = obs.topic("queue", "podset")
    obs.on_queue("podset", op="add", key="ns/x", depth=1)
    assert pub.state(topic)["ns/x"]["s"] == "queued"
    obs.on_queue("podset", op="get", key="ns/x", depth=0, duration=0.01)
    assert pub.state(topic)["ns/x"]["s"] == "processing"
    obs.on_queue("podset", op="add_rate_limited", key="ns/x", depth=0, delay=0.02, requeues=1)
    obs.on_queue("podset", op="done", key="ns/x", depth=0, duration=0.1)
    x = pub.state(topic)["ns/x"]
    assert x["s"] == "waiting" and x["requeues"] == 1 and x["ready_at"] == clock.wall() * 1000 + 20
    # Reconcile failed: the key waits out its backoff, with its requeue count.
    obs.on_queue("podset", op="add_rate_limited", key="ns/y", depth=0, delay=0.04, requeues=3)
    y = pub.state(topic)["ns/y"]
    assert y["s"] == "waiting" and y["requeues"] == 3 and y["ready_at"] == clock.wall() * 1000 + 40
    obs.on_queue("podset", op="add", key="ns/y", depth=1)
    obs.on_queue("podset", op="get", key="ns/y", depth=0)
    obs.on_queue("podset", op="forget", key="ns/y", depth=0)
    obs.on_queue("podset", op="done", key="ns/y", depth=0)
    assert "ns/y" not in pub.state(topic), "a finished, forgotten key leaves the queue view"
    pub.flush()
    ops = [r["op"] for _, f in read_stream(redis_url, prefix, topic) for r in f["r"]]
    assert ops == ["add", "get", "add_rate_limited", "done", "add_rate_limited", "add", "get", "forget", "done"]


def test_reconcile_results_are_kept_per_key(publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1", clock=FakeClock())
    obs.on_reconcile_end("podset", key="ns/x", worker=0, duration=0.01, result="error", error="boom")
    obs.on_reconcile_end("podset", key="ns/x", worker=0, duration=0.02, result="success")
    state = pub.state(obs.topic("controller", "podset"))["ns/x"]
    assert state["attempts"] == 2 and state["result"] == "success" and state["error"] is None


def test_workers_publish_to_their_own_topics(publisher_factory):
    pub = publisher_factory()
    a = TelemetryObserver(pub, worker="replica-a")
    b = TelemetryObserver(pub, worker="replica b/1")
    assert a.topic("informer", "apps/v1 deployments") == "w/replica-a/informer/apps_v1_deployments"
    assert b.topic("informer", "x") == "w/replica_b_1/informer/x"
