"""Fuzz the watch stream's decoding: the chunked-transfer decoder and ``HttpWatchStream`` over a real
socket.

- Any payload, chunked any way and delivered in any pieces, comes out byte for byte; any bytes at
  all are either decoded or refused with a ``ValueError`` that says what is wrong with the framing.
- Whatever a server writes as a watch body (good events, JSON that is not an event, garbage, bad
  framing, a body cut short), iterating the stream ends without a hang and yields only
  ``WatchEvent(str, dict)``; an undecodable body ends with one ERROR event whose Status, turned into
  an ``ApiError`` as the reflector does, says why.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from controllers.informers.http_client import ChunkedDecoder, KubernetesClient
from controllers.informers.listwatch import ApiError
from tests.fuzz.budget import assert_clear, budget, record

TARGET = "watch_decoder"


def chunked(payloads: list[bytes], extension: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in payloads) + b"0\r\n\r\n"


def pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


@budget(200)
@given(payloads=st.lists(st.binary(min_size=1, max_size=40), max_size=8), cuts=st.lists(st.integers(0, 10**6),
       max_size=10), extension=st.sampled_from([b"", b";a=b", b" ; x"]), trailer=st.binary(max_size=10))
def test_any_chunking_in_any_pieces_decodes_to_the_payload(payloads: list[bytes], cuts: list[int],
                                                           extension: bytes, trailer: bytes) -> None:
    wire = chunked(payloads, extension)
    decoder = ChunkedDecoder()
    out = b"".join(part for piece in pieces(wire + trailer, cuts) for part in decoder.feed_parts(piece))
    record(TARGET, None)
    assert out == b"".join(payloads)
    assert decoder.done


def mutated(wire: bytes, at: int, byte: int) -> bytes:
    i = at % (len(wire) or 1)
    return wire[:i] + bytes([byte]) + wire[i + 1:]


@budget(200)
@given(data=st.one_of(
    st.binary(max_size=60),
    st.builds(mutated, st.lists(st.binary(min_size=1, max_size=20), max_size=4).map(chunked),
              st.integers(0, 200), st.integers(0, 255)),
    st.builds(lambda size, rest: size + b"\r\n" + rest,
              st.sampled_from([b"-5", b"-2", b"-1", b"0x10", b"1_0", b" +3", b"\xff", b"ffffffffffffffffff"]),
              st.binary(max_size=20))),
    cuts=st.lists(st.integers(0, 10**6), max_size=6))
@example(data=b"-2\r\nabc\r\n", cuts=[])  # a negative size was taken as the decoder's "CRLF next" state
@example(data=b"0x3\r\nabc\r\n", cuts=[])
def test_any_bytes_decode_or_are_a_framing_error(data: bytes, cuts: list[int]) -> None:
    decoder = ChunkedDecoder()
    out = []
    try:
        for piece in pieces(data, cuts):
            out.extend(decoder.feed_parts(piece))
    except ValueError as exc:
        record(TARGET, str(exc))
        assert str(exc).startswith("chunked encoding: "), exc
        assert_clear(str(exc), context=data)
        return
    record(TARGET, None)
    assert sum(map(len, out)) <= len(data)


# -- HttpWatchStream over a real socket ----------------------------------------------------------
class WatchServer:
    """Answers discovery for ``v1 Pod`` and every other request with the current ``body`` (already
    framed), written in small pieces so that reads end mid-chunk."""

    DISCOVERY = b'{"kind":"APIResourceList","resources":[{"name":"pods","kind":"Pod","namespaced":true}]}'

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.body = b""
        self.headers = b""
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            try:
                while (request := conn.recv(65536)).startswith(b"GET /api/v1 "):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                                 b"\r\n%s" % (len(self.DISCOVERY), self.DISCOVERY))
                if request:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + self.headers + b"\r\n")
                    for off in range(0, len(self.body), 23):
                        conn.sendall(self.body[off:off + 23])
            except OSError:
                pass


@pytest.fixture(scope="module")
def server() -> Iterator[WatchServer]:
    s = WatchServer()
    yield s
    s.listener.close()


def event_line(type_: str, name: str) -> bytes:
    return orjson.dumps({"type": type_, "object": {"metadata": {"name": name, "resourceVersion": "7"}}})


JSON_SCALAR = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4)
ODD_JSON = st.recursive(JSON_SCALAR, lambda inner: st.lists(inner, max_size=2) | st.dictionaries(
    st.sampled_from(["type", "object", "code", "message", "reason", "metadata"]), inner, max_size=3), max_leaves=6)
LINE = st.one_of(
    st.builds(event_line, st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "", "Weird"]),
              st.sampled_from(["a", "b"])),
    ODD_JSON.map(orjson.dumps),
    st.binary(max_size=12),
    st.just(b""), st.just(b"   "))


@budget(100)
@given(lines=st.lists(LINE, max_size=6), chunking=st.sampled_from(["per-line", "one", "split", "length"]),
       cut=st.integers(0, 40), corrupt=st.none() | st.tuples(st.integers(0, 500), st.integers(0, 255)))
@example(lines=[b"[1]"], chunking="per-line", cut=0, corrupt=None)  # AttributeError: 'list' has no .get
@example(lines=[b'{"type":[]}'], chunking="per-line", cut=0, corrupt=None)  # TypeError: unhashable list
@example(lines=[b'{"type":"ERROR","object":{"code":"x"}}'], chunking="per-line", cut=0, corrupt=None)
def test_any_watch_body_ends_cleanly_with_only_events(server: WatchServer, lines: list[bytes], chunking: str,
                                                      cut: int, corrupt: tuple[int, int] | None) -> None:
    body = b"".join(line + b"\n" for line in lines)
    if chunking == "length":
        server.headers = b"Content-Length: %d\r\nConnection: close\r\n" % len(body)
        wire = body
    else:
        server.headers = b"Transfer-Encoding: chunked\r\n"
        if chunking == "per-line":
            parts = [line + b"\n" for line in lines]
        elif chunking == "one":
            parts = [body] if body else []
        else:
            parts = [body[i:i + 5] for i in range(0, len(body), 5)]
        wire = chunked(parts)
        if cut:
            wire = wire[:max(0, len(wire) - cut)]  # the connection ends mid-body
    if corrupt is not None and wire:
        wire = mutated(wire, *corrupt)
    server.body = wire
    lw = KubernetesClient.for_host(server.url).list_watch("v1", "Pod")
    stream = lw.watch(resource_version="1", timeout_seconds=5)
    events = list(stream)  # ends: the server closes the connection after the body
    errors = [e for e in events if e.type == "ERROR"]
    for event in events:
        assert type(event.type) is str and type(event.obj) is dict, event
    decode_errors = [e for e in errors if str(e.obj.get("message", "")).startswith("unable to decode")]
    if decode_errors:
        assert events[-1] is decode_errors[0], "an undecodable body ends the stream with its ERROR event"
        err = ApiError.from_status(decode_errors[0].obj)
        assert err.code == 500 and err.reason == "InternalError"
        assert_clear(err.message, context=wire)
        record(TARGET, err.message)
    else:
        record(TARGET, None)
    for event in errors:  # what the reflector does with every ERROR event: never a crash
        err = ApiError.from_status(event.obj)
        assert type(err.code) is int and isinstance(err.reason, str) and isinstance(err.message, str)
