"""DeltaFIFO: per-key delta lists, key dedup, deletion collapse, Replace tombstones, resync, sync."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.informers import DeletedFinalStateUnknown, DeltaFIFO, Store
from controllers.informers.delta_fifo import FIFOClosedError


def obj(name: str, rv: str = "1") -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": name, "resourceVersion": rv}}


def pop(fifo: DeltaFIFO) -> list[tuple[str, Any]]:
    return [(d.type, d.obj) for d in fifo.pop(lambda deltas, initial: None)]


def test_keys_are_queued_once_with_all_their_deltas_in_order() -> None:
    f = DeltaFIFO()
    f.add(obj("a", "1"))
    f.add(obj("b", "2"))
    f.update(obj("a", "3"))
    assert len(f) == 2
    assert pop(f) == [("Added", obj("a", "1")), ("Updated", obj("a", "3"))]
    assert pop(f) == [("Added", obj("b", "2"))]


def test_two_trailing_deletions_collapse_and_a_real_delete_beats_a_tombstone() -> None:
    f = DeltaFIFO()
    f.add(obj("a"))
    f.delete(obj("a", "2"))
    f.delete(DeletedFinalStateUnknown("default/a", obj("a")))
    assert pop(f) == [("Added", obj("a")), ("Deleted", obj("a", "2"))]

    f.add(obj("b"))
    f.delete(DeletedFinalStateUnknown("default/b", obj("b")))
    f.delete(obj("b", "5"))
    assert pop(f) == [("Added", obj("b")), ("Deleted", obj("b", "5"))]


def test_delete_of_a_key_nobody_knows_is_ignored() -> None:
    f = DeltaFIFO(known_objects=Store())
    f.delete(obj("ghost"))
    assert len(f) == 0


def test_delete_of_a_cached_key_is_queued() -> None:
    known = Store()
    known.add(obj("a"))
    f = DeltaFIFO(known_objects=known)
    f.delete(obj("a", "9"))
    assert pop(f) == [("Deleted", obj("a", "9"))]


def test_replace_emits_replaced_and_tombstones_for_missing_cached_keys() -> None:
    known = Store()
    known.add(obj("kept"))
    known.add(obj("gone", "7"))
    f = DeltaFIFO(known_objects=known)
    f.replace([obj("kept", "8"), obj("new", "8")], "8")
    assert pop(f) == [("Replaced", obj("kept", "8"))]
    assert pop(f) == [("Replaced", obj("new", "8"))]
    assert pop(f) == [("Deleted", DeletedFinalStateUnknown("default/gone", obj("gone", "7")))]


def test_replace_tombstones_queued_keys_missing_from_the_list_with_their_newest_state() -> None:
    f = DeltaFIFO(known_objects=Store())
    f.add(obj("a", "1"))
    f.update(obj("a", "2"))
    f.replace([], "3")
    assert pop(f) == [("Added", obj("a", "1")), ("Updated", obj("a", "2")),
                      ("Deleted", DeletedFinalStateUnknown("default/a", obj("a", "2")))]


def test_legacy_replace_emits_sync() -> None:
    f = DeltaFIFO(emit_delta_type_replaced=False)
    f.replace([obj("a")], "1")
    assert pop(f) == [("Sync", obj("a"))]


def test_resync_queues_sync_for_cached_keys_without_pending_deltas() -> None:
    known = Store()
    known.add(obj("idle"))
    known.add(obj("busy"))
    f = DeltaFIFO(known_objects=known)
    f.update(obj("busy", "2"))
    f.resync()
    assert pop(f) == [("Updated", obj("busy", "2"))]
    assert pop(f) == [("Sync", obj("idle"))]


def test_has_synced_after_the_initial_population_is_popped() -> None:
    synced: list[bool] = []
    f = DeltaFIFO(known_objects=Store(), on_synced=lambda: synced.append(True))
    assert not f.has_synced()
    f.replace([obj("a"), obj("b")], "1")
    assert not f.has_synced()
    initial: list[bool] = []
    f.pop(lambda deltas, is_initial: initial.append(is_initial))
    assert not f.has_synced() and not synced
    f.pop(lambda deltas, is_initial: initial.append(is_initial))
    assert f.has_synced() and synced == [True]
    f.add(obj("c"))
    f.pop(lambda deltas, is_initial: initial.append(is_initial))
    assert initial == [True, True, False]


def test_empty_initial_list_is_synced_at_once() -> None:
    synced: list[bool] = []
    f = DeltaFIFO(on_synced=lambda: synced.append(True))
    f.replace([], "1")
    assert f.has_synced() and synced == [True]


def test_pop_on_closed_empty_fifo_raises() -> None:
    f = DeltaFIFO()
    f.close()
    with pytest.raises(FIFOClosedError):
        f.pop(lambda deltas, initial: None)


def test_observer_sees_queued_and_popped_deltas(observer) -> None:
    f = DeltaFIFO("pods", observer=observer)
    f.add(obj("a"))
    pop(f)
    assert [(c["op"], c["delta"], c["depth"]) for c in observer.of("on_fifo")] == [
        ("queued", "Added", 1), ("popped", "Added", 0)]


def test_pop_batch_pops_every_queued_key_in_order_with_its_deltas() -> None:
    f = DeltaFIFO(known_objects=Store())
    f.replace([obj("a")], "1")
    f.update(obj("a", "2"))
    f.add(obj("b", "3"))
    f.add(obj("c", "4"))
    seen: list[tuple[str, list[tuple[str, Any]], bool]] = []
    n = f.pop_batch(lambda batch: seen.extend((key, [(d.type, d.obj) for d in ds], init) for key, ds, init in batch),
                    max_keys=2)
    assert n == 2 and len(f) == 1
    assert seen == [("default/a", [("Replaced", obj("a")), ("Updated", obj("a", "2"))], True),
                    ("default/b", [("Added", obj("b", "3"))], False)]
    assert f.has_synced()
    assert f.pop_batch(lambda batch: None) == 1 and len(f) == 0
    f.close()
    with pytest.raises(FIFOClosedError):
        f.pop_batch(lambda batch: None)


def test_a_burst_of_adds_wakes_every_blocked_popper() -> None:
    import threading

    f = DeltaFIFO()
    got: list[str] = []
    lock = threading.Lock()

    def popper() -> None:
        deltas = f.pop(lambda deltas, initial: None)
        with lock:
            got.append(deltas[0].obj["metadata"]["name"])

    threads = [threading.Thread(target=popper) for _ in range(3)]
    for t in threads:
        t.start()
    while f._poppers < 3:  # all three blocked in pop
        threading.Event().wait(0.001)
    for name in "abc":
        f.add(obj(name))
    for t in threads:
        t.join(5)
    assert sorted(got) == ["a", "b", "c"]
