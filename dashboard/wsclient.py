"""A Python client for the telemetry websocket, speaking the same protocol as telemetry.js.

Used by the tests and ``bench/transport.py``; handy for scripting ("tail this topic"). It keeps,
per topic, the cursor and the state folded from snapshot + frames exactly like the browser does,
and it acks every data message (the server stops sending to a client that does not).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

try:
    import websockets
except ImportError as missing:  # an installed package without the extra
    raise ImportError("dashboard.wsclient needs the websockets package: pip install 'ctrlscope[client]'") from missing

from controllers.telemetry.streams import parse_id


@dataclass
class TopicView:
    cursor: str | None = None
    state: dict[str, Any] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    snapshots: int = 0
    dropped: int = 0
    incoming: dict[str, Any] = field(default_factory=dict)  # parts of a snapshot still arriving
    epoch: str = ""  # the epoch the cursor belongs to (a Redis Cluster has one per topic)


class TelemetryWsClient:
    """One websocket connection (reconnectable) with protocol handling."""

    def __init__(self, url: str, origin: str, *, headers: dict[str, str] | None = None,
                 keep_records: bool = True, on_records: Callable[[str, list[dict[str, Any]], float], None] | None = None,
                 auto_ack: bool = True) -> None:
        self.url = url
        self.origin = origin
        self.headers = headers or {}
        self.keep_records = keep_records
        self.on_records = on_records
        self.auto_ack = auto_ack
        self.topics: dict[str, TopicView] = {}
        self.epoch = ""
        self.known_topics: list[str] = []
        self.resyncs: list[tuple[str, str]] = []
        self.errors: list[dict[str, Any]] = []
        self.statuses: list[str] = []
        self.duplicates = 0
        self.messages = 0
        self.close_code: int | None = None
        self.ws: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._hello = asyncio.Event()
        self._pending_ack: int | None = None
        # The last messages in brief, for assertion messages when a test fails.
        self.recent: deque[tuple[Any, ...]] = deque(maxlen=200)

    async def connect(self) -> TelemetryWsClient:
        self._hello = asyncio.Event()
        self.ws = await websockets.connect(self.url, origin=self.origin, additional_headers=self.headers,
                                           max_size=64 * 1024 * 1024, open_timeout=10)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        await asyncio.wait_for(self._hello.wait(), 10)
        for topic in self.topics:
            await self._sub(topic)
        return self

    async def subscribe(self, topic: str, history: int = 0) -> None:
        self.topics.setdefault(topic, TopicView())
        await self._sub(topic, history)

    async def _sub(self, topic: str, history: int = 0) -> None:
        view = self.topics[topic]
        msg: dict[str, Any] = {"op": "sub", "topic": topic}
        if view.cursor is not None:
            msg["since"] = view.cursor
            msg["epoch"] = view.epoch or self.epoch
        elif history:
            msg["history"] = history
        await self.send(msg)

    async def send(self, msg: Any) -> None:
        await self.ws.send(msg if isinstance(msg, str | bytes) else orjson.dumps(msg).decode())

    async def drop(self) -> None:
        """Kill the connection abruptly (no close handshake), keeping cursors for a resume."""
        if self.ws is not None:
            self.ws.transport.abort()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 5)
            except (TimeoutError, Exception):  # noqa: BLE001
                pass

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, 5)
            except (TimeoutError, Exception):  # noqa: BLE001
                pass

    async def _read(self) -> None:
        try:
            async for raw in self.ws:
                self._handle(orjson.loads(raw))
                if self.auto_ack and self._pending_ack is not None:
                    seq, self._pending_ack = self._pending_ack, None
                    await self.ws.send(f'{{"op":"ack","seq":{seq}}}')
        except websockets.ConnectionClosed:
            pass
        finally:
            self.close_code = self.ws.close_code

    def _handle(self, msg: dict[str, Any]) -> None:
        self.messages += 1
        t = msg.get("t")
        self.recent.append(_summary(msg))
        if t == "hello":
            self.epoch = msg["epoch"] or self.epoch
            self.known_topics = msg["topics"]
            self._hello.set()
        elif t == "topics":
            self.known_topics = msg["topics"]
        elif t == "snapshot":
            view = self.topics.setdefault(msg["topic"], TopicView())
            if not msg.get("part"):
                view.incoming = {}
            view.incoming.update(msg["state"])
            self._pending_ack = msg["seq"]
            if msg.get("more"):
                return
            view.state, view.incoming = view.incoming, {}
            view.cursor = msg["id"]
            view.snapshots += 1
            if msg.get("epoch"):
                self.epoch = view.epoch = msg["epoch"]
            self._pending_ack = msg["seq"]
        elif t == "frames":
            now = time.time()
            for topic, entries in msg["topics"].items():
                view = self.topics.setdefault(topic, TopicView())
                for eid, frame in entries:
                    if view.cursor is not None and parse_id(eid) <= parse_id(view.cursor):
                        self.duplicates += 1
                        self.recent.append(("duplicate", eid, view.cursor))
                        continue
                    view.cursor = eid
                    view.ids.append(eid)
                    for k, v in (frame.get("s") or {}).items():
                        if v is None:
                            view.state.pop(k, None)
                        else:
                            view.state[k] = v
                    view.dropped += frame.get("dropped", 0)
                    if self.keep_records:
                        view.records.extend(frame["r"])
                    if self.on_records is not None:
                        self.on_records(topic, frame["r"], now)
            self._pending_ack = msg["seq"]
        elif t == "resync":
            self.resyncs.append((msg["topic"], msg["reason"]))
        elif t == "status":
            self.statuses.append(msg["redis"])
        elif t == "error":
            self.errors.append(msg)

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                recent = "\n  ".join(map(str, list(self.recent)[-15:]))
                raise AssertionError(f"timed out after {timeout}s waiting for {what}; last messages:\n  {recent}")
            await asyncio.sleep(0.02)


def _summary(msg: dict[str, Any]) -> tuple[Any, ...]:
    if msg.get("t") == "frames":
        return ("frames", [(topic, entries[0][0], entries[-1][0]) for topic, entries in msg["topics"].items()])
    return (msg.get("t"), msg.get("id") or msg.get("reason") or msg.get("redis") or "")
