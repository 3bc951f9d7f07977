"""The Redis layout shared by the publisher (worker side) and every reader (dashboard, recorder, scenarios).

``protocol/redis-layout.md`` specifies it language-neutrally, for publishers written in other languages.

Per topic (a string such as ``synthetic`` or ``informer:default/pods``):

- ``{prefix}stream:{topic}`` — a Redis Stream, trimmed to about ``maxlen`` entries. Each entry is one
  *frame*: field ``f`` holds orjson bytes ``{"r": [records], "v": "1.0", "ts": ms, "src": publisher,
  "seq": n, "s": {key: value|null}}`` (``protocol/README.md`` §3), optionally ``"reset": true`` (the snapshot was rewritten: resync) and
  ``"dropped": n`` (records the worker had to drop; surfaced, never silent).
- ``{prefix}snap:{topic}`` — a hash: the topic's state (``key`` → JSON value) exactly as of the frame
  whose id is stored in field ``__id__``. Frame and hash update happen in one Lua script, so a reader
  that takes the hash and then reads the stream after ``__id__`` sees every change exactly once.
- ``{prefix}topics`` — set of known topics; ``{prefix}epoch`` — a random token created with the
  first frame. A Redis restart without persistence loses the token, so a client's cursor from the
  old epoch is recognised as meaningless and the client resyncs instead of silently missing frames.
- ``{prefix}pubseq:{topic}`` — hash publisher id → last applied frame seq, which makes a frame retried
  after a lost reply idempotent (zero duplicates even when the connection drops mid-call).

The object inspector's request/reply keys (``inspector.py`` explains the exchange), every one with a TTL:
``{prefix}inspect:alive:{worker}`` (heartbeat), ``{prefix}inspect:queue:{worker}`` (request ids),
``{prefix}inspect:req:{id}``, ``{prefix}inspect:reply:{id}`` and ``{prefix}inspect:rate:{worker}:{second}``.

Writing is ``FRAME_SCRIPT``, the Lua script in ``protocol/frame.lua`` (its header documents KEYS, ARGV
and replies); it is read from that file, not copied, so that publishers in other languages embed the
very same script and share Redis' script cache with this one.

Reading is done here once, for all readers: pure functions turn raw Redis replies into what readers
use — ``(snapshot id, state)`` and entries ``(stream id, frame bytes)``, both left raw: the hot paths
(hub, sessions, snapshot view) pass frames and state values to browsers without decoding them — and
``StreamReader`` (sync: views, recorder, scenarios) and ``AsyncStreamReader`` (the dashboard's hub and
sessions) issue the commands. The rules every reader relies on:

- Snapshot, then stream: the hash is exact as of ``__id__``, so the state plus every entry after that
  id is every change exactly once. A missing hash is the empty state as of ``0-0``.
- Nothing after a cursor was trimmed while the cursor's own entry is still there (``MAXLEN``
  trimming removes the oldest entries first). So ``read_after`` reads *inclusively* from the cursor
  and its first row proves that no entry after it is lost; Redis' ``max-deleted-entry-id`` does not
  count trimming and cannot answer this. Reading from ``0-0`` is safe only while nothing was ever
  trimmed (``entries-added == length``).
- A reset frame (the snapshot was rewritten) is recognised by its raw prefix ``RESET_PREFIX``, a
  frame without records by ``NO_RECORDS_PREFIX``: publishers put ``reset``, else ``r``, first.
- A cursor from another epoch, or beyond the stream's last generated id, means nothing: resync.

In a Redis Cluster (``Keys(prefix, cluster=True)``; protocol/redis-layout.md, "Redis Cluster") every
key of a topic carries the topic as its hash tag, ``{prefix}stream:{topic}`` with literal braces, so
that ``frame.lua`` (given four KEYS there) runs in the topic's slot; the epoch is per topic
(``{prefix}epoch:{topic}``: a shard can lose its topics alone), and the topic set is SADDed by the
publisher. A cluster runs ``XREAD`` only over streams of one slot, so ``tail`` groups the topics by
slot and sends one non-blocking ``XREAD`` per slot, one pipeline per master (``cluster_route.py``,
which follows MOVED/ASK/TRYAGAIN; the async reader sends to the masters concurrently).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import redis
import redis.asyncio as aredis
from redis.crc import key_slot

from controllers.schema import ResyncReason
from controllers.telemetry.cluster_route import AsyncClusterRouter, Call, ClusterRouter

SNAPSHOT_ID_FIELD = "__id__"
RESET_PREFIX = b'{"reset":true'  # a reset frame starts with this, so readers need not decode
NO_RECORDS_PREFIX = b'{"r":[],'  # a frame that carries only state changes (no records) starts with this
FRAME_FIELD = b"f"
START = b"0-0"  # the id before every entry: the position of an empty snapshot
# protocol/frame.lua in a checkout; an installed package carries it as controllers/_protocol/ (pyproject.toml).
_PACKAGED_PROTOCOL = Path(__file__).resolve().parents[1] / "_protocol"
FRAME_SCRIPT_FILE = (_PACKAGED_PROTOCOL if _PACKAGED_PROTOCOL.is_dir()
                     else Path(__file__).resolve().parents[2] / "protocol") / "frame.lua"
FRAME_SCRIPT = FRAME_SCRIPT_FILE.read_bytes().decode()

Entry = tuple[bytes, bytes]  # (stream id, frame JSON)
Snapshot = tuple[bytes, dict[bytes, bytes]]  # (the id the state is exact as of, key → JSON value)


class Keys:
    """Key names under one prefix (tests use their own prefix and never touch anything else).

    ``cluster``: the Redis Cluster layout, whose per-topic keys carry ``{topic}`` as their hash tag
    (``for_url`` picks it from the Redis URL)."""

    def __init__(self, prefix: str, *, cluster: bool = False) -> None:
        if cluster and ("{" in prefix or "}" in prefix):
            raise ValueError(f"CTRLSCOPE_PREFIX={prefix!r}: with a Redis Cluster the prefix must not contain "
                             "'{' or '}' (the topic is the keys' hash tag)")
        self.prefix = prefix
        self.cluster = cluster
        self.topics = f"{prefix}topics"
        self.epoch = f"{prefix}epoch"  # the v1 layout's one epoch; a cluster has epoch_of(topic)
        self.publishers = f"{prefix}publishers"  # presence.py: publisher id → its run's presence entry
        self.expired = f"{prefix}expired"  # presence.py: what retention or an operator dropped
        self.sweep_lock = f"{prefix}sweep"
        self._stream_head = f"{prefix}stream:{{" if cluster else f"{prefix}stream:"

    @classmethod
    def for_url(cls, prefix: str, url: str) -> Keys:
        """The layout the Redis at ``url`` uses: the cluster layout for a ``redis+cluster://`` URL."""
        return cls(prefix, cluster=url.startswith("redis+cluster://"))

    def _tagged(self, kind: str, topic: str) -> str:
        return f"{self.prefix}{kind}:{{{topic}}}" if self.cluster else f"{self.prefix}{kind}:{topic}"

    def stream(self, topic: str) -> str:
        return self._tagged("stream", topic)

    def topic_of_stream(self, key: str) -> str:
        """The topic whose stream ``key`` is (the inverse of ``stream``)."""
        return key[len(self._stream_head):-1] if self.cluster else key[len(self._stream_head):]

    def snapshot(self, topic: str) -> str:
        return self._tagged("snap", topic)

    def pubseq(self, topic: str) -> str:
        return self._tagged("pubseq", topic)

    def epoch_of(self, topic: str) -> str:
        """The epoch key a topic's frames and cursors belong to: the one epoch, or in a cluster the
        topic's own (a shard can lose its data alone)."""
        return self._tagged("epoch", topic) if self.cluster else self.epoch

    def frame_keys(self, topic: str) -> list[str]:
        """KEYS of ``frame.lua`` for a frame of ``topic``: five (v1), or four in the topic's slot (cluster)."""
        if self.cluster:
            return [self.stream(topic), self.snapshot(topic), self.epoch_of(topic), self.pubseq(topic)]
        return [self.stream(topic), self.snapshot(topic), self.epoch, self.topics, self.pubseq(topic)]

    def inspect_alive(self, worker: str) -> str:
        return f"{self.prefix}inspect:alive:{worker}"

    def inspect_queue(self, worker: str) -> str:
        return f"{self.prefix}inspect:queue:{worker}"

    def inspect_request(self, request_id: str) -> str:
        # A cluster: the request and its reply share a slot (the worker deletes one as it writes the other).
        return self._tagged("inspect:req", request_id)

    def inspect_reply(self, request_id: str) -> str:
        return self._tagged("inspect:reply", request_id)

    def inspect_rate(self, worker: str, second: int) -> str:
        return f"{self.prefix}inspect:rate:{worker}:{second}"


