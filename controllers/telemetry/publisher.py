"""RedisPublisher: batches observations into frames on its own thread and appends them to Redis.

Producers (informer, queue and reconcile threads) call ``publish(topic, record)`` and
``set_state(topic, key, value)``. Both are non-blocking and do no I/O: a record is appended to a
bounded deque, a state change updates an in-memory mirror of the topic's state and marks the key
dirty. The publisher thread wakes every ``flush_interval`` (20 ms by default) or as soon as
``max_frame_items`` records wait, drains the buffer into one frame per topic, and sends all frames
in one pipeline over one long-lived connection (DESIGN.md: a connection per message costs ms).

Why the state mirror: after a Redis restart or a buffer overflow the snapshot hash must be rebuilt
from scratch, and only the worker knows the truth. Such a rebuild goes out as a ``reset`` frame, which
makes every dashboard client resync — a gap is always visible, never silent.

Loss budget: records wait in a bounded buffer while Redis is unreachable. When it is full the oldest
records are dropped, counted, and the count rides on the next frame (``dropped``) so the dashboard
shows it; state is never dropped because the mirror holds it.

Failover (a Sentinel-managed Redis, ``redis_config.py``): replication is asynchronous, so the
replica that Sentinel promotes may lack the last frames the old master confirmed. The epoch key
came along with the data, so the epoch test cannot see it; instead, after every reconnect to the
same epoch, the publisher reads back its own last applied seq per topic (``{prefix}pubseq``). A topic
whose stored seq is behind the last confirmed one is rewritten with a reset frame (the hash missed
those frames' state changes), and the records of the lost frames are counted as ``dropped`` in it:
the dashboard resyncs and shows the loss, never a silent gap.

Exactly once, and where it ends (protocol/redis-layout.md, "Failover and exactly once"): a frame
whose reply was lost may or may not have been applied, and a reader may have read it if it was. On
the same server (the same ``run_id`` and ``master_replid``, the same epoch, every confirmed frame
still there) the pubseq entry says which, so the frame is retried unchanged and applied once. On any
other server -- a promoted replica, a restarted or emptied Redis -- it is unknowable: the frame is
void and its records are counted as ``dropped``, never put in another frame. Putting them back on the
reset frame is what delivered 28 records twice across a failover in a loaded CI run (issue 32).

Redis Cluster (a ``redis+cluster://`` URL; protocol/redis-layout.md, "Redis Cluster"): the same loop
in the cluster layout, and what an outage costs is counted per topic, by the shard that serves it.
Each topic has its own epoch key in its slot, read before the topic's first frame and at every
reconnect; a topic whose epoch changed is handled as after an epoch change, alone. "The same
server" is per topic: the master that serves the topic's slot after the reconnect is one of the
masters before it (the same ``run_id``/``master_replid``: a healthy master, or one a slot migrated
to with its keys) or it is not (the replica promoted in place of a dead master, a master restarted
empty). Only the topics of the second kind have their frames in flight voided and are checked for
confirmed frames the new master lacks; the other masters' topics lose nothing, are not rewritten,
and their frames in flight are retried unchanged (the seq check applies each once). Frames wait
while any master is unreachable (one flush is one set of frames in flight), and so do their topics.
The topic set is SADDed after a topic's first confirmed frame on each connection and re-announced
every ``ANNOUNCE_S``. The cluster client follows MOVED/ASK within a call (a redirect did nothing) but
does not redial by itself, and ``_on_connect`` refuses every connection it would open while the
publisher counts itself connected: new connections are made only by the reconnect checks.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson
import redis
from redis.crc import key_slot

from controllers.clock import Clock, RealClock, wall_ms
from controllers.schema import PROTOCOL_VERSION
from controllers.telemetry import presence, redis_config
from controllers.telemetry.cluster_route import ClusterRouter, identity
from controllers.telemetry.scrub import SECRETS, SecretScrubber
from controllers.telemetry.streams import FRAME_SCRIPT, Keys

log = logging.getLogger(__name__)

# Reconnect attempts back off up to this (seconds). A cluster's: lower, because while the publisher
# reconnects after a master died the other masters' topics wait too (one batch across masters), and
# a failover is over in 1-3 s: retrying every 0.5 s resumes them within half a second of it.
RECONNECT_BACKOFF_MAX = 2.0
CLUSTER_RECONNECT_BACKOFF_MAX = 0.5
ANNOUNCE_S = 30.0  # a cluster: how often every topic is SADDed again (heals a topic set lost with its shard)

_MISSING = object()


def _unchanged(data: bytes) -> bytes:
    return data

STATE_KEYS_PER_FRAME = 1000
# A stream keeps about ``maxlen`` frames, but no more than about ``stream_bytes`` of them: a busy
# topic's frames carry a flush interval's worth of records each (30 KB at 1,000 writes/s), and
# 20,000 of those held 500 MB of Redis in the soak. The length is recomputed from the topic's mean
# frame size (a moving average); it never falls below MIN_STREAM_LEN, the dashboard's longest
# history request (session.MAX_HISTORY), however large the frames.
STREAM_BYTES = 32 * 1024 * 1024
MIN_STREAM_LEN = 1000
FRAME_SIZE_WEIGHT = 0.05  # of each new frame in the moving average: ~20 frames of memory
# Per topic, the seqs and record counts of this many recently confirmed frames (those carrying
# records): what a failover that lost confirmed frames is counted against (40 s at 50 frames/s).
CONFIRMED_HISTORY = 2048


def stream_bytes_from_env() -> int:
    """``CTRLSCOPE_STREAM_BYTES`` (bytes, suffix K/M/G allowed), or ``STREAM_BYTES``."""
    raw = os.environ.get("CTRLSCOPE_STREAM_BYTES", "").strip()
    if not raw:
        return STREAM_BYTES
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(raw[-1:].upper(), 1)
    try:
        value = int(float(raw[:-1] if scale > 1 else raw) * scale)
    except ValueError:
        value = 0
    if value < 1024 * 1024:
        raise ValueError(f"CTRLSCOPE_STREAM_BYTES={raw!r}: give a size of at least 1M (e.g. 32M, 1G, or bytes)")
    return value


class _Topic:
    """Per-topic publisher state. Invariant: ``dirty`` ⊆ keys ever set; ``state`` is the truth."""

    __slots__ = ("name", "state", "dirty", "reset", "dropped", "seq", "maxlen", "frame_bytes", "confirmed", "sent")

    def __init__(self, name: str) -> None:
        self.name = name
        self.maxlen: int | None = None  # this topic's stream length, if not the publisher's
        self.frame_bytes = 0.0  # moving average of its frames' size (STREAM_BYTES)
        self.state: dict[str, Any] = {}
        self.dirty: set[str] = set()
        self.reset = True  # the first frame of every publisher rewrites the snapshot
        self.dropped = 0
        self.seq = 0
        self.confirmed = 0  # the last seq Redis confirmed as applied (frame.lua status 1 or 2)
        self.sent: deque[tuple[int, int]] = deque(maxlen=CONFIRMED_HISTORY)  # (seq, records) confirmed


class RedisPublisher:
    """Publishes telemetry frames to bounded Redis Streams plus snapshot hashes (see streams.py)."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "ctrlscope:",
        flush_interval: float = 0.02,
        max_frame_items: int = 2000,
        buffer_limit: int = 200_000,
        maxlen: int = 20_000,
        stream_bytes: int | None = None,
        clock: Clock | None = None,
        name: str | None = None,
        scrubber: SecretScrubber | None = SECRETS,
        retention: float | None = None,
    ) -> None:
        self.keys = Keys.for_url(prefix, url)
        # presence.py: how long this publisher's keys outlive it, and who it says it is.
        self.retention = presence.retention_from_env() if retention is None else retention
        self._presence: dict[str, Any] = {"role": "publisher", "name": None}
        self._presence_due = 0.0
        self._ttl_at: dict[str, float] = {}  # topic → when its keys' TTL was last refreshed (clock.now)
        self._started_ms = 0.0
        self._stopped_ms: float | None = None
        # Every frame and state value passes through it just before it is framed (scrub.py); None
        # only for publishers that replay what another process already scrubbed (replay).
        self.scrubber = scrubber
        self.flush_interval = flush_interval
        self.max_frame_items = max_frame_items
        self.buffer_limit = buffer_limit
        self.maxlen = maxlen
        self.stream_bytes = stream_bytes_from_env() if stream_bytes is None else stream_bytes
        self.clock = clock or RealClock()
        self.name = name or f"{os.uname().nodename}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        # socket_timeout bounds every call: a frame pipeline is small, so 5 s means Redis is gone.
        # A connection re-established behind the publisher's back (redis-py reconnects a pooled
        # connection it finds dead when it is next used) would send frames to a new master unchecked:
        # _on_connect refuses that, so every reconnect goes through _ensure_epoch and its checks.
        self._may_reconnect = True
        self._url = url
        self._client: redis.Redis | None = None  # built by _redis at first use
        self._script: Any = None
        self._router: ClusterRouter | None = None
        if not self.keys.cluster:
            self._redis  # noqa: B018 -- built now (a bad URL is an error here); it connects at its first command
        self._buffer: deque[tuple[str, Any]] = deque()
        self._topics: dict[str, _Topic] = {}
        self._lock = threading.Lock()  # guards _topics' state/dirty against the flush thread
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._epoch: bytes | None = None
        self._last_epoch: bytes | None = None
        # A cluster: each topic's epoch token as read on this connection, and as last seen at all.
        self._epochs: dict[str, bytes] = {}
        self._last_epochs: dict[str, bytes] = {}
        self._announced: set[str] = set()  # topics SADDed to {prefix}topics since _announce_at
        self._announce_at = 0.0
        self._inflight: tuple[list[tuple[str, list[Any]]], dict[str, list[Any]]] | None = None
        self._flush_hooks: list[Callable[[], None]] = []
        # An attempt to send the frames in flight got no reply: Redis may have applied them.
        self._inflight_unsure = False
        # Which server, and which history of its data, the frames go to (_server_identity); a
        # cluster: each master's, by host:port (_cluster_masters).
        self._server: str | None = None
        self._masters: dict[str, str | None] = {}
        # Counters, read by the synthetic load generator, the benchmarks and the worker's status line.
        self.records_published = 0
        self.frames_published = 0
        self.records_dropped = 0
        self.redis_errors = 0
        # Frames (and their records) the Redis reconnected to does not have although an earlier one
        # may have applied them: frames it had confirmed (a failover to a replica they had not reached),
        # and frames in flight whose reply was lost there (void: never resent). All reported as dropped.
        self.frames_lost = 0
        self.records_lost = 0
        self.connected = False

    # -- producer side (any thread, non-blocking) -------------------------------------------
    def publish(self, topic: str, record: dict[str, Any]) -> None:
        """Queue one record for ``topic``. Drops (and counts) the oldest record when full."""
        buf = self._buffer
        if len(buf) >= self.buffer_limit:
            try:
                old_topic, _ = buf.popleft()
            except IndexError:
                pass
            else:
                with self._lock:
                    self._topic(old_topic).dropped += 1
                    self.records_dropped += 1
        buf.append((topic, record))
        if len(buf) >= self.max_frame_items:
            self._wake.set()

    def set_state(self, topic: str, key: str, value: Any) -> None:
        """Set ``key`` in the topic's snapshot state; ``None`` deletes it."""
        with self._lock:
            t = self._topic(topic)
            if value is None:
                if t.state.pop(key, _MISSING) is _MISSING:
                    return
            else:
                t.state[key] = value
            t.dirty.add(key)

    def state(self, topic: str) -> dict[str, Any]:
        """A copy of the topic's current state (what the snapshot converges to)."""
        with self._lock:
            return dict(self._topic(topic).state)

    def state_len(self, topic: str) -> int:
        """How many keys the topic's state holds (e.g. the size of an informer's cache)."""
        with self._lock:
            t = self._topics.get(topic)
            return 0 if t is None else len(t.state)

    def retain(self, topic: str, maxlen: int) -> None:
        """Keep about ``maxlen`` frames of ``topic`` instead of the publisher's ``maxlen``: a topic
        that publishes one small frame per second (metrics samples) needs minutes, not hours."""
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        with self._lock:
            self._topic(topic).maxlen = maxlen

    def _stream_len(self, t: _Topic) -> int:
        """How many frames ``t``'s stream keeps: its ``maxlen``, capped by the byte budget."""
        maxlen = t.maxlen or self.maxlen
        if t.frame_bytes <= 0:
            return maxlen
        return max(min(maxlen, MIN_STREAM_LEN), min(maxlen, int(self.stream_bytes / t.frame_bytes)))

    def state_value(self, topic: str, key: str) -> Any:
        """The current state value of one key (``None`` if absent)."""
        with self._lock:
            t = self._topics.get(topic)
            return None if t is None else t.state.get(key)

    def _topic(self, name: str) -> _Topic:
        t = self._topics.get(name)
        if t is None:
            t = self._topics[name] = _Topic(name)
        return t

    def add_flush_hook(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before each flush builds its frames, on the flushing thread: what it publishes
        goes out in that flush (the telemetry observer's time-based findings, evaluated with this
        publisher's clock). A hook that raises is logged, never stops the flush."""
        self._flush_hooks.append(hook)

    def describe(self, *, role: str, name: str) -> None:
        """Say who publishes (presence.py): ``role`` worker / simulator / replay / ..., and its name."""
        self._presence = {"role": role, "name": name}
        self._presence_due = 0.0

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> RedisPublisher:
        self._started_ms = wall_ms(self.clock)
        self._thread = threading.Thread(target=self._run, name=f"publisher-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Flush what is buffered (best effort within ``timeout``), say this run stopped, and end the thread."""
        self._stopped_ms = wall_ms(self.clock)  # every presence write from now on says so
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            # Even if the thread is still busy (redis-py's client is thread-safe): a run that does not
            # say it stopped only shows as stopped once its entry is ALIVE_MS old.
            if self._started_ms and self._client is not None:
                # If Redis is gone, the run shows as stopped once its entry ages. (A cluster with no node
                # answering raises RedisClusterException, which is no RedisError.)
                try:
                    self._redis.hset(self.keys.publishers, self.name, orjson.dumps(self._presence_entry()))
                except (redis.RedisError, *redis_config.OUTAGE_ERRORS) as exc:
                    log.warning("telemetry: could not record this run as stopped (%s)", exc)
        if self._router is not None:
            self._router.close()
        if self._client is not None:
            self._client.close()

    @property
    def _redis(self) -> redis.Redis:
        """The client, built at first use. A cluster client asks its seed nodes for the slot map as it
        is built, which fails while no node answers or the cluster is not formed yet: that is an
        outage like a plain Redis that is down at start (``_run`` tries again with backoff, records
        wait in the bounded buffer), never an error at ``start``."""
        if self._client is None:
            client = redis_config.sync_client(self._url, socket_timeout=5, socket_connect_timeout=2,
                                              health_check_interval=10, redis_connect_func=self._on_connect)
            self._script = client.register_script(FRAME_SCRIPT)
            self._router = ClusterRouter(client) if self.keys.cluster else None  # type: ignore[arg-type]
            self._client = client
        return self._client

    # -- presence and retention (publisher thread; presence.py) ------------------------------
    def _presence_entry(self) -> dict[str, Any]:
        now_ms = wall_ms(self.clock)
        stopped = self._stopped_ms
        with self._lock:
            topics = sorted(n for n, t in self._topics.items() if t.seq)
        return {**self._presence, "host": os.uname().nodename, "pid": os.getpid(),
                "started": self._started_ms or now_ms, "seen": now_ms, "stopped": stopped,
                "topics": topics, "retention": self.retention, "v": PROTOCOL_VERSION}

    def refresh(self, *, force: bool = False) -> None:
        """Refresh this run's presence entry (every ``presence.REFRESH_S``) and the TTL of its topics'
        keys (every ``retention / 4``, and after a reset recreated a snapshot). A snapshot found gone
        makes its topic reset, so it is rewritten whole by the next frame."""
        now = self.clock.now()
        if self.keys.cluster and self.connected:
            self._announce([])  # every ANNOUNCE_S, also for topics that send no frame now
        with self._lock:
            due = [n for n, t in self._topics.items()
                   if t.seq and (force or now - self._ttl_at.get(n, float("-inf")) >= self.retention / 4)]
        presence_due = force or now >= self._presence_due or self._stopped_ms is not None
        if not due and not presence_due:
            return
        pipe = self._redis.pipeline(transaction=False)
        ttl_ms = int(self.retention * 1000)
        for name in due:
            pipe.pexpire(self.keys.snapshot(name), ttl_ms)
            pipe.pexpire(self.keys.stream(name), ttl_ms)
        if presence_due:
            pipe.hset(self.keys.publishers, self.name, orjson.dumps(self._presence_entry()))
        results = pipe.execute()
        lost = [name for name, snap in zip(due, results[0:len(due) * 2:2], strict=True) if not snap]
        with self._lock:
            for name in due:
                self._ttl_at[name] = now
            for name in lost:
                self._topics[name].reset = True
                self._ttl_at.pop(name, None)  # refreshed again right after the reset frame recreates it
        if lost:
            log.warning("telemetry: %d topic(s) had expired or been forgotten in Redis (%s); rewriting them",
                        len(lost), ", ".join(lost[:3]))
            self._wake.set()
        if presence_due:
            self._presence_due = now + presence.REFRESH_S

    def _run(self) -> None:
        backoff = 0.0
        most = CLUSTER_RECONNECT_BACKOFF_MAX if self.keys.cluster else RECONNECT_BACKOFF_MAX
        while True:
            stopping = self._stopping.is_set()
            if backoff:
                self._wake.wait(backoff)
            else:
                self._wake.wait(self.flush_interval)
            self._wake.clear()
            try:
                while self.flush() >= self.max_frame_items:
                    pass  # a backlog: keep draining without waiting
                self.refresh()
                backoff = 0.0
            except redis_config.OUTAGE_ERRORS as exc:
                self.redis_errors += 1
                if self.connected:
                    log.warning("telemetry: Redis unreachable (%s); buffering, will retry", exc)
                self.connected = False
                self._epoch = None
                backoff = min(most, max(0.1, backoff * 2))
            except redis.RedisError:
                self.redis_errors += 1
                log.exception("telemetry: Redis rejected a frame; retrying")
                backoff = min(most, max(0.1, backoff * 2))
            if stopping:
                return

    # -- flush (publisher thread; also called directly by tests) -----------------------------
    def _ensure_epoch(self) -> bytes:
        if self.keys.cluster:
            return self._ensure_cluster_epochs()
        if self._epoch is None:
            self._may_reconnect = True  # (re)connecting here is expected: the checks follow
            self._redis.set(self.keys.epoch, uuid.uuid4().hex, nx=True)
            epoch = self._redis.get(self.keys.epoch)
            if epoch is None:  # deleted between SET NX and GET: try again next flush
                raise redis.ConnectionError("epoch key vanished")
            server = self._server_identity()
            if self._last_epoch is not None and epoch != self._last_epoch:
                self._on_new_epoch(applied_unknown=True)
            elif self._last_epoch is not None and not self.connected:
                # Same data set after an outage: did it keep what it confirmed, and is it the server
                # the frames in flight went to?
                moved = server is None or server != self._server
                self._check_applied(moved=lambda _topic: moved)
            self._server = server
            self._epoch = self._last_epoch = epoch
            if not self.connected:
                log.info("telemetry: connected to Redis (epoch %s)", epoch.decode())
                # After an outage: keys may have expired meanwhile; check and re-announce at once.
                self._presence_due = 0.0
                self._ttl_at.clear()
            self.connected = True
            self._may_reconnect = False
        return self._epoch

    def _ensure_cluster_epochs(self) -> bytes:
        """``_ensure_epoch`` for a cluster: at a (re)connect, every known topic's epoch, the checks of
        a reconnect against them, and the masters' identity."""
        if self._epoch is None:
            self._may_reconnect = True
            self._epochs.clear()
            self._announced.clear()
            with self._lock:
                names = [n for n, t in self._topics.items() if t.seq]
            if self._inflight is not None:
                names = sorted(set(names) | {topic for topic, _ in self._inflight[0]})
            # The slot map as the cluster has it now (a promoted replica, a node gone), then the
            # frames' connections to every master, opened while that is expected.
            self._redis.nodes_manager.initialize()  # type: ignore[attr-defined]
            assert self._router is not None
            self._router.connect_masters()
            epochs = self._read_epochs(names)
            masters = self._cluster_masters()
            changed = {n for n, e in epochs.items() if self._last_epochs.get(n, e) != e}
            if changed:  # those topics' shards lost their data: those topics start over
                self._on_new_epoch(applied_unknown=True, topics=changed)
            if self._last_epochs and not self.connected:
                self._check_applied(moved=self._moved(masters))
            self._masters = masters
            self._last_epochs.update(epochs)
            self._epoch = b"cluster"  # connected; the tokens are per topic (_epochs)
            if not self.connected:
                log.info("telemetry: connected to the Redis Cluster (%d topic epochs)", len(epochs))
                self._presence_due = 0.0
                self._ttl_at.clear()
            self.connected = True
            self._may_reconnect = False
        return self._epoch

    def _moved(self, masters: dict[str, str | None]) -> Callable[[str], bool]:
        """A cluster after an outage: whether a topic's slot is now served by a server that was not a
        master before it (``masters`` now, ``_masters`` before), which may lack what was written."""
        before = {identity for identity in self._masters.values() if identity is not None}
        nodes = self._redis.nodes_manager  # type: ignore[attr-defined]

        def moved(topic: str) -> bool:
            now = masters.get(nodes.get_node_from_slot(key_slot(topic.encode())).name)
            return now is None or now not in before
        return moved

    def _read_epochs(self, names: list[str]) -> dict[str, bytes]:
        """Each topic's epoch token (created if it has none), into ``_epochs``: ``SET NX`` then ``GET``,
        pipelined (the cluster client sends each node its own)."""
        if not names:
            return {}
        pipe = self._redis.pipeline(transaction=False)
        for name in names:
            pipe.set(self.keys.epoch_of(name), uuid.uuid4().hex, nx=True)
            pipe.get(self.keys.epoch_of(name))
        tokens = pipe.execute()[1::2]
        if any(token is None for token in tokens):  # deleted between SET NX and GET: try again
            raise redis.ConnectionError("a topic's epoch key vanished")
        epochs = dict(zip(names, tokens, strict=True))
        self._epochs.update(epochs)
        return epochs

    def _announce(self, topics: list[str]) -> None:
        """A cluster: SADD the topics not announced since the last ``ANNOUNCE_S`` (frame.lua cannot:
        the topic set is in another slot)."""
        now = self.clock.now()
        if now - self._announce_at >= ANNOUNCE_S:
            self._announced.clear()
            self._announce_at = now
            with self._lock:
                topics = sorted(set(topics) | {n for n, t in self._topics.items() if t.confirmed})
        new = [t for t in topics if t not in self._announced]
        if new:
            self._redis.sadd(self.keys.topics, *new)
            self._announced.update(new)

    def _on_connect(self, conn: Any) -> None:
        """Every (re)connect of the client's connections (redis-py's ``redis_connect_func``)."""
        if self.keys.cluster:
            # The cluster client has done the handshake already; any connection it opens by itself
            # (a redial, a node it did not talk to) could carry frames to a promoted replica unchecked.
            if not self._may_reconnect:
                raise redis.ConnectionError("connecting to a Redis Cluster node; checking what it kept first")
            return
        conn.on_connect()  # what redis-py does by default: AUTH, SELECT, the handshake
        again = getattr(conn, "_ctrlscope_connected", False)
        conn._ctrlscope_connected = True
        if again and not self._may_reconnect:
            raise redis.ConnectionError("reconnected to Redis; checking what it kept before sending frames")

    def _server_identity(self) -> str | None:
        """The server this connection writes to and the history of its data: ``run_id`` changes when
        the server restarts, ``master_replid`` when its data stops continuing what it had (a replica
        promoted, a master resynced from another). ``None`` if the server does not say (INFO refused):
        then every reconnect counts as one to another server. (A cluster: ``_cluster_masters``.)"""
        pipe = self._redis.pipeline(transaction=False)
        pipe.info("server")
        pipe.info("replication")
        try:
            server, replication = pipe.execute()
        except redis.ResponseError:
            return None
        run_id, replid = server.get("run_id"), replication.get("master_replid")
        return f"{run_id}/{replid}" if run_id and replid else None

    def _cluster_masters(self) -> dict[str, str | None]:
        """Every master's ``run_id/master_replid`` (``_server_identity``) by ``host:port``. Asked over
        the cluster client, which so opens its connection to every master while that is expected."""
        out: dict[str, str | None] = {}
        for node in self._redis.get_primaries():  # type: ignore[attr-defined]
            try:
                server = self._redis.info("server", target_nodes=node)  # type: ignore[call-arg]
                replication = self._redis.info("replication", target_nodes=node)  # type: ignore[call-arg]
            except redis.ResponseError:
                out[node.name] = None
                continue
            out[node.name] = identity(server, replication)
        return out

    def _void_inflight(self, void: Callable[[str, int], bool]) -> tuple[int, int]:
        """Give up the frames in flight that ``void(topic, seq)`` names: Redis may have applied them
        where a reader read them, and the server written to now does not have them. Their records are
        never sent again (that would deliver them twice) but counted as dropped on their topic, which
        is rewritten whole (its hash lacks their state changes). Returns the frames and records voided."""
        if self._inflight is None:
            return 0, 0
        frames, records = self._inflight
        keep: list[tuple[str, list[Any]]] = []
        kept: dict[str, list[Any]] = {}
        seen: set[str] = set()
        n_frames = n_records = 0
        with self._lock:
            for topic, args in frames:
                carries = topic not in seen  # the records ride on a topic's first frame of the flush
                seen.add(topic)
                if not void(topic, int(args[3])):
                    keep.append((topic, args))
                    if carries and topic in records:
                        kept[topic] = records[topic]
                    continue
                t = self._topics[topic]
                t.reset = True
                n_frames += 1
                if carries:
                    n = len(records.get(topic, ()))
                    t.dropped += n
                    n_records += n
        self._inflight = (keep, kept) if keep else None
        self.frames_lost += n_frames
        self.records_lost += n_records
        return n_frames, n_records

    def _on_new_epoch(self, *, applied_unknown: bool, topics: set[str] | None = None) -> None:
        """Redis lost our data (in a cluster: the shard of ``topics`` lost theirs): their snapshots are
        rewritten (reset). Their frames in flight Redis refused (status 0: the script wrote nothing)
        have their records sent again; frames whose reply was lost (``applied_unknown``) may have
        reached the old data set and a reader, so they are void. Other topics are left alone."""
        def lost(topic: str) -> bool:
            return topics is None or topic in topics

        if self._inflight is not None:
            if applied_unknown:
                frames, records = self._void_inflight(lambda topic, _seq: lost(topic))
                log.warning("telemetry: %d frame(s) (%d records) in flight when Redis lost its data may have "
                            "been applied there; counted as dropped, not sent again", frames, records)
            else:
                in_flight, records_in_flight = self._inflight
                keep = [(t, args) for t, args in in_flight if not lost(t)]
                self._inflight = (keep, {t: r for t, r in records_in_flight.items() if not lost(t)}) if keep else None
                back = [(t, r) for t, lst in records_in_flight.items() if lost(t) for r in lst]
                self._buffer.extendleft(reversed(back))
        with self._lock:
            for t in self._topics.values():
                if not lost(t.name):
                    continue
                t.reset = True
                t.confirmed = 0  # seqs of the old data set: nothing to check against the new one
                t.sent.clear()

    def _check_applied(self, *, moved: Callable[[str], bool]) -> None:
        """After a reconnect to the same epoch: reset every topic whose last confirmed frame Redis no
        longer has. That is a failover to a replica the old master had not yet replicated those frames
        to (asynchronous replication): the new master's snapshot hash misses their state changes, so
        the topic is rewritten whole (a reset frame, which makes every dashboard client resync), and
        the records of the frames Redis lost ride on it as ``dropped``.

        Frames in flight (their reply was lost) are retried unchanged only where their fate is known:
        on the server they went to (``moved(topic)`` is false), which kept every frame it confirmed of their topic,
        its pubseq entry says whether it applied them and the seq check applies them once. Elsewhere
        the old server may have applied them and a reader read them there: the frames this server
        lacks are void, their records counted as dropped (``_void_inflight``)."""
        with self._lock:
            confirmed = {n: t.confirmed for n, t in self._topics.items() if t.confirmed}
        in_flight = {topic for topic, _ in self._inflight[0]} if self._inflight is not None else set()
        names = sorted(set(confirmed) | in_flight)
        if not names:
            return
        pipe = self._redis.pipeline(transaction=False)
        for name in names:
            pipe.hget(self.keys.pubseq(name), self.name)
        stored = {name: int(raw) if raw else 0 for name, raw in zip(names, pipe.execute(), strict=True)}
        lost = {name: have for name, have in stored.items() if have < confirmed.get(name, 0)}
        void_frames, void_records = self._void_inflight(
            lambda topic, seq: (moved(topic) or topic in lost) and seq > stored[topic])
        if void_frames:
            log.warning("telemetry: %d frame(s) (%d records) in flight may have been applied by the Redis "
                        "before this one, which lacks them; counted as dropped, not sent again",
                        void_frames, void_records)
        if not lost:
            return
        frames_lost = records_lost = 0
        with self._lock:
            for name, have in lost.items():
                t = self._topics[name]
                missing = [n for seq, n in t.sent if seq > have]
                frames_lost += t.confirmed - have
                records_lost += sum(missing)
                t.dropped += sum(missing)
                t.reset = True
                t.confirmed = have
                t.sent.clear()
        self.frames_lost += frames_lost
        self.records_lost += records_lost
        log.warning("telemetry: Redis lacks %d frame(s) (%d records) it had confirmed on %d topic(s), e.g. %s "
                    "(a failover to a replica that had not received them); rewriting those topics",
                    frames_lost, records_lost, len(lost), next(iter(lost)))

    def flush(self) -> int:
        """Send everything buffered now. Returns the number of records sent.

        A frame that failed in flight is retried *unchanged* (same seq, same content) before any new
        frame is built: the script skips a seq it already applied, so a lost reply never duplicates
        and never drops a frame.
        """
        epoch = self._ensure_epoch()
        if self._inflight is None:
            for hook in self._flush_hooks:
                try:
                    hook()
                except Exception:  # noqa: BLE001 -- a telemetry bug must not stop the publisher
                    log.exception("telemetry: flush hook %r failed", hook)
            records = self._take_records()
            frames = self._build_frames(records)
            if not frames:
                return 0
            self._inflight, self._inflight_unsure = (frames, records), False
        frames, records = self._inflight
        k = self.keys
        if k.cluster:
            return self._flush_cluster(frames, records)
        pipe = self._redis.pipeline(transaction=False)
        for topic, args in frames:
            maxlen = self._stream_len(self._topics[topic])
            self._script(keys=k.frame_keys(topic), args=[epoch, maxlen, *args], client=pipe)
        unsure, self._inflight_unsure = self._inflight_unsure, True  # until the replies are read
        results = pipe.execute()
        return self._applied(frames, records, results, unsure)

    def _flush_cluster(self, frames: list[tuple[str, list[Any]]], records: dict[str, list[Any]]) -> int:
        """``flush``'s sending in a cluster: the frames grouped by their topic's master, redirects
        followed (cluster_route.py), each topic's own epoch token."""
        k = self.keys
        fresh = sorted({topic for topic, _ in frames if topic not in self._epochs})
        if fresh:
            # A topic's first frame on this connection; remembered, so that the next reconnect can
            # tell whether its shard lost it.
            self._last_epochs.update(self._read_epochs(fresh))
        assert self._router is not None
        calls: list[tuple[int, Callable[[Any], Any]]] = []
        for topic, args in frames:
            keys = k.frame_keys(topic)
            full = [self._epochs[topic], self._stream_len(self._topics[topic]), *args]
            calls.append((key_slot(topic.encode()),
                          lambda pipe, keys=keys, full=full: self._script(keys=keys, args=full, client=pipe)))
        unsure, self._inflight_unsure = self._inflight_unsure, True  # until the replies are read
        results = self._router.route(calls)
        return self._applied(frames, records, results, unsure)

    def _applied(self, frames: list[tuple[str, list[Any]]], records: dict[str, list[Any]], results: list[Any],
                 unsure: bool) -> int:
        """Take the replies of the frames in flight (``unsure``: an earlier attempt got no reply)."""
        k = self.keys
        self._inflight, self._inflight_unsure = None, False
        self._confirm(frames, records, results)
        lost = {topic for (topic, _), (status, _v) in zip(frames, results, strict=True) if status == 0}
        if lost and not k.cluster:
            # Redis restarted without persistence (or our keys were deleted): rewrite every snapshot
            # as a reset frame, which makes every dashboard client resync; resend the records of the
            # frames it refused -- unless an earlier attempt of theirs got no reply (then they may
            # have reached the old data set, and are void).
            log.warning("telemetry: Redis epoch changed; rewriting snapshots and resyncing clients")
            self._epoch = None
            refused = [(t, args) for (t, args), (status, _v) in zip(frames, results, strict=True) if status == 0]
            self._inflight = (refused, {t: records.get(t, []) for t in lost})
            self._on_new_epoch(applied_unknown=unsure)
            return self.flush()
        applied = [(t, args) for t, args in frames if t not in lost]
        if k.cluster and applied:
            self._announce(sorted({topic for topic, _ in applied}))
        sent = sum(len(r) for t, r in records.items() if t not in lost)
        self.records_published += sent
        self.frames_published += len(applied)
        if lost:
            # A cluster: the shard of these topics lost their epoch (and data) without an outage we
            # saw (emptied, or their keys deleted): the same as above, for these topics alone; their
            # epochs are read again before their next frame.
            log.warning("telemetry: the epoch of %d topic(s) changed (e.g. %s); rewriting them", len(lost),
                        next(iter(lost)))
            for topic in lost:
                self._epochs.pop(topic, None)
            refused = [(t, args) for t, args in frames if t in lost]
            self._inflight = (refused, {t: records.get(t, []) for t in lost})
            self._on_new_epoch(applied_unknown=unsure, topics=lost)
            return sent + self.flush()
        return sent

    def _confirm(self, frames: list[tuple[str, list[Any]]], records: dict[str, list[Any]],
                 results: list[Any]) -> None:
        """Note, per topic, the last seq Redis confirmed, and how many records the confirmed frames carried."""
        first: set[str] = set()
        with self._lock:
            for (topic, args), (status, _v) in zip(frames, results, strict=True):
                carries = topic not in first  # the records ride on a topic's first frame of the flush
                first.add(topic)
                if status not in (1, 2):
                    continue
                t = self._topics[topic]
                t.confirmed = max(t.confirmed, int(args[3]))
                if carries and records.get(topic):
                    t.sent.append((int(args[3]), len(records[topic])))

    def _take_records(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        buf = self._buffer
        for _ in range(min(len(buf), self.max_frame_items)):
            topic, record = buf.popleft()
            lst = out.get(topic)
            if lst is None:
                lst = out[topic] = []
            lst.append(record)
        return out

    def _build_frames(self, records: dict[str, list[Any]]) -> list[tuple[str, list[Any]]]:
        frames: list[tuple[str, list[Any]]] = []
        now_ms = wall_ms(self.clock)
        scrub = self.scrubber.scrub_json if self.scrubber is not None else _unchanged
        with self._lock:
            names = set(records) | {n for n, t in self._topics.items() if t.dirty or t.reset or t.dropped}
            for name in names:
                t = self._topic(name)
                reset = t.reset
                if reset:
                    changed = t.state
                    deleted: list[str] = []
                else:
                    # Sorted: which keys share a frame is then the same in every run and every
                    # implementation (protocol/vectors/encode/state-chunking.json fixes it).
                    dirty = sorted(t.dirty)
                    changed = {k: t.state[k] for k in dirty if k in t.state}
                    deleted = [k for k in dirty if k not in t.state]
                # A relist can change every key of a big cache at once: such a change goes out as
                # several frames of at most STATE_KEYS_PER_FRAME keys, so that no frame (and no
                # websocket message the dashboard makes of it) grows without bound.
                keys = list(changed) + deleted
                chunks = [keys[i:i + STATE_KEYS_PER_FRAME] for i in range(0, len(keys), STATE_KEYS_PER_FRAME)] or [[]]
                if reset:
                    chunks = [keys]  # a reset frame carries no state in its JSON, only in the hash write
                for n, chunk in enumerate(chunks):
                    # "reset" must be the first key: readers detect resets by the raw prefix
                    # b'{"reset":true' without decoding (streams.RESET_PREFIX); otherwise "r" is
                    # first, so a frame without records starts b'{"r":[],' (streams.NO_RECORDS_PREFIX).
                    frame: dict[str, Any] = {"reset": True} if reset else {}
                    frame.update(r=records.get(name, []) if n == 0 else [], v=PROTOCOL_VERSION, ts=now_ms, src=self.name,
                                 seq=t.seq + 1)
                    if not reset:
                        frame["s"] = {k: changed.get(k) for k in chunk}
                    if t.dropped and n == 0:
                        frame["dropped"] = t.dropped
                    pairs: list[Any] = []
                    gone: list[str] = []
                    for k in chunk:
                        if k in changed:
                            pairs.append(k)
                            pairs.append(scrub(orjson.dumps(changed[k])))
                        else:
                            gone.append(k)
                    data = scrub(orjson.dumps(frame))
                    args = [data, name, self.name, t.seq + 1, 1 if reset and n == 0 else 0,
                            len(pairs) // 2, *pairs, *gone]
                    t.frame_bytes += ((len(data) - t.frame_bytes) * FRAME_SIZE_WEIGHT if t.frame_bytes
                                      else float(len(data)))
                    frames.append((name, args))
                    t.seq += 1
                # Consumed now: the built frames are retried unchanged until Redis confirms them.
                if reset:
                    self._ttl_at.pop(name, None)  # the reset recreates the hash without a TTL
                t.reset = False
                t.dirty = set()
                t.dropped = 0
        return frames
