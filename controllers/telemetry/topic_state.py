"""TopicState: what a reader derives from one topic's snapshot and frames, by protocol v1's rules.

The dashboard's browser client (``dashboard/static/dashboard/telemetry.js``, ``TelemetryClient``) and
this class implement the same rules, and both pass ``protocol/vectors/derive/``:

- a snapshot replaces the state and sets the cursor to its stream id;
- entries at or below the cursor are duplicates (a resumed read may repeat them): skipped, counted;
- a frame of another major version is not interpreted: its state changes and records are skipped,
  the topic is marked unsupported with that version (the page shows a notice) and its state is
  discarded (the snapshot came from the same publisher, most likely in the same version); while it
  is unsupported a snapshot is not kept either; the cursor moves on;
- the first frame of the reader's major on an unsupported topic applies, and the reader takes a
  fresh snapshot (``needs_snapshot``), which replaces what it built meanwhile;
- otherwise the frame's ``s`` changes apply (``null`` deletes a key), its records of a known kind
  are handed on in order and records of an unknown kind (a newer minor's) are dropped and counted;
  ``dropped`` (records the publisher had to drop) adds up.

Python readers of telemetry (scenario claims, tests) use it so they read frames exactly as the page does.
"""

from __future__ import annotations

from typing import Any

import orjson

from controllers.schema import PROTOCOL_MAJOR, RecordKind, version_major
from controllers.telemetry.streams import parse_id

_KINDS = frozenset(k.value for k in RecordKind)


class TopicState:
    """One topic's derived state, cursor and counters."""

    def __init__(self) -> None:
        self.state: dict[str, Any] = {}
        self.cursor: str | None = None
        self.duplicates = 0
        self.dropped = 0
        self.unknown_records = 0
        self.unsupported: str | None = None  # the version of the frames this reader cannot read, while it lasts
        self.unsupported_seen: list[str] = []  # every such version met, in order
        self.needs_snapshot = False  # readable again after an unsupported stretch: take a fresh snapshot

    def snapshot(self, snapshot_id: str, state: dict[str, Any]) -> None:
        self.state = {} if self.unsupported is not None else dict(state)
        self.cursor = snapshot_id
        self.needs_snapshot = False

    def apply(self, entry_id: str, frame: dict[str, Any] | bytes) -> list[dict[str, Any]]:
        """Apply one stream entry; returns the records a reader acts on (possibly none)."""
        if self.cursor is not None and parse_id(entry_id) <= parse_id(self.cursor):
            self.duplicates += 1
            return []
        self.cursor = entry_id
        if isinstance(frame, bytes):
            frame = orjson.loads(frame)
        if version_major(frame.get("v")) != PROTOCOL_MAJOR:
            version = str(frame.get("v"))
            if self.unsupported != version:
                self.unsupported = version
                self.state = {}
                if version not in self.unsupported_seen:
                    self.unsupported_seen.append(version)
            return []
        if self.unsupported is not None:
            self.unsupported = None
            self.needs_snapshot = True
        for key, value in (frame.get("s") or {}).items():
            if value is None:
                self.state.pop(key, None)
            else:
                self.state[key] = value
        self.dropped += frame.get("dropped") or 0
        records = frame.get("r") or []
        known = [r for r in records if isinstance(r, dict) and r.get("k") in _KINDS]
        self.unknown_records += len(records) - len(known)
        return known
