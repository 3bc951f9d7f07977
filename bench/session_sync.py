"""A page opening with many topics: how long until the session has every one of them live.

A websocket session syncs each subscription (snapshot, epoch, catch-up from Redis) before sending it
live frames. It used to do that one topic after another, two round trips for the snapshot and epoch
of each; now ``ClientSession._prefetch`` reads the snapshots and epochs of every due subscription in
one round (one pipeline; a Redis Cluster: one per master, at once). Peer: the same session with the
prefetch turned off (each topic read on its own, the code before), measured in the same run.

Each topic has ``--keys`` state keys of ~230 bytes and 5 frames; the page subscribes to ``--topics``
topics in a row and acks everything. Reported: the median over ``--rounds`` of the time from the
first subscription to every topic live, on one Redis (the machine's on 6379, or a private one) and
on a local Redis Cluster of three masters and three replicas (Debian's redis-server; skipped
without it).

Usage: ``python bench/session_sync.py [--topics 200] [--keys 20] [--rounds 5] [--no-cluster]``
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from controllers.telemetry.clusterboot import LocalRedisCluster  # noqa: E402
from controllers.telemetry.publisher import RedisPublisher  # noqa: E402
from controllers.telemetry.redisboot import ensure_redis  # noqa: E402
from dashboard.hub import StreamHub  # noqa: E402
from dashboard.session import ClientSession  # noqa: E402


async def _until_live(url: str, prefix: str, topics: list[str], batched: bool) -> float:
    hub = StreamHub(url, prefix)
    session: ClientSession

    async def send(text: str) -> None:
        msg = orjson.loads(text)
        if "seq" in msg:  # the page acks every data message at once
            ack = orjson.dumps({"op": "ack", "seq": msg["seq"]}).decode()
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(session.handle(ack)))

    session = ClientSession(hub, send)
    if not batched:
        async def one_by_one(_due: object) -> dict:
            return {}

        session._prefetch = one_by_one  # type: ignore[method-assign]
    try:
        await session.start()
        started = time.perf_counter()
        for topic in topics:
            await session.handle(orjson.dumps({"op": "sub", "topic": topic}).decode())
        while not all(t in session.subs and session.subs[t].live for t in topics):
            await asyncio.sleep(0.001)
        return time.perf_counter() - started
    finally:
        await session.close()
        await hub.close()


def _fill(url: str, prefix: str, topics: list[str], keys: int) -> RedisPublisher:
    pub = RedisPublisher(url, prefix=prefix)  # flushed here, by this thread
    for topic in topics:
        for k in range(keys):
            pub.set_state(topic, f"default/obj-{k}", {"n": k, "pad": "x" * 200})
        for i in range(5):
            pub.publish(topic, {"i": i})
    pub.flush()
    return pub


def measure(where: str, url: str, args: argparse.Namespace) -> list[str]:
    prefix = f"bench-sync-{uuid.uuid4().hex[:6]}:"
    topics = [f"w/bench/sync-{i:03d}" for i in range(args.topics)]
    pub = _fill(url, prefix, topics, args.keys)
    times: dict[bool, list[float]] = {False: [], True: []}
    try:
        for _ in range(args.rounds):
            for batched in (False, True):  # interleaved: both see the same machine
                times[batched].append(asyncio.run(_until_live(url, prefix, topics, batched)))
    finally:
        pub.stop()
    peer, ours = statistics.median(times[False]) * 1000, statistics.median(times[True]) * 1000
    return [f"| {where} | {args.topics} | {peer:,.0f} | {ours:,.0f} | {peer / ours:.1f}× |"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=200)
    parser.add_argument("--keys", type=int, default=20, help="state keys per topic")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-cluster", action="store_true", help="skip the Redis Cluster row")
    args = parser.parse_args()
    rows = ["| Redis | topics | one topic at a time (peer), ms | batched (ctrlscope), ms | speed-up |",
            "|---|---:|---:|---:|---:|"]
    run_dir = Path(tempfile.mkdtemp(prefix="bench-sync-"))
    handle = ensure_redis(run_dir)
    try:
        print(f"session_sync: one Redis at {handle.url}, {args.rounds} rounds", flush=True)
        rows += measure("one Redis", handle.url, args)
    finally:
        handle.stop()
    if not args.no_cluster and shutil.which("redis-server") and shutil.which("redis-cli"):
        cluster = LocalRedisCluster(run_dir / "cluster").start()
        try:
            print("session_sync: a local Redis Cluster (3 masters, 3 replicas)", flush=True)
            rows += measure("Redis Cluster", cluster.url, args)
        finally:
            cluster.stop()
    elif not args.no_cluster:
        print("session_sync: no redis-server/redis-cli: the Redis Cluster row is skipped", flush=True)
    shutil.rmtree(run_dir, ignore_errors=True)
    print("\nTime from the first subscription until every topic is live (median):\n")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
