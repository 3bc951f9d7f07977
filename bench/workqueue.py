"""Workqueue throughput: add + get + done cycles per second, single-threaded.

Compares ctrlscope's ``Queue`` (and ``RateLimitingQueue``, which real controllers use) with the
obvious hand-rolled peer, a ``queue.Queue`` plus a ``set`` for dedup, and shows what observation
costs: the default no-op observer (detected and skipped), an Observer subclass that overrides nothing
(every hook is a real no-op call), and a counting observer. Run: ``python bench/workqueue.py``.
"""

from __future__ import annotations

import argparse
import queue
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from controllers.observer import Observer  # noqa: E402
from controllers.workqueue import Queue, RateLimitingQueue  # noqa: E402


class CallingNoopObserver(Observer):
    """Overrides nothing, but is not the base class: every hook is actually called."""


class CountingObserver(Observer):
    """Counts workqueue operations by kind, as a cheap real observer would."""

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def on_queue(self, queue: str, *, op: str, key: str, depth: int, delay: float | None = None,
                 requeues: int | None = None, duration: float | None = None) -> None:
        self.counts[op] = self.counts.get(op, 0) + 1


def baseline_cycles(n: int, keys: list[Any]) -> float:
    q: queue.Queue[Any] = queue.Queue()
    dirty: set[Any] = set()
    start = time.perf_counter()
    for key in keys:
        if key not in dirty:
            dirty.add(key)
            q.put(key)
        item = q.get()
        dirty.discard(item)
        q.task_done()
    return n / (time.perf_counter() - start)


def ctrlscope_cycles(make: Callable[[], Queue], n: int, keys: list[Any]) -> float:
    q = make()
    add, get, done = q.add, q.get, q.done
    start = time.perf_counter()
    for key in keys:
        add(key)
        item, _ = get()
        done(item)
    elapsed = time.perf_counter() - start
    q.shut_down()
    return n / elapsed


def hook_call_cost(calls: int = 200_000) -> float:
    """Seconds per call of a hook an Observer subclass does not override (best of 3)."""
    observer = CallingNoopObserver()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            observer.on_queue("b", op="add", key="default/pod-1", depth=1)
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def best_of(runs: int, fn: Callable[[], float]) -> float:
    return max(fn() for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=200_000, help="cycles per run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    n = args.n
    keys = [f"default/pod-{i % 1000}" for i in range(n)]

    rows: list[tuple[str, float]] = [
        ("queue.Queue + set (peer)", best_of(args.runs, lambda: baseline_cycles(n, keys))),
        ("Queue, default observer", best_of(args.runs, lambda: ctrlscope_cycles(lambda: Queue("b"), n, keys))),
        ("Queue, no-op subclass observer",
         best_of(args.runs, lambda: ctrlscope_cycles(lambda: Queue("b", observer=CallingNoopObserver()), n, keys))),
        ("Queue, counting observer",
         best_of(args.runs, lambda: ctrlscope_cycles(lambda: Queue("b", observer=CountingObserver()), n, keys))),
        ("RateLimitingQueue, default observer",
         best_of(args.runs, lambda: ctrlscope_cycles(lambda: RateLimitingQueue("b"), n, keys))),
        ("RateLimitingQueue, counting observer",
         best_of(args.runs,
                 lambda: ctrlscope_cycles(lambda: RateLimitingQueue("b", observer=CountingObserver()), n, keys))),
    ]
    reference = rows[1][1]
    print(f"workqueue: add+get+done cycles/s, single thread, {n:,} cycles, best of {args.runs}")
    print(f"{'implementation':<40}{'cycles/s':>12}{'us/cycle':>10}{'vs default':>12}")
    for name, rate in rows:
        print(f"{name:<40}{rate:>12,.0f}{1e6 / rate:>10.2f}{rate / reference:>11.2f}x")
    per_call = hook_call_cost()
    print(f"default no-op observer: detected at construction and skipped (0 calls/cycle). A no-op hook call "
          f"costs {per_call * 1e6:.2f} us, so 3 calls/cycle would be {3 * per_call * reference * 100:.0f}% of a "
          f"default cycle. Target >= 200,000 cycles/s: {'met' if reference >= 200_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
