"""Bad input gets the real Status codes (400/404/405/409/413/415/422), never a 500, state unchanged."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest

from controllers.sim import SimCluster


def http(sim: SimCluster, method: str, path: str, body: bytes | None = None,
         ctype: str | None = "application/json", accept: str | None = None) -> tuple[int, dict[str, Any]]:
    req = urllib.request.Request(sim.url + path, data=body, method=method)
    if ctype is not None:
        req.add_header("Content-Type", ctype)
    if accept is not None:
        req.add_header("Accept", accept)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


CM = "/api/v1/namespaces/{ns}/configmaps"


@pytest.fixture
def seeded(sim: SimCluster, ns: str) -> str:
    status, _ = http(sim, "POST", CM.format(ns=ns), json.dumps({"metadata": {"name": "keep"}, "data": {"a": "1"}}).encode())
    assert status == 201
    return ns


CASES = [
    # (method, path suffix, body, content type, expected code, expected reason)
    ("POST", "", b"{not json", "application/json", 400, "BadRequest"),
    ("POST", "", b"a: [unclosed", "application/yaml", 400, "BadRequest"),
    ("POST", "", b"\x08\x01protobuf", "application/vnd.kubernetes.protobuf", 400, "BadRequest"),
    ("POST", "", b"<xml/>", "application/xml", 415, "UnsupportedMediaType"),
    ("POST", "", json.dumps({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}).encode(),
     "application/json", 400, "BadRequest"),
    ("POST", "", json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}).encode(),
     "application/json", 400, "BadRequest"),
    ("POST", "", json.dumps({"metadata": {"name": "Bad_Name"}}).encode(), "application/json", 422, "Invalid"),
    ("POST", "", json.dumps({"metadata": {}}).encode(), "application/json", 422, "Invalid"),
    ("POST", "", json.dumps({"metadata": {"name": "keep"}}).encode(), "application/json", 409, "AlreadyExists"),
    # A label value that is not a string cannot be decoded into ObjectMeta at all: 400, not 422.
    ("POST", "", json.dumps({"metadata": {"name": "x", "labels": {"a": 1}}}).encode(), "application/json", 400,
     "BadRequest"),
    ("POST", "?fieldValidation=Strict", json.dumps({"metadata": {"name": "x"}, "extra": 1}).encode(),
     "application/json", 400, "BadRequest"),
    ("POST", "?fieldValidation=Loud", json.dumps({"metadata": {"name": "x"}}).encode(), "application/json", 422,
     "Invalid"),
    ("POST", "", json.dumps([1, 2]).encode(), "application/json", 400, "BadRequest"),
    ("POST", "", b"", "application/json", 400, "BadRequest"),
    ("PUT", "/keep", json.dumps({"metadata": {"name": "other"}}).encode(), "application/json", 400, "BadRequest"),
    ("PUT", "/keep", json.dumps({"metadata": {"name": "keep", "resourceVersion": "1"}}).encode(), "application/json",
     409, "Conflict"),
    ("PUT", "/missing", json.dumps({"metadata": {"name": "missing"}}).encode(), "application/json", 404, "NotFound"),
    ("PATCH", "/keep", b"{}", "text/plain", 415, "UnsupportedMediaType"),
    ("PATCH", "/keep", b"{bad", "application/merge-patch+json", 400, "BadRequest"),
    ("PATCH", "/keep", b'[{"op":"remove","path":"/data/nope"}]', "application/json-patch+json", 422, "Invalid"),
    ("PATCH", "/keep", b'[{"op":"test","path":"/data/a","value":"2"}]', "application/json-patch+json", 422,
     "Invalid"),
    ("PATCH", "/keep", b'{"op":"add"}', "application/json-patch+json", 400, "BadRequest"),
    ("PATCH", "/keep", b'{"metadata":{"name":"renamed"}}', "application/merge-patch+json", 400, "BadRequest"),
    ("PATCH", "/keep", b'{"data":{"bad key!":"x"}}', "application/merge-patch+json", 422, "Invalid"),
    ("PATCH", "/keep", b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"keep"}}',
     "application/apply-patch+yaml", 422, "Invalid"),
    ("PATCH", "/missing", b'{"data":{"a":"1"}}', "application/merge-patch+json", 404, "NotFound"),
    ("DELETE", "/missing", None, None, 404, "NotFound"),
    ("DELETE", "/keep", b'{"preconditions":{"uid":"nope"}}', "application/json", 409, "Conflict"),
    ("DELETE", "/keep", b'{"propagationPolicy":"Sideways"}', "application/json", 422, "Invalid"),
    ("GET", "?labelSelector=a%20in%20(", None, None, 400, "BadRequest"),
    ("GET", "?fieldSelector=spec.nodeName%3Dx", None, None, 400, "BadRequest"),
    ("GET", "?limit=abc", None, None, 400, "BadRequest"),
    ("GET", "?continue=garbage", None, None, 400, "BadRequest"),
    # A real API server's watch cache fails to parse it with a plain error: 500, no reason.
    ("GET", "?watch=true&resourceVersion=abc", None, None, 500, None),
    ("GET", "?resourceVersion=abc", None, None, 400, "BadRequest"),
    ("GET", "?resourceVersionMatch=NotOlderThan", None, None, 422, "Invalid"),
    ("GET", "/keep/status", None, None, 404, "NotFound"),
    ("POST", "/keep", b"{}", "application/json", 405, "MethodNotAllowed"),
]


@pytest.mark.parametrize(("method", "suffix", "body", "ctype", "code", "reason"), CASES,
                         ids=[f"{c[0]}{c[1]}-{c[4]}-{i}" for i, c in enumerate(CASES)])
def test_bad_request_gets_status_and_leaves_state_unchanged(sim: SimCluster, seeded: str, method: str, suffix: str,
                                                           body: bytes | None, ctype: str | None, code: int,
                                                           reason: str) -> None:
    before = sim.call(lambda: (sim.store.rv, sim.store.find(("", "configmaps"), seeded, "keep")))
    status, payload = http(sim, method, CM.format(ns=seeded) + suffix, body, ctype)
    assert status == code, payload
    assert payload["kind"] == "Status" and payload["status"] == "Failure"
    assert payload.get("reason") == reason and payload["code"] == code
    after = sim.call(lambda: (sim.store.rv, sim.store.find(("", "configmaps"), seeded, "keep")))
    assert after == before


def test_body_over_3_mib_is_413(sim: SimCluster, seeded: str) -> None:
    big = json.dumps({"metadata": {"name": "big"}, "data": {"x": "a" * (3 * 1024 * 1024 + 10)}}).encode()
    status, payload = http(sim, "POST", CM.format(ns=seeded), big)
    assert status == 413 and payload["reason"] == "RequestEntityTooLarge"


def test_unknown_resource_and_namespace(sim: SimCluster) -> None:
    assert http(sim, "GET", "/api/v1/namespaces/default/gizmos")[0] == 404
    # A group nothing serves has no handler at all: Go's plain-text 404, as on a real API server.
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(sim.url + "/apis/nope.example.com/v1", timeout=10)
    assert (err.value.code, err.value.headers["Content-Type"], err.value.read()) == (
        404, "text/plain; charset=utf-8", b"404 page not found\n")
    status, payload = http(sim, "POST", "/api/v1/namespaces/ghost/configmaps",
                           json.dumps({"metadata": {"name": "x"}}).encode())
    assert status == 404 and payload["message"] == 'namespaces "ghost" not found'


def test_strategic_merge_patch_on_custom_resource_is_415(sim: SimCluster, ns: str) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gadgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
                    "versions": [{"name": "v1", "served": True, "storage": True}]}}
    assert http(sim, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                json.dumps(crd).encode())[0] in (201, 409)
    base = f"/apis/example.com/v1/namespaces/{ns}/gadgets"
    assert http(sim, "POST", base, json.dumps({"apiVersion": "example.com/v1", "kind": "Gadget",
                                               "metadata": {"name": "g"}, "spec": {"a": 1}}).encode())[0] == 201
    status, payload = http(sim, "PATCH", base + "/g", b'{"spec":{"a":2}}', "application/strategic-merge-patch+json")
    assert status == 415 and payload["reason"] == "UnsupportedMediaType"
