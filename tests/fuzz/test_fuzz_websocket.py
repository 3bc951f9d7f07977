"""Fuzz the telemetry websocket protocol (``dashboard/session.py``): what a browser tab may send.

A real ``StreamHub`` on the real Redis (the test's key prefix, topics published by a real
``RedisPublisher``) and a real ``ClientSession``; only the socket is left out, as the session's own
docstring intends. For any sequence of client messages, valid ones and not:

- ``handle`` raises nothing but ``ProtocolViolation`` (4009 too big, 4008 too many errors), with a
  reason that says why;
- a rejected message (an ``error`` reply) leaves the subscriptions exactly as they were: no topic
  added, dropped or replaced;
- every ``error`` reply carries a known code and a sentence, and the session's sender never dies (a
  crash there closes the socket with 4500 and the page reconnects in a loop).
"""

from __future__ import annotations

import asyncio
import json
import string
import threading
from collections.abc import Iterator

import orjson
import pytest
import redis
from hypothesis import example, given
from hypothesis import strategies as st

from controllers.telemetry.publisher import RedisPublisher
from dashboard.hub import StreamHub
from dashboard.session import CLOSE_POLICY, CLOSE_TOO_BIG, MAX_MESSAGE_BYTES, ClientSession, ProtocolViolation
from tests.fuzz.budget import assert_clear, budget, record

TARGET = "websocket"
TOPICS = ["synthetic", "w/demo/components"]
ERROR_CODES = {"binary", "bad_json", "bad_message", "unknown_op", "bad_ack", "bad_topic", "unknown_topic",
               "bad_since", "bad_history", "too_many_topics"}


class Loop:
    """One event loop in a thread and one ``StreamHub`` on it, as in a daphne process: every example
    is a new session (a new tab) on the same hub."""

    def __init__(self, url: str, prefix: str) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.hub = self.call(self._hub(url, prefix))

    @staticmethod
    async def _hub(url: str, prefix: str) -> StreamHub:
        return StreamHub(url, prefix)

    def call(self, coro, timeout: float = 20):  # type: ignore[no-untyped-def]
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.call(self.hub.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


@pytest.fixture(scope="module")
def published(redis_url: str) -> Iterator[tuple[Loop, str]]:
    """(the hub's loop, the epoch): two topics with state and a few frames each, under a prefix of their own."""
    import uuid

    from tests.conftest import delete_prefix

    prefix = f"ctrlscope-test-fuzz-{uuid.uuid4().hex[:8]}:"
    pub = RedisPublisher(redis_url, prefix=prefix).start()
    for topic in TOPICS:
        for i in range(3):
            pub.set_state(topic, f"k{i}", {"n": i})
            pub.publish(topic, {"kind": "fuzz", "i": i})
        pub.flush()
    pub.stop()
    client = redis.Redis.from_url(redis_url)
    epoch = client.get(prefix + "epoch").decode()
    client.close()
    loop = Loop(redis_url, prefix)
    yield loop, epoch
    loop.stop()
    delete_prefix(redis_url, prefix)


DIGITS = st.sampled_from(["0", "1", "17", "99999999999999", "١٢", "٣", "²", "𝟙", "", "-1", "00"])
STREAM_ID = st.builds(lambda ms, sep, seq: ms + sep + seq, DIGITS, st.sampled_from(["-", "", "--", " -"]), DIGITS)
ANY = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
                   | st.text(max_size=6), lambda inner: st.lists(inner, max_size=2)
                   | st.dictionaries(st.text(max_size=4), inner, max_size=2), max_leaves=4)


def frames(epoch: str) -> st.SearchStrategy[dict]:
    topic = st.sampled_from([*TOPICS, "nope", "", "a" * 201, "bad topic!", "w/x/ä"]) | ANY
    sub = st.fixed_dictionaries({"op": st.just("sub"), "topic": topic}, optional={
        "since": STREAM_ID | ANY, "epoch": st.sampled_from([epoch, "", "other"]) | ANY,
        "history": st.integers(-2, 1002) | ANY})
    return st.one_of(
        sub,
        st.fixed_dictionaries({"op": st.just("unsub"), "topic": topic}),
        st.fixed_dictionaries({"op": st.just("ack"), "seq": st.integers(-1, 40) | ANY}),
        st.just({"op": "ping"}),
        st.dictionaries(st.sampled_from(["op", "topic", "seq", "since", "x"]), ANY, max_size=3),
        ANY)


