"""List/watch over the real Kubernetes HTTP API, on raw JSON.

The ``kubernetes`` package does what it is good at -- kubeconfig contexts, in-cluster config, auth
headers, TLS, the urllib3 pool -- through ``Configuration`` and ``ApiClient``; every request is made
with the response left unread (``_preload_content=False`` semantics: the v37 REST client never
preloads) and decoded here with orjson. No model objects are built: DESIGN.md measured them at
18-48x the cost of raw dicts per event.

* LIST: ``GET <collection>?resourceVersion=&limit=&continue=``; items get their ``kind`` and
  ``apiVersion`` filled in (the API server omits them inside lists).
* WATCH: ``GET <collection>?watch=1&resourceVersion=&timeoutSeconds=&allowWatchBookmarks=true``;
  the chunked body is one JSON event per line. A broken connection simply ends the iteration, as
  client-go's StreamWatcher does; a body that cannot be decoded (bad framing, a line that is not a
  JSON event object) ends it with one ``ERROR`` event whose Status says why, as StreamWatcher does
  ("unable to decode an event from the watch stream"); ``close`` shuts the socket down to unblock a
  reader thread.
* Errors: non-2xx responses raise ``ApiError`` from the ``Status`` body; an unreachable server raises
  ``ConnectionRefusedError`` (the reflector backs off and re-watches without relisting), and so does a
  server that did not answer within the read timeout: a timed-out request is never sent again
  (urllib3 would resend a GET three times, so a stalled server held a LIST for 4x its timeout and a
  watch for 4x timeoutSeconds + margin before the reflector noticed).
* A watch's read timeout is ``timeoutSeconds`` plus ``min(WATCH_READ_MARGIN, timeoutSeconds)``: a
  server that stays silent past it (a network stall: no event, no bookmark, no end) is taken as gone
  and the stream ends, as client-go's StreamWatcher ends on a timeout; the reflector watches again.
* Scoped informers: ``ListOptions`` (label and field selectors) go on both the LIST and the WATCH
  query, so the server does the filtering (and turns a label change across the selector into
  DELETED/ADDED events).
* Metadata only (client-go's ``metadata`` client): LIST asks for
  ``application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1`` and WATCH (and GET) for
  ``as=PartialObjectMetadata``, each with ``application/json`` as the fallback client-go also sends.
  A server that ignores ``as=`` answers full objects; those are cut down to their metadata here, so
  the cache holds ``PartialObjectMetadata`` (``kind``, ``apiVersion: meta.k8s.io/v1``, ``metadata``)
  either way, and never a Secret's data.
* Writes pass the client's ``write_guard`` first (``write_guard.py``): a worker against a real
  cluster is read-only unless started with ``--allow-writes``. A refused write is reported as
  ``on_write_refused``, never as a request: it was not sent.
* Resource names come from discovery (``/api/v1``, ``/apis/<group>/<version>``), cached per client.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import orjson
import urllib3
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from controllers.clock import Clock, RealClock
from controllers.informers.kubeconfig import kubeconfig_errors
from controllers.informers.listwatch import ApiError, ListOptions, ListResult, WatchEvent
from controllers.informers.write_guard import ReadOnlyError, WriteGuard
from controllers.observer import Observer, active_observer, written_rv
from controllers.schema import WriteRefusal

Obj = dict[str, Any]

CONNECT_TIMEOUT = 10.0
LIST_TIMEOUT = 60.0
WATCH_READ_MARGIN = 30.0
USER_AGENT = "ctrlscope"

META_V1 = "meta.k8s.io/v1"
PARTIAL_OBJECT_METADATA = "PartialObjectMetadata"
PARTIAL_OBJECT_METADATA_LIST = "PartialObjectMetadataList"
ACCEPT_PARTIAL_LIST = f"application/json;as={PARTIAL_OBJECT_METADATA_LIST};g=meta.k8s.io;v=v1,application/json"
ACCEPT_PARTIAL = f"application/json;as={PARTIAL_OBJECT_METADATA};g=meta.k8s.io;v=v1,application/json"


def as_partial_object_metadata(obj: Obj) -> Obj:
    """``obj`` as ``PartialObjectMetadata``: its metadata only (what a server that understood
    ``as=PartialObjectMetadata`` would have sent; client-go ``meta.AsPartialObjectMetadata``)."""
    if obj.get("kind") == PARTIAL_OBJECT_METADATA and obj.get("apiVersion") == META_V1:
        return obj
    meta = obj.get("metadata")
    return {"kind": PARTIAL_OBJECT_METADATA, "apiVersion": META_V1,
            "metadata": meta if isinstance(meta, dict) else {}}


class NoTimeoutRetry(urllib3.Retry):
    """urllib3's retries, except that a read timeout is final: the server got the request and did not
    answer in time, so sending it again only multiplies the deadline (and may repeat a write)."""

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, _stacktrace=None):
        if isinstance(error, urllib3.exceptions.ReadTimeoutError):
            raise urllib3.exceptions.MaxRetryError(_pool, url, error) from error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _configured(configuration: k8s_client.Configuration) -> k8s_client.Configuration:
    """``configuration`` with the retry rule every ``KubernetesClient`` uses (``NoTimeoutRetry``)."""
    if configuration.retries is None:
        configuration.retries = NoTimeoutRetry(3)
    return configuration


def _api_base(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


class KubernetesClient:
    """Raw-JSON access to one cluster through a ``kubernetes.client.ApiClient``."""

    def __init__(self, api_client: k8s_client.ApiClient, *, context: str = "", clock: Clock | None = None) -> None:
        self.api_client = api_client
        self.context = context  # the kubeconfig context it was made from ("in-cluster", or "" if neither)
        self.clock: Clock = clock or RealClock()
        # Shows up as the field manager and in audit logs.
        api_client.user_agent = USER_AGENT
        self._discovery: dict[str, list[Obj]] = {}
        self._lock = threading.Lock()
        self._obs: Observer | None = None
        # None: every request is sent (tests, the simulator's own tools); a worker sets one
        # (write_guard.py): against a real cluster it refuses writes unless told otherwise.
        self.write_guard: WriteGuard | None = None

    @classmethod
    def from_kubeconfig(cls, config_file: str | None = None, context: str | None = None) -> KubernetesClient:
        """From a kubeconfig (default ``$KUBECONFIG`` / ``~/.kube/config``), optionally a named context;
        ``KubeconfigError`` (a ValueError) says what is wrong with a file that cannot be used."""
        configuration = k8s_client.Configuration()
        # A malformed file is a KubeconfigError naming the problem, not the loader's AttributeError
        # or TypeError on the odd value (found by tests/fuzz/test_fuzz_kubeconfig.py).
        with kubeconfig_errors(config_file):
            k8s_config.load_kube_config(config_file=config_file, context=context, client_configuration=configuration)
            if context is None:
                _, active = k8s_config.list_kube_config_contexts(config_file)
                context = active.get("name", "") if active else ""
        return cls(k8s_client.ApiClient(_configured(configuration)), context=context)

    @classmethod
    def in_cluster(cls) -> KubernetesClient:
        """From the pod's service account."""
        configuration = k8s_client.Configuration()
        k8s_config.load_incluster_config(client_configuration=configuration)
        return cls(k8s_client.ApiClient(_configured(configuration)), context="in-cluster")

    @property
    def server(self) -> str:
        """The API server's URL without any user info (safe to show: never a credential)."""
        url = urlsplit(self.api_client.configuration.host)
        netloc = url.netloc.rpartition("@")[2]
        return urlunsplit((url.scheme, netloc, url.path.rstrip("/"), "", ""))

    def set_observer(self, observer: Observer | None) -> None:
        """Report every request to ``observer`` (``on_request``); the Manager passes its own."""
        self._obs = active_observer(observer)

    @classmethod
    def for_host(cls, host: str, *, token: str | None = None, verify_ssl: bool = True) -> KubernetesClient:
        """For an API server URL, e.g. the ctrlscope simulator's ``http://127.0.0.1:PORT``."""
        configuration = k8s_client.Configuration(host=host)
        configuration.verify_ssl = verify_ssl
        if token:
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
        return cls(k8s_client.ApiClient(_configured(configuration)))

    # -- requests ------------------------------------------------------------------------------
    def send(self, method: str, path: str, *, query: list[tuple[str, str]] | None = None,
             body: Obj | None = None, timeout: float | tuple[float, float] = LIST_TIMEOUT,
             headers: dict[str, str] | None = None) -> urllib3.BaseHTTPResponse:
        """Make one request and return the unread urllib3 response (the caller reads and releases it)."""
        headers = {"Accept": "application/json", **(headers or {})}
        if body is not None:
            headers.setdefault("Content-Type", "application/json")  # a PATCH says which kind it is
        request_method, url, headers, _, _ = self.api_client.param_serialize(
            method, path, query_params=query or [], header_params=headers, auth_settings=["BearerToken"])
        obs = self._obs
        if self.write_guard is not None:
            try:
                self.write_guard.check(method, path)
            except ReadOnlyError:
                if obs is not None:  # never sent: not a request, so not a failed one either
                    obs.on_write_refused(method=method, path=path, reason=WriteRefusal.READ_ONLY)
                raise
        start = self.clock.now() if obs is not None else 0.0
        if obs is not None and method != "GET":
            obs.on_request_start(method=method, path=path)
        try:
            response = self.api_client.call_api(request_method, url, header_params=headers, body=body,
                                                _request_timeout=timeout).response
        except (urllib3.exceptions.MaxRetryError, urllib3.exceptions.NewConnectionError,
                urllib3.exceptions.ProtocolError, OSError) as exc:
            if obs is not None:
                obs.on_request(method=method, path=path, code=0, duration=self.clock.now() - start)
            raise ConnectionRefusedError(f"{method} {path}: {exc}") from exc
        if obs is not None:
            duration = self.clock.now() - start
            # Only observed writes pay for the rv: urllib3 keeps the body it reads here (``data``
            # caches it), so the caller still reads it; the decode is one more orjson pass.
            rv = written_rv(response.data) if method != "GET" and 200 <= response.status < 300 else None
            obs.on_request(method=method, path=path, code=response.status, duration=duration, rv=rv)
        return response

    def get_json(self, path: str, query: list[tuple[str, str]] | None = None,
                 timeout: float = LIST_TIMEOUT, headers: dict[str, str] | None = None) -> Obj:
        """GET and decode a JSON body; raise ``ApiError`` for a non-2xx status."""
        return self._secrets_seen(_read_json(self.send("GET", path, query=query, timeout=(CONNECT_TIMEOUT, timeout),
                                                       headers=headers)))

    def send_json(self, method: str, path: str, body: Obj | list[Any] | None = None,
                  timeout: float = LIST_TIMEOUT, headers: dict[str, str] | None = None,
                  query: list[tuple[str, str]] | None = None) -> Obj:
        """``method`` (POST/PUT/DELETE...) with a JSON body (a list for a JSON patch); decode the
        answer; ``ApiError`` for non-2xx."""
        return self._secrets_seen(_read_json(self.send(method, path, query=query, body=body,  # type: ignore[arg-type]
                                                       timeout=(CONNECT_TIMEOUT, timeout), headers=headers)))

    def resource_path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None,
                      subresource: str | None = None) -> str:
        """The URL path of ``kind``'s collection (in ``namespace``, or across all namespaces), of the
        object ``name`` in it, or of its ``subresource`` (``status``, ``scale``), from discovery."""
        entry = self.resource(api_version, kind)
        path = _api_base(api_version)
        if entry.get("namespaced", True):
            if namespace:
                path += f"/namespaces/{quote(namespace, safe='')}"
            elif name is not None:
                raise ValueError(f"{api_version} {kind} is namespaced: give the object's namespace")
        path += f"/{entry['name']}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
            if subresource:
                path += f"/{subresource}"
        return path

    def _secrets_seen(self, decoded: Obj) -> Obj:
        """Tell the observer about every Secret in an answer (``Observer.on_secret``)."""
        obs = self._obs
        if obs is not None and isinstance(decoded, dict) and decoded.get("kind") in ("Secret", "SecretList"):
            obs.on_secret(decoded)
        return decoded

    def resource(self, api_version: str, kind: str) -> Obj:
        """The discovery entry (``name``, ``namespaced``, ...) for ``kind`` in ``api_version``."""
        with self._lock:
            resources = self._discovery.get(api_version)
        if resources is None:
            resources = self.get_json(_api_base(api_version)).get("resources") or []
            with self._lock:
                self._discovery[api_version] = resources
        for entry in resources:
            if entry.get("kind") == kind and "/" not in entry.get("name", ""):
                return entry
        raise LookupError(f"{api_version} {kind} is not served by this cluster")

    def list_watch(self, api_version: str, kind: str, namespace: str | None = None, *,
                   options: ListOptions | None = None, metadata_only: bool = False) -> KubernetesListWatch:
        """The list/watch for one resource (all namespaces unless ``namespace``), narrowed by
        ``options`` (selectors) and, with ``metadata_only``, answering ``PartialObjectMetadata``."""
        entry = self.resource(api_version, kind)
        base = _api_base(api_version)
        if namespace and entry.get("namespaced", True):
            path = f"{base}/namespaces/{quote(namespace, safe='')}/{entry['name']}"
        else:
            path = f"{base}/{entry['name']}"
        return KubernetesListWatch(self, path, api_version=api_version, kind=kind, namespace=namespace,
                                   options=options, metadata_only=metadata_only)


