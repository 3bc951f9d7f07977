"""Accept negotiation over real HTTP, with the headers Go clients send: protobuf for built-in kinds
when the header prefers it (client-go 0.37's typed clients, controller-runtime), JSON for custom
resources and conversions, YAML when asked, the most preferred conversion the endpoint offers, and a
406 NotAcceptable Status — before any write — otherwise, in the API server's two wordings. Also the
watch-list exchange client-go's reflector runs by default (WatchListClient is on in 0.37)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
import yaml

from controllers.sim import SimCluster, protobuf, protoenc
from controllers.sim.negotiation import Representation, negotiate, parse_accept
from tests.sim.conftest import namespace_state

PROTOBUF = "application/vnd.kubernetes.protobuf"
CLIENT_GO = "application/vnd.kubernetes.protobuf,application/json"
CONTROLLER_RUNTIME = "application/vnd.kubernetes.protobuf, */*"
DYNAMIC_CBOR = "application/json;q=0.9,application/cbor;q=1"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def _decoded(ctype: str, raw: bytes) -> Any:
    """The body as JSON, whatever the server wrote it in (protobuf read back by the simulator's own
    decoder, which reads what Go clients send)."""
    if ctype == PROTOBUF:
        return protoenc.decode_response(raw)
    if ctype == "application/yaml":
        return yaml.safe_load(raw)
    return json.loads(raw)


def http(sim: SimCluster, method: str, path: str, accept: str | None, body: Any = None) -> tuple[int, str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(sim.url + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", **({"Accept": accept} if accept else {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            ctype = resp.headers.get("Content-Type", "")
            return resp.status, ctype, _decoded(ctype, resp.read())
    except urllib.error.HTTPError as e:
        ctype = e.headers.get("Content-Type", "")
        return e.code, ctype, _decoded(ctype, e.read())


def test_q_weights_order_ranges_and_zero_drops_them() -> None:
    ranges = parse_accept("text/plain;q=0, application/cbor;q=1, application/json;q=0.9, */*")
    assert [(r.type, r.subtype, r.q) for r in ranges] == [("application", "cbor", 1.0), ("*", "*", 1.0),
                                                          ("application", "json", 0.9)]


@pytest.mark.parametrize(("accept", "offers", "expected"), [
    (None, {}, Representation.OBJECT),
    (CLIENT_GO, {}, Representation.OBJECT),
    (DYNAMIC_CBOR, {}, Representation.OBJECT),
    (f"{TABLE},application/json", {"table": True}, Representation.TABLE),
    (f"{TABLE};q=0.5,application/json", {"table": True}, Representation.OBJECT),
    # kubectl's header: the v1beta1 Table (removed upstream) is skipped, not a 406.
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", {"table": True}, Representation.OBJECT),
    (f"{AGGREGATED},application/json", {"table": True}, Representation.OBJECT),
    (f"{AGGREGATED},application/json", {"aggregated": True}, Representation.AGGREGATED),
])
def test_negotiate_picks_the_most_preferred_offer(accept: str | None, offers: dict, expected: Representation) -> None:
    assert negotiate(accept, **offers) is expected


@pytest.mark.parametrize(("accept", "ctype"), [(CLIENT_GO, PROTOBUF), (CONTROLLER_RUNTIME, PROTOBUF),
                                               (DYNAMIC_CBOR, "application/json"), ("*/*", "application/json"),
                                               ("application/*", "application/json"), (PROTOBUF, PROTOBUF),
                                               ("application/yaml", "application/yaml")])
def test_go_client_accept_headers(sim: SimCluster, ns: str, accept: str, ctype: str) -> None:
    http(sim, "POST", f"/api/v1/namespaces/{ns}/configmaps", None, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    status, got, body = http(sim, "GET", f"/api/v1/namespaces/{ns}/configmaps", accept)
    assert (status, got, body["kind"]) == (200, ctype, "ConfigMapList")
    assert [(c["metadata"]["name"], c.get("data")) for c in body["items"]] == [("a", {"k": "v"})]


def test_custom_resources_have_no_protobuf_form(sim: SimCluster, ns: str) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.neg.example.com"},
           "spec": {"group": "neg.example.com", "scope": "Namespaced",
                    "names": {"plural": "things", "singular": "thing", "kind": "Thing"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}
    assert http(sim, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", None, crd)[0] == 201
    path = f"/apis/neg.example.com/v1/namespaces/{ns}/things"
    assert http(sim, "GET", path, CLIENT_GO)[:2] == (200, "application/json")
    status, _, body = http(sim, "GET", path, PROTOBUF)
    assert (status, body["message"]) == (406, "only the following media types are accepted: application/json, "
                                              "application/yaml, application/vnd.kubernetes.protobuf")


@pytest.mark.parametrize("accept", ["application/cbor", "text/plain", "text/html"])
def test_nothing_the_route_produces_is_go_restfuls_406(sim: SimCluster, ns: str, accept: str) -> None:
    status, _, body = http(sim, "GET", f"/api/v1/namespaces/{ns}/configmaps", accept)
    assert status == 406 and body["kind"] == "Status" and body["reason"] == "NotAcceptable", body
    assert body["message"] == ("406: Not Acceptable\n\nAvailable representations: application/json, "
                               "application/yaml, application/vnd.kubernetes.protobuf, application/json;stream=watch, "
                               "application/vnd.kubernetes.protobuf;stream=watch")
    assert body["details"] == {}


def test_a_watch_has_no_yaml_form(sim: SimCluster, ns: str) -> None:
    status, _, body = http(sim, "GET", f"/api/v1/namespaces/{ns}/configmaps?watch=1", "application/yaml")
    assert (status, body["message"]) == (406, "only the following media types are accepted: "
                                              "application/json;stream=watch, "
                                              "application/vnd.kubernetes.protobuf;stream=watch")


def test_406_comes_before_the_write(sim: SimCluster, ns: str) -> None:
    before = namespace_state(sim, ns)
    status, _, _ = http(sim, "POST", f"/api/v1/namespaces/{ns}/configmaps", "application/cbor",
                        {"metadata": {"name": "never"}})
    assert status == 406 and namespace_state(sim, ns) == before


def test_discovery_negotiates_too(sim: SimCluster) -> None:
    assert http(sim, "GET", "/apis", f"{AGGREGATED},application/json")[1] == AGGREGATED
    # Only the removed v2beta1 aggregated form: the legacy APIGroupList, as from a server without it.
    status, ctype, body = http(sim, "GET", "/apis", "application/json;g=apidiscovery.k8s.io;v=v2beta1;"
                                                    "as=APIGroupDiscoveryList,application/json")
    assert (status, ctype, body["kind"]) == (200, "application/json", "APIGroupList")
    for path in ("/api", "/apis", "/api/v1", "/apis/apps", "/apis/apps/v1"):
        # Discovery documents have no protobuf form here (a real server has one): JSON or YAML.
        assert http(sim, "GET", path, "application/vnd.kubernetes.protobuf")[0] == 406, path
        assert http(sim, "GET", path, CLIENT_GO)[:2] == (200, "application/json"), path
        assert http(sim, "GET", path, "application/yaml")[:2] == (200, "application/yaml"), path


def _watch_lines(sim: SimCluster, path: str, accept: str, until: int) -> list[dict[str, Any]]:
    """The first ``until`` events of a watch: JSON lines, or protobuf frames (a 4-byte big-endian
    length, then a WatchEvent whose object is an enveloped object) read back as JSON."""
    req = urllib.request.Request(sim.url + path, headers={"Accept": accept})
    events = []
    with urllib.request.urlopen(req, timeout=10) as resp:
        if resp.headers["Content-Type"] == "application/json":
            for line in resp:
                events.append(json.loads(line))
                if len(events) == until:
                    break
            return events
        assert resp.headers["Content-Type"] == "application/vnd.kubernetes.protobuf;stream=watch"
        while len(events) < until:
            frame = resp.read(int.from_bytes(resp.read(4), "big"))
            fields = {number: value for number, _, value in protobuf.read_fields(frame)}
            raw = next(value for number, _, value in protobuf.read_fields(fields[2]) if number == 1)
            events.append({"type": fields[1].decode(), "object": protoenc.decode_response(raw)})
    return events


def test_client_go_watch_list_initial_events_then_end_bookmark(sim: SimCluster, ns: str) -> None:
    base = f"/apis/apps/v1/namespaces/{ns}/deployments"
    for name in ("a", "b"):
        dep = {"metadata": {"name": name}, "spec": {"selector": {"matchLabels": {"app": name}},
                                                     "template": {"metadata": {"labels": {"app": name}},
                                                                  "spec": {"containers": [{"name": "c",
                                                                                           "image": "nginx"}]}}}}
        assert http(sim, "POST", base, CLIENT_GO, dep)[0] == 201
    # Exactly what client-go 0.37's reflector sends for a first watch-list (no resourceVersion: a
    # consistent read), and on a re-watch after a drop (its last known resourceVersion).
    query = "allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&timeoutSeconds=5" \
            "&watch=true"
    stale_rv = http(sim, "GET", base, CLIENT_GO)[2]["metadata"]["resourceVersion"]
    for rv_param in ("", f"&resourceVersion={stale_rv}"):
        events = _watch_lines(sim, f"{base}?{query}{rv_param}", CLIENT_GO, until=3)
        assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == \
            [("ADDED", "a"), ("ADDED", "b"), ("BOOKMARK", None)]
        bookmark = events[-1]["object"]
        # The reflector checks the GVK of every event (unstructured informers) and reads the end marker.
        assert (bookmark["kind"], bookmark["apiVersion"]) == ("Deployment", "apps/v1")
        assert bookmark["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
        assert int(bookmark["metadata"]["resourceVersion"]) >= max(
            int(e["object"]["metadata"]["resourceVersion"]) for e in events[:2])


# What client-go's metadata client (metadata informers, controller-runtime's OnlyMetadata) sends.
PARTIAL_LIST = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json")
PARTIAL = ("application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,"
           "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")


def test_partial_object_metadata_of_get_list_and_watch(sim: SimCluster, ns: str) -> None:
    base = f"/api/v1/namespaces/{ns}/configmaps"
    status, _, created = http(sim, "POST", base, CLIENT_GO, {"metadata": {"name": "m", "labels": {"a": "b"}},
                                                             "data": {"k": "v"}})
    assert status == 201
    status, _, one = http(sim, "GET", f"{base}/m", PARTIAL)
    assert status == 200 and one == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                     "metadata": created["metadata"]}  # managedFields too, as upstream
    status, _, listed = http(sim, "GET", f"{base}?limit=1", PARTIAL_LIST)
    assert status == 200 and (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
    assert listed["metadata"]["resourceVersion"] and listed["items"] == [one]
    events = _watch_lines(sim, f"{base}?watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=5",
                          PARTIAL, until=1)
    assert events == [{"type": "ADDED", "object": one}]


@pytest.mark.parametrize(("path", "accept", "message"), [
    ("/configmaps", PARTIAL, "you requested PartialObjectMetadata, but the requested object is a list (*v1.ConfigMapList)"),
    ("/configmaps/x", PARTIAL_LIST,
     "you requested PartialObjectMetadataList, but the requested object is not a list (*v1.ConfigMap)"),
    ("/configmaps?watch=1", PARTIAL_LIST,
     "you requested PartialObjectMetadataList, but the requested object is not a list (*v1.ConfigMap)"),
])
def test_partial_metadata_of_the_wrong_shape_is_406(sim: SimCluster, ns: str, path: str, accept: str,
                                                   message: str) -> None:
    http(sim, "POST", f"/api/v1/namespaces/{ns}/configmaps", CLIENT_GO, {"metadata": {"name": "x"}})
    status, _, body = http(sim, "GET", f"/api/v1/namespaces/{ns}{path}", accept)
    assert (status, body["reason"], body["message"]) == (406, "NotAcceptable", message)