def encoded(value: object) -> str:
    """JSON text (the standard library's, which writes integers past 64 bits too)."""
    return json.dumps(value)


# Not JSON objects: broken JSON, binary messages (None) and messages near and past the size limit.
RAW = st.one_of(
    st.text(string.printable, max_size=20), st.just(None),
    st.builds(lambda ch, n: '{"op":"ping","x":"' + ch * n + '"}', st.sampled_from(["a", "é", "😀"]),
              st.sampled_from([100, MAX_MESSAGE_BYTES // 4 + 1, MAX_MESSAGE_BYTES // 2 + 1, MAX_MESSAGE_BYTES])))


async def run(hub: StreamHub, messages: list[str | None]) -> tuple[list[dict], list[tuple[str, str]]]:
    sent: list[dict] = []
    fatal: list[str] = []

    async def send(text: str) -> None:
        sent.append(orjson.loads(text))

    async def on_fatal() -> None:
        fatal.append("the session's sender failed")

    session = ClientSession(hub, send, on_fatal=on_fatal)
    violations: list[tuple[str, str]] = []
    try:
        await session.start()
        for text in messages:
            subs_before = {t: id(s) for t, s in session.subs.items()}
            errors_before = session._errors  # the session counts the error replies it queues
            try:
                await asyncio.wait_for(session.handle(text), 5)
            except ProtocolViolation as violation:
                violations.append((str(violation.code), violation.reason))
                assert violation.code in (CLOSE_TOO_BIG, CLOSE_POLICY)
                assert_clear(violation.reason, context=text)
                break  # the consumer closes the socket
            if text is not None and len(text.encode("utf-8", "surrogatepass")) > MAX_MESSAGE_BYTES:
                raise AssertionError(f"a message of {len(text.encode('utf-8', 'surrogatepass'))} bytes was let in")
            if session._errors > errors_before:
                assert {t: id(s) for t, s in session.subs.items()} == subs_before, \
                    f"a rejected message changed the subscriptions: {text!r}"
            await asyncio.sleep(0)
            # Every ack the client could send: a slow page must not stall the sender behind the window.
            await session.handle(orjson.dumps({"op": "ack", "seq": session._sent_seq}).decode())
        for _ in range(5):  # let the sender sync what was subscribed
            await asyncio.sleep(0.002)
        assert not fatal, f"the session failed (the socket would close with 4500) after {messages!r}"
        assert session._task is not None and not session._task.done()
    finally:
        await session.close()
    return sent, violations


@budget(120)
@given(data=st.data())
@example(data=None)  # a resume from "١٢-٣": Unicode digits passed the check, then parse_id failed in the sender
def test_any_client_messages_leave_the_session_consistent(published: tuple[Loop, str], data) -> None:
    loop, epoch = published
    if data is None:
        messages = [orjson.dumps({"op": "sub", "topic": "synthetic", "since": "١٢-٣", "epoch": epoch}).decode()]
    else:
        values = data.draw(st.lists(frames(epoch).map(encoded) | RAW, min_size=1, max_size=8))
        messages = list(values)
    sent, violations = loop.call(run(loop.hub, messages))
    refusals = [m for m in sent if m.get("t") == "error"]
    for m in refusals:
        assert m.get("code") in ERROR_CODES, m
        assert_clear(m.get("message"), context=m)
    for m in refusals:
        record(TARGET, f"{m['code']}: {m['message']}")
    for code, reason in violations:
        record(TARGET, f"close {code}: {reason}")
    if not refusals and not violations:
        record(TARGET, None)


@pytest.mark.parametrize("ch", ["a", "é", "😀"])
def test_a_message_over_the_byte_limit_closes_the_socket_whatever_its_characters(
        published: tuple[Loop, str], ch: str) -> None:
    """Found by the fuzzer: the limit counted characters, so 4-byte characters let a 256 KiB message in."""
    loop, _ = published
    text = '{"op":"ping","x":"' + ch * (MAX_MESSAGE_BYTES // len(ch.encode()) + 1) + '"}'
    _, violations = loop.call(run(loop.hub, [text]))
    assert violations and violations[0][0] == str(CLOSE_TOO_BIG)