def _read_json(response: urllib3.BaseHTTPResponse) -> Obj:
    try:
        body = response.data
    finally:
        response.release_conn()
    if response.status >= 300:
        raise _api_error(response.status, body)
    return orjson.loads(body)


def _api_error(status: int, body: bytes) -> ApiError:
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("kind") == "Status":
        decoded.setdefault("code", status)
        return ApiError.from_status(decoded)
    return ApiError(status, "", body[:200].decode("utf-8", "replace"))


def watch_read_timeout(timeout_seconds: float) -> float:
    """How long a watch may stay silent before the client takes the connection for dead: the server
    ends it after ``timeout_seconds``, so silence well past that is a stall (see the module doc)."""
    return timeout_seconds + min(WATCH_READ_MARGIN, timeout_seconds)


class KubernetesListWatch:
    """``ListWatch`` for one collection URL, optionally narrowed by ``options`` and metadata-only."""

    def __init__(self, client: KubernetesClient, path: str, *, api_version: str, kind: str,
                 namespace: str | None, options: ListOptions | None = None, metadata_only: bool = False) -> None:
        self.client = client
        self.path = path
        self.api_version = api_version
        self.kind = kind
        self.namespace = namespace
        self.options = options or ListOptions()
        self.metadata_only = metadata_only
        self._selectors = self.options.query()

    def describe(self) -> str:
        return f"{self.api_version} {self.kind}" + (f" in {self.namespace}" if self.namespace else "")

    def list(self, *, resource_version: str, limit: int = 0, continue_token: str = "") -> ListResult:
        query: list[tuple[str, str]] = list(self._selectors)
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if limit:
            query.append(("limit", str(limit)))
        if continue_token:
            query.append(("continue", continue_token))
        if self.metadata_only:
            body = self.client.get_json(self.path, query, headers={"Accept": ACCEPT_PARTIAL_LIST})
            items = [as_partial_object_metadata(item) for item in body.get("items") or []
                     if isinstance(item, dict)]
        else:
            body = self.client.get_json(self.path, query)
            items = body.get("items") or []
            for item in items:
                item.setdefault("kind", self.kind)
                item.setdefault("apiVersion", self.api_version)
        meta = body.get("metadata") or {}
        return ListResult(items, meta.get("resourceVersion", ""), meta.get("continue", ""))

    def watch(self, *, resource_version: str, timeout_seconds: int, allow_watch_bookmarks: bool = True,
              send_initial_events: bool = False) -> HttpWatchStream:
        query = [("watch", "1"), ("timeoutSeconds", str(timeout_seconds)), *self._selectors]
        if resource_version:
            query.append(("resourceVersion", resource_version))
        if allow_watch_bookmarks:
            query.append(("allowWatchBookmarks", "true"))
        if send_initial_events:
            query += [("sendInitialEvents", "true"), ("resourceVersionMatch", "NotOlderThan")]
        response = self.client.send("GET", self.path, query=query,
                                    timeout=(CONNECT_TIMEOUT, watch_read_timeout(timeout_seconds)),
                                    headers={"Accept": ACCEPT_PARTIAL} if self.metadata_only else None)
        if response.status >= 300:
            _read_json(response)
        return HttpWatchStream(response, metadata_only=self.metadata_only)


