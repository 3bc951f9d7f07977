"""Redis Cluster (protocol/redis-layout.md, "Redis Cluster"): three masters and three replicas of Debian's
redis-server on loopback ports (controllers/telemetry/clusterboot.py), publishers in the cluster layout,
two dashboard replicas (daphne) with websocket clients on each.

Under load, a slot range holding a third of the topics is resharded (``redis-cli --cluster reshard``:
MIGRATE of their streams and hashes; clients see ASK, TRYAGAIN, MOVED) and then the master of another
third is killed with SIGKILL (its replica is promoted). The reshard must lose nothing and need no
resync; the failover is a reconnect and an announced resync. Every client gets every frame of every
publisher once, or a gap a resync announced; records Redis lost are reported as dropped; the state
converges to each publisher's."""

from __future__ import annotations

import asyncio
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis
from redis.crc import key_slot

from controllers.telemetry import redis_config
from controllers.telemetry.clusterboot import LocalRedisCluster
from controllers.telemetry.streams import FRAME_SCRIPT, AsyncStreamReader, Keys, StreamReader
from tests.conftest import need_programs, run_async, wait_until
from tests.telemetry.publisher_group import GroupReport, PublisherGroup
from tests.telemetry.test_sentinel import RecordingClient, account

PUBLISHERS = int(os.environ.get("CTRLSCOPE_CLUSTER_PUBLISHERS", "10"))
TOPICS_PER_PUBLISHER = int(os.environ.get("CTRLSCOPE_CLUSTER_TOPICS", "2"))
RATE = int(os.environ.get("CTRLSCOPE_CLUSTER_RATE", "4000"))  # observations/s over all publishers
CLIENTS = int(os.environ.get("CTRLSCOPE_CLUSTER_CLIENTS", "10"))  # split over two dashboard replicas
# Processes the publishers are split over (publisher_group.py): at the scale (50 × 20 topics at
# 20,000/s) the producing loop and the flush threads would share the clients' GIL.
PROCS = int(os.environ.get("CTRLSCOPE_CLUSTER_PROCS", "1"))
CLIENT_TOPICS = 200  # at most per client (a connection may subscribe to 256): more are split by publisher
INSTALL = "apt-get install redis-server"
RESHARD_SLOTS = 1000  # the lowest 1000 slots of the first master: slots 0-999


@pytest.fixture
def redis_cluster(tmp_path: Path):
    need_programs("redis-server", "redis-cli", install=INSTALL)
    cluster = LocalRedisCluster(tmp_path / "cluster").start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _topic_in(band: range, name: str) -> str:
    """``name`` with the first suffix that puts its slot into ``band`` (the slot is the topic's)."""
    for n in range(100_000):
        topic = f"{name}-{n}"
        if key_slot(topic.encode()) in band:
            return topic
    raise AssertionError(f"no topic for slots {band}")