def parse_id(stream_id: str | bytes) -> tuple[int, int]:
    """``"1700000000000-3"`` → ``(1700000000000, 3)``; raises ValueError on anything else."""
    if isinstance(stream_id, bytes):
        stream_id = stream_id.decode("ascii")
    ms, sep, seq = stream_id.partition("-")
    # isascii() too: isdigit() also says yes to "١٢" and "²", which int() then reads (or refuses) --
    # found by tests/fuzz: a resume from "١٢-٣" passed here and failed in the session's sender.
    if not sep or not (ms + seq).isascii() or not ms.isdigit() or not seq.isdigit() or len(ms) > 20 or len(seq) > 20:
        raise ValueError(f"not a stream id: {stream_id!r}")
    return int(ms), int(seq)


class ResumeRefused(Exception):
    """Reading on from a cursor could miss entries; the reason (a ``ResyncReason``, shown to the
    user) names why."""

    def __init__(self, reason: ResyncReason) -> None:
        super().__init__(reason)
        self.reason = reason


# -- raw replies → what readers use ------------------------------------------------------------
def snapshot_of(fields: dict[bytes, bytes]) -> Snapshot:
    """An HGETALL of a snapshot hash as ``(id, state)``; no hash is the empty state as of ``0-0``."""
    snap_id = fields.pop(SNAPSHOT_ID_FIELD.encode(), START)
    return snap_id, fields


