"""``Upstream``: the API server the fault proxy forwards to, reached with the kubeconfig's credentials.

The proxy authenticates to the upstream exactly as the official ``kubernetes`` client would with the
same kubeconfig and context, because it asks that client's loader (``kubernetes.config
.load_kube_config``) for an authenticated configuration instead of reading the file itself: the
server URL, the CA (a file or inline data), ``insecure-skip-tls-verify``, ``tls-server-name``, client
certificates, a bearer token or token file, basic auth, and exec plugins (``aws eks get-token``,
``gke-gcloud-auth-plugin``, kind's none) all work as they work for the client. What the loader gives
is turned into an ``ssl.SSLContext`` and an ``Authorization`` header for aiohttp.

A credential may expire (an exec plugin's token says when; the loader re-runs the plugin once it has,
in ``refresh_api_key_hook``). The header is therefore asked for again at most every ``AUTH_TTL``
seconds, on a worker thread -- an exec plugin is a subprocess and must not stall the proxy's event
loop, where every watch is being forwarded. In between, each request reuses the cached header.

Nothing here logs or returns a credential: ``url`` is the server without user info, errors name
the file, the context and the server, never a token, a key or a plugin's output.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import ssl
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from yarl import URL

from controllers.clock import Clock, RealClock
from controllers.informers.kubeconfig import KubeconfigError, kubeconfig_errors

AUTH_TTL = 10.0  # seconds a loaded Authorization header is reused before the loader is asked again
CONNECT_TIMEOUT = 10.0


class UpstreamError(Exception):
    """The upstream cannot be used: a bad kubeconfig or context, no answer, refused credentials.
    The message is for a person and carries no credential."""


@dataclass(frozen=True)
class ApiAnswer:
    """A JSON answer from the upstream (``body`` None if it was not JSON)."""

    status: int
    body: Any


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine: a loopback address, ``localhost``, or
    a name every address of which is loopback."""
    host = host.strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback for info in infos)


