"""RateLimitingQueue: add_rate_limited = add_after(limiter.when), forget, num_requeues."""

from __future__ import annotations

import pytest

from controllers.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue


def test_add_rate_limited_backs_off_exponentially(clock, eventually) -> None:
    q = RateLimitingQueue(rate_limiter=ItemExponentialFailureRateLimiter(1.0, 60.0), clock=clock)
    q.add_rate_limited("a")
    assert q.waiting() == [("a", 1.0)]
    clock.step(1)
    eventually(lambda: len(q) == 1)
    key, _ = q.get()
    q.done(key)
    q.add_rate_limited("a")
    assert q.waiting() == [("a", 2.0)]
    assert q.num_requeues("a") == 2
    q.shut_down()


def test_forget_resets_requeues_but_keeps_the_key_queued(clock) -> None:
    q = RateLimitingQueue(rate_limiter=ItemExponentialFailureRateLimiter(1.0, 60.0), clock=clock)
    q.add("a")
    q.add_rate_limited("a")
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert len(q) == 1
    q.shut_down()


def test_default_queue_uses_controller_rate_limiter(clock) -> None:
    q = RateLimitingQueue(clock=clock)
    q.add_rate_limited("a")
    [(key, left)] = q.waiting()
    assert key == "a" and left == pytest.approx(0.005)
    q.shut_down()


def test_observer_sees_rate_limited_delay_and_requeues(clock, observer) -> None:
    q = RateLimitingQueue("q", rate_limiter=ItemExponentialFailureRateLimiter(1.0, 60.0), clock=clock,
                          observer=observer)
    q.add_rate_limited("a")
    q.add_rate_limited("a")
    q.forget("a")
    calls = observer.of("on_queue")
    assert [(c["op"], c.get("delay"), c.get("requeues")) for c in calls] == [
        ("add_rate_limited", 1.0, 1), ("add_rate_limited", 2.0, 2), ("forget", None, 2)]
    q.shut_down()


def test_items_show_waiting_keys_and_requeues_per_key(clock) -> None:
    q = RateLimitingQueue("q", rate_limiter=ItemExponentialFailureRateLimiter(1.0, 60.0), clock=clock)
    q.add_rate_limited("a")
    q.add_rate_limited("a")  # a 2 s delay: the key keeps its earlier ready time
    q.add("b")
    assert q.items() == {"a": {"requeues": 2, "s": "waiting", "ready_at": clock.wall() * 1000 + 1000.0},
                         "b": {"requeues": 0, "s": "queued"}}
    q.shut_down()