def entries_of(rows: list[tuple[bytes, dict[bytes, bytes]]]) -> list[Entry]:
    """XRANGE/XREAD rows as entries (``{}`` for an entry some other writer left without a frame)."""
    return [(eid, fields.get(FRAME_FIELD, b"{}")) for eid, fields in rows]


def entries_after(after: bytes, rows: list[tuple[bytes, dict[bytes, bytes]]]) -> list[Entry]:
    """The rows of an XRANGE *from* ``after`` (inclusive) without it; its presence proves that nothing
    after it was trimmed, its absence that something may have been: ResumeRefused("retention")."""
    if not rows or rows[0][0] != after:
        raise ResumeRefused(ResyncReason.RETENTION)
    return entries_of(rows[1:])


def check_untrimmed(info: dict[str, Any] | None) -> None:
    """ResumeRefused("retention") unless a stream (XINFO STREAM, ``None`` if absent) never lost an
    entry, which reading it from ``0-0`` needs."""
    if info is None:
        return
    if "entries-added" not in info:
        if info["length"]:
            raise ResumeRefused(ResyncReason.RETENTION)  # Redis < 7 cannot tell: resync to be safe
    elif info["entries-added"] != info["length"]:
        raise ResumeRefused(ResyncReason.RETENTION)


def check_position(since: bytes, info: dict[str, Any] | None) -> None:
    """ResumeRefused unless ``since`` is a position the stream (XINFO STREAM, ``None`` if absent) has
    reached: a cursor from the future belongs to data Redis no longer has."""
    if info is None:
        if since != START:  # no such stream: only the very beginning can be resumed
            raise ResumeRefused(ResyncReason.STREAM_MISSING)
    elif parse_id(since) > parse_id(info["last-generated-id"]):
        raise ResumeRefused(ResyncReason.UNKNOWN_POSITION)


def reset_at_start(rows: list[tuple[bytes, dict[bytes, bytes]]]) -> bytes | None:
    """The id of the first of ``rows`` (an XRANGE of the stream's start) if it is a reset frame."""
    if rows and rows[0][1].get(FRAME_FIELD, b"").startswith(RESET_PREFIX):
        return rows[0][0]
    return None


def tail_batches(keys: Keys, reply: Any) -> list[tuple[str, list[Entry]]]:
    """An XREAD reply as ``(topic, entries)`` per stream that returned rows."""
    batches = []
    for stream, rows in reply or ():
        if rows:
            name = stream.decode() if isinstance(stream, bytes) else stream
            batches.append((keys.topic_of_stream(name), entries_of(rows)))
    return batches


def _xread_calls(keys: Keys, positions: dict[str, bytes], count: int) -> list[Call]:
    """One non-blocking XREAD per cluster slot of the topics (a cluster runs a multi-key command only
    over keys of one slot), for ``cluster_route``."""
    groups: dict[int, dict[str, bytes]] = {}
    for topic, pos in positions.items():
        groups.setdefault(key_slot(topic.encode()), {})[keys.stream(topic)] = pos
    return [(slot, lambda pipe, group=group: pipe.xread(group, count=count)) for slot, group in groups.items()]


