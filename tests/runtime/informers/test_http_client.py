"""The HTTP list/watch client (kubernetes ApiClient + orjson) against a real HTTP server."""

from __future__ import annotations

import socket

import pytest

from controllers.informers import ApiError, Backoff, SharedInformer
from controllers.informers.http_client import ChunkedDecoder, KubernetesClient, KubernetesListWatch, watch_read_timeout
from controllers.observer import written_rv
from tests.runtime.informers.fake_apiserver import FakeApiServer
from tests.runtime.informers.http_fake import serve


def test_discovery_finds_the_plural_and_builds_the_namespaced_path() -> None:
    server = FakeApiServer()
    with serve(server) as url:
        client = KubernetesClient.for_host(url)
        assert client.list_watch("v1", "Pod").path == "/api/v1/pods"
        assert client.list_watch("v1", "Pod", "team-a").path == "/api/v1/namespaces/team-a/pods"
        with pytest.raises(LookupError):
            client.list_watch("v1", "Nope")


def test_list_pages_decode_to_raw_dicts_with_kind_filled_in() -> None:
    server = FakeApiServer()
    for i in range(3):
        server.create(f"p{i}")
    with serve(server) as url:
        lw = KubernetesClient.for_host(url).list_watch("v1", "Pod")
        page = lw.list(resource_version="0", limit=2)
        assert [o["metadata"]["name"] for o in page.items] == ["p0", "p1"]
        assert page.items[0]["kind"] == "Pod" and page.items[0]["apiVersion"] == "v1"
        assert page.resource_version == "103" and page.continue_token
        rest = lw.list(resource_version="", limit=2, continue_token=page.continue_token)
        assert [o["metadata"]["name"] for o in rest.items] == ["p2"] and rest.continue_token == ""


def test_status_errors_become_api_errors() -> None:
    server = FakeApiServer()
    server.list_errors.append(ApiError(410, "Expired", "too old resource version"))
    with serve(server) as url:
        lw = KubernetesClient.for_host(url).list_watch("v1", "Pod")
        with pytest.raises(ApiError) as err:
            lw.list(resource_version="5")
    assert err.value.is_expired and err.value.message == "too old resource version"


def test_unreachable_server_is_connection_refused() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    client = KubernetesClient.for_host(f"http://127.0.0.1:{port}")
    client.api_client.rest_client.pool_manager.connection_pool_kw["retries"] = False
    with pytest.raises(ConnectionRefusedError):
        client.get_json("/api/v1")


def test_watch_streams_events_and_close_unblocks_the_reader(eventually) -> None:
    server = FakeApiServer()
    with serve(server) as url:
        lw = KubernetesClient.for_host(url).list_watch("v1", "Pod")
        stream = lw.watch(resource_version="100", timeout_seconds=300)
        server.create("a")
        events = iter(stream)
        first = next(events)
        assert first.type == "ADDED" and first.obj["metadata"]["name"] == "a"
        stream.close()
        assert list(events) == []


