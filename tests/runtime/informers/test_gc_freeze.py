"""CacheFreezer: gc.freeze() every N cache writes, young cyclic garbage freed first, a full
collection on thaw, and the informer feeding it its writes (fake clock); which GC policy
and cache mode a bare informer, a factory and a Manager get by default."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from controllers.clock import FakeClock
from controllers.informers import CacheMode, SharedInformer, SharedInformerFactory
from controllers.informers.gc_freeze import CacheFreezer
from controllers.reconcile import Manager
from tests.runtime.informers.fake_apiserver import FakeApiServer, FakeClient
from tests.runtime.informers.test_shared_informer import started


class Node:
    """Something that can form a reference cycle (and be weakly referenced)."""

    def __init__(self) -> None:
        self.other: Node | None = None


def cycle() -> weakref.ref[Node]:
    """A two-object cycle nothing else refers to: only the cyclic GC can free it."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture(autouse=True)
def thawed() -> Iterator[None]:
    """Leave the process's GC as the test found it."""
    gc.unfreeze()
    gc.collect()
    yield
    gc.unfreeze()
    gc.collect()


def test_freezes_once_enough_writes_accumulated() -> None:
    freezer = CacheFreezer(every_writes=100, clock=FakeClock())
    freezer.wrote(60)
    assert freezer.freezes == 0 and gc.get_freeze_count() == 0
    kept = [{"a": [i]} for i in range(50)]
    freezer.wrote(40)
    assert freezer.freezes == 1
    assert gc.get_freeze_count() >= len(kept)
    freezer.wrote(99)
    assert freezer.freezes == 1, "the count restarts after each freeze"


def test_young_cyclic_garbage_is_collected_not_frozen() -> None:
    freezer = CacheFreezer(every_writes=1, clock=FakeClock())
    garbage = cycle()
    freezer.wrote(1)
    assert garbage() is None


def test_cyclic_garbage_frozen_while_alive_is_reclaimed_at_the_next_thaw() -> None:
    clock = FakeClock()
    freezer = CacheFreezer(every_writes=1, thaw_interval=600, clock=clock)
    holder = [Node()]
    holder[0].other = Node()
    holder[0].other.other = holder[0]
    ref = weakref.ref(holder[0])
    freezer.freeze()  # the cycle is alive: it is frozen
    holder.clear()  # ... and becomes garbage only the cyclic GC can free
    clock.step(599)
    freezer.wrote(1)
    gc.collect()
    assert ref() is not None, "frozen: no collection looks at it"
    assert freezer.thaws == 0
    clock.step(1)
    freezer.wrote(1)
    assert ref() is None, "the thaw's full collection freed it"
    assert freezer.thaws == 1 and freezer.freezes == 3
    assert gc.get_freeze_count() > 0, "frozen again after the thaw"
    stats = freezer.stats()
    # > 0, not == gc.get_freeze_count() read again: the count is process-wide, and an informer of
    # another test still winding down in this process may freeze between the two reads.
    assert stats["thaws"] == 1 and stats["frozen_objects"] > 0


def test_thaw_interval_zero_never_thaws() -> None:
    clock = FakeClock()
    freezer = CacheFreezer(every_writes=1, thaw_interval=0, clock=clock)
    freezer.freeze()
    clock.step(10_000)
    freezer.wrote(1)
    assert freezer.thaws == 0 and freezer.freezes == 2


def test_informer_freezes_on_sync_and_counts_every_cache_write(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    freezer = CacheFreezer(every_writes=5, clock=clock)
    informer = SharedInformer(server, clock=clock, freeze_gc_after_sync=True, gc_freezer=freezer)
    assert not informer.store.compact, "frozen caches hold the decoded objects"
    with started(informer):
        eventually(lambda: freezer.freezes >= 1)
        after_sync = freezer.freezes
        eventually(lambda: server.watch_calls)
        for i in range(10):
            server.create(f"p{i}")
        eventually(lambda: len(informer.store) == 11)
        # Writes arrive in batches, so 10 writes cross the threshold of 5 once or twice.
        eventually(lambda: freezer.freezes >= after_sync + 1)
        assert informer.snapshot()["gc_freezer"]["freezes"] == freezer.freezes


def test_informer_without_freezing_leaves_the_gc_alone(clock, eventually) -> None:
    server = FakeApiServer()
    server.create("a")
    with started(SharedInformer(server, clock=clock)) as informer:
        assert gc.get_freeze_count() == 0
        assert informer.snapshot()["gc_freezer"] is None


@pytest.mark.parametrize(("cache", "freeze", "compact"), [
    (None, False, True), (None, True, False),  # unset: follows the GC policy
    ("compact", True, True), ("decoded", False, False), (CacheMode.DECODED, True, False),
])
def test_the_cache_mode_is_explicit_or_follows_the_gc_policy(clock, eventually, cache, freeze, compact) -> None:
    server = FakeApiServer()
    server.create("a")
    informer = SharedInformer(server, clock=clock, freeze_gc_after_sync=freeze, cache=cache,
                              gc_freezer=CacheFreezer(clock=clock))
    assert informer.store.compact is compact
    assert informer.cache_mode is (CacheMode.COMPACT if compact else CacheMode.DECODED)
    with started(informer):
        first, second = informer.store.get_by_key("default/a"), informer.store.get_by_key("default/a")
        assert first == second and first["metadata"]["name"] == "a"
        # Compact hands out a fresh copy per read; decoded shares the cached dict.
        assert (first is second) is not compact


def test_an_unknown_cache_mode_is_refused_where_it_is_written() -> None:
    with pytest.raises(ValueError, match="unknown cache mode 'zip': use one of compact, decoded"):
        SharedInformerFactory(FakeApiServer(), cache="zip")
    with pytest.raises(ValueError, match="unknown cache mode"):
        SharedInformer(FakeApiServer(), cache="bytes")


def test_a_factory_keeps_the_gc_off_its_compact_caches_by_default(clock, eventually) -> None:
    client = FakeClient()
    factory = SharedInformerFactory(client, clock=clock)
    informer = factory.informer_for("v1", "Pod")
    client.servers[("v1", "Pod")].create("a")
    assert (informer.cache_mode, informer.freeze_gc_after_sync) == (CacheMode.COMPACT, True)
    factory.start()
    try:
        eventually(lambda: informer.has_synced() and gc.get_freeze_count() > 0)
    finally:
        factory.shutdown()
    untouched = SharedInformerFactory(client, freeze_gc_after_sync=False).informer_for("v1", "Pod")
    assert (untouched.cache_mode, untouched.freeze_gc_after_sync) == (CacheMode.COMPACT, False)


@pytest.mark.parametrize(("kwargs", "want"), [
    ({}, (CacheMode.DECODED, True)),
    ({"freeze_gc_after_sync": False}, (CacheMode.COMPACT, False)),
    ({"cache": "compact"}, (CacheMode.COMPACT, True)),
])
def test_a_manager_defaults_to_decoded_caches_with_the_gc_kept_off(kwargs, want) -> None:
    informer = Manager(FakeClient(), **kwargs).informer_for("v1", "Pod")
    assert (informer.cache_mode, informer.freeze_gc_after_sync) == want
