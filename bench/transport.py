"""Transport benchmark: worker → Redis → daphne → websocket clients, ctrlscope vs plain channels_redis.

For each rate (observations/s published by a worker) and client count, both transports run for the
same duration on the same machine:

- ctrlscope: ``RedisPublisher`` frames → Redis Streams → one ``StreamHub`` per daphne → sessions;
- peer: channels_redis ``RedisChannelLayer`` ``group_send`` per observation (one long-lived event
  loop — the best case for the peer; ``async_to_sync`` per call would be slower still).

Reported per run: delivered observations/s per client, observations lost (published but never
received, summed over clients), p50/p99 publish→receive latency, daphne's RSS (at the start and its
peak, sampled every 0.25 s, and after the drain), and where the CPU went: each process' CPU over
the publishing window as % of one core (publisher — this process —, Redis, daphne, the clients'
process). The process at ~100 % is the one that saturates first; on this 2-core machine the sum
nearing 200 % means the machine is.

``--ceiling RATE`` then raises the rate from RATE, doubling, to the largest client count until a run
misses the goal (p99 ≤ 50 ms, 0 lost, the publisher kept its pace), and names the busiest process
at each step: where the ceiling is, and why.

``--transports ctrlscope,cluster`` adds the same ctrlscope workload against a Redis Cluster of three
masters and three replicas (``controllers/telemetry/clusterboot.py``, Debian's redis-server on
loopback ports) in the same run: the row "ctrlscope streams, Redis Cluster". The benchmark's one topic
lives on one master, so the row measures what the cluster layout and client cost for the same work;
its "redis" CPU is that master's.

The peer (channels_redis) runs only up to ``--peer-max-rate`` (5,000/s): it already loses 83 % at
5,000/s to 10 clients, and above that one run takes minutes to drain its publisher.

Usage: ``python bench/transport.py [--duration 5] [--rates 1000,5000,20000] [--clients 1,10]
[--ceiling 40000]``
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from array import array
from pathlib import Path

import orjson
import psutil
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.procmeter import Measured, Sampler  # noqa: E402
from controllers.telemetry import redis_config  # noqa: E402
from controllers.telemetry.clusterboot import LocalRedisCluster  # noqa: E402
from controllers.telemetry.publisher import RedisPublisher  # noqa: E402
from controllers.telemetry.redisboot import ensure_redis, free_port  # noqa: E402
from dashboard.session import MAX_OUT_BYTES, MAX_PENDING_BYTES, WINDOW  # noqa: E402
from dashboard.wsclient import TelemetryWsClient  # noqa: E402

TOPIC = "bench"
GOAL_P99_MS = 50.0
# Issue 16's goal; the first version's was 1,000 obs/s to 10 clients.
GOAL_RATE, GOAL_CLIENTS = 20_000, 10


def start_daphne(app: str, redis_url: str, prefix: str, run_dir: Path, *, tree: Path = ROOT,
                 timeout: float = 30.0) -> tuple[subprocess.Popen, int]:
    """daphne serving ``app`` of source tree ``tree`` (this checkout, or a peer's extracted by
    bench/overview.py) on a free port, in the demo's anonymous mode, once its /healthz answers."""
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_ALLOW_ANONYMOUS": "1", "CTRLSCOPE_DB": str(run_dir / "bench.sqlite3"),
           "CTRLSCOPE_LOG_LEVEL": "WARNING"}
    log = open(run_dir / f"bench-daphne-{port}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app],
                            cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"daphne ({app}) in {tree} did not start")


