"""Reading what a worker published, straight from Redis, for assertions."""

from __future__ import annotations

from typing import Any

import orjson
import redis

from controllers.telemetry.streams import Keys


class Published:
    def __init__(self, redis_url: str, prefix: str) -> None:
        self.client = redis.Redis.from_url(redis_url)
        self.keys = Keys(prefix)

    def records(self, topic: str, kind: str | None = None) -> list[dict[str, Any]]:
        out = []
        for _id, fields in self.client.xrange(self.keys.stream(topic)):
            for r in orjson.loads(fields[b"f"]).get("r", []):
                if kind is None or r.get("k") == kind:
                    out.append(r)
        return out

    def state(self, topic: str) -> dict[str, Any]:
        raw = self.client.hgetall(self.keys.snapshot(topic))
        raw.pop(b"__id__", None)
        return {k.decode(): orjson.loads(v) for k, v in raw.items()}

    def close(self) -> None:
        self.client.close()
