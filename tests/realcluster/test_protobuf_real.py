"""The simulator's protobuf encoder held to a real kube-apiserver (v1.37): for each built-in kind,
the real server's JSON answer encoded by ``controllers.sim.protoenc`` is byte for byte the
protobuf answer the same server gives for the same request -- lists and single objects, pods and
deployments a controller manager filled in, nodes and namespaces cluster-wide, a CRD with a schema
-- and a watch's length-prefixed frames match frame for frame."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

import pytest

from controllers.sim import protoenc
from tests.conftest import wait_until

pytestmark = pytest.mark.realcluster

PROTOBUF = "application/vnd.kubernetes.protobuf"


def raw(cluster: Any, path: str, accept: str) -> tuple[str, bytes]:
    request = urllib.request.Request(cluster.server + path, headers={"Accept": accept,
                                                                     "Authorization": f"Bearer {cluster.token}"})
    with urllib.request.urlopen(request, timeout=20, context=cluster._tls()) as response:
        return response.headers["Content-Type"], response.read()


def test_every_built_in_kind_encodes_as_the_real_server_writes_it(realcluster: Any, real_namespace: str) -> None:
    ns = real_namespace
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"a": "b"}},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                           "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{
                               "name": "c", "image": "nginx:1.27", "ports": [{"name": "http", "containerPort": 80}],
                               "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}},
                               "readinessProbe": {"httpGet": {"path": "/", "port": "http"}, "periodSeconds": 3},
                               "env": [{"name": "A", "value": "1"}]}]}}}}
    for path, body in ((f"/apis/apps/v1/namespaces/{ns}/deployments", deployment),
                       (f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                                 "metadata": {"name": "c"}, "data": {"k": "v"},
                                                                 "binaryData": {"b": "AAEC"}}),
                       (f"/api/v1/namespaces/{ns}/secrets", {"apiVersion": "v1", "kind": "Secret",
                                                              "metadata": {"name": "s"}, "stringData": {"u": "x"}}),
                       (f"/api/v1/namespaces/{ns}/services", {"apiVersion": "v1", "kind": "Service",
                                                               "metadata": {"name": "svc"},
                                                               "spec": {"selector": {"app": "web"},
                                                                        "ports": [{"port": 80, "targetPort": "http"}]}}),
                       (f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
                        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
                         "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15,
                                  "renewTime": "2026-01-01T00:00:00.123456Z"}})):
        code, answer = realcluster.api("POST", path, body)
        assert code == 201, answer
    wait_until(lambda: len(realcluster.api("GET", f"/api/v1/namespaces/{ns}/pods")[1]["items"]) == 2, timeout=60,
               what="the deployment's two pods")
    time.sleep(1)  # let the controllers' status writes settle, so both reads see one state
    paths = [f"/api/v1/namespaces/{ns}/{plural}" for plural in ("pods", "configmaps", "secrets", "services",
                                                                 "serviceaccounts", "events")]
    paths += [f"/apis/apps/v1/namespaces/{ns}/deployments", f"/apis/apps/v1/namespaces/{ns}/replicasets",
              f"/apis/apps/v1/namespaces/{ns}/deployments/web", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale",
              f"/apis/coordination.k8s.io/v1/namespaces/{ns}/leases", "/api/v1/nodes", f"/api/v1/namespaces/{ns}",
              "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
              "/apis/rbac.authorization.k8s.io/v1/clusterroles"]
    for path in paths:
        for _ in range(5):  # a controller may write between the two reads: read both again
            _, as_json = raw(realcluster, path, "application/json")
            ctype, as_protobuf = raw(realcluster, path, PROTOBUF)
            if json.loads(as_json)["metadata"].get("resourceVersion") == \
                    protoenc.decode_response(as_protobuf)["metadata"].get("resourceVersion"):
                break
        assert ctype == PROTOBUF
        assert protoenc.encode(json.loads(as_json)) == as_protobuf, path


def test_watch_frames_match_the_real_servers(realcluster: Any, real_namespace: str) -> None:
    path = f"/api/v1/namespaces/{real_namespace}/configmaps"
    for name in ("a", "b"):
        assert realcluster.api("POST", path, {"apiVersion": "v1", "kind": "ConfigMap",
                                              "metadata": {"name": name}})[0] == 201
    query = "?watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1"
    ctype, frames = raw(realcluster, path + query, PROTOBUF)
    assert ctype == "application/vnd.kubernetes.protobuf;stream=watch"
    _, lines = raw(realcluster, path + query, "application/json")
    events = [json.loads(line) for line in lines.splitlines() if line.strip()]
    assert [e["type"] for e in events][-1] == "BOOKMARK" and len(events) == 4  # a, b, kube-root-ca.crt
    assert b"".join(protoenc.watch_frame(e["type"], e["object"]) for e in events) == frames
