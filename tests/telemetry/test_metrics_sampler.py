"""MetricsSampler: a real MetricsObserver registry sampled on a fake clock, published through a real
RedisPublisher to a real Redis."""

from __future__ import annotations

import time

import pytest
from prometheus_client import Counter

from controllers.clock import FakeClock
from controllers.metrics import FAMILIES, QUEUE_BUCKETS, RECONCILE_BUCKETS, MetricsObserver
from controllers.telemetry.metrics_sampler import MetricsSampler
from tests.conftest import wait_until
from tests.telemetry.test_publisher import read_snapshot, read_stream

TOPIC = "w/w1/metrics"


def reconcile(metrics: MetricsObserver, controller: str, *, duration: float, result: str) -> None:
    """What the runtime reports for one key going through the queue and Reconcile."""
    metrics.on_queue(controller, op="add", key="default/a", depth=1)
    metrics.on_queue(controller, op="get", key="default/a", depth=0, duration=0.002)
    metrics.on_reconcile_start(controller, key="default/a", worker=0)
    metrics.on_reconcile_end(controller, key="default/a", worker=0, duration=duration, result=result)
    metrics.on_queue(controller, op="done", key="default/a", depth=0, duration=duration)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def metrics(clock: FakeClock) -> MetricsObserver:
    m = MetricsObserver(clock=clock)
    m.register_controller("podset", 2)
    return m


def test_each_tick_publishes_one_sample_record_and_the_latest_state(clock, metrics, publisher_factory, redis_url,
                                                                    prefix):
    pub = publisher_factory()
    sampler = MetricsSampler(metrics.registry, pub, topic=TOPIC, families=FAMILIES, clock=clock,
                             stages=lambda: {"informers": {"pods": {"watch": 7}}}).start()
    try:
        wait_until(lambda: sampler.samples == 1, what="the first tick, at once")
        reconcile(metrics, "podset", duration=0.02, result="success")
        assert clock.wait_for_waiters()
        clock.step(1.0)
        wait_until(lambda: sampler.samples == 2, what="the tick one second later")
        assert clock.wait_for_waiters()
        clock.step(0.5)
        assert clock.wait_for_waiters() and sampler.samples == 2, "no tick before the interval is up"
    finally:
        sampler.stop()
    pub.flush()
    records = [r for _, frame in read_stream(redis_url, prefix, TOPIC) for r in frame["r"]]
    assert [r["ts"] for r in records] == [1_700_001_000_000, 1_700_001_001_000]
    first, second = (r["families"]["podset"] for r in records)
    assert set(first) == set(FAMILIES), "every series exists from the start, at zero (controller-runtime's initMetrics)"
    assert first["controller_runtime_reconcile_total"] == dict.fromkeys(("error", "requeue_after", "requeue", "success"), 0)
    assert first["controller_runtime_reconcile_time_seconds"] == {"b": [], "sum": 0}
    assert first["controller_runtime_max_concurrent_reconciles"] == 2
    assert second["controller_runtime_reconcile_total"] == {"error": 0, "requeue_after": 0, "requeue": 0, "success": 1}
    assert second["workqueue_adds_total"] == 1 and second["workqueue_depth"] == 0
    assert records[1]["stages"] == {"informers": {"pods": {"watch": 7}}}
    _, state = read_snapshot(redis_url, prefix, TOPIC)
    assert state["latest"] == records[-1], "a page that takes only the snapshot gets the current values"
    assert state["buckets"] == {"controller_runtime_reconcile_time_seconds": list(RECONCILE_BUCKETS),
                                "workqueue_queue_duration_seconds": list(QUEUE_BUCKETS),
                                "workqueue_work_duration_seconds": list(QUEUE_BUCKETS)}


def test_series_are_grouped_by_controller_and_histograms_sent_as_bucket_counts(clock, metrics, publisher_factory):
    metrics.register_controller("deployment-summary", 1)
    for duration, result in ((0.003, "success"), (0.04, "error"), (0.04, "terminal"), (2.2, "requeue_after")):
        reconcile(metrics, "podset", duration=duration, result=result)
    metrics.on_queue("podset", op="add_rate_limited", key="default/a", depth=0, delay=0.005, requeues=1)
    metrics.on_queue("podset", op="get", key="default/b", depth=0, duration=0.001)  # b is being processed
    clock.step(0.25)
    sample = MetricsSampler(metrics.registry, publisher_factory(), topic=TOPIC, families=FAMILIES,
                            clock=clock).sample()
    assert set(sample["families"]) == {"podset", "deployment-summary"}
    podset = sample["families"]["podset"]
    assert podset["controller_runtime_reconcile_total"] == {"success": 1, "error": 2, "requeue_after": 1, "requeue": 0}
    assert podset["controller_runtime_reconcile_errors_total"] == 2
    assert podset["controller_runtime_terminal_reconcile_errors_total"] == 1
    assert podset["controller_runtime_reconcile_panics_total"] == 0
    # Buckets 0.005 (one), 0.05 (two), 2.5 (one): index 0, 3 and 21 of RECONCILE_BUCKETS; nothing after.
    hist = podset["controller_runtime_reconcile_time_seconds"]
    assert len(hist["b"]) == RECONCILE_BUCKETS.index(2.5) + 1 and sum(hist["b"]) == 4
    assert [i for i, n in enumerate(hist["b"]) if n] == [0, 3, RECONCILE_BUCKETS.index(2.5)]
    assert hist["b"][3] == 2 and hist["sum"] == pytest.approx(2.283)
    assert podset["workqueue_retries_total"] == 1
    # Gets after 1 ms (le=0.001, index 5) and 2 ms (le=0.01): per-bucket counts, not cumulative.
    assert podset["workqueue_queue_duration_seconds"]["b"][5:] == [1, 4]
    assert podset["workqueue_unfinished_work_seconds"] == 0.25 == podset["workqueue_longest_running_processor_seconds"]
    assert podset["controller_runtime_active_workers"] == 0
    idle = sample["families"]["deployment-summary"]
    assert set(idle) == set(FAMILIES) and idle["controller_runtime_max_concurrent_reconciles"] == 1
    assert idle["workqueue_work_duration_seconds"] == {"b": [], "sum": 0} and idle["workqueue_adds_total"] == 0


