"""StreamHub: one tail reader per server process, fanning telemetry frames out to websocket sessions.

Each daphne process has one hub (per event loop). The hub runs a single task that XREADs every
topic some session is subscribed to, from the last id it read, and hands each batch of entries to the
subscribed sessions synchronously (no copy, no re-encoding: frames stay raw JSON bytes). Sessions
buffer what they get; the hub never waits for a browser.

A session joining a topic does not need the hub's position: it takes a snapshot (or resumes from its
own cursor) and reads the gap with XRANGE, while the hub keeps delivering into the session's pending
buffer; entries at or below the session's cursor are discarded there. So nobody misses an entry and
nobody gets one twice.

When Redis goes away the hub tells every session (the page shows "reconnecting"), retries with
backoff, and when Redis answers again resyncs every subscription: the outage is never silent.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

import redis
import redis.asyncio as aredis

from controllers.telemetry.streams import FRAME_FIELD, RESET_PREFIX, SNAPSHOT_ID_FIELD, Keys, parse_id

log = logging.getLogger(__name__)

Entry = tuple[bytes, bytes]  # (stream id, frame JSON)

TAIL_BLOCK_MS = 250  # well under redis-py's 5 s socket timeout; also how fast new topics join
TAIL_COUNT = 2000
TOPICS_REFRESH = 1.0


class Subscriber(Protocol):
    """What the hub needs from a websocket session."""

    def deliver(self, topic: str, entries: list[Entry]) -> None: ...
    def redis_status(self, up: bool) -> None: ...
    def force_resync(self, topic: str, reason: str, replay_from: bytes | None = None) -> None: ...
    def topics_changed(self, topics: list[str]) -> None: ...


class ResumeRefused(Exception):
    """A session's cursor cannot be resumed without loss; the reason is shown to the user."""


