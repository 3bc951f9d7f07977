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
