"""The simulator's failures in the shape kube-apiserver v1.37 gives them (tests/differential holds
both to each other; these pin the behaviour down without a real server): Status details, request
options refused as 422 on their options kind, decode errors, DELETE options and preconditions,
resourceVersions a write may not carry or a read has to wait for, patch errors, health checks."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from controllers.sim import SimCluster
from tests.sim.conftest import namespace_state

CM = "/api/v1/namespaces/{ns}/configmaps"
JSON = "application/json"
MERGE = "application/merge-patch+json"


def http(sim: SimCluster, method: str, path: str, body: Any = None, ctype: str | None = JSON,
         ) -> tuple[int, str, bytes]:
    data = body if body is None or isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(sim.url + path, data=data, method=method)
    if ctype is not None and data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read()


def call(sim: SimCluster, method: str, path: str, body: Any = None, ctype: str | None = JSON,
         ) -> tuple[int, dict[str, Any]]:
    status, _, raw = http(sim, method, path, body, ctype)
    return status, json.loads(raw)


def cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}, "data": {"k": "v"}}


@pytest.fixture
def made(sim: SimCluster, ns: str) -> str:
    """A namespace holding ConfigMap "a"."""
    assert call(sim, "POST", CM.format(ns=ns), cm("a"))[0] == 201
    return ns


def test_details_leave_out_the_core_group_and_name_a_named_one(sim: SimCluster, ns: str) -> None:
    status, body = call(sim, "GET", f"{CM.format(ns=ns)}/nope")
    assert status == 404 and body["details"] == {"name": "nope", "kind": "configmaps"}
    status, body = call(sim, "GET", f"/apis/apps/v1/namespaces/{ns}/deployments/nope")
    assert status == 404 and body["details"] == {"name": "nope", "group": "apps", "kind": "deployments"}


@pytest.mark.parametrize(("method", "path", "code"), [("GET", "/api/v1/namespaces/{ns}/gizmos", 404),
                                                      ("GET", "/apis/apps/v9/deployments", 404),
                                                      ("POST", "/api/v1/namespaces/{ns}/configmaps/a", 405)])
def test_generic_server_responses_carry_empty_details(sim: SimCluster, made: str, method: str, path: str,
                                                      code: int) -> None:
    status, body = call(sim, method, path.format(ns=made), cm("a") if method == "POST" else None)
    assert status == code and body["details"] == {}


@pytest.mark.parametrize(("method", "suffix", "body", "ctype", "options"), [
    ("POST", "", cm("b"), JSON, "CreateOptions"),
    ("PUT", "/a", cm("a"), JSON, "UpdateOptions"),
    ("PATCH", "/a", {"data": {"k": "w"}}, MERGE, "PatchOptions"),
    ("DELETE", "/a", None, None, "DeleteOptions"),
])
def test_unsupported_dry_run_is_422_on_the_options_kind_and_changes_nothing(
        sim: SimCluster, made: str, method: str, suffix: str, body: Any, ctype: str | None, options: str) -> None:
    before = namespace_state(sim, made)
    status, got = call(sim, method, f"{CM.format(ns=made)}{suffix}?dryRun=Maybe&dryRun=All", body, ctype)
    assert status == 422 and got["reason"] == "Invalid"
    assert got["message"].startswith(f'{options}.meta.k8s.io "" is invalid: dryRun: Unsupported value: '
                                     '["Maybe","All"]')
    assert got["details"] == {"group": "meta.k8s.io", "kind": options, "causes": [
        {"reason": "FieldValueNotSupported", "field": "dryRun",
         "message": 'Unsupported value: ["Maybe","All"]: supported values: "All"'}]}
    assert namespace_state(sim, made) == before


def test_force_is_only_for_apply_and_apply_needs_a_field_manager(sim: SimCluster, made: str) -> None:
    status, got = call(sim, "PATCH", f"{CM.format(ns=made)}/a?force=true", {"data": {}}, MERGE)
    assert status == 422 and got["details"]["kind"] == "PatchOptions"
    assert got["details"]["causes"] == [{"reason": "FieldValueForbidden", "field": "force",
                                         "message": "Forbidden: may not be specified for non-apply patch"}]
    status, got = call(sim, "PATCH", f"{CM.format(ns=made)}/a", cm("a"), "application/apply-patch+yaml")
    assert status == 422 and got["details"]["causes"][0]["reason"] == "FieldValueRequired"


@pytest.mark.parametrize(("body", "head"), [
    (b'{"apiVersion": "v1", "kind": ', "the object provided is unrecognized (must be of type ConfigMap): couldn't "
                                       "get version/kind; json parse error: unexpected end of JSON input"),
    (b"", "the object provided is unrecognized (must be of type ConfigMap)"),
    (b"[]", "the object provided is unrecognized (must be of type ConfigMap)"),
    (json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}).encode(),
     'Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap)'),
    (json.dumps({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "s"}}).encode(),
     'ConfigMap in version "v1" cannot be handled as a ConfigMap: no kind "ConfigMap" is registered for version '
     '"apps/v1"'),
])
def test_bodies_that_are_not_a_configmap_are_400_saying_why(sim: SimCluster, ns: str, body: bytes,
                                                            head: str) -> None:
    status, got = call(sim, "POST", CM.format(ns=ns), body)
    assert status == 400 and got["reason"] == "BadRequest" and got["message"].startswith(head), got


def test_another_version_of_the_same_group_does_not_match(sim: SimCluster, ns: str) -> None:
    status, got = call(sim, "POST", f"/apis/apps/v1/namespaces/{ns}/deployments",
                       {"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "d"}})
    assert status == 400
    assert got["message"] == ("the API version in the data (apps/v1beta1) does not match the expected API version "
                              "(apps/v1)")


def test_create_with_a_resource_version_is_a_500_unless_dry_run(sim: SimCluster, ns: str) -> None:
    status, got = call(sim, "POST", CM.format(ns=ns), cm("a", resourceVersion="5"))
    assert (status, got["message"], "reason" in got) == (500, "resourceVersion should not be set on objects to be "
                                                              "created", False)
    status, got = call(sim, "POST", f"{CM.format(ns=ns)}?dryRun=All", cm("a", resourceVersion="5"))
    assert status == 201 and got["metadata"]["resourceVersion"] == "5"  # a dry run answers what was sent
    assert call(sim, "POST", CM.format(ns=ns), cm("a", resourceVersion="0"))[0] == 201


def test_update_with_an_unparseable_resource_version_is_a_500(sim: SimCluster, made: str) -> None:
    status, got = call(sim, "PUT", f"{CM.format(ns=made)}/a", cm("a", resourceVersion="abc"))
    assert (status, got["message"], "reason" in got) == (500, 'strconv.ParseUint: parsing "abc": invalid syntax',
                                                         False)


def test_delete_preconditions_name_the_kind(sim: SimCluster, made: str) -> None:
    status, got = call(sim, "DELETE", f"{CM.format(ns=made)}/a", {"preconditions": {"uid": "x"}})
    assert status == 409 and got["details"] == {"name": "a", "kind": "ConfigMap"}
    assert got["message"].startswith('Operation cannot be fulfilled on ConfigMap "a": the UID in the precondition (x)')
    status, got = call(sim, "DELETE", f"{CM.format(ns=made)}/a", {"preconditions": {"resourceVersion": "1"}})
    assert status == 409 and "the ResourceVersion in the precondition (1)" in got["message"]


def test_dry_run_delete_answers_success_and_keeps_the_object(sim: SimCluster, made: str) -> None:
    status, got = call(sim, "DELETE", f"{CM.format(ns=made)}/a?dryRun=All")
    assert status == 200 and got["kind"] == "Status" and got["status"] == "Success"
    assert set(got["details"]) == {"name", "kind", "uid"}
    assert call(sim, "GET", f"{CM.format(ns=made)}/a")[0] == 200


def test_delete_options_in_a_body_leave_the_query_unread(sim: SimCluster, made: str) -> None:
    # As on kube-apiserver: with a body, ?dryRun=All is not looked at -- the delete happens.
    status, _ = call(sim, "DELETE", f"{CM.format(ns=made)}/a?dryRun=All", {"kind": "DeleteOptions", "apiVersion": "v1"})
    assert status == 200 and call(sim, "GET", f"{CM.format(ns=made)}/a")[0] == 404


@pytest.mark.parametrize(("body", "suffix", "cause"), [
    ({"propagationPolicy": "Sideways"}, "", "FieldValueNotSupported"),
    (None, "?propagationPolicy=", "FieldValueNotSupported"),
    ({"propagationPolicy": "Orphan", "orphanDependents": True}, "", "FieldValueInvalid"),
])
def test_bad_propagation_is_422_on_delete_options(sim: SimCluster, made: str, body: Any, suffix: str,
                                                  cause: str) -> None:
    status, got = call(sim, "DELETE", f"{CM.format(ns=made)}/a{suffix}", body)
    assert status == 422 and got["details"]["kind"] == "DeleteOptions"
    assert [c["reason"] for c in got["details"]["causes"]] == [cause]
    assert call(sim, "GET", f"{CM.format(ns=made)}/a")[0] == 200


@pytest.mark.parametrize("suffix", ["/nope?resourceVersion={rv}", "?resourceVersion={rv}&resourceVersionMatch=NotOlderThan"])
def test_a_read_at_a_future_resource_version_waits_then_times_out(sim: SimCluster, ns: str, suffix: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sim.api, "too_large_wait", 0.3)
    ahead = sim.call(lambda: sim.store.rv) + 1_000_000
    started = time.monotonic()
    status, got = call(sim, "GET", CM.format(ns=ns) + suffix.format(rv=ahead))
    assert time.monotonic() - started >= 0.3
    assert status == 504 and got["reason"] == "Timeout"
    assert got["message"].startswith(f"Timeout: Too large resource version: {ahead}, current: ")
    assert got["details"] == {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                              "retryAfterSeconds": 1}


def test_a_read_at_a_resource_version_reached_while_it_waits_is_answered(sim: SimCluster, made: str) -> None:
    ahead = sim.call(lambda: sim.store.rv) + 1
    writer = threading.Timer(0.2, lambda: http(sim, "POST", CM.format(ns=made), cm("b")))
    writer.start()
    status, got = call(sim, "GET", f"{CM.format(ns=made)}/a?resourceVersion={ahead}")
    writer.join()
    assert status == 200 and got["metadata"]["name"] == "a"


def test_patch_errors_are_worded_as_the_patch_handler_words_them(sim: SimCluster, made: str) -> None:
    path = f"{CM.format(ns=made)}/a"
    status, got = call(sim, "PATCH", path, b"x", "text/plain")
    assert (status, got["message"], got["details"]) == (415, "415: Unsupported Media Type", {})
    status, got = call(sim, "PATCH", path, b"{nope", MERGE)
    assert (status, got["message"]) == (400, "invalid JSON patch")
    status, got = call(sim, "PATCH", path, [{"op": "test", "path": "/data/k", "value": "no"}],
                       "application/json-patch+json")
    assert (status, got["message"], got["details"]) == (
        422, "the server rejected our request due to an error in our request", {})
    status, got = call(sim, "PATCH", path, {"op": "add"}, "application/json-patch+json")
    assert status == 400 and got["message"].startswith("error decoding patch: json: cannot unmarshal object")
    status, got = call(sim, "PATCH", f"{path}?fieldManager=m", b"a: [", "application/apply-patch+yaml")
    assert status == 400 and got["message"].startswith("error encoding patch: yaml: line 1")
    status, got = call(sim, "PATCH", f"{path}?fieldManager=m", {"apiVersion": "v1", "kind": "Secret"},
                       "application/apply-patch+yaml")
    assert (status, got["message"]) == (400, "invalid object type: /v1, Kind=Secret")


def test_apply_conflicts_name_the_manager_but_no_object(sim: SimCluster, ns: str) -> None:
    assert call(sim, "POST", f"{CM.format(ns=ns)}?fieldManager=creator", cm("c"))[0] == 201
    other = dict(cm("c"), data={"k": "other"})
    status, got = call(sim, "PATCH", f"{CM.format(ns=ns)}/c?fieldManager=two", other, "application/apply-patch+yaml")
    assert status == 409 and got["message"] == 'Apply failed with 1 conflict: conflict with "creator" using v1: .data.k'
    assert got["details"] == {"causes": [
        {"reason": "FieldManagerConflict", "message": 'conflict with "creator" using v1', "field": ".data.k"}]}


def test_health_checks_list_themselves_when_verbose(sim: SimCluster) -> None:
    status, ctype, raw = http(sim, "GET", "/readyz?verbose&exclude=etcd&exclude=nope")
    lines = raw.decode().splitlines()
    assert status == 200 and ctype.startswith("text/plain")
    assert lines[0] == "[+]ping ok" and "[+]etcd excluded: ok" in lines
    assert lines[-2:] == ['warn: some health checks cannot be excluded: no matches for "nope"', "readyz check passed"]
    assert http(sim, "GET", "/livez/etcd")[::2] == (200, b"ok")
    assert http(sim, "GET", "/readyz/nope")[::2] == (404, b"404 page not found\n")
