"""The protobuf body decoder: on wire bytes built by hand (Go's JSON semantics, and every malformed
input a 400 naming the message and field, over real HTTP with the store untouched), on bodies made
by Go's own serializer (decoded to exactly the JSON Go writes), and the generated schema and
fixtures checked against the Go generator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controllers.sim import SimCluster
from controllers.sim.errors import StatusError
from controllers.sim.protobuf import (
    FORMS,
    KINDS,
    MAGIC,
    MESSAGES,
    SCALARS,
    SCHEMA,
    SCHEMA_FILE,
    decode,
    go_duration,
    message_for,
    read_fields,
)
from controllers.sim.resources import BUILTINS
from tests.sim.conftest import namespace_state


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative ints go on the wire as their 64-bit two's complement
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f(number: int, value: int | bytes | str) -> bytes:
    """One field: ints as varints, bytes/str as length-delimited."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    data = value.encode() if isinstance(value, str) else value
    return varint(number << 3 | 2) + varint(len(data)) + data


def entry(key: str, value: bytes | str) -> bytes:
    return f(1, key) + f(2, value)


def envelope(kind: str, raw: bytes, api_version: str = "v1") -> bytes:
    return MAGIC + f(1, f(1, api_version) + f(2, kind)) + f(2, raw)


def meta(name: str, *extra: bytes) -> bytes:
    return f(1, f(1, name) + f(8, b"") + b"".join(extra))


def test_configmap_maps_and_binary_data_decode_like_go_json() -> None:
    raw = meta("x", f(11, entry("app", "web"))) + f(2, entry("a", "b")) + f(2, entry("c", "")) \
        + f(3, entry("bin", b"\x00\xff"))
    assert decode(envelope("ConfigMap", raw)) == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "x", "labels": {"app": "web"}},
        "data": {"a": "b", "c": ""}, "binaryData": {"bin": "AP8="}}


def test_struct_values_always_marshal_and_pointers_only_when_present() -> None:
    # DeploymentSpec: replicas (*int32) present as 0, strategy (a struct) absent, paused (omitempty) false.
    # The empty creationTimestamp is a zero Time, which ObjectMeta's omitzero (apimachinery 0.35+) drops.
    container = f(1, "app") + f(2, "nginx")
    template = f(1, b"") + f(2, f(2, container))
    raw = meta("d") + f(2, f(1, 0) + f(2, f(1, entry("app", "d"))) + f(3, template) + f(7, 0))
    spec = decode(envelope("Deployment", raw, "apps/v1"))["spec"]
    assert spec == {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                    "template": {"metadata": {},
                                 "spec": {"containers": [{"name": "app", "image": "nginx", "resources": {}}]}},
                    "strategy": {}}


def test_non_omitempty_fields_marshal_their_zero_value() -> None:
    # ContainerPort.containerPort and Container.name have no omitempty; PodSpec.containers is a nil slice.
    raw = meta("d") + f(2, f(3, f(2, f(2, f(6, b"")))))
    template_spec = decode(envelope("Deployment", raw, "apps/v1"))["spec"]["template"]["spec"]
    assert template_spec == {"containers": [{"name": "", "ports": [{"containerPort": 0}], "resources": {}}]}
    assert decode(envelope("Deployment", meta("d") + f(2, f(3, f(2, b"")))))["spec"]["template"]["spec"] == \
        {"containers": None}


def test_int_or_string_quantity_time_and_negative_ints() -> None:
    port = f(3, 80) + f(4, f(1, 1) + f(3, "http"))
    svc = decode(envelope("Service", meta("s") + f(2, f(1, port) + f(12, -1))))
    assert svc["spec"]["ports"] == [{"port": 80, "targetPort": "http"}]
    assert svc["spec"]["healthCheckNodePort"] == -1
    resources = f(1, entry("cpu", f(1, "500m"))) + f(2, entry("memory", f(1, "64Mi")))
    container = f(1, "c") + f(8, resources)
    deleted = f(9, f(1, 1_700_000_000) + f(2, 5))
    raw = meta("d", deleted) + f(2, f(3, f(2, f(2, container))))
    d = decode(envelope("Deployment", raw, "apps/v1"))
    assert d["metadata"]["deletionTimestamp"] == "2023-11-14T22:13:20Z"
    assert d["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "500m"},
                                                                          "requests": {"memory": "64Mi"}}