# -- client process ------------------------------------------------------------------------------
def client_proc(kind: str, port: int, n_clients: int, expected: int, ready: mp.Event, go_home: mp.Event,
                out: mp.Queue) -> None:
    async def ctrlscope_client(i: int, stats: dict) -> None:
        def on_records(topic: str, records: list, now: float) -> None:
            now_ms = time.time() * 1000
            seen, lat = stats["seen"], stats["lat"]
            for r in records:
                seq = r["seq"]
                if 0 < seq <= expected:
                    seen[seq] = 1
                lat.append(now_ms - r["ts"])

        c = TelemetryWsClient(f"ws://127.0.0.1:{port}/ws/telemetry/", origin=f"http://127.0.0.1:{port}",
                              keep_records=False, on_records=on_records)
        await c.connect()
        await c.subscribe(TOPIC)
        await c.wait_for(lambda: c.topics[TOPIC].snapshots >= 1, 20, "snapshot")
        stats["ready"] = True
        while not go_home.is_set():
            await asyncio.sleep(0.05)
        stats["resyncs"] = len(c.resyncs)
        await c.close()

    async def peer_client(i: int, stats: dict) -> None:
        async with websockets.connect(f"ws://127.0.0.1:{port}/ws/peer/", origin=f"http://127.0.0.1:{port}") as ws:
            stats["ready"] = True
            while not go_home.is_set():
                try:
                    raw = await asyncio.wait_for(ws.recv(), 0.1)
                except TimeoutError:
                    continue
                now_ms = time.time() * 1000
                r = orjson.loads(raw)
                if 0 < r["seq"] <= expected:
                    stats["seen"][r["seq"]] = 1
                stats["lat"].append(now_ms - r["ts"])

    async def main() -> None:
        # A byte per expected seq and 4-byte latencies: at 80,000 obs/s to 10 clients a set and a list
        # of floats per client held gigabytes.
        stats = [{"seen": bytearray(expected + 1), "lat": array("f"), "ready": False, "resyncs": 0}
                 for _ in range(n_clients)]
        fn = ctrlscope_client if kind == "ctrlscope" else peer_client
        tasks = [asyncio.create_task(fn(i, stats[i])) for i in range(n_clients)]
        while not all(s["ready"] for s in stats):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # group_add / subscriptions settle
        ready.set()
        await asyncio.gather(*tasks)
        out.put([{"received": s["seen"].count(1), "lat": s["lat"],
                  "resyncs": s["resyncs"]} for s in stats])

    asyncio.run(main())


# -- publishers ----------------------------------------------------------------------------------
def paced(rate: int, duration: float, emit) -> int:
    """Call ``emit(seq, ts_ms)`` ``rate`` times per second for ``duration`` seconds; return count."""
    total = int(rate * duration)
    start = time.monotonic()
    seq = 0
    while seq < total:
        due = min(total, int((time.monotonic() - start) * rate))
        while seq < due:
            seq += 1
            emit(seq, time.time() * 1000)
        time.sleep(0.001)
    return total


def publish_ctrlscope(redis_url: str, prefix: str, rate: int, duration: float) -> int:
    pub = RedisPublisher(redis_url, prefix=prefix).start()
    try:
        return paced(rate, duration, lambda seq, ts: pub.publish(TOPIC, {"seq": seq, "ts": ts, "k": "watch",
                                                                         "type": "MODIFIED", "key": f"default/obj-{seq % 500}"}))
    finally:
        pub.stop()


def _peer_message(seq: int, ts: float) -> dict:
    return {"seq": seq, "ts": ts, "k": "watch", "type": "MODIFIED", "key": f"default/obj-{seq % 500}"}


def publish_peer(redis_url: str, prefix: str, rate: int, duration: float, message=_peer_message) -> int:
    """The peer's publisher: one channels_redis ``group_send`` of ``message(seq, ts)`` per observation,
    from one long-lived event loop, paced by a thread."""
    from channels_redis.core import RedisChannelLayer

    async def main() -> int:
        # Same layer configuration the dashboard's settings use (defaults, socket_timeout=None).
        layer = RedisChannelLayer(hosts=[{"address": redis_url, "socket_timeout": None}], prefix=prefix + "layer:")
        queue: asyncio.Queue = asyncio.Queue()
        total = int(rate * duration)

        def producer() -> None:
            paced(rate, duration, lambda seq, ts: loop.call_soon_threadsafe(queue.put_nowait, (seq, ts)))

        loop = asyncio.get_running_loop()
        thread = threading.Thread(target=producer)
        thread.start()
        sent = 0
        while sent < total:
            seq, ts = await queue.get()
            data = orjson.dumps(message(seq, ts)).decode()
            await layer.group_send("bench", {"type": "observation", "data": data})
            sent += 1
        thread.join()
        return total

    return asyncio.run(main())


