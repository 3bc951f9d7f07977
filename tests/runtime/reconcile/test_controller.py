"""The reconcile loop: the result table, worker resilience, concurrency, and event mapping."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from controllers.informers.keys import DeletedFinalStateUnknown
from controllers.reconcile import (
    Controller,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
    GenerationChangedPredicate,
    Request,
    Result,
    TerminalError,
)
from controllers.workqueue import ItemExponentialFailureRateLimiter

REQ = Request("default", "web")


class FakeSource:
    """Stands in for a SharedInformer: tests call the registered handlers directly."""

    def __init__(self, synced: bool = True) -> None:
        self.name = "fake"
        self.handlers: list[dict[str, Any]] = []
        self.synced = synced

    def add_event_handler(self, **handlers: Any) -> None:
        self.handlers.append(handlers)

    def has_synced(self) -> bool:
        return self.synced

    def wait_for_sync(self, timeout: float) -> bool:
        return self.synced


def pod(name: str, generation: int = 1, rv: str = "1", owners: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": "default", "name": name, "generation": generation, "resourceVersion": rv}
    if owners is not None:
        meta["ownerReferences"] = owners
    return {"metadata": meta}


def make(clock, reconcile, **kwargs: Any) -> Controller:
    kwargs.setdefault("rate_limiter", ItemExponentialFailureRateLimiter(1.0, 60.0))
    return Controller("test", reconcile, clock=clock, **kwargs)


def run_once(controller: Controller, eventually, request: Request = REQ, total: int = 1) -> None:
    controller.start()
    controller.enqueue(request)
    eventually(lambda: sum(controller.metrics.reconcile_total.values()) >= total
               and not controller.queue._processing)


def test_success_forgets_the_key(clock, eventually) -> None:
    c = make(clock, lambda req: Result())
    c.queue.rate_limiter.when(REQ)
    run_once(c, eventually)
    assert c.metrics.reconcile_total["success"] == 1
    assert c.queue.num_requeues(REQ) == 0
    assert len(c.queue) == 0 and c.queue.waiting() == []
    c.stop()


def test_reconciler_returning_none_is_success(clock, eventually) -> None:
    c = make(clock, lambda req: None)
    run_once(c, eventually)
    assert c.metrics.reconcile_total["success"] == 1
    c.stop()


def test_error_requeues_rate_limited_without_forget(clock, eventually) -> None:
    def reconcile(req: Request) -> Result:
        raise RuntimeError("boom")

    c = make(clock, reconcile)
    run_once(c, eventually)
    assert c.metrics.reconcile_total["error"] == 1
    assert c.metrics.reconcile_errors_total == 1
    assert c.queue.waiting() == [(REQ, 1.0)]
    clock.step(1.0)
    eventually(lambda: c.metrics.reconcile_total["error"] == 2 and c.queue.waiting())
    assert c.queue.waiting() == [(REQ, 2.0)]  # backoff kept growing: no forget on error
    assert c.queue.num_requeues(REQ) == 2
    c.stop()


def test_terminal_error_is_not_requeued(clock, eventually) -> None:
    def reconcile(req: Request) -> Result:
        raise TerminalError("invalid spec")

    c = make(clock, reconcile)
    run_once(c, eventually)
    assert c.metrics.reconcile_total["error"] == 1
    assert c.metrics.terminal_reconcile_errors_total == 1
    assert len(c.queue) == 0 and c.queue.waiting() == []
    c.stop()


def test_requeue_after_forgets_then_adds_after(clock, eventually) -> None:
    c = make(clock, lambda req: Result(requeue_after=30.0))
    c.queue.rate_limiter.when(REQ)
    run_once(c, eventually)
    assert c.metrics.reconcile_total["requeue_after"] == 1
    assert c.queue.num_requeues(REQ) == 0
    assert c.queue.waiting() == [(REQ, 30.0)]
    c.stop()


def test_requeue_after_wins_over_requeue(clock, eventually) -> None:
    c = make(clock, lambda req: Result(requeue=True, requeue_after=5.0))
    run_once(c, eventually)
    assert c.metrics.reconcile_total["requeue_after"] == 1
    c.stop()


def test_requeue_adds_rate_limited(clock, eventually) -> None:
    c = make(clock, lambda req: Result(requeue=True))
    run_once(c, eventually)
    assert c.metrics.reconcile_total["requeue"] == 1
    assert c.queue.num_requeues(REQ) == 1
    assert c.queue.waiting() == [(REQ, 1.0)]
    c.stop()


def test_invalid_return_value_counts_as_panic_and_requeues(clock, eventually) -> None:
    c = make(clock, lambda req: "oops")
    run_once(c, eventually)
    assert c.metrics.reconcile_panics_total == 1
    assert c.metrics.reconcile_total["error"] == 1
    assert c.queue.waiting() == [(REQ, 1.0)]
    c.stop()


def test_exception_never_kills_the_worker(clock, eventually) -> None:
    seen: list[Request] = []

    def reconcile(req: Request) -> Result:
        seen.append(req)
        if req.name == "bad":
            raise KeyError("missing")
        return Result()

    c = make(clock, reconcile)
    c.start()
    c.enqueue(Request("default", "bad"))
    c.enqueue(Request("default", "good"))
    eventually(lambda: c.metrics.reconcile_total["success"] == 1)
    assert [r.name for r in seen] == ["bad", "good"]
    assert all(t.is_alive() for t in c._workers)
    c.stop()


def test_done_always_runs_so_the_key_can_be_processed_again(clock, eventually) -> None:
    def reconcile(req: Request) -> Result:
        raise TerminalError("x")

    c = make(clock, reconcile)
    run_once(c, eventually)
    assert not c.queue._processing
    c.enqueue(REQ)
    eventually(lambda: c.metrics.terminal_reconcile_errors_total == 2)
    c.stop()


def test_one_key_is_never_processed_by_two_workers(clock, eventually) -> None:
    active: dict[Request, int] = {}
    overlaps: list[Request] = []
    lock = threading.Lock()
    release = threading.Event()

    def reconcile(req: Request) -> Result:
        with lock:
            active[req] = active.get(req, 0) + 1
            if active[req] > 1:
                overlaps.append(req)
        release.wait(2)
        with lock:
            active[req] -= 1
        return Result()

    c = make(clock, reconcile, max_concurrent_reconciles=4)
    c.start()
    c.enqueue(REQ)
    eventually(lambda: REQ in c.queue._processing)
    for _ in range(10):
        c.enqueue(REQ)  # arrives while processing: deferred, never handed to a second worker
    assert len(c.queue) == 0
    release.set()
    eventually(lambda: c.metrics.reconcile_total["success"] == 2)
    assert overlaps == []
    c.stop()


def test_max_concurrent_reconciles_runs_different_keys_in_parallel(clock, eventually) -> None:
    barrier = threading.Barrier(3, timeout=5)

    def reconcile(req: Request) -> Result:
        barrier.wait()
        return Result()

    c = make(clock, reconcile, max_concurrent_reconciles=3)
    c.start()
    for i in range(3):
        c.enqueue(Request("default", f"p{i}"))
    eventually(lambda: c.metrics.reconcile_total["success"] == 3)
    c.stop()


def test_start_times_out_when_a_cache_never_syncs(clock) -> None:
    c = make(clock, lambda req: None, cache_sync_timeout=0.01)
    c.watch(FakeSource(synced=False))
    with pytest.raises(TimeoutError):
        c.start()


def test_observer_sees_reconcile_start_and_end_with_result(clock, eventually, observer) -> None:
    def reconcile(req: Request) -> Result:
        clock.step(0.25)
        raise ValueError("nope")

    c = make(clock, reconcile, observer=observer)
    run_once(c, eventually)
    eventually(lambda: observer.of("on_reconcile_end"))
    end = observer.of("on_reconcile_end")[0]
    assert end["result"] == "error" and end["duration"] == 0.25 and end["error"] == "ValueError: nope"
    assert observer.of("on_reconcile_start")[0] == {"key": "default/web", "worker": 0}
    c.stop()


def test_observer_hears_which_informers_a_controller_watches_and_when_its_workers_run(clock, observer) -> None:
    pods, podsets = FakeSource(), FakeSource()
    pods.name, podsets.name = "v1/Pod", "x/v1/PodSet"
    c = make(clock, lambda req: None, observer=observer, max_concurrent_reconciles=2)
    c.watch(podsets)
    c.watch(pods)
    c.start()
    c.stop()
    # Each report also describes the queue's rate limiter (make's: exponential from 1 s to 60 s).
    limiter = {"type": "exponential", "base": 1.0, "max": 60.0}
    assert observer.of("on_controller") == [
        {"watches": ["x/v1/PodSet"], "workers": 2, "started": False, "rate_limiter": limiter},
        {"watches": ["x/v1/PodSet", "v1/Pod"], "workers": 2, "started": False, "rate_limiter": limiter},
        {"watches": ["x/v1/PodSet", "v1/Pod"], "workers": 2, "started": True, "rate_limiter": limiter},
        {"watches": ["x/v1/PodSet", "v1/Pod"], "workers": 2, "started": False, "rate_limiter": limiter}]


def test_handler_names_tell_a_controllers_for_owns_and_watches_handlers_apart(clock) -> None:
    """One controller may watch one informer twice (a ConfigMap mirror is For ConfigMaps and Owns
    ConfigMaps): each handler is named for the builder method that would install it."""
    configmaps = FakeSource()
    c = make(clock, lambda req: None)
    c.watch(configmaps)
    c.watch(configmaps, handler=EnqueueRequestForOwner("v1", "ConfigMap"))
    c.watch(configmaps, handler=EnqueueRequestsFromMapFunc(lambda obj: []))
    assert [h["name"] for h in configmaps.handlers] == [
        "controller/test (For)", "controller/test (Owns)", "controller/test (Watches)"]


def test_generation_changed_predicate_filters_status_updates(clock, observer) -> None:
    c = make(clock, lambda req: None, observer=observer)
    source = FakeSource()
    c.watch(source, predicates=[GenerationChangedPredicate()])
    on_update = source.handlers[0]["on_update"]
    on_update(pod("web", generation=1, rv="1"), pod("web", generation=1, rv="2"))
    assert len(c.queue) == 0
    on_update(pod("web", generation=1, rv="2"), pod("web", generation=2, rv="3"))
    assert c.queue.get()[0] == REQ
    events = observer.of("on_event")
    assert events[0]["filtered_by"] == "GenerationChangedPredicate"
    assert events[1]["requests"] == ["default/web"]


def test_generation_changed_predicate_passes_an_update_that_is_another_object_under_the_same_name(clock) -> None:
    """Regression (tests/chaos): a PodSet deleted and created again while the informer was cut off
    reaches it as one update (the relist) from the old object to the new, both at generation 1; the
    predicate dropped it, and nothing ever reconciled the new PodSet."""
    c = make(clock, lambda req: None)
    source = FakeSource()
    c.watch(source, predicates=[GenerationChangedPredicate()])
    old, new = pod("web", generation=1, rv="5"), pod("web", generation=1, rv="9")
    old["metadata"]["uid"], new["metadata"]["uid"] = "uid-old", "uid-new"
    source.handlers[0]["on_update"](old, new)
    assert c.queue.get()[0] == REQ
    same = pod("web", generation=1, rv="10")
    same["metadata"]["uid"] = "uid-new"
    source.handlers[0]["on_update"](new, same)
    assert len(c.queue) == 0


def test_create_and_delete_events_enqueue_the_object(clock) -> None:
    c = make(clock, lambda req: None)
    source = FakeSource()
    c.watch(source)
    source.handlers[0]["on_add"](pod("a"))
    source.handlers[0]["on_delete"](pod("b"))
    assert [c.queue.get()[0].name for _ in range(2)] == ["a", "b"]


def test_delete_with_tombstone_enqueues_the_last_known_object(clock) -> None:
    c = make(clock, lambda req: None)
    source = FakeSource()
    c.watch(source)
    source.handlers[0]["on_delete"](DeletedFinalStateUnknown("default/gone", pod("gone")))
    assert c.queue.get()[0] == Request("default", "gone")


def test_enqueue_for_owner_maps_to_the_controller_owner(clock) -> None:
    c = make(clock, lambda req: None)
    source = FakeSource()
    c.watch(source, EnqueueRequestForOwner("apps/v1", "ReplicaSet"))
    owners = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs-1", "controller": True},
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs-2"},
        {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "controller": True},
    ]
    source.handlers[0]["on_add"](pod("p", owners=owners))
    assert c.queue.get()[0] == Request("default", "rs-1")
    assert len(c.queue) == 0


def test_enqueue_for_owner_update_enqueues_old_and_new_owners(clock) -> None:
    c = make(clock, lambda req: None)
    source = FakeSource()
    c.watch(source, EnqueueRequestForOwner("apps/v1", "ReplicaSet", only_controller=False))
    old = pod("p", owners=[{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "old"}])
    new = pod("p", owners=[{"apiVersion": "apps/v1beta2", "kind": "ReplicaSet", "name": "new"}])
    source.handlers[0]["on_update"](old, new)
    assert {c.queue.get()[0].name for _ in range(2)} == {"old", "new"}


def test_a_reconciler_class_works_like_a_function(clock, eventually) -> None:
    class Reconciler:
        def __init__(self) -> None:
            self.seen: list[Request] = []

        def reconcile(self, request: Request) -> Result:
            self.seen.append(request)
            return Result()

    reconciler = Reconciler()
    c = make(clock, reconciler)
    run_once(c, eventually)
    assert reconciler.seen == [REQ]
    c.stop()


def test_snapshot_reports_queue_and_counters(clock, eventually) -> None:
    def reconcile(req: Request) -> Result:
        raise RuntimeError("x")

    c = make(clock, reconcile)
    run_once(c, eventually)
    snap = c.snapshot()
    assert snap["errors"] == 1 and snap["reconcile_total"]["error"] == 1
    assert snap["queue"] == {"default/web": {"requeues": 1, "s": "waiting", "ready_at": clock.wall() * 1000 + 1000.0}}
    c.stop()


def test_map_func_handler_enqueues_what_the_function_returns(clock) -> None:
    c = make(clock, lambda req: None)
    source = FakeSource()
    c.watch(source, EnqueueRequestsFromMapFunc(lambda obj: [Request("default", "svc-" + obj["metadata"]["name"])]))
    source.handlers[0]["on_update"](pod("old"), pod("new"))
    assert {c.queue.get()[0].name for _ in range(2)} == {"svc-old", "svc-new"}
