"""snapshot.json's body: an informer topic's snapshot read in one command, then streamed in parts.

A 100,000-object cache is ~8 MB of JSON. The view used to build that body in the request before
answering (~600 ms on a loaded 2-core machine until the first byte), and in Django's one thread for
sync code: WhiteNoise is a sync-only middleware, so every request of the process (the page's own
scripts too) waited behind it. Now the view only checks access and that Redis answers, and returns a
``StreamingHttpResponse`` over ``stream()``, an async generator that Django runs on the event loop
after the middleware has let go of that thread; the Redis reads run in a worker thread of their own.

Exactness (protocol/redis-layout.md, "Reading" 1): the state is exact as of its ``__id__`` only when
the whole hash comes from one command. ``HGETALL`` is one, so Redis answers it atomically between two
frames' ``frame.lua`` calls; ``HSCAN`` in chunks would not be (a frame applied between two chunks
leaves keys from before and after it, labelled with one id). So the hash is read whole, first, and
only the sending is split: the parts are cut from that one reply.

Speed: the state is written as ``"key":value`` pairs in key order (the page keeps its keys sorted,
and sorting sorted input is nearly free there) without a Python step per object: the keys are sorted
as bytes, their values looked up with ``map``, and each part is one ``bytes.join`` over a list whose
slots are filled by slice assignment. The values are the JSON the worker wrote (already redacted:
Secret data never reaches the hash), passed through as Redis returned them. Keys go in raw when none
needs JSON escaping (Kubernetes ``namespace/name`` keys never do); otherwise every key is encoded by
orjson, and a key that is not UTF-8 is shown with replacement characters instead of failing the view.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import orjson
from asgiref.sync import sync_to_async

from controllers.telemetry.streams import NO_RECORDS_PREFIX, StreamReader

MAX_HISTORY = 1000  # ?history= frames at most
HISTORY_BYTES = 4 * 1024 * 1024  # context frames before the snapshot, at most this much
PART_KEYS = 8192  # objects per streamed part (~650 KB of compact summaries)
# Reads at once per process: each builds the whole hash in memory (~50 MB of Python objects at 100k
# objects) on a core of its own. The sync view this replaced read one at a time (Django's one sync
# thread); a burst of page loads now waits here instead of multiplying that memory.
MAX_READS = 2
_reads = asyncio.Semaphore(MAX_READS)  # bound to the event loop that first waits on it: daphne's

# Bytes a JSON string cannot carry raw: a quote, a backslash, control characters.
_NEEDS_ESCAPE = re.compile(rb'[\x00-\x1f"\\]')


@dataclass(frozen=True)
class Snapshot:
    """What one read of a topic gives: everything the body says, already in bytes."""

    topic: str
    epoch: str
    id: bytes
    keys: list[bytes]  # sorted
    values: list[bytes]  # the value of keys[i] at values[i]
    history: list[bytes]  # '["<id>",<frame>]' rows, oldest first
    raw_keys: bool  # keys go into the JSON as they are (none needs escaping)


def read(reader: StreamReader, topic: str, epoch: str, history: int) -> Snapshot:
    """The topic's snapshot (one HGETALL: exact as of its ``__id__``) and up to ``history`` frames up to
    that id, leaving out frames without records (their state is in the snapshot: a relist of 100k
    objects is 100 such frames, several MB the page would parse for nothing). Blocking: call it from a
    worker thread. Raises redis.RedisError."""
    snap_id, state = reader.snapshot(topic)
    rows: list[bytes] = []
    if history:
        size = 0
        for eid, frame in reversed(reader.read_before(topic, snap_id, history)):  # newest first
            if frame.startswith(NO_RECORDS_PREFIX):
                continue
            size += len(frame)
            if size > HISTORY_BYTES:
                break
            rows.append(b'["' + eid + b'",' + frame + b"]")
        rows.reverse()
    keys = sorted(state)
    values = list(map(state.__getitem__, keys))
    joined = b"".join(keys)
    raw = not _NEEDS_ESCAPE.search(joined)
    if raw:
        try:
            joined.decode("utf-8")
        except UnicodeDecodeError:
            raw = False
    return Snapshot(topic=topic, epoch=epoch, id=snap_id, keys=keys, values=values, history=rows, raw_keys=raw)


def _pairs(snap: Snapshot, start: int, stop: int) -> bytes:
    """``"key":value,...`` for keys[start:stop], with a leading comma unless ``start`` is 0."""
    keys, values = snap.keys[start:stop], snap.values[start:stop]
    n = len(keys)
    if snap.raw_keys:
        lead, sep = b',"', b'":'
    else:
        keys = [orjson.dumps(k.decode("utf-8", "replace")) for k in keys]
        lead, sep = b",", b":"
    # One slot list per part, [lead, key, sep, value] per object, filled by slice assignment (C loops).
    parts = [sep] * (4 * n)
    parts[0::4] = [lead] * n
    parts[1::4] = keys
    parts[3::4] = values
    if start == 0 and n:
        parts[0] = lead[1:]  # no comma before the first pair
    return b"".join(parts)


def _keys(snap: Snapshot, start: int, stop: int) -> bytes:
    """keys[start:stop] as JSON strings, comma-separated, with a leading comma unless ``start`` is 0."""
    keys = snap.keys[start:stop]
    if snap.raw_keys:
        body = b'"' + b'","'.join(keys) + b'"' if keys else b""
    else:
        body = b",".join(orjson.dumps(k.decode("utf-8", "replace")) for k in keys)
    return b"," + body if start and keys else body


# The forms of the state: "object" {"key": value, ...} (the default, for any client), and "columns"
# "keys": [...], "values": [...] (the same pairs, in the same order), which the page asks for: a
# browser parses two arrays about twice as fast as one object of 100,000 properties and fills its Map
# from them without an array per entry (Chromium's V8 on this machine: 100k summaries, parse and Map,
# median 1,199 → 523 ms loaded). The columns are two plain joins here too.
FORMS = ("object", "columns")


def parts(snap: Snapshot, per_part: int = PART_KEYS, form: str = "object") -> Iterator[bytes]:
    """The body in parts: ``{"topic","id","epoch","size","state":{...},"history":[...]}`` (or with
    ``"keys":[...],"values":[...]`` in place of ``"state"``: ``form="columns"``), the state
    ``per_part`` objects a part. Joined, the parts are the whole body."""
    head = (b'{"topic":', orjson.dumps(snap.topic), b',"id":"', snap.id, b'","epoch":', orjson.dumps(snap.epoch),
            b',"size":', str(len(snap.keys)).encode())
    n = len(snap.keys)
    if form == "columns":
        yield b"".join((*head, b',"keys":['))
        for start in range(0, n, per_part):
            yield _keys(snap, start, start + per_part)
        yield b'],"values":['
        for start in range(0, n, per_part):
            yield (b"," if start else b"") + b",".join(snap.values[start:start + per_part])
        yield b'],"history":[' + b",".join(snap.history) + b"]}"
        return
    yield b"".join((*head, b',"state":{'))
    for start in range(0, n, per_part):
        yield _pairs(snap, start, start + per_part)
    yield b'},"history":[' + b",".join(snap.history) + b"]}"


async def stream(reader: StreamReader, topic: str, epoch: str, history: int, form: str = "object") -> AsyncIterator[bytes]:
    """The body, read in a worker thread (not Django's sync thread, which would hold up every other
    request of the process meanwhile) and sent part by part. A Redis error here comes after the
    response has begun: it ends the body short, so the page's JSON parse fails and it loads again."""
    async with _reads:
        snap = await sync_to_async(read, thread_sensitive=False)(reader, topic, epoch, history)
    for part in parts(snap, form=form):
        yield part
