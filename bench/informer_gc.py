"""Where an informer's CPU goes as the stream grows: CPython's cyclic GC, per cache mode and GC policy.

``bench/informer_scale.py`` shows the factory default (compact cache, GC left alone) slowing as more
Pods stream through; this says why, and what each GC policy buys. Every configuration caches the
same canned ADDED stream (bench/informer.py's ~3.7 KB Pods, served over real HTTP from its own
process) with one handler adding a ``Request`` to a ``RateLimitingQueue``, and reports:

* **CPU per event** -- this process' CPU time (every thread: reflector, informer, handler) over the
  events, so a busy machine inflates it far less than wall-clock rates;
* **GC share** -- the CPU time spent inside collections (``gc.callbacks``, the collecting thread's
  ``thread_time``), and how many collections of each generation ran;
* the deepest **backlog** seen (DeltaFIFO keys, handler buffer), sampled every 10 ms: how many
  decoded Pods are in flight.

The peer is the same informer with the cyclic GC disabled for the run (``gc.disable()``): what no
GC work at all would give, i.e. the most any policy can win. Policies: ``freeze_gc_after_sync``
(``gc_freeze.py``) and a raised gen0 threshold (``gc.set_threshold``; CPython's default is 700).

Run: ``python bench/informer_gc.py [--sizes 5000,20000,50000] [--thresholds 10000,50000]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.informer import ServerProcess  # noqa: E402
from bench.informer_scale import enqueueing, stream, timed_rate  # noqa: E402
from controllers.informers import SharedInformerFactory  # noqa: E402
from controllers.informers.http_client import KubernetesClient  # noqa: E402

DEFAULT_GEN0 = 700


@dataclass(frozen=True)
class Policy:
    """One way to run the informer: cache mode, freeze, gen0 threshold (None: leave it), GC off."""

    cache: str
    freeze: bool = False
    gen0: int | None = None
    gc_off: bool = False

    @property
    def name(self) -> str:
        parts = [f"cache={self.cache}", "freeze" if self.freeze else "no freeze"]
        if self.gen0:
            parts.append(f"gen0={self.gen0:,}")
        if self.gc_off:
            parts.append("GC disabled (peer)")
        return ", ".join(parts)


class GcMeter:
    """CPU time inside each generation's collections, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.cpu = [0.0, 0.0, 0.0]
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.thread_time()
            return
        g = info["generation"]
        self.count[g] += 1
        self.cpu[g] += time.thread_time() - self._start


def run(policy: Policy, size: int, data: bytes) -> dict[str, Any]:
    server = ServerProcess(data, "event")
    saved = gc.get_threshold()
    meter = GcMeter()
    try:
        server.reset()
        factory = SharedInformerFactory(KubernetesClient.for_host(server.url), cache=policy.cache,
                                        freeze_gc_after_sync=policy.freeze)
        informer = factory.informer_for("v1", "Pod")
        queue, counter = enqueueing(informer, size)
        deepest = {"fifo": 0, "handler": 0}
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.01):
                deepest["fifo"] = max(deepest["fifo"], len(informer.fifo))
                deepest["handler"] = max(deepest["handler"], sum(h.pending() for h in informer.handlers))

        sampler = threading.Thread(target=sample, name="backlog", daemon=True)
        sampler.start()
        gc.collect()
        if policy.gen0:
            gc.set_threshold(policy.gen0, *saved[1:])
        gc.callbacks.append(meter)
        if policy.gc_off:
            gc.disable()
        start, cpu0 = time.perf_counter(), time.process_time()
        informer.start()
        try:
            rate = timed_rate(start, counter, 1800)
            cpu = time.process_time() - cpu0
        finally:
            gc.enable()
            gc.callbacks.remove(meter)
            gc.set_threshold(*saved)
            stop.set()
            sampler.join()
            informer.stop()
            queue.shut_down()
            if policy.freeze:
                gc.unfreeze()
        if len(informer.store) != size:
            raise RuntimeError(f"the cache holds {len(informer.store):,} objects, want {size:,}")
        informer.store.replace([])
        gc.collect()
    finally:
        server.close()
    return {"policy": policy, "size": size, "rate": rate, "us": cpu / size * 1e6, "gc_share": sum(meter.cpu) / cpu,
            "counts": meter.count, "gc_ms": [c * 1000 for c in meter.cpu], **deepest}


def policies(thresholds: list[int]) -> list[Policy]:
    out = [Policy("compact"), Policy("compact", gc_off=True), Policy("compact", freeze=True),
           Policy("decoded", freeze=True), Policy("decoded"), Policy("decoded", gc_off=True)]
    for t in thresholds:
        out += [Policy("compact", gen0=t), Policy("compact", freeze=True, gen0=t), Policy("decoded", freeze=True, gen0=t)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000,50000", help="Pods streamed (all ADDED), comma-separated")
    parser.add_argument("--thresholds", default="10000,50000", help="gen0 thresholds to try (empty: none)")
    args = parser.parse_args()
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
        thresholds = [int(s) for s in args.thresholds.split(",") if s]
    except ValueError:
        parser.error("--sizes and --thresholds are comma-separated integers")
    if any(n <= 0 for n in sizes + thresholds):
        parser.error("sizes and thresholds must be positive")
    print(f"{os.cpu_count()} CPUs; CPython gen0 threshold {gc.get_threshold()[0]} (default {DEFAULT_GEN0})", flush=True)
    rows = []
    for size in sizes:
        data = stream(size, 0)
        for policy in policies(thresholds):
            row = run(policy, size, data)
            rows.append(row)
            print(f"  {size:,} {policy.name}: {row['us']:.1f} us/event, GC {row['gc_share']:.0%}", file=sys.stderr, flush=True)
        del data
    print("\n| Pods | configuration | events/s | CPU us/event | vs GC disabled | GC share | collections gen0/1/2 "
          "| full collections ms | deepest FIFO / handler backlog |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        peer = next(r for r in rows if r["size"] == row["size"] and r["policy"].gc_off
                    and r["policy"].cache == row["policy"].cache)
        c = row["counts"]
        print(f"| {row['size']:,} | {row['policy'].name} | {row['rate']:,.0f} | {row['us']:.1f} | "
              f"{row['us'] / peer['us']:.2f}x | {row['gc_share']:.0%} | {c[0]:,} / {c[1]:,} / {c[2]:,} | "
              f"{row['gc_ms'][2]:,.0f} | {row['fifo']:,} / {row['handler']:,} |")


if __name__ == "__main__":
    main()
