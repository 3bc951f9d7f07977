"""Redis Sentinel: a master, a replica and three Sentinels (Debian's redis-server and redis-sentinel) on
loopback ports of their own; a publisher at ~1,000 observations/s and a dashboard (daphne) with a
websocket client; the master is killed with SIGKILL while the replica lags 0.2 s behind it, so the new
master certainly lacks frames the old one confirmed. The publisher, the dashboard and the channel
layer follow the new master; the client sees reconnecting (status down) → resync (its reason) → live;
every frame is delivered or falls in a gap a resync announced, the lost records are reported as
dropped, the state converges to the publisher's; nothing crashes."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from controllers.process import stop_process
from controllers.telemetry import redis_config
from controllers.telemetry.redisboot import free_port
from controllers.telemetry.streams import parse_id
from dashboard.wsclient import TelemetryWsClient
from tests.conftest import need_programs, run_async, wait_until

MASTER = "ctrlscope"
RATE = 1000  # observations per second
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 5000
LAG_S = 0.2  # how far the replica is behind when the master dies


def _binaries() -> tuple[str, str]:
    server, sentinel = need_programs("redis-server", "redis-sentinel",
                                     install="apt-get install redis-server redis-sentinel")
    return server, sentinel


@dataclass
class SentinelCluster:
    """A master, one replica and three Sentinels on free loopback ports, stopped by ``stop``."""

    directory: Path
    master_port: int = field(default_factory=free_port)
    replica_port: int = field(default_factory=free_port)
    sentinel_ports: list[int] = field(default_factory=lambda: [free_port() for _ in range(3)])
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return redis_config.SentinelTarget(tuple(("127.0.0.1", p) for p in self.sentinel_ports), MASTER).url

    @property
    def sentinels_env(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for p in self.sentinel_ports)

    def _spawn(self, name: str, argv: list[str]) -> None:
        with open(self.directory / f"{name}.log", "wb") as log:
            self.procs[name] = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                cwd=self.directory)

    def start(self, server: str, sentinel: str) -> SentinelCluster:
        common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no",
                  "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"]
        for name, port, extra in (("master", self.master_port, []),
                                  ("replica", self.replica_port, ["--replicaof", "127.0.0.1", str(self.master_port)])):
            data = self.directory / name
            data.mkdir()
            self._spawn(name, [server, "--port", str(port), "--dir", str(data), *common, *extra])
        for port in (self.master_port, self.replica_port):
            wait_until(lambda port=port: _answers(port), timeout=10, what=f"redis-server on {port}")
        wait_until(lambda: _info(self.replica_port).get("master_link_status") == "up", timeout=15,
                   what="the replica in sync with the master")
        for i, port in enumerate(self.sentinel_ports):
            conf = self.directory / f"sentinel-{i}.conf"  # Sentinel rewrites its config file: one each
            conf.write_text(f"port {port}\nbind 127.0.0.1\ndir {self.directory}\n"
                            f"sentinel monitor {MASTER} 127.0.0.1 {self.master_port} 2\n"
                            f"sentinel down-after-milliseconds {MASTER} {DOWN_AFTER_MS}\n"
                            f"sentinel failover-timeout {MASTER} {FAILOVER_TIMEOUT_MS}\n"
                            f"sentinel parallel-syncs {MASTER} 1\n")
            self._spawn(f"sentinel-{i}", [sentinel, str(conf)])
        # Ready once every Sentinel knows the replica and the two other Sentinels (hello messages
        # every 2 s over the master): only then can a quorum agree on a failover.
        wait_until(lambda: all(self._knows_all(p) for p in self.sentinel_ports), timeout=30,
                   what="three Sentinels that know the replica and each other")
        return self

    def _knows_all(self, port: int) -> bool:
        try:
            state = redis.Redis(port=port, socket_timeout=1).sentinel_master(MASTER)
        except redis.RedisError:
            return False
        return state.get("num-slaves", 0) >= 1 and state.get("num-other-sentinels", 0) == 2

    def cut_replication(self, lag: float) -> None:
        """Leave the replica ``lag`` seconds behind the master: point it at a port nobody listens on
        (it keeps its data and stays a replica; the Sentinels would only "fix" that after 8 s, and
        the master is dead long before), so the frames of the last ``lag`` seconds are on the
        master only. Asynchronous replication's window, made long enough to be seen every time."""
        redis.Redis(port=self.replica_port, socket_timeout=2).replicaof("127.0.0.1", free_port())
        wait_until(lambda: _info(self.replica_port).get("master_link_status") == "down", timeout=2,
                   what="the replica cut off")
        time.sleep(lag)

    def master_address(self) -> tuple[str, int] | None:
        for port in self.sentinel_ports:
            try:
                addr = redis.Redis(port=port, socket_timeout=1).sentinel_get_master_addr_by_name(MASTER)
            except redis.RedisError:
                continue
            if addr:
                host = addr[0].decode() if isinstance(addr[0], bytes) else addr[0]
                return host, int(addr[1])
        return None

    def logs(self) -> str:
        return "\n".join(f"--- {name}\n" + (self.directory / f"{name}.log").read_text(errors="replace")[-1500:]
                         for name in self.procs)

    def stop(self) -> None:
        for proc in self.procs.values():
            stop_process(proc, grace=3)


