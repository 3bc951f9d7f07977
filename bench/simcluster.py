"""Benchmark the simulated Kubernetes API server (controllers.sim) over real HTTP.

Measures, with the server in its own process and load generators in others:
  * writes/s (ConfigMap creates, 32 concurrent connections) with 0, 10 and 50 watchers;
  * watch delivery latency p50/p99 (write sent → event parsed by a watcher) with 50 watchers at a
    paced 2,000 writes/s, the issue's target point;
  * time to list 10k and 100k pods (one request, and paged with limit=500 like kubectl);
  * server RSS.

Peer, in the same run: a real kube-apiserver v1.37.2 with etcd (controllers/realcluster, built from
upstream; HTTPS with a bearer token, as clients reach it), under the same load from the same
processes: the same writes/s and delivery rows, and the list of 10k pods (the 100k list is the
simulator's only: seeding 100k pods into etcd would take the run minutes). Its CPU per write counts
kube-apiserver and etcd. The seeded pods name a scheduler that does not exist, so they stay Pending
and nothing (scheduler, kwok, pod GC) touches them. The issue-3 targets (>= 2,000 writes/s with 50
watchers, p99 <= 20 ms) are the last column. ``--no-real`` skips the peer.

Run: .venv/bin/python bench/simcluster.py [--quick] [--no-real]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import sys
import time
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.realpeer import UNSCHEDULED, Target, ensure_namespaces, real_cluster  # noqa: E402
from controllers.ports import free_port  # noqa: E402

NS = "bench"


def _pod(i: int, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"pod-{i:06d}", "namespace": ns, "labels": {"app": f"app-{i % 100}", "tier": "web"},
                     "annotations": {"bench/index": str(i)}},
        "spec": {"schedulerName": UNSCHEDULED, "containers": [{
            "name": "app", "image": "registry.example.com/team/app:1.2.3",
            "ports": [{"containerPort": 8080}], "env": [{"name": f"VAR_{k}", "value": "x" * 16} for k in range(6)],
            "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}}]},
        "status": {"phase": "Running", "podIP": "10.244.0.1"},
    }


def serve(port: int, seed_namespaces: dict[str, int], ready: Any) -> None:
    """Server process: a SimCluster without kubelet/control-plane noise, optionally pre-seeded."""
    import gc

    from controllers.sim.server import SimCluster, new_event_loop

    async def main() -> None:
        sim = SimCluster(port=port, control_plane=False, history_limit=200_000, schedule_delay=3600, gc_freeze=True)
        sim.kubelet.pause()
        ns_rt = sim.registry.lookup("", "v1", "namespaces")
        pod_rt = sim.registry.lookup("", "v1", "pods")
        assert ns_rt is not None and pod_rt is not None
        sim.store.create(ns_rt, None, {"metadata": {"name": NS}})
        for ns, count in seed_namespaces.items():
            sim.store.create(ns_rt, None, {"metadata": {"name": ns}})
            for i in range(count):
                sim.store.create(pod_rt, ns, _pod(i, ns))
        # Pay the one full collection of the seeded objects now, not inside the first measurement.
        gc.collect()
        gc.freeze()
        await sim.start_async()
        ready.set()
        await asyncio.Event().wait()

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(main())


async def _writer(target: Target, seconds: float, concurrency: int, rate: float | None, tag: str) -> int:
    import aiohttp

    done = 0
    stop_at = time.monotonic() + seconds
    counter = iter(range(10**9))
    interval = concurrency / rate if rate else 0.0

    async def worker(session: aiohttp.ClientSession, wid: int) -> None:
        nonlocal done
        next_at = time.monotonic() + (interval * wid / concurrency if rate else 0)
        while time.monotonic() < stop_at:
            if rate:
                delay = next_at - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)
                next_at += interval
            body = orjson.dumps({"metadata": {"name": f"{tag}-{next(counter)}"}, "data": {"ts": repr(time.time())}})
            async with session.post(f"{target.url}/api/v1/namespaces/{NS}/configmaps", data=body,
                                    headers={"Content-Type": "application/json", **target.headers()}) as resp:
                await resp.read()
                if resp.status == 201:
                    done += 1

    connector = aiohttp.TCPConnector(limit=concurrency, ssl=target.ssl() or False)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(worker(session, i) for i in range(concurrency)))
    return done


def write_load(target: Target, seconds: float, concurrency: int, rate: float | None, tag: str, out: Any) -> None:
    out.put(asyncio.run(_writer(target, seconds, concurrency, rate, tag)))


async def _seed(target: Target, namespaces: dict[str, int]) -> None:
    """Create the namespaces and their pods through the API (32 connections), as any client would."""
    import aiohttp

    connector = aiohttp.TCPConnector(limit=32, ssl=target.ssl() or False)
    headers = {"Content-Type": "application/json", **target.headers()}
    async with aiohttp.ClientSession(connector=connector, headers=headers) as session:
        await ensure_namespaces(session, target, (NS, *namespaces))
        for ns, count in namespaces.items():
            queue = iter(range(count))

            async def create(ns: str = ns, queue: Any = queue) -> None:
                for i in queue:
                    async with session.post(f"{target.url}/api/v1/namespaces/{ns}/pods",
                                            data=orjson.dumps(_pod(i, ns))) as resp:
                        assert resp.status == 201, await resp.text()

            await asyncio.gather(*(create() for _ in range(32)))


async def _watchers(target: Target, count: int, rv: str, seconds: float, ready: Any) -> dict[str, Any]:
    """Open ``count`` watches over raw asyncio streams (aiohttp's client parser would make this
    process, not the server, the bottleneck on a 2-core machine)."""
    host, port = target.url.split("//")[1].split(":")
    latencies: list[float] = []
    received = [0] * count
    auth = "".join(f"{k}: {v}\r\n" for k, v in target.headers().items())
    request = (f"GET /api/v1/namespaces/{NS}/configmaps?watch=true&resourceVersion={rv}"
               f"&timeoutSeconds={int(seconds) + 5} HTTP/1.1\r\nHost: {host}\r\n{auth}\r\n").encode()
    context = target.ssl()

    async def probe(idx: int) -> None:
        reader, writer = await asyncio.open_connection(host, int(port), ssl=context)
        writer.write(request)
        buf = b""
        try:
            while True:
                data = await reader.read(1 << 16)
                if not data:
                    return
                if idx:
                    # One '{"type"' starts each event. Counting "}\n" undercounts the real server, which may
                    # flush an event's closing "}" and its newline in different chunks.
                    received[idx] += data.count(b'{"type"')
                    continue
                now = time.time()
                buf += data
                *lines, buf = buf.split(b"\n")
                for line in lines:
                    start = line.find(b'{"type"')
                    if start < 0:
                        continue
                    ev = orjson.loads(line[start:])
                    ts = ev["object"].get("data", {}).get("ts")
                    if ts:
                        latencies.append(now - float(ts))
                    received[0] += 1
        finally:
            writer.close()

    tasks = [asyncio.create_task(probe(i)) for i in range(count)]
    await asyncio.sleep(0.5)
    ready.set()
    await asyncio.sleep(seconds + 1.5)
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"latencies": latencies, "received": received}


def watch_load(target: Target, count: int, rv: str, seconds: float, ready: Any, out: Any) -> None:
    out.put(asyncio.run(_watchers(target, count, rv, seconds, ready)))


def current_rv(target: Target) -> str:
    page = orjson.loads(target.get(f"/api/v1/namespaces/{NS}/configmaps?limit=1", timeout=30))
    return page["metadata"]["resourceVersion"]


def _cpu(procs: list[Any]) -> float:
    return sum(t.user + t.system for t in (p.cpu_times() for p in procs))


def scenario(ctx: Any, target: Target, watchers: int, seconds: float, rate: float | None, tag: str,
             server: list[Any]) -> dict[str, Any]:
    results: dict[str, Any] = {"watchers": watchers, "rate": rate or 0.0}
    wq = ctx.Queue()
    watch_proc = None
    if watchers:
        ready = ctx.Event()
        watch_proc = ctx.Process(target=watch_load, args=(target, watchers, current_rv(target), seconds, ready, wq))
        watch_proc.start()
        ready.wait(30)
    q = ctx.Queue()
    cpu_before = _cpu(server)
    writer = ctx.Process(target=write_load, args=(target, seconds, 32, rate, tag, q))
    writer.start()
    writes = q.get(timeout=seconds + 60)
    writer.join()
    # Server CPU per write does not depend on what else the machine is doing: 1 / it is the rate
    # one dedicated core would sustain.
    results["cpu_us_per_write"] = (_cpu(server) - cpu_before) / max(writes, 1) * 1e6
    results["writes_per_s"] = writes / seconds
    results["writes"] = writes
    if watch_proc is not None:
        data = wq.get(timeout=seconds + 60)
        watch_proc.join()
        lat = sorted(data["latencies"])
        if lat:
            results["p50_ms"] = lat[len(lat) // 2] * 1000
            results["p99_ms"] = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1000
        results["delivered_min"] = min(data["received"])
    return results


def time_list(target: Target, ns: str, expected: int) -> tuple[float, float, float]:
    """(one request, paged with limit=500, client-side orjson decode of the one-request body), seconds.

    The first two are what the server costs a client: the whole response received. Decoding is
    reported apart: millions of small dicts make it a measure of the client's Python, not the server.
    """
    import gc

    start = time.perf_counter()
    raw = target.get(f"/api/v1/namespaces/{ns}/pods")
    whole = time.perf_counter() - start
    gc.disable()
    try:
        start = time.perf_counter()
        items = orjson.loads(raw)["items"]
        decode = time.perf_counter() - start
    finally:
        gc.enable()
    assert len(items) == expected, len(items)
    del items, raw
    start = time.perf_counter()
    token, total = "", 0
    while True:
        query = f"limit=500&continue={token}" if token else "limit=500"
        page = orjson.loads(target.get(f"/api/v1/namespaces/{ns}/pods?{query}"))
        total += len(page["items"])
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert total == expected
    return whole, time.perf_counter() - start, decode


def measure(ctx: Any, target: Target, seconds: float, lists: dict[str, int]) -> dict[str, Any]:
    """Every measurement against one server: lists first (seeded namespaces), then the write runs."""
    import psutil

    procs = [psutil.Process(pid) for pid in target.pids]
    out: dict[str, Any] = {"rss_seeded": sum(p.memory_info().rss for p in procs) / 2**20}
    out["lists"] = {count: time_list(target, ns, count) for ns, count in lists.items()}
    out["runs"] = [scenario(ctx, target, w, seconds, None, f"w{w}", procs) for w in (0, 10, 50)]
    out["paced"] = scenario(ctx, target, 50, seconds, 2000.0, "paced", procs)
    out["half"] = scenario(ctx, target, 50, seconds, 1000.0, "half", procs)
    out["rss_end"] = sum(p.memory_info().rss for p in procs) / 2**20
    return out


def measure_real(ctx: Any, seconds: float, tmp: Path) -> dict[str, Any]:
    """The peer: a real control plane from controllers/realcluster, seeded through its API."""
    with real_cluster(tmp, say=lambda line: print(line, flush=True)) as (_, target):
        t0 = time.perf_counter()
        asyncio.run(_seed(target, {"list10k": 10_000}))
        seeded = time.perf_counter() - t0
        out = measure(ctx, target, seconds, {"list10k": 10_000})
        out["seed_s"] = seeded
        return out


def _cell(res: dict[str, Any] | None, fmt: Any) -> str:
    if res is None:
        return "not measured"
    try:
        return fmt(res)
    except KeyError:
        return "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs and 10k/20k pods (smoke test)")
    parser.add_argument("--no-real", action="store_true", help="skip the real kube-apiserver peer")
    args = parser.parse_args()
    import tempfile

    seconds = 2.0 if args.quick else 5.0
    big = 20_000 if args.quick else 100_000
    ctx = mp.get_context("spawn")
    port = free_port()
    ready = ctx.Event()
    t0 = time.perf_counter()
    server = ctx.Process(target=serve, args=(port, {"list10k": 10_000, "list100k": big}, ready), daemon=True)
    server.start()
    if not ready.wait(600):
        raise SystemExit("server did not start")
    seed_s = time.perf_counter() - t0
    try:
        sim = measure(ctx, Target("sim", f"http://127.0.0.1:{port}", pids=[server.pid]), seconds,
                      {"list10k": 10_000, "list100k": big})
    finally:
        server.terminate()
        server.join(10)
    sim["seed_s"] = seed_s
    real = None
    if not args.no_real:
        with tempfile.TemporaryDirectory(prefix="bench-real-") as tmp:
            real = measure_real(ctx, seconds, Path(tmp))

    rows: list[tuple[str, str, str, str]] = []
    for i, watchers in enumerate((0, 10, 50)):
        def fmt(res: dict[str, Any], i: int = i) -> str:
            r = res["runs"][i]
            lat = f", p50 {r['p50_ms']:.1f} / p99 {r['p99_ms']:.1f} ms (saturated)" if "p50_ms" in r else ""
            return (f"{r['writes_per_s']:,.0f}{lat}; {r['cpu_us_per_write']:.0f} us server CPU/write "
                    f"(= {1e6 / r['cpu_us_per_write']:,.0f}/s on a dedicated core)")
        rows.append((f"writes/s, {watchers} watchers", _cell(sim, fmt), _cell(real, fmt),
                     ">= 2,000 with 50 watchers" if watchers == 50 else "-"))
    for key, target in (("paced", "p99 <= 20 ms"), ("half", "-")):
        def fmt(res: dict[str, Any], key: str = key) -> str:
            r = res[key]
            return (f"{r['writes_per_s']:,.0f} writes/s achieved; p50 {r.get('p50_ms', float('nan')):.1f} ms, "
                    f"p99 {r.get('p99_ms', float('nan')):.1f} ms")
        rate = sim[key]["rate"]
        rows.append((f"watch delivery, 50 watchers @ {rate:,.0f} writes/s paced", _cell(sim, fmt), _cell(real, fmt),
                     target))
    for count in (10_000, big):
        def fmt(res: dict[str, Any], count: int = count) -> str:
            whole, paged, decode = res["lists"][count]
            return f"{whole * 1000:,.0f} ms / {paged * 1000:,.0f} ms (+{decode * 1000:,.0f} ms client decode)"
        rows.append((f"list {count // 1000}k pods: one request / paged limit=500", _cell(sim, fmt),
                     _cell(real, fmt), "-"))
    rows.append(("server RSS (real: kube-apiserver + etcd): seeded / after writes",
                 _cell(sim, lambda r: f"{r['rss_seeded']:.0f} / {r['rss_end']:.0f} MiB"),
                 _cell(real, lambda r: f"{r['rss_seeded']:.0f} / {r['rss_end']:.0f} MiB"), "-"))
    rows.append(("seed (+ start) time", _cell(sim, lambda r: f"{r['seed_s']:.1f} s ({10 + big // 1000}k pods, in-process)"),
                 _cell(real, lambda r: f"{r['seed_s']:.1f} s (10k pods through the API)"), "-"))
    header = ("measure", "ctrlscope sim", "real kube-apiserver v1.37.2 + etcd", "target (issue 3)")
    width = [max(len(r[i]) for r in [*rows, header]) for i in range(4)]
    print(f"\nsimcluster benchmark — {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} at the end, "
          f"Python {sys.version.split()[0]}, {seconds:.0f} s per write run, 32 writer connections; server, "
          "writer and watchers are separate processes sharing these CPUs")
    print("peer: a real kube-apiserver with etcd (controllers/realcluster), same load, same run; HTTPS + token\n")
    print(" | ".join(h.ljust(w) for h, w in zip(header, width, strict=True)))
    print("-|-".join("-" * w for w in width))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))
    for name, res in (("sim", sim), ("real", real)):
        for r in [*(res or {}).get("runs", []), *([res["paced"], res["half"]] if res else [])]:
            if r["watchers"] and r.get("delivered_min", 0) < r["writes"]:
                print(f"note ({name}): a watcher received {r['delivered_min']} of {r['writes']} events in the "
                      f"{r['watchers']}-watcher run (it was cut off at the end of the window)")


if __name__ == "__main__":
    main()
