"""Transport benchmark: worker → Redis → daphne → websocket clients, ctrlscope vs plain channels_redis.

For each rate (observations/s published by a worker) and client count, both transports run for the
same duration on the same machine:

- ctrlscope: ``RedisPublisher`` frames → Redis Streams → one ``StreamHub`` per daphne → sessions;
- peer: channels_redis ``RedisChannelLayer`` ``group_send`` per observation (one long-lived event
  loop — the best case for the peer; ``async_to_sync`` per call would be slower still).

Reported per run: delivered observations/s per client, observations lost (published but never
received, summed over clients), p50/p99 publish→receive latency, and the daphne process' RSS.
Clients run in a separate process so that their decoding does not slow the publisher.

Usage: ``python bench/transport.py [--duration 5] [--rates 1000,5000] [--clients 1,10]``
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
from pathlib import Path

import orjson
import psutil
import websockets

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controllers.telemetry.publisher import RedisPublisher  # noqa: E402
from controllers.telemetry.redisboot import ensure_redis, free_port  # noqa: E402
from dashboard.wsclient import TelemetryWsClient  # noqa: E402

TOPIC = "bench"


def start_daphne(app: str, redis_url: str, prefix: str, run_dir: Path) -> tuple[subprocess.Popen, int]:
    port = free_port()
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_ALLOW_ANONYMOUS": "1", "CTRLSCOPE_DB": str(run_dir / "bench.sqlite3"),
           "CTRLSCOPE_LOG_LEVEL": "WARNING"}
    log = open(run_dir / f"bench-daphne-{port}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"daphne ({app}) did not start")


# -- client process ------------------------------------------------------------------------------
def client_proc(kind: str, port: int, n_clients: int, expected: int, ready: mp.Event, go_home: mp.Event,
                out: mp.Queue) -> None:
    async def ctrlscope_client(i: int, stats: dict) -> None:
        def on_records(topic: str, records: list, now: float) -> None:
            now_ms = time.time() * 1000
            for r in records:
                stats["seqs"].add(r["seq"])
                stats["lat"].append(now_ms - r["ts"])

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
                stats["seqs"].add(r["seq"])
                stats["lat"].append(now_ms - r["ts"])

    async def main() -> None:
        stats = [{"seqs": set(), "lat": [], "ready": False, "resyncs": 0} for _ in range(n_clients)]
        fn = ctrlscope_client if kind == "ctrlscope" else peer_client
        tasks = [asyncio.create_task(fn(i, stats[i])) for i in range(n_clients)]
        while not all(s["ready"] for s in stats):
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.3)  # group_add / subscriptions settle
        ready.set()
        await asyncio.gather(*tasks)
        out.put([{"received": len(s["seqs"] & set(range(1, expected + 1))), "lat": s["lat"],
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


def run_one(kind: str, rate: int, n_clients: int, duration: float, redis_url: str, run_dir: Path) -> dict:
    prefix = f"bench-{uuid.uuid4().hex[:8]}:"
    os.environ["CTRLSCOPE_PREFIX"] = prefix
    app = "dashboard.asgi:application" if kind == "ctrlscope" else "bench.peer_asgi:application"
    proc, port = start_daphne(app, redis_url, prefix, run_dir)
    try:
        if kind == "ctrlscope":  # the topic must exist before clients subscribe
            seed = RedisPublisher(redis_url, prefix=prefix)
            seed.set_state(TOPIC, "seed", {"v": 1})
            seed.flush()
            seed.stop()
        expected = int(rate * duration)
        ready, go_home, out = mp.Event(), mp.Event(), mp.Queue()
        clients = mp.Process(target=client_proc, args=(kind, port, n_clients, expected, ready, go_home, out))
        clients.start()
        if not ready.wait(30):
            raise RuntimeError("clients did not connect")
        t0 = time.monotonic()
        published = publish_ctrlscope(redis_url, prefix, rate, duration) if kind == "ctrlscope" else publish_peer(redis_url, prefix, rate, duration)
        elapsed = time.monotonic() - t0
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
        "transport": "ctrlscope streams" if kind == "ctrlscope" else "channels_redis group_send",
        "rate": rate, "clients": n_clients,
        "delivered_per_client": statistics.mean(received) / elapsed,
        "lost": sum(published - r for r in received),
        "lost_pct": 100.0 * sum(published - r for r in received) / (published * n_clients),
        "p50": _pct(lat, 50), "p99": _pct(lat, 99),
        "rss_mb": rss / 2**20,
        "resyncs": sum(r["resyncs"] for r in results),
    }


def _pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def _delete_prefix(url: str, prefix: str) -> None:
    import redis

    r = redis.Redis.from_url(url)
    keys = list(r.scan_iter(match=prefix + "*", count=1000))
    if keys:
        r.delete(*keys)
    r.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--rates", default="1000,5000")
    parser.add_argument("--clients", default="1,10")
    parser.add_argument("--transports", default="ctrlscope,peer")
    args = parser.parse_args()
    run_dir = ROOT / "run"
    run_dir.mkdir(exist_ok=True)
    handle = ensure_redis(run_dir)
    os.environ["REDIS_URL"] = handle.url
    os.environ.setdefault("CTRLSCOPE_DEMO", "1")
    os.environ["CTRLSCOPE_DB"] = str(run_dir / "bench.sqlite3")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    rows = []
    print(f"redis {handle.url} ({handle.source}); {os.cpu_count()} CPUs; {args.duration:g}s per run", flush=True)
    try:
        for rate in [int(x) for x in args.rates.split(",")]:
            for n in [int(x) for x in args.clients.split(",")]:
                for kind in args.transports.split(","):
                    row = run_one(kind, rate, n, args.duration, handle.url, run_dir)
                    rows.append(row)
                    print(f"  done: {row['transport']} {rate}/s x{n}", flush=True)
    finally:
        handle.stop()
    header = "| transport | obs/s published | clients | delivered/s per client | lost | p50 ms | p99 ms | server RSS MB |"
    print()
    print(header)
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['transport']} | {r['rate']:,} | {r['clients']} | {r['delivered_per_client']:,.0f} | "
              f"{r['lost']:,} ({r['lost_pct']:.1f}%) | {r['p50']:.1f} | {r['p99']:.1f} | {r['rss_mb']:.0f} |")
    target = [r for r in rows if r["transport"].startswith("ctrlscope") and r["rate"] == 1000 and r["clients"] == 10]
    if target:
        t = target[0]
        ok = t["p99"] <= 50 and t["lost"] == 0
        print(f"\ntarget (1,000 obs/s to 10 clients, p99 <= 50 ms, 0 lost): "
              f"{'MET' if ok else 'NOT MET'} (p99 {t['p99']:.1f} ms, lost {t['lost']})")


if __name__ == "__main__":
    main()
