"""Observer plumbing: the no-op default is skipped, FanoutObserver forwards every hook, and
MetricsObserver maps reconcile results onto controller-runtime's series."""

from __future__ import annotations

from controllers.informers import SharedInformer
from controllers.observer import NOOP_OBSERVER, FanoutObserver, GuardedObserver, Observer, active_observer, listens
from controllers.reconcile import MetricsObserver
from tests.runtime.conftest import RecordingObserver
from tests.runtime.informers.fake_apiserver import FakeApiServer


def test_fanout_forwards_every_hook_to_every_observer() -> None:
    first, second = RecordingObserver(), RecordingObserver()
    fan = FanoutObserver(first, None, NOOP_OBSERVER, second)
    assert fan.observers == [first, second]
    hooks = [name for name in vars(Observer) if name.startswith("on_")]
    for hook in hooks:
        getattr(fan, hook)("x", marker=hook)
    assert [h for h, _, _ in first.calls] == hooks == [h for h, _, _ in second.calls]


def test_fanout_of_nothing_is_a_cheap_no_op() -> None:
    fan = FanoutObserver(None, NOOP_OBSERVER)
    fan.on_queue("q", op="add", key="k", depth=1)
    assert fan.observers == []


def value(metrics: MetricsObserver, metric: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(metric, labels) or 0.0


def test_metrics_count_terminal_and_panic_as_errors(clock) -> None:
    m = MetricsObserver(clock=clock)
    for result in ("success", "error", "terminal", "panic", "requeue", "requeue_after"):
        m.on_reconcile_start("c", key="k", worker=0)
        m.on_reconcile_end("c", key="k", worker=0, duration=0.01, result=result)
    assert value(m, "controller_runtime_reconcile_total", controller="c", result="error") == 3
    assert value(m, "controller_runtime_reconcile_total", controller="c", result="success") == 1
    assert value(m, "controller_runtime_reconcile_errors_total", controller="c") == 3
    assert value(m, "controller_runtime_terminal_reconcile_errors_total", controller="c") == 1
    assert value(m, "controller_runtime_reconcile_panics_total", controller="c") == 1
    assert value(m, "controller_runtime_active_workers", controller="c") == 0
    assert value(m, "controller_runtime_reconcile_time_seconds_count", controller="c") == 6


def test_metrics_follow_the_workqueue(clock) -> None:
    m = MetricsObserver(clock=clock)
    m.register_controller("c", 1)
    m.on_queue("c", op="add", key="a", depth=1)
    m.on_queue("c", op="dedup", key="a", depth=1)
    m.on_queue("c", op="get", key="a", depth=0, duration=0.5)
    clock.step(3)
    assert value(m, "workqueue_longest_running_processor_seconds", name="c", controller="c") == 3
    m.on_queue("c", op="defer", key="a", depth=0)
    m.on_queue("c", op="done", key="a", depth=0, duration=3)
    m.on_queue("c", op="requeue", key="a", depth=1)
    m.on_queue("c", op="add_rate_limited", key="b", depth=1, delay=0.005, requeues=1)
    assert value(m, "workqueue_adds_total", name="c", controller="c") == 2
    assert value(m, "workqueue_retries_total", name="c", controller="c") == 1
    assert value(m, "workqueue_depth", name="c", controller="c") == 1
    assert value(m, "workqueue_unfinished_work_seconds", name="c", controller="c") == 0
    assert value(m, "workqueue_queue_duration_seconds_sum", name="c", controller="c") == 0.5


def test_active_observer_skips_the_default_and_guards_the_rest(caplog) -> None:
    class Broken(Observer):
        def on_queue(self, queue: str, **kwargs: object) -> None:
            raise RuntimeError("observer bug")

    assert active_observer(None) is None and active_observer(NOOP_OBSERVER) is None
    guarded = active_observer(Broken())
    assert isinstance(guarded, GuardedObserver)
    guarded.on_queue("q", op="add", key="k", depth=1)  # logged, not raised
    assert "observer Broken.on_queue failed" in caplog.text
    assert guarded.on_store.__func__ is Observer.on_store  # not overridden: stays the plain no-op
    fan = FanoutObserver(Broken(), RecordingObserver())
    assert active_observer(fan) is fan
    fan.on_queue("q", op="add", key="k", depth=1)
    assert fan.observers[1].ops("on_queue") == ["add"], "one failing observer does not starve the others"


class OnlyLists(Observer):
    def on_list(self, informer: str, **_: object) -> None:
        pass


def test_listens_says_which_hooks_can_do_anything() -> None:
    assert not listens(None, "on_fifo") and not listens(NOOP_OBSERVER, "on_fifo")
    assert listens(OnlyLists(), "on_list") and not listens(OnlyLists(), "on_fifo")
    assert listens(GuardedObserver(OnlyLists()), "on_list") and not listens(GuardedObserver(OnlyLists()), "on_fifo")
    # The Manager's default: metrics take queue and reconcile hooks, no informer hook.
    manager = FanoutObserver(None, MetricsObserver())
    assert listens(manager, "on_queue") and listens(manager, "on_reconcile_end")
    assert not any(listens(manager, h) for h in ("on_watch_event", "on_fifo", "on_store", "on_handler"))
    assert listens(FanoutObserver(MetricsObserver(), OnlyLists()), "on_list")
    # An observer that answers hooks dynamically is taken to listen to all of them.
    assert listens(RecordingObserver(), "on_fifo") and listens(FanoutObserver(RecordingObserver()), "on_store")


def test_an_informer_under_the_managers_default_observer_makes_no_per_event_hook_call() -> None:
    # With FanoutObserver(metrics) every informer event went through five fanned-out no-op calls
    # (watch event, FIFO queued and popped, store, handler, the last one timed); none is made now.
    informer = SharedInformer(FakeApiServer(), observer=FanoutObserver(None, MetricsObserver()))
    registration = informer.add_event_handler(on_add=lambda obj: None)
    try:
        assert informer.fifo._on_fifo is None and informer.indexer._obs is None and registration._obs is None
    finally:
        registration.stop()
    recorded = SharedInformer(FakeApiServer(), observer=FanoutObserver(MetricsObserver(), RecordingObserver()))
    assert recorded.fifo._on_fifo is not None and recorded.indexer._obs is not None
