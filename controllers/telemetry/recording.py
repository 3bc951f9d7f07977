"""Record a session's telemetry to a file, and replay it later into the dashboard without any cluster.

A recording is gzip'd JSON lines:

- line 1, the header: ``{"format": "ctrlscope-recording", "version": 1, "started": ms}``;
- ``{"snapshot": topic, "ts": ms, "state": {...}}`` lines: a topic's whole state — one per topic when
  recording begins, and again whenever a worker rebuilt its snapshot (a reset frame: a worker that
  (re)started, or a topic that appeared during the recording);
- ``{"topic": t, "ts": ms, "r": [...], "s": {...}}`` lines: every frame published while recording,
  in stream order per topic (frames carry the worker's wall-clock ``ts``).

``Recorder`` reads Redis through ``streams.StreamReader``: the snapshot hashes (each exact as of a
stream id), then every stream from those ids on, so nothing is missed between the two. Topics that appear while recording
are picked up within half a second. ``started`` is set once the snapshots are written: a frame published
before that is only in them (its state, not its records), one published after it is recorded. When
``stop`` says so (or the duration is up) the recorder still records everything already in Redis, new
topics included, before it closes the file. A reset frame is handled like the dashboard handles it: its
frames up to the current snapshot are kept for their records, then the snapshot replaces the state. ``replay`` publishes the frames again
through a ``RedisPublisher`` at 1×, 4×, … on the recorded timing, under renamed topics
(``w/<worker>@replay/...``) so a replay never mixes with live data; timestamps in records and state
are moved to "now" so ages and countdowns read naturally (at speeds other than 1× the durations keep
their recorded values, and countdowns run at wall-clock speed). A record's ``ts`` is put on the
replay's time line itself (its offset from the recording's start, divided by the speed), so records
keep their order across frames and topics at any speed; the other times move with their frame.
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from controllers.clock import Clock, RealClock, wall_ms
from controllers.schema import RecordKind
from controllers.telemetry import redis_config
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.streams import RESET_PREFIX, Keys, StreamReader, parse_id

FORMAT = "ctrlscope-recording"
VERSION = 1
# Fields holding wall-clock milliseconds, shifted to "now" on replay.
TIME_FIELDS = ("ts", "since", "ready_at", "at", "started")


class RecordingError(ValueError):
    """The file is not a ctrlscope recording (or is damaged); the message says where."""


class Recorder:
    """Copies snapshots, then every new frame of the chosen topics, into a recording file."""

    def __init__(self, url: str, *, prefix: str, topics: list[str] | None = None) -> None:
        self.redis = redis_config.sync_client(url, socket_timeout=5)
        self.reader = StreamReader(self.redis, Keys.for_url(prefix, url))
        self.topics = topics
        self.frames = 0
        # Set once the snapshots are written. Whoever records and then publishes (a test, a script)
        # waits for it: a frame published earlier is folded into a snapshot without its records.
        self.started = threading.Event()

    def record(self, path: Path, *, duration: float | None, stop: Callable[[], bool] = lambda: False) -> int:
        started = time.time() * 1000
        positions: dict[str, bytes] = {}
        with gzip.open(path, "wb") as out:
            out.write(orjson.dumps({"format": FORMAT, "version": VERSION, "started": started}) + b"\n")
            for topic in self._topics():
                positions[topic] = self._snapshot(out, topic, started)
            self.started.set()
            deadline = None if duration is None else time.monotonic() + duration
            checked = time.monotonic()
            while not stop() and (deadline is None or time.monotonic() < deadline):
                if time.monotonic() - checked > 0.5:
                    checked = time.monotonic()
                    self._discover(positions)
                self._read(out, positions, started, block=200)
            # Stopping: the frames already in Redis (of topics not discovered yet too) still belong
            # to the recording, or a stop right after a publish would drop its last frames. Read up
            # to the streams' ends as of now, so a busy publisher cannot keep the drain going.
            self._discover(positions)
            ends = {t: parse_id(self.reader.last_id(t)) for t in positions}
            while behind := {t: pos for t, pos in positions.items() if parse_id(pos) < ends[t]}:
                if not self._read(out, behind, started, block=None):
                    break  # deleted meanwhile: nothing more to read
                positions.update(behind)
        self.redis.close()
        return self.frames

    def _topics(self) -> list[str]:
        return [t for t in self.reader.topics() if self.topics is None or t in self.topics]

    def _discover(self, positions: dict[str, bytes]) -> None:
        for topic in set(self._topics()) - positions.keys():
            positions[topic] = b"0-0"  # new: its first frame is a reset frame

    def _read(self, out: Any, positions: dict[str, bytes], started: float, *, block: int | None) -> int:
        """Record the entries after ``positions`` (moved on past them); returns how many were read."""
        batches = self.reader.tail(positions, count=1000, block=block) if positions else []
        for topic, entries in batches:
            for eid, raw in entries:
                if parse_id(eid) <= parse_id(positions[topic]):
                    continue  # already covered by a reset's catch-up below
                if raw.startswith(RESET_PREFIX):
                    positions[topic] = self._reset(out, topic, eid, orjson.loads(raw).get("ts", started))
                    continue
                positions[topic] = eid
                self._frame(out, topic, orjson.loads(raw))
        return sum(len(entries) for _, entries in batches)

    def _snapshot(self, out: Any, topic: str, ts: float) -> bytes:
        snap_id, state = self.reader.snapshot(topic)
        self._write_snapshot(out, topic, ts, state)
        return snap_id

    def _write_snapshot(self, out: Any, topic: str, ts: float, state: dict[bytes, bytes]) -> None:
        out.write(orjson.dumps({"snapshot": topic, "ts": ts,
                                "state": {k.decode(): orjson.loads(v) for k, v in state.items()}}) + b"\n")

    def _frame(self, out: Any, topic: str, frame: dict[str, Any], with_state: bool = True) -> None:
        out.write(orjson.dumps({"topic": topic, "ts": frame.get("ts"), "r": frame.get("r", []),
                                "s": frame.get("s", {}) if with_state else {}}) + b"\n")
        self.frames += 1

    def _reset(self, out: Any, topic: str, reset_id: bytes, ts: float) -> bytes:
        """Records of the frames from the reset to the current snapshot, then that snapshot.

        The snapshot is read first and its id bounds the frames: a frame applied in between is then
        read by the tail, after the snapshot, instead of being folded into it without its records."""
        snap_id, state = self.reader.snapshot(topic)
        for _, raw in self.reader.read_range(topic, reset_id, snap_id, limit=None):
            self._frame(out, topic, orjson.loads(raw), with_state=False)
        self._write_snapshot(out, topic, ts, state)
        return snap_id


def read_recording(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Header and the snapshot and frame items in file order. Raises RecordingError on bad input."""
    try:
        with gzip.open(path, "rb") as fh:
            lines: Iterator[bytes] = iter(fh.read().splitlines())
    except (OSError, EOFError) as exc:
        raise RecordingError(f"{path}: not a gzip'd recording ({exc})") from None
    try:
        header = orjson.loads(next(lines))
    except (StopIteration, orjson.JSONDecodeError):
        raise RecordingError(f"{path}: missing header line") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") != VERSION:
        raise RecordingError(f"{path}: not a {FORMAT} v{VERSION} file")
    items: list[dict[str, Any]] = []
    for n, line in enumerate(lines, start=2):
        try:
            item = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise RecordingError(f"{path}:{n}: bad JSON ({exc})") from None
        is_snapshot = isinstance(item, dict) and isinstance(item.get("snapshot"), str) and isinstance(item.get("state"), dict)
        is_frame = (isinstance(item, dict) and isinstance(item.get("topic"), str) and isinstance(item.get("r"), list)
                    and isinstance(item.get("s", {}), dict))
        if not (is_snapshot or is_frame) or not isinstance(item.get("ts"), int | float):
            raise RecordingError(f"{path}:{n}: neither a snapshot nor a frame line")
        items.append(item)
    return header, items


