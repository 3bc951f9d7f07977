"""TelemetryObserver: runtime hooks become records and snapshot state, and update pairs are kept."""

from __future__ import annotations

from controllers.clock import FakeClock
from controllers.telemetry.summary import summarize
from controllers.telemetry.telemetry_observer import TelemetryObserver
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
    clock.step(0.04)  # the backoff passes: the delaying queue adds the key back
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


def test_stage_counters_count_what_each_pipeline_stage_did(publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1", clock=FakeClock())
    obs.on_list("pods", resource_version="10", items=2, duration=0.01)
    obs.on_store("pods", op="replace", key="", obj=[("default/a", pod("a", "9")), ("default/b", pod("b", "10"))])
    obs.on_watch_event("pods", event_type="MODIFIED", key="default/a", resource_version="11")
    obs.on_fifo("pods", op="queued", key="default/a", delta="Updated", depth=1)
    obs.on_fifo("pods", op="popped", key="default/a", delta="Updated", depth=0)
    obs.on_store("pods", op="upsert", key="default/a", obj=pod("a", "11"))
    obs.on_handler("pods", handler="log", event="update", key="default/a", outcome="ok", duration=0.001)
    obs.on_handler("pods", handler="controller/podset", event="update", key="default/a", outcome="error",
                   duration=0.001, error="boom")
    obs.on_reconcile_end("podset", key="default/a", worker=0, duration=0.01, result="requeue")
    assert obs.stages() == {
        "informers": {"pods": {"watch": 1, "fifo": 1, "cache": 3, "handlers": 2, "handler_errors": 1,
                               "fifo_depth": 0, "size": 2}},
        "controllers": {"podset": {"writes": 0, "write_errors": 0, "write_conflicts": 0, "writes_refused": 0,
                                   "last_result": "requeue"}},
        "watchers": {}}
    assert pub.state("w/w1/components")["informer/pods"]["listed"] == 2


def test_api_writes_are_counted_for_the_controller_whose_reconcile_made_them(publisher_factory, redis_url, prefix):
    import threading

    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1", clock=FakeClock())
    obs.on_request(method="POST", path="/api/v1/namespaces/default/pods", code=201, duration=0.002)  # set-up code
    obs.on_reconcile_start("podset", key="default/a", worker=0)
    obs.on_request(method="GET", path="/api/v1/namespaces/default/pods", code=200, duration=0.001)
    obs.on_request(method="POST", path="/api/v1/namespaces/default/pods", code=201, duration=0.002)
    obs.on_request(method="PUT", path="/apis/x/v1/namespaces/default/podsets/a/status", code=409, duration=0.001)
    # Another thread (a handler, a reflector) writing meanwhile is not this Reconcile.
    other = threading.Thread(target=obs.on_request, kwargs={"method": "DELETE", "path": "/p", "code": 200,
                                                            "duration": 0.0})
    other.start()
    other.join()
    obs.on_reconcile_end("podset", key="default/a", worker=0, duration=0.01, result="error", error="conflict")
    obs.on_request(method="DELETE", path="/api/v1/namespaces/default/pods/x", code=0, duration=1.0)  # after it
    assert obs.stages()["controllers"]["podset"] == {"writes": 2, "write_errors": 1, "write_conflicts": 1,
                                                     "writes_refused": 0, "last_result": "error"}
    pub.flush()
    writes = [r for _, f in read_stream(redis_url, prefix, obs.topic("controller", "podset")) for r in f["r"]
              if r["k"] == "write"]
    assert [(w["method"], w["code"]) for w in writes] == [("POST", 201), ("PUT", 409)]


def test_components_say_what_a_controller_watches_and_which_cluster_without_credentials(publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1", clock=FakeClock())
    obs.describe_cluster(name="simulated", server="http://127.0.0.1:6443", version="v1.32.0")
    obs.on_controller("podset", watches=["pods"], workers=2, started=False)
    obs.on_controller("podset", watches=["pods", "podsets"], workers=2, started=True)
    obs.on_informer("podset", fifo="DeltaFIFO", resync_period=0.0)  # same name, another kind: its own entry
    components = pub.state("w/w1/components")
    assert components["cluster/simulated"] == {"kind": "cluster", "name": "simulated",
                                               "server": "http://127.0.0.1:6443", "version": "v1.32.0"}
    assert components["controller/podset"] == {"kind": "controller", "name": "podset", "watches": ["pods", "podsets"],
                                                "workers": 2, "started": True}
    assert components["informer/podset"]["kind"] == "informer"
