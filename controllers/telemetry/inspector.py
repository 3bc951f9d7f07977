"""The object inspector: one cached object, on demand, from the worker whose informer holds it.

Why a pull. Everything else the dashboard shows is pushed: the runtime reports, the publisher writes
frames to Redis, daphne tails them to the browser. Whole objects cannot travel that way -- copying a
100,000-object cache into Redis, and again on every change, would cost the worker its throughput and
Redis its memory -- so the worker publishes compact summaries and keeps the objects. When a user
clicks one row, the dashboard asks that worker for that one object. Only the *trigger* goes the other
way: the data still flows runtime → Redis → browser, Redis stays the only link between the processes
(the worker opens no port, the dashboard never connects to it), and nothing runs unless someone asks.

The exchange (key names from ``streams.Keys``; a request id is 32 hex digits):

1. The dashboard (``ask``) reads the worker's heartbeat ``inspect:alive:{worker}``, which also names
   the informers it answers for; counts the request in the per-worker window
   ``inspect:rate:{worker}:{second}``; stores the request as ``inspect:req:{id}`` with a TTL as long
   as it will wait (so Redis's clock, not two hosts' clocks, decides when a request is stale); pushes
   the id onto ``inspect:queue:{worker}`` (trimmed to ``MAX_QUEUED`` ids); then waits on
   ``inspect:reply:{id}`` with BLPOP for at most ``timeout`` (2 s).
2. The worker's ``Inspector`` (its own thread and Redis connection) BRPOPs ids. A request whose key
   has expired is skipped: nobody waits for it any more. A valid one is answered from the informer's
   Store (the current object, redacted) and from ``LastUpdates`` (the last pair an update handler
   received), and the answer is pushed to ``inspect:reply:{id}`` with a short TTL. The heartbeat is
   refreshed every second and deleted on stop.

Bounded on both sides: every key has a TTL, the queue is trimmed, an answer is at most
``MAX_REPLY_BYTES``, the dashboard allows ``RATE_PER_SECOND`` requests per worker and second (in
Redis, so for all daphne processes together) and the worker the same again with a token bucket, and
the worker answers one request at a time from what it holds anyway. A flood of requests therefore
costs a few bounded keys, never growing memory. No heartbeat, no answer in time, or Redis down each
end in a clear error, never a hang.

Answers are JSON objects that start with ``{"status":NNN`` (HTTP semantics: 200, or 400/404/413/429/
500 with ``error``), so the dashboard passes them through without decoding a large object.
"""

from __future__ import annotations

import logging
import os
import re
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, Protocol

import orjson
import redis

from controllers.clock import BackgroundThread, Clock, RealClock, wall_ms
from controllers.schema import TOPIC_SEGMENT, topic_part
from controllers.telemetry import redis_config
from controllers.telemetry.last_updates import LastUpdates
from controllers.telemetry.redaction import REDACTED, redact
from controllers.telemetry.scrub import SECRETS
from controllers.telemetry.streams import Keys
from controllers.telemetry.summary import resource_version

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 2.0  # seconds the dashboard waits; well under redis-py's 5 s socket timeout
POLL = 0.25  # the worker's BRPOP block (like the hub's XREAD): how soon ``stop`` returns
HEARTBEAT_EVERY = 1.0
HEARTBEAT_TTL_MS = 5000  # a worker silent this long is reported as not running
REPLY_TTL_MS = 5000
QUEUE_TTL_MS = 10_000
MAX_QUEUED = 16
MAX_REQUEST_BYTES = 1024
MAX_REPLY_BYTES = 6 * 1024 * 1024  # three objects at the API server's ~1.5 MiB limit, and room to spare
RATE_PER_SECOND = 10

# namespace/name (or a cluster-scoped name): printable ASCII without spaces or a second "/".
KEY = re.compile(r"^[!-.0-~]{1,253}(?:/[!-.0-~]{1,253})?$")
REQUEST_ID = re.compile(r"^[0-9a-f]{32}$")
_STATUS = re.compile(rb'^\{"status":([0-9]{3})[,}]')


class CacheReader(Protocol):
    """What the inspector reads an informer's cache through (a ``Store`` is one)."""

    def get_by_key(self, key: str) -> Any: ...


StoresFunc = Callable[[], Mapping[str, CacheReader]]
"""Returns the worker's caches by informer name; called per request, so informers added later count."""


class Answer(NamedTuple):
    """An answer as the dashboard serves it: an HTTP status and a JSON body starting with it."""

    status: int
    body: bytes


def error(status: int, message: str) -> Answer:
    return Answer(status, orjson.dumps({"status": status, "error": message}))


