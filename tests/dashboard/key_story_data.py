"""A retried key's story, published as a worker publishes it: what the key page tests read back.

Worker ``w1`` runs controller ``podset`` (1 worker, client-go's default per-key limiter), watching
informers ``podsets`` (its For()) and ``pods``. Key ``default/web``: created, enqueued, reconciled
with an error (its status write came back as a watch event its own controller caused), retried
after the limiter's 5 ms, then reconciled fine. Key ``default/other`` goes through the same controller
at the same time: nothing of it belongs on ``default/web``'s page.

Protocol 1.7's provenance fields (an event's ``source``/``rv``/``diff``/``self``, an attempt's
``triggers``, a write's ``rv``) are published in the shapes protocol/README.md gives them, through
the publisher, beside what a TelemetryObserver reports for the rest.
"""

from __future__ import annotations

import time
from typing import Any

from controllers.clock import FakeClock
from controllers.schema import (
    ControllerEvent,
    HandlerEvent,
    QueueOp,
    ReconcileResult,
    RecordKind,
    TopicKind,
    WatchEventType,
)
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.telemetry_observer import TelemetryObserver

WORKER, CONTROLLER, KEY, OTHER = "w1", "podset", "default/web", "default/other"
SOURCE = "controller/podset (For)"
STATUS_PATH = "/apis/demo.ctrlscope.dev/v1/namespaces/default/podsets/web/status"
LIMITER = {"type": "exponential", "base": 0.005, "max": 1000.0}


def podset(rv: int, ready: int, name: str = "web") -> dict[str, Any]:
    return {"apiVersion": "demo.ctrlscope.dev/v1", "kind": "PodSet",
            "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv), "generation": 1, "uid": "u-" + name},
            "spec": {"replicas": 2}, "status": {"readyReplicas": ready}}


def announce(obs: TelemetryObserver) -> None:
    for informer in ("podsets", "pods"):
        obs.on_informer(informer, fifo="DeltaFIFO", resync_period=0.0)
        obs.on_list(informer, resource_version="100", items=0, duration=0.01)
        obs.on_reflector_state(informer, state="synced")
    obs.on_controller(CONTROLLER, watches=["podsets", "pods"], workers=1, started=True, rate_limiter=LIMITER)


def publish(obs: TelemetryObserver, kind: TopicKind, name: str, record: dict[str, Any]) -> None:
    """A record as the observer's own hooks publish them (its ``ts`` from the observer's clock)."""
    obs._emit(kind, name, record)


def object_event(obs: TelemetryObserver, key: str, obj: dict[str, Any], *, event: ControllerEvent,
                 old: dict[str, Any] | None = None, diff: list[str] | None = None, self_caused: bool = False) -> None:
    """An object's watch event, its cache update, its handler call and the controller event that
    enqueued the key, as the runtime reports them."""
    rv = obj["metadata"]["resourceVersion"]
    wtype = WatchEventType.ADDED if event == ControllerEvent.CREATE else WatchEventType.MODIFIED
    obs.on_watch_event("podsets", event_type=wtype, key=key, resource_version=rv)
    obs.on_store("podsets", op="upsert", key=key, obj=obj)
    handled = HandlerEvent.ADD if event == ControllerEvent.CREATE else HandlerEvent.UPDATE
    obs.on_handler("podsets", handler="controller/podset", event=handled, key=key, outcome="ok",
                   duration=0.0003, old=old, new=obj)
    record: dict[str, Any] = {"k": RecordKind.EVENT, "event": event, "key": key, "requests": [key], "filtered_by": None,
                              "source": SOURCE, "rv": rv}
    if old is not None:
        record.update(old_rv=old["metadata"]["resourceVersion"], diff=diff or [])
    if self_caused:
        record["self"] = True
    publish(obs, TopicKind.CONTROLLER, CONTROLLER, record)