def test_informer_over_http_syncs_watches_and_tombstones_after_410(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("gone")
    with serve(server) as url:
        informer = SharedInformer(KubernetesClient.for_host(url).list_watch("v1", "Pod"), clock=clock)
        informer.reflector.backoff = Backoff(clock=clock, rand=lambda: 0.0)
        deleted: list[object] = []
        informer.add_event_handler(on_delete=deleted.append)
        informer.start()
        try:
            assert informer.wait_for_sync(5)
            eventually(lambda: server.watch_calls)
            server.create("kept")
            eventually(lambda: informer.last_sync_resource_version == "102")
            server.drop_watches()
            server.delete("gone")
            server.compact()
            assert clock.wait_for_waiters()
            clock.step(0.8)
            eventually(lambda: deleted)
            assert deleted[0].key == "default/gone"
            assert informer.store.list_keys() == ["default/kept"]
        finally:
            informer.stop()


def _chunked(*payloads: bytes, extension: bytes = b"") -> bytes:
    return b"".join(b"%x%s\r\n%s\r\n" % (len(p), extension, p) for p in payloads) + b"0\r\n\r\n"


def test_chunked_decoder_reassembles_payload_split_at_every_byte() -> None:
    wire = _chunked(b'{"type":"ADDED"}\n', b"x" * 300, b"\n", extension=b";name=value")
    expected = b'{"type":"ADDED"}\n' + b"x" * 300 + b"\n"
    for cut in range(len(wire) + 1):
        decoder = ChunkedDecoder()
        got = b"".join(decoder.feed_parts(wire[:cut]) + decoder.feed_parts(wire[cut:]))
        assert got == expected, cut
        assert decoder.done


def test_chunked_decoder_byte_by_byte_and_nothing_after_the_last_chunk() -> None:
    decoder = ChunkedDecoder()
    out = b"".join(p for b in _chunked(b"abc", b"defg") + b"garbage after end" for p in decoder.feed_parts(bytes([b])))
    assert out == b"abcdefg" and decoder.done


@pytest.mark.parametrize("wire", [b"zz\r\nabc\r\n", b"3\r\nabcXY", b"1" * 2000])
def test_chunked_decoder_rejects_malformed_framing(wire: bytes) -> None:
    with pytest.raises(ValueError):
        ChunkedDecoder().feed_parts(wire)


def test_watch_over_one_chunk_per_event_yields_every_event() -> None:
    server = FakeApiServer()
    with serve(server) as url:
        lw = KubernetesClient.for_host(url).list_watch("v1", "Pod")
        stream = lw.watch(resource_version="100", timeout_seconds=300)
        for i in range(50):
            server.create(f"p{i}")
        names = []
        for event in stream:
            names.append(event.obj["metadata"]["name"])
            if len(names) == 50:
                break
        stream.close()
    assert names == [f"p{i}" for i in range(50)]


def test_every_request_is_reported_with_its_status_and_the_server_url_has_no_credentials(observer) -> None:
    assert KubernetesClient.for_host("https://admin:secret@k8s.example:6443/").server == "https://k8s.example:6443"
    server = FakeApiServer()
    with serve(server) as url:
        client = KubernetesClient.for_host(url)
        assert client.server == url
        client.set_observer(observer)
        client.get_json("/api/v1")
        with pytest.raises(ApiError):
            client.get_json("/api/v1/nothing-here")
    with pytest.raises(ConnectionRefusedError):
        client.api_client.rest_client.pool_manager.connection_pool_kw["retries"] = False
        client.get_json("/api/v1")
    calls = observer.of("on_request")
    assert [(c["method"], c["path"], c["code"]) for c in calls] == [
        ("GET", "/api/v1", 200), ("GET", "/api/v1/nothing-here", 404), ("GET", "/api/v1", 0)]
    assert all(c["duration"] >= 0 for c in calls)


def _serve_watch_once(wire: bytes) -> tuple[str, socket.socket]:
    """A one-shot HTTP server on a real socket: discovery, then ``wire`` as a chunked watch body
    (written in pieces of 7 bytes, so reads end mid-chunk too)."""
    import threading
    import time

    listener = socket.create_server(("127.0.0.1", 0))

    def serve_forever() -> None:
        for _ in range(2):
            conn, _ = listener.accept()
            with conn:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                request = conn.recv(65536)
                if request.startswith(b"GET /api/v1 "):
                    body = (b'{"kind":"APIResourceList","groupVersion":"v1",'
                            b'"resources":[{"name":"pods","kind":"Pod","namespaced":true}]}')
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                                 b"Connection: close\r\n\r\n%s" % (len(body), body))
                    continue
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Transfer-Encoding: chunked\r\n\r\n")
                for off in range(0, len(wire), 7):
                    conn.sendall(wire[off:off + 7])
                    if off % 700 == 0:
                        time.sleep(0.001)

    threading.Thread(target=serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", listener


def test_watch_decodes_every_framing_a_server_may_choose() -> None:
    """One chunk per event (kube-apiserver's way), several events per chunk, an event split across
    chunks, blank keep-alive lines and CRLF line ends all yield the same events, in order."""
    def line(i: int) -> bytes:
        return b'{"type":"ADDED","object":{"metadata":{"name":"p%d","namespace":"ns"}}}' % i

    payloads = [line(0) + b"\n", line(1) + b"\n" + line(2) + b"\n", line(3)[:10], line(3)[10:30],
                line(3)[30:] + b"\n", b"\n", line(4) + b"\r\n", line(5) + b"\n" + line(6)[:5],
                line(6)[5:] + b"\n", line(7) + b"\n"]
    url, listener = _serve_watch_once(_chunked(*payloads))
    try:
        lw = KubernetesClient.for_host(url).list_watch("v1", "Pod")
        stream = lw.watch(resource_version="1", timeout_seconds=30)
        names = [event.obj["metadata"]["name"] for event in stream]
    finally:
        listener.close()
    assert names == [f"p{i}" for i in range(8)]


def _silent_server() -> tuple[socket.socket, list[socket.socket]]:
    """A server that accepts connections, reads nothing and never answers (a stalled apiserver)."""
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    accepted: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                accepted.append(srv.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    return srv, accepted


def test_a_request_the_server_does_not_answer_fails_once_after_its_timeout_and_is_never_resent() -> None:
    """Regression: urllib3 resent a timed-out GET three times, so a stalled server held a LIST for 4x
    its timeout and opening a watch for 4x (timeoutSeconds + margin) -- 42 minutes at the defaults."""
    import time

    srv, accepted = _silent_server()
    try:
        client = KubernetesClient.for_host(f"http://127.0.0.1:{srv.getsockname()[1]}")
        started = time.monotonic()
        with pytest.raises(ConnectionRefusedError, match="Read timed out"):
            client.get_json("/api/v1/pods", timeout=0.5)
        assert time.monotonic() - started < 1.5 and len(accepted) == 1
        lw = KubernetesListWatch(client, "/api/v1/pods", api_version="v1", kind="Pod", namespace=None)
        started = time.monotonic()
        with pytest.raises(ConnectionRefusedError):
            lw.watch(resource_version="1", timeout_seconds=1)
        assert time.monotonic() - started < 3.0 and len(accepted) == 2  # 1 s + 1 s margin, one attempt
    finally:
        srv.close()
        for conn in accepted:
            conn.close()


def test_a_watch_silent_past_its_timeout_ends_instead_of_hanging() -> None:
    """A watch whose server stops sending (no event, bookmark or end) ends after timeoutSeconds plus
    min(WATCH_READ_MARGIN, timeoutSeconds), as client-go's StreamWatcher ends on a timeout."""
    import threading
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    held: list[socket.socket] = []

    def serve_one() -> None:
        conn = srv.accept()[0]
        held.append(conn)
        conn.recv(65536)
        line = b'{"type":"ADDED","object":{"metadata":{"name":"a","resourceVersion":"5"}}}\n'
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                     + b"%x\r\n%s\r\n" % (len(line), line))  # then silence, the connection left open

    threading.Thread(target=serve_one, daemon=True).start()
    try:
        client = KubernetesClient.for_host(f"http://127.0.0.1:{srv.getsockname()[1]}")
        lw = KubernetesListWatch(client, "/api/v1/pods", api_version="v1", kind="Pod", namespace=None)
        started = time.monotonic()
        events = [e.type for e in lw.watch(resource_version="1", timeout_seconds=1)]
        assert events == ["ADDED"] and 1.5 < time.monotonic() - started < 3.5
        assert watch_read_timeout(1) == 2 and watch_read_timeout(300) == 330
    finally:
        srv.close()
        for conn in held:
            conn.close()


def test_a_writes_answer_gives_the_observer_its_resource_version(sim, observer) -> None:
    """protocol 1.7: ``on_request``'s ``rv`` is the resourceVersion of the object a 2xx write was
    answered with (how a controller's own write is recognised when its watch event comes back);
    reads, refused writes and answers that are not an object have none."""
    client = KubernetesClient.for_host(sim.url)
    client.set_observer(observer)
    path = "/api/v1/namespaces/default/configmaps"
    created = client.send_json("POST", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv"}})
    client.get_json(f"{path}/rv")
    patched = client.send_json("PATCH", f"{path}/rv", {"data": {"a": "b"}},
                               headers={"Content-Type": "application/merge-patch+json"})
    with pytest.raises(ApiError):
        client.send_json("POST", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "rv"}})
    deleted = client.send_json("DELETE", f"{path}/rv")
    calls = [(c["method"], c["code"], c["rv"]) for c in observer.of("on_request")]
    deleted_rv = None if deleted.get("kind") == "Status" else deleted["metadata"]["resourceVersion"]
    assert calls == [("POST", 201, created["metadata"]["resourceVersion"]), ("GET", 200, None),
                     ("PATCH", 200, patched["metadata"]["resourceVersion"]), ("POST", 409, None),
                     ("DELETE", 200, deleted_rv)]
    assert created["metadata"]["resourceVersion"] != patched["metadata"]["resourceVersion"]


def test_written_rv_reads_only_an_objects_resource_version() -> None:
    assert written_rv(b'{"kind":"ConfigMap","metadata":{"resourceVersion":"42"}}') == "42"
    assert written_rv(b'{"kind":"Status","metadata":{"resourceVersion":"42"},"status":"Success"}') is None
    for body in (b"", None, b"ok", b"[1]", b'{"metadata":{"resourceVersion":7}}', b'{"metadata":null}'):
        assert written_rv(body) is None, body
