"""Fuzz the simulator's request bodies over real HTTP, where ``tests/sim/test_sim_fuzz.py`` (random
JSON for every verb and media type) does not reach: bodies that get past the decoders.

- JSON patches made of real operations (add/remove/replace/move/copy/test, and broken ones) on
  real paths of a stored object;
- strategic-merge patches with every directive (``$patch``, ``$retainKeys``,
  ``$setElementOrder/...``, ``$deleteFromPrimitiveList/...``) on list and map fields;
- YAML that JSON cannot say (tags, timestamps, sets, NaN, binary, several documents, aliases, keys
  that are not strings) for creates and server-side apply;
- protobuf bodies made by Go (``tests/sim/fixtures/protobuf_bodies.json``) with bytes flipped,
  cut, inserted or dropped, so that the decoder sees well-formed envelopes with damaged messages.

Each: an answer below 500; a refusal is a ``Status`` whose message is a sentence; and a refused
request leaves every stored object exactly as it was (the whole store, not only the resourceVersion).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from controllers.sim import SimCluster
from controllers.sim.codec import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH
from controllers.sim.protobuf import MEDIA_TYPE
from tests.fuzz.budget import assert_clear, budget, record
from tests.sim.test_sim_bad_input import http

TARGET = "sim_bodies"
FIXTURES = orjson.loads((Path(__file__).parent.parent / "sim" / "fixtures" / "protobuf_bodies.json").read_bytes())
GO_BODIES = {name: bytes.fromhex(fx["body"]) for name, fx in FIXTURES.items() if name != "generated"}
PATHS = {"pod": "/api/v1/namespaces/default/pods", "deployment": "/apis/apps/v1/namespaces/default/deployments",
         "deployment-basic": "/apis/apps/v1/namespaces/default/deployments",
         "job": "/apis/batch/v1/namespaces/default/jobs", "replicaset": "/apis/apps/v1/namespaces/default/replicasets",
         "statefulset": "/apis/apps/v1/namespaces/default/statefulsets", "node": "/api/v1/nodes",
         "crd": "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
         "scale": "/apis/apps/v1/namespaces/default/deployments/web/scale"}

SEED = {
    "configmaps": {"metadata": {"name": "f", "labels": {"a": "1"}, "finalizers": ["x/y"]}, "data": {"k": "v"}},
    "deployments": {"metadata": {"name": "f"}, "spec": {
        "replicas": 1, "selector": {"matchLabels": {"app": "f"}},
        "template": {"metadata": {"labels": {"app": "f"}}, "spec": {"containers": [
            {"name": "a", "image": "nginx", "ports": [{"containerPort": 80}], "env": [{"name": "E", "value": "1"}]},
            {"name": "b", "image": "busybox"}]}}}},
}
BASES = {"configmaps": "/api/v1/namespaces/{ns}/configmaps", "deployments": "/apis/apps/v1/namespaces/{ns}/deployments"}


@pytest.fixture(scope="module")
def quiet() -> Iterator[tuple[SimCluster, str]]:
    """A cluster where only the requests under test write (no controllers, kubelet paused), with a
    ConfigMap and a Deployment ``f`` to patch."""
    from tests.sim.conftest import make_namespace

    cluster = SimCluster(port=0, control_plane=False).start()
    cluster.call(cluster.kubelet.pause)
    ns = make_namespace(cluster)
    for plural, obj in SEED.items():
        status, body = http(cluster, "POST", BASES[plural].format(ns=ns), json.dumps(obj).encode())
        assert status == 201, body
    yield cluster, ns
    cluster.stop()


def stored(sim: SimCluster) -> bytes:
    """Everything the store holds, serialized (a copy: a change made in place would show too)."""
    return sim.call(lambda: orjson.dumps(sim.store.dump()))


def check(sim: SimCluster, method: str, path: str, body: bytes, ctype: str) -> None:
    """Send one request; a refusal must be a clear Status and change nothing."""
    before = stored(sim)
    status, payload = http(sim, method, path, body, ctype)
    # Server-side apply of a value its type cannot hold is the real server's 500 (typed.py), still a Status.
    typed_patch = ctype == APPLY_PATCH and status == 500 and str(payload.get("message", "")).startswith(
        "failed to create typed patch object (")
    # So is an update whose resourceVersion is not a number (a damaged protobuf body can say ":2"): the
    # registry's strconv.ParseUint error, passed on as the real server does (tests/sim/test_sim_status.py).
    unparseable_rv = method == "PUT" and status == 500 and str(payload.get("message", "")).startswith(
        "strconv.ParseUint: parsing ")
    assert status < 500 or typed_patch or unparseable_rv, (status, payload)
    if status < 400:
        record(TARGET, None)
        return
    assert payload.get("kind") == "Status" and payload.get("code") == status, payload
    assert_clear(payload.get("message"), context=(method, path, body[:300]))
    record(TARGET, f"{status} {payload.get('reason')}: {payload.get('message')}")
    assert stored(sim) == before, f"a refused request changed the store: {method} {path} {body[:300]!r}"


def reseed(sim: SimCluster, ns: str, plural: str) -> None:
    """Put ``f`` back when an accepted patch or an earlier example deleted or mangled it."""
    path = BASES[plural].format(ns=ns)
    http(sim, "DELETE", f"{path}/f", None)
    sim.call(lambda: _drop_finalizers(sim, ns, plural))
    http(sim, "POST", path, json.dumps(SEED[plural]).encode())


def _drop_finalizers(sim: SimCluster, ns: str, plural: str) -> None:
    rt = sim.registry.lookup("apps" if plural == "deployments" else "", "v1", plural)
    current = sim.store.find(rt.key, ns, "f")
    if current is not None and current["metadata"].get("finalizers"):
        current = {**current, "metadata": {**current["metadata"], "finalizers": []}}
        sim.store.update(rt, ns, "f", current)


# -- JSON patch ----------------------------------------------------------------------------------
POINTER = st.sampled_from([
    "/metadata/labels/a", "/metadata/labels/new", "/metadata/labels", "/metadata/name", "/metadata/finalizers/0",
    "/metadata/finalizers/-", "/metadata/finalizers/9", "/metadata/resourceVersion", "/metadata/uid", "/data/k",
    "/data", "/spec/replicas", "/spec/template/spec/containers/0/image", "/spec/template/spec/containers/1",
    "/spec/template/spec/containers/-", "/spec/selector/matchLabels/app", "/status", "/kind", "/apiVersion",
    "", "/", "/metadata/labels/a~1b", "/metadata/labels/~2", "/x/y/z", "/spec/template/spec/containers/01",
    "/metadata/finalizers/-1", "/metadata/finalizers/99999999999999999999"])
VALUE = st.none() | st.booleans() | st.integers(-2, 5) | st.text(max_size=6) | st.sampled_from(
    [{}, [], {"a": "1"}, ["x/z"], {"name": "c", "image": "i"}, "v1", "ConfigMap"])
OP = st.fixed_dictionaries({"op": st.sampled_from(["add", "remove", "replace", "move", "copy", "test", "bogus", ""]),
                            "path": POINTER}, optional={"value": VALUE, "from": POINTER})
JSON_PATCHES = st.lists(OP | st.dictionaries(st.sampled_from(["op", "path", "value"]), VALUE, max_size=3),
                        max_size=4)


@budget(80)
@given(plural=st.sampled_from(sorted(SEED)), ops=JSON_PATCHES, sub=st.sampled_from(["", "/status"]))
@example(plural="configmaps", ops=[{"op": "add", "path": "/metadata/finalizers/99999999999999999999",
                                    "value": "x/z"}], sub="")
def test_json_patches_of_real_operations(quiet: tuple[SimCluster, str], plural: str, ops: list, sub: str) -> None:
    sim, ns = quiet
    check(sim, "PATCH", BASES[plural].format(ns=ns) + "/f" + sub, json.dumps(ops).encode(), JSON_PATCH)
    reseed(sim, ns, plural)


# -- strategic merge -------------------------------------------------------------------------------
DIRECTIVE_VALUE = st.sampled_from(["replace", "delete", "merge", "bogus", None, 1, [], ["a"], {}])
CONTAINER = st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c"]) | VALUE}, optional={
    "image": VALUE, "$patch": DIRECTIVE_VALUE, "ports": st.lists(st.fixed_dictionaries(
        {"containerPort": st.sampled_from([80, 81, "x", None])}, optional={"$patch": DIRECTIVE_VALUE}), max_size=2)})
POD_SPEC = st.fixed_dictionaries({}, optional={
    "containers": st.lists(CONTAINER, max_size=3) | VALUE,
    "$setElementOrder/containers": st.lists(st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c"])})
                                            | VALUE, max_size=3) | VALUE,
    "$retainKeys": st.lists(st.sampled_from(["containers", "volumes", "x"]), max_size=2) | VALUE,
    "$patch": DIRECTIVE_VALUE})
STRATEGIC = st.one_of(
    st.fixed_dictionaries({"spec": st.fixed_dictionaries({"template": st.fixed_dictionaries({"spec": POD_SPEC})},
                                                         optional={"replicas": VALUE, "$patch": DIRECTIVE_VALUE})}),
    st.fixed_dictionaries({"metadata": st.fixed_dictionaries({}, optional={
        "labels": st.dictionaries(st.sampled_from(["a", "b", "$patch"]), VALUE, max_size=2) | VALUE,
        "finalizers": st.lists(st.text(max_size=4), max_size=2) | VALUE,
        "$deleteFromPrimitiveList/finalizers": st.lists(VALUE, max_size=2) | VALUE,
        "$setElementOrder/finalizers": st.lists(VALUE, max_size=2) | VALUE})}, optional={"data": VALUE}),
    st.fixed_dictionaries({"$patch": DIRECTIVE_VALUE}))


@budget(80)
@given(plural=st.sampled_from(sorted(SEED)), patch=STRATEGIC)
def test_strategic_merge_patches_with_every_directive(quiet: tuple[SimCluster, str], plural: str,
                                                      patch: dict) -> None:
    sim, ns = quiet
    check(sim, "PATCH", BASES[plural].format(ns=ns) + "/f", json.dumps(patch).encode(), STRATEGIC_PATCH)
    reseed(sim, ns, plural)


# -- YAML that JSON cannot say --------------------------------------------------------------------
YAML_VALUE = st.sampled_from([
    "!!binary aGVsbG8=", "2024-01-01", "2024-01-01T10:00:00Z", ".nan", ".inf", "-.inf", "!!set {a, b}",
    "!!float 1", "0x1F", "0o17", "1_000", "~", "[a, b]", "{a: 1}", "&x [1]", "*x", "!!str 5", "!!python/tuple [1]",
    "!<tag:yaml.org,2002:int> 3", "? [a]\n  : b", "99999999999999999999999", "'quoted'", "|\n    block", "yes", "no"])
YAML_KEY = st.sampled_from(["name", "k", "1", "2024-01-01", "true", "null", "[a]", "? [a]"])


def yaml_doc(kind: str, key: str, value: str, docs: int) -> bytes:
    head = "apiVersion: v1\nkind: ConfigMap\n" if kind == "cm" else "apiVersion: apps/v1\nkind: Deployment\n"
    one = f"{head}metadata:\n  name: y\n  labels:\n    {key}: {value}\ndata:\n  {key}: {value}\n"
    return "---\n".join([one] * docs).encode()


@budget(60)
@given(key=YAML_KEY, value=YAML_VALUE, docs=st.integers(1, 2),
       how=st.sampled_from(["create", "apply"]))
def test_yaml_that_json_cannot_say(quiet: tuple[SimCluster, str], key: str, value: str, docs: int,
                                   how: str) -> None:
    sim, ns = quiet
    body = yaml_doc("cm", key, value, docs)
    path = BASES["configmaps"].format(ns=ns)
    if how == "create":
        check(sim, "POST", path, body, "application/yaml")
    else:
        check(sim, "PATCH", f"{path}/y?fieldManager=fuzz", body, APPLY_PATCH)
    http(sim, "DELETE", f"{path}/y", None)


# -- protobuf made by Go, damaged ---------------------------------------------------------------
def damage(body: bytes, edits: list[tuple[str, int, int]]) -> bytes:
    data = bytearray(body)
    for how, at, byte in edits:
        i = 4 + at % max(1, len(data) - 4)  # past the magic number: the envelope and the message
        if how == "flip":
            data[i % len(data)] ^= byte or 1
        elif how == "set":
            data[i % len(data)] = byte
        elif how == "insert":
            data[i:i] = bytes([byte])
        elif how == "drop":
            del data[i:i + 1 + byte % 4]
        else:
            del data[i:]
    return bytes(data)


EDITS = st.lists(st.tuples(st.sampled_from(["flip", "set", "insert", "drop", "cut"]), st.integers(0, 4000),
                           st.integers(0, 255)), min_size=1, max_size=3)


@budget(100)
@given(name=st.sampled_from(sorted(GO_BODIES)), edits=EDITS)
@example(name="scale", edits=[("flip", 122, 14)])  # the Scale's resourceVersion made ":2": the real server's 500
def test_go_protobuf_bodies_with_damage(quiet: tuple[SimCluster, str], name: str, edits: list) -> None:
    sim, _ = quiet
    if name == "scale":  # the Scale is deployment "web"'s: made from Go's own body when an example has not
        http(sim, "POST", PATHS["deployment-basic"], GO_BODIES["deployment-basic"], MEDIA_TYPE)
    body = damage(GO_BODIES[name], edits)
    method = "PUT" if name == "scale" else "POST"
    check(sim, method, PATHS[name], body, MEDIA_TYPE)


@pytest.mark.parametrize("ctype", [MERGE_PATCH, STRATEGIC_PATCH, JSON_PATCH])
def test_patches_that_only_touch_status_leave_everything_else_alone(quiet: tuple[SimCluster, str], ctype: str) -> None:
    """A control: the checks above must see a change when a patch is accepted."""
    sim, ns = quiet
    path = BASES["configmaps"].format(ns=ns) + "/f"
    body = (json.dumps([{"op": "add", "path": "/metadata/labels/z", "value": "1"}]) if ctype == JSON_PATCH
            else json.dumps({"metadata": {"labels": {"z": "1"}}})).encode()
    before = stored(sim)
    status, _ = http(sim, "PATCH", path, body, ctype)
    assert status == 200 and stored(sim) != before
    reseed(sim, ns, "configmaps")
