"""SharedInformer: sync, per-handler ordered delivery, failing and slow handlers, late handlers,
resync, relist tombstones -- over the in-memory fake API server."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from controllers.informers import (
    Backoff,
    CacheMode,
    DeletedFinalStateUnknown,
    LazyObject,
    SharedInformer,
    SharedInformerFactory,
    decoded,
)
from controllers.observer import Observer
from tests.runtime.informers.fake_apiserver import FakeApiServer, FakeClient


class Recorder:
    """A handler that records ``(event, name, rv)`` tuples."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    @staticmethod
    def _id(obj: Any) -> tuple[str, str]:
        if isinstance(obj, DeletedFinalStateUnknown):
            return "tombstone:" + obj.key, obj.obj["metadata"]["resourceVersion"]
        return obj["metadata"]["name"], obj["metadata"]["resourceVersion"]

    def on_add(self, obj: Any) -> None:
        self.events.append(("add", *self._id(obj)))

    def on_update(self, old: Any, new: Any) -> None:
        self.events.append(("update", *self._id(new)))

    def on_delete(self, obj: Any) -> None:
        self.events.append(("delete", *self._id(obj)))

    def register(self, informer: SharedInformer, **kwargs: Any) -> Any:
        return informer.add_event_handler(on_add=self.on_add, on_update=self.on_update, on_delete=self.on_delete,
                                          **kwargs)


@contextmanager
def started(informer: SharedInformer) -> Iterator[SharedInformer]:
    informer.reflector.backoff = Backoff(clock=informer.clock, rand=lambda: 0.0)
    informer.start()
    try:
        assert informer.wait_for_sync(5)
        yield informer
    finally:
        informer.stop()


def test_informer_syncs_and_delivers_the_list_as_adds(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    server.create("b")
    informer = SharedInformer(server, clock=clock)
    rec = Recorder()
    rec.register(informer)
    assert not informer.has_synced()
    with started(informer):
        assert informer.has_synced()
        assert sorted(informer.store.list_keys()) == ["default/a", "default/b"]
        eventually(lambda: len(rec.events) == 2)
    assert sorted(rec.events) == [("add", "a", "101"), ("add", "b", "102")]


def test_handler_sees_each_objects_changes_in_order(clock, eventually) -> None:
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock)
    rec = Recorder()
    rec.register(informer)
    with started(informer):
        eventually(lambda: server.watch_calls)
        server.create("a")
        for _ in range(20):
            server.update("a")
        server.delete("a")
        eventually(lambda: len(rec.events) == 22)
    assert rec.events[0] == ("add", "a", "101")
    assert [e[0] for e in rec.events[1:-1]] == ["update"] * 20
    assert [int(e[2]) for e in rec.events] == sorted(int(e[2]) for e in rec.events)
    assert rec.events[-1] == ("delete", "a", "122")


def test_cache_is_updated_before_handlers_are_called(clock, eventually) -> None:
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock)
    seen: list[Any] = []
    informer.add_event_handler(on_add=lambda obj: seen.append(informer.store.get(obj)))
    with started(informer):
        server.create("a")
        eventually(lambda: seen)
    assert seen[0] is not None


def test_failing_handler_is_counted_reported_and_keeps_receiving(clock, eventually, observer) -> None:
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock, observer=observer)

    def flaky(obj: Any) -> None:
        if obj["metadata"]["name"] == "bad":
            raise ValueError("handler bug")

    reg = informer.add_event_handler(on_add=flaky, name="flaky")
    with started(informer):
        server.create("bad")
        server.create("good")
        eventually(lambda: reg.delivered == 2)
    assert reg.errors == 1
    outcomes = [(c["key"], c["outcome"], c["error"]) for c in observer.of("on_handler")]
    assert outcomes == [("default/bad", "error", "ValueError: handler bug"), ("default/good", "ok", None)]


def test_slow_handler_does_not_block_other_handlers(clock, eventually) -> None:
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock)
    gate = threading.Event()
    fast = Recorder()
    informer.add_event_handler(on_add=lambda obj: gate.wait(5), name="slow")
    fast.register(informer)
    with started(informer):
        for i in range(50):
            server.create(f"p{i}")
        eventually(lambda: len(fast.events) == 50)
        slow = next(h for h in informer.handlers if h.name == "slow")
        assert slow.pending() >= 48  # buffered, not dropped
        gate.set()
        eventually(lambda: slow.delivered == 50)


