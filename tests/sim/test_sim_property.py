"""Property: any sequence of writes, replayed from a watch started at RV 0, rebuilds the final state.

This is the contract informers rely on (list+watch ≡ state): every committed change appears in the
stream exactly once, in RV order, with the object as stored.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controllers.clock import FakeClock
from controllers.sim.errors import StatusError
from controllers.sim.gc import GarbageCollector
from controllers.sim.resources import Registry
from controllers.sim.store import Store, copy_obj

NAMES = st.sampled_from(["a", "b", "c", "d"])
NAMESPACES = st.sampled_from(["default", "other"])
OPS = st.lists(st.tuples(st.sampled_from(["create", "update", "label", "finalize", "delete", "release"]),
                         NAMESPACES, NAMES, st.integers(0, 3)), max_size=40)


def _replay(store: Store, pending: Any) -> dict[tuple[str, str], dict[str, Any]]:
    state: dict[tuple[str, str], dict[str, Any]] = {}
    last_rv = 0
    for type_, _, obj in pending:
        meta = obj["metadata"]
        rv = int(meta["resourceVersion"])
        assert rv > last_rv or type_ == "ADDED"
        last_rv = max(last_rv, rv)
        key = (meta["namespace"], meta["name"])
        if type_ == "DELETED":
            state.pop(key, None)
        else:
            state[key] = obj
    return state


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS)
def test_watch_from_rv_zero_replays_to_final_state(ops: list[tuple[str, str, str, int]]) -> None:
    store = Store(Registry.with_builtins(), clock=FakeClock(), history_limit=10_000)
    GarbageCollector(store)
    registry = store.registry
    ns_rt = registry.lookup("", "v1", "namespaces")
    cm = registry.lookup("", "v1", "configmaps")
    assert ns_rt is not None and cm is not None
    for ns in ("default", "other"):
        store.create(ns_rt, None, {"metadata": {"name": ns}})
    start_rv = str(store.rv)
    early = store.watch(cm, None, resource_version=start_rv, label_match=lambda o: True, field_match=lambda o: True,
                        filtered=False)
    for op, ns, name, n in ops:
        current = store.find(cm.key, ns, name)
        try:
            if op == "create":
                store.create(cm, ns, {"metadata": {"name": name}, "data": {"n": str(n)}})
            elif current is None:
                continue
            elif op == "update":
                new = copy_obj(current)
                new["data"] = {"n": str(n)}
                store.update(cm, ns, name, new)
            elif op == "label":
                new = copy_obj(current)
                new["metadata"]["labels"] = {"n": str(n)}
                store.update(cm, ns, name, new)
            elif op == "finalize":
                new = copy_obj(current)
                new["metadata"]["finalizers"] = ["x/hold"]
                store.update(cm, ns, name, new)
            elif op == "release":
                new = copy_obj(current)
                new["metadata"]["finalizers"] = []
                store.update(cm, ns, name, new)
            elif op == "delete":
                store.delete(cm, ns, name)
        except StatusError as e:
            assert e.code in (404, 409, 422)
    final = {k: o for k, o in store.bucket(cm.key).objects.items()}
    # A watch opened before the writes, one resumed from history at that RV, and one from RV 0
    # (synthetic ADDEDs) must all reproduce exactly what the store holds.
    assert _replay(store, early.pending) == final
    late = store.watch(cm, None, resource_version="0", label_match=lambda o: True, field_match=lambda o: True,
                       filtered=False)
    assert _replay(store, late.pending) == final
    from_history = store.watch(cm, None, resource_version=start_rv, label_match=lambda o: True,
                               field_match=lambda o: True, filtered=False)
    assert _replay(store, from_history.pending) == final