_HEX = re.compile(rb"[0-9a-fA-F]{1,16}")


class ChunkedDecoder:
    """Incremental HTTP/1.1 chunked-transfer decoder: ``feed_parts(raw)`` returns the payload bytes
    the raw bytes completed, one ``bytes`` per chunk (which the watch decodes without splitting
    when it is one whole event); ``done`` once the terminating zero-size chunk arrived.

    Why not urllib3's ``read1``: kube-apiserver flushes after every watch event when its queue is
    empty, so a watch is typically one HTTP chunk per event, and urllib3 (on top of http.client)
    spends several Python-level calls per chunk. Decoding the framing here, over whatever the
    socket returned in one ``read1``, costs a ``find`` and a slice per chunk.
    """

    __slots__ = ("_buf", "_left", "done")

    def __init__(self) -> None:
        self._buf = b""
        # Payload bytes still expected in the current chunk; -1: a chunk-size line comes next;
        # -2: the CRLF that ends a chunk's data comes next.
        self._left = -1
        self.done = False

    def feed_parts(self, raw: bytes) -> list[bytes]:
        """The payload bytes ``raw`` completed, one ``bytes`` per (piece of a) chunk, in order:
        with one chunk per watch event, each part is one whole JSON line, ready to decode."""
        if self.done:
            return []
        buf = self._buf + raw if self._buf else raw
        out: list[bytes] = []
        pos = 0
        end = len(buf)
        left = self._left
        while pos < end:
            if left > 0:
                take = min(left, end - pos)
                out.append(buf[pos:pos + take])
                pos += take
                left -= take
                if left == 0:
                    left = -2
            elif left == -2:
                if end - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise ValueError("chunked encoding: missing CRLF after chunk data")
                pos += 2
                left = -1
            else:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    if end - pos > 1024:
                        raise ValueError("chunked encoding: chunk-size line too long")
                    break
                size_field = buf[pos:eol].split(b";", 1)[0].strip()
                # Hex digits only: int(x, 16) alone also takes "-5", "0x1f", "1_0" and " +3", and a
                # negative size would be read as one of the decoder's states.
                if not _HEX.fullmatch(size_field):
                    raise ValueError(f"chunked encoding: chunk size {size_field[:20]!r} is not a hex number")
                left = int(size_field, 16)
                pos = eol + 2
                if left == 0:
                    # Trailers, if any, are ignored: the watch is over.
                    self.done = True
                    pos = end
                    break
        self._left = left
        self._buf = buf[pos:] if pos < end else b""
        return out


