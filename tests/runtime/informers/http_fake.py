"""Serves a ``FakeApiServer`` over real HTTP (list, chunked watch, discovery, Status errors), so the
HTTP list/watch client is tested end to end before the simulator lands."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import orjson

from controllers.informers.listwatch import ApiError
from tests.runtime.informers.fake_apiserver import FakeApiServer


def make_handler(server: FakeApiServer, plural: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY, as kube-apiserver (Go) has: otherwise each small body waits ~40 ms for the
        # client's delayed ACK of the headers.
        disable_nagle_algorithm = True

        def log_message(self, format: str, *args: object) -> None:
            return

        def _send(self, code: int, body: object) -> None:
            data = orjson.dumps(body)
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            url = urlparse(self.path)
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            self.server.requests.append((url.path, q))  # type: ignore[attr-defined]
            if url.path == "/api/v1":
                self._send(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                    {"name": plural, "kind": server.kind, "namespaced": True},
                    {"name": f"{plural}/status", "kind": server.kind, "namespaced": True}]})
                return
            if not url.path.endswith(f"/{plural}"):
                self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": url.path})
                return
            try:
                if q.get("watch") in ("1", "true"):
                    self._watch(q)
                else:
                    page = server.list(resource_version=q.get("resourceVersion", ""), limit=int(q.get("limit", 0)),
                                       continue_token=q.get("continue", ""))
                    meta = {"resourceVersion": page.resource_version}
                    if page.continue_token:
                        meta["continue"] = page.continue_token
                    items = [{k: v for k, v in o.items() if k not in ("kind", "apiVersion")} for o in page.items]
                    self._send(200, {"kind": f"{server.kind}List", "apiVersion": "v1", "metadata": meta,
                                     "items": items})
            except ApiError as exc:
                self._send(exc.code, {"kind": "Status", "code": exc.code, "reason": exc.reason,
                                      "message": exc.message})

        def _watch(self, q: dict[str, str]) -> None:
            stream = server.watch(resource_version=q.get("resourceVersion", ""),
                                  timeout_seconds=int(q.get("timeoutSeconds", 0)),
                                  allow_watch_bookmarks=q.get("allowWatchBookmarks") == "true")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for event in stream:
                    line = orjson.dumps({"type": event.type, "object": event.obj}) + b"\n"
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                    self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass
            finally:
                stream.close()
            self.close_connection = True

    return Handler


@contextmanager
def serve(server: FakeApiServer, plural: str = "pods") -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(server, plural))
    httpd.daemon_threads = True
    httpd.requests = []  # type: ignore[attr-defined]
    t = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        server.drop_watches()
        httpd.shutdown()
        httpd.server_close()
