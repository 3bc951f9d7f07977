"""A controller's write and its watch event race (protocol v1.7, ``self``).

The API server sends a write's watch event and the write's answer at about the same time, on two
connections; the informer's handler may get the event before the worker has read the answer (and its
resourceVersion). The record of an event of a key the controller is writing is parked until the
answers of the writes in flight when it arrived are read, at most ``SELF_WAIT_LIMIT`` on the
observer's clock, so that it is still recognised as the controller's own; the handler itself never
waits (it did once, and fell behind its watch while the controller kept writing).
(The Go twin: go/ctrlscope/hook_test.go; a loaded CI run saw the Go status writer's own event
recorded without ``self``.) Real parts: the TelemetryObserver and its publisher on a real Redis.
"""

from __future__ import annotations

import threading

from controllers.clock import FakeClock
from controllers.schema import TopicKind
from controllers.telemetry.telemetry_observer import SELF_WAIT_LIMIT, TelemetryObserver
from tests.golang.telemetry import Published

PATH = "/api/v1/namespaces/ns/configmaps/a/status"


def _obj(rv: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns",
                                                                  "resourceVersion": rv}, "data": {"n": rv}}


def _event(obs: TelemetryObserver, key: str = "ns/a", rv: str = "3") -> None:
    """The informer's handler, with the write's watch event, on a thread of its own: it must return
    at once, whatever is in flight."""
    done = threading.Event()
    ns, name = key.split("/")

    def run() -> None:
        old, new = _obj("2"), _obj(rv)
        for o in (old, new):
            o["metadata"].update(namespace=ns, name=name)
        obs.on_event("c", event="update", key=key, requests=[key], old=old, new=new)
        done.set()
    threading.Thread(target=run, daemon=True).start()
    assert done.wait(5), "the event handler waited for the write in flight"


def _events(pub, obs: TelemetryObserver, redis_url: str, prefix: str) -> list[dict]:
    pub.flush()
    published = Published(redis_url, prefix)
    try:
        return published.records(obs.topic(TopicKind.CONTROLLER, "c"), "event")
    finally:
        published.close()


def test_an_event_handled_before_its_writes_answer_is_still_the_controllers_own(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="race")
    obs.on_reconcile_start("c", key="ns/a", worker=0)  # this thread is the worker's
    obs.on_request_start(method="PUT", path=PATH)
    _event(obs)
    assert _events(pub, obs, redis_url, prefix) == [], "the event was recorded while its key's write was in flight"
    obs.on_request(method="PUT", path=PATH, code=200, duration=0.001, rv="3")  # the answer, read late
    [event] = _events(pub, obs, redis_url, prefix)
    assert event.get("self") is True, event


def test_an_event_waits_for_a_write_in_flight_at_most_the_limit(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    clock = FakeClock()
    obs = TelemetryObserver(pub, worker="limit", clock=clock)
    obs.on_reconcile_start("c", key="ns/a", worker=0)
    obs.on_request_start(method="POST", path="/api/v1/namespaces/ns/configmaps")  # a create: any key waits
    _event(obs)
    clock.step(SELF_WAIT_LIMIT - 0.01)
    assert _events(pub, obs, redis_url, prefix) == [], "the event went on before the limit"
    clock.step(0.01)
    [event] = _events(pub, obs, redis_url, prefix)  # released by the flush's evaluate
    assert "self" not in event, event


def test_an_event_waits_only_for_the_writes_sent_before_it_arrived(publisher_factory, redis_url, prefix):
    """A controller that keeps writing a key always has a write of it in flight. The event waits for
    the write that was in flight when it arrived, not for the next one: waiting until none was in
    flight held every event of a busy key the whole limit (a soak's worker grew ~90 MiB a minute)."""
    pub = publisher_factory()
    clock = FakeClock()
    obs = TelemetryObserver(pub, worker="busy", clock=clock)
    obs.on_reconcile_start("c", key="ns/a", worker=0)
    obs.on_request_start(method="PUT", path=PATH)  # the write whose event comes next
    _event(obs)
    obs.on_request_start(method="PUT", path=PATH)  # the next write of the key, sent after the event arrived
    obs.on_request(method="PUT", path=PATH, code=200, duration=0.001, rv="3")  # the first one's answer
    [event] = _events(pub, obs, redis_url, prefix)
    assert event.get("self") is True, event
    obs.on_request(method="PUT", path=PATH, code=200, duration=0.001, rv="4")
    assert obs._writes == {}, "a slot with nothing in flight is kept after its waiters left"


def test_events_after_a_parked_one_keep_their_order(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="order", clock=FakeClock())
    obs.on_reconcile_start("c", key="ns/a", worker=0)
    obs.on_request_start(method="PUT", path=PATH)
    _event(obs, "ns/a", "3")
    _event(obs, "ns/b", "7")  # nothing in flight for it, but it came second
    assert _events(pub, obs, redis_url, prefix) == []
    obs.on_request(method="PUT", path=PATH, code=200, duration=0.001, rv="3")
    events = _events(pub, obs, redis_url, prefix)
    assert [(e["key"], e.get("self")) for e in events] == [("ns/a", True), ("ns/b", None)], events


def test_an_attempt_of_the_key_takes_its_parked_event_as_a_trigger(publisher_factory, redis_url, prefix):
    """A reconcile_start lists its triggers; a parked event that maps to its key is one, so the
    attempt releases it (and what was parked before it) first, undecided as to self."""
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="trigger", clock=FakeClock())
    obs.on_reconcile_start("c", key="ns/z", worker=0)
    obs.on_request_start(method="POST", path="/api/v1/namespaces/ns/configmaps")  # a create: every key waits
    _event(obs, "ns/b", "7")

    def other_worker() -> None:
        obs.on_reconcile_start("c", key="ns/b", worker=1)
    t = threading.Thread(target=other_worker)
    t.start()
    t.join(5)
    pub.flush()
    published = Published(redis_url, prefix)
    try:
        records = [r for r in published.records(obs.topic(TopicKind.CONTROLLER, "c"))
                   if r["k"] in ("event", "reconcile_start") and r["key"] == "ns/b"]
    finally:
        published.close()
    assert [r["k"] for r in records] == ["event", "reconcile_start"], records
    assert records[1]["trigger_count"] == 1 and records[1]["triggers"][0]["rv"] == "7", records[1]
