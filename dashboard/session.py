"""One browser tab's telemetry session: the websocket protocol, without the websocket.

The consumer (``consumers.py``) only moves text in and out; everything here is plain asyncio and is
tested without a socket.

Protocol, client → server (JSON objects, at most ``MAX_MESSAGE_BYTES``):
  ``{"op": "sub", "topic": T}``                          snapshot, then live frames
  ``{"op": "sub", "topic": T, "since": ID, "epoch": E}`` resume after ID (after a reconnect)
  ``{"op": "sub", "topic": T, "history": N}``            also the N frames before the snapshot
  ``{"op": "unsub", "topic": T}`` · ``{"op": "ack", "seq": N}`` · ``{"op": "ping"}``
Server → client:
  ``hello`` (epoch, topics, window) · ``snapshot`` (topic, id, state; a big one comes in parts, each
  with ``part`` and ``more``: apply them all, the last one completes it) · ``frames`` ({topic: [[id,
  frame], ...]}) · ``resync`` (topic, reason; a snapshot follows) · ``status`` (redis up/down) ·
  ``topics`` · ``error`` (code, message) · ``pong``.

Flow control: daphne writes without backpressure, so a slow browser would grow server memory. Every
``snapshot``/``frames`` message carries a ``seq`` and the client acks it; at most ``window`` messages
are unacknowledged. Meanwhile frames wait in a per-topic buffer bounded in frames and in bytes; when
it overflows the buffer is discarded and the topic is resynced (fresh snapshot) once the client
catches up — the dashboard's own 410-and-relist. Server memory per client is bounded either way.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import orjson

from controllers.schema import ResyncReason
from controllers.telemetry import redis_config
from controllers.telemetry.streams import RESET_PREFIX, Entry, ResumeRefused, Snapshot, parse_id
from dashboard.hub import StreamHub

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024
# Outgoing messages stay under this: daphne will not send a websocket message over 1 MiB, so big
# snapshots go out in parts ("more": true) and frame batches are split.
MAX_OUT_BYTES = 512 * 1024
# Application close codes (servers may only send 1000 or 3000-4999): 4009 mirrors 1009 "too big",
# 4008 mirrors 1008 "policy violation".
CLOSE_TOO_BIG = 4009
CLOSE_POLICY = 4008
MAX_ERRORS = 50
MAX_TOPICS = 256
MAX_HISTORY = 1000
# A subscription's buffer holds at most this many frames, or this many bytes of them (a busy topic's
# frames are 30 KB each at 1,000 writes/s: 5,000 of them held 150 MB per lagging tab in the soak).
# The frames are the hub's, shared by every session: this bounds what one slow tab keeps alive.
MAX_PENDING_BYTES = 8 * 1024 * 1024
SYNC_RETRY_S = 0.5  # how soon a sync that Redis interrupted is tried again
# Data messages a client may leave unacknowledged before the session stops sending to it.
WINDOW = 16
TOPIC_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:/._@-]{0,199}$")


class ProtocolViolation(Exception):
    """The client broke the protocol badly enough that the socket is closed (code attached)."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


class _Sub:
    """A subscription. Invariant: entries in ``pending`` may be ≤ cursor (dropped when sent)."""

    __slots__ = ("cursor", "pending", "pending_bytes", "live", "sync", "since", "epoch", "reason", "replay_from",
                 "history", "last_reset", "retry_at", "resyncs")

    def __init__(self, since: bytes | None, epoch: str, history: int = 0) -> None:
        self.cursor = (0, 0)
        self.pending: list[Entry] = []
        self.pending_bytes = 0
        self.live = False
        self.sync = True  # a (re)sync is due: snapshot or resume, then catch-up
        self.since = since
        self.epoch = epoch
        self.reason: ResyncReason | None = None
        self.replay_from: bytes | None = None  # id of a worker reset frame to replay from
        self.history = history  # frames before the first snapshot to send, for context
        # The newest reset frame already resynced from: the tail may deliver it again (its position can
        # lag the replay), and a second resync would replay the same frames twice.
        self.last_reset = (0, 0)
        self.retry_at = 0.0  # a sync Redis interrupted is tried again from then on (loop time)
        # How many resyncs were asked (``force_resync``): a sync under way when another is asked leaves
        # the new one's reason and replay point alone, or the next sync would send a snapshot unannounced.
        self.resyncs = 0