def _slot_topics(positions: dict[str, bytes]) -> dict[int, list[str]]:
    """The topics of each slot, as ``_xread_calls`` groups them."""
    groups: dict[int, list[str]] = {}
    for topic in positions:
        groups.setdefault(key_slot(topic.encode()), []).append(topic)
    return groups


def _xread_replies(replies: list[Any]) -> list[Any]:
    """The rows of several XREAD replies (RESP2 lists; RESP3 maps) as one XREAD reply."""
    out: list[Any] = []
    for reply in replies:
        if isinstance(reply, dict):
            out.extend(reply.items())
        elif reply:
            out.extend(reply)
    return out


# -- the commands ------------------------------------------------------------------------------
class StreamReader:
    """Reads snapshots and streams over a sync client (views, the recorder, scenarios)."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._router = ClusterRouter(client) if keys.cluster else None  # type: ignore[arg-type]

    def epoch(self, topic: str = "") -> str:
        """The current epoch token (``""`` before the first frame, or after Redis lost its data); in a
        cluster the topic's (none without a topic)."""
        if self.keys.cluster and not topic:
            return ""
        raw = self.client.get(self.keys.epoch_of(topic))
        return raw.decode() if raw else ""

    def topics(self) -> list[str]:
        return sorted(t.decode() for t in self.client.smembers(self.keys.topics))

    def snapshot(self, topic: str) -> Snapshot:
        return snapshot_of(self.client.hgetall(self.keys.snapshot(topic)))

    def read_before(self, topic: str, last: bytes, count: int) -> list[Entry]:
        """The ``count`` entries up to and including ``last``, oldest first."""
        if last == START:
            return []
        rows = self.client.xrevrange(self.keys.stream(topic), max=last, min=b"-", count=count)
        return entries_of(rows[::-1])

    def read_range(self, topic: str, first: bytes | str, last: bytes | str, limit: int | None = 20_000) -> list[Entry]:
        """Entries with ``first`` ≤ id ≤ ``last`` (at most ``limit``; ``None``: all of them)."""
        return entries_of(self.client.xrange(self.keys.stream(topic), min=first, max=last, count=limit))

    def tail(self, positions: dict[str, bytes], *, count: int, block: int | None) -> list[tuple[str, list[Entry]]]:
        """Entries after each topic's position, waiting up to ``block`` ms for the first (None: not at all)."""
        if self._router is not None:
            return tail_batches(self.keys, _xread_replies(self._router.route(_xread_calls(self.keys, positions, count))))
        streams = {self.keys.stream(t): pos for t, pos in positions.items()}
        return tail_batches(self.keys, self.client.xread(streams, count=count, block=block))

    def last_id(self, topic: str) -> bytes:
        """The id of the stream's newest entry (``0-0`` for an empty or missing stream)."""
        rows = self.client.xrevrange(self.keys.stream(topic), count=1)
        return rows[0][0] if rows else b"0-0"


