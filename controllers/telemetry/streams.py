"""The Redis layout shared by the publisher (worker side) and the stream hub (dashboard side).

Per topic (a string such as ``synthetic`` or ``informer:default/pods``):

- ``{prefix}stream:{topic}`` — a Redis Stream, trimmed to about ``maxlen`` entries. Each entry is one
  *frame*: field ``f`` holds orjson bytes ``{"r": [records], "s": {key: value|null}, "ts": ms,
  "src": publisher, "seq": n}``, optionally ``"reset": true`` (the snapshot was rewritten: resync) and
  ``"dropped": n`` (records the worker had to drop; surfaced, never silent).
- ``{prefix}snap:{topic}`` — a hash: the topic's state (``key`` → JSON value) exactly as of the frame
  whose id is stored in field ``__id__``. Frame and hash update happen in one Lua script, so a reader
  that takes the hash and then reads the stream after ``__id__`` sees every change exactly once.
- ``{prefix}topics`` — set of known topics; ``{prefix}epoch`` — a random token created with the
  first frame. A Redis restart without persistence loses the token, so a client's cursor from the
  old epoch is recognised as meaningless and the client resyncs instead of silently missing frames.
- ``{prefix}pubseq:{topic}`` — hash publisher id → last applied frame seq, which makes a frame retried
  after a lost reply idempotent (zero duplicates even when the connection drops mid-call).

The object inspector's request/reply keys (``inspector.py`` explains the exchange), every one with a TTL:
``{prefix}inspect:alive:{worker}`` (heartbeat), ``{prefix}inspect:queue:{worker}`` (request ids),
``{prefix}inspect:req:{id}``, ``{prefix}inspect:reply:{id}`` and ``{prefix}inspect:rate:{worker}:{second}``.

Writing is ``FRAME_SCRIPT``, the Lua script in ``protocol/frame.lua`` (its header documents KEYS, ARGV
and replies); it is read from that file, not copied, so that publishers in other languages embed the
very same script and share Redis' script cache with this one.
"""

from __future__ import annotations

from pathlib import Path

SNAPSHOT_ID_FIELD = "__id__"
RESET_PREFIX = b'{"reset":true'  # a reset frame starts with this, so readers need not decode
NO_RECORDS_PREFIX = b'{"r":[],'  # a frame that carries only state changes (no records) starts with this
FRAME_FIELD = b"f"
FRAME_SCRIPT = (Path(__file__).resolve().parents[2] / "protocol" / "frame.lua").read_bytes().decode()


class Keys:
    """Key names under one prefix (tests use their own prefix and never touch anything else)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.topics = f"{prefix}topics"
        self.epoch = f"{prefix}epoch"

    def stream(self, topic: str) -> str:
        return f"{self.prefix}stream:{topic}"

    def snapshot(self, topic: str) -> str:
        return f"{self.prefix}snap:{topic}"

    def pubseq(self, topic: str) -> str:
        return f"{self.prefix}pubseq:{topic}"

    def inspect_alive(self, worker: str) -> str:
        return f"{self.prefix}inspect:alive:{worker}"

    def inspect_queue(self, worker: str) -> str:
        return f"{self.prefix}inspect:queue:{worker}"

    def inspect_request(self, request_id: str) -> str:
        return f"{self.prefix}inspect:req:{request_id}"

    def inspect_reply(self, request_id: str) -> str:
        return f"{self.prefix}inspect:reply:{request_id}"

    def inspect_rate(self, worker: str, second: int) -> str:
        return f"{self.prefix}inspect:rate:{worker}:{second}"


def parse_id(stream_id: str | bytes) -> tuple[int, int]:
    """``"1700000000000-3"`` → ``(1700000000000, 3)``; raises ValueError on anything else."""
    if isinstance(stream_id, bytes):
        stream_id = stream_id.decode("ascii")
    ms, sep, seq = stream_id.partition("-")
    if not sep or not ms.isdigit() or not seq.isdigit() or len(ms) > 20 or len(seq) > 20:
        raise ValueError(f"not a stream id: {stream_id!r}")
    return int(ms), int(seq)