def replay_topic(topic: str) -> str:
    """``w/demo/queue/x`` → ``w/demo@replay/queue/x``; other topics get an ``@replay`` suffix."""
    parts = topic.split("/")
    if len(parts) >= 3 and parts[0] == "w":
        parts[1] += "@replay"
        return "/".join(parts)
    return topic + "@replay"


def _shift(value: Any, offset: float) -> Any:
    if isinstance(value, dict):
        return {k: (v + offset if k in TIME_FIELDS and isinstance(v, int | float) and v > 1e12 else _shift(v, offset))
                for k, v in value.items()}
    if isinstance(value, list):
        return [_shift(v, offset) for v in value]
    return value


def replay(path: Path, publisher: RedisPublisher, *, speed: float = 1.0, clock: Clock | None = None,
           progress: Callable[[int, int], None] | None = None) -> int:
    """Publish a recording again at ``speed``× its recorded timing; returns frames replayed."""
    if speed <= 0:
        raise ValueError(f"speed must be positive, got {speed}")
    clock = clock or RealClock()
    header, items = read_recording(path)
    started = header["started"]
    start_wall = wall_ms(clock)
    begin = clock.now()
    frames = 0
    for n, item in enumerate(items, start=1):
        wait = (item["ts"] - started) / 1000 / speed - (clock.now() - begin)
        if wait > 0:
            clock.sleep(wait)
        # Recorded at offset t, replayed at t / speed: move timestamps to when they are replayed.
        moved = start_wall + (item["ts"] - started) / speed - item["ts"]
        if "snapshot" in item:
            topic = replay_topic(item["snapshot"])
            state = item["state"]
            for key in publisher.state(topic).keys() - state.keys():
                publisher.set_state(topic, key, None)
            for key, value in state.items():
                publisher.set_state(topic, key, _shift(value, moved))
            publisher.publish(topic, {"k": RecordKind.REPLAY, "ts": start_wall + (item["ts"] - started) / speed})
            continue
        topic = replay_topic(item["topic"])
        for record in item["r"]:
            shifted = _shift(record, moved)
            ts = record.get("ts")
            if isinstance(ts, int | float) and ts > 1e12:
                # A record's own time on the replay's time line, not its frame's offset: records of
                # neighbouring frames (of one topic or several) keep their order at any speed.
                shifted["ts"] = start_wall + (ts - started) / speed
            publisher.publish(topic, shifted)
        for key, value in item.get("s", {}).items():
            publisher.set_state(topic, key, None if value is None else _shift(value, moved))
        frames += 1
        if progress is not None:
            progress(n, len(items))
    return frames