def test_packed_repeated_varints_and_merged_message_occurrences() -> None:
    # Two occurrences of ObjectMeta merge (the second adds a label), like proto2 embedded messages.
    raw = f(1, f(1, "n")) + f(1, f(11, entry("k", "v")))
    assert decode(envelope("Namespace", raw))["metadata"] == {"name": "n", "labels": {"k": "v"}}
    fields = list(read_fields(f(1, 150) + f(2, b"\x01\x02")))
    assert fields == [(1, 0, 150), (2, 2, b"\x01\x02")]


def test_inline_struct_fields_flatten_into_the_parent() -> None:
    ref = f(3, f(1, f(1, "cfg")) + f(2, "key"))  # EnvVarSource.configMapKeyRef{LocalObjectReference, key}
    env = f(1, "MODE") + f(3, ref)
    raw = meta("d") + f(2, f(3, f(2, f(2, f(1, "c") + f(7, env)))))
    container = decode(envelope("Deployment", raw, "apps/v1"))["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "key"}}}]


def test_managed_fields_carry_their_fields_v1_json_verbatim() -> None:
    entry_ = f(1, "kubectl") + f(2, "Update") + f(6, "FieldsV1") + f(7, f(1, b'{"f:data":{".":{}}}'))
    empty = f(1, "other") + f(7, b"")
    got = decode(envelope("ConfigMap", meta("x", f(17, entry_), f(17, empty))))["metadata"]["managedFields"]
    assert got == [{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:data": {".": {}}}}, {"manager": "other", "fieldsV1": None}]


def test_delete_options_decode() -> None:
    raw = f(1, 0) + f(4, "Foreground") + f(2, f(1, "u-1"))
    assert decode(envelope("DeleteOptions", raw)) == {"apiVersion": "v1", "kind": "DeleteOptions",
                                                      "gracePeriodSeconds": 0,
                                                      "preconditions": {"uid": "u-1"},
                                                      "propagationPolicy": "Foreground"}


@pytest.mark.parametrize(("body", "needle"), [
    (b"{\"kind\":\"ConfigMap\"}", "magic number"),
    (envelope("ConfigMap", meta("x") + f(9, "surprise")), "unknown field 9 in ConfigMap"),
    (envelope("Deployment", meta("d") + f(2, f(3, f(2, f(99, b"")))), "apps/v1"),
     "spec.template.spec: unknown field 99 in PodSpec"),
    (envelope("ConfigMap", meta("x") + f(2, 7)), "field 2 (data) of ConfigMap has wire type 0"),
    (envelope("ConfigMap", meta("x"))[:-3], "runs past the end"),
    (MAGIC + b"\x0a\xff", "truncated varint"),
    (envelope("Service", meta("s") + f(2, f(1, f(4, f(1, 7))))), "IntOrString type 7"),
    (envelope("Deployment", meta("d") + f(2, f(3, f(2, f(2, f(8, f(1, entry("cpu", f(1, "lots"))))))))),
     "quantities must match"),
    (MAGIC + f(1, f(2, "ConfigMap")) + f(2, b"") + f(4, "application/json"), "contentType"),
])
def test_malformed_protobuf_is_a_400_naming_message_and_field(body: bytes, needle: str) -> None:
    with pytest.raises(StatusError) as err:
        decode(body)
    assert err.value.code == 400 and needle in err.value.message, err.value.message


def test_kind_without_a_schema_is_415() -> None:
    with pytest.raises(StatusError) as err:
        decode(envelope("Widget", meta("w"), "example.com/v1"))
    assert err.value.code == 415 and "Widget" in err.value.message


def test_schema_table_references_only_known_messages() -> None:
    for msg, fields in SCHEMA.items():
        for number, field in fields.items():
            assert field.type in SCALARS or field.type in SCHEMA, f"{msg}.{number} refers to {field.type}"


def _send(sim: SimCluster, path: str, body: bytes, method: str = "POST",
          ctype: str = "application/vnd.kubernetes.protobuf") -> tuple[int, dict]:
    req = urllib.request.Request(sim.url + path, data=body, method=method, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_bad_protobuf_over_http_is_400_and_stores_nothing(sim: SimCluster, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    before = namespace_state(sim, ns)
    for body in (b"garbage", envelope("ConfigMap", meta("bad") + f(99, 1)), envelope("ConfigMap", meta("bad"))[:-1]):
        status, payload = _send(sim, path, body)
        assert (status, payload["kind"], payload["reason"]) == (400, "Status", "BadRequest"), payload
    assert namespace_state(sim, ns) == before
    status, created = _send(sim, path, envelope("ConfigMap", meta("good") + f(2, entry("a", "b"))))
    assert status == 201 and created["data"] == {"a": "b"} and created["metadata"]["namespace"] == ns


def test_protobuf_put_updates_and_protobuf_patch_is_415(sim: SimCluster, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    assert _send(sim, path, envelope("ConfigMap", meta("cm")))[0] == 201
    status, updated = _send(sim, f"{path}/cm", envelope("ConfigMap", meta("cm") + f(2, entry("k", "v"))), "PUT")
    assert status == 200 and updated["data"] == {"k": "v"}
    status, payload = _send(sim, f"{path}/cm", envelope("ConfigMap", meta("cm")), "PATCH")
    assert status == 415 and payload["reason"] == "UnsupportedMediaType"


# Bodies client-go v0.37.2's typed clients sent to the simulator (captured from a Go probe through
# rest.Config.WrapTransport): leader election creating its Lease, and CoreV1().Events().Create.
CLIENT_GO_LEASE = bytes.fromhex(
    "6b3873000a1f0a16636f6f7264696e6174696f6e2e6b38732e696f2f763112054c6561736512730a260a0f6374726c73"
    "636f70652d70726f626512001a0764656661756c7422002a0032003800420012490a27766d5f61303764346435312d66"
    "3161642d343764342d616538352d643363623537643266393638100f1a0c08b18dbcd80610988ad7d802220c08b18dbc"
    "d80610988ad7d80228001a002200"
)
CLIENT_GO_EVENT = bytes.fromhex(
    "6b3873000a0b0a02763112054576656e7412b5010a1f0a00120f70726f62652d696e666f726d65722d1a0022002a0032"
    "003800420012200a094e616d65737061636512001a0764656661756c7422002a02763132003a001a0653796e63656422"
    "15696e666f726d65722063616368652073796e6365642a040a00120032003a0040004a064e6f726d616c520c08dd8dbc"
    "d8061090efecf9025a100802120c08dd8dbcd8061090efecf902620453796e63720e70726f62652d696e666f726d6572"
    "7a0770726f62652d311a002200"
)


def test_client_go_lease_decodes_with_micro_time() -> None:
    lease = decode(CLIENT_GO_LEASE)
    assert lease["kind"] == "Lease" and lease["apiVersion"] == "coordination.k8s.io/v1"
    assert lease["spec"] == {"holderIdentity": "vm_a07d4d51-f1ad-47d4-ae85-d3cb57d2f968",
                             "leaseDurationSeconds": 15, "leaseTransitions": 0,
                             "acquireTime": "2026-12-01T17:41:05.722847Z",
                             "renewTime": "2026-12-01T17:41:05.722847Z"}


def test_client_go_event_decodes_like_go_json() -> None:
    event = decode(CLIENT_GO_EVENT)
    assert event["involvedObject"] == {"kind": "Namespace", "name": "default", "apiVersion": "v1"}
    # Struct values marshal even when empty; zero Times are null; MicroTime keeps microseconds.
    assert (event["source"], event["firstTimestamp"], event["lastTimestamp"]) == ({}, None, None)
    assert event["eventTime"] == "2026-12-01T17:41:49.792410Z"
    assert event["series"] == {"count": 2, "lastObservedTime": "2026-12-01T17:41:49.792410Z"}
    assert (event["reportingComponent"], event["reportingInstance"]) == ("probe-informer", "probe-1")


def test_micro_time_zero_is_null_and_nanos_truncate_to_microseconds() -> None:
    spec = f(3, f(1, 1_700_000_000) + f(2, 123_456_789)) + f(4, b"")
    lease = decode(envelope("Lease", meta("l") + f(2, spec), "coordination.k8s.io/v1"))
    assert lease["spec"] == {"acquireTime": "2023-11-14T22:13:20.123456Z", "renewTime": None}


def test_leader_election_protobuf_create_then_update_over_http(sim: SimCluster, ns: str) -> None:
    # What client-go's LeaseLock does: POST the Lease, then PUT it back with a new renewTime.
    path = f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases"
    holder = f(1, "me") + f(2, 15) + f(4, f(1, 1_700_000_000) + f(2, 5_000))
    status, created = _send(sim, path, envelope("Lease", meta("lock") + f(2, holder), "coordination.k8s.io/v1"))
    assert status == 201, created
    assert created["spec"]["renewTime"] == "2023-11-14T22:13:20.000005Z"
    renewed = f(1, "me") + f(2, 15) + f(4, f(1, 1_700_000_002))
    rv = f(6, created["metadata"]["resourceVersion"])
    status, updated = _send(sim, f"{path}/lock", envelope("Lease", meta("lock", rv) + f(2, renewed),
                                                             "coordination.k8s.io/v1"), "PUT")
    assert status == 200 and updated["spec"]["renewTime"] == "2023-11-14T22:13:22.000000Z", updated
    stale = envelope("Lease", meta("lock", rv) + f(2, renewed), "coordination.k8s.io/v1")
    status, conflict = _send(sim, f"{path}/lock", stale, "PUT")
    assert status == 409 and conflict["reason"] == "Conflict"


def _encode(fields: list[tuple[int, int | bytes | list]]) -> bytes:
    return b"".join(f(n, _encode(v) if isinstance(v, list) else v) for n, v in fields)


# Random messages of the right kind of shape: small field numbers (mostly known ones), varints
# (negative and huge too), raw bytes and nested messages.
WIRE = st.recursive(
    st.integers(-(2**63), 2**64 - 1) | st.binary(max_size=12),
    lambda inner: st.lists(st.tuples(st.integers(1, 20), inner), max_size=5), max_leaves=20)
MESSAGE = st.lists(st.tuples(st.integers(1, 20), WIRE), max_size=6)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(["Namespace", "ConfigMap", "Secret", "Service", "Deployment", "DeleteOptions",
                             "SelfSubjectAccessReview", "Pod"]),
       raw=MESSAGE, cut=st.integers(0, 8))
def test_random_protobuf_decodes_or_is_a_400_or_415_never_anything_else(kind: str, raw: list, cut: int) -> None:
    body = envelope(kind, _encode(raw))
    body = body[:len(body) - cut] if cut else body  # sometimes truncated
    try:
        obj = decode(body)
    except StatusError as e:
        assert e.code in (400, 415), e.message
        return
    assert obj["kind"] == kind and json.dumps(obj)


# ---- bodies made by Go ------------------------------------------------------------------------
# tests/sim/fixtures/protobuf_bodies.json holds, per object, the body client-go's typed clients send
# (k8s.io/apimachinery's protobuf serializer behind a versioning encoder) and the JSON Go gets from
# decoding that body (protobuf serializer, then encoding/json): written by
# go/tools/protogen/fixtures_test.go, whose `go test` fails when the file is out of date.

FIXTURES = orjson.loads((Path(__file__).parent / "fixtures" / "protobuf_bodies.json").read_bytes())
GO_BODIES = {name: fx for name, fx in FIXTURES.items() if name != "generated"}


@pytest.mark.parametrize("name", sorted(GO_BODIES))
def test_go_bodies_decode_to_exactly_the_json_go_writes(name: str) -> None:
    fixture = GO_BODIES[name]
    decoded = decode(bytes.fromhex(fixture["body"]))
    assert decoded == fixture["json"]
    # Byte for byte, field order included (orjson keeps key order, like encoding/json writes it).
    assert orjson.dumps(decoded) == orjson.dumps(fixture["json"])


def test_go_pod_fields_that_the_hand_table_never_had() -> None:
    pod = decode(bytes.fromhex(GO_BODIES["pod"]["body"]))
    web = pod["spec"]["containers"][0]
    assert web["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": "HTTP"}
    assert web["readinessProbe"]["tcpSocket"] == {"port": 80}
    assert web["resources"] == {"limits": {"cpu": "500m", "memory": "128Mi"},
                                "requests": {"cpu": "100m", "memory": "64Mi"}}
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    assert volumes["data"] == {"name": "data", "emptyDir": {"sizeLimit": "1Gi"}}  # VolumeSource is inline
    assert volumes["secret"]["secret"]["defaultMode"] == 0o400  # tagged "bytes" upstream, a varint on the wire
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "kubernetes.io/arch", "operator": "In",
                                                     "values": ["amd64", "arm64"]}]}]}


