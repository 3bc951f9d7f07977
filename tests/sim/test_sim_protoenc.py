"""Protobuf answers from the simulator, read back the way a Go client reads them: every built-in kind
it stores has a protobuf form (a field the Go types lack would make it fall back to JSON), lists and
watches decode to what the JSON answer says, a watch's frames carry bookmarks and a 410, and the
custom JSON forms (times, durations, quantities, int-or-string, raw JSON, CRD schema unions) survive
encode then decode. tests/realcluster/test_protobuf_real.py holds the bytes to a real server's."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from controllers.sim import SimCluster, protobuf, protoenc
from tests.conftest import wait_until

PROTOBUF = "application/vnd.kubernetes.protobuf"


def get(sim: SimCluster, path: str, accept: str) -> tuple[str, bytes]:
    request = urllib.request.Request(sim.url + path, headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Content-Type"], response.read()


def post(sim: SimCluster, path: str, body: dict[str, Any]) -> None:
    request = urllib.request.Request(sim.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).read()


def frames(data: bytes) -> list[dict[str, Any]]:
    events, pos = [], 0
    while pos < len(data):
        length = int.from_bytes(data[pos:pos + 4], "big")
        fields = {n: v for n, _, v in protobuf.read_fields(data[pos + 4:pos + 4 + length])}
        envelope = next(v for n, _, v in protobuf.read_fields(fields[2]) if n == 1)
        events.append({"type": fields[1].decode(), "object": protoenc.decode_response(envelope)})
        pos += 4 + length
    return events


def test_every_kind_the_control_plane_writes_has_a_protobuf_form(sim: SimCluster, ns: str) -> None:
    post(sim, f"/apis/apps/v1/namespaces/{ns}/deployments", {
        "metadata": {"name": "web"}, "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                                              "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                                                  "containers": [{"name": "c", "image": "nginx",
                                                                  "readinessProbe": {"httpGet": {"port": "http"}},
                                                                  "resources": {"limits": {"cpu": "1"}}}]}}}})
    post(sim, f"/api/v1/namespaces/{ns}/services", {"metadata": {"name": "svc"},
                                                     "spec": {"ports": [{"port": 80, "targetPort": "http"}]}})
    wait_until(lambda: len(json.loads(get(sim, f"/api/v1/namespaces/{ns}/pods", "application/json")[1])["items"]) == 2,
               timeout=10, what="two pods")
    for path in (f"/api/v1/namespaces/{ns}/pods", f"/apis/apps/v1/namespaces/{ns}/replicasets",
                 f"/apis/apps/v1/namespaces/{ns}/deployments", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
                 f"/api/v1/namespaces/{ns}/services", f"/api/v1/namespaces/{ns}/events", "/api/v1/nodes",
                 "/api/v1/namespaces", "/apis/coordination.k8s.io/v1/leases"):
        # The control plane keeps writing (kubelet, controllers, events): a list's resourceVersion is
        # the store's, so compare with a JSON list taken before and after that saw no write between.
        for _ in range(50):
            listed = json.loads(get(sim, path, "application/json")[1])
            ctype, data = get(sim, path, PROTOBUF)
            after = json.loads(get(sim, path, "application/json")[1])
            if listed["metadata"].get("resourceVersion") == after["metadata"].get("resourceVersion"):
                break
            time.sleep(0.05)
        assert ctype == PROTOBUF, path
        decoded = protoenc.decode_response(data)
        assert decoded["kind"] == listed["kind"] and decoded["metadata"]["resourceVersion"] == \
            listed["metadata"]["resourceVersion"], path
        names = [i["metadata"]["name"] for i in listed.get("items") or []]
        assert [i["metadata"]["name"] for i in decoded.get("items") or []] == names, path


def test_a_protobuf_watch_streams_frames_with_bookmarks(sim: SimCluster, ns: str) -> None:
    path = f"/api/v1/namespaces/{ns}/configmaps"
    post(sim, path, {"metadata": {"name": "a"}, "data": {"k": "v"}})
    _, data = get(sim, f"{path}?watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1", PROTOBUF)
    events = frames(data)
    assert [(e["type"], e["object"]["kind"]) for e in events] == [("ADDED", "ConfigMap"), ("BOOKMARK", "ConfigMap")]
    assert events[0]["object"]["data"] == {"k": "v"}
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    _, data = get(sim, f"{path}?watch=1&resourceVersion=1", PROTOBUF)
    (expired,) = frames(data)
    assert (expired["type"], expired["object"]["reason"], expired["object"]["code"]) == ("ERROR", "Expired", 410)


def test_custom_forms_survive_encode_then_decode() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "creationTimestamp": "2026-01-02T03:04:05Z",
                        "managedFields": [{"manager": "m", "operation": "Update", "apiVersion": "v1",
                                           "time": "2026-01-02T03:04:05Z", "fieldsType": "FieldsV1",
                                           "fieldsV1": {"f:spec": {"f:containers": {}}}}]},
           "spec": {"containers": [{"name": "c", "image": "i", "resources": {"limits": {"cpu": "250m"}},
                                    "livenessProbe": {"httpGet": {"port": 8080}},
                                    "readinessProbe": {"httpGet": {"port": "http"}}}]}}
    back = protoenc.decode_response(protoenc.encode(pod))
    container = back["spec"]["containers"][0]
    assert back["metadata"]["creationTimestamp"] == "2026-01-02T03:04:05Z"
    assert back["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {"f:containers": {}}}
    assert container["resources"] == {"limits": {"cpu": "250m"}}
    assert (container["livenessProbe"]["httpGet"]["port"], container["readinessProbe"]["httpGet"]["port"]) == \
        (8080, "http")
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
             "spec": {"renewTime": "2026-01-02T03:04:05.123456Z"}}
    assert protoenc.decode_response(protoenc.encode(lease))["spec"]["renewTime"] == "2026-01-02T03:04:05.123456Z"
    assert protoenc.parse_go_duration("1h2m3.5s") == 3723_500_000_000 and protoenc.parse_go_duration("-1.5ms") == \
        -1_500_000
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "x.y.z"},
           "spec": {"group": "y.z", "scope": "Namespaced", "names": {"plural": "x", "kind": "X"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {
                            "type": "object", "additionalProperties": {"type": "string"},
                            "properties": {"n": {"type": "integer", "default": 3, "enum": [1, 3]}}}}}}}]}}
    back = protoenc.decode_response(protoenc.encode(crd))
    assert back["spec"]["versions"][0]["schema"] == crd["spec"]["versions"][0]["schema"]
