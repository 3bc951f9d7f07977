"""Forwarded watches: the streams the fault proxy can end, drop, stall and expire.

A watch is one long HTTP response: the upstream writes an event whenever something changes, and the
proxy copies it to the client. Copying it whole events at a time is what lets the proxy break it the
way a real API server or network does, and no other way:

* **framing** -- a JSON watch is one event per line; a protobuf watch
  (``application/vnd.kubernetes.protobuf;stream=watch``) is frames with a 4-byte big-endian length.
  ``ForwardedWatch`` holds back an event cut across two reads until it is complete, so ending a
  watch never leaves half an event on the wire (a stream of another type is copied as it comes);
* **end** -- the proxy stops copying, closes the upstream response and ends the client's chunked
  response properly: the client sees a watch the server closed (as at its ``timeoutSeconds``) and
  re-watches from the last resourceVersion it saw;
* **drop** -- the client's connection is aborted: a broken stream (``ProtocolError`` in Python,
  ``unexpected EOF`` in Go);
* **stall** -- before each write the copy waits out a network stall (``FaultInjector.hold``); the
  upstream keeps the events until the stall ends (TCP holds them), nothing is closed;
* **expire** -- ``Compaction``: after ``POST /_sim/history/compact`` a watch from a resourceVersion
  older than the compaction point is not forwarded at all; the proxy answers it as the API server
  answers a compacted one, with 200 and one ``ERROR`` event carrying a 410 Expired ``Status``, and
  the client relists.

If the upstream breaks a stream (it restarted, the network failed), the client's connection is
aborted too: the proxy never turns a failure into a clean end, which would hide it.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable

import aiohttp
import orjson
from aiohttp import web

from controllers.faults.injector import FaultInjector
from controllers.faults.status import status_body

PROTOBUF_WATCH = "application/vnd.kubernetes.protobuf;stream=watch"


class CloseReason(enum.Enum):
    """Why the proxy stops a watch it forwards (None on a watch: it runs, or the upstream ended it)."""

    END = "end"  # cleanly: the client re-watches
    DROP = "drop"  # abort the connection


def json_lines(buf: bytes) -> int:
    """Bytes of ``buf`` that are whole JSON watch events (each ends with a newline)."""
    return buf.rfind(b"\n") + 1


def length_prefixed(buf: bytes) -> int:
    """Bytes of ``buf`` that are whole protobuf watch frames (4-byte big-endian length, then that many)."""
    i, n = 0, len(buf)
    while i + 4 <= n:
        end = i + 4 + int.from_bytes(buf[i:i + 4], "big")
        if end > n:
            break
        i = end
    return i


def framing_for(content_type: str) -> Callable[[bytes], int] | None:
    """How the watch stream of ``content_type`` is cut into events (None: copy as it comes)."""
    media = content_type.replace(" ", "").lower()
    if media.startswith("application/json"):
        return json_lines
    if media.startswith("application/vnd.kubernetes.protobuf"):
        return length_prefixed
    return None


class ForwardedWatch:
    """One watch being copied from the upstream to a client, whole events at a time."""

    def __init__(self, request: web.Request, response: web.StreamResponse, upstream: aiohttp.ClientResponse,
                 faults: FaultInjector) -> None:
        self.request = request
        self.response = response
        self.upstream = upstream
        self.faults = faults
        # A compressed stream (the proxy asks for none) is copied as it comes: no event boundaries in it.
        encoded = upstream.headers.get("Content-Encoding", "identity").lower() != "identity"
        self.framing = None if encoded else framing_for(upstream.headers.get("Content-Type", ""))
        self.reason: CloseReason | None = None
        self._pump: asyncio.Task[None] | None = None

    async def run(self) -> None:
        """Copy until the upstream ends the watch, the client leaves or ``close`` is called."""
        self._pump = asyncio.ensure_future(self._copy())
        try:
            # wait, not await: a pump cancelled by close() must not look like this handler's cancellation.
            await asyncio.wait({self._pump})
        finally:
            if not self._pump.done():  # the client went away: the handler itself was cancelled
                self._pump.cancel()
            self.upstream.close()
        failed = not self._pump.cancelled() and self._pump.exception() is not None
        if self.reason is CloseReason.DROP or (failed and self.reason is None):
            self._abort()
            return
        try:
            await self.response.write_eof()
        except ConnectionResetError:
            pass  # the client left first

    def close(self, reason: CloseReason) -> None:
        """End (cleanly) or drop (abort) this watch; the forwarding handler finishes the job."""
        if self.reason is not None:
            return
        self.reason = reason
        if reason is CloseReason.DROP:
            self._abort()
        if self._pump is not None:
            self._pump.cancel()

    def _abort(self) -> None:
        if self.request.transport is not None:
            self.request.transport.abort()

    async def _copy(self) -> None:
        faults, write, framing = self.faults, self.response.write, self.framing
        held = b""
        async for chunk in self.upstream.content.iter_any():
            if faults.stall_until:
                await faults.hold()  # a network stall: the stream stays open and silent
            if framing is None:
                await write(chunk)
                continue
            held += chunk
            whole = framing(held)
            if whole:
                await write(held[:whole])
                held = held[whole:]


class Compaction:
    """The fault proxy's compaction point: a watch from an older resourceVersion gets 410 Expired.

    The upstream's history is not the proxy's to forget, so the proxy forgets on its behalf: it
    notes the upstream's newest resourceVersion when asked to compact (``mark``) and from then on
    answers every watch that would resume from before it, exactly as the simulator's store and
    etcd do after a compaction (``since < compacted``). resourceVersions are opaque to clients, but
    every API server in use (etcd's revisions, the simulator) issues increasing integers, which is
    what the comparison needs; a value that is not one is forwarded untouched.
    """

    def __init__(self) -> None:
        self.rv: int | None = None

    def mark(self, rv: int) -> None:
        self.rv = rv if self.rv is None else max(self.rv, rv)

    def expired(self, resource_version: str | None) -> int | None:
        """The requested RV as an int if a watch from it must get 410, else None."""
        if self.rv is None or not resource_version or resource_version == "0":
            return None
        try:
            since = int(resource_version)
        except ValueError:
            return None
        return since if since < self.rv else None

    def error_event(self, since: int) -> bytes:
        """The one event of an expired watch, as the API server writes it (JSON, which every client
        accepts beside protobuf and decodes by the response's Content-Type)."""
        status = status_body(410, f"too old resource version: {since} ({self.rv})")
        return orjson.dumps({"type": "ERROR", "object": status}) + b"\n"
