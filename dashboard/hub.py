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
backoff, and when Redis answers again resyncs every subscription: the outage is never silent. A
Sentinel failover is such an outage (the client asks the Sentinels for the new master when it
reconnects): the new master may lack the last entries the old one had, so nothing read before the
outage is trusted; the resync replays what the new master has after the hub's last position.

A Redis Cluster (a ``redis+cluster://`` URL) is read the same way, topic by topic in the cluster
layout: the tail sends one XREAD per slot, per node in a pipeline and the nodes concurrently, without
blocking, and sleeps ``CLUSTER_POLL_S`` after a round that found nothing. The cluster client follows
MOVED/ASK by itself (a resharded topic's stream moved whole, so its position stays valid) but is
built not to retry a lost connection (``redis_config``): a master that died, CLUSTERDOWN while its
replica takes over, or no node answering is the same outage, and the same resync, as above.

Every read (the tail's and the sessions' snapshots and catch-up reads, over the hub's one connection
pool) goes through ``hub.reader``, the ``AsyncStreamReader`` of ``controllers/telemetry/streams.py``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Protocol

import redis
import redis.asyncio as aredis

from controllers.schema import ResyncReason
from controllers.telemetry import redis_config
from controllers.telemetry.streams import AsyncStreamReader, Entry, Keys, parse_id

log = logging.getLogger(__name__)

TAIL_BLOCK_MS = 250  # well under redis-py's 5 s socket timeout; also how fast new topics join
TAIL_COUNT = 2000
TOPICS_REFRESH = 1.0
CLUSTER_POLL_S = 0.02  # a cluster's tail does not block: the pause after a round that found nothing


class Subscriber(Protocol):
    """What the hub needs from a websocket session."""

    def deliver(self, topic: str, entries: list[Entry]) -> None: ...
    def redis_status(self, up: bool) -> None: ...
    def force_resync(self, topic: str, reason: ResyncReason, replay_from: bytes | None = None) -> None: ...
    def topics_changed(self, topics: list[str]) -> None: ...


class StreamHub:
    """Tails Redis Streams once per process and fans entries out to subscribers."""

    def __init__(self, url: str, prefix: str) -> None:
        self.keys = Keys.for_url(prefix, url)
        self.redis: aredis.Redis = redis_config.async_client(url, socket_timeout=5, socket_connect_timeout=2)
        self.reader = AsyncStreamReader(self.redis, self.keys)
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

    # -- the tail ----------------------------------------------------------------------------
    async def _tail_loop(self) -> None:
        backoff = 0.0
        while self._members or self._subs:
            try:
                if not self.redis_up:
                    await self.redis.ping()
                    if self.keys.cluster:
                        # PING answers while a dead master's slots have no master yet: wait for a
                        # node that says the cluster is whole again.
                        state = (await self.redis.cluster_info()).get("cluster_state")
                        if state != "ok":
                            raise redis.exceptions.ClusterDownError(f"cluster_state:{state}")
                        await self.redis.refresh_slots()  # type: ignore[attr-defined]  # the new slot map
                    await self._redis_back()
                await self._refresh_topics()
                await self._read_once()
                backoff = 0.0
            except redis_config.OUTAGE_ERRORS as exc:
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
        # Every replay point is read before anything changes: if Redis fails again half-way (a
        # cluster whose failover is not complete), the outage simply goes on, positions intact.
        before = self._positions
        resyncs: list[tuple[Subscriber, str, bytes | None]] = []
        for topic, subs in list(self._subs.items()):
            # What this Redis has after the last entry a subscriber got (or else the tail read) is
            # replayed with the resync: a Redis that lost its data starts each stream again with the
            # worker's reset frame, which carries the records the worker buffered during the outage;
            # after a failover the new master goes on from the entries it has (the worker's reset
            # frame among them if it had to rewrite the topic). No position: a leading reset frame.
            points: dict[bytes | None, bytes | None] = {}
            for m in list(subs):
                position = getattr(m, "position", None)
                pos = (position(topic) if position is not None else None) or before.get(topic)
                if pos not in points:
                    points[pos] = await self.reader.replay_point(topic, pos)
                resyncs.append((m, topic, points[pos]))
        log.info("stream hub: Redis is back; resyncing every subscription")
        self.redis_up = True
        self._positions = {}
        for m in list(self._members):
            m.redis_status(True)
        for m, topic, point in resyncs:
            m.force_resync(topic, ResyncReason.REDIS_RECONNECTED, replay_from=point)

    async def _refresh_topics(self) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() - self._topics_checked < TOPICS_REFRESH:
            return
        self._topics_checked = loop.time()
        await self._check_tail_retained()
        topics = await self.reader.topics()
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
            if not await self.reader.retains(topic, pos):
                del self._positions[topic]
                # Either trimming passed the tail, or the stream was lost and begins again with a
                # worker reset frame (whose frames can still be replayed).
                reset = await self.reader.leading_reset(topic)
                if reset is not None and parse_id(reset) > parse_id(pos):
                    reason = ResyncReason.WORKER_RESET
                else:
                    reason, reset = ResyncReason.RETENTION, None
                log.warning("stream hub: tail position lost on %s (%s); resyncing its subscribers", topic, reason)
                for m in list(self._subs.get(topic, ())):
                    m.force_resync(topic, reason, replay_from=reset)

    async def _read_once(self) -> None:
        if not self._subs:
            await asyncio.sleep(TAIL_BLOCK_MS / 1000)
            return
        if not self._positions:
            await asyncio.sleep(TAIL_BLOCK_MS / 1000)
            return
        batches = await self.reader.tail(self._positions, count=TAIL_COUNT, block=TAIL_BLOCK_MS)
        if not batches and self.keys.cluster:
            await asyncio.sleep(CLUSTER_POLL_S)
        for topic, entries in batches:
            if topic not in self._subs:
                continue
            self._positions[topic] = entries[-1][0]
            for m in list(self._subs.get(topic, ())):
                m.deliver(topic, entries)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.reader.close()
        await self.redis.aclose()


_hubs: dict[int, StreamHub] = {}


def get_hub(url: str, prefix: str) -> StreamHub:
    """The process' hub for the running event loop (daphne runs one loop; tests may run several)."""
    loop = asyncio.get_running_loop()
    hub = _hubs.get(id(loop))
    if hub is None:
        hub = _hubs[id(loop)] = StreamHub(url, prefix)
    return hub