class Inspector:
    """The worker side: answers inspect requests from the informers' caches (see the module docstring)."""

    def __init__(self, url: str, *, prefix: str, worker: str, last_updates: LastUpdates, stores: StoresFunc,
                 clock: Clock | None = None, rate: float = RATE_PER_SECOND) -> None:
        self.keys = Keys.for_url(prefix, url)
        self.worker = topic_part(worker)
        self.last_updates = last_updates
        self.stores = stores
        self.clock: Clock = clock or RealClock()
        self.rate = rate
        # Its own connection: a BRPOP parks it, and the publisher's must never wait behind one.
        self.redis = redis_config.sync_client(url, socket_timeout=5, socket_connect_timeout=2)
        self._loop = BackgroundThread(self._run, name=f"inspector-{self.worker}", clock=self.clock)
        self._stop = self._loop.stop_signal
        # Token bucket: at most ``rate`` answers per second, bursts of ``rate``.
        self._tokens = float(rate)
        self._refilled = self.clock.now()
        self.answered = 0
        self.expired = 0
        self.rejected = 0
        self.limited = 0

    # -- answering (pure: no Redis) ---------------------------------------------------------------
    def informers(self) -> dict[str, str]:
        """Topic segment → informer name, for every cache this worker can answer from."""
        return {topic_part(name): name for name in self.stores()}

    def answer(self, informer: str, key: str) -> Answer:
        """The answer for one ``(informer segment, key)`` request."""
        if not TOPIC_SEGMENT.match(informer) or not KEY.match(key):
            return error(400, "informer must be a topic segment and key namespace/name (printable ASCII)")
        stores = self.stores()
        name = next((n for n in stores if topic_part(n) == informer), None)
        if name is None:
            return error(404, f"worker {self.worker} has no informer {informer}")
        obj = stores[name].get_by_key(key)
        pair = self.last_updates.get(name, key)
        if obj is None and pair is None:
            return error(404, f"{key} is not in the {name} cache, and no update handler call for it was seen "
                              "since the worker started")
        current_rv = resource_version(obj)
        update = None
        if pair is not None:
            # ``new`` is left out when it is the current object: the page takes ``current`` instead.
            same = obj is not None and pair.new_rv == current_rv
            update = {"handler": pair.handler, "at": pair.at, "old_rv": pair.old_rv, "new_rv": pair.new_rv,
                      "new": None if same else orjson.Fragment(pair.new)}
        history = self.last_updates
        body = orjson.dumps({
            "status": 200, "worker": self.worker, "informer": name, "key": key, "cached": obj is not None,
            "current": None if obj is None else orjson.Fragment(orjson.dumps(redact(obj), default=repr)),
            "current_rv": current_rv,
            "previous": None if pair is None else orjson.Fragment(pair.old),
            "previous_rv": None if pair is None else pair.old_rv,
            "update": update,
            "note": None if pair is not None else (
                f"no update seen since the worker started (it keeps the last update of up to "
                f"{history.max_keys:,} keys / {history.max_bytes / 2**20:g} MiB)"),
            "redacted": REDACTED,
            "ts": wall_ms(self.clock),
        })
        if len(body) > MAX_REPLY_BYTES:
            return error(413, f"{key} is too large to show ({len(body):,} bytes; the limit is {MAX_REPLY_BYTES:,})")
        return Answer(200, body)

    def _take_token(self) -> bool:
        now = self.clock.now()
        self._tokens = min(self.rate, self._tokens + (now - self._refilled) * self.rate)
        self._refilled = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True

    # -- Redis ------------------------------------------------------------------------------------
    def handle(self, request_id: bytes) -> Answer | None:
        """Answer one queued request id (``None``: malformed or expired, nobody to answer)."""
        rid = request_id.decode("ascii", "replace")
        if not REQUEST_ID.match(rid):
            self.rejected += 1
            return None
        raw = self.redis.get(self.keys.inspect_request(rid))
        if raw is None:
            self.expired += 1
            return None
        request = _parse(raw)
        if request is None:
            self.rejected += 1
            answer = error(400, "malformed inspect request")
        elif not self._take_token():
            self.limited += 1
            answer = error(429, f"worker {self.worker} is answering more than {self.rate:g} inspect requests/s; "
                                "try again in a second")
        else:
            try:
                answer = self.answer(*request)
            except Exception as exc:  # noqa: BLE001 -- a bad object must not end the inspector
                log.exception("inspector: answering %s failed", request)
                answer = error(500, f"inspecting failed in the worker: {type(exc).__name__}: {exc}")
        reply = self.keys.inspect_reply(rid)
        pipe = self.redis.pipeline(transaction=True)
        # The answer holds whole objects: a ConfigMap or a Pod's env may carry a Secret's value.
        pipe.lpush(reply, SECRETS.scrub_json(answer.body))
        pipe.pexpire(reply, REPLY_TTL_MS)
        pipe.delete(self.keys.inspect_request(rid))
        pipe.execute()
        self.answered += 1
        return answer

    def heartbeat(self) -> None:
        """Say this worker answers, and for which informers (expires unless refreshed)."""
        beat = {"informers": self.informers(), "pid": os.getpid(), "ts": wall_ms(self.clock)}
        self.redis.set(self.keys.inspect_alive(self.worker), orjson.dumps(beat), px=HEARTBEAT_TTL_MS)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> Inspector:
        self._loop.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop answering (within one ``POLL``) and withdraw the heartbeat."""
        self._loop.stop(timeout)
        try:
            self.redis.delete(self.keys.inspect_alive(self.worker))
        except redis.RedisError:
            pass  # it expires by itself
        self.redis.close()

    def _run(self) -> None:
        queue = self.keys.inspect_queue(self.worker)
        backoff = 0.0
        beat_at: float | None = None
        while not self._stop.stopped:
            try:
                if beat_at is None or self.clock.now() - beat_at >= HEARTBEAT_EVERY:
                    self.heartbeat()
                    beat_at = self.clock.now()
                popped = self.redis.brpop([queue], timeout=POLL)
                if popped is not None:
                    self.handle(popped[1])
                backoff = 0.0
            except redis.RedisError as exc:
                if not backoff:
                    log.warning("inspector: Redis unreachable (%s); retrying", exc)
                beat_at = None
                backoff = min(2.0, max(0.1, backoff * 2))
                self._stop.wait(backoff)


def _parse(raw: bytes) -> tuple[str, str] | None:
    if len(raw) > MAX_REQUEST_BYTES:
        return None
    try:
        request = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(request, dict):
        return None
    informer, key = request.get("informer"), request.get("key")
    if not isinstance(informer, str) or not isinstance(key, str):
        return None
    return informer, key


def ask(client: redis.Redis, keys: Keys, *, worker: str, informer: str, key: str,
        timeout: float = DEFAULT_TIMEOUT, clock: Clock | None = None) -> Answer:
    """The dashboard side: ask ``worker`` for one object and wait at most ``timeout`` seconds.

    Redis errors are raised (the caller says Redis is down); everything else is an ``Answer``."""
    if not TOPIC_SEGMENT.match(worker):
        return error(404, "no such worker")
    if not TOPIC_SEGMENT.match(informer):
        return error(404, "no such informer")
    if not KEY.match(key):
        return error(400, "key must be namespace/name (printable ASCII, no spaces)")
    alive = client.get(keys.inspect_alive(worker))
    if alive is None:
        if client.sismember(keys.topics, f"w/{worker}/components"):
            return error(503, f"worker {worker} is not running (no inspector heartbeat in the last "
                              f"{HEARTBEAT_TTL_MS / 1000:g} s): only the summaries it published are left")
        return error(404, f"no worker named {worker} publishes telemetry here")
    informers = orjson.loads(alive).get("informers") or {}
    if informer not in informers:
        return error(404, f"worker {worker} has no informer {informer} "
                          f"(it has: {', '.join(sorted(informers.values())) or 'none'})")
    window = keys.inspect_rate(worker, int((clock or RealClock()).wall()))
    pipe = client.pipeline(transaction=True)
    pipe.incr(window)
    pipe.expire(window, 2)
    if pipe.execute()[0] > RATE_PER_SECOND:
        return error(429, f"more than {RATE_PER_SECOND} inspect requests/s for worker {worker}; "
                          "try again in a second")
    rid = uuid.uuid4().hex
    queue = keys.inspect_queue(worker)
    request = orjson.dumps({"informer": informer, "key": key})
    if keys.cluster:
        # The request and the queue are in different slots, which one transaction cannot span: the
        # request first, so that the worker never pops an id whose request is not there yet.
        client.set(keys.inspect_request(rid), request, px=max(1, int(timeout * 1000)))
        pipe = client.pipeline(transaction=True)
    else:
        pipe = client.pipeline(transaction=True)
        pipe.set(keys.inspect_request(rid), request, px=max(1, int(timeout * 1000)))
    pipe.lpush(queue, rid)
    pipe.ltrim(queue, 0, MAX_QUEUED - 1)
    pipe.pexpire(queue, QUEUE_TTL_MS)
    pipe.execute()
    popped = client.blpop([keys.inspect_reply(rid)], timeout=timeout)
    if popped is None:
        client.delete(keys.inspect_request(rid))
        return error(504, f"worker {worker} did not answer within {timeout:g} s (busy, or stopping)")
    body = popped[1]
    m = _STATUS.match(body)
    return Answer(int(m.group(1)), body) if m else error(502, f"worker {worker} sent a malformed answer")