def test_every_builtin_kind_the_simulator_serves_has_a_message() -> None:
    for rt in BUILTINS:
        assert f"{rt.api_version}/{rt.kind}" in KINDS, f"{rt.api_version} {rt.kind} has no protobuf message"
    assert message_for("apps/v1", "DeleteOptions") == message_for("v1", "DeleteOptions") is not None
    assert message_for("autoscaling/v1", "Scale") is not None  # what a /scale PUT carries


def test_generated_schema_is_self_consistent() -> None:
    for name, msg in MESSAGES.items():
        assert not msg.form or msg.form in FORMS, f"{name}: unknown form {msg.form}"
        for field in msg.fields:
            assert field.type in SCALARS or field.type in MESSAGES, f"{name}.{field.json} refers to {field.type}"
            assert not field.inline or field.type in MESSAGES


@pytest.mark.parametrize(("nanos", "text"), [
    (0, "0s"), (1, "1ns"), (1_500, "1.5µs"), (2_000_000, "2ms"), (1_500_000_000, "1.5s"),
    (90 * 10**9, "1m30s"), (3600 * 10**9, "1h0m0s"), (-(3723 * 10**9 + 5), "-1h2m3.000000005s"),
])
def test_duration_is_go_duration_string(nanos: int, text: str) -> None:
    assert go_duration(nanos) == text


