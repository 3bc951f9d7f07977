"""Runs the protocol's test vectors (protocol/vectors/) through ctrlscope's Python implementation.

Five families, each a directory of JSON files (protocol/vectors/README.md describes the format):

- ``encode/``: observer calls in, the exact frames out. Steps call the observer's hooks by their
  language-neutral names (``queue``, ``reconcile_end``...), advance the clock or flush the
  publisher; the expected ``frames`` are every frame each topic's stream holds afterwards, in
  order, and ``snapshots`` every topic's snapshot hash. A vector's ``detect`` sets detection
  thresholds (v1.7; the others keep the protocol's defaults, whatever the environment says).
- ``queue/``: ``queue`` records in, the queue topic's per-key state out (``fold_queue_op``).
- ``derive/``: a snapshot and frames in, the state and the records a dashboard client derives
  (run here through the Redis frame script and in ``test_vectors_js.py`` through the browser's
  TelemetryClient).
- ``liveness/``: presence entries and last-frame times in, each worker's liveness out
  (``controllers/schema.py`` ``worker_liveness``; in ``test_vectors_js.py`` the browser's
  ``ctrlscopeProtocol.workerLiveness``).
- ``names/``: names in, topic segments out (``topic_part``).

``python -m tests.protocol.vectors --regenerate`` rewrites the expected outputs of ``encode/`` and
``queue/`` from this implementation (review the diff: the files are the contract, not the code).
"""

from __future__ import annotations

import inspect
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import redis

from controllers.clock import FakeClock
from controllers.schema import fold_queue_op
from controllers.telemetry.detectors import DetectionConfig
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.streams import FRAME_FIELD, NO_RECORDS_PREFIX, RESET_PREFIX, SNAPSHOT_ID_FIELD, Keys
from controllers.telemetry.telemetry_observer import TelemetryObserver

VECTORS = Path(__file__).resolve().parents[2] / "protocol" / "vectors"
START = 1000.0


def load(family: str) -> list[tuple[Path, dict[str, Any]]]:
    return [(p, json.loads(p.read_text())) for p in sorted((VECTORS / family).glob("*.json"))]


def _call(observer: TelemetryObserver, step: dict[str, Any]) -> None:
    hook = getattr(observer, "on_" + step["call"])
    params = list(inspect.signature(hook).parameters.values())
    kwargs = {k: v for k, v in step.items() if k != "call"}
    args = []
    if params and params[0].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD:
        args.append(kwargs.pop(params[0].name))
    if step["call"] == "store" and kwargs.get("op") == "replace":
        kwargs["obj"] = [tuple(pair) for pair in kwargs["obj"]]
    hook(*args, **kwargs)


def run_encode(vector: dict[str, Any], url: str,
               prefix: str) -> tuple[dict[str, list[bytes]], dict[str, Any], dict[str, Any]]:
    """Run one encode vector; returns (raw frames per topic, snapshot state per topic, the
    publisher's stage counters afterwards: ``controllers``, and ``watchers`` (v1.6) when any)."""
    clock = FakeClock(start=START, wall_offset=vector["wall_ms"] / 1000 - START)
    publisher = RedisPublisher(url, prefix=prefix, clock=clock, name=vector["publisher"])
    try:
        observer = TelemetryObserver(publisher, worker=vector["worker"], clock=clock,
                                     runtime=vector.get("runtime", "python"),
                                     detection=DetectionConfig.from_mapping(vector.get("detect") or {}))
        for step in vector["steps"]:
            if "advance" in step:
                clock.step(step["advance"])
            elif step.get("flush"):
                publisher.flush()
            else:
                _call(observer, step)
        sample = observer.stages()
        stages = orjson.loads(orjson.dumps({"controllers": sample["controllers"],
                                            **({"watchers": sample["watchers"]} if sample["watchers"] else {})}))
    finally:
        publisher.stop()
    client = redis.Redis.from_url(url)
    keys = Keys(prefix)
    try:
        topics = sorted(t.decode() for t in client.smembers(keys.topics))
        frames = {t: [f[FRAME_FIELD] for _, f in client.xrange(keys.stream(t))] for t in topics}
        snapshots = {}
        for t in topics:
            raw = client.hgetall(keys.snapshot(t))
            raw.pop(SNAPSHOT_ID_FIELD.encode(), None)
            snapshots[t] = {k.decode(): orjson.loads(v) for k, v in sorted(raw.items())}
    finally:
        client.close()
    return frames, snapshots, stages


def check_frame_bytes(raw: bytes) -> None:
    """The byte-level rules readers rely on without decoding (protocol/README.md, "Frames")."""
    frame = orjson.loads(raw)
    if frame.get("reset"):
        assert raw.startswith(RESET_PREFIX), raw[:40]
    else:
        assert next(iter(frame)) == "r", raw[:40]
        assert raw.startswith(NO_RECORDS_PREFIX) == (frame["r"] == []), raw[:40]


def run_queue(vector: dict[str, Any]) -> list[dict[str, Any]]:
    """The topic's whole state after each record."""
    state: dict[str, Any] = {}
    after: list[dict[str, Any]] = []
    for record in vector["records"]:
        key = record["key"]
        if not key:
            after.append(dict(state))
            continue
        value = fold_queue_op(state.get(key), record["op"], now_ms=record["ts"], delay=record.get("delay"),
                              requeues=record.get("requeues"))
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
        after.append(dict(state))
    return after


def regenerate(url: str) -> None:
    import uuid

    for path, vector in load("encode"):
        prefix = f"ctrlscope-vectors-{uuid.uuid4().hex[:8]}:"
        try:
            frames, snapshots, stages = run_encode(vector, url, prefix)
        finally:
            client = redis.Redis.from_url(url)
            for k in client.scan_iter(match=prefix + "*"):
                client.delete(k)
            client.close()
        vector["frames"] = {t: [orjson.loads(f) for f in fs] for t, fs in frames.items()}
        vector["snapshots"] = snapshots
        if "stages" in vector:  # opt-in: the vectors whose point is what the counters say
            vector["stages"] = stages
        path.write_text(json.dumps(vector, indent=1, ensure_ascii=False) + "\n")
    for path, vector in load("queue"):
        vector.pop("state", None)
        vector["after"] = run_queue(vector)
        path.write_text(json.dumps(vector, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regenerate"]:
        sys.exit("usage: python -m tests.protocol.vectors --regenerate   (needs REDIS_URL or a Redis on 6379)")
    import os

    regenerate(os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0"))
