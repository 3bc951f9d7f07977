"""Reading what a worker published, straight from Redis, for assertions (the readers of
tests/telemetry/test_publisher.py, per topic: records by kind, the snapshot's state)."""

from __future__ import annotations

from typing import Any

import redis

from controllers.telemetry.streams import Keys
from tests.telemetry.test_publisher import read_snapshot, read_stream


class Published:
    def __init__(self, redis_url: str, prefix: str) -> None:
        self.url, self.prefix = redis_url, prefix
        self.client = redis.Redis.from_url(redis_url)  # for raw reads (stream ids, reset frames)
        self.keys = Keys(prefix)

    def records(self, topic: str, kind: str | None = None) -> list[dict[str, Any]]:
        return [r for _id, frame in read_stream(self.url, self.prefix, topic) for r in frame.get("r", [])
                if kind is None or r.get("k") == kind]

    def state(self, topic: str) -> dict[str, Any]:
        return read_snapshot(self.url, self.prefix, topic)[1]

    def close(self) -> None:
        self.client.close()