def test_the_cluster_layout_keeps_a_topics_keys_in_its_slot_and_the_v1_call_is_refused(redis_cluster, publisher_factory):
    url = redis_cluster.url
    pub = publisher_factory(url=url)
    topics = [f"w/demo/t{i}" for i in range(12)]
    for i, topic in enumerate(topics):
        pub.publish(topic, {"n": i})
        pub.set_state(topic, "k", {"n": i})
    assert pub.flush() == 12
    client = redis_config.sync_client(url)
    keys = Keys.for_url(pub.keys.prefix, url)
    assert keys.cluster and keys.stream("a/b") == f"{keys.prefix}stream:{{a/b}}"
    masters = set()
    for topic in topics:
        names = [keys.stream(topic), keys.snapshot(topic), keys.pubseq(topic), keys.epoch_of(topic)]
        assert {key_slot(n.encode()) for n in names} == {key_slot(topic.encode())}
        assert all(client.exists(n) for n in names), names
        masters.add(redis_cluster.slot_owner(key_slot(topic.encode())))
    assert len(masters) == 3, "12 topics spread over the three masters"
    reader = StreamReader(client, keys)
    assert set(topics) <= set(reader.topics()), "the publisher SADDs the topic set"
    assert reader.snapshot(topics[3])[1] == {b"k": b'{"n":3}'}
    assert reader.epoch(topics[3]) and reader.epoch(topics[3]) != reader.epoch(topics[4])  # one per topic
    assert reader.epoch() == "", "no global epoch in a cluster"
    batches = dict(reader.tail({t: b"0-0" for t in topics}, count=10, block=None))
    assert sorted(batches) == sorted(topics) and all(len(e) == 1 for e in batches.values())

    async def batched() -> dict:
        # A session's many syncs read every snapshot and epoch in one round, a pipeline per master.
        aclient = redis_config.async_client(url)
        areader = AsyncStreamReader(aclient, keys)
        try:
            # ... and catch up from every topic's first entry in one round, too.
            firsts = {t: reader.read_range(t, b"-", b"+", 1)[0][0] for t in topics}
            assert await areader.read_after_many(firsts) == {t: [] for t in topics}
            return await areader.snapshots([*topics, "w/demo/never-published"])
        finally:
            await areader.close()
            await aclient.aclose()

    got = run_async(batched())
    assert got == {**{t: (reader.snapshot(t), reader.epoch(t)) for t in topics},
                   "w/demo/never-published": ((b"0-0", {}), "")}
    # A v1 publisher (five KEYS across slots) is refused loudly, not half-applied.
    v1 = Keys(pub.keys.prefix)
    owner = redis.Redis(port=redis_cluster.slot_owner(key_slot(v1.stream(topics[0]).encode())))
    with pytest.raises(redis.exceptions.ClusterCrossSlotError):
        owner.eval(FRAME_SCRIPT, 5, *v1.frame_keys(topics[0]), "e", 100, b"{}", topics[0], "x", 1, 0, 0)
    owner.close()
    client.close()


def _fail_window(port: int, timing: dict[str, float], timeout: float = 30.0) -> None:
    """Note in ``timing`` when the node at ``port`` first says ``cluster_state:fail`` and then ``ok`` again."""
    import redis as sync_redis

    node = sync_redis.Redis(port=port, socket_timeout=2)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            state = node.cluster("info")["cluster_state"]
            now = time.monotonic()
            if state == "fail" and "fail" not in timing:
                timing["fail"] = now
            elif state == "ok" and "fail" in timing:
                timing["ok"] = now
                return
            time.sleep(0.01)
    finally:
        node.close()


