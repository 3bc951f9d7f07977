"""The basic workqueue rules: dedup, add-while-processing, shutdown and drain."""

from __future__ import annotations

import threading

from controllers.observer import Observer
from controllers.workqueue import Queue


def test_add_of_queued_key_is_deduplicated() -> None:
    q = Queue()
    q.add("a")
    q.add("b")
    q.add("a")
    assert len(q) == 2
    assert q.get() == ("a", False)
    assert q.get() == ("b", False)


def test_keys_come_out_in_first_add_order() -> None:
    q = Queue()
    for key in ["c", "a", "b", "a", "c"]:
        q.add(key)
    assert [q.get()[0] for _ in range(3)] == ["c", "a", "b"]


def test_add_while_processing_requeues_after_done() -> None:
    q = Queue()
    q.add("a")
    key, _ = q.get()
    q.add("a")
    assert len(q) == 0, "a key being processed must not be queued"
    q.done(key)
    assert len(q) == 1
    assert q.get() == ("a", False)


def test_add_while_processing_twice_requeues_once() -> None:
    q = Queue()
    q.add("a")
    q.get()
    q.add("a")
    q.add("a")
    q.done("a")
    assert len(q) == 1


def test_done_without_new_add_does_not_requeue() -> None:
    q = Queue()
    q.add("a")
    q.get()
    q.done("a")
    assert len(q) == 0


def test_get_blocks_until_add(eventually) -> None:
    q = Queue()
    got: list[object] = []
    t = threading.Thread(target=lambda: got.append(q.get()))
    t.start()
    eventually(lambda: q._getters == 1)
    q.add("x")
    t.join(2)
    assert got == [("x", False)]


def test_shut_down_ignores_new_adds_and_hands_out_remaining_keys() -> None:
    q = Queue()
    q.add("a")
    q.shut_down()
    q.add("b")
    assert q.shutting_down()
    assert q.get() == ("a", False)
    assert q.get() == (None, True)


def test_shut_down_wakes_blocked_getters() -> None:
    q = Queue()
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(q.get())) for _ in range(3)]
    for t in threads:
        t.start()
    q.shut_down()
    for t in threads:
        t.join(2)
    assert results == [(None, True)] * 3


def test_shut_down_with_drain_waits_for_processing_keys(eventually) -> None:
    q = Queue()
    q.add("a")
    q.get()
    returned = threading.Event()
    t = threading.Thread(target=lambda: (q.shut_down_with_drain(), returned.set()))
    t.start()
    eventually(q.shutting_down)
    assert not returned.wait(0.05)
    q.done("a")
    assert returned.wait(2)


def test_shut_down_after_drain_stops_waiting(eventually) -> None:
    q = Queue()
    q.add("a")
    q.get()
    t = threading.Thread(target=q.shut_down_with_drain)
    t.start()
    eventually(q.shutting_down)
    q.shut_down()
    t.join(2)
    assert not t.is_alive()


def test_dirty_key_processing_at_shutdown_is_still_handed_out_after_done() -> None:
    q = Queue()
    q.add("a")
    q.get()
    q.add("a")
    q.shut_down()
    q.done("a")
    assert q.get() == ("a", False)
    assert q.get() == (None, True)


def test_observer_sees_add_dedup_defer_get_done(clock, observer) -> None:
    q = Queue("q", clock=clock, observer=observer)
    q.add("a")
    q.add("a")
    clock.step(2)
    q.get()
    q.add("a")
    clock.step(3)
    q.done("a")
    assert observer.ops("on_queue") == ["add", "dedup", "get", "defer", "done", "requeue"]
    queue_calls = observer.of("on_queue")
    assert queue_calls[2]["duration"] == 2  # first add -> get
    assert queue_calls[4]["duration"] == 3  # get -> done


def test_default_observer_is_skipped() -> None:
    q = Queue()
    assert q._obs is None


def test_items_show_queued_processing_and_dirty_keys() -> None:
    q = Queue("q")
    q.add("a")
    q.add("b")
    q.get()
    q.add("a")
    assert q.items() == {"b": {"requeues": 0, "s": "queued"}, "a": {"requeues": 0, "s": "processing", "dirty": True}}


def test_a_raising_observer_is_contained_and_cannot_strand_a_key(clock) -> None:
    class Broken(Observer):
        def on_queue(self, queue: str, **kwargs: object) -> None:
            raise RuntimeError("observer bug")

    q = Queue("q", clock=clock, observer=Broken())
    q.add("a")
    assert q.get() == ("a", False)
    q.add("a")
    q.done("a")
    assert q.get() == ("a", False), "the key added while processing was still re-queued"
