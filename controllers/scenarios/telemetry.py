"""Counting what the controllers did during a scenario, from their published telemetry.

Stream ids are millisecond timestamps, so "every record of worker W between t0 and t1" is one
XRANGE per topic. Scenarios use it for claims the API cannot show: how many times a handler ran
versus how many reconciles the workqueue let through.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from controllers.schema import TopicKind, topic_part, worker_topic, worker_topic_prefix
from controllers.telemetry import redis_config
from controllers.telemetry.streams import Keys, StreamReader
from controllers.telemetry.topic_state import TopicState

Record = dict[str, Any]


class TelemetryReader:
    """Reads one worker's records back from Redis."""

    def __init__(self, url: str, *, prefix: str, worker: str) -> None:
        self.redis = redis_config.sync_client(url, socket_timeout=5)
        self.reader = StreamReader(self.redis, Keys.for_url(prefix, url))
        self.worker = topic_part(worker)

    def close(self) -> None:
        self.redis.close()

    def cache_keys(self, since_ms: float, kind_suffix: str = "PodSet") -> set[str] | None:
        """Keys in the snapshot of the worker's informer cache for ``*{kind_suffix}``."""
        prefix = worker_topic_prefix(self.worker, TopicKind.INFORMER)
        matches = [t for t in self.reader.topics() if t.startswith(prefix) and t.endswith(kind_suffix)]
        if not matches:
            return None
        _, state = self.reader.snapshot(matches[0])
        return {k.decode() for k in state}

    def components(self) -> dict[str, Record]:
        """The worker's published components (informers, controllers, leases), by entry key."""
        _, state = self.reader.snapshot(worker_topic(self.worker, TopicKind.COMPONENTS))
        return {k.decode(): orjson.loads(v) for k, v in state.items()}

    def records(self, kind: TopicKind, since_ms: float, until_ms: float,
                where: Callable[[Record], bool] = lambda r: True, *, name: str | None = None) -> list[Record]:
        """Records of every ``w/{worker}/{kind}/*`` topic (only ``w/{worker}/{kind}/{name}`` with
        ``name``) published in [since_ms, until_ms], read the way the dashboard reads them
        (``TopicState``: unknown record kinds and frames of another protocol major are left out)."""
        out: list[Record] = []
        prefix = worker_topic_prefix(self.worker, kind)
        topics = [worker_topic(self.worker, kind, name)] if name is not None else \
            [t for t in self.reader.topics() if t.startswith(prefix)]
        for topic in topics:
            reader = TopicState()
            for eid, frame in self.reader.read_range(topic, f"{int(since_ms)}-0", f"{int(until_ms) + 1}-0", limit=None):
                out.extend(r for r in reader.apply(eid.decode(), frame) if where(r))
        return out
