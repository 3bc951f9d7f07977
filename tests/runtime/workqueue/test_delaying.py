"""DelayingQueue: add_after, the min-heap, earlier ready time wins -- all on a fake clock."""

from __future__ import annotations

from controllers.workqueue import DelayingQueue


def test_add_after_non_positive_delay_is_add(clock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert len(q) == 2
    q.shut_down()


def test_add_after_waits_for_the_delay(clock, eventually) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 5)
    assert clock.wait_for_waiters()
    clock.step(4.999)
    assert len(q) == 0
    assert [k for k, _ in q.waiting()] == ["a"]
    clock.step(0.001)
    eventually(lambda: len(q) == 1)
    assert q.waiting() == []
    q.shut_down()


def test_keys_become_ready_in_ready_time_order(clock, eventually) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("late", 3)
    q.add_after("early", 1)
    q.add_after("middle", 2)
    clock.step(5)
    eventually(lambda: len(q) == 3)
    assert [q.get()[0] for _ in range(3)] == ["early", "middle", "late"]
    q.shut_down()


def test_earlier_ready_time_wins_for_a_waiting_key(clock, eventually) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 10)
    q.add_after("a", 2)
    assert [(k, left) for k, left in q.waiting()] == [("a", 2)]
    clock.step(2)
    eventually(lambda: len(q) == 1)
    assert q.waiting() == []
    q.shut_down()


def test_later_ready_time_does_not_postpone_a_waiting_key(clock) -> None:
    q = DelayingQueue(clock=clock)
    q.add_after("a", 2)
    q.add_after("a", 10)
    assert q.waiting() == [("a", 2)]
    q.shut_down()


def test_ready_key_already_queued_is_deduplicated(clock, eventually) -> None:
    q = DelayingQueue(clock=clock)
    q.add("a")
    q.add_after("a", 1)
    clock.step(1)
    eventually(lambda: q.waiting() == [])
    assert len(q) == 1
    q.shut_down()


def test_add_after_is_ignored_after_shutdown(clock) -> None:
    q = DelayingQueue(clock=clock)
    q.shut_down()
    q.add_after("a", 1)
    assert q.waiting() == []


def test_observer_sees_add_after_with_delay(clock, observer) -> None:
    q = DelayingQueue("q", clock=clock, observer=observer)
    q.add_after("a", 1.5)
    assert observer.of("on_queue")[0] == {"op": "add_after", "key": "a", "depth": 0, "delay": 1.5}
    q.shut_down()
