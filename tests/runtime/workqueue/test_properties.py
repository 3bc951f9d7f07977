"""Property tests: every key added is processed at least once after its last add, and never by two
workers at once -- for any interleaving of adds, gets and dones by several workers."""

from __future__ import annotations

import random
import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.clock import FakeClock
from controllers.workqueue import DelayingQueue, Queue
from tests.runtime.conftest import wait_until

KEYS = st.sampled_from("abcde")
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), KEYS),
        st.tuples(st.just("get"), st.integers(0, 2)),
        st.tuples(st.just("done"), st.integers(0, 2)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None)
@given(OPS)
def test_every_key_is_processed_after_its_last_add_and_never_concurrently(ops: list[tuple[str, object]]) -> None:
    q = Queue()
    holding: dict[int, str] = {}
    step = 0
    last_add: dict[str, int] = {}
    gets: dict[str, list[int]] = {}

    def get(worker: int) -> None:
        nonlocal step
        key, shutdown = q.get()
        assert not shutdown
        assert key not in holding.values(), "one key handed to two workers"
        holding[worker] = key
        gets.setdefault(key, []).append(step)
        step += 1

    for op, arg in ops:
        if op == "add":
            q.add(arg)
            last_add[arg] = step
            step += 1
        elif op == "get" and arg not in holding and len(q):
            get(arg)
        elif op == "done" and arg in holding:
            q.done(holding.pop(arg))

    # Drain: workers finish what they hold, then process everything left.
    for worker in list(holding):
        q.done(holding.pop(worker))
    while len(q):
        get(0)
        q.done(holding.pop(0))

    for key, added in last_add.items():
        assert any(g > added for g in gets.get(key, [])), f"{key} not processed after its last add"


def test_threaded_workers_never_hold_one_key_together() -> None:
    q = Queue()
    active: set[str] = set()
    guard = threading.Lock()
    violations: list[str] = []
    processed_after: dict[str, int] = {}
    counter = [0]

    def worker() -> None:
        while True:
            key, shutdown = q.get()
            if shutdown:
                return
            with guard:
                if key in active:
                    violations.append(key)
                active.add(key)
                counter[0] += 1
                processed_after[key] = counter[0]
            with guard:
                active.discard(key)
            q.done(key)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    rng = random.Random(7)
    for _ in range(20000):
        q.add(rng.choice("abcdefgh"))
    q.shut_down_with_drain()
    for t in threads:
        t.join(5)
    assert violations == []
    assert set(processed_after) == set("abcdefgh")


ADD_AFTERS = st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0, 5.0])),
                      max_size=30)


@settings(max_examples=100, deadline=None)
@given(ADD_AFTERS, st.sampled_from([0.5, 1.0, 2.0, 5.0]))
def test_delayed_keys_wait_for_their_earliest_ready_time_and_arrive_once(adds: list[tuple[str, float]],
                                                                         step: float) -> None:
    clock = FakeClock()
    q = DelayingQueue(clock=clock)
    ready_at: dict[str, float] = {}
    queued: set[str] = set()
    for key, delay in adds:
        q.add_after(key, delay)
        if delay <= 0:
            queued.add(key)
        else:
            ready_at[key] = min(ready_at.get(key, delay), delay)
    assert dict(q.waiting()) == ready_at  # one entry per key, at its earliest ready time
    assert len(q) == len(queued)
    clock.step(step)
    due = queued | {k for k, d in ready_at.items() if d <= step}
    later = {k for k, d in ready_at.items() if d > step}
    wait_until(lambda: len(q) == len(due) and len(q.waiting()) == len(later))
    got = {q.get()[0] for _ in range(len(due))}
    assert got == due  # each due key exactly once, however often it was added
    assert {k for k, _ in q.waiting()} == later
    q.shut_down()


STORY = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("abc")),
        st.tuples(st.just("get"), st.just("")),
        st.tuples(st.just("done"), st.sampled_from("abc")),
        st.tuples(st.just("add_after"), st.sampled_from("abc"), st.sampled_from([0.5, 1.0, 3.0])),
        st.tuples(st.just("add_rate_limited"), st.sampled_from("abc")),
        st.tuples(st.just("forget"), st.sampled_from("abc")),
        st.tuples(st.just("step"), st.sampled_from([0.5, 1.0, 2.0])),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(STORY)
def test_the_queue_topics_state_folded_from_records_is_the_queues_own_items(story: list[tuple]) -> None:
    """One model, two producers: what the dashboard shows for a queue (its topic's state, folded from
    the queue's records by the protocol's fold_queue_op) is, after every step, what the queue itself
    says it holds (``items()``) -- apart from ``since`` (when the observer saw it) and keys only the
    rate limiter remembers (``idle``)."""
    from controllers.telemetry.publisher import RedisPublisher
    from controllers.telemetry.telemetry_observer import TelemetryObserver
    from controllers.workqueue import ItemExponentialFailureRateLimiter, RateLimitingQueue

    clock = FakeClock()
    publisher = RedisPublisher("redis://127.0.0.1:1/0", clock=clock)  # state mirror only: never flushed
    observer = TelemetryObserver(publisher, worker="w", clock=clock)
    q = RateLimitingQueue("q", clock=clock, observer=observer,
                          rate_limiter=ItemExponentialFailureRateLimiter(0.5, 4.0))
    held: set[str] = set()

    def folded() -> dict:
        state = publisher.state(observer.topic("queue", "q"))
        return {k: {f: (round(v, 3) if f == "ready_at" else v) for f, v in item.items() if f != "since"}
                for k, item in state.items() if item["s"] != "idle"}

    def actual() -> dict:
        return {k: {f: (round(v, 3) if f == "ready_at" else v) for f, v in item.items()} for k, item in q.items().items()}

    try:
        for op, *args in story:
            if op == "add":
                q.add(args[0])
            elif op == "get" and len(q):
                held.add(q.get()[0])
            elif op == "done" and args[0] in held:
                held.discard(args[0])
                q.done(args[0])
            elif op == "add_after":
                q.add_after(args[0], args[1])
            elif op == "add_rate_limited":
                q.add_rate_limited(args[0])
            elif op == "forget":
                q.forget(args[0])
            elif op == "step":
                clock.step(args[0])
                # The delaying queue's thread adds what became due: wait until it has.
                wait_until(lambda: all(left > 0 for _, left in q.waiting()))
            assert folded() == actual(), (op, args)
    finally:
        q.shut_down()