def _answers(port: int) -> bool:
    try:
        return bool(redis.Redis(port=port, socket_timeout=0.5, socket_connect_timeout=0.5).ping())
    except redis.RedisError:
        return False


def _info(port: int) -> dict[str, Any]:
    try:
        return redis.Redis(port=port, socket_timeout=1).info("replication")
    except redis.RedisError:
        return {}


@pytest.fixture
def sentinel_cluster(tmp_path: Path):
    server, sentinel = _binaries()
    cluster = SentinelCluster(tmp_path)
    try:
        yield cluster.start(server, sentinel)
    finally:
        cluster.stop()


class RecordingClient(TelemetryWsClient):
    """A websocket client that also keeps the order of what it was told: frames (by publisher seq),
    resyncs, snapshots and Redis status, each with the time it arrived."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[tuple[Any, ...]] = []

    def _handle(self, msg: dict[str, Any]) -> None:
        now = time.monotonic()
        t = msg.get("t")
        if t == "frames":
            for topic, entries in msg["topics"].items():
                view = self.topics.get(topic)
                cursor = view.cursor if view is not None else None
                for eid, frame in entries:
                    duplicate = cursor is not None and parse_id(eid) <= parse_id(cursor)
                    if not duplicate:
                        cursor = eid
                    self.events.append(("frame", now, topic, eid, frame["src"], frame["seq"], bool(frame.get("reset")),
                                        frame.get("dropped", 0), len(frame["r"]), duplicate))
        elif t == "resync":
            self.events.append(("resync", now, msg["topic"], msg["reason"]))
        elif t == "snapshot" and not msg.get("more"):
            self.events.append(("snapshot", now, msg["topic"], msg["id"]))
        elif t == "status":
            self.events.append(("status", now, msg["redis"]))
        super()._handle(msg)


def account(events: list[tuple[Any, ...]], topic: str, src: str, *, reset_announces_gap: bool = False
            ) -> dict[str, Any]:
    """Frames of ``src`` on ``topic`` by seq (a ``RecordingClient``'s events; test_redis_cluster counts
    with it too): delivered, skipped inside a gap that was announced (``covered``), skipped without
    (``silent``), or delivered twice (``repeated``). A gap is announced by a resync since the last frame
    delivered; with ``reset_announces_gap`` also by the frame after it being a reset frame (which
    rewrites the state and carries the lost records' count)."""
    last: int | None = None
    resynced_since_last = False
    out: dict[str, Any] = {"delivered": 0, "covered": 0, "silent": [], "repeated": 0, "dropped": 0, "records": 0,
                           "gaps": []}
    for ev in events:
        if ev[0] == "resync" and ev[2] == topic:
            resynced_since_last = True
        if ev[0] != "frame" or ev[2] != topic or ev[4] != src or ev[9]:
            continue
        seq = ev[5]
        out["dropped"] += ev[7]
        if last is not None and seq <= last:
            out["repeated"] += 1
            continue
        if last is not None and seq > last + 1:
            if resynced_since_last or (reset_announces_gap and ev[6]):
                out["covered"] += seq - last - 1
                out["gaps"].append((last, seq))
            else:
                out["silent"].append((last, seq))
        out["delivered"] += 1
        out["records"] += ev[8]
        last = seq
        resynced_since_last = False
    out["last"] = last
    return out


def _get(dashboard, path: str) -> str:
    """An HTTP view's body (200 only): the views' Redis client follows the master too."""
    with urllib.request.urlopen(dashboard.url + path, timeout=10) as resp:
        assert resp.status == 200, path
        return resp.read().decode()


def _records_in_frames(url: str, pub, topic: str, gaps: list[tuple[int, int]]) -> int:
    """How many records the frames of ``pub`` strictly inside ``gaps`` carry in the stream (new master)."""
    import orjson

    client = redis_config.sync_client(url, socket_timeout=5)
    try:
        rows = client.xrange(pub.keys.stream(topic), min="-", max="+")
    finally:
        client.close()
    n = 0
    for _eid, fields in rows:
        frame = orjson.loads(fields[b"f"])
        if frame["src"] == pub.name and any(lo < frame["seq"] < hi for lo, hi in gaps):
            n += len(frame["r"])
    return n


def _produce(pub, stop: threading.Event, counter: list[int]) -> None:
    start = time.monotonic()
    i = 0
    while not stop.is_set():
        due = int((time.monotonic() - start) * RATE)
        while i < due:
            pub.publish("t", {"seq": i})
            pub.set_state("t", f"k{i % 50}", {"seq": i})
            i += 1
        counter[0] = i
        time.sleep(0.005)


@pytest.mark.parametrize("lag", [LAG_S, 0.0], ids=["replica-behind", "replica-in-sync"])
def test_a_sentinel_failover_is_a_reconnect_and_an_announced_resync(lag, sentinel_cluster, publisher_factory,
                                                                      dashboard_factory):
    from channels_redis.core import RedisChannelLayer

    cluster = sentinel_cluster
    url = cluster.url
    pub = publisher_factory(url=url, flush_interval=0.02).start()
    stop = threading.Event()
    produced = [0]
    producer = threading.Thread(target=_produce, args=(pub, stop, produced), daemon=True)
    producer.start()
    wait_until(lambda: pub.connected and pub.frames_published >= 5, timeout=10, what="the publisher on the master")
    # The dashboard is configured as a user would: the Sentinels and the master's name, no REDIS_URL.
    dashboard = dashboard_factory(REDIS_URL="", REDIS_SENTINELS=cluster.sentinels_env, REDIS_MASTER_NAME=MASTER)
    prefix = pub.keys.prefix
    timing: dict[str, float] = {}

    async def layer_roundtrip(layer: RedisChannelLayer, n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                channel = await layer.new_channel()
                await layer.send(channel, {"type": "probe", "n": n})
                msg = await asyncio.wait_for(layer.receive(channel), 2)
                assert msg["n"] == n
                return
            except (redis.RedisError, OSError, TimeoutError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    async def main() -> RecordingClient:
        layer = RedisChannelLayer(hosts=[redis_config.channel_layer_host(url, socket_timeout=None)],
                                  prefix=prefix + "layer:")
        await layer_roundtrip(layer, 1, 5)
        c = RecordingClient(dashboard.ws_url, origin=dashboard.url)
        await c.connect()
        await c.subscribe("t")
        await c.wait_for(lambda: c.topics["t"].snapshots == 1, what="the first snapshot")
        await c.wait_for(lambda: len(c.topics["t"].records) >= 2 * RATE, timeout=15, what="2 s of live records")

        assert pub.name in await asyncio.to_thread(_get, dashboard, "/presence.json")  # the views' client
        if lag:
            await asyncio.to_thread(cluster.cut_replication, lag)
        timing["kill"] = time.monotonic()
        cluster.procs["master"].kill()  # kill -9: no shutdown, nothing more is replicated
        await c.wait_for(lambda: "down" in c.statuses, timeout=10, what="status down")
        deadline = time.monotonic() + 30
        while "promoted" not in timing or "publisher" not in timing:
            if "promoted" not in timing and cluster.master_address() == ("127.0.0.1", cluster.replica_port):
                timing["promoted"] = time.monotonic()
            if "publisher" not in timing and pub.connected and pub.redis_errors:
                timing["publisher"] = time.monotonic()
            assert time.monotonic() < deadline, f"no failover within 30 s: {timing}\n{cluster.logs()}"
            await asyncio.sleep(0.02)
        await c.wait_for(lambda: c.statuses[-1] == "up", timeout=15, what="status up again")
        kill_at = timing["kill"]
        await c.wait_for(lambda: any(e[0] == "resync" and e[1] > kill_at for e in c.events), timeout=15,
                         what="a resync after the failover")
        resync_at = next(e[1] for e in c.events if e[0] == "resync" and e[1] > kill_at)
        await c.wait_for(lambda: any(e[0] == "frame" and e[1] > resync_at and e[8] for e in c.events
                                     if e[0] == "frame"), timeout=15, what="live records after the resync")
        timing["live"] = next(e[1] for e in c.events if e[0] == "frame" and e[1] > resync_at and e[8])
        await layer_roundtrip(layer, 2, 15)  # the channel layer follows the new master too
        await layer.close_pools()
        await asyncio.sleep(1.0)
        stop.set()
        await asyncio.to_thread(producer.join, 5)
        total = produced[0]
        await c.wait_for(lambda: (c.topics["t"].records and c.topics["t"].records[-1]["seq"] == total - 1
                                  and c.topics["t"].state == pub.state("t")), timeout=15,
                         what="the last record and the publisher's state")
        assert c.close_code is None, "the websocket stayed open through the failover"
        await c.close()
        return c

    try:
        c = run_async(main(), timeout=90)
    finally:
        stop.set()
    total = produced[0]
    acc = account(c.events, "t", pub.name)
    kill_at = timing["kill"]
    after = [e for e in c.events if e[1] > kill_at and e[0] in ("status", "resync", "snapshot")]
    kinds = [e[0] if e[0] != "status" else f"status {e[2]}" for e in after]
    records = [r["seq"] for r in c.topics["t"].records]
    unique = set(records)
    print(f"\nfailover (replica {lag:.1f} s behind): promoted {timing['promoted'] - kill_at:.2f} s after kill -9, publisher on the new master "
          f"{timing['publisher'] - kill_at:.2f} s, client live {timing['live'] - kill_at:.2f} s; "
          f"frames delivered {acc['delivered']}, skipped under a resync {acc['covered']}, silent gaps "
          f"{len(acc['silent'])}, repeated {acc['repeated']}; the new master lacked {pub.frames_lost} of the publisher's "
          f"frame(s) (confirmed, or in flight and void: {pub.records_lost} records), reported dropped {acc['dropped']}; records "
          f"{len(unique)}/{total - min(unique)} delivered, {len(records) - len(unique)} twice; after the kill: {kinds}")

    assert kinds[0] == "status down" and "status up" in kinds, kinds
    up = kinds.index("status up")
    reasons = [e[3] for e in after if e[0] == "resync"]
    assert "resync" in kinds[up:] and "snapshot" in kinds[kinds.index("resync", up):], kinds
    assert set(reasons) <= {"redis-reconnected", "worker-reset", "unknown-position"}, reasons
    assert acc["silent"] == [], f"frames skipped without a resync: {acc['silent']}"
    assert acc["repeated"] == 0 and c.duplicates == 0
    assert acc["last"] == pub._topics["t"].seq, "the client has the publisher's last frame"
    assert c.topics["t"].state == pub.state("t"), "the client's state is the publisher's after the failover"
    if lag:
        assert pub.frames_lost > 0 and pub.records_lost > 0, "the new master lacked the lagging frames"
    assert acc["dropped"] == pub.records_lost + pub.records_dropped, "records Redis lost are reported as dropped"
    assert len(records) == len(unique), "no record twice"
    # Every record the client lacks was in a frame it was told it missed: one skipped under a resync
    # (still in the new master's stream), or one the failover lost (the publisher's count).
    skipped = _records_in_frames(url, pub, "t", acc["gaps"])
    missing = set(range(min(unique), total)) - unique  # from the first record after the subscription
    assert len(missing) <= skipped + pub.records_lost, (len(missing), skipped, pub.records_lost)
    assert c.errors == []
    assert '"redis": "up"' in _get(dashboard, "/readyz") and pub.name in _get(dashboard, "/presence.json")
    assert dashboard.proc.poll() is None, "daphne survived the failover"
    log = dashboard.log.read_text(errors="replace")
    assert "Traceback" not in log, log[-3000:]
    assert pub._thread is not None and pub._thread.is_alive() and pub.connected
    assert timing["live"] - kill_at < 30


def test_a_redis_back_without_frames_it_confirmed_has_the_topic_rewritten_and_the_loss_reported(publisher_factory,
                                                                                                 redis_url):
    """The publisher's side of a failover to a lagging replica, without Sentinel: the same epoch, but
    the topic's keys as they were five frames ago (DUMP before, RESTORE after)."""
    import orjson

    pub = publisher_factory()
    client = redis.Redis.from_url(redis_url)
    keys = [pub.keys.stream("t"), pub.keys.snapshot("t"), pub.keys.pubseq("t")]
    try:
        for i in range(4):
            pub.publish("t", {"seq": i})
            pub.set_state("t", f"k{i % 3}", i)
            pub.flush()
        saved = {k: client.dump(k) for k in keys}
        for i in range(4, 19):  # five frames of three records the "replica" never gets
            pub.publish("t", {"seq": i})
            pub.set_state("t", f"k{i % 3}", i)
            if i % 3 == 0:
                pub.flush()
        assert pub._topics["t"].confirmed == 9
        pub.connected, pub._epoch = False, None  # what the publisher thread does on a ConnectionError
        pub.publish("t", {"seq": 19})
        pub.flush()  # the same Redis, nothing lost: no reset
        assert not client.xrevrange(keys[0], count=1)[0][1][b"f"].startswith(b'{"reset"')
        assert pub.frames_lost == 0
        pub.publish("t", {"seq": 20})
        pub.flush()
        for k, data in saved.items():
            client.restore(k, 0, data, replace=True)
        pub.connected, pub._epoch = False, None
        pub.publish("t", {"seq": 21})
        pub.flush()
        last = orjson.loads(client.xrevrange(keys[0], count=1)[0][1][b"f"])
        assert last["reset"] is True and last["r"] == [{"seq": 21}]
        assert last["dropped"] == 17 and pub.records_lost == 17 and pub.frames_lost == 7
        snap = {k.decode(): orjson.loads(v) for k, v in client.hgetall(keys[1]).items() if k != b"__id__"}
        assert snap == pub.state("t"), "the hash is the publisher's state again"
    finally:
        client.delete(*keys)
        client.close()
