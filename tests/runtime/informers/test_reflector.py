"""Reflector: LIST resourceVersion rules, paging, WATCH options, bookmarks, 410/429/connection
handling and backoff -- against the in-memory fake API server, on a fake clock."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from controllers.informers import ApiError, Backoff, Reflector, Store
from tests.runtime.informers.fake_apiserver import FakeApiServer


def reflector_for(server: FakeApiServer, clock, observer=None, **kwargs) -> tuple[Reflector, Store]:
    store = Store()
    kwargs.setdefault("backoff", Backoff(clock=clock, rand=lambda: 0.0))
    return Reflector(server, store, clock=clock, observer=observer, **kwargs), store


@contextmanager
def running(reflector: Reflector) -> Iterator[None]:
    t = threading.Thread(target=reflector.run, daemon=True)
    t.start()
    try:
        yield
    finally:
        reflector.stop()
        t.join(5)
        assert not t.is_alive()


def test_first_list_uses_rv_0_and_pages_of_500(clock) -> None:
    server = FakeApiServer()
    for i in range(1201):
        server.create(f"p{i:04}")
    r, store = reflector_for(server, clock)
    r.list()
    assert [(c["resource_version"], c["limit"], bool(c["continue_token"])) for c in server.list_calls] == [
        ("0", 500, False), ("", 500, True), ("", 500, True)]
    assert len(store) == 1201
    assert r.last_sync_resource_version == str(server.rv)


def test_relist_uses_last_synced_rv_without_paging(clock) -> None:
    server = FakeApiServer()
    server.create("a")
    r, _ = reflector_for(server, clock)
    r.list()
    server.create("b")
    r.list()
    assert server.list_calls[1] == {"resource_version": "101", "limit": 0, "continue_token": ""}


def test_relist_keeps_paging_when_the_first_list_was_paginated(clock) -> None:
    server = FakeApiServer()
    for i in range(3):
        server.create(f"p{i}")
    r, _ = reflector_for(server, clock, page_size=2)
    r.list()
    r.list()
    assert server.list_calls[2]["limit"] == 2 and server.list_calls[2]["resource_version"] == "103"


def test_expired_continue_token_falls_back_to_one_full_list(clock) -> None:
    server = FakeApiServer()
    for i in range(5):
        server.create(f"p{i}")
    original = server.list

    def list_then_compact(**kwargs):
        page = original(**kwargs)
        if len(server.list_calls) == 1:
            server.create("late")
            server.compact()
        return page

    server.list = list_then_compact  # type: ignore[method-assign]
    r, store = reflector_for(server, clock, page_size=2)
    r.list()
    assert server.list_calls[-1] == {"resource_version": "0", "limit": 0, "continue_token": ""}
    assert len(store) == 6


def test_list_410_retries_at_once_with_a_consistent_read(clock) -> None:
    server = FakeApiServer()
    server.create("a")
    r, _ = reflector_for(server, clock)
    r.list()
    server.list_errors.append(ApiError(410, "Expired", "too old"))
    r.list()
    assert [(c["resource_version"], c["limit"]) for c in server.list_calls[1:]] == [("101", 0), ("", 500)]
    assert r.relist_resource_version() == "101"


def test_list_with_too_large_resource_version_retries_with_a_consistent_read(clock) -> None:
    server = FakeApiServer()
    r, _ = reflector_for(server, clock)
    server.list_errors.append(ApiError(504, "Timeout", "Too large resource version: 5, current: 1"))
    r.list()
    assert [c["resource_version"] for c in server.list_calls] == ["0", ""]


def test_watch_asks_for_bookmarks_with_a_5_to_10_minute_timeout(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    r, _ = reflector_for(server, clock)
    with running(r):
        eventually(lambda: server.watch_calls)
    call = server.watch_calls[0]
    assert call["resource_version"] == "101" and call["allow_watch_bookmarks"] is True
    assert 300 <= call["timeout_seconds"] <= 600


def test_watch_events_update_the_store_and_the_rv(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    r, store = reflector_for(server, clock)
    with running(r):
        eventually(lambda: server.watch_calls)
        server.create("b")
        server.update("a", spec={"x": 1})
        server.delete("b")
        eventually(lambda: r.last_sync_resource_version == "104")
        assert store.list_keys() == ["default/a"]
        assert store.get_by_key("default/a")["spec"] == {"x": 1}


def test_bookmark_advances_the_rv_only(clock, eventually, observer) -> None:
    server = FakeApiServer()
    server.create("a")
    r, store = reflector_for(server, clock, observer=observer)
    with running(r):
        eventually(lambda: server.watch_calls)
        with server.cond:
            server.rv = 150
        server.bookmark()
        eventually(lambda: r.last_sync_resource_version == "150")
        assert store.list_keys() == ["default/a"]
    assert observer.of("on_bookmark") == [{"resource_version": "150"}]


def test_watch_closed_at_once_without_events_relists_after_backoff(clock, eventually) -> None:
    server = FakeApiServer()
    r, _ = reflector_for(server, clock)
    with running(r):
        eventually(lambda: server.watch_calls)
        server.drop_watches()  # no event, no time passed: upstream's "very short watch"
        assert clock.wait_for_waiters()
        clock.step(0.8)
        eventually(lambda: len(server.list_calls) == 2)


class AnswersAfterASecond:
    """The fake server, but a watch's answer comes a second after it was asked: the server's
    timeoutSeconds ran meanwhile (it starts when the server gets the request, as the API server's)."""

    def __init__(self, server: FakeApiServer, clock) -> None:
        self.server = server
        self.clock = clock

    def __getattr__(self, name: str):
        return getattr(self.server, name)

    def watch(self, **kwargs):
        stream = self.server.watch(**kwargs)
        self.clock.step(1.0)
        return stream


def test_a_watch_the_server_ends_on_time_is_not_very_short_however_late_its_answer_came(clock, eventually) -> None:
    # A 1 s watch (--watch-timeout 1) that the server closes on time without an event lasted 1 s from
    # the request, as client-go times it -- but less from when its answer arrived: timed from there,
    # it was a "very short watch", a relist after a backoff instead of the next watch.
    server = FakeApiServer()
    r, _ = reflector_for(AnswersAfterASecond(server, clock), clock)  # type: ignore[arg-type]
    with running(r):
        eventually(lambda: server.watch_calls)
        server.drop_watches()  # no event, closed as the answer arrived: 1 s after the request
        eventually(lambda: len(server.watch_calls) == 2, timeout=5)
    assert len(server.list_calls) == 1


def test_dropped_watch_resumes_from_the_last_rv_without_relisting(clock, eventually) -> None:
    server = FakeApiServer()
    r, _ = reflector_for(server, clock)
    with running(r):
        eventually(lambda: server.watch_calls)
        server.create("a")
        eventually(lambda: r.last_sync_resource_version == "101")
        server.drop_watches()
        eventually(lambda: len(server.watch_calls) == 2)
    assert server.watch_calls[1]["resource_version"] == "101"
    assert len(server.list_calls) == 1


def test_watch_410_relists_after_backoff_at_the_last_rv(clock, eventually, observer) -> None:
    server = FakeApiServer()
    server.create("a")
    r, store = reflector_for(server, clock, observer=observer)
    with running(r):
        eventually(lambda: server.watch_calls)
        server.create("b")
        eventually(lambda: r.last_sync_resource_version == "102")
        server.drop_watches()
        server.delete("a")  # happens in the gap, then history is compacted
        server.compact()
        eventually(lambda: len(server.watch_calls) == 2)
        assert clock.wait_for_waiters()
        assert len(server.list_calls) == 1, "relist waits for the backoff"
        clock.step(0.8)
        eventually(lambda: len(server.list_calls) == 2)
        eventually(lambda: store.list_keys() == ["default/b"])
    assert server.list_calls[1]["resource_version"] == "102"
    assert "expired" in [c["reason"] for c in observer.of("on_watch_end")]
    assert observer.of("on_backoff")[0]["delay"] == 0.8


def test_connection_refused_on_watch_backs_off_and_rewatches_without_relisting(clock, eventually, observer) -> None:
    server = FakeApiServer()
    server.watch_errors.append(ConnectionRefusedError("refused"))
    r, _ = reflector_for(server, clock, observer=observer)
    with running(r):
        eventually(lambda: server.watch_calls)
        assert clock.wait_for_waiters()
        clock.step(0.8)
        eventually(lambda: len(server.watch_calls) == 2)
    assert len(server.list_calls) == 1
    assert observer.of("on_backoff")[0]["delay"] == 0.8


def test_429_on_watch_backs_off_and_rewatches_without_relisting(clock, eventually) -> None:
    server = FakeApiServer()
    server.watch_errors.append(ApiError(429, "TooManyRequests", "slow down"))
    r, _ = reflector_for(server, clock)
    with running(r):
        eventually(lambda: server.watch_calls)
        assert clock.wait_for_waiters()
        clock.step(0.8)
        eventually(lambda: len(server.watch_calls) == 2)
    assert len(server.list_calls) == 1


def test_failed_list_backs_off_then_lists_again(clock, eventually) -> None:
    server = FakeApiServer()
    server.list_errors.append(ConnectionRefusedError("down"))
    r, _ = reflector_for(server, clock)
    with running(r):
        eventually(lambda: server.list_calls)
        assert clock.wait_for_waiters()
        clock.step(0.8)
        eventually(lambda: len(server.list_calls) == 2 and server.watch_calls)
    assert server.list_calls[1]["resource_version"] == "0"


def test_backoff_doubles_from_800ms_to_a_30s_cap(clock) -> None:
    b = Backoff(clock=clock, rand=lambda: 0.0)
    assert [b.next() for _ in range(8)] == [0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0]


def test_backoff_jitter_stretches_up_to_double(clock) -> None:
    b = Backoff(clock=clock, rand=lambda: 0.5)
    assert b.next() == pytest.approx(1.2)
    assert b.next() == pytest.approx(2.4)


def test_backoff_resets_after_two_quiet_minutes(clock) -> None:
    b = Backoff(clock=clock, rand=lambda: 0.0)
    b.next()
    b.next()
    clock.step(120)
    assert b.next() == 3.2
    clock.step(120.1)
    assert b.next() == 0.8


def test_watch_list_streams_the_initial_state_then_keeps_watching(clock, eventually, observer) -> None:
    server = FakeApiServer()
    server.create("a")
    server.create("b")
    r, store = reflector_for(server, clock, observer=observer, use_watch_list=True)
    with running(r):
        eventually(lambda: len(store) == 2)
        server.create("c")
        eventually(lambda: len(store) == 3)
    assert server.list_calls == []
    assert server.watch_calls[0]["send_initial_events"] is True and server.watch_calls[0]["resource_version"] == ""
    assert observer.of("on_list")[0]["items"] == 2 and r.lists == 1


def test_watch_list_falls_back_to_list_when_the_server_rejects_it(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    server.watch_errors.append(ApiError(400, "BadRequest", "sendInitialEvents is not supported"))
    r, store = reflector_for(server, clock, use_watch_list=True)
    with running(r):
        eventually(lambda: len(store) == 1 and server.watch_calls[1:])
    assert server.list_calls[0]["resource_version"] == "0"
    assert server.watch_calls[1]["send_initial_events"] is False
