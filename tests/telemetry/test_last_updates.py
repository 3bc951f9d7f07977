"""LastUpdates: the last (old, new) pair of each key's update handler call, redacted and bounded by
count and by bytes."""

from __future__ import annotations

import orjson
import pytest

from controllers.clock import FakeClock
from controllers.telemetry.last_updates import ENTRY_OVERHEAD, LastUpdates
from controllers.telemetry.redaction import LAST_APPLIED
from controllers.telemetry.telemetry_observer import TelemetryObserver


def cm(name: str, rv: int, value: str = "v") -> dict:
    return {"kind": "ConfigMap", "metadata": {"name": name, "namespace": "default", "resourceVersion": str(rv)},
            "data": {"k": value}}


def record(lu: LastUpdates, name: str, old_rv: int, new_rv: int, value: str = "v", handler: str = "h") -> None:
    lu.record("cms", f"default/{name}", handler=handler, old=cm(name, old_rv, value), new=cm(name, new_rv, value),
              old_rv=str(old_rv), new_rv=str(new_rv), at=1.0)


def test_the_count_bound_evicts_the_least_recently_updated_key():
    lu = LastUpdates(max_keys=3, max_bytes=1 << 20)
    for i in range(3):
        record(lu, f"c{i}", 1, 2)
    record(lu, "c0", 2, 3)  # c0 updated again: now the newest
    record(lu, "c3", 1, 2)
    assert len(lu) == 3 and lu.evicted == 1
    assert lu.get("cms", "default/c1") is None, "the least recently updated key goes first"
    assert lu.get("cms", "default/c0").new_rv == "3"
    assert lu.bytes == sum(lu.get("cms", f"default/{n}").size for n in ("c0", "c2", "c3"))


def test_the_byte_bound_holds_and_a_pair_bigger_than_the_budget_is_not_kept():
    big = "x" * 10_000
    pair_size = len(orjson.dumps(cm("c00", 1, big))) * 2 + len("cms") + len("default/c00") + ENTRY_OVERHEAD
    lu = LastUpdates(max_keys=1000, max_bytes=pair_size * 5)
    for i in range(20):
        record(lu, f"c{i:02d}", 1, 2, big)
        assert lu.bytes <= lu.max_bytes
    assert len(lu) == 5 and lu.evicted == 15 and lu.bytes == pair_size * 5
    assert [lu.get("cms", f"default/c{i:02d}") is not None for i in (14, 15, 19)] == [False, True, True]
    small = LastUpdates(max_keys=10, max_bytes=pair_size - 1)
    record(small, "c00", 1, 2)
    record(small, "c00", 5, 6, big)
    assert len(small) == 0 and small.bytes == 0, "an oversized pair is dropped, and so is the stale one"


def test_resyncs_repeats_and_a_lagging_handlers_older_pair_keep_the_last_change():
    lu = LastUpdates()
    record(lu, "a", 1, 2, handler="first")
    record(lu, "a", 2, 2)  # resync: old is new
    record(lu, "a", 1, 2, handler="second")  # the same pair for another handler on the informer
    pair = lu.get("cms", "default/a")
    assert (pair.old_rv, pair.new_rv, pair.handler) == ("1", "2", "first")
    record(lu, "a", 2, 5, handler="fast")
    assert lu.get("cms", "default/a").old is pair.new, "a chained update reuses the encoding it already has"
    record(lu, "a", 1, 2, handler="slow")  # a handler thread that lags behind
    assert lu.get("cms", "default/a").new_rv == "5"


def test_pairs_are_kept_redacted():
    lu = LastUpdates()
    secret = {"kind": "Secret", "metadata": {"name": "s", "resourceVersion": "1",
                                             "annotations": {LAST_APPLIED: '{"data":{"pw":"aHVudGVyMg=="}}'}},
              "data": {"pw": "aHVudGVyMg=="}}
    lu.record("secrets", "default/s", handler="h", old=secret, new={**secret, "metadata": {
        **secret["metadata"], "resourceVersion": "2"}}, old_rv="1", new_rv="2", at=1.0)
    pair = lu.get("secrets", "default/s")
    assert b"aHVudGVyMg" not in pair.old + pair.new and b"<redacted>" in pair.new


def test_bad_bounds_are_refused():
    with pytest.raises(ValueError):
        LastUpdates(max_keys=0)


def test_the_observer_records_update_handler_calls_only(publisher_factory):
    clock = FakeClock()
    obs = TelemetryObserver(publisher_factory(), worker="w1", clock=clock)
    obs.on_handler("cms", handler="h", event="add", key="default/a", outcome="ok", duration=0.0, new=cm("a", 1))
    obs.on_handler("cms", handler="h", event="update", key="default/a", outcome="error", duration=0.0,
                   error="boom", old=cm("a", 1, "old"), new=cm("a", 2, "new"))
    obs.on_handler("cms", handler="h", event="delete", key="default/a", outcome="ok", duration=0.0, new=cm("a", 2))
    pair = obs.last_updates.get("cms", "default/a")
    assert orjson.loads(pair.old)["data"] == {"k": "old"} and orjson.loads(pair.new)["data"] == {"k": "new"}
    assert pair.at == clock.wall() * 1000 and len(obs.last_updates) == 1
