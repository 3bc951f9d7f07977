"""Informer throughput as the cache grows, and memory per cached object, against the official
client's informer and client-go's, in the same run.

The matrix: cache size (``--sizes``, default 5,000, 20,000 and 100,000 Pods of ~3.7 KB) x stream
(``added``: that many ADDED events, the cache growing to the size; ``modified``: the cache filled
by ADDED events first, untimed, then ``--modified`` MODIFIED events to those Pods, timed -- a
steady-state cluster) x framing (``event``: one HTTP chunk per event, what kube-apiserver sends;
``64k``: 64 KiB chunks, a proxy re-chunking a backlog). Every cell runs every contender on the
same canned stream, served over real HTTP by bench/informer.py's StreamServer in its own process
on the last CPU:

* every informer configuration the README offers: ``SharedInformerFactory``'s default, the
  ``Manager``'s default (with its metrics observer, as a user gets it), and the other cache-mode x
  GC-policy combinations (``cache="compact"|"decoded"`` x the GC untouched or
  ``freeze_gc_after_sync``), each with one handler adding a ``Request`` to a ``RateLimitingQueue``;
* the official ``kubernetes`` client's ``SharedInformer`` (model objects), a handler that counts;
* client-go's SharedIndexInformer (go/bench/informer, plain build, JSON), a handler adding the key
  to a client-go workqueue -- skipped without a Go toolchain.

Ratios are ctrlscope's rate over the official informer's (goal >= 10x in every cell, >= 15x for
the Manager's default) and over client-go's (goal: the Manager's default at >= 0.5x).

Memory (``--memory-size``, default 100,000; ``--no-memory`` to skip): each configuration in a
fresh process caches that many Pods (a handler that only counts), then reports bytes per cached
Pod: RSS growth, and, in a second process under ``tracemalloc``, Python heap growth (what Python
allocated and still holds, fragmentation excluded). client-go: the live Go heap after GC
(HeapAlloc) and RSS growth, same Pods. Goal: compact at or below client-go's heap, decoded within
2x of it.

Run: ``python bench/informer_scale.py [--sizes 5000,20000,100000] [--streams added,modified]
[--framings event,64k] [--modified N] [--runs 2] [--skip-official] [--memory-size N | --no-memory]``.
It prints each cell as it is measured (progress on stderr) and the tables at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.go import go_informer  # noqa: E402
from bench.informer import ServerProcess, make_pod  # noqa: E402
from controllers.informers import CacheMode, SharedInformer, SharedInformerFactory  # noqa: E402
from controllers.informers.http_client import KubernetesClient  # noqa: E402
from controllers.reconcile import Manager, Request  # noqa: E402
from controllers.workqueue import RateLimitingQueue  # noqa: E402

OFFICIAL = "kubernetes SharedInformer"
CLIENT_GO = "client-go informer (Go)"
FACTORY = "factory default"
MANAGER = "Manager default"
GOAL_OFFICIAL, GOAL_MANAGER_OFFICIAL, GOAL_MANAGER_CLIENT_GO = 10.0, 15.0, 0.5


@dataclass(frozen=True)
class Config:
    """One way to build the informer: a label and the factory it comes from."""

    name: str
    factory: Callable[[KubernetesClient], SharedInformerFactory]

    def build(self, client: KubernetesClient) -> SharedInformer:
        return self.factory(client).informer_for("v1", "Pod")

    @property
    def settings(self) -> str:
        """The cache mode and GC policy its informers get (read off a factory, no server needed)."""
        factory = self.factory(KubernetesClient.for_host("http://127.0.0.1:9"))
        return _settings(factory.cache, factory.freeze_gc_after_sync)


def _settings(cache: Any, freeze: bool) -> str:
    return f"{CacheMode.resolve(cache, CacheMode.COMPACT).value}, {'freeze' if freeze else 'no freeze'}"


GC_POLICIES = (("GC untouched", False), ("freeze", True))
"""(label, freeze_gc_after_sync) for the other rows."""


def configs() -> list[Config]:
    """The two defaults, then every other cache x GC policy combination (skipping what a default is)."""
    out = [Config(FACTORY, lambda c: SharedInformerFactory(c)), Config(MANAGER, lambda c: Manager(c).factory)]
    seen = {c.settings for c in out}
    for cache in ("compact", "decoded"):
        for label, freeze in GC_POLICIES:
            if _settings(cache, freeze) not in seen:
                out.append(Config(f"cache={cache}, {label}",
                                  lambda c, m=cache, f=freeze: SharedInformerFactory(c, cache=m, freeze_gc_after_sync=f)))
    return out


def stream(cached: int, modified: int) -> bytes:
    """``cached`` ADDED Pods, then ``modified`` MODIFIED events cycling over them."""
    lines = [orjson.dumps({"type": "ADDED", "object": make_pod(i, 2 + i)}) for i in range(cached)]
    lines += [orjson.dumps({"type": "MODIFIED", "object": make_pod(k % cached, 2 + cached + k)})
              for k in range(modified)]
    return b"\n".join(lines) + b"\n"


class MarkedCounter:
    """Counts handler calls; notes the time of the ``mark``-th and signals the ``target``-th."""

    def __init__(self, target: int, mark: int = 0) -> None:
        self.n, self.target, self.mark = 0, target, mark
        self.marked_at = 0.0
        self.done = threading.Event()
        self.lock = threading.Lock()

    def hit(self, *_: Any) -> None:
        with self.lock:  # the official informer calls from more than one thread
            self.n += 1
            n = self.n
        if n == self.mark:
            self.marked_at = time.perf_counter()
        if n == self.target:
            self.done.set()


def timed_rate(start: float, counter: MarkedCounter, timeout: float) -> float:
    if not counter.done.wait(timeout):
        raise RuntimeError(f"timed out: {counter.n:,} of {counter.target:,} handler calls")
    end = time.perf_counter()
    begin = counter.marked_at if counter.mark else start
    return (counter.target - counter.mark) / (end - begin)


def enqueueing(informer: SharedInformer, total: int, mark: int = 0) -> tuple[RateLimitingQueue, MarkedCounter]:
    """Give ``informer`` the contenders' handler: a ``Request`` per add/update into a
    ``RateLimitingQueue``, counted (``mark`` and ``total`` as ``MarkedCounter``'s)."""
    queue = RateLimitingQueue("bench")
    counter = MarkedCounter(total, mark)

    def enqueue(obj: Any, new: Any = None) -> None:
        queue.add(Request.for_object(new if new is not None else obj))
        counter.hit()

    informer.add_event_handler(on_add=enqueue, on_update=enqueue)
    return queue, counter


def run_config(config: Config, url: str, cached: int, total: int, mark: int) -> float:
    informer = config.build(KubernetesClient.for_host(url))
    queue, counter = enqueueing(informer, total, mark)
    gc.collect()
    start = time.perf_counter()
    informer.start()
    try:
        rate = timed_rate(start, counter, 900)
        if len(informer.store) != cached:
            raise RuntimeError(f"the cache holds {len(informer.store):,} objects, want {cached:,}")
        return rate
    finally:
        informer.stop()
        queue.shut_down()
        if informer.freeze_gc_after_sync:
            gc.unfreeze()
        informer.store.replace([])  # the next contender starts from an empty heap
        gc.collect()


def run_official(url: str, total: int, mark: int) -> float:
    from kubernetes import client
    from kubernetes.informer import ADDED, MODIFIED
    from kubernetes.informer import SharedInformer as OfficialInformer

    api = client.CoreV1Api(KubernetesClient.for_host(url).api_client)
    informer = OfficialInformer(api.list_pod_for_all_namespaces)
    counter = MarkedCounter(total, mark)
    informer.add_event_handler(ADDED, counter.hit)
    informer.add_event_handler(MODIFIED, counter.hit)
    start = time.perf_counter()
    informer.start()
    try:
        return timed_rate(start, counter, 1800)
    finally:
        informer.stop()
        del informer
        gc.collect()


@dataclass
class Cell:
    cached: int
    stream: str
    framing: str
    rates: dict[str, float | str]


def measure_cell(cached: int, kind: str, framing: str, modified: int, runs: int, official: bool,
                 cfgs: list[Config], data: bytes) -> Cell:
    total = cached + (modified if kind == "modified" else 0)
    mark = cached if kind == "modified" else 0
    server = ServerProcess(data, framing)
    rates: dict[str, float | str] = {}
    try:
        for config in cfgs:
            best = 0.0
            for _ in range(runs):
                server.reset()
                best = max(best, run_config(config, server.url, cached, total, mark))
            rates[config.name] = best
            progress(f"  {config.name}: {best:,.0f}/s")
        server.reset()
        result = go_informer(server, total, cached=cached, timed_from=mark)
        rates[CLIENT_GO] = go_rate = result if isinstance(result, str) else float(result["events_per_s"])
        progress(f"  {CLIENT_GO}: {go_rate if isinstance(go_rate, str) else f'{go_rate:,.0f}/s'}")
        if official:
            server.reset()
            rates[OFFICIAL] = run_official(server.url, total, mark)
            progress(f"  {OFFICIAL}: {rates[OFFICIAL]:,.0f}/s")
    finally:
        server.close()
    return Cell(cached, kind, framing, rates)


def progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def fmt_ratio(ours: float | str | None, peer: float | str | None) -> str:
    if not isinstance(ours, float) or not isinstance(peer, float) or not peer:
        return "-"
    return f"{ours / peer:.1f}x"


def print_throughput(cells: list[Cell], cfgs: list[Config], modified: int) -> list[str]:
    """The table; returns the cells that miss a goal, as sentences."""
    print(f"\ninformer throughput, Pod watch events/s (best of the runs; MODIFIED-heavy: cache filled "
          f"untimed, then {modified:,} MODIFIED timed)")
    names = [c.name for c in cfgs] + [CLIENT_GO, OFFICIAL]
    print(f"{'cached':>8} {'stream':<9}{'framing':<8}" + "".join(f"{n[:22]:>24}" for n in names))
    misses: list[str] = []
    for cell in cells:
        row = f"{cell.cached:>8,} {cell.stream:<9}{cell.framing:<8}"
        official, client_go = cell.rates.get(OFFICIAL), cell.rates.get(CLIENT_GO)
        for name in names:
            rate = cell.rates.get(name)
            if isinstance(rate, float):
                peer = "" if name in (OFFICIAL, CLIENT_GO) else f" {fmt_ratio(rate, official)}"
                row += f"{f'{rate:,.0f}{peer}':>24}"
            else:
                row += f"{(rate or '-')[:22]:>24}"
        print(row)
        where = f"{cell.cached:,} {cell.stream} {cell.framing}"
        for name in (c.name for c in cfgs):
            rate = cell.rates.get(name)
            if not isinstance(rate, float):
                continue
            goal = GOAL_MANAGER_OFFICIAL if name == MANAGER else GOAL_OFFICIAL
            if isinstance(official, float) and rate / official < goal:
                misses.append(f"{where}: {name} {rate / official:.1f}x the official informer (goal {goal:.0f}x)")
            if name == MANAGER and isinstance(client_go, float) and rate / client_go < GOAL_MANAGER_CLIENT_GO:
                misses.append(f"{where}: {name} {rate / client_go:.2f}x client-go (goal >= 0.5x)")
    print("ratios after a rate: over the official informer in the same cell")
    manager_vs_go = [fmt_ratio(c.rates.get(MANAGER), c.rates.get(CLIENT_GO)) for c in cells]
    print(f"{MANAGER} over client-go, cell by cell: {', '.join(manager_vs_go)}")
    return misses


# -- memory --------------------------------------------------------------------------------------

def memory_child(config_name: str, url: str, cached: int, heap: bool) -> None:
    """In a fresh process: cache ``cached`` Pods with a counting handler; print bytes per Pod."""
    import tracemalloc

    if heap:
        tracemalloc.start()
    if config_name == OFFICIAL:
        from kubernetes import client
        from kubernetes.informer import ADDED
        from kubernetes.informer import SharedInformer as OfficialInformer

        counter = MarkedCounter(cached)
        informer: Any = OfficialInformer(client.CoreV1Api(KubernetesClient.for_host(url).api_client)
                                         .list_pod_for_all_namespaces)
        informer.add_event_handler(ADDED, counter.hit)
    else:
        config = next(c for c in configs() if c.name == config_name)
        informer = config.build(KubernetesClient.for_host(url))
        counter = MarkedCounter(cached)
        informer.add_event_handler(on_add=counter.hit, on_update=counter.hit)
    gc.collect()
    rss0, heap0 = rss_bytes(), tracemalloc.get_traced_memory()[0] if heap else 0
    informer.start()
    if not counter.done.wait(1800):
        raise SystemExit(f"timed out: {counter.n:,} of {cached:,}")
    time.sleep(0.5)  # let the handler threads finish what they hold
    informer.stop()
    gc.collect()
    rss1, heap1 = rss_bytes(), tracemalloc.get_traced_memory()[0] if heap else 0
    size = len(informer.store) if isinstance(informer, SharedInformer) else cached
    print(json.dumps({"rss_bytes_per_object": (rss1 - rss0) / cached,
                      "heap_bytes_per_object": (heap1 - heap0) / cached if heap else None, "cached": size}))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def child(config_name: str, url: str, cached: int, heap: bool) -> dict[str, Any]:
    cmd = [sys.executable, __file__, "--memory-child", config_name, "--url", url, "--memory-size", str(cached)]
    if heap:
        cmd.append("--heap")
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    err = [x for x in res.stderr.splitlines() if x.strip()]
    return {"error": err[-1] if err else f"exit {res.returncode}"}


def measure_memory(cached: int, cfgs: list[Config], official: bool) -> None:
    data = stream(cached, 0)
    pod = len(data) // cached
    server = ServerProcess(data, "event")
    rows: list[tuple[str, str, dict[str, Any], dict[str, Any]]] = []
    try:
        named = [(c.name, c.settings) for c in cfgs] + ([(OFFICIAL, "model objects")] if official else [])
        for name, settings in named:
            progress(f"memory: {name}")
            server.reset()
            rss = child(name, server.url, cached, heap=False)
            server.reset()
            heap = child(name, server.url, cached, heap=True)
            rows.append((name, settings, rss, heap))
        server.reset()
        progress(f"memory: {CLIENT_GO}")
        go = go_informer(server, cached, cached=cached, memory=True)
    finally:
        server.close()
    print(f"\nmemory per cached Pod at {cached:,} Pods (~{pod:,} B of JSON each), bytes")
    print(f"{'cache':<34}{'settings':<22}{'Python heap':>13}{'RSS':>10}{'heap / client-go':>18}")
    go_heap = go.get("heap_bytes_per_object") if isinstance(go, dict) else None
    for name, settings, rss, heap in rows:
        h, r = heap.get("heap_bytes_per_object"), rss.get("rss_bytes_per_object")
        if h is None or r is None:
            print(f"{name:<34}{settings:<22}  failed: {heap.get('error') or rss.get('error')}")
            continue
        print(f"{name:<34}{settings:<22}{h:>13,.0f}{r:>10,.0f}{fmt_ratio(float(h), go_heap):>18}")
    if isinstance(go, dict):
        print(f"{CLIENT_GO:<34}{'typed Pods':<22}{go['heap_bytes_per_object']:>13,.0f}"
              f"{go['rss_bytes_per_object']:>10,.0f}   (Go heap after GC)")
    else:
        print(f"{CLIENT_GO:<34}  {go}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000,20000,100000", help="cache sizes, comma-separated")
    parser.add_argument("--streams", default="added,modified")
    parser.add_argument("--framings", default="event,64k")
    parser.add_argument("--modified", type=int, default=20_000, help="MODIFIED events timed per modified cell")
    parser.add_argument("--runs", type=int, default=2, help="best of N for the ctrlscope rows")
    parser.add_argument("--skip-official", action="store_true")
    parser.add_argument("--only", default="", help="ctrlscope configurations to run, comma-separated names")
    parser.add_argument("--memory-size", type=int, default=100_000)
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-throughput", action="store_true")
    parser.add_argument("--memory-child", default="", help=argparse.SUPPRESS)
    parser.add_argument("--url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--heap", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.url, args.memory_size, args.heap)
        return
    try:
        sizes = [int(s) for s in args.sizes.split(",") if s]
    except ValueError:
        parser.error(f"--sizes: comma-separated numbers, not {args.sizes!r}")
    kinds = [s for s in args.streams.split(",") if s]
    framings = [s for s in args.framings.split(",") if s]
    if bad := [k for k in kinds if k not in ("added", "modified")] + [f for f in framings if f not in ("event", "64k")]:
        parser.error(f"unknown stream or framing: {', '.join(bad)}")
    cfgs = configs()
    if args.only:
        wanted = {s.strip() for s in args.only.split(",")}
        cfgs = [c for c in cfgs if c.name in wanted]
    print("configurations: " + "; ".join(f"{c.name} = {c.settings}" for c in cfgs))
    if not args.no_throughput:
        cells: list[Cell] = []
        for cached in sizes:
            for kind in kinds:
                data = stream(cached, args.modified if kind == "modified" else 0)
                for framing in framings:
                    progress(f"{cached:,} cached, {kind}, {framing} framing")
                    cells.append(measure_cell(cached, kind, framing, args.modified, args.runs,
                                              not args.skip_official, cfgs, data))
                del data
        misses = print_throughput(cells, cfgs, args.modified)
        print("goals: " + ("every cell met" if not misses else f"{len(misses)} missed:\n  " + "\n  ".join(misses)))
    if not args.no_memory:
        measure_memory(args.memory_size, cfgs, not args.skip_official)


if __name__ == "__main__":
    main()