class AsyncStreamReader:
    """``StreamReader``'s twin over an asyncio client, plus the checks resumable sessions need."""

    def __init__(self, client: aredis.Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._router: AsyncClusterRouter | None = None
        if keys.cluster:
            # Each master's own connection for the tail, with the cluster client's credentials and timeouts.
            given = client.get_connection_kwargs()
            self._router = AsyncClusterRouter(client, **{  # type: ignore[arg-type]
                k: given[k] for k in ("username", "password", "socket_timeout", "socket_connect_timeout")
                if given.get(k) is not None})

    async def close(self) -> None:
        """Close the per-master connections of a cluster's tail (the client is the caller's)."""
        if self._router is not None:
            await self._router.close()

    async def epoch(self, topic: str = "") -> str:
        """The current epoch token (``""`` before the first frame, or after Redis lost its data); in a
        cluster the topic's (none without a topic)."""
        if self.keys.cluster and not topic:
            return ""
        raw = await self.client.get(self.keys.epoch_of(topic))
        return raw.decode() if raw else ""

    async def topics(self) -> list[str]:
        return sorted(t.decode() for t in await self.client.smembers(self.keys.topics))

    async def snapshot(self, topic: str) -> Snapshot:
        return snapshot_of(await self.client.hgetall(self.keys.snapshot(topic)))

    async def snapshots(self, topics: list[str]) -> dict[str, tuple[Snapshot, str] | BaseException]:
        """Each topic's snapshot and epoch (``snapshot`` and ``epoch`` of each) in one round: one
        pipeline, or in a cluster one per master at once. A topic whose reads failed (its master
        down, an error reply) gets the error instead of its pair; losing the connection to a single
        Redis raises, as ``snapshot`` would."""
        if not topics:
            return {}
        if self._router is not None:
            calls: list[Call] = []
            for topic in topics:
                slot, snap, epoch = key_slot(topic.encode()), self.keys.snapshot(topic), self.keys.epoch_of(topic)
                calls.append((slot, lambda pipe, key=snap: pipe.hgetall(key)))
                calls.append((slot, lambda pipe, key=epoch: pipe.get(key)))
            replies = await self._router.route(calls, partial=True)
        else:
            pipe = self.client.pipeline(transaction=False)
            for topic in topics:
                pipe.hgetall(self.keys.snapshot(topic))
                pipe.get(self.keys.epoch_of(topic))
            replies = await pipe.execute(raise_on_error=False)
        out: dict[str, tuple[Snapshot, str] | BaseException] = {}
        for i, topic in enumerate(topics):
            fields, epoch = replies[2 * i], replies[2 * i + 1]
            failed = next((r for r in (fields, epoch) if isinstance(r, BaseException)), None)
            out[topic] = failed if failed is not None else (snapshot_of(fields), epoch.decode() if epoch else "")
        return out

    async def read_before(self, topic: str, last: bytes, count: int) -> list[Entry]:
        """The ``count`` entries up to and including ``last``, oldest first."""
        if last == START:
            return []
        rows = await self.client.xrevrange(self.keys.stream(topic), max=last, min=b"-", count=count)
        return entries_of(rows[::-1])

    async def read_range(self, topic: str, first: bytes, last: bytes, limit: int | None = 20_000) -> list[Entry]:
        """Entries with ``first`` ≤ id ≤ ``last`` (at most ``limit``; ``None``: all of them)."""
        return entries_of(await self.client.xrange(self.keys.stream(topic), min=first, max=last, count=limit))

    async def tail(self, positions: dict[str, bytes], *, count: int, block: int,
                   failed: dict[str, BaseException] | None = None) -> list[tuple[str, list[Entry]]]:
        """Entries after each topic's position, waiting up to ``block`` ms for the first. In a cluster
        one round without waiting (a blocked XREAD would hold a connection per slot): the caller
        waits between empty rounds. ``failed`` (a cluster): instead of raising when a node is down
        or the cluster is, put each topic that could not be read there with the error, and return
        the others' entries."""
        if self._router is not None:
            calls, groups = _xread_calls(self.keys, positions, count), _slot_topics(positions)
            replies = await self._router.route(calls, partial=failed is not None)
            if failed is not None:
                good = []
                for (slot, _call), reply in zip(calls, replies, strict=True):
                    if isinstance(reply, BaseException):
                        failed.update(dict.fromkeys(groups[slot], reply))
                    else:
                        good.append(reply)
                replies = good
            return tail_batches(self.keys, _xread_replies(replies))
        streams = {self.keys.stream(t): pos for t, pos in positions.items()}
        return tail_batches(self.keys, await self.client.xread(streams, count=count, block=block))

    @property
    def redirects(self) -> dict[str, int]:
        """A cluster: how often the tail followed each kind of redirect (``moved``, ``ask``, ``again``)."""
        assert self._router is not None
        return self._router.redirects

    async def masters(self) -> dict[str, str | None]:
        """A cluster: every master's identity by ``host:port`` (``AsyncClusterRouter.identities``)."""
        assert self._router is not None
        return await self._router.identities()

    def master_of(self, topic: str) -> str:
        """A cluster: ``host:port`` of the master that serves ``topic`` in the client's slot map."""
        assert self._router is not None
        return self._router.master_of(key_slot(topic.encode()))

    async def check_resume(self, topic: str, since: bytes, epoch: str) -> None:
        """Raise ResumeRefused when ``since`` belongs to another epoch or a position never written.

        Whether everything after ``since`` is still retained is checked by ``read_after`` on every
        catch-up read, so it also covers a snapshot id that ages out while a client catches up.
        """
        if epoch != await self.epoch(topic):
            raise ResumeRefused(ResyncReason.EPOCH_CHANGED)
        check_position(since, await self._info(topic))

    async def read_after(self, topic: str, after: bytes, count: int = 1000) -> list[Entry]:
        """Entries strictly after ``after``; ResumeRefused("retention") if some may be trimmed."""
        stream = self.keys.stream(topic)
        if after == START:
            check_untrimmed(await self._info(topic))
            return entries_of(await self.client.xrange(stream, min=b"-", max=b"+", count=count))
        try:
            return entries_after(after, await self.client.xrange(stream, min=after, max=b"+", count=count + 1))
        except ResumeRefused:
            # Trimming removes the oldest entries first: if an entry older than ``after`` is still
            # there, ``after`` was never in this stream (a failover's new master lacks it).
            first = await self.client.xrange(stream, min=b"-", max=b"+", count=1)
            if first and parse_id(first[0][0]) < parse_id(after):
                raise ResumeRefused(ResyncReason.UNKNOWN_POSITION) from None
            raise

    async def read_after_many(self, positions: dict[str, bytes], count: int = 1000) -> dict[str, list[Entry] | BaseException]:
        """``read_after`` of several topics in one round (one pipeline; a cluster: one per master, at
        once): each topic's entries, or the exception its ``read_after`` would raise (ResumeRefused,
        or in a cluster the error of its master). A topic at ``START``, or whose position the stream
        no longer starts at, is read again on its own for the exact answer (rare: a topic empty at its
        snapshot, a trimmed position). Losing the connection to a single Redis raises."""
        out: dict[str, list[Entry] | BaseException] = {}
        batch = [(topic, after) for topic, after in positions.items() if after != START]
        if batch:
            if self._router is not None:
                streams = [self.keys.stream(topic) for topic, _ in batch]
                calls: list[Call] = [(key_slot(topic.encode()), lambda pipe, key=key, after=after:
                                      pipe.xrange(key, min=after, max=b"+", count=count + 1))
                                     for (topic, after), key in zip(batch, streams, strict=True)]
                replies = await self._router.route(calls, partial=True)
            else:
                pipe = self.client.pipeline(transaction=False)
                for topic, after in batch:
                    pipe.xrange(self.keys.stream(topic), min=after, max=b"+", count=count + 1)
                replies = await pipe.execute(raise_on_error=False)
            for (topic, after), rows in zip(batch, replies, strict=True):
                if isinstance(rows, BaseException):
                    out[topic] = rows
                    continue
                try:
                    out[topic] = entries_after(after, rows)
                except ResumeRefused:
                    pass  # read alone below, for which reason
        for topic, after in positions.items():
            if topic not in out:
                try:
                    out[topic] = await self.read_after(topic, after, count)
                except ResumeRefused as refused:
                    out[topic] = refused
                except redis.RedisError as exc:
                    if self._router is None:
                        raise
                    out[topic] = exc
        return out

    async def replay_point(self, topic: str, position: bytes | None) -> bytes | None:
        """Where a resync after a Redis outage replays from: the first entry after ``position`` (the
        last entry the reader had read, on the Redis before the outage), or without a position the
        stream's leading reset frame. The ids after ``position`` are new to the reader: Redis ids
        grow with its clock, so a restarted Redis' stream and a promoted replica's new entries are
        all after it, and a promoted replica never has entries the old master added after it."""
        if position is None or position == START:
            return await self.leading_reset(topic)
        ms, seq = parse_id(position)
        rows = await self.client.xrange(self.keys.stream(topic), min=f"{ms}-{seq + 1}", max=b"+", count=1)
        return rows[0][0] if rows else None

    async def leading_reset(self, topic: str) -> bytes | None:
        """The id of the stream's first entry if it is a reset frame (a stream rebuilt by a worker)."""
        return reset_at_start(await self.client.xrange(self.keys.stream(topic), min=b"-", max=b"+", count=1))

    async def retains(self, topic: str, entry_id: bytes) -> bool:
        """Whether the entry ``entry_id`` is still in the stream (so nothing after it was trimmed)."""
        return bool(await self.client.xrange(self.keys.stream(topic), min=entry_id, max=entry_id))

    async def _info(self, topic: str) -> dict[str, Any] | None:
        try:
            return await self.client.xinfo_stream(self.keys.stream(topic))
        except redis.ResponseError:  # no such key
            return None
