"""A frame whose reply was lost in a failover is never delivered twice — the Python and the Go publisher.

The interleaving that delivered 28 records twice in a loaded CI run (issue 32), forced instead of
waited for: the publisher sends a frame; the master applies it and a reader (the dashboard) reads
it; the master dies before the publisher reads the reply. The publisher then reconnects to another
server (the promoted replica), which lacks the frame. A loopback proxy between the publisher and the
servers holds that window open: it passes the frame (marked by a record) to the master and throws its
reply away, then "fails over" by closing the connection and sending new ones to the replica, which the
test promotes (``REPLICAOF NO ONE``) after cutting it off from the master. Two real redis-servers.

The cases (protocol/redis-layout.md, "Failover and exactly once"):

- ``same-server``: the connection drops and the publisher reconnects to the same master. The frame's
  fate is known (the master's pubseq says whether it applied it): retried unchanged, applied once,
  nothing dropped.
- ``replica-in-sync``: the replica has every frame the publisher had confirmed, but not the one in
  flight. Retrying it on the replica would write it there again after the reader saw it on the old
  master; so it is void and its records are reported as ``dropped``.
- ``replica-behind``: the replica also lacks frames the old master confirmed: the topic is rewritten with
  a reset frame and every record the new master lacks — confirmed or in flight — is reported as
  ``dropped``. Resending the frame in flight's records on the reset frame delivered them twice.

In every case a reader that read the old master up to the lost reply, then reads what the new master
has after its position (what the dashboard replays on ``redis-reconnected``), gets no record twice, and
every record it lacks is counted in a ``dropped``.
"""

from __future__ import annotations

import collections
import json
import os
import socket
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import redis

from controllers import golang
from controllers.process import stop_process
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.redisboot import RedisHandle, free_port, start_private
from controllers.telemetry.streams import Keys, parse_id
from tests.conftest import wait_until

TOPIC = "t"
MARK = "reply-lost"  # in a record of the frame whose reply the proxy throws away
KEYS = 5  # state keys k0..k4, each set by every fifth record


class FailoverProxy:
    """Loopback TCP proxy in front of "the master". The reply to the first request that carries
    ``marker`` never reaches the client (the request reaches the server, which applies it);
    ``fail_over(port)`` closes every connection and sends new ones to ``port``."""

    def __init__(self, upstream: int, marker: bytes) -> None:
        self.upstream = upstream
        self.marker = marker
        self.reply_lost = threading.Event()
        self._lock = threading.Lock()  # guards upstream, _socks and the one-shot reply_lost
        self._socks: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, name="failover-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                upstream = self.upstream
            try:
                server = socket.create_connection(("127.0.0.1", upstream), timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            swallow = threading.Event()
            with self._lock:
                self._socks += [client, server]
            threading.Thread(target=self._requests, args=(client, server, swallow), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, swallow), daemon=True).start()

    def _requests(self, src: socket.socket, dst: socket.socket, swallow: threading.Event) -> None:
        tail = b""
        while data := _recv(src):
            window = tail + data  # the marker may straddle two reads
            with self._lock:
                if not self.reply_lost.is_set() and self.marker in window:
                    swallow.set()  # before the request goes on: its reply cannot overtake this
                    self.reply_lost.set()
            tail = window[-len(self.marker):]
            try:
                dst.sendall(data)
            except OSError:
                break
        _close(src, dst)

    def _replies(self, src: socket.socket, dst: socket.socket, swallow: threading.Event) -> None:
        while data := _recv(src):
            if swallow.is_set():
                continue
            try:
                dst.sendall(data)
            except OSError:
                break
        _close(src, dst)

    def fail_over(self, port: int) -> None:
        with self._lock:
            self.upstream = port
            socks, self._socks = self._socks, []
        _close(*socks)

    def close(self) -> None:
        self._listener.close()
        self.fail_over(self.upstream)


def _recv(s: socket.socket) -> bytes:
    try:
        return s.recv(65536)
    except OSError:
        return b""


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()


# -- the two publishers, driven alike ---------------------------------------------------------