TRANSPORT_NAMES = {"ctrlscope": "ctrlscope streams", "cluster": "ctrlscope streams, Redis Cluster",
                   "peer": "channels_redis group_send"}


def run_one(kind: str, rate: int, n_clients: int, duration: float, redis_url: str, run_dir: Path,
            redis_pid: int = 0) -> dict:
    """One run; ``kind`` ctrlscope or cluster (both the dashboard, at ``redis_url``) or peer."""
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    os.environ["CTRLSCOPE_PREFIX"] = prefix
    app = "bench.peer_asgi:application" if kind == "peer" else "dashboard.asgi:application"
    proc, port = start_daphne(app, redis_url, prefix, run_dir)
    client_kind = "peer" if kind == "peer" else "ctrlscope"
    try:
        if kind != "peer":  # the topic must exist before clients subscribe
            seed = RedisPublisher(redis_url, prefix=prefix)
            seed.set_state(TOPIC, "seed", {"v": 1})
            seed.flush()
            seed.stop()
        expected = int(rate * duration)
        ready, go_home, out = mp.Event(), mp.Event(), mp.Queue()
        clients = mp.Process(target=client_proc, args=(client_kind, port, n_clients, expected, ready, go_home, out))
        clients.start()
        if not ready.wait(30):
            raise RuntimeError("clients did not connect")
        measured = [Measured("publisher", os.getpid()), Measured("daphne", proc.pid),
                    Measured("clients", clients.pid)]
        redis_pid = redis_pid or _redis_pid(redis_url)
        if redis_pid:
            measured.insert(1, Measured("redis", redis_pid))
        sampler = Sampler(measured).start()
        t0 = time.monotonic()
        published = (publish_peer(redis_url, prefix, rate, duration) if kind == "peer"
                     else publish_ctrlscope(redis_url, prefix, rate, duration))
        elapsed = time.monotonic() - t0
        sampler.stop()
        daphne = next(m for m in measured if m.name == "daphne")
        time.sleep(2.0)  # let in-flight observations land
        rss = psutil.Process(proc.pid).memory_info().rss
        go_home.set()
        results = out.get(timeout=60)
        clients.join(10)
    finally:
        proc.terminate()
        proc.wait(10)
        _delete_prefix(redis_url, prefix)
    lat = sorted(x for r in results for x in r["lat"])
    received = [r["received"] for r in results]
    return {
        "transport": TRANSPORT_NAMES[kind],
        "rate": rate, "clients": n_clients,
        "delivered_per_client": statistics.mean(received) / elapsed,
        "lost": sum(published - r for r in received),
        "lost_pct": 100.0 * sum(published - r for r in received) / (published * n_clients),
        "p50": _pct(lat, 50), "p99": _pct(lat, 99),
        "rss_mb": rss / 2**20,
        "rss_start_mb": daphne.samples[0][1] / 2**20, "rss_peak_mb": max(daphne.rss_peak, rss) / 2**20,
        "resyncs": sum(r["resyncs"] for r in results),
        "elapsed": elapsed, "duration": duration,
        "cpu": {m.name: sampler.cpu_percent(m) for m in measured},
        "busiest": sampler.busiest()[0].name,
    }


def _redis_pid(url: str) -> int:
    """The Redis server's pid when it runs on this machine (its CPU is part of the pipeline's)."""
    import redis

    r = redis.Redis.from_url(url)
    try:
        pid = int(r.info("server").get("process_id", 0))
    except (redis.RedisError, ValueError):
        return 0
    finally:
        r.close()
    return pid if psutil.pid_exists(pid) else 0