@pytest.mark.timeout(360)  # 40-60 s on a loaded 2-core machine; the scale is set by the environment
def test_a_reshard_and_a_master_killed_under_load(redis_cluster, dashboard_factory, prefix, tmp_path):
    cluster = redis_cluster
    url = cluster.url
    # The masters of slots 0-5460, 5461-10922, 10923-16383.
    first, second, third = (cluster.slot_owner(s) for s in (0, 8000, 16000))
    # A third of the topics in the slots the reshard moves, a third on the master that is killed,
    # the rest on the master that neither happens to.
    bands = [range(0, RESHARD_SLOTS), range(11_000, 16_000), range(6_000, 10_000)]
    topics: dict[str, int] = {}  # topic → the index of its publisher
    for j in range(PUBLISHERS):
        for k in range(TOPICS_PER_PUBLISHER):
            topics[_topic_in(bands[(j * TOPICS_PER_PUBLISHER + k) % 3], f"w/p{j}/t{k}")] = j
    moved = [t for t in topics if key_slot(t.encode()) < RESHARD_SLOTS]
    killed = [t for t in topics if cluster.slot_owner(key_slot(t.encode())) == third]
    keys = Keys.for_url(prefix, url)

    # Which topics each client watches: all of them, or, past CLIENT_TOPICS, whole publishers' topics
    # in turn (each publisher's topics watched by as many clients: the dropped counts add up per publisher).
    per_client = max(1, CLIENT_TOPICS // TOPICS_PER_PUBLISHER)
    watched_pubs = [list(range(PUBLISHERS)) if PUBLISHERS <= per_client else
                    sorted({(i * per_client + m) % PUBLISHERS for m in range(per_client)}) for i in range(CLIENTS)]
    assert set().union(*watched_pubs) == set(range(PUBLISHERS)), "every publisher watched by some client"
    watchers = {j: sum(j in w for w in watched_pubs) for j in range(PUBLISHERS)}
    watch = [{t: j for t, j in topics.items() if j in w} for w in watched_pubs]

    group = PublisherGroup(url, prefix, topics, rate=RATE, procs=PROCS, log_dir=tmp_path).start()
    wait_until(lambda: group.stats()["ready"], timeout=30, what="every publisher")
    env = {"REDIS_URL": "", "REDIS_CLUSTER_NODES": cluster.nodes_env}
    dashboards = [dashboard_factory(**env), dashboard_factory(**env)]
    timing: dict[str, float] = {}

    async def main() -> tuple[list[RecordingClient], GroupReport]:
        clients = [RecordingClient(dashboards[i % 2].ws_url, origin=dashboards[i % 2].url) for i in range(CLIENTS)]
        for i, c in enumerate(clients):
            await c.connect()
            for topic in watch[i]:
                await c.subscribe(topic)
        for i, c in enumerate(clients):
            await c.wait_for(lambda c=c, i=i: all(c.topics[t].snapshots and c.topics[t].records for t in watch[i]),
                             timeout=30, what="every topic live")
        timing["reshard"] = time.monotonic()
        await asyncio.to_thread(cluster.reshard, first, second, RESHARD_SLOTS)
        timing["resharded"] = time.monotonic()
        assert all(cluster.slot_owner(key_slot(t.encode())) == second for t in moved)
        timing["lost_at_reshard"] = (await asyncio.to_thread(group.stats))["frames_lost"]
        await asyncio.sleep(1.0)
        timing["kill"] = time.monotonic()
        cluster.kill(third)
        # When a healthy master refuses every slot (cluster_state:fail, from the dead one marked
        # failed to its replica promoted): the part of the other topics' pause that is the cluster's.
        refusal = asyncio.create_task(asyncio.to_thread(_fail_window, first, timing))
        await asyncio.to_thread(wait_until, lambda: third not in cluster.master_ports(), 30,
                                "the replica of the killed master promoted")
        await asyncio.to_thread(cluster.wait_ok, 30)
        timing["promoted"] = time.monotonic()
        await refusal
        kill_at = timing["kill"]
        for c in clients:
            await c.wait_for(lambda c=c: any(e[0] == "frame" and e[1] > timing["promoted"] + 0.5 and e[8]
                                             for e in c.events), timeout=30, what="live records after the failover")
        await asyncio.sleep(1.0)
        final = await asyncio.to_thread(group.stop)
        produced = final.produced
        for i, c in enumerate(clients):
            await c.wait_for(lambda c=c, i=i: all(
                c.topics[t].records and c.topics[t].records[-1]["seq"] == produced[t] - 1
                and c.topics[t].state == final.state[t] for t in watch[i]), timeout=30,
                what="every topic's last record and its publisher's state")
            assert c.close_code is None
        timing["kill_at"] = kill_at
        for c in clients:
            await c.close()
        return clients, final

    try:
        clients, final = run_async(main(), timeout=240)
    finally:
        group.close()
    produced = final.produced
    pubs = final.publishers
    kill_at = timing["kill"]
    reshard_at, resharded_at = timing["reshard"], timing["resharded"]
    observations = sum(produced.values())
    resyncs_in_reshard = [e for c in clients for e in c.events
                          if e[0] in ("resync", "status") and reshard_at <= e[1] < kill_at]
    silent = repeated = covered = delivered = 0
    reader_client = redis_config.sync_client(url, socket_timeout=5)

    def in_stream(topic: str, name: str, lo: int, hi: int) -> list[tuple[int, str, bool, int]]:
        """The frames of publisher ``name`` from seq ``lo`` to ``hi`` in the topic's stream (reader's or publisher's loss?)."""
        rows = reader_client.xrange(keys.stream(topic), min="-", max="+")
        out = []
        for eid, fields in rows:
            frame = orjson.loads(fields[b"f"])
            if frame["src"] == name and lo <= frame["seq"] <= hi:
                out.append((frame["seq"], eid.decode(), bool(frame.get("reset")), frame.get("dropped", 0)))
        return out

    silent_where: list[str] = []  # each silent gap: the topic, which master, the gap, the client's events around it
    dropped: dict[int, int] = {}
    missing_total = 0
    for i, c in enumerate(clients):
        twice = [(e[2], e[3], "killed" if e[2] in killed else "healthy") for e in c.events if e[0] == "frame" and e[9]]
        assert c.errors == [] and c.duplicates == 0, (twice, [e for e in c.events if e[0] != "frame" and (
            len(e) < 3 or e[2] in {t for t, _i, _k in twice})][-20:])
        for topic, j in watch[i].items():
            name = pubs[j].name
            acc = account(c.events, topic, name, reset_announces_gap=True)
            silent += len(acc["silent"])
            for lo, hi in acc["silent"][:2]:
                near = [e[:8] for e in c.events if e[0] == "status" or e[0] in ("resync", "snapshot") and e[2] == topic
                        or e[0] == "frame" and e[2] == topic and lo - 2 <= e[5] <= hi + 1]
                silent_where.append(f"{topic} ({'killed' if topic in killed else 'healthy'} master) seq {lo} -> {hi}, "
                                    f"kill at {kill_at:.3f}, client {clients.index(c)} on replica "
                                    f"{clients.index(c) % 2}; in the stream now: {in_stream(topic, name, lo, hi)}; "
                                    f"{near[-8:]}")
            repeated += acc["repeated"]
            covered += acc["covered"]
            delivered += acc["delivered"]
            dropped[j] = dropped.get(j, 0) + acc["dropped"]
            assert acc["last"] == final.last_seq[topic], (topic, "the client has the publisher's last frame")
            records = [r["seq"] for r in c.topics[topic].records]
            assert len(records) == len(set(records)), f"a record twice on {topic}"
            missing = set(range(min(records), produced[topic])) - set(records)
            missing_total += len(missing)
            if missing:
                assert any(e[0] == "resync" and e[2] == topic for e in c.events), \
                    f"{len(missing)} records of {topic} missing without a resync"
    lost = sum(p.records_lost for p in pubs.values())
    redirects = {k: sum(p.redirects.get(k, 0) for p in pubs.values()) for k in ("moved", "ask", "again")}
    print(f"\ncluster: {PUBLISHERS} publishers x {TOPICS_PER_PUBLISHER} topics in {PROCS} processes, {observations} observations at "
          f"{RATE}/s, {CLIENTS} clients on 2 replicas ({len(watch[0])} topics each); reshard of {RESHARD_SLOTS} slots ({len(moved)} topics) "
          f"took {resharded_at - reshard_at:.1f} s with {len(resyncs_in_reshard)} resync/status events and "
          f"{timing['lost_at_reshard']} frames lost; kill -9 of a master ({len(killed)} topics): promoted "
          f"{timing['promoted'] - kill_at:.2f} s after; frames delivered {delivered}, skipped under a resync "
          f"{covered}, silent gaps {silent}, repeated {repeated}; publishers lost {lost} records (void or "
          f"unreplicated), {missing_total} record deliveries missing over all clients; the publishers followed "
          f"{redirects} redirects; resyncs by reason {dict(Counter(e[3] for c in clients for e in c.events if e[0] == 'resync'))}")
    print("\n".join(silent_where))  # whole, in the captured output: pytest shortens the assertion's message
    if silent:
        for i, d in enumerate(dashboards):  # what each replica's hub saw of the failover
            print(f"replica {i}:", *[line for line in d.log.read_text(errors="replace").splitlines()
                                     if "stream hub" in line or "sync" in line][-20:], sep="\n  ")
    reader_client.close()
    assert silent == 0 and repeated == 0, "\n".join(silent_where[:4])
    # A master's failure is its own topics' alone: the other masters' topics (those the reshard
    # moved among them) lose nothing, are not rewritten, and no client resyncs them.
    healthy = [t for t in topics if t not in killed]
    after_kill = {"resets": 0, "resyncs": 0, "dropped": 0, "missing": 0, "twice": 0}
    for i, c in enumerate(clients):
        for topic in (t for t in healthy if t in watch[i]):
            mine = [e for e in c.events if e[1] >= kill_at and e[0] in ("frame", "resync") and e[2] == topic]
            after_kill["resyncs"] += sum(1 for e in mine if e[0] == "resync")
            after_kill["resets"] += sum(1 for e in mine if e[0] == "frame" and e[6] and not e[9])
            after_kill["dropped"] += sum(e[7] for e in mine if e[0] == "frame" and not e[9])
            records = [r["seq"] for r in c.topics[topic].records]
            after_kill["twice"] += len(records) - len(set(records))
            after_kill["missing"] += len(set(range(min(records), produced[topic])) - set(records))
    # How long the healthy masters' topics paused for the dead one: the longest time between two of
    # their frames arriving at a client, from the kill to the end (both publishers send one batch
    # across masters, so a master down holds the others' frames back until it is replaced).
    pauses = []
    for c in clients:
        arrivals = sorted(e[1] for e in c.events if e[0] == "frame" and e[1] >= kill_at and e[2] in healthy)
        pauses.append(max((b - a for a, b in zip(arrivals, arrivals[1:], strict=False)), default=0.0))
    print(f"topics on the other masters ({len(healthy)}) after the kill, over all clients: {after_kill}; "
          f"their longest pause in delivery {max(pauses):.2f} s (median over clients "
          f"{sorted(pauses)[len(pauses) // 2]:.2f} s); the cluster refused every slot from "
          f"{timing.get('fail', float('nan')) - kill_at:.2f} s to {timing.get('ok', float('nan')) - kill_at:.2f} s "
          f"after the kill")
    assert after_kill == {"resets": 0, "resyncs": 0, "dropped": 0, "missing": 0, "twice": 0}, after_kill
    assert redirects["moved"] > 0, "the reshard moved slots under the publishers (MOVED followed)"
    assert timing["lost_at_reshard"] == 0 and resyncs_in_reshard == [], \
        "moving slots loses nothing and needs no resync"
    for j, p in pubs.items():
        # Every client saw every dropped count: what the failover lost is reported, never silent.
        assert dropped[j] == watchers[j] * (p.records_lost + p.records_dropped), (p.name, dropped[j], p.records_lost,
                                                                             p.records_dropped)
    for d in dashboards:
        assert d.proc is not None and d.proc.poll() is None
        log = d.log.read_text(errors="replace")
        assert "Traceback" not in log, log[-3000:]
    assert all(p.alive for p in pubs.values()), "every publisher connected, drained and its thread running"


class _Subscriber:
    """What a session is to the hub, recording what the hub hands it."""

    def __init__(self) -> None:
        self.entries: list[tuple[bytes, dict[str, Any]]] = []
        self.resyncs: list[str] = []
        self.status: list[bool] = []

    def deliver(self, topic: str, entries: list[tuple[bytes, bytes]]) -> None:
        self.entries.extend((eid, orjson.loads(frame)) for eid, frame in entries)

    def redis_status(self, up: bool, topics: list[str] | None = None) -> None:
        self.status.append(up)

    def force_resync(self, topic: str, reason: Any, replay_from: bytes | None = None) -> None:
        self.resyncs.append(str(reason))

    def topics_changed(self, topics: list[str]) -> None:
        pass

    def records(self) -> list[int]:
        return [r["i"] for _eid, frame in self.entries for r in frame["r"]]


def test_entries_read_after_a_slot_moved_wait_until_its_master_is_known(redis_cluster, publisher_factory):
    """The hub follows MOVED by itself, so entries of a moved slot may come from a promoted replica that
    lacks what the old master had: none is delivered before the masters' identities say whether its
    master is one the hub knew. While they cannot be asked, the hub reads again and delivers nothing."""
    from dashboard.hub import StreamHub

    cluster = redis_cluster
    url = cluster.url
    topic = _topic_in(range(0, 10), "w/moved/t")
    source, target = cluster.slot_owner(0), cluster.slot_owner(8000)
    pub = publisher_factory(url=url, flush_interval=0.02).start()

    def publish(numbers: range) -> None:
        for i in numbers:
            pub.publish(topic, {"i": i})
        wait_until(lambda: pub._inflight is None and not pub._buffer, 10, "the publisher flushed")

    publish(range(5))

    async def main() -> tuple[_Subscriber, int, list[int]]:
        hub = StreamHub(url, pub.keys.prefix)
        sub = _Subscriber()
        try:
            hub.join(sub)
            hub.subscribe(topic, sub)
            hub.track_from(topic, b"0-0")
            await asyncio.to_thread(wait_until, lambda: sub.records() == list(range(5)), 10, "the first entries")
            masters, asked = hub.reader.masters, [0]

            async def cannot_be_asked() -> dict[str, str | None]:
                asked[0] += 1
                raise redis.ConnectionError("the test: no master answers INFO")

            hub.reader.masters = cannot_be_asked  # type: ignore[method-assign]
            await asyncio.to_thread(cluster.reshard, source, target, 10)
            await asyncio.to_thread(publish, range(5, 10))
            await asyncio.to_thread(wait_until, lambda: asked[0] >= 1, 10, "the hub asking for the masters")
            await asyncio.sleep(0.5)  # rounds of the tail (every 20 ms) that must deliver nothing
            held = sub.records()
            hub.reader.masters = masters  # type: ignore[method-assign]
            await asyncio.to_thread(wait_until, lambda: len(sub.records()) >= 10, 10, "the entries after the move")
            return sub, asked[0], held
        finally:
            await hub.close()

    sub, asked, held = run_async(main(), timeout=120)
    assert cluster.slot_owner(key_slot(topic.encode())) == target
    assert held == list(range(5)), "nothing read from the slot's new master before its identity was known"
    assert asked >= 3, "the hub asked again every round"
    assert sub.records() == list(range(10)), "then everything, once, in order"
    assert sub.resyncs == [] and sub.status == [], "a known master (a migration): no resync, no outage"


def test_the_channel_layer_on_a_cluster_delivers_between_replicas_on_different_nodes(redis_cluster):
    from channels_redis.pubsub import RedisPubSubChannelLayer

    url = redis_cluster.url
    assert redis_config.channel_layer_backend(url) == "channels_redis.pubsub.RedisPubSubChannelLayer"
    host = redis_config.channel_layer_host(url, socket_timeout=None)
    assert host["address"] == f"redis://127.0.0.1:{redis_cluster.ports[0]}/0"
    other = {**host, "address": f"redis://127.0.0.1:{redis_cluster.ports[4]}/0"}

    async def main() -> dict[str, Any]:
        # Two dashboard replicas whose layers talk to different nodes: a classic PUBLISH reaches the
        # subscribers of every node of the cluster.
        a = RedisPubSubChannelLayer(hosts=[host], prefix="t:layer:")
        b = RedisPubSubChannelLayer(hosts=[other], prefix="t:layer:")
        channel = await b.new_channel()
        await b.group_add("g", channel)
        await asyncio.sleep(0.3)
        await a.group_send("g", {"type": "probe", "n": 7})
        msg = await asyncio.wait_for(b.receive(channel), 5)
        await a.flush()
        await b.flush()
        return msg

    assert run_async(main(), timeout=20)["n"] == 7


def test_frames_keep_their_bytes_across_a_migration(redis_cluster, publisher_factory):
    """The stream a reader reads after a reshard is the one it read before (ids and bytes), so a
    cursor from before the move resumes exactly."""
    url = redis_cluster.url
    pub = publisher_factory(url=url)
    topic = _topic_in(range(0, 100), "w/m/t")
    for i in range(50):
        pub.publish(topic, {"i": i})
        pub.flush()
    client = redis_config.sync_client(url)
    keys = Keys.for_url(pub.keys.prefix, url)
    before = client.xrange(keys.stream(topic))
    first, second = redis_cluster.slot_owner(0), redis_cluster.slot_owner(8000)
    redis_cluster.reshard(first, second, 100)
    assert redis_cluster.slot_owner(key_slot(topic.encode())) == second
    after = client.xrange(keys.stream(topic))
    assert after == before and len(after) == 50
    reader = StreamReader(client, keys)
    mid = before[24][0]
    rows = reader.tail({topic: mid}, count=100, block=None)
    assert [e[0] for e in rows[0][1]] == [r[0] for r in before[25:]]
    pub.publish(topic, {"i": 50})
    pub.flush()
    assert orjson.loads(client.xrange(keys.stream(topic))[-1][1][b"f"])["r"] == [{"i": 50}]
    assert pub.frames_lost == 0 and pub.redis_errors == 0
    client.close()


def test_a_fresh_async_cluster_client_takes_a_burst_of_first_commands(redis_cluster):
    """Ten websocket sessions opening at once on a new dashboard: redis-py 8.1's asyncio cluster client
    failed some of them before it had initialized (redis_config.AsyncClusterClient)."""

    async def main() -> list[Any]:
        client = redis_config.async_client(redis_cluster.url, socket_timeout=5, socket_connect_timeout=2)
        try:
            return await asyncio.gather(*(client.smembers("t:topics") for _ in range(20)), return_exceptions=True)
        finally:
            await client.aclose()

    assert run_async(main(), timeout=20) == [set()] * 20


def test_the_object_inspector_answers_through_a_cluster(redis_cluster):
    """The inspector's request and reply share a slot (tagged by request id), the queue is elsewhere:
    the worker's answer transaction and the dashboard's ask work across shards."""
    from controllers.informers.store import Store
    from controllers.telemetry.inspector import Inspector, ask
    from controllers.telemetry.last_updates import LastUpdates

    url = redis_cluster.url
    keys = Keys.for_url("ti:", url)
    assert key_slot(keys.inspect_request("ab12").encode()) == key_slot(keys.inspect_reply("ab12").encode())
    store = Store("v1/ConfigMap")
    store.add({"apiVersion": "v1", "kind": "ConfigMap", "data": {"greeting": "hello"},
               "metadata": {"name": "greet", "namespace": "default", "resourceVersion": "5", "uid": "u1"}})
    worker = Inspector(url, prefix="ti:", worker="w1", last_updates=LastUpdates(),
                       stores=lambda: {"v1/ConfigMap": store})
    client = redis_config.sync_client(url)
    try:
        worker.start()
        client.sadd(keys.topics, "w/w1/components")
        wait_until(lambda: client.get(keys.inspect_alive("w1")) is not None, timeout=5, what="the heartbeat")
        answer = ask(client, keys, worker="w1", informer="v1_ConfigMap", key="default/greet")
        assert answer.status == 200, answer.body
        assert orjson.loads(answer.body)["current"]["data"] == {"greeting": "hello"}
    finally:
        worker.stop()
        client.close()


def test_a_publisher_started_before_its_cluster_buffers_and_delivers_everything_once(tmp_path: Path, publisher_factory):
    """Like a plain Redis that is down at start (test_publisher's unreachable-Redis test): no node
    answers, then the nodes answer but form no cluster yet (``cluster_state:fail``), then the cluster
    is created. The publisher neither raises nor stops; it reports itself disconnected, keeps what
    fits its buffer (dropping and counting the oldest beyond it) and, once the cluster is ok,
    delivers every record it kept once, in order, with the state."""
    need_programs("redis-server", "redis-cli", install=INSTALL)
    cluster = LocalRedisCluster(tmp_path / "cluster").reserve()
    try:
        url = cluster.url
        pub = publisher_factory(url=url, buffer_limit=10_000).start()
        small = publisher_factory(url=url, buffer_limit=100).start()
        topics = [_topic_in(band, f"w/late/t{i}") for i, band in enumerate(
            (range(0, 5000), range(6000, 10_000), range(11_000, 16_000)))]
        sent: dict[str, list[int]] = {t: [] for t in topics}
        n = 0

        def publish(count: int) -> None:
            nonlocal n
            for _ in range(count):
                topic = topics[n % len(topics)]
                pub.publish(topic, {"n": n})
                pub.set_state(topic, f"k{n % 7}", {"n": n})
                sent[topic].append(n)
                n += 1

        publish(300)
        for i in range(250):
            small.publish("w/late/small", {"n": i})
        time.sleep(1.0)
        assert pub._thread is not None and pub._thread.is_alive() and not pub.connected
        errors_down = pub.redis_errors
        assert errors_down >= 2, "it retried while no node answered"
        assert pub.records_dropped == 0 and small.records_dropped == 150, "only what did not fit is dropped"

        cluster.launch()  # every node answers, none serves a slot: cluster_state:fail
        publish(300)
        # An attempt against the nodes that answer now (a fixed second was too short at load 16: the
        # nodes starting and the publisher's backoff both take longer there).
        wait_until(lambda: pub.redis_errors > errors_down, timeout=30, what="the publisher trying the cluster again")
        assert pub._thread.is_alive() and not pub.connected

        cluster.create()
        publish(300)
        wait_until(lambda: all(p.connected and not p._buffer and p._inflight is None for p in (pub, small)),
                   timeout=30, what="both publishers connected and drained")
        publish(300)
        wait_until(lambda: not pub._buffer and pub._inflight is None, timeout=10, what="the last records sent")
        client = redis_config.sync_client(url)
        try:
            reader = StreamReader(client, Keys.for_url(pub.keys.prefix, url))
            for topic in topics:
                frames = [orjson.loads(f) for _id, f in reader.read_range(topic, "-", "+", limit=None)]
                assert [r["n"] for f in frames for r in f["r"]] == sent[topic], topic
                assert sum(f.get("dropped", 0) for f in frames) == 0
                state = {k.decode(): orjson.loads(v) for k, v in reader.snapshot(topic)[1].items()}
                assert state == pub.state(topic)
            frames = [orjson.loads(f) for _id, f in reader.read_range("w/late/small", "-", "+", limit=None)]
            assert [r["n"] for f in frames for r in f["r"]] == list(range(150, 250))
            assert sum(f.get("dropped", 0) for f in frames) == 150, "the loss is reported"
        finally:
            client.close()
        assert pub.records_dropped == pub.records_lost == 0 and pub.records_published == 1200
    finally:
        cluster.stop()


def test_the_channel_layer_skips_a_seed_node_that_is_down(redis_cluster):
    """The first seed down at start: the layer uses the next seed that answers, and delivers."""
    from channels_redis.pubsub import RedisPubSubChannelLayer

    dead = redis_cluster.ports[0]
    redis_cluster.kill(dead)
    host = redis_config.channel_layer_host(redis_cluster.url, socket_timeout=None)
    assert host["address"] == f"redis://127.0.0.1:{redis_cluster.ports[1]}/0"

    async def main() -> dict[str, Any]:
        a = RedisPubSubChannelLayer(hosts=[host], prefix="t:layer:")
        channel = await a.new_channel()
        await a.group_add("g", channel)
        await asyncio.sleep(0.3)
        await a.group_send("g", {"type": "probe", "n": 8})
        msg = await asyncio.wait_for(a.receive(channel), 5)
        await a.flush()
        return msg

    assert run_async(main(), timeout=20)["n"] == 8