class PythonPublisher:
    """controllers/telemetry/publisher.py in this process, flushing on its own thread."""

    def __init__(self, url: str, prefix: str) -> None:
        self.pub = RedisPublisher(url, prefix=prefix, flush_interval=0.01).start()
        self.name = self.pub.name

    def publish(self, records: list[dict[str, Any]], state: dict[str, Any]) -> None:
        for r in records:
            self.pub.publish(TOPIC, r)
        for k, v in state.items():
            self.pub.set_state(TOPIC, k, v)

    def stats(self) -> dict[str, Any]:
        p = self.pub
        return {"connected": p.connected, "frames_published": p.frames_published, "frames_lost": p.frames_lost,
                "records_lost": p.records_lost, "records_dropped": p.records_dropped}

    def stop(self) -> None:
        self.pub.stop()


class GoPublisher:
    """go/ctrlscope's Publisher in go/cmd/publish-driver, one JSON command a line on its stdin."""

    def __init__(self, binary: Path, url: str, prefix: str, log: Path) -> None:
        env = {**os.environ, "REDIS_URL": url, "CTRLSCOPE_PREFIX": prefix}
        self._log = open(log, "wb")  # noqa: SIM115 - the child's stderr, closed in stop()
        self.proc = subprocess.Popen([str(binary)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._log)
        self.name = self._call({"op": "stats"})["name"]

    def _call(self, cmd: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(orjson.dumps(cmd) + b"\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"publish-driver exited ({self.proc.poll()}); see {self._log.name}"
        return json.loads(line)

    def publish(self, records: list[dict[str, Any]], state: dict[str, Any]) -> None:
        self._call({"op": "publish", "topic": TOPIC, "records": records, "state": state})

    def stats(self) -> dict[str, Any]:
        return self._call({"op": "stats"})

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                self._call({"op": "stop"})
            except (AssertionError, OSError):
                pass
        stop_process(self.proc, grace=5)
        self._log.close()


@pytest.fixture(scope="session")
def publish_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if golang.find_go() is None:
        if os.environ.get("CI"):
            pytest.fail("no Go toolchain in CI: make test should have provided one (scripts/go-toolchain)")
        pytest.skip("no Go toolchain (CTRLSCOPE_GO, go on PATH or /usr/local/go/bin/go)")
    try:
        return golang.build(tmp_path_factory.mktemp("go-bin"), programs=("publish-driver",))["publish-driver"]
    except golang.GoUnavailable as exc:
        pytest.fail(str(exc))


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[dict[str, RedisHandle]]:
    handles = {"old": start_private(tmp_path / "old"), "new": start_private(tmp_path / "new")}
    try:
        yield handles
    finally:
        for h in handles.values():
            h.stop()


def _port(h: RedisHandle) -> int:
    return int(h.url.rsplit(":", 1)[1].split("/")[0])


def _frames(client: redis.Redis, keys: Keys, src: str) -> list[tuple[bytes, dict[str, Any]]]:
    rows = client.xrange(keys.stream(TOPIC), min="-", max="+")
    return [(eid, f) for eid, f in ((eid, orjson.loads(fields[b"f"])) for eid, fields in rows) if f["src"] == src]


@pytest.mark.parametrize("impl", ["python", "go"])
@pytest.mark.parametrize("failover", ["same-server", "replica-in-sync", "replica-behind"])
def test_a_frame_whose_reply_was_lost_is_never_delivered_twice(failover, impl, servers, request, tmp_path):
    old, new = (redis.Redis.from_url(servers[n].url, socket_timeout=5) for n in ("old", "new"))
    new.replicaof("127.0.0.1", _port(servers["old"]))
    wait_until(lambda: new.info("replication").get("master_link_status") == "up", timeout=15,
               what="the replica in sync with the master")
    prefix = f"ctrlscope-failover-{uuid.uuid4().hex[:8]}:"
    keys = Keys(prefix)
    proxy = FailoverProxy(_port(servers["old"]), MARK.encode())
    pub: PythonPublisher | GoPublisher
    if impl == "go":
        pub = GoPublisher(request.getfixturevalue("publish_driver"), proxy.url, prefix, tmp_path / "go.log")
    else:
        pub = PythonPublisher(proxy.url, prefix)
    published: list[int] = []
    state: dict[str, Any] = {}

    def publish(n: int, *, mark: bool = False) -> None:
        records, changes = [], {}
        for i in range(len(published), len(published) + n):
            records.append({"k": "queue", "seq": i, **({"mark": MARK} if mark and not records else {})})
            changes[f"k{i % KEYS}"] = {"seq": i}
            published.append(i)
        state.update(changes)
        pub.publish(records, changes)

    def applied(client: redis.Redis) -> int:
        return int(client.hget(keys.pubseq(TOPIC), pub.name) or 0)

    def holds_all(client: redis.Redis) -> bool:
        """``client`` has every record published so far, and the publisher's state in its hash."""
        last = max((r["seq"] for _, f in _frames(client, keys, pub.name) for r in f["r"]), default=-1)
        return last == published[-1] and _snapshot(client, keys) == state

    try:
        publish(20)
        wait_until(lambda: holds_all(old) and pub.stats()["frames_published"] == applied(old), timeout=10,
                   what="the first frames confirmed")
        if failover != "same-server":
            wait_until(lambda: applied(new) == applied(old), timeout=10, what="the replica has them")
            new.replicaof("127.0.0.1", free_port())  # cut off: it keeps its data and stays a replica
            wait_until(lambda: new.info("replication").get("master_link_status") == "down", timeout=5,
                       what="the replica cut off")
        if failover == "replica-behind":
            publish(20)  # confirmed by the old master, never replicated
            wait_until(lambda: holds_all(old) and pub.stats()["frames_published"] == applied(old), timeout=10,
                       what="frames the replica lacks, confirmed")
        replica_had = applied(new)

        publish(3, mark=True)  # the frame whose reply is lost
        assert proxy.reply_lost.wait(10), "the marked frame never went out"
        wait_until(lambda: any(r.get("mark") == MARK for _, f in _frames(old, keys, pub.name) for r in f["r"]),
                   timeout=10, what="the old master applying the marked frame")
        # A reader reads the old master now: it has the marked frame; the publisher has no reply.
        seen = _frames(old, keys, pub.name)
        position = seen[-1][0]
        assert pub.stats()["frames_published"] < applied(old), "the reply to the marked frame was lost"
        unknown = [f for _, f in seen if f["seq"] > replica_had]  # frames the new master will lack

        if failover == "same-server":
            proxy.fail_over(_port(servers["old"]))
            current = old
        else:
            new.replicaof("no", "one")  # promoted
            proxy.fail_over(_port(servers["new"]))
            servers["old"].stop()  # killed: nothing more reaches anyone from it
            current = new
        publish(10)
        wait_until(lambda: holds_all(current) and pub.stats()["connected"], timeout=15,
                   what="every record and the state on the new master")
        stats = pub.stats()
    finally:
        pub.stop()
        proxy.close()

    after = [f for eid, f in _frames(current, keys, pub.name) if parse_id(eid) > parse_id(position)]
    got = [r["seq"] for _, f in seen for r in f["r"]] + [r["seq"] for f in after for r in f["r"]]
    twice = sorted(seq for seq, n in collections.Counter(got).items() if n > 1)
    dropped = sum(f.get("dropped", 0) for f in after)
    lost = sum(len(f["r"]) for f in unknown) if failover != "same-server" else 0
    print(f"\n{impl}, {failover}: the reader got {len(got)} of {len(published)} records, {len(twice)} twice; "
          f"the new master lacked {lost} records the old one had applied; reported dropped {dropped}; {stats}")
    assert twice == [], f"records delivered twice: {twice}"
    assert len(set(published) - set(got)) <= dropped, "every record the reader lacks is counted as dropped"
    assert stats["records_lost"] == lost and dropped == lost + stats["records_dropped"], \
        "the records the new master lacks, confirmed or in flight, are exactly those reported dropped"
    if failover == "same-server":
        assert sorted(got) == list(range(len(published))) and dropped == 0, "exactly once, nothing dropped"


def _snapshot(client: redis.Redis, keys: Keys) -> dict[str, Any]:
    return {k.decode(): orjson.loads(v) for k, v in client.hgetall(keys.snapshot(TOPIC)).items() if k != b"__id__"}
