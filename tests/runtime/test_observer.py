"""Observer plumbing: the no-op default is skipped, FanoutObserver forwards every hook, and
MetricsObserver maps reconcile results onto controller-runtime's series."""

from __future__ import annotations

from controllers.observer import NOOP_OBSERVER, FanoutObserver, GuardedObserver, Observer, active_observer
from controllers.reconcile import MetricsObserver
from tests.runtime.conftest import RecordingObserver


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
