"""Rate limiters: exponential doubling to the cap, token bucket, fast/slow, max-of, the default."""

from __future__ import annotations

import pytest

from controllers.workqueue import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    ItemFastSlowRateLimiter,
    MaxOfRateLimiter,
    default_controller_rate_limiter,
    describe_rate_limiter,
)


def test_exponential_doubles_from_base_per_key() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    assert [limiter.when("a") for _ in range(4)] == [0.005, 0.01, 0.02, 0.04]
    assert limiter.when("b") == 0.005
    assert limiter.num_requeues("a") == 4


def test_exponential_is_capped_at_max_delay() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(30)]
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655 s, still below the cap
    assert delays[18] == 1000.0
    assert delays[-1] == 1000.0


def test_exponential_survives_huge_failure_counts() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    limiter._failures["a"] = 5000
    assert limiter.when("a") == 1000.0


def test_forget_resets_the_backoff() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    limiter.when("a")
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == 0.005


def test_bucket_allows_burst_then_spaces_at_qps(clock) -> None:
    limiter = BucketRateLimiter(10.0, 100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert limiter.when("x") == pytest.approx(0.1)
    assert limiter.when("y") == pytest.approx(0.2)


def test_bucket_refills_with_time_up_to_burst(clock) -> None:
    limiter = BucketRateLimiter(10.0, 100, clock=clock)
    for i in range(100):
        limiter.when(i)
    clock.step(1.0)  # 10 tokens back
    assert [limiter.when(i) for i in range(10)] == [0.0] * 10
    assert limiter.when("x") == pytest.approx(0.1)
    clock.step(3600)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert limiter.when("x") > 0


def test_bucket_does_not_track_keys(clock) -> None:
    limiter = BucketRateLimiter(10.0, 1, clock=clock)
    limiter.when("a")
    limiter.when("a")
    assert limiter.num_requeues("a") == 0


def test_fast_slow_switches_after_max_fast_attempts() -> None:
    limiter = ItemFastSlowRateLimiter(0.1, 5.0, 3)
    assert [limiter.when("a") for _ in range(5)] == [0.1, 0.1, 0.1, 5.0, 5.0]
    assert limiter.num_requeues("a") == 5
    limiter.forget("a")
    assert limiter.when("a") == 0.1


def test_max_of_takes_the_longest_delay_and_records_in_all() -> None:
    fast_slow = ItemFastSlowRateLimiter(0.1, 5.0, 1)
    exponential = ItemExponentialFailureRateLimiter(0.05, 100.0)
    limiter = MaxOfRateLimiter(fast_slow, exponential)
    assert limiter.when("a") == 0.1
    assert limiter.when("a") == 5.0
    assert limiter.num_requeues("a") == 2
    limiter.forget("a")
    assert fast_slow.num_requeues("a") == 0 and exponential.num_requeues("a") == 0


def test_default_controller_rate_limiter_is_exponential_until_the_bucket_runs_dry(clock) -> None:
    limiter = default_controller_rate_limiter(clock=clock)
    assert [limiter.when("a") for _ in range(3)] == [0.005, 0.01, 0.02]
    for i in range(97):
        limiter.when(i)
    # 100 tokens spent; the bucket now dominates a fresh key's 5 ms
    assert limiter.when("fresh") == pytest.approx(0.1)


def test_describe_says_what_each_limiter_is_and_the_derived_delays_are_its_own() -> None:
    """What the dashboard is told (protocol v1.5 RateLimiterSpec) predicts each limiter's delays."""
    from controllers.schema import rate_limiter_delay, rate_limiter_step

    default = default_controller_rate_limiter()
    spec = describe_rate_limiter(default)
    assert spec == {"type": "max_of", "of": [{"type": "exponential", "base": 0.005, "max": 1000.0},
                                             {"type": "bucket", "qps": 10.0, "burst": 100}]}
    for n in range(1, 25):
        delay = default.when("a")
        assert rate_limiter_delay(spec, n) == delay
        assert rate_limiter_step(spec, n, delay) == spec["of"][0]
    fast_slow = ItemFastSlowRateLimiter(0.5, 30.0, 2)
    assert describe_rate_limiter(fast_slow) == {"type": "fast_slow", "fast": 0.5, "slow": 30.0, "fast_attempts": 2}
    assert [rate_limiter_delay(describe_rate_limiter(fast_slow), n) for n in (1, 2, 3)] == [
        fast_slow.when("a") for _ in range(3)]

    class Mine:
        def when(self, item): return 1.0
        def forget(self, item): return None
        def num_requeues(self, item): return 0

    assert describe_rate_limiter(Mine()) == {"type": "other", "name": "Mine"}
