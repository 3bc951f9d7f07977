"""A page opening with many topics: how long until the session has every one of them live.

A websocket session syncs each subscription (snapshot, epoch, catch-up from Redis) before sending it
live frames. It used to do that one topic after another: the snapshot, the epoch, then the catch-up
(a read, and an empty read before the tail takes over), four round trips a topic. Now
``ClientSession._prefetch`` reads the snapshots and epochs of every due subscription in one round
(one pipeline; a Redis Cluster: one per master, at once), and ``_catch_up`` reads every topic's
catch-up together, a round at a time. Peer: the session as it was before (``dashboard/session.py``
at ``--before``, read from git), on the same hub and Redis, measured in the same run, interleaved.

Each topic has ``--keys`` state keys of ~230 bytes and 5 frames; the page subscribes to ``--topics``
topics in a row and acks everything. Reported: the median over ``--rounds`` of the time from the
first subscription to every topic live, on one Redis (the machine's on 6379, or a private one) and
on a local Redis Cluster of three masters and three replicas (Debian's redis-server; skipped
without it).

Usage: ``python bench/session_sync.py [--topics 200] [--keys 20] [--rounds 5] [--no-cluster] [--before REV]``
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import types
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

BEFORE = "de0c0c0"  # the last commit whose session synced one topic at a time


def session_before(rev: str) -> type:
    """``ClientSession`` as ``dashboard/session.py`` was at ``rev`` (from git)."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:dashboard/session.py"], check=True,
                            capture_output=True, text=True).stdout
    module = types.ModuleType("session_before")
    exec(compile(source, f"{rev}:dashboard/session.py", "exec"), module.__dict__)  # noqa: S102 (our own history)
    return module.ClientSession


async def _until_live(url: str, prefix: str, topics: list[str], session_class: type) -> float:
    hub = StreamHub(url, prefix)
    session: ClientSession

    async def send(text: str) -> None:
        msg = orjson.loads(text)
        if "seq" in msg:  # the page acks every data message at once
            ack = orjson.dumps({"op": "ack", "seq": msg["seq"]}).decode()
            asyncio.get_running_loop().call_soon(lambda: asyncio.ensure_future(session.handle(ack)))

    session = session_class(hub, send)
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
    contenders = {False: session_before(args.before), True: ClientSession}
    try:
        for _ in range(args.rounds):
            for batched in (False, True):  # interleaved: both see the same machine
                times[batched].append(asyncio.run(_until_live(url, prefix, topics, contenders[batched])))
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
    parser.add_argument("--before", default=BEFORE, help=f"the peer's commit ({BEFORE})")
    args = parser.parse_args()
    rows = [f"| Redis | topics | one topic at a time (the session at {args.before}), ms | batched (ctrlscope), ms "
            "| speed-up |",
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
