"""Watch events and the per-connection watcher that buffers them.

The store appends every change to a bounded history of ``WatchEvent`` and offers it, synchronously,
to each open ``Watcher`` on that resource. A watcher applies its namespace and selectors the way the
API server's watch cache does: an object that stops matching a label selector is delivered as
``DELETED`` and one that starts matching as ``ADDED``, so a client's cache stays consistent with its
filtered view. The HTTP handler drains the watcher's buffer and writes one JSON line per event.

Encoding happens once per event, not once per watcher: ``WatchEvent.line()`` caches the bytes, and
a watcher that can use the event unchanged (same type, same apiVersion, no Table conversion) writes
those cached bytes. That keeps fan-out to 50 watchers close to the cost of one.
"""

from __future__ import annotations

import asyncio
from collections import deque
from enum import Enum
from typing import Any

import orjson

from controllers.schema import WatchEventType
from controllers.sim import protoenc
from controllers.sim.selectors import Matcher


class CloseReason(Enum):
    """Why a watcher was closed: what the HTTP handler does with the connection afterwards."""

    CLEAN = "clean"  # end the stream normally (write EOF): the client simply watches again
    ABORT = "abort"  # drop the TCP connection without EOF (fault injection: a network failure)
    OVERFLOW = "overflow"  # a client too slow to keep up, which the API server also disconnects


class WatchEvent:
    """One committed change: the object after the change and, for updates, the object before."""

    __slots__ = ("rv", "type", "key", "obj", "old", "namespace", "_line", "_frame")

    def __init__(self, rv: int, type: WatchEventType, key: tuple[str, str], obj: dict[str, Any],
                 old: dict[str, Any] | None) -> None:
        self.rv = rv
        self.type = type
        self.key = key
        self.obj = obj
        self.old = old
        self.namespace: str = obj["metadata"].get("namespace", "")
        self._line: bytes | None = None
        self._frame: bytes | None = None

    def line(self) -> bytes:
        """The event as a watch stream line, encoded once and shared by all watchers."""
        if self._line is None:
            self._line = orjson.dumps({"type": self.type, "object": self.obj}) + b"\n"
        return self._line

    def frame(self) -> bytes:
        """The event as a protobuf watch frame, likewise encoded once (``protoenc``)."""
        if self._frame is None:
            self._frame = protoenc.watch_frame(self.type, self.obj, protoenc.CACHE)
        return self._frame


class Watcher:
    """An open watch: a filter plus a buffer of events waiting to be written to the client.

    Invariant: ``pending`` only holds events that pass the filter, in resourceVersion order, each
    with the type this watcher must report (which may differ from the event's own type when a label
    selector starts or stops matching). An entry is either the ready-made stream line (``bytes``,
    when ``raw_lines`` is set and the event goes out unchanged — the hot path) or a
    ``(type, event, object)`` tuple the HTTP handler still has to encode. ``closed`` is set once;
    after that nothing is appended.
    """

    def __init__(self, *, key: tuple[str, str], namespace: str | None, label_match: Matcher,
                 field_match: Matcher, filtered: bool, max_backlog: int) -> None:
        self.key = key
        self.namespace = namespace
        self.label_match = label_match
        self.field_match = field_match
        # Without selectors every event passes unchanged; skip matching on the hot path.
        self.filtered = filtered
        self.max_backlog = max_backlog
        self.pending: deque[bytes | tuple[WatchEventType, WatchEvent | None, dict[str, Any]]] = deque()
        # Set by the HTTP layer when events can be sent as the store encoded them (plain JSON in
        # the storage version); then fan-out is one deque append per watcher.
        self.raw_lines = False
        self.wake = asyncio.Event()
        self.closed = False
        # Set with ``closed``.
        self.close_reason: CloseReason | None = None
        # The resourceVersion the watch starts at (its list's, with initial events): a bookmark is
        # only sent once the server has moved past it, as the API server's cacheWatcher does.
        self.start_rv = 0
        # Whether the watch began with the current state as ADDED events (RV 0 or unset, or
        # sendInitialEvents=true): those end with the initial-events-end bookmark, when asked for.
        self.initial_events = False
        # Set by the HTTP layer: events go out as protobuf frames, not JSON lines.
        self.protobuf = False

    def matches(self, obj: dict[str, Any]) -> bool:
        return self.label_match(obj) and self.field_match(obj)

    def push(self, type: WatchEventType, obj: dict[str, Any], event: WatchEvent | None = None) -> None:
        if self.closed:
            return
        self.pending.append((type, event, obj))
        if len(self.pending) > self.max_backlog:
            self.close(CloseReason.OVERFLOW)
            return
        self.wake.set()

    def offer(self, ev: WatchEvent) -> None:
        """Queue ``ev`` if this watcher should see it, translated for selector transitions."""
        if self.namespace and ev.namespace != self.namespace:
            return
        if not self.filtered:
            if self.raw_lines and not self.closed:
                self.pending.append(ev.line())
                if len(self.pending) > self.max_backlog:
                    self.close(CloseReason.OVERFLOW)
                else:
                    self.wake.set()
            else:
                self.push(ev.type, ev.obj, ev)
            return
        now = self.matches(ev.obj)
        if ev.type is WatchEventType.MODIFIED and ev.old is not None:
            before = self.matches(ev.old)
            if now and before:
                self.push(WatchEventType.MODIFIED, ev.obj, ev)
            elif now:
                self.push(WatchEventType.ADDED, ev.obj)
            elif before:
                self.push(WatchEventType.DELETED, ev.obj)
        elif now:
            self.push(ev.type, ev.obj, ev)

    def close(self, reason: CloseReason) -> None:
        if not self.closed:
            self.closed = True
            self.close_reason = reason
            self.wake.set()
