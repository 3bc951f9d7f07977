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
built not to retry a lost connection (``redis_config``). An outage there is per topic: the topics
whose node could not be read (a master that died, or CLUSTERDOWN while its replica takes over, which
a cluster also answers for healthy masters' slots) are *down*: their subscribers are told (a
``status`` naming those topics) and the tail reads the other topics on. Every ``backoff`` the hub
asks whether the cluster is whole again (``cluster_state:ok``), then for the new slot map and every
master's ``run_id``/``master_replid``: a down topic served by a master the hub already knew (its
data went on: a healthy master paused by CLUSTERDOWN, or one its slot migrated to) just goes on
from its position, with no resync; one served by a server that was no master before (the promoted
replica, which may lack the last entries) is resynced as above. A slot moved (MOVED followed)
makes the hub check the masters too, so a topic never reads on from a promoted replica unchecked.

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
# How often, at most, down topics are looked at again: a failover is over in 1-3 s, and the topics of
# healthy masters that answered CLUSTERDOWN meanwhile should come back within half a second of it.
CLUSTER_DOWN_CHECK_MAX_S = 0.5


class Subscriber(Protocol):
    """What the hub needs from a websocket session."""

    def deliver(self, topic: str, entries: list[Entry]) -> None: ...
    def redis_status(self, up: bool, topics: list[str] | None = None) -> None: ...
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
        # A cluster: subscribed topics whose master cannot be read now, when to look again, and the
        # identities of every master seen (None until first read: then every down topic resyncs).
        self._down: set[str] = set()
        self._down_retry_at = 0.0
        self._down_backoff = 0.0
        self._known: set[str] | None = None
        self._moved_seen = 0

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
                self._down.discard(topic)

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
                if self._down:
                    await self._check_down()
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

    # -- a cluster's per-topic outages -----------------------------------------------------------
    def _tell(self, up: bool, topics: set[str]) -> None:
        """Tell each subscriber of ``topics`` which of its topics went down or came back."""
        told: dict[Subscriber, list[str]] = {}
        for topic in sorted(topics):
            for m in self._subs.get(topic, ()):
                told.setdefault(m, []).append(topic)
        for m, mine in told.items():
            m.redis_status(up, topics=mine)

    def _topics_down(self, failed: dict[str, BaseException]) -> None:
        new = set(failed) - self._down
        if not new:
            return
        log.warning("stream hub: %d topic(s) cannot be read (%s), e.g. %s", len(new), next(iter(failed.values())),
                    sorted(new)[0])
        if not self._down:
            self._down_backoff = 0.0
            self._down_retry_at = 0.0
        self._down |= new
        self._tell(False, new)

    async def _check_down(self) -> None:
        """Bring the down topics back when the cluster is whole again (the module docstring says how)."""
        loop = asyncio.get_running_loop()
        if loop.time() < self._down_retry_at:
            return
        self._down_backoff = min(CLUSTER_DOWN_CHECK_MAX_S, max(0.1, self._down_backoff * 2))
        self._down_retry_at = loop.time() + self._down_backoff
        try:
            state = (await self.redis.cluster_info()).get("cluster_state")
            if state != "ok":
                return
            await self.redis.refresh_slots()  # type: ignore[attr-defined]  # the new slot map
            masters = await self.reader.masters()
            known = self._known if self._known is not None else set()
            lost = {t for t in self._down if masters.get(self.reader.master_of(t)) not in known}
            # Every replay point is read before anything changes: a failure leaves all of it down.
            resyncs = await self._replay_points(lost)
        except redis_config.OUTAGE_ERRORS as exc:
            log.info("stream hub: %d topic(s) still down (%s)", len(self._down), exc)
            return
        back, self._down = self._down, set()
        self._known = known | {i for i in masters.values() if i is not None}
        for topic in lost:
            self._positions.pop(topic, None)
        log.info("stream hub: %d topic(s) readable again; resyncing the %d a new master serves", len(back), len(lost))
        self._tell(True, back)
        for m, topic, point in resyncs:
            m.force_resync(topic, ResyncReason.REDIS_RECONNECTED, replay_from=point)

    async def _replay_points(self, topics: set[str]) -> list[tuple[Subscriber, str, bytes | None]]:
        """For each subscriber of ``topics``, where its resync replays from (``_redis_back`` says why)."""
        resyncs: list[tuple[Subscriber, str, bytes | None]] = []
        for topic in sorted(topics):
            points: dict[bytes | None, bytes | None] = {}
            for m in list(self._subs.get(topic, ())):
                position = getattr(m, "position", None)
                pos = (position(topic) if position is not None else None) or self._positions.get(topic)
                if pos not in points:
                    points[pos] = await self.reader.replay_point(topic, pos)
                resyncs.append((m, topic, points[pos]))
        return resyncs

    async def _check_masters(self) -> bool:
        """A cluster, at the first read and after a slot moved: note the masters; a tailed topic now
        served by a master unknown before is handled as down (and resynced by ``_check_down``).
        False if the masters could not be asked: then nothing is known of them."""
        try:
            masters = await self.reader.masters()
        except redis_config.OUTAGE_ERRORS:
            return False
        if self._known is None:
            self._known = {i for i in masters.values() if i is not None}
            return True
        unknown = {t for t in self._positions if t not in self._down
                   and masters.get(self.reader.master_of(t)) not in self._known}
        if unknown:
            self._topics_down(dict.fromkeys(unknown, redis.exceptions.ClusterError("served by a new master")))
            self._down_retry_at = 0.0
        return True

    async def _refresh_topics(self) -> None:
        loop = asyncio.get_running_loop()
        if loop.time() - self._topics_checked < TOPICS_REFRESH:
            return
        self._topics_checked = loop.time()
        if self.keys.cluster:
            try:
                await self._check_tail_retained()
                topics = await self.reader.topics()
            except redis_config.OUTAGE_ERRORS as exc:
                # The topic set lives on one master: while it is down, the topics stay as they were
                # (the tail's own reads say which topics are down).
                log.info("stream hub: the topic set cannot be read now (%s)", exc)
                return
        else:
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
            if pos == b"0-0" or topic in self._down:
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
        if self.keys.cluster:
            batches = await self._read_cluster()
            if not batches:
                await asyncio.sleep(CLUSTER_POLL_S)
        else:
            batches = await self.reader.tail(self._positions, count=TAIL_COUNT, block=TAIL_BLOCK_MS)
        for topic, entries in batches:
            if topic not in self._subs:
                continue
            self._positions[topic] = entries[-1][0]
            for m in list(self._subs.get(topic, ())):
                m.deliver(topic, entries)

    async def _read_cluster(self) -> list[tuple[str, list[Entry]]]:
        """One round of a cluster's tail over the topics not down; the ones that fail go down."""
        if self._known is None:
            await self._check_masters()
        positions = {t: p for t, p in self._positions.items() if t not in self._down}
        if not positions:
            return []
        failed: dict[str, BaseException] = {}
        batches = await self.reader.tail(positions, count=TAIL_COUNT, block=TAIL_BLOCK_MS, failed=failed)
        if failed:
            self._topics_down(failed)
        moved = self.reader.redirects["moved"]
        if moved != self._moved_seen:
            # Some of these entries came from where a slot moved to, maybe a promoted replica: none
            # is delivered before its master is known (the positions stay, so the next round reads
            # them again, and looks at the masters again).
            if not await self._check_masters():
                return []
            self._moved_seen = moved
            batches = [(t, entries) for t, entries in batches if t not in self._down]
        return batches

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