class ClientSession:
    """Subscriptions, buffering and flow control for one websocket."""

    def __init__(self, hub: StreamHub, send: Callable[[str], Awaitable[None]], *, window: int = WINDOW,
                 max_pending: int = 5000, max_pending_bytes: int = MAX_PENDING_BYTES, catch_up_chunk: int = 500,
                 on_fatal: Callable[[], Awaitable[None]] | None = None) -> None:
        self.hub = hub
        self._send = send
        self._on_fatal = on_fatal
        self.window = window
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self.catch_up_chunk = catch_up_chunk
        self.subs: dict[str, _Sub] = {}
        self._control: deque[str] = deque()
        self._wake = asyncio.Event()
        self._acked = asyncio.Event()
        self._sent_seq = 0
        self._acked_seq = 0
        self._errors = 0
        self._closed = False
        self._task: asyncio.Task[None] | None = None
        self.resyncs = 0

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        epoch = await self.hub.reader.epoch()
        topics = await self.hub.reader.topics()
        self._queue_control({"t": "hello", "epoch": epoch, "topics": topics, "window": self.window,
                             "redis": "up" if self.hub.redis_up else "down"})
        self.hub.join(self)
        self._task = asyncio.get_running_loop().create_task(self._sender(), name="ws-sender")

    async def close(self) -> None:
        self._closed = True
        self.hub.leave(self)
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - closing anyway
                pass

    # -- incoming ----------------------------------------------------------------------------
    async def handle(self, text: str | None, data: bytes | None = None) -> None:
        """Handle one client message. Raises ProtocolViolation when the socket must close."""
        if text is None:
            self._error("binary", "binary messages are not part of the protocol; send JSON text")
            return
        # The limit is in bytes (found by tests/fuzz: counting characters let 4-byte characters
        # bring a 256 KiB message in); only a text that could be over it is encoded to measure it.
        if len(text) > MAX_MESSAGE_BYTES // 4 and len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
            raise ProtocolViolation(CLOSE_TOO_BIG, f"message larger than {MAX_MESSAGE_BYTES} bytes")
        try:
            msg = orjson.loads(text)
        except orjson.JSONDecodeError as exc:
            self._error("bad_json", f"not JSON: {exc}")
            return
        if not isinstance(msg, dict):
            self._error("bad_message", "expected a JSON object")
            return
        op = msg.get("op")
        if op == "ack":
            self._on_ack(msg.get("seq"))
        elif op == "sub":
            await self._on_sub(msg)
        elif op == "unsub":
            topic = msg.get("topic")
            if isinstance(topic, str) and self.subs.pop(topic, None) is not None:
                self.hub.unsubscribe(topic, self)
        elif op == "ping":
            self._queue_control({"t": "pong"})
        else:
            self._error("unknown_op", f"unknown op {op!r}; expected sub, unsub, ack or ping")

    def _error(self, code: str, message: str, **extra: Any) -> None:
        self._errors += 1
        if self._errors > MAX_ERRORS:
            raise ProtocolViolation(CLOSE_POLICY, "too many protocol errors")
        self._queue_control({"t": "error", "code": code, "message": message, **extra})

    def _on_ack(self, seq: Any) -> None:
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 0 or seq > self._sent_seq:
            self._error("bad_ack", f"ack seq must be an integer ≤ {self._sent_seq}")
            return
        if seq > self._acked_seq:
            self._acked_seq = seq
            self._acked.set()

    async def _on_sub(self, msg: dict[str, Any]) -> None:
        topic = msg.get("topic")
        if not isinstance(topic, str) or not TOPIC_RE.match(topic):
            self._error("bad_topic", "topic must be a string of letters, digits and :/._@-")
            return
        if topic not in self.hub.topics and topic not in await self.hub.reader.topics():
            self._error("unknown_topic", f"no such topic: {topic}", topic=topic)
            return
        since_raw = msg.get("since")
        since: bytes | None = None
        if since_raw is not None:
            try:
                if not isinstance(since_raw, str):
                    raise ValueError(since_raw)
                parse_id(since_raw)
            except ValueError:
                self._error("bad_since", "since must be a stream id like 1700000000000-0", topic=topic)
                return
            since = since_raw.encode()
        epoch = msg.get("epoch", "")
        history = msg.get("history", 0)
        if not isinstance(history, int) or isinstance(history, bool) or not 0 <= history <= MAX_HISTORY:
            self._error("bad_history", f"history must be an integer from 0 to {MAX_HISTORY}", topic=topic)
            return
        if topic not in self.subs and len(self.subs) >= MAX_TOPICS:
            self._error("too_many_topics", f"at most {MAX_TOPICS} subscriptions per connection")
            return
        self.subs[topic] = _Sub(since, epoch if isinstance(epoch, str) else "", history)
        self.hub.subscribe(topic, self)
        self._wake.set()

    # -- called by the hub (synchronously, on the event loop) -------------------------------
    def deliver(self, topic: str, entries: list[Entry]) -> None:
        sub = self.subs.get(topic)
        if sub is None or sub.sync:
            return
        reset = _first_reset(entries, max(sub.cursor, sub.last_reset))
        if reset is not None:
            self.force_resync(topic, ResyncReason.WORKER_RESET, replay_from=reset)
            return
        sub.pending.extend(entries)
        sub.pending_bytes += sum(len(frame) for _, frame in entries)
        if len(sub.pending) > self.max_pending or sub.pending_bytes > self.max_pending_bytes:
            self.force_resync(topic, ResyncReason.SLOW_CLIENT)
            return
        if sub.live:
            self._wake.set()

    def force_resync(self, topic: str, reason: ResyncReason, replay_from: bytes | None = None) -> None:
        """Resync ``topic``: a fresh snapshot replaces the client's state.

        ``replay_from`` is the id of a worker reset frame (a restarted worker, or a worker that had
        to rebuild its snapshot): the frames from it up to the snapshot are still in the stream, so
        they are sent before the snapshot and the client loses no events, only redraws its state.
        """
        sub = self.subs.get(topic)
        if sub is None:
            return
        sub.pending, sub.pending_bytes = [], 0
        sub.live = False
        sub.sync = True
        sub.since = None
        sub.resyncs += 1
        sub.reason = reason
        sub.replay_from = replay_from
        if replay_from is not None:
            sub.last_reset = max(sub.last_reset, parse_id(replay_from))
        self._wake.set()

    def position(self, topic: str) -> bytes | None:
        """The id of the last entry this session sent for ``topic`` (None before its first sync): where a
        replay after a Redis outage starts (``StreamHub._redis_back``)."""
        sub = self.subs.get(topic)
        if sub is None or sub.cursor == (0, 0):
            return None
        return f"{sub.cursor[0]}-{sub.cursor[1]}".encode()

    def redis_status(self, up: bool, topics: list[str] | None = None) -> None:
        """Redis went away or came back; ``topics``: only these topics' (a Redis Cluster's master)."""
        msg: dict[str, Any] = {"t": "status", "redis": "up" if up else "down"}
        if topics is not None:
            msg["topics"] = topics
        self._queue_control(msg)

    def topics_changed(self, topics: list[str]) -> None:
        self._queue_control({"t": "topics", "topics": topics})

    # -- outgoing ----------------------------------------------------------------------------
    def _queue_control(self, msg: dict[str, Any]) -> None:
        self._control.append(orjson.dumps(msg).decode())
        self._wake.set()

    async def _send_data(self, head: bytes, body: bytes) -> None:
        """Send a windowed message ``{head,"seq":N,body}`` once fewer than ``window`` are unacked."""
        while self._sent_seq - self._acked_seq >= self.window:
            self._acked.clear()
            await self._acked.wait()
            await self._flush_control()
        self._sent_seq += 1
        await self._send(b"".join((head, b',"seq":', str(self._sent_seq).encode(), body)).decode())

    async def _send_frames(self, batch: dict[str, list[Entry]]) -> None:
        """Send entries as ``frames`` messages of at most MAX_OUT_BYTES each (daphne refuses to send
        a websocket message over 1 MiB; publishers keep every single frame well below that)."""
        part: dict[str, list[Entry]] = {}
        size = 0
        for topic, entries in batch.items():
            for entry in entries:
                n = len(entry[0]) + len(entry[1]) + 8
                if part and size + n > MAX_OUT_BYTES:
                    await self._send_data(b'{"t":"frames"', _frames_body(part))
                    part, size = {}, 0
                part.setdefault(topic, []).append(entry)
                size += n
        if part:
            await self._send_data(b'{"t":"frames"', _frames_body(part))

    async def _flush_control(self) -> None:
        while self._control:
            await self._send(self._control.popleft())

    async def _sender(self) -> None:
        """The only task that writes to the socket: control first, then syncs, then live frames."""
        while not self._closed:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self._flush_control()
                interrupted = await self._sync_due()
                await self._send_live()
                if interrupted is not None:
                    # Redis went away in the middle of a sync: redo the unfinished syncs shortly (the
                    # hub resyncs the subscriptions it cut off anyway once Redis answers again).
                    log.info("sync interrupted by Redis (%s); retrying", interrupted)
                    asyncio.get_running_loop().call_later(SYNC_RETRY_S, self._wake.set)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug, or the socket died under us: close so the page reconnects and resumes,
                # rather than leaving it connected to a session that no longer sends.
                log.exception("telemetry session failed; closing the socket")
                self._closed = True
                if self._on_fatal is not None:
                    await self._on_fatal()

    async def _sync_due(self) -> BaseException | None:
        """Run the syncs that are due; the Redis error that interrupted one, if any. A Redis Cluster:
        a topic whose master is down waits, the other topics' syncs (and live frames) go on; one
        Redis: its first failure puts every sync off.

        Each due topic first gets its snapshot (or resumes), one topic after another; then all of
        them catch up together, one read of every topic per round (``_catch_up``): a page that opens
        with 200 topics has them live after a few rounds, not 400 round trips."""
        loop = asyncio.get_running_loop()
        interrupted: BaseException | None = None
        now = loop.time()
        due = [(topic, sub) for topic, sub in self.subs.items() if sub.sync and sub.retry_at <= now]
        prefetched = await self._prefetch(due)
        heads: dict[str, tuple[_Sub, int, bytes]] = {}
        for topic, sub in due:
            if not sub.sync or self.subs.get(topic) is not sub or sub.retry_at > loop.time():
                continue
            ready = prefetched.get(topic)
            asked = sub.resyncs
            try:
                cursor = await self._sync_head(topic, sub, ready[1] if ready is not None and ready[0] == asked else None)
            except redis_config.OUTAGE_ERRORS as exc:
                interrupted = exc
                if not self.hub.keys.cluster:
                    self._cut_off([s for s in self.subs.values() if not s.live])
                    return interrupted
                self._cut_off([sub])
                continue
            if cursor is not None:
                heads[topic] = (sub, asked, cursor)
        if heads:
            interrupted = await self._catch_up(heads) or interrupted
        return interrupted

    def _cut_off(self, subs: list[_Sub]) -> None:
        """Redis failed under these subscriptions' syncs: redo them shortly."""
        retry_at = asyncio.get_running_loop().time() + SYNC_RETRY_S
        for sub in subs:
            if not sub.live:
                sub.sync = True
                sub.retry_at = retry_at
                if sub.reason is None and sub.since is None and sub.cursor != (0, 0):
                    # Cut off while catching up after its snapshot: the retry resumes from what the
                    # page has (a fresh snapshot would skip the frames between, unannounced); a
                    # resync still to announce keeps its reason instead.
                    sub.since = f"{sub.cursor[0]}-{sub.cursor[1]}".encode()

    async def _prefetch(self, due: list[tuple[str, _Sub]]) -> dict[str, tuple[int, tuple[Snapshot, str]]]:
        """The snapshot and epoch of every due subscription that needs a fresh snapshot, read in one
        round (one pipeline; a cluster: one per master) rather than two round trips per topic while
        the others wait: a page that opens with 200 topics, on a busy hub, took tens of seconds to
        have them all live. Each is kept with the subscription's resync count: a resync asked after
        the read gets a snapshot of its own (its reason, its replay point).

        Using a snapshot read a little before its sync is safe: it is exact as of its id, and the
        catch-up reads everything after that id (or, if the stream has trimmed past it since, refuses
        and the topic is resynced). A topic whose read failed is left to its own sync, which meets
        the error where a lone sync's is handled; so is everything when Redis is away."""
        # Each subscription's resync count before the read: one asked during it needs another read.
        fresh = {topic: sub.resyncs for topic, sub in due if sub.since is None and sub.replay_from is None}
        if len(fresh) < 2:
            return {}
        try:
            got = await self.hub.reader.snapshots(list(fresh))
        except redis_config.OUTAGE_ERRORS:
            return {}
        return {topic: (asked, one) for topic, asked in fresh.items()
                if (one := got.get(topic)) is not None and not isinstance(one, BaseException)}

    async def _sync_head(self, topic: str, sub: _Sub, ready: tuple[Snapshot, str] | None = None) -> bytes | None:
        """Start bringing one subscription up to date: resume, or send a snapshot (and what a replay
        or ``history`` adds before it). The position to catch up from, or None when another resync
        was asked meanwhile (the next sync's). ``ready``: the snapshot and epoch ``_prefetch`` read
        for it (else they are read here).

        Each await lets the hub ask for another resync (``force_resync``: a topic's master failed over
        again, a reset frame, a slow client). From then on this sync sends no more than the snapshot
        it is sending, and leaves the new request's reason and replay point to the next sync, which
        announces it: clearing them here would make that sync's snapshot an unannounced one, and the
        frames before it a silent gap (tests/dashboard/test_session_replay.py)."""
        sub.sync = False
        sub.live = False
        asked = sub.resyncs

        def superseded() -> bool:
            return sub.resyncs != asked or self.subs.get(topic) is not sub

        cursor_raw = sub.since
        if cursor_raw is not None:
            try:
                await self.hub.reader.check_resume(topic, cursor_raw, sub.epoch)
            except ResumeRefused as refused:
                if superseded():
                    return None
                cursor_raw = None
                sub.reason = refused.reason
        if cursor_raw is None:
            if sub.reason is not None:
                self.resyncs += 1
                await self._send(orjson.dumps({"t": "resync", "topic": topic, "reason": sub.reason}).decode())
            if ready is not None:
                (snap_id, state), epoch = ready
            else:
                snap_id, state = await self.hub.reader.snapshot(topic)
                epoch = await self.hub.reader.epoch(topic)
            if sub.replay_from is None and sub.reason == ResyncReason.REDIS_RECONNECTED and sub.cursor != (0, 0):
                # When Redis came back the hub found nothing after this client's position; a publisher
                # may have rewritten the topic since (its reset frame carries what the outage cost,
                # as dropped) and that frame is now before the snapshot: look again, from the position.
                point = await self.hub.reader.replay_point(topic, self.position(topic))
                if sub.replay_from is None:
                    sub.replay_from = point
            if superseded():
                return None
            if sub.replay_from is not None:
                replay_from = sub.replay_from
                await self._replay(topic, sub, replay_from, snap_id)
                if superseded():
                    return None
                sub.replay_from = None
            elif sub.history:
                # Recent frames up to the snapshot, so a fresh page starts with context. Like a
                # replay they come before the snapshot, which then replaces the state they built.
                rows = await self.hub.reader.read_before(topic, snap_id, sub.history)
                if superseded():
                    return None
                if rows:
                    await self._send_frames({topic: rows})
            sub.history = 0
            parts = _state_parts(state, MAX_OUT_BYTES)
            for i, part in enumerate(parts):  # a snapshot begun is sent whole: the page assembles its parts
                body = b"".join((b',"topic":', orjson.dumps(topic), b',"id":"', snap_id, b'","epoch":',
                                 orjson.dumps(epoch), b',"part":', str(i).encode(),
                                 b',"more":', b"true" if i < len(parts) - 1 else b"false",
                                 b',"state":', part, b"}"))
                await self._send_data(b'{"t":"snapshot"', body)
            cursor_raw = snap_id
            sub.cursor = parse_id(snap_id)
            sub.epoch = epoch  # what the page holds now: a sync Redis interrupts resumes in it
            if superseded():
                return None
        sub.reason = None
        sub.since = None
        sub.cursor = parse_id(cursor_raw)
        return None if superseded() else cursor_raw

    async def _catch_up(self, heads: dict[str, tuple[_Sub, int, bytes]]) -> BaseException | None:
        """Catch the subscriptions up from their positions (``(sub, resync count, position)`` by
        topic), all of them in each round: one read of every topic (``read_after_many``), then one
        batch of what they returned. A topic is live after an empty read. The Redis error that cut
        some off, if any (one Redis: all of them)."""
        interrupted: BaseException | None = None
        while heads:
            for topic in [t for t, (sub, asked, _) in heads.items() if sub.resyncs != asked or self.subs.get(t) is not sub]:
                del heads[topic]  # another resync was asked: the next sync's
            if not heads:
                break
            try:
                reads = await self.hub.reader.read_after_many({t: pos for t, (_, _, pos) in heads.items()},
                                                              self.catch_up_chunk)
            except redis_config.OUTAGE_ERRORS as exc:
                self._cut_off([s for s in self.subs.values() if not s.live])
                return exc
            batch: dict[str, list[Entry]] = {}
            for topic, (sub, asked, cursor_raw) in list(heads.items()):
                if sub.resyncs != asked or self.subs.get(topic) is not sub:
                    del heads[topic]
                    continue
                rows = reads[topic]
                if isinstance(rows, ResumeRefused):
                    del heads[topic]
                    self.force_resync(topic, rows.reason)
                    continue
                if isinstance(rows, redis_config.OUTAGE_ERRORS):
                    del heads[topic]  # its master is down (a cluster): the others go on
                    interrupted = rows
                    self._cut_off([sub])
                    continue
                if isinstance(rows, BaseException):
                    raise rows
                # cursor_raw is now known to be retained; tailing from it (if the hub does not tail
                # the topic yet) leaves no gap, because catch-up only ends with a later, empty read.
                self.hub.track_from(topic, cursor_raw)
                if not rows:
                    del heads[topic]
                    sub.live = True
                    continue
                reset = _first_reset(rows, sub.last_reset)
                if reset is not None:
                    del heads[topic]
                    self.force_resync(topic, ResyncReason.WORKER_RESET, replay_from=reset)
                    continue
                batch[topic] = rows
            if batch:
                await self._send_frames(batch)
                for topic, rows in batch.items():
                    sub, asked, _ = heads[topic]
                    heads[topic] = (sub, asked, rows[-1][0])
                    sub.cursor = parse_id(rows[-1][0])
        return interrupted

    async def _replay(self, topic: str, sub: _Sub, first: bytes, last: bytes) -> None:
        """Send the frames ``first``..``last`` (inclusive) that a worker reset made a resync skip, but
        none at or before the cursor: the hub reads a replay point, awaiting Redis, before it calls
        ``force_resync``, and meanwhile this session may have sent frames past that point from its
        pending buffer. Those the page has; like pending entries at or below the cursor, they are not
        sent again (tests/dashboard/test_session_replay.py). The cursor follows what is sent, so a
        replay cut short by another resync is not sent twice by the next."""
        after = sub.cursor
        rows = [row for row in await self.hub.reader.read_range(topic, first, last) if parse_id(row[0]) > after]
        for i in range(0, len(rows), self.catch_up_chunk):
            chunk = rows[i:i + self.catch_up_chunk]
            await self._send_frames({topic: chunk})
            sub.cursor = max(sub.cursor, parse_id(chunk[-1][0]))

    async def _send_live(self) -> None:
        batch: dict[str, list[Entry]] = {}
        for topic, sub in self.subs.items():
            if not sub.live or not sub.pending:
                continue
            fresh = [e for e in sub.pending if parse_id(e[0]) > sub.cursor]
            sub.pending, sub.pending_bytes = [], 0
            if fresh:
                batch[topic] = fresh
                sub.cursor = parse_id(fresh[-1][0])
        if batch:
            await self._send_frames(batch)


