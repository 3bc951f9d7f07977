"""Store/Indexer: keys, the namespace index, custom indexers, replace, thread safety."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.informers import DeletedFinalStateUnknown, Indexer, Store, object_key


def obj(name: str, namespace: str | None = "default", **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"metadata": meta}


def by_app(o: dict[str, Any]) -> list[str]:
    app = o["metadata"]["labels"].get("app")
    return [app] if app else []


def test_key_is_namespace_slash_name_or_name_for_cluster_scoped() -> None:
    assert object_key(obj("a")) == "default/a"
    assert object_key(obj("node-1", None)) == "node-1"
    assert object_key(DeletedFinalStateUnknown("ns/x", None)) == "ns/x"


def test_indexer_is_store() -> None:
    assert Indexer is Store


def test_add_update_delete_and_get() -> None:
    s = Store()
    s.add(obj("a", app="x"))
    s.update(obj("a", app="y"))
    assert s.get_by_key("default/a")["metadata"]["labels"] == {"app": "y"}
    assert s.get(obj("a")) == s.get_by_key("default/a")
    s.delete(obj("a"))
    assert s.get_by_key("default/a") is None
    s.delete(obj("never"))  # absent: ignored
    assert len(s) == 0


def test_reads_return_equal_fresh_dicts_so_mutating_one_cannot_corrupt_the_cache() -> None:
    s = Store(indexers={"app": by_app})
    stored = obj("a", app="web")
    s.add(stored)
    got = s.get_by_key("default/a")
    assert got == stored and got is not stored
    got["metadata"]["labels"]["app"] = "changed"
    assert s.get_by_key("default/a") == stored
    assert s.list() == [stored] and s.by_index("app", "web") == [stored]


def test_objects_that_are_not_json_are_kept_as_they_are() -> None:
    s = Store()
    odd = {"metadata": {"namespace": "default", "name": "a"}, "spec": {"big": 1 << 70, "tags": {"x"}}}
    s.add(odd)
    assert s.get_by_key("default/a") is odd


def test_upsert_returns_the_previous_object_and_upsert_entry_its_encoding() -> None:
    from controllers.informers.store import decode_entry

    s = Store()
    assert s.upsert("default/a", obj("a", app="1")) is None
    assert s.upsert("default/a", obj("a", app="2")) == obj("a", app="1")
    assert decode_entry(s.upsert_entry("default/a", obj("a", app="3"))) == obj("a", app="2")


def test_delete_accepts_a_tombstone() -> None:
    s = Store()
    s.add(obj("a"))
    s.delete(DeletedFinalStateUnknown("default/a", obj("a")))
    assert s.list_keys() == []


def test_namespace_index_is_built_in() -> None:
    s = Store()
    s.add(obj("a", "ns1"))
    s.add(obj("b", "ns1"))
    s.add(obj("c", "ns2"))
    s.add(obj("node", None))
    assert s.index_keys("namespace", "ns1") == ["ns1/a", "ns1/b"]
    assert s.list_index_func_values("namespace") == ["", "ns1", "ns2"]
    s.delete(obj("c", "ns2"))
    assert s.list_index_func_values("namespace") == ["", "ns1"]


def test_custom_indexer_follows_updates() -> None:
    s = Store(indexers={"app": by_app})
    s.add(obj("a", app="web"))
    s.add(obj("b", app="web"))
    assert sorted(o["metadata"]["name"] for o in s.by_index("app", "web")) == ["a", "b"]
    s.update(obj("a", app="db"))
    assert s.index_keys("app", "web") == ["default/b"]
    assert s.index_keys("app", "db") == ["default/a"]
    assert [o["metadata"]["name"] for o in s.index("app", obj("z", app="db"))] == ["a"]


def test_add_indexers_indexes_existing_items() -> None:
    s = Store()
    s.add(obj("a", app="web"))
    s.add_indexers({"app": by_app})
    assert s.index_keys("app", "web") == ["default/a"]
    with pytest.raises(ValueError):
        s.add_indexers({"app": by_app})


def test_unknown_index_raises() -> None:
    with pytest.raises(KeyError):
        Store().by_index("nope", "x")


def test_replace_rebuilds_items_and_indexes() -> None:
    s = Store(indexers={"app": by_app})
    s.add(obj("old", app="web"))
    s.replace([obj("a", app="db"), obj("b", "other", app="db")], "42")
    assert sorted(s.list_keys()) == ["default/a", "other/b"]
    assert s.index_keys("app", "web") == []
    assert s.index_keys("app", "db") == ["default/a", "other/b"]


def test_concurrent_writers_and_readers_keep_indexes_consistent() -> None:
    s = Store(indexers={"app": by_app})
    errors: list[str] = []

    def writer(w: int) -> None:
        for i in range(2000):
            s.add(obj(f"o{i % 50}", f"ns{w}", app=f"a{i % 3}"))
            if i % 7 == 0:
                s.delete(obj(f"o{(i * 3) % 50}", f"ns{w}"))

    def reader() -> None:
        for _ in range(2000):
            for o in s.by_index("app", "a1"):
                if o["metadata"]["labels"]["app"] != "a1":
                    errors.append(object_key(o))

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(3)] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for value in s.list_index_func_values("app"):
        assert all(by_app(s.get_by_key(k)) == [value] for k in s.index_keys("app", value))


OPS = st.lists(st.tuples(st.sampled_from(["add", "delete"]), st.sampled_from("abcd"),
                         st.sampled_from(["n1", "n2"]), st.sampled_from(["", "x", "y"])), max_size=60)


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_indexes_always_match_the_items(ops: list[tuple[str, str, str, str]]) -> None:
    s = Store(indexers={"app": by_app})
    model: dict[str, dict[str, Any]] = {}
    for op, name, ns, app in ops:
        o = obj(name, ns, **({"app": app} if app else {}))
        if op == "add":
            s.add(o)
            model[object_key(o)] = o
        else:
            s.delete(o)
            model.pop(object_key(o), None)
    assert sorted(s.list_keys()) == sorted(model)
    for index, func in (("app", by_app), ("namespace", lambda o: [o["metadata"]["namespace"]])):
        expected: dict[str, list[str]] = {}
        for key, o in model.items():
            for v in func(o):
                expected.setdefault(v, []).append(key)
        assert s.list_index_func_values(index) == sorted(expected)
        for v, keys in expected.items():
            assert s.index_keys(index, v) == sorted(keys)


def test_observer_sees_upserts_deletes_and_replace_contents(observer) -> None:
    s = Store("pods", observer=observer)
    s.add(obj("a"))
    s.delete(obj("a"))
    s.replace([obj("b")], "5")
    calls = observer.of("on_store")
    assert [(c["op"], c["key"]) for c in calls] == [("upsert", "default/a"), ("delete", "default/a"), ("replace", "")]
    assert calls[2]["obj"] == [("default/b", obj("b"))]


def test_a_non_compact_store_hands_out_its_own_references() -> None:
    s = Store(compact=False, indexers={"app": by_app})
    stored = obj("a", app="web")
    s.add(stored)
    assert s.get_by_key("default/a") is stored
    assert s.by_index("app", "web")[0] is stored
    assert s.upsert("default/a", obj("a", app="db")) is stored
    assert s.index_keys("app", "db") == ["default/a"] and s.index_keys("app", "web") == []
