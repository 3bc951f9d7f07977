"""LazyObject, an update handler's ``old`` from the compact cache: decoded on first read, read like
the dict it stands for, refused with a clear error where a real dict is required."""

from __future__ import annotations

import copy
import json
import pickle

import orjson
import pytest

from controllers.informers import LazyObject, decoded

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "a", "namespace": "default", "resourceVersion": "7",
                                                       "labels": {"app": "web"}},
       "spec": {"containers": [{"name": "c", "image": "nginx"}]}, "status": {"phase": "Running"}}


def lazy() -> LazyObject:
    return LazyObject(orjson.dumps(POD))


def test_nothing_is_decoded_until_read_and_then_once() -> None:
    old = lazy()
    assert not old.is_decoded
    assert old["metadata"]["name"] == "a"
    assert old.is_decoded
    assert old["metadata"] is old["metadata"]  # one decode: reads share its values
    assert old.object is old.object and type(old.object) is dict


def test_it_reads_like_the_dict() -> None:
    old = lazy()
    assert old == POD and POD == old and old != {**POD, "kind": "Node"}
    assert old == lazy() and old is not lazy()
    assert list(old) == list(POD) and list(old.keys()) == list(POD.keys()) and len(old) == len(POD)
    assert dict(old.items()) == POD and list(old.values()) == list(POD.values())
    assert "spec" in old and "nope" not in old
    assert old.get("status") == {"phase": "Running"} and old.get("nope", 1) == 1
    assert dict(old) == POD and {**old} == POD and old.copy() == POD and type(old.copy()) is dict
    assert copy.deepcopy(old) == POD and pickle.loads(pickle.dumps(old)) == POD
    assert repr(old).startswith("LazyObject({") and "nginx" in repr(old)
    with pytest.raises(KeyError):
        old["nope"]
    with pytest.raises(TypeError):
        hash(old)


def test_a_mutation_stays_in_that_object() -> None:
    raw = orjson.dumps(POD)
    first, second = LazyObject(raw), LazyObject(raw)
    first["metadata"]["labels"]["app"] = "changed"
    assert first["metadata"]["labels"]["app"] == "changed"
    assert second["metadata"]["labels"]["app"] == "web"


def test_encoders_that_need_a_dict_refuse_it_and_decoded_gives_them_one() -> None:
    old = lazy()
    with pytest.raises(TypeError):
        orjson.dumps(old)
    with pytest.raises(TypeError):
        json.dumps(old)
    assert not isinstance(old, dict)
    assert orjson.loads(orjson.dumps(decoded(old))) == POD
    assert decoded(POD) is POD and decoded(None) is None


def test_the_example_handlers_read_an_old_lazy_object_as_they_read_a_dict() -> None:
    # The Deployment logger tells a resync from an update by old's resourceVersion; it checked
    # isinstance(old, dict), so from the compact cache every resync would have logged as an update.
    from controllers.examples.deployments import _rv

    assert _rv(lazy()) == _rv(POD) == "7"