def _raw_body_reader(response: urllib3.BaseHTTPResponse) -> Callable[[], list[bytes]] | None:
    """A ``read()`` returning the next body bytes straight off the socket, as the chunks' payloads
    (``[]`` at the end), or ``None`` when the response is not plain chunked (compressed,
    length-delimited...): then the generic urllib3 path is used."""
    headers = response.headers
    if "chunked" not in (headers.get("transfer-encoding") or "").lower():
        return None
    if (headers.get("content-encoding") or "identity").lower() != "identity":
        return None
    fp = getattr(getattr(response, "_fp", None), "fp", None)
    read1 = getattr(fp, "read1", None)
    if read1 is None:
        return None
    decoder = ChunkedDecoder()

    def read() -> list[bytes]:
        while not decoder.done:
            raw = read1(RAW_READ_SIZE)
            if not raw:
                return []
            parts = decoder.feed_parts(raw)
            if parts:
                return parts
        return []

    return read


RAW_READ_SIZE = 1 << 18
"""Bytes asked of the socket per read: under a backlog one read carries ~60 Pod events."""


def decode_error_status(exc: ValueError) -> Obj:
    """The Status of the ERROR event that ends an undecodable watch stream (client-go's wording)."""
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500, "reason": "InternalError",
            "message": f"unable to decode an event from the watch stream: {detail}"}


