"""The frame script every publisher shares (protocol/frame.lua)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import redis

from controllers.telemetry.streams import FRAME_SCRIPT

FRAME_LUA = Path(__file__).resolve().parents[2] / "protocol" / "frame.lua"


def test_the_frame_script_is_protocol_frame_lua_byte_for_byte(redis_url, publisher_factory):
    """A Go publisher embeds the same file: EVALSHA of its SHA1 must hit the script this one loads."""
    raw = FRAME_LUA.read_bytes()
    assert FRAME_SCRIPT.encode() == raw
    pub = publisher_factory()
    assert pub._script.sha == hashlib.sha1(raw).hexdigest()
    r = redis.Redis.from_url(redis_url)
    try:
        assert r.script_load(raw) == pub._script.sha
    finally:
        r.close()


def test_the_script_header_documents_every_key_and_argument():
    header = [line for line in FRAME_LUA.read_text().splitlines() if line.startswith("--")]
    text = "\n".join(header)
    for n in range(1, 6):
        assert f"KEYS[{n}]" in text
    for n in range(1, 9):
        assert f"ARGV[{n}]" in text
    assert "{1, id}" in text and "{2, \"\"}" in text and "{0, epoch}" in text
