"""``FaultProxy``: an API server for clients, a client for the real one, and faults in between.

Clients use the proxy like an API server: its kubeconfig (``write_kubeconfig``) points at
``https://127.0.0.1:PORT`` (a certificate of its own, ``tls``) with a bearer token of the proxy's own,
both made afresh for each run; the token is checked on every request (the upstream's credentials
stay in the proxy: anyone who could reach the proxy without that token could act as the upstream's
user). Every request goes the same way:

1. not the proxy's token: 401, as an API server answers it;
2. ``/_sim/...``: the fault API (``FaultEndpoints``), answered by the proxy, never forwarded;
3. a resource request (``request_info``) is counted by user agent, verb and resource
   (``GET /_sim/requests``);
4. a network stall holds it; a latency rule delays it; an error rule answers it with a ``Status``
   instead of forwarding it; a watch from before the compaction point gets the 410 ERROR event;
5. the rest is forwarded with the upstream's credentials (``Upstream``): method, path and query as
   sent (percent-encoding kept), the client's headers but the hop-by-hop ones and ``Authorization``
   (and a watch's ``Accept-Encoding``: the API server gzips watch streams for clients that accept
   it, and events cannot be told apart in a compressed stream), and the body. Writes therefore go
   exactly where the upstream's user may write, no further.
6. the answer streams back as it arrives -- status, headers, body in chunks, compressed or not, JSON,
   protobuf or a table -- and a watch is a ``ForwardedWatch``, which the faults can end, drop or
   stall. An upstream that fails mid-answer makes the proxy abort the client's connection too.

Connection upgrades (``kubectl exec``, ``attach``, ``port-forward``) are not forwarded: 501.

Two ways to run it, as the simulator: in-process on a background thread (tests: ``start()``,
``stop()``, ``call(fn)`` on its loop), or in the foreground (``run_proxy``, ``manage.py faultproxy``).
It listens on loopback only: it hands its upstream's credentials to whoever holds its token.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import os
import secrets
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml
from aiohttp import web

from controllers.clock import Clock
from controllers.faultproxy.backend import ProxyFaultBackend
from controllers.faultproxy.request_info import request_info
from controllers.faultproxy.tls import make_tls
from controllers.faultproxy.upstream import Upstream, describe_error, is_loopback_host
from controllers.faultproxy.watches import Compaction, ForwardedWatch
from controllers.faults.endpoints import FaultEndpoints
from controllers.faults.injector import FaultHook, FaultInjector
from controllers.faults.request_counts import RequestCounter
from controllers.faults.status import status_body
from controllers.loop_thread import LoopThread

MAX_BODY = 16 * 1024 * 1024  # a request body the proxy reads before forwarding (the API server takes ~3 MiB)
# Request headers that belong to one hop (RFC 9110 7.6.1), or that the proxy sets itself.
_NOT_FORWARDED = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te",
                            "trailer", "transfer-encoding", "upgrade", "host", "authorization", "content-length"})
_NOT_RETURNED = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length"})
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})


class FaultProxy(LoopThread):
    """A fault-injecting reverse proxy in front of one upstream API server."""

    def __init__(self, upstream: Upstream, *, host: str = "127.0.0.1", port: int = 0, seed: int = 0,
                 on_fault: FaultHook | None = None, clock: Clock | None = None) -> None:
        if not is_loopback_host(host):
            raise ValueError(f"the fault proxy listens on loopback only (it acts with its upstream's credentials): "
                             f"{host!r} is not a loopback address")
        self.upstream = upstream
        self.host = host
        self.port = port
        # The clients' credential: the proxy's own, never the upstream's.
        self.token = secrets.token_urlsafe(32)
        self._expected = f"Bearer {self.token}".encode()
        self.tls = make_tls()
        self.watches: set[ForwardedWatch] = set()
        self.compaction = Compaction()
        self.backend = ProxyFaultBackend(upstream, self.watches, self.compaction, clock=clock)
        self.faults = FaultInjector(self.backend, seed=seed, on_fault=on_fault)
        self.requests = RequestCounter(clock=clock)
        self.fault_api = FaultEndpoints(self.faults, requests=self.requests)
        self.upstream_version = ""
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    # ---- serving -----------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if not hmac.compare_digest(request.headers.get("Authorization", "").encode(), self._expected):
            return _status(401, "Unauthorized")
        if request.path == "/_sim" or request.path.startswith("/_sim/"):
            return await self.fault_api.handle(request)
        if request.headers.get("Upgrade"):
            return _status(501, "the fault proxy does not forward connection upgrades (exec, attach, port-forward): "
                                "use the upstream's kubeconfig for those")
        info = request_info(request.method, request.path, request.query)
        if info is not None:
            self.requests.count(request.headers.get("User-Agent", ""), info.verb, info.resource)
        faults = self.faults
        if faults.stall_until:
            await faults.hold()  # a network stall: nothing is answered until it ends
        watch = info is not None and info.verb == "watch"
        if info is not None:
            injected = await faults.before_request(info.verb, info.resource)
            if injected is not None:
                return _json(injected.status(), injected.code)
            if watch and request.query.get("sendInitialEvents") not in _TRUE:
                since = self.compaction.expired(request.query.get("resourceVersion"))
                if since is not None:
                    return await self._expired(request, since)
        return await self._forward(request, watch=watch)

    async def _expired(self, request: web.Request, since: int) -> web.StreamResponse:
        """A watch from before the compaction point: 200 and one ERROR event, as the API server does."""
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                           "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(self.compaction.error_event(since))
        await response.write_eof()
        return response

    async def _forward(self, request: web.Request, *, watch: bool) -> web.StreamResponse:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        if watch:
            # A watch is asked for uncompressed (the client accepts that too): the proxy must see
            # where each event ends, and in a gzip stream it cannot.
            headers = {k: v for k, v in headers.items() if k.lower() != "accept-encoding"}
        body = await request.read() if request.body_exists else None
        try:
            upstream = await self.upstream.request(request.method, request.raw_path, headers=headers, data=body)
        except (aiohttp.ClientError, OSError) as exc:
            return _status(503, f"the fault proxy cannot reach the upstream API server at {self.upstream.url}: "
                                f"{describe_error(exc)}")
        try:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _NOT_RETURNED:
                    response.headers.add(key, value)
            if watch and upstream.status == 200:
                response.enable_chunked_encoding()
                await response.prepare(request)
                forwarded = ForwardedWatch(request, response, upstream, self.faults)
                self.watches.add(forwarded)
                try:
                    await forwarded.run()
                finally:
                    self.watches.discard(forwarded)
                return response
            bodiless = request.method == "HEAD" or upstream.status in (204, 304)
            if upstream.content_length is not None or bodiless:
                if upstream.content_length is not None:
                    response.content_length = upstream.content_length
            else:
                response.enable_chunked_encoding()
            await response.prepare(request)
            try:
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
            except (aiohttp.ClientError, OSError):
                if request.transport is not None:
                    request.transport.abort()  # the upstream broke off: so does the client's answer
                return response
            await response.write_eof()
            return response
        finally:
            upstream.release()

    # ---- lifecycle (async) -------------------------------------------------------------------

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def start_async(self) -> None:
        """Check the upstream (``UpstreamError`` if it cannot be used), then listen."""
        await self.upstream.open()
        try:
            self.upstream_version = await self.upstream.check()
        except BaseException:
            await self.upstream.close()
            raise
        # handler_cancellation: a client that hangs up cancels its handler, which closes the
        # upstream request -- a watch nobody reads must not stay open upstream until its timeout.
        self._runner = web.AppRunner(self.make_app(), access_log=None, handle_signals=False, shutdown_timeout=1.0,
                                     handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True, ssl_context=self.tls.context)
        await site.start()
        sockets: list[socket.socket] = list(getattr(site._server, "sockets", None) or [])
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def stop_async(self) -> None:
        self.backend.close_watches(abort=False)
        await asyncio.sleep(0)
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.upstream.close()

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    # ---- lifecycle (background thread): LoopThread's start/stop/call over start_async/stop_async ----
    thread_name = "faultproxy"
    start_timeout = 60.0

    # ---- kubeconfig --------------------------------------------------------------------------

    def kubeconfig(self) -> dict[str, Any]:
        """A kubeconfig for the proxy: its URL, its CA and its own token, the upstream context's namespace."""
        name = f"{self.upstream.context}-faultproxy"
        return {"apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": name, "cluster": {
                    "server": self.url, "certificate-authority-data": base64.b64encode(self.tls.ca_pem).decode()}}],
                "users": [{"name": name, "user": {"token": self.token}}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": name,
                                                        "namespace": self.upstream.namespace}}],
                "current-context": name, "preferences": {}}

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """Write ``kubeconfig()`` readable by this user only (it holds the token), replacing ``path`` whole."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.unlink(missing_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        os.replace(tmp, target)
        return target


def _json(body: dict[str, Any], status: int) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, content_type="application/json")


def _status(code: int, message: str) -> web.Response:
    return _json(status_body(code, message), code)


def run_proxy(proxy: FaultProxy, *, kubeconfig: str | os.PathLike[str], announce: Callable[[str], None] = print,
              on_start: Callable[[FaultProxy], None] | None = None) -> None:
    """Serve in the foreground until SIGINT/SIGTERM. Once it listens: writes ``kubeconfig``, runs
    ``on_start(proxy)`` on the loop (``manage.py faultproxy`` attaches its fault telemetry there) and
    announces where it is; the kubeconfig is removed on the way out (its token dies with the run)."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await proxy.start_async()
        path = proxy.write_kubeconfig(kubeconfig)
        try:
            if on_start is not None:
                on_start(proxy)
            announce(f"fault proxy listening on {proxy.url} -> {proxy.upstream.url} "
                     f"({proxy.upstream_version}, context {proxy.upstream.context})")
            announce(f"kubeconfig written to {path}; try: KUBECONFIG={path} kubectl get pods")
            await stop.wait()
            announce("stopping the fault proxy")
        finally:
            await proxy.stop_async()
            path.unlink(missing_ok=True)

    asyncio.run(main())