def test_time_at_go_zero_is_null_and_micro_time_truncates_negative_nanos_toward_zero() -> None:
    zero = f(1, -62135596800)  # time.Unix of 0001-01-01T00:00:00Z is time.Time{}: IsZero, so null
    spec = f(3, zero) + f(4, f(1, 1_700_000_000) + f(2, -1_500))
    lease = decode(envelope("Lease", meta("l", f(9, zero)) + f(2, spec), "coordination.k8s.io/v1"))
    assert lease["metadata"] == {"name": "l", "deletionTimestamp": None}
    assert lease["spec"] == {"acquireTime": None, "renewTime": "2023-11-14T22:13:19.999999Z"}


def test_protobuf_pod_from_go_is_created_with_the_fields_a_json_create_stores(fresh_sim: SimCluster) -> None:
    # Over real HTTP, what a Go controller's Create(pod) sends; then the same pod as Go's JSON.
    fixture = GO_BODIES["pod"]
    path = "/api/v1/namespaces/default/pods"
    status, created = _send(fresh_sim, path, bytes.fromhex(fixture["body"]))
    assert status == 201, created
    as_json = json.loads(json.dumps(fixture["json"]))
    as_json["metadata"]["name"] = "web-json"
    status, created_json = _send(fresh_sim, path, orjson.dumps(as_json), ctype="application/json")
    assert status == 201, created_json
    req = urllib.request.Request(f"{fresh_sim.url}{path}/web-x2k8p")
    with urllib.request.urlopen(req, timeout=10) as resp:
        stored = json.loads(resp.read())
    go = fixture["json"]
    assert stored["metadata"]["labels"] == go["metadata"]["labels"]
    assert stored["metadata"]["annotations"] == go["metadata"]["annotations"]
    web = stored["spec"]["containers"][0]
    assert web["livenessProbe"] == go["spec"]["containers"][0]["livenessProbe"]
    assert web["resources"] == go["spec"]["containers"][0]["resources"]
    assert web["env"] == go["spec"]["containers"][0]["env"]
    assert stored["spec"]["affinity"] == go["spec"]["affinity"]
    names = [v["name"] for v in stored["spec"]["volumes"]]
    # ServiceAccount admission adds the API access token volume (mounted in every container).
    assert names[:4] == ["data", "cfg", "secret", "token"] and names[4].startswith("kube-api-access-")
    # A protobuf create and a JSON create of the same object store the same spec (the scheduler may
    # place them on different nodes; each token volume's name ends in its own random suffix).
    specs = []
    for obj in (stored, created_json):
        obj["spec"].pop("nodeName", None)
        token = obj["spec"]["volumes"][-1]["name"]
        specs.append(json.loads(json.dumps(obj["spec"]).replace(token, "kube-api-access")))
    assert specs[0] == specs[1]