def meets_goal(row: dict) -> bool:
    """p99 within the goal, nothing lost, and the publisher kept its pace (it published the rate)."""
    return row["p99"] <= GOAL_P99_MS and row["lost"] == 0 and row["elapsed"] <= row["duration"] * 1.1


def rss_bound_mb(n_clients: int) -> float:
    """What the sessions may hold by design: per client its pending buffer (MAX_PENDING_BYTES) and a
    window (WINDOW) of unacknowledged messages of at most MAX_OUT_BYTES each."""
    return n_clients * (MAX_PENDING_BYTES + WINDOW * MAX_OUT_BYTES) / 2**20


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def _delete_prefix(url: str, prefix: str) -> None:
    import redis

    if redis_config.is_cluster(url):
        client = redis_config.sync_client(url)
        for key in list(client.scan_iter(match=prefix + "*", count=1000)):
            client.delete(key)  # one at a time: the keys are in many slots
        client.close()
        return
    r = redis.Redis.from_url(url)
    keys = list(r.scan_iter(match=prefix + "*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()


def print_tables(rows: list[dict]) -> None:
    print()
    print("| transport | obs/s published | clients | delivered/s per client | lost | p50 ms | p99 ms | server RSS MB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['transport']} | {r['rate']:,} | {r['clients']} | {r['delivered_per_client']:,.0f} | "
              f"{r['lost']:,} ({r['lost_pct']:.1f}%) | {r['p50']:.1f} | {r['p99']:.1f} | {r['rss_mb']:.0f} |")
    names = ["publisher", "redis", "daphne", "clients"]
    print()
    print("Where the CPU went (% of one core over the publishing window; 200 % is this whole machine), and"
          " daphne's RSS:")
    print()
    print("| transport | obs/s | clients | " + " | ".join(f"{n} %" for n in names)
          + " | busiest | daphne RSS start → peak MB | sessions' bound MB |")
    print("|---|---:|---:|" + "---:|" * len(names) + "---|---:|---:|")
    for r in rows:
        cpu = " | ".join(f"{r['cpu'][n]:.0f}" if n in r["cpu"] else "–" for n in names)
        print(f"| {r['transport']} | {r['rate']:,} | {r['clients']} | {cpu} | {r['busiest']} | "
              f"{r['rss_start_mb']:.0f} → {r['rss_peak_mb']:.0f} | {rss_bound_mb(r['clients']):.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rates", default="1000,5000,20000")
    parser.add_argument("--clients", default="1,10")
    parser.add_argument("--transports", default="ctrlscope,peer")
    parser.add_argument("--peer-max-rate", type=int, default=5000,
                        help="run the peer only at rates up to this (default 5000)")
    parser.add_argument("--ceiling", type=int, default=0, metavar="RATE",
                        help="afterwards, double the rate from RATE until ctrlscope misses the goal")
    args = parser.parse_args()
    try:
        rates = [int(x) for x in args.rates.split(",")]
        client_counts = [int(x) for x in args.clients.split(",")]
    except ValueError:
        parser.error("--rates and --clients are comma-separated integers, e.g. --rates 1000,5000")
    if any(n <= 0 for n in rates + client_counts):
        parser.error("rates and client counts must be positive")
    unknown = set(args.transports.split(",")) - set(TRANSPORT_NAMES)
    if unknown:
        parser.error(f"unknown transport(s) {', '.join(sorted(unknown))}: choose from {', '.join(TRANSPORT_NAMES)}")
    run_dir = ROOT / "run"
    run_dir.mkdir(exist_ok=True)
    handle = ensure_redis(run_dir)
    os.environ["REDIS_URL"] = handle.url
    os.environ.setdefault("CTRLSCOPE_DEMO", "1")
    os.environ["CTRLSCOPE_DB"] = str(run_dir / "bench.sqlite3")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    rows: list[dict] = []
    ceiling: list[dict] = []
    print(f"redis {handle.url} ({handle.source}); {os.cpu_count()} CPUs; {args.duration:g}s per run", flush=True)
    cluster: LocalRedisCluster | None = None
    cluster_pid = 0
    if "cluster" in args.transports.split(","):
        cluster = LocalRedisCluster(run_dir / f"bench-cluster-{uuid.uuid4().hex[:6]}").start()
        from redis.crc import key_slot

        cluster_pid = cluster.procs[cluster.slot_owner(key_slot(TOPIC.encode()))].pid
        print(f"redis cluster {cluster.url} (3 masters, 3 replicas)", flush=True)
    try:
        for rate in rates:
            for n in client_counts:
                for kind in args.transports.split(","):
                    if kind == "peer" and rate > args.peer_max_rate:
                        print(f"  skipped: channels_redis group_send {rate}/s x{n} (above --peer-max-rate)", flush=True)
                        continue
                    if kind == "cluster":
                        assert cluster is not None
                        row = run_one(kind, rate, n, args.duration, cluster.url, run_dir, redis_pid=cluster_pid)
                    else:
                        row = run_one(kind, rate, n, args.duration, handle.url, run_dir)
                    rows.append(row)
                    print(f"  done: {row['transport']} {rate}/s x{n}: p99 {row['p99']:.1f} ms, lost {row['lost']}, "
                          f"busiest {row['busiest']} {row['cpu'][row['busiest']]:.0f} %", flush=True)
        if args.ceiling:
            n, rate = max(client_counts), args.ceiling
            for _ in range(6):  # 32x the start at most
                row = run_one("ctrlscope", rate, n, args.duration, handle.url, run_dir)
                ceiling.append(row)
                print(f"  ceiling: {rate}/s x{n}: p99 {row['p99']:.1f} ms, lost {row['lost']}, publishing took "
                      f"{row['elapsed']:.1f} s of {args.duration:g}, busiest {row['busiest']} "
                      f"{row['cpu'][row['busiest']]:.0f} %", flush=True)
                if not meets_goal(row):
                    break
                rate *= 2
    finally:
        handle.stop()
        if cluster is not None:
            cluster.stop()
    print_tables(rows + ceiling)
    for rate, n in [(1000, 10), (GOAL_RATE, GOAL_CLIENTS)]:
        target = [r for r in rows if r["transport"].startswith("ctrlscope") and r["rate"] == rate and r["clients"] == n]
        if target:
            t = target[0]
            bounded = t["rss_peak_mb"] - t["rss_start_mb"] <= rss_bound_mb(n)
            ok = meets_goal(t) and bounded
            print(f"\ntarget ({rate:,} obs/s to {n} clients, p99 <= {GOAL_P99_MS:g} ms, 0 lost, RSS within the "
                  f"sessions' bound): {'MET' if ok else 'NOT MET'} (p99 {t['p99']:.1f} ms, lost {t['lost']}, "
                  f"RSS +{t['rss_peak_mb'] - t['rss_start_mb']:.0f} MB of {rss_bound_mb(n):.0f})")
    if ceiling:
        passed = [r for r in ceiling if meets_goal(r)]
        last = ceiling[-1]
        if meets_goal(last):
            print(f"\nceiling: above {last['rate']:,} obs/s to {last['clients']} clients (every step met the goal)")
        else:
            where = (f"{passed[-1]['rate']:,} obs/s to {last['clients']} clients meets the goal, {last['rate']:,} does not"
                     if passed else f"the first step, {last['rate']:,} obs/s to {last['clients']} clients, misses the goal")
            print(f"\nceiling: {where} "
                  f"(p99 {last['p99']:.1f} ms, lost {last['lost']}, publishing took {last['elapsed']:.1f} s of "
                  f"{last['duration']:g}); busiest there: {last['busiest']} at {last['cpu'][last['busiest']]:.0f} % "
                  f"of a core, all four {sum(last['cpu'].values()):.0f} %")


if __name__ == "__main__":
    main()