class Upstream:
    """One API server and the credentials for it, as a kubeconfig's context describes them."""

    def __init__(self, configuration: k8s_client.Configuration, *, context: str, namespace: str,
                 clock: Clock | None = None) -> None:
        self._configuration = configuration
        self.context = context
        self.namespace = namespace  # the context's default namespace, for the proxy's own kubeconfig
        self.clock: Clock = clock or RealClock()
        parts = urlsplit(configuration.host)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UpstreamError(f"the server of context {context!r} is not an http(s) URL")
        self.host = parts.hostname
        # The server without user info: safe to print, log and publish.
        netloc = parts.netloc.rpartition("@")[2]
        self.url = urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        self.ssl = self._ssl_context() if parts.scheme == "https" else None
        self.server_hostname: str | None = getattr(configuration, "tls_server_name", None) or None
        proxy = configuration.proxy or None
        if proxy and urlsplit(proxy).scheme not in ("http", "https"):
            raise UpstreamError(f"the proxy-url of context {context!r} is not an http(s) proxy; the fault proxy "
                                "cannot go through a socks proxy")
        self.http_proxy: str | None = proxy
        self._auth: str | None = None
        self._auth_at = float("-inf")
        self._auth_lock = asyncio.Lock()
        self.session: aiohttp.ClientSession | None = None

    @classmethod
    def from_kubeconfig(cls, path: str, context: str | None = None, *, clock: Clock | None = None) -> Upstream:
        """The upstream of ``path``'s ``context`` (its current context if None); ``UpstreamError``
        says what is wrong with a file, a context or a credential that cannot be loaded."""
        configuration = k8s_client.Configuration()
        try:
            with kubeconfig_errors(path):
                contexts, active = k8s_config.list_kube_config_contexts(path)
                chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
                if context and chosen is None:
                    names = ", ".join(str(c.get("name")) for c in contexts) or "none"
                    raise KubeconfigError(f"kubeconfig {path} has no context {context!r} (it has: {names})")
                if not chosen:
                    raise KubeconfigError(f"kubeconfig {path} names no current-context: give --context")
                k8s_config.load_kube_config(config_file=path, context=context, client_configuration=configuration,
                                            persist_config=False)
        except KubeconfigError as exc:
            raise UpstreamError(str(exc)) from None
        name = str(chosen.get("name", ""))
        namespace = str((chosen.get("context") or {}).get("namespace") or "default")
        return cls(configuration, context=name, namespace=namespace, clock=clock)

    def _ssl_context(self) -> ssl.SSLContext:
        c = self._configuration
        try:
            context = ssl.create_default_context(cafile=c.ssl_ca_cert or None)
            if c.cert_file:
                context.load_cert_chain(c.cert_file, c.key_file or None)
        except (OSError, ssl.SSLError) as exc:
            # The reason only (e.g. "PEM lib"): never the bytes of a certificate or a key.
            raise UpstreamError(f"the TLS settings of context {self.context!r} cannot be used: "
                                f"{getattr(exc, 'reason', None) or type(exc).__name__}") from None
        if not c.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    # ---- credentials -------------------------------------------------------------------------

    def _load_authorization(self) -> str | None:
        # The loader's hook re-runs an exec plugin whose credential expired, then sets the key again.
        return self._configuration.get_api_key_with_prefix("BearerToken", alias="authorization")

    async def authorization(self) -> str | None:
        """The ``Authorization`` header for the upstream (None: client certificates only, or none)."""
        if self.clock.now() - self._auth_at < AUTH_TTL:
            return self._auth
        async with self._auth_lock:
            if self.clock.now() - self._auth_at >= AUTH_TTL:
                self._auth = await asyncio.to_thread(self._load_authorization)
                self._auth_at = self.clock.now()
        return self._auth

    # ---- the connection ----------------------------------------------------------------------

    async def open(self) -> None:
        """Open the connection pool (on the loop that will forward): no limit on connections, since
        every forwarded watch holds one for as long as it runs."""
        connector = aiohttp.TCPConnector(limit=0, ssl=self.ssl if self.ssl is not None else False)
        self.session = aiohttp.ClientSession(
            connector=connector, auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT))

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None

    async def request(self, method: str, path_qs: str, *, headers: dict[str, str], data: bytes | None
                      ) -> aiohttp.ClientResponse:
        """Send one request as the kubeconfig's user; the caller reads and releases the response.
        ``headers`` are sent as given (no ``Accept-Encoding`` or ``User-Agent`` of aiohttp's own),
        plus the upstream's ``Authorization``."""
        assert self.session is not None, "open() first"
        headers = dict(headers)
        auth = await self.authorization()
        if auth:
            headers["Authorization"] = auth
        # encoded=True: the path and query go as the client encoded them (yarl would re-quote them).
        return await self.session.request(
            method, URL(self.url + path_qs, encoded=True), headers=headers, data=data, allow_redirects=False,
            server_hostname=self.server_hostname, proxy=self.http_proxy,
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type", "Accept"))

    async def api(self, method: str, path: str, body: dict[str, Any] | None = None) -> ApiAnswer:
        """A JSON request of the proxy's own (compacting, killing pods); ``UpstreamError`` without an answer."""
        headers = {"Accept": "application/json", "User-Agent": "ctrlscope-faultproxy"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        try:
            async with await self.request(method, path, headers=headers,
                                          data=orjson.dumps(body) if body is not None else None) as resp:
                raw = await resp.read()
                status = resp.status
        except (aiohttp.ClientError, OSError) as exc:
            raise UpstreamError(f"the upstream API server at {self.url} did not answer: {describe_error(exc)}") from None
        try:
            return ApiAnswer(status, orjson.loads(raw))
        except orjson.JSONDecodeError:
            return ApiAnswer(status, None)

    async def check(self) -> str:
        """Ask the upstream's ``/version`` with the credentials; its gitVersion, or ``UpstreamError``."""
        answer = await self.api("GET", "/version")
        if answer.status == 401:
            raise UpstreamError(f"the upstream API server at {self.url} refused the credentials of context "
                                f"{self.context!r} (401 Unauthorized)")
        if answer.status != 200 or not isinstance(answer.body, dict):
            raise UpstreamError(f"the upstream API server at {self.url} answered /version with {answer.status}: "
                                "is it a Kubernetes API server?")
        return str(answer.body.get("gitVersion", "?"))


def describe_error(exc: BaseException) -> str:
    """A connection failure in a few words (aiohttp's messages name the host and the OS error)."""
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return f"its TLS certificate was not accepted ({exc.certificate_error})"
    if isinstance(exc, aiohttp.ClientConnectorError):
        return exc.strerror or str(exc.os_error) or "connection failed"
    return str(exc) or type(exc).__name__