# ---- the generated files are up to date -------------------------------------------------------

GO_DIR = Path(__file__).resolve().parents[2] / "go"


def _go() -> str:
    found = shutil.which("go") or next((p for p in ("/usr/local/go/bin/go",) if Path(p).exists()), None)
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("Go is missing in CI: the generated protobuf schema cannot be checked")
        pytest.skip("no Go toolchain: the generated protobuf schema is not checked")
    return found


def _go_env() -> dict[str, str]:
    # Offline and with the toolchain at hand: never download modules or a newer Go.
    return {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly -buildvcs=false",
            "GOPROXY": os.environ.get("GOPROXY", "off")}


def test_generated_protobuf_schema_is_up_to_date() -> None:
    go = _go()
    run = subprocess.run([go, "run", "./tools/protogen"], cwd=GO_DIR, env=_go_env(), capture_output=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr.decode()
    assert run.stdout == SCHEMA_FILE.read_bytes(), (
        "controllers/sim/protobuf_schema.json is stale: cd go && go run ./tools/protogen "
        "> ../controllers/sim/protobuf_schema.json")


def test_go_fixtures_are_up_to_date() -> None:
    go = _go()
    run = subprocess.run([go, "test", "./tools/protogen", "-run", "TestFixtures", "-count=1"], cwd=GO_DIR,
                         env=_go_env(), capture_output=True, timeout=600)
    assert run.returncode == 0, run.stdout.decode() + run.stderr.decode()
