"""The key page's first load: one key's story scanned from full streams (``dashboard/key_story.py``).

A key page opened late asks ``story.json`` once for everything the retained streams say about its
key: the controller's topic, its queue's and its informers', ``DEFAULT_SCAN`` (5,000) entries each,
newest first. Here the three topics are full: ``--frames`` frames of ``--records`` records each (a
watch event, a queue add and a controller event per object), every key different, the key's own
records in one frame in the middle. Measured, best and median of ``--repeat`` runs of ``story()``
over a real Redis (no HTTP: daphne adds a constant):

- ``ctrlscope``: key_story.story() as served -- queue and informer frames are searched as bytes for
  the key's JSON string and decoded only when they hold it; the controller's are all decoded (a
  write's attribution needs every attempt's start and end);
- peer ``decode every frame``: the obvious scan, every frame of every topic decoded with orjson and
  its records compared (what the byte search saves);
- ``XREVRANGE only``: reading the entries from Redis, nothing decoded (the floor).

Run: ``python bench/key_story.py [--frames 5000] [--records 20] [--repeat 5]``. Needs Redis
(started in a temporary directory when none answers on the configured URL).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import redis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.transport import _delete_prefix  # noqa: E402
from controllers.schema import QueueOp, TopicKind, worker_topic  # noqa: E402
from controllers.telemetry.publisher import RedisPublisher  # noqa: E402
from controllers.telemetry.redisboot import ensure_redis  # noqa: E402
from controllers.telemetry.streams import Keys, StreamReader, entries_of  # noqa: E402
from controllers.telemetry.telemetry_observer import TelemetryObserver  # noqa: E402
from dashboard.key_story import DEFAULT_SCAN, story  # noqa: E402

WORKER, CONTROLLER, INFORMER, KEY = "bench", "podset", "pods", "default/web"


def fill(url: str, prefix: str, frames: int, records: int) -> None:
    """Three full topics, the key's records in frame ``frames // 2``."""
    pub = RedisPublisher(url, prefix=prefix, maxlen=max(frames + 100, 20_000))
    obs = TelemetryObserver(pub, worker=WORKER)
    obs.on_informer(INFORMER, fifo="DeltaFIFO", resync_period=0.0)
    obs.on_controller(CONTROLLER, watches=[INFORMER], workers=4, started=True)
    pub.flush()
    for i in range(frames):
        for j in range(records):
            key = KEY if (i, j) == (frames // 2, 0) else f"default/pod-{i}-{j}"
            obs.on_watch_event(INFORMER, event_type="MODIFIED", key=key, resource_version=str(i))
            obs.on_queue(CONTROLLER, op=QueueOp.ADD, key=key, depth=1)
            obs.on_event(CONTROLLER, event="update", key=key, requests=[key])
        pub.flush()
    pub.stop()


def decode_everything(reader: StreamReader, scan: int) -> int:
    """The peer: every frame of the three topics decoded, every record compared."""
    found = 0
    for kind, name in ((TopicKind.CONTROLLER, CONTROLLER), (TopicKind.QUEUE, CONTROLLER), (TopicKind.INFORMER, INFORMER)):
        rows = reader.client.xrevrange(reader.keys.stream(worker_topic(WORKER, kind, name)), count=scan)
        for _, raw in entries_of(rows[::-1]):
            frame = orjson.loads(raw)
            for r in frame.get("r") or ():
                if r.get("key") == KEY or KEY in (r.get("requests") or ()):
                    found += 1
    return found


def read_only(reader: StreamReader, scan: int) -> int:
    n = 0
    for kind, name in ((TopicKind.CONTROLLER, CONTROLLER), (TopicKind.QUEUE, CONTROLLER), (TopicKind.INFORMER, INFORMER)):
        n += len(reader.client.xrevrange(reader.keys.stream(worker_topic(WORKER, kind, name)), count=scan))
    return n


def timed(fn: Callable[[], Any], repeat: int) -> tuple[list[float], Any]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append((time.perf_counter() - start) * 1000)
    return times, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=DEFAULT_SCAN)
    parser.add_argument("--records", type=int, default=20, help="objects per frame (3 records each: watch, queue, event)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ctrlscope-bench-") as tmp:
        handle = ensure_redis(Path(tmp))
        prefix = f"benchkey-{uuid.uuid4().hex[:8]}:"
        try:
            started = time.perf_counter()
            fill(handle.url, prefix, args.frames, args.records)
            filled = time.perf_counter() - started
            client = redis.Redis.from_url(handle.url)
            reader = StreamReader(client, Keys(prefix))
            sizes = [client.memory_usage(reader.keys.stream(worker_topic(WORKER, k, n))) or 0
                     for k, n in ((TopicKind.CONTROLLER, CONTROLLER), (TopicKind.QUEUE, CONTROLLER), (TopicKind.INFORMER, INFORMER))]
            print(f"redis {handle.url} ({handle.source}); 3 topics x {args.frames:,} frames x {args.records} objects, "
                  f"{sum(sizes) / 2**20:.1f} MiB of streams, filled in {filled:.1f} s; scan {DEFAULT_SCAN:,} per topic; "
                  f"best and median of {args.repeat}")
            rows = []
            times, body = timed(lambda: story(reader, worker=WORKER, controller=CONTROLLER, key=KEY), args.repeat)
            found = sum(len(t["records"]) for t in body["topics"])
            rows.append(("ctrlscope story() (byte search, then decode)", times, found))
            times, found = timed(lambda: decode_everything(reader, DEFAULT_SCAN), args.repeat)
            rows.append(("peer: decode every frame", times, found))
            times, n = timed(lambda: read_only(reader, DEFAULT_SCAN), args.repeat)
            rows.append(("XREVRANGE only (floor)", times, "-"))
            print()
            print("| scan | best ms | median ms | records of the key found |")
            print("|---|---:|---:|---:|")
            for label, t, f in rows:
                print(f"| {label} | {min(t):.0f} | {statistics.median(t):.0f} | {f} |")
            client.close()
        finally:
            _delete_prefix(handle.url, prefix)
            handle.stop()


if __name__ == "__main__":
    main()