def test_handler_added_after_start_gets_the_cache_replayed_as_adds(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    server.create("b")
    informer = SharedInformer(server, clock=clock)
    with started(informer):
        rec = Recorder()
        rec.register(informer)
        server.update("a")
        eventually(lambda: len(rec.events) == 3)
    assert sorted(rec.events[:2]) == [("add", "a", "101"), ("add", "b", "102")]
    assert rec.events[2] == ("update", "a", "103")


def test_resync_redelivers_every_cached_object_as_update_with_old_equal_new(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    informer = SharedInformer(server, clock=clock, resync_period=30.0)
    pairs: list[tuple[Any, Any]] = []
    informer.add_event_handler(on_update=lambda old, new: pairs.append((old, new)))
    with started(informer):
        eventually(lambda: server.watch_calls)
        assert clock.wait_for_waiters()  # the resync timer
        clock.step(30.0)
        eventually(lambda: pairs)
    old, new = pairs[0]
    assert old == new and old["metadata"]["name"] == "a"
    assert len(server.list_calls) == 1, "resync never talks to the API server"


def test_no_resync_without_resync_period(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    informer = SharedInformer(server, clock=clock)
    rec = Recorder()
    rec.register(informer)
    with started(informer):
        eventually(lambda: server.watch_calls)
        clock.step(3600)
        eventually(lambda: rec.events)
    assert rec.events == [("add", "a", "101")]


def test_relist_after_410_tombstones_objects_deleted_in_the_gap(clock, eventually) -> None:
    class Handlers(Observer):
        def __init__(self) -> None:
            self.calls: list[tuple[str, str, bool]] = []

        def on_handler(self, informer: str, **kw: Any) -> None:
            self.calls.append((kw["key"], kw["new"]["metadata"]["resourceVersion"], kw["tombstone"]))

    server = FakeApiServer()
    server.create("gone")
    server.create("kept")
    seen = Handlers()
    informer = SharedInformer(server, clock=clock, observer=seen)
    rec = Recorder()
    rec.register(informer)
    with started(informer):
        eventually(lambda: server.watch_calls)
        server.create("c")
        eventually(lambda: informer.last_sync_resource_version == "103")
        server.drop_watches()
        server.delete("gone")
        server.update("kept")
        server.compact()
        assert clock.wait_for_waiters()
        clock.step(0.8)
        eventually(lambda: len(rec.events) == 5)
    assert rec.events[3:] == [("update", "kept", "105"), ("delete", "tombstone:default/gone", "101")]
    # Observers are told it is a tombstone and get the last known object, not the wrapper.
    assert ("default/gone", "101", True) in seen.calls and ("default/kept", "105", False) in seen.calls
    assert sorted(informer.store.list_keys()) == ["default/c", "default/kept"]


def test_relist_of_an_unchanged_object_is_not_delivered_without_resync(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    informer = SharedInformer(server, clock=clock)
    rec = Recorder()
    rec.register(informer)
    with started(informer):
        eventually(lambda: server.watch_calls)
        server.drop_watches()  # very short watch: relist after backoff
        assert clock.wait_for_waiters()
        clock.step(0.8)
        eventually(lambda: len(server.list_calls) == 2 and len(server.watch_calls) == 2)
        server.create("b")
        eventually(lambda: len(rec.events) == 2)
    assert rec.events == [("add", "a", "101"), ("add", "b", "102")]


def test_observer_learns_the_fifo_model(clock, observer) -> None:
    server = FakeApiServer()
    with started(SharedInformer(server, clock=clock, observer=observer)):
        pass
    assert observer.of("on_informer") == [{"fifo": "DeltaFIFO", "resync_period": 0.0, "scope": None}]  # not narrowed


def test_factory_shares_one_informer_per_resource_and_syncs_all(clock) -> None:
    client = FakeClient()
    factory = SharedInformerFactory(client, resync_period=60.0, clock=clock)
    pods = factory.informer_for("v1", "Pod")
    assert factory.informer_for("v1", "Pod") is pods
    deployments = factory.informer_for("apps/v1", "Deployment")
    client.servers[("v1", "Pod")].create("p")
    factory.start()
    try:
        synced = factory.wait_for_cache_sync(5)
        assert synced == {("v1", "Pod", None): True, ("apps/v1", "Deployment", None): True}
        assert pods.store.list_keys() == ["default/p"] and deployments.resync_period == 60.0
    finally:
        factory.shutdown()


def test_snapshot_reports_sync_rv_cache_and_handlers(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    informer = SharedInformer(server, clock=clock)
    rec = Recorder()
    rec.register(informer, name="recorder")
    with started(informer):
        eventually(lambda: rec.events)
        snap = informer.snapshot()
    assert snap["fifo"] == "DeltaFIFO" and snap["synced"] and snap["cache_size"] == 1
    assert snap["resource_version"] == "101" and snap["lists"] == 1
    assert snap["handlers"] == [{"name": "recorder", "pending": 0, "delivered": 1, "errors": 0}]


def test_removed_handler_receives_nothing_more(clock, eventually) -> None:
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock)
    rec, other = Recorder(), Recorder()
    reg = rec.register(informer)
    other.register(informer)
    with started(informer):
        server.create("a")
        eventually(lambda: rec.events and other.events)
        informer.remove_event_handler(reg)
        server.create("b")
        eventually(lambda: len(other.events) == 2)
    assert rec.events == [("add", "a", "101")]


def test_a_raising_observer_does_not_stop_the_informer(clock, eventually) -> None:
    class Broken(Observer):
        def on_handler(self, informer: str, **kwargs: Any) -> None:
            raise RuntimeError("observer bug")

        def on_fifo(self, informer: str, **kwargs: Any) -> None:
            raise RuntimeError("observer bug")

    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock, observer=Broken())
    rec = Recorder()
    rec.register(informer)
    with started(informer):
        server.create("a")
        server.create("b")
        eventually(lambda: len(rec.events) == 2)


def _updates(informer: SharedInformer, *, reads_old: bool) -> list[tuple[Any, Any]]:
    """Register a handler that records its (old, new) pairs, reading ``old`` only if ``reads_old``."""
    pairs: list[tuple[Any, Any]] = []

    def on_update(old: Any, new: Any) -> None:
        if reads_old:
            old["metadata"]
        pairs.append((old, new))

    informer.add_event_handler(on_update=on_update, name="reads" if reads_old else "ignores")
    return pairs


def test_update_handlers_get_the_previous_cached_state_decoded_only_if_they_read_it(clock, eventually) -> None:
    # The compact cache holds bytes: ``old`` reaches on_update as a LazyObject, decoded the first
    # time the handler reads it. One that reads gets exactly the previous cached object; one that
    # does not never decodes it (before, every update decoded it for every handler: ~12 us a Pod).
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock)
    assert informer.cache_mode is CacheMode.COMPACT
    added: list[Any] = []
    informer.add_event_handler(on_add=added.append)
    reads, ignores = _updates(informer, reads_old=True), _updates(informer, reads_old=False)
    with started(informer):
        eventually(lambda: server.watch_calls)
        server.create("a")
        eventually(lambda: len(added) == 1)
        before = informer.store.get_by_key("default/a")
        server.update("a")
        server.update("a")
        eventually(lambda: len(reads) == 2 and len(ignores) == 2)
    assert before == added[0]
    for pairs in (reads, ignores):
        assert [type(old) for old, _ in pairs] == [LazyObject, LazyObject]
        assert [type(new) for _, new in pairs] == [dict, dict]
    assert [old.is_decoded for old, _ in reads] == [True, True]
    assert [old.is_decoded for old, _ in ignores] == [False, False]  # nobody read them: never decoded
    # What a reader got is the exact previous state (and decodes the same for the other handler).
    assert reads[0][0] == before and reads[0][0].object == before and type(reads[0][0].object) is dict
    assert decoded(reads[1][0]) == reads[0][1] == decoded(ignores[1][0])
    assert ignores[0][0] == before
    assert [int(o["metadata"]["resourceVersion"]) < int(n["metadata"]["resourceVersion"]) for o, n in reads] == [
        True, True]
    # Each handler has its own: mutating one never reaches the other or the cache.
    reads[1][0]["metadata"]["labels"] = {"mutated": "yes"}
    assert "labels" not in ignores[1][0]["metadata"]
    assert informer.store.get_by_key("default/a")["metadata"].get("labels") != {"mutated": "yes"}


def test_the_decoded_cache_hands_update_handlers_the_previous_cached_dict_itself(clock, eventually) -> None:
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock, cache="decoded")
    added: list[Any] = []
    informer.add_event_handler(on_add=added.append)
    ignores = _updates(informer, reads_old=False)
    with started(informer):
        eventually(lambda: server.watch_calls)
        server.create("a")
        server.update("a")
        # Each handler has its own listener thread: the update one may run before the add one.
        eventually(lambda: len(ignores) == 1 and len(added) == 1)
    assert ignores[0][0] is added[0]  # nothing to decode: the cached dict as the handler got it on add


def test_an_observed_handler_call_reports_old_decoded_even_if_the_handler_never_read_it(
        clock, eventually, observer) -> None:
    # Published telemetry keeps what it had: on_handler's ``old`` is the previous state as a dict.
    server = FakeApiServer()
    informer = SharedInformer(server, clock=clock, observer=observer)
    added: list[Any] = []
    informer.add_event_handler(on_add=added.append, name="adds")
    ignores = _updates(informer, reads_old=False)
    with started(informer):
        eventually(lambda: server.watch_calls)
        server.create("a")
        server.update("a")
        eventually(lambda: len(ignores) == 1 and len(added) == 1)  # listeners run apart, as above
        eventually(lambda: [c for c in observer.of("on_handler") if c["event"] == "update"])
    update = next(c for c in observer.of("on_handler") if c["event"] == "update")
    assert type(update["old"]) is dict and update["old"] == added[0]
    assert update["new"] == ignores[0][1]