def attempt(obs: TelemetryObserver, clock: FakeClock, key: str, *, triggers: list[dict[str, Any]], result: ReconcileResult,
            error: str | None = None, write_rv: str | None = None, self_triggered: bool = False) -> None:
    """get → reconcile_start (with its triggers) → a status write → reconcile (→ the retry's add) → done."""
    obs.on_queue(CONTROLLER, op=QueueOp.GET, key=key, depth=0, duration=0.001)
    start: dict[str, Any] = {"k": RecordKind.RECONCILE_START, "key": key, "worker": 0, "triggers": triggers,
                             "trigger_count": len(triggers)}
    if self_triggered:
        start["self_triggered"] = True
    publish(obs, TopicKind.CONTROLLER, CONTROLLER, start)
    clock.step(0.002)
    if write_rv is not None:
        name = key.split("/", 1)[1]
        publish(obs, TopicKind.CONTROLLER, CONTROLLER, {
            "k": RecordKind.WRITE, "method": "PUT", "path": STATUS_PATH.replace("/web/", f"/{name}/"), "code": 200,
            "duration": 0.002, "rv": write_rv})
    clock.step(0.002)
    obs.on_reconcile_end(CONTROLLER, key=key, worker=0, duration=0.004, result=result, error=error)
    if result == ReconcileResult.ERROR:
        obs.on_queue(CONTROLLER, op=QueueOp.ADD_RATE_LIMITED, key=key, depth=0, delay=0.005, requeues=1)
    else:
        obs.on_queue(CONTROLLER, op=QueueOp.FORGET, key=key, depth=0, requeues=0)
    obs.on_queue(CONTROLLER, op=QueueOp.DONE, key=key, depth=0, duration=0.005)


def observer(publisher: RedisPublisher, *, ago: float = 1.0) -> tuple[TelemetryObserver, FakeClock]:
    """Worker ``w1``'s observer on a fake clock whose wall time starts ``ago`` seconds before now."""
    clock = FakeClock(start=0.0, wall_offset=time.time() - ago)
    return TelemetryObserver(publisher, worker=WORKER, clock=clock), clock


def retried_key(obs: TelemetryObserver, clock: FakeClock, *, flush=lambda: None, announced: bool = False) -> None:
    """``default/web``'s story (and ``default/other``'s beside it) on ``clock``, 5 ms of backoff and
    all; ``flush`` between the steps puts them in frames of their own, as a live worker's 50 ms
    batches do. ``announced``: the caller announced the informers and the controller already."""
    if not announced:
        announce(obs)
        flush()
    created = {"kind": "event", "key": KEY, "type": ControllerEvent.CREATE, "source": SOURCE, "rv": "101"}
    object_event(obs, KEY, podset(101, 0), event=ControllerEvent.CREATE)
    obs.on_queue(CONTROLLER, op=QueueOp.ADD, key=KEY, depth=1)
    object_event(obs, OTHER, podset(102, 0, "other"), event=ControllerEvent.CREATE)
    obs.on_queue(CONTROLLER, op=QueueOp.ADD, key=OTHER, depth=2)
    flush()
    clock.step(0.003)
    attempt(obs, clock, KEY, triggers=[{**created, "ts": 0}], result=ReconcileResult.ERROR,
            error='Conflict: the object has been modified; please apply your changes to the latest version', write_rv="103")
    # The status write comes back: an update its own controller caused, which queues the key again...
    clock.step(0.001)
    object_event(obs, KEY, podset(103, 1), event=ControllerEvent.UPDATE, old=podset(101, 0),
                 diff=["status.readyReplicas"], self_caused=True)
    obs.on_queue(CONTROLLER, op=QueueOp.ADD, key=KEY, depth=1)
    clock.step(0.001)
    attempt(obs, clock, OTHER, triggers=[], result=ReconcileResult.SUCCESS, write_rv="104")
    flush()
    # ... before the limiter's 5 ms are over: the delaying queue's add finds it queued already.
    clock.step(0.006)
    obs.on_queue(CONTROLLER, op=QueueOp.DEDUP, key=KEY, depth=1)
    flush()
    clock.step(0.001)
    attempt(obs, clock, KEY, triggers=[
        {"kind": "retry", "ts": 0, "result": ReconcileResult.ERROR, "delay": None},
        {"kind": "event", "ts": 0, "key": KEY, "type": ControllerEvent.UPDATE, "source": SOURCE, "rv": "103",
         "diff": ["status.readyReplicas"], "self": True}], result=ReconcileResult.SUCCESS)
    flush()
