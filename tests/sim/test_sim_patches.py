"""Strategic merge patch directives and server-side apply ownership, on plain dicts."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.sim.apply import server_side_apply
from controllers.sim.errors import StatusError
from controllers.sim.patch import json_patch, merge_patch
from controllers.sim.resources import Registry
from controllers.sim.strategic import StrategicMerge

POD = ("", "pods")
DEPLOY = ("apps", "deployments")


def pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": list(containers)}}


def test_merge_key_patches_one_container_and_keeps_the_rest() -> None:
    live = pod({"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"})
    out = StrategicMerge(POD).apply(live, {"spec": {"containers": [{"name": "b", "image": "b:2"}]}})
    assert out["spec"]["containers"] == [{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:2"}]


def test_patch_delete_directive_removes_item_and_leaves_no_directive() -> None:
    live = pod({"name": "a", "image": "a", "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}]},
               {"name": "b", "image": "b"})
    patch = {"spec": {"$setElementOrder/containers": [{"name": "a"}], "containers": [
        {"name": "a", "$setElementOrder/env": [{"name": "X"}], "env": [{"$patch": "delete", "name": "Y"}]},
        {"$patch": "delete", "name": "b"}]}}
    out = StrategicMerge(POD).apply(live, patch)
    assert out["spec"]["containers"] == [{"name": "a", "image": "a", "env": [{"name": "X", "value": "1"}]}]
    assert "$" not in repr(out)


def test_set_element_order_reorders_merged_list() -> None:
    live = pod({"name": "a", "image": "a"}, {"name": "b", "image": "b"})
    out = StrategicMerge(POD).apply(live, {"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["b", "a"]


def test_retain_keys_drops_members_of_a_union() -> None:
    live = {"spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}}}
    out = StrategicMerge(DEPLOY).apply(live, {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert out["spec"]["strategy"] == {"type": "Recreate"}


def test_null_deletes_map_key_and_replace_directive_replaces_map() -> None:
    live = {"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"nodeSelector": {"x": "1", "y": "2"}}}
    out = StrategicMerge(POD).apply(live, {"metadata": {"labels": {"a": None}},
                                           "spec": {"nodeSelector": {"$patch": "replace", "z": "3"}}})
    assert out["metadata"]["labels"] == {"b": "2"}
    assert out["spec"]["nodeSelector"] == {"z": "3"}


def test_primitive_set_merge_and_delete_from_primitive_list() -> None:
    live = {"metadata": {"finalizers": ["a", "b"]}}
    added = StrategicMerge(POD).apply(live, {"metadata": {"finalizers": ["c"]}})
    # The API server puts what the patch names first (strategicpatch normalizeElementOrder).
    assert added["metadata"]["finalizers"] == ["c", "a", "b"]
    removed = StrategicMerge(POD).apply(added, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert removed["metadata"]["finalizers"] == ["c", "b"]


def test_atomic_list_is_replaced_whole() -> None:
    live = {"spec": {"tolerations": [{"key": "a"}, {"key": "b"}]}}
    out = StrategicMerge(POD).apply(live, {"spec": {"tolerations": [{"key": "c"}]}})
    assert out["spec"]["tolerations"] == [{"key": "c"}]


def test_merge_patch_and_json_patch_basics() -> None:
    assert merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": [1]}}) == {"a": {"c": 2, "d": [1]}}
    doc = json_patch({"a": [1, 2]}, [{"op": "add", "path": "/a/-", "value": 3},
                                     {"op": "move", "from": "/a/0", "path": "/b"},
                                     {"op": "copy", "from": "/b", "path": "/c"}])
    assert doc == {"a": [2, 3], "b": 1, "c": 1}
    # As on a real API server: replacing a key the object lacks adds it; a missing parent is a 422.
    assert json_patch({"a": 1}, [{"op": "replace", "path": "/zzz", "value": 1}]) == {"a": 1, "zzz": 1}
    with pytest.raises(StatusError) as err:
        json_patch({"a": 1}, [{"op": "replace", "path": "/zzz/y", "value": 1}])
    assert err.value.code == 422


def _pod_type():  # type: ignore[no-untyped-def]
    return Registry.with_builtins().lookup("", "v1", "pods")


def test_apply_removes_fields_the_manager_stopped_applying() -> None:
    rt = _pod_type()
    first = pod({"name": "a", "image": "a"}, {"name": "b", "image": "b"})
    live, managed = server_side_apply(rt, None, first, manager="me", force=False, now="t")
    live["metadata"]["managedFields"] = managed
    second = pod({"name": "a", "image": "a2"})
    merged, _ = server_side_apply(rt, live, second, manager="me", force=False, now="t")
    assert merged["spec"]["containers"] == [{"name": "a", "image": "a2"}]


def test_apply_conflicts_with_other_manager_unless_forced() -> None:
    rt = _pod_type()
    live, managed = server_side_apply(rt, None, pod({"name": "a", "image": "a"}), manager="alice", force=False,
                                      now="t")
    live["metadata"]["managedFields"] = managed
    with pytest.raises(StatusError) as err:
        server_side_apply(rt, live, pod({"name": "a", "image": "b"}), manager="bob", force=False, now="t")
    assert err.value.code == 409 and 'conflict with "alice"' in err.value.message
    merged, entries = server_side_apply(rt, live, pod({"name": "a", "image": "b"}), manager="bob", force=True, now="t")
    assert merged["spec"]["containers"][0]["image"] == "b"
    alice = next(e for e in entries if e["manager"] == "alice")
    assert "f:image" not in repr(alice["fieldsV1"])


def test_apply_keeps_fields_shared_with_another_owner() -> None:
    rt = _pod_type()
    live, managed = server_side_apply(rt, None, pod({"name": "a", "image": "a"}), manager="alice", force=False,
                                      now="t")
    live["metadata"]["managedFields"] = managed
    live, managed = server_side_apply(rt, live, pod({"name": "a", "image": "a"}), manager="bob", force=False, now="t")
    live["metadata"]["managedFields"] = managed
    merged, _ = server_side_apply(rt, live, {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}},
                                  manager="alice", force=False, now="t")
    assert merged["spec"]["containers"] == [{"name": "a", "image": "a"}]