def _first_reset(entries: list[Entry], after: tuple[int, int]) -> bytes | None:
    """The id of the first reset frame newer than ``after`` (ids are parsed only for reset frames)."""
    for eid, frame in entries:
        if frame.startswith(RESET_PREFIX) and parse_id(eid) > after:
            return eid
    return None


def _state_parts(state: dict[bytes, bytes], limit: int) -> list[bytes]:
    """``{key: raw JSON}`` as JSON objects of at most ~``limit`` bytes each (at least one, maybe ``{}``),
    without decoding the values."""
    parts: list[bytes] = []
    items: list[bytes] = []
    size = 0
    for k, v in state.items():
        item = orjson.dumps(k.decode()) + b":" + v
        if items and size + len(item) > limit:
            parts.append(b"{" + b",".join(items) + b"}")
            items, size = [], 0
        items.append(item)
        size += len(item) + 1
    parts.append(b"{" + b",".join(items) + b"}")
    return parts


def _frames_body(batch: dict[str, list[Entry]]) -> bytes:
    out = [b',"topics":{']
    first_topic = True
    for topic, entries in batch.items():
        if not first_topic:
            out.append(b",")
        first_topic = False
        out.append(orjson.dumps(topic))
        out.append(b":[")
        out.append(b",".join(b'["' + eid + b'",' + frame + b"]" for eid, frame in entries))
        out.append(b"]")
    out.append(b"}}")
    return b"".join(out)