class StreamHub:
    """Tails Redis Streams once per process and fans entries out to subscribers."""

    def __init__(self, url: str, prefix: str) -> None:
        self.keys = Keys(prefix)
        self.redis = aredis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2)
        self._subs: dict[str, set[Subscriber]] = {}
        self._members: set[Subscriber] = set()
        self._positions: dict[str, bytes] = {}
        self._task: asyncio.Task[None] | None = None
        self.redis_up = True
        self.topics: list[str] = []
        self._topics_checked = 0.0

    # -- membership --------------------------------------------------------------------------
    def join(self, member: Subscriber) -> None:
        self._members.add(member)
        self._ensure_task()

    def leave(self, member: Subscriber) -> None:
        self._members.discard(member)
        for topic in list(self._subs):
            self.unsubscribe(topic, member)

    def subscribe(self, topic: str, member: Subscriber) -> None:
        self._subs.setdefault(topic, set()).add(member)
        self._ensure_task()

    def unsubscribe(self, topic: str, member: Subscriber) -> None:
        subs = self._subs.get(topic)
        if subs is not None:
            subs.discard(member)
            if not subs:
                del self._subs[topic]
                self._positions.pop(topic, None)

    def track_from(self, topic: str, cursor: bytes) -> None:
        """Make sure the tail covers every entry after ``cursor`` for ``topic``.

        A session calls this with its starting cursor (snapshot id or resume id) *before* its catch-up
        read ends. If the hub already tails the topic, its position is at most the end of the stream
        that catch-up reads to, and everything after it is delivered to the (registered) session;
        if not, tailing starts at the cursor itself. Either way no entry falls between the two.
        """
        if topic in self._subs and topic not in self._positions:
            self._positions[topic] = cursor

    def _ensure_task(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._tail_loop(), name="stream-hub")

    # -- reads used by sessions --------------------------------------------------------------
    async def epoch(self) -> str:
        raw = await self.redis.get(self.keys.epoch)
        return raw.decode() if raw else ""

    async def known_topics(self) -> list[str]:
        return sorted(t.decode() for t in await self.redis.smembers(self.keys.topics))

    async def snapshot(self, topic: str) -> tuple[bytes, dict[bytes, bytes]]:
        """The topic's state and the stream id it is exact for (``0-0`` if nothing yet)."""
        state = await self.redis.hgetall(self.keys.snapshot(topic))
        snap_id = state.pop(SNAPSHOT_ID_FIELD.encode(), b"0-0")
        return snap_id, state

    async def check_resume(self, topic: str, since: bytes, epoch: str) -> None:
        """Raise ResumeRefused when ``since`` belongs to another epoch or a position never written.

        Whether everything after ``since`` is still retained is checked by ``read_after`` on every
        catch-up read, so it also covers a snapshot id that ages out while a client catches up.
        """
        if epoch != await self.epoch():
            raise ResumeRefused("epoch-changed")
        try:
            info = await self.redis.xinfo_stream(self.keys.stream(topic))
        except redis.ResponseError:  # no such stream: only the very beginning can be resumed
            if since != b"0-0":
                raise ResumeRefused("stream-missing") from None
            return
        if parse_id(since) > parse_id(info["last-generated-id"]):
            raise ResumeRefused("unknown-position")

    async def read_after(self, topic: str, after: bytes, count: int = 1000) -> list[Entry]:
        """Entries strictly after ``after``; ResumeRefused("retention") if some may be trimmed.

        Trimming (XADD MAXLEN) removes the oldest entries first, so if the entry ``after`` itself is
        still there, nothing after it is gone: the read is inclusive and proves that with its first
        row. (Redis' max-deleted-entry-id does not count trimming, so it cannot answer this.)
        """
        stream = self.keys.stream(topic)
        if after == b"0-0":
            info = await self.redis.xinfo_stream(stream) if await self.redis.exists(stream) else None
            if info is not None and info.get("entries-added", info["length"]) != info["length"]:
                raise ResumeRefused("retention")
            if info is not None and "entries-added" not in info and info["length"]:
                raise ResumeRefused("retention")  # Redis < 7 cannot tell: resync to be safe
            rows = await self.redis.xrange(stream, min=b"-", max=b"+", count=count)
        else:
            rows = await self.redis.xrange(stream, min=after, max=b"+", count=count + 1)
            if not rows or rows[0][0] != after:
                raise ResumeRefused("retention")
            rows = rows[1:]
        return [(eid, fields.get(FRAME_FIELD, b"{}")) for eid, fields in rows]

    async def read_before(self, topic: str, last: bytes, count: int) -> list[Entry]:
        """The ``count`` entries up to and including ``last``, oldest first."""
        if last == b"0-0":
            return []
        rows = await self.redis.xrevrange(self.keys.stream(topic), max=last, min=b"-", count=count)
        return [(eid, fields.get(FRAME_FIELD, b"{}")) for eid, fields in reversed(rows)]

    async def read_range(self, topic: str, first: bytes, last: bytes, limit: int = 20_000) -> list[Entry]:
        """Entries with ``first`` ≤ id ≤ ``last`` (at most ``limit``)."""
        rows = await self.redis.xrange(self.keys.stream(topic), min=first, max=last, count=limit)
        return [(eid, fields.get(FRAME_FIELD, b"{}")) for eid, fields in rows]

    # -- the tail ----------------------------------------------------------------------------
    async def _tail_loop(self) -> None:
        backoff = 0.0
        while self._members or self._subs:
            try:
                if not self.redis_up:
                    await self.redis.ping()
                    await self._redis_back()
                await self._refresh_topics()
                await self._read_once()
                backoff = 0.0
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                if self.redis_up:
                    log.warning("stream hub: Redis unreachable (%s)", exc)
                    self.redis_up = False
                    for m in list(self._members):
                        m.redis_status(False)
                backoff = min(2.0, max(0.1, backoff * 2))
                await asyncio.sleep(backoff)
            except asyncio.CancelledError:
                raise
            except Exception:  # never let one bad entry kill the process' only reader
                log.exception("stream hub: unexpected error; continuing")
                await asyncio.sleep(0.5)

    async def _redis_back(self) -> None:
        log.info("stream hub: Redis is back; resyncing every subscription")
        self.redis_up = True
        self._positions.clear()
        for m in list(self._members):
            m.redis_status(True)
        for topic, subs in list(self._subs.items()):
            # A Redis that lost its data starts each stream with the worker's reset frame, which
            # carries the records the worker buffered during the outage: replay them with the resync.
            replay_from = await self._leading_reset(topic)
            for m in list(subs):
                m.force_resync(topic, "redis-reconnected", replay_from=replay_from)

    async def _leading_reset(self, topic: str) -> bytes | None:
        """The id of the stream's first entry if it is a worker reset frame."""
        rows = await self.redis.xrange(self.keys.stream(topic), min=b"-", max=b"+", count=1)
        if rows and rows[0][1].get(FRAME_FIELD, b"").startswith(RESET_PREFIX):
            return rows[0][0]
        return None

    async def _refresh_topics(self) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() - self._topics_checked < TOPICS_REFRESH:
            return
        self._topics_checked = loop.time()
        await self._check_tail_retained()
        topics = await self.known_topics()
        if topics != self.topics:
            self.topics = topics
            for m in list(self._members):
                m.topics_changed(topics)

    async def _check_tail_retained(self) -> None:
        """Resync a topic's subscribers if the tail fell so far behind that trimming passed it.

        Trimming removes the oldest entries first: while the last entry the hub read still exists,
        nothing it has yet to read can be gone. A hub that far behind (minutes, at the default
        retention) is pathological, but then the gap must show, not pass silently.
        """
        for topic, pos in list(self._positions.items()):
            if pos == b"0-0":
                continue
            if not await self.redis.xrange(self.keys.stream(topic), min=pos, max=pos):
                del self._positions[topic]
                # Either trimming passed the tail, or the stream was lost and begins again with a
                # worker reset frame (whose frames can still be replayed).
                reset = await self._leading_reset(topic)
                if reset is not None and parse_id(reset) > parse_id(pos):
                    reason = "worker-reset"
                else:
                    reason, reset = "retention", None
                log.warning("stream hub: tail position lost on %s (%s); resyncing its subscribers", topic, reason)
                for m in list(self._subs.get(topic, ())):
                    m.force_resync(topic, reason, replay_from=reset)

    async def _read_once(self) -> None:
        if not self._subs:
            await asyncio.sleep(TAIL_BLOCK_MS / 1000)
            return
        streams = {self.keys.stream(t): pos for t, pos in self._positions.items()}
        if not streams:
            await asyncio.sleep(TAIL_BLOCK_MS / 1000)
            return
        reply = await self.redis.xread(streams, count=TAIL_COUNT, block=TAIL_BLOCK_MS)
        prefix_len = len(self.keys.stream(""))
        for stream, rows in reply or ():
            topic = (stream.decode() if isinstance(stream, bytes) else stream)[prefix_len:]
            if topic not in self._subs or not rows:
                continue
            self._positions[topic] = rows[-1][0]
            entries = [(eid, fields.get(FRAME_FIELD, b"{}")) for eid, fields in rows]
            for m in list(self._subs.get(topic, ())):
                m.deliver(topic, entries)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.redis.aclose()


_hubs: dict[int, StreamHub] = {}


def get_hub(url: str, prefix: str) -> StreamHub:
    """The process' hub for the running event loop (daphne runs one loop; tests may run several)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(id(loop))
    if hub is None:
        hub = _hubs[id(loop)] = StreamHub(url, prefix)
    return hub


