"""A controller's write and its watch event race (protocol v1.7, ``self``).

The API server sends a write's watch event and the write's answer at about the same time, on two
connections; the informer's handler may get the event before the worker has read the answer (and its
resourceVersion). An event of a key the controller is writing waits for that answer, at most
``SELF_WAIT_LIMIT`` on the observer's clock, so that it is still recognised as the controller's own.
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


def _event(obs: TelemetryObserver, done: threading.Event) -> threading.Thread:
    """The informer's handler thread, with the write's watch event."""
    def run() -> None:
        obs.on_event("c", event="update", key="ns/a", requests=["ns/a"], old=_obj("2"), new=_obj("3"))
        done.set()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


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
    done = threading.Event()
    thread = _event(obs, done)
    assert not done.wait(0.05), "the event was recorded while its key's write was in flight"
    obs.on_request(method="PUT", path=PATH, code=200, duration=0.001, rv="3")  # the answer, read late
    thread.join(5)
    [event] = _events(pub, obs, redis_url, prefix)
    assert event.get("self") is True, event


def test_an_event_waits_for_a_write_in_flight_at_most_the_limit(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    clock = FakeClock()
    obs = TelemetryObserver(pub, worker="limit", clock=clock)
    obs.on_reconcile_start("c", key="ns/a", worker=0)
    obs.on_request_start(method="POST", path="/api/v1/namespaces/ns/configmaps")  # a create: any key waits
    done = threading.Event()
    thread = _event(obs, done)
    assert clock.wait_for_waiters(1), "the event is not waiting on the observer's clock"
    clock.step(SELF_WAIT_LIMIT - 0.01)
    assert not done.wait(0.05), "the event went on before the limit"
    clock.step(0.01)
    assert done.wait(5), "the event still waits after the limit"
    thread.join(5)
    [event] = _events(pub, obs, redis_url, prefix)
    assert "self" not in event, event


def test_an_event_waits_only_for_the_writes_sent_before_it_arrived(publisher_factory, redis_url, prefix):
    """A controller that keeps writing a key always has a write of it in flight. The event waits for
    the write that was in flight when it arrived, not for the next one: waiting until none is in
    flight made every event of a busy key wait the whole limit, and the handler fell behind the watch
    (a soak's worker grew ~90 MiB a minute with its pending events)."""
    pub = publisher_factory()
    clock = FakeClock()
    obs = TelemetryObserver(pub, worker="busy", clock=clock)
    obs.on_reconcile_start("c", key="ns/a", worker=0)
    obs.on_request_start(method="PUT", path=PATH)  # the write whose event comes next
    done = threading.Event()
    thread = _event(obs, done)
    assert clock.wait_for_waiters(1), "the event is not waiting for the write in flight"
    obs.on_request_start(method="PUT", path=PATH)  # the next write of the key, sent after the event arrived
    obs.on_request(method="PUT", path=PATH, code=200, duration=0.001, rv="3")  # the first one's answer
    assert done.wait(5), "the event waited for a write sent after it arrived"
    thread.join(5)
    [event] = _events(pub, obs, redis_url, prefix)
    assert event.get("self") is True, event
    obs.on_request(method="PUT", path=PATH, code=200, duration=0.001, rv="4")
    assert obs._writes == {}, "a slot with nothing in flight is kept after its waiters left"
