"""``RequestCounter``: the resource requests a server answered, by user agent, verb and resource.

The load a client puts on the API server is what the watcher-vs-informer comparison measures: a raw
watch loop that GETs per event against an informer that reads its cache. The real API server counts
requests too (``apiserver_request_total``), but by verb and resource only, not by client; whatever
serves ctrlscope's fault API counts them by ``User-Agent`` as well, since every client names itself
there (client-go: ``program/version (os/arch) kubernetes/commit``; ctrlscope's runtime and the
Python client their own), and ``GET /_sim/requests`` returns the counts.

Counting is one dict increment per request on the server's event loop. Keys are bounded: past
``MAX_KEYS`` distinct ones, a new user agent is counted as ``OTHER`` (so a client inventing a user
agent per request cannot grow the server's memory), and a user agent is cut to ``MAX_AGENT``
characters. Only resource requests are counted (the verbs and resources fault rules match);
discovery and ``/version`` are not.
"""

from __future__ import annotations

from typing import Any

from controllers.clock import Clock, RealClock, wall_ms

MAX_KEYS = 10_000
MAX_AGENT = 256
OTHER = "(other user agents)"


class RequestCounter:
    """Requests answered since ``since`` (or the last ``reset``), by (user agent, verb, resource)."""

    def __init__(self, *, clock: Clock | None = None) -> None:
        self.clock: Clock = clock or RealClock()
        self.counts: dict[tuple[str, str, str], int] = {}
        self.since = wall_ms(self.clock)

    def count(self, user_agent: str, verb: str, resource: str) -> None:
        key = (user_agent[:MAX_AGENT], verb, resource)
        counts = self.counts
        n = counts.get(key)
        if n is None and len(counts) >= MAX_KEYS:
            key = (OTHER, verb, resource)
            n = counts.get(key)
        counts[key] = (n or 0) + 1

    def snapshot(self) -> dict[str, Any]:
        """What ``GET /_sim/requests`` answers: one row per key, most requests first."""
        rows = sorted(self.counts.items(), key=lambda kv: (-kv[1], kv[0]))
        return {"sinceMs": self.since, "total": sum(self.counts.values()),
                "requests": [{"userAgent": ua, "verb": verb, "resource": resource, "count": n}
                             for (ua, verb, resource), n in rows]}

    def reset(self) -> None:
        self.counts.clear()
        self.since = wall_ms(self.clock)
