"""Watch fan-out through the loop-wide flush: many concurrent streams over real HTTP each get every
event they are owed, exactly once and in resourceVersion order, including a client that reads
slowly (its stream falls back to its own task and aiohttp's backpressure) and a filtered one."""

from __future__ import annotations

import socket
import threading
import time

import orjson

from controllers.sim import SimCluster
from tests.sim.conftest import make_namespace


def _open_watch(sim: SimCluster, path: str, rcvbuf: int = 0) -> socket.socket:
    sock = socket.socket()
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(30)
    sock.connect((sim.host, sim.port))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: sim\r\n\r\n".encode())
    return sock


def _read_events(sock: socket.socket, want: int, out: list[dict], slow: bool = False) -> None:
    """Decode the chunked stream until ``want`` events arrived (or the socket times out)."""
    buf = b""
    header_done = False
    body = b""
    try:
        if slow:
            time.sleep(1.0)  # stop reading while the writes happen: the server's buffer fills up
        while len(out) < want:
            data = sock.recv(1 << 16)
            if not data:
                return
            buf += data
            if not header_done:
                if b"\r\n\r\n" not in buf:
                    continue
                _, buf = buf.split(b"\r\n\r\n", 1)
                header_done = True
            while True:  # de-chunk
                if b"\r\n" not in buf:
                    break
                size_line, rest = buf.split(b"\r\n", 1)
                size = int(size_line, 16)
                if len(rest) < size + 2:
                    break
                body += rest[:size]
                buf = rest[size + 2:]
            *lines, body = body.split(b"\n")
            out.extend(orjson.loads(line) for line in lines if line)
    except TimeoutError:
        return


def test_many_watchers_each_get_every_event_in_order(sim: SimCluster) -> None:
    ns = make_namespace(sim)
    cm = sim.registry.lookup("", "v1", "configmaps")
    assert cm is not None
    rv = sim.call(lambda: sim.store.rv)
    base = f"/api/v1/namespaces/{ns}/configmaps?watch=true&resourceVersion={rv}"
    n = 300
    plain = [_open_watch(sim, base) for _ in range(8)]
    selected = _open_watch(sim, base + "&labelSelector=parity%3Deven")
    slow = _open_watch(sim, base, rcvbuf=4096)
    time.sleep(0.2)  # let every watch register before the writes start
    results: list[list[dict]] = [[] for _ in range(len(plain) + 2)]
    readers = [threading.Thread(target=_read_events, args=(s, n, results[i])) for i, s in enumerate(plain)]
    readers.append(threading.Thread(target=_read_events, args=(selected, n // 2, results[-2])))
    readers.append(threading.Thread(target=_read_events, args=(slow, n, results[-1], True)))
    for t in readers:
        t.start()
    big = "x" * 20_000  # enough bytes that the slow reader's socket buffer fills up

    def write_batch(start: int, stop: int) -> None:
        for i in range(start, stop):
            sim.store.create(cm, ns, {"metadata": {"name": f"cm-{i:04d}",
                                                   "labels": {"parity": "odd" if i % 2 else "even"}},
                                      "data": {"v": big}})

    # In batches from the loop thread, so many events queue between two flushes, and the slow
    # reader's socket buffer is already full when later flushes come.
    for start in range(0, n, 30):
        sim.call(lambda start=start: write_batch(start, start + 30))
        time.sleep(0.005)
    for t in readers:
        t.join(60)
    for s in [*plain, selected, slow]:
        s.close()
    expected = [f"cm-{i:04d}" for i in range(n)]
    for events in results[:len(plain)] + [results[-1]]:
        assert [e["object"]["metadata"]["name"] for e in events] == expected
        assert {e["type"] for e in events} == {"ADDED"}
        rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in events]
        assert rvs == sorted(rvs)
    assert [e["object"]["metadata"]["name"] for e in results[-2]] == expected[::2]