def test_only_the_named_families_are_collected(clock, metrics, publisher_factory):
    Counter("unrelated_total", "not a controller-runtime family", ["controller"], registry=metrics.registry).labels(
        "podset").inc()
    reconcile(metrics, "podset", duration=0.01, result="success")
    sampler = MetricsSampler(metrics.registry, publisher_factory(), topic=TOPIC, clock=clock,
                             families=["workqueue_depth", "controller_runtime_reconcile_time_seconds"])
    assert set(sampler.sample()["families"]["podset"]) == {"workqueue_depth", "controller_runtime_reconcile_time_seconds"}
    started = time.perf_counter()
    full = MetricsSampler(metrics.registry, publisher_factory(), topic=TOPIC, families=FAMILIES, clock=clock)
    for _ in range(200):
        full.sample()
    per_sample = (time.perf_counter() - started) / 200
    print(f"\nsampling {len(FAMILIES)} families of one controller: {per_sample * 1e6:.0f} µs per sample")
    assert "unrelated_total" not in str(full.sample())
    assert per_sample < 0.02, "sampling once a second must stay cheap"


def test_a_late_tick_is_skipped_not_made_up_in_a_burst(clock, metrics, publisher_factory):
    sampler = MetricsSampler(metrics.registry, publisher_factory(), topic=TOPIC, families=FAMILIES,
                             clock=clock).start()
    try:
        wait_until(lambda: sampler.samples == 1, what="the first tick")
        assert clock.wait_for_waiters()
        clock.step(3.5)  # the thread was starved for three intervals
        wait_until(lambda: sampler.samples == 2, what="one tick for the late ones")
        assert clock.wait_for_waiters()
        assert sampler.samples == 2
        clock.step(0.99)
        assert clock.wait_for_waiters() and sampler.samples == 2
        clock.step(0.01)  # one interval after the late tick, not on the old schedule
        wait_until(lambda: sampler.samples == 3, what="the next tick")
    finally:
        sampler.stop()
    assert not sampler._loop.is_alive(), "stop wakes the thread at once, whatever the clock"


def test_bad_arguments_are_refused(metrics, publisher_factory):
    pub = publisher_factory()
    with pytest.raises(ValueError, match="interval"):
        MetricsSampler(metrics.registry, pub, topic=TOPIC, families=FAMILIES, interval=0)
    with pytest.raises(ValueError, match="no metric families"):
        MetricsSampler(metrics.registry, pub, topic=TOPIC, families=[])
    with pytest.raises(ValueError, match="maxlen"):
        MetricsSampler(metrics.registry, pub, topic=TOPIC, families=FAMILIES, retention=0)
    with pytest.raises(ValueError, match="latest_every"):
        MetricsSampler(metrics.registry, pub, topic=TOPIC, families=FAMILIES, latest_every=0)


def test_the_latest_state_is_refreshed_every_n_ticks_and_on_stop_so_frames_carry_each_sample_once(
        clock, metrics, publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    sampler = MetricsSampler(metrics.registry, pub, topic=TOPIC, families=FAMILIES, clock=clock,
                             latest_every=3)
    latest = []
    for _ in range(5):
        sampler.tick()
        pub.flush()  # one frame per tick, as a second apart they are
        latest.append(read_snapshot(redis_url, prefix, TOPIC)[1]["latest"]["ts"])
        clock.step(1.0)
    frames = [frame for _, frame in read_stream(redis_url, prefix, TOPIC)]
    records = [r for frame in frames for r in frame["r"]]
    ts = [r["ts"] for r in records]
    assert len(records) == 5
    assert latest == [ts[0], ts[0], ts[0], ts[3], ts[3]], "refreshed at ticks 0 and 3 only"
    assert sum("latest" in (frame.get("s") or {}) for frame in frames) <= 2, "no frame repeats its sample as state"
    sampler.stop()
    pub.flush()
    assert read_snapshot(redis_url, prefix, TOPIC)[1]["latest"] == records[4], "stopping publishes the final values"
