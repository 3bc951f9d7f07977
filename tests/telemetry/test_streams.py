"""The Redis layout's reading layer and the frame script every publisher shares (protocol/frame.lua)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import redis
import redis.asyncio as aredis

from controllers.telemetry.streams import (
    FRAME_SCRIPT,
    AsyncStreamReader,
    Keys,
    ResumeRefused,
    StreamReader,
    check_position,
    check_untrimmed,
    entries_after,
    snapshot_of,
)
from tests.conftest import run_async

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


def test_pure_readers_follow_the_layout_rules():
    assert snapshot_of({}) == (b"0-0", {})
    assert snapshot_of({b"__id__": b"5-1", b"k": b"1"}) == (b"5-1", {b"k": b"1"})
    rows = [(b"5-1", {b"f": b'{"r":[1]}'}), (b"6-0", {b"f": b'{"r":[2]}'}), (b"7-0", {})]
    assert entries_after(b"5-1", rows) == [(b"6-0", b'{"r":[2]}'), (b"7-0", b"{}")]
    with pytest.raises(ResumeRefused, match="retention"):
        entries_after(b"5-0", rows)  # the cursor's own entry is gone: later ones may be too
    check_untrimmed(None)
    check_untrimmed({"length": 3, "entries-added": 3})
    with pytest.raises(ResumeRefused, match="retention"):
        check_untrimmed({"length": 3, "entries-added": 4})
    check_position(b"0-0", None)
    check_position(b"7-0", {"last-generated-id": b"7-0"})
    with pytest.raises(ResumeRefused, match="stream-missing"):
        check_position(b"7-0", None)
    with pytest.raises(ResumeRefused, match="unknown-position"):
        check_position(b"7-1", {"last-generated-id": b"7-0"})


def test_sync_and_async_readers_see_the_same_snapshot_and_entries(redis_url, prefix, publisher_factory):
    pub = publisher_factory(maxlen=10)
    for i in range(250):  # MAXLEN ~ trims whole nodes (100 entries by default): enough to trim some
        pub.publish("t", {"i": i})
        pub.set_state("t", f"k{i % 3}", i)
        pub.flush()
    keys = Keys(prefix)
    sync = StreamReader(redis.Redis.from_url(redis_url), keys)
    snap_id, state = sync.snapshot("t")
    assert state == {b"k0": b"249", b"k1": b"247", b"k2": b"248"}
    newest = sync.read_before("t", snap_id, 3)
    assert [e[0] for e in newest][-1] == snap_id and len(newest) == 3
    assert sync.read_range("t", newest[0][0], snap_id) == newest
    assert sync.tail({"t": newest[0][0]}, count=10, block=1) == [("t", newest[1:])]
    assert sync.topics() == ["t"] and sync.epoch()

    async def read_async():
        client = aredis.Redis.from_url(redis_url)
        try:
            reader = AsyncStreamReader(client, keys)
            assert await reader.snapshot("t") == (snap_id, state)
            assert await reader.read_before("t", snap_id, 3) == newest
            assert await reader.read_after("t", newest[0][0]) == newest[1:]
            assert await reader.read_after("t", snap_id) == []
            with pytest.raises(ResumeRefused, match="retention"):
                await reader.read_after("t", b"0-0")  # trimmed: reading from the start would miss frames
            await reader.check_resume("t", snap_id, sync.epoch())
            with pytest.raises(ResumeRefused, match="epoch-changed"):
                await reader.check_resume("t", snap_id, "another-epoch")
            assert await reader.retains("t", snap_id)
            assert await reader.leading_reset("t") is None  # the first frame, a reset, is trimmed away
            # Many topics' reads in one round say what each topic's own read_after would: entries,
            # or the ResumeRefused it raises ("retention" from 0-0 after a trim, a position older
            # than the stream's first entry; "unknown-position" for one never written there).
            first = sync.client.xrange(keys.stream("t"), count=1)[0][0]
            older = f"{int(first.split(b'-')[0]) - 1}-0".encode()
            never = f"{int(newest[0][0].split(b'-')[0])}-{int(newest[0][0].split(b'-')[1]) + 999}".encode()
            batch = await reader.snapshots(["t", "nothing"])
            assert batch == {"t": ((snap_id, state), sync.epoch()), "nothing": ((b"0-0", {}), sync.epoch())}
            got = await reader.read_after_many({"t": newest[0][0]}, 10)
            assert got == {"t": newest[1:]}
            for position, reason in ((b"0-0", "retention"), (older, "retention"), (never, "unknown-position")):
                refused = (await reader.read_after_many({"t": position}))["t"]
                assert isinstance(refused, ResumeRefused) and refused.reason == reason, (position, refused)
        finally:
            await client.aclose()

    run_async(read_async())
    sync.client.close()