class HttpWatchStream:
    """Iterates the JSON lines of a watch response as ``WatchEvent``s."""

    def __init__(self, response: urllib3.BaseHTTPResponse, *, metadata_only: bool = False) -> None:
        self.response = response
        # A metadata-only watch from a server that ignored ``as=PartialObjectMetadata``: cut each
        # object (not an ERROR's Status) down to its metadata.
        self.metadata_only = metadata_only
        self._lock = threading.Lock()
        self._closed = False
        self._reading = False
        self._released = False

    def __iter__(self) -> Iterator[WatchEvent]:
        with self._lock:
            if self._closed:
                return
            self._reading = True
        pending = b""
        loads = orjson.loads
        new_event = tuple.__new__
        generic = self.response.read1
        read = _raw_body_reader(self.response) or (lambda: [generic(65536)])
        partial = self.metadata_only
        try:
            while not self._closed:
                parts = read()
                if not parts or not parts[0]:
                    break
                for part in parts:
                    if not pending and part.endswith(b"\n") and part.find(b"\n") == len(part) - 1:
                        # One HTTP chunk carrying one whole event, as kube-apiserver sends them:
                        # decode it as is (JSON allows the trailing newline), no split, no copy.
                        lines = (part,)
                    else:
                        # Split, then complete the first line with the carried-over partial one:
                        # cheaper than copying the whole (64 KB) part into ``pending + part`` first.
                        lines = part.split(b"\n")
                        if pending:
                            lines[0] = pending + lines[0]
                        pending = lines.pop()
                    for line in lines:
                        # isspace() stops at the first non-blank byte; strip() would copy a ~4 KB line.
                        if line and not line.isspace():
                            event = loads(line)
                            # An event is an object with a string type and an object: anything else
                            # (found by tests/fuzz: `[1]`, `{"type": []}`) would raise far from here,
                            # in the reflector, as an AttributeError or TypeError.
                            if type(event) is not dict:
                                raise ValueError("a line of the watch stream is not a JSON object")
                            etype, obj = event.get("type", ""), event.get("object") or {}
                            if type(etype) is not str or type(obj) is not dict:
                                raise ValueError("a watch event's type is not a string or its object not an object")
                            if partial and etype != "ERROR" and obj.get("kind") != PARTIAL_OBJECT_METADATA:
                                obj = as_partial_object_metadata(obj)
                            # == WatchEvent(type, obj), without NamedTuple's Python-level __new__.
                            yield new_event(WatchEvent, (etype, obj))
        except (urllib3.exceptions.HTTPError, OSError):
            # A broken or shut-down connection ends the watch; the reflector decides what follows.
            return
        except ValueError as exc:
            # Bad framing or an undecodable event: say so with an ERROR event, as client-go's
            # StreamWatcher does, so that the reflector relists and reports why (instead of
            # reopening the watch on a server that sends garbage, silently, again and again).
            if not self._closed:
                yield WatchEvent("ERROR", decode_error_status(exc))
        finally:
            with self._lock:
                self._closed = True
                self._reading = False
            self._release()

    def close(self) -> None:
        """End the stream; safe from another thread and more than once. A reader blocked in
        ``__iter__`` is woken by shutting the socket down and releases the connection itself."""
        with self._lock:
            self._closed = True
            reading = self._reading
        if reading:
            try:
                self.response.shutdown()
            except (ValueError, RuntimeError, OSError):
                pass
        else:
            self._release()

    def _release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        # Close, not just release: a half-read watch connection must never be reused.
        self.response.close()
        self.response.release_conn()
