"""The requests the simulator is held to: raw HTTP for the API's edges, grouped by concern.

Each case is a function of a :class:`~tests.differential.harness.Session`, run once against the
simulator and once against a real kube-apiserver in a namespace of the same name; what it records is
compared. Cases only record what a client can rely on; where they need the server's answer to go on
(a resourceVersion, a continue token) they read it from the response.
"""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable
from typing import Any

from controllers.sim import protobuf, protoenc
from tests.differential.harness import APPLY, JSON_PATCH, MERGE, PROTOBUF, STRATEGIC, TABLE, Session

CASES: dict[str, Callable[[Session], None]] = {}

CRD_GROUP = "diff.ctrlscope.dev"
CRD_NAME = f"widgets.{CRD_GROUP}"
WIDGETS = f"/apis/{CRD_GROUP}/v1/namespaces/{{ns}}/widgets"
CMS = "/api/v1/namespaces/{ns}/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"
PODS = "/api/v1/namespaces/{ns}/pods"


# What of a Deployment the cases compare once controllers run: its status and the revision annotation
# are the deployment controller's, written at its own pace on each server.
SPEC = ("apiVersion", "kind", "spec")


def case(fn: Callable[[Session], None]) -> Callable[[Session], None]:
    CASES[fn.__name__] = fn
    return fn


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def deployment(name: str, replicas: int = 1, image: str = "nginx:1.27") -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"schedulerName": "nobody",
                                           "containers": [{"name": "web", "image": image,
                                                           "env": [{"name": "A", "value": "1"}]}]}}}}


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{CRD_GROUP}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}


def q(path: str, **params: Any) -> str:
    return f"{path}?{urllib.parse.urlencode(params)}"


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {"group": CRD_GROUP, "scope": "Namespaced",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList",
                       "shortNames": ["wg"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {},
                                            "scale": {"specReplicasPath": ".spec.replicas",
                                                      "statusReplicasPath": ".status.replicas"}},
                           "additionalPrinterColumns": [{"name": "Size", "type": "integer",
                                                         "jsonPath": ".spec.size"}],
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "required": ["size"], "properties": {
                                   "size": {"type": "integer", "minimum": 1, "maximum": 10},
                                   "replicas": {"type": "integer"},
                                   "color": {"type": "string", "enum": ["red", "blue"]},
                                   "tags": {"type": "array", "items": {"type": "string"}}}},
                               "status": {"type": "object", "properties": {
                                   "replicas": {"type": "integer"}, "phase": {"type": "string"}}}}}}}]}}


def setup_cluster(s: Session) -> None:
    """Cluster-wide things the cases share (run once per server): the Widget CRD, established."""
    s.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        got = s.request("GET", f"/apis/{CRD_GROUP}/v1").status == 200
        if got:
            return
        time.sleep(0.2)
    raise AssertionError(f"{CRD_NAME} never served on {s.target.name}")


# -- create, read, update, delete ---------------------------------------------------------------
@case
def crud_lifecycle(s: Session) -> None:
    created = s.call("create", "POST", CMS, cm("a", k="v"))
    s.call("get", "GET", f"{CMS}/a")
    body = created.json
    body["data"]["k"] = "w"
    s.call("update", "PUT", f"{CMS}/a", body)
    s.call("delete", "DELETE", f"{CMS}/a")
    s.call("get-after-delete", "GET", f"{CMS}/a")
    s.call("delete-again", "DELETE", f"{CMS}/a")


@case
def create_twice(s: Session) -> None:
    s.request("POST", CMS, cm("a"))
    s.call("again", "POST", CMS, cm("a"))


@case
def create_with_resource_version(s: Session) -> None:
    body = cm("a")
    body["metadata"]["resourceVersion"] = "5"
    s.call("create", "POST", CMS, body)


@case
def create_namespace_mismatch(s: Session) -> None:
    body = cm("a")
    body["metadata"]["namespace"] = "default"
    s.call("create", "POST", CMS, body)


@case
def create_in_missing_namespace(s: Session) -> None:
    s.call("create", "POST", "/api/v1/namespaces/{ns}-missing/configmaps", cm("a"))
    s.call("get", "GET", "/api/v1/namespaces/{ns}-missing/configmaps/a")
    s.call("list", "GET", "/api/v1/namespaces/{ns}-missing/configmaps")


@case
def create_wrong_kind(s: Session) -> None:
    s.call("secret-to-configmaps", "POST", CMS, {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"}})
    s.call("wrong-api-version", "POST", CMS, {"apiVersion": "apps/v1", "kind": "ConfigMap",
                                              "metadata": {"name": "b"}})
    s.call("no-kind", "POST", CMS, {"metadata": {"name": "c"}})


@case
def create_bad_bodies(s: Session) -> None:
    s.call("malformed-json", "POST", CMS, b'{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {')
    s.call("empty-body", "POST", CMS, b"")
    s.call("json-array", "POST", CMS, b"[]")
    s.call("number-as-data", "POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                           "metadata": {"name": "n"}, "data": {"k": 1}})
    s.call("string-as-metadata", "POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": "x"})


@case
def create_invalid_names(s: Session) -> None:
    s.call("uppercase", "POST", CMS, cm("Bad_Name"))
    s.call("missing-name", "POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    s.call("too-long", "POST", CMS, cm("x" * 254))
    s.call("bad-data-key", "POST", CMS, cm("d", **{"a b": "v"}))


@case
def create_generate_name(s: Session) -> None:
    created = s.call("create", "POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                             "metadata": {"generateName": "gen-"}})
    # The generated name's random suffix differs between servers: from here it is a placeholder.
    s.generated_name(created.json["metadata"]["name"])
    s.records["create"] = s.normalize(s.describe(created))
    # A rejected generateName still got a random suffix, which the 422 names (details.name, the
    # message and the metadata.name cause): a placeholder too.
    rejected = s.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "Gen_"}})
    generated = ((rejected.json or {}).get("details") or {}).get("name")
    if generated:
        s.generated_name(generated)
    s.record("bad-generate-name", s.describe(rejected))


@case
def create_dry_run(s: Session) -> None:
    s.call("create", "POST", q(CMS, dryRun="All"), cm("a", k="v"))
    s.call("get", "GET", f"{CMS}/a")
    s.call("bad-dry-run-value", "POST", q(CMS, dryRun="Maybe"), cm("a"))


@case
def update_edges(s: Session) -> None:
    created = s.request("POST", CMS, cm("a", k="v")).json
    stale = json.loads(json.dumps(created))
    created["data"]["k"] = "w"
    s.call("update", "PUT", f"{CMS}/a", created)
    stale["data"]["k"] = "x"
    s.call("stale", "PUT", f"{CMS}/a", stale)
    del stale["metadata"]["resourceVersion"]
    s.call("unconditional", "PUT", f"{CMS}/a", stale)
    s.call("name-mismatch", "PUT", f"{CMS}/a", cm("b"))
    s.call("missing", "PUT", f"{CMS}/nope", cm("nope"))
    noop = s.request("GET", f"{CMS}/a").json
    s.call("no-op", "PUT", f"{CMS}/a", noop)
    bad_rv = dict(noop, metadata=dict(noop["metadata"], resourceVersion="abc"))
    s.call("bad-rv", "PUT", f"{CMS}/a", bad_rv)


@case
def immutable_configmap(s: Session) -> None:
    created = s.request("POST", CMS, dict(cm("a", k="v"), immutable=True)).json
    created["data"]["k"] = "w"
    s.call("update-data", "PUT", f"{CMS}/a", created)
    s.call("patch-labels", "PATCH", f"{CMS}/a", {"metadata": {"labels": {"x": "y"}}}, content_type=MERGE)


@case
def delete_edges(s: Session) -> None:
    s.request("POST", CMS, cm("a"))
    s.call("uid-precondition", "DELETE", f"{CMS}/a", {"kind": "DeleteOptions", "apiVersion": "v1",
                                                      "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}})
    s.call("rv-precondition", "DELETE", f"{CMS}/a", {"preconditions": {"resourceVersion": "1"}})
    s.call("dry-run", "DELETE", q(f"{CMS}/a", dryRun="All"))
    s.call("still-there", "GET", f"{CMS}/a")
    s.call("bad-policy", "DELETE", f"{CMS}/a", {"propagationPolicy": "Sideways"})
    s.call("missing", "DELETE", f"{CMS}/nope")


@case
def delete_collection(s: Session) -> None:
    for name, tier in (("a", "x"), ("b", "x"), ("c", "y")):
        s.request("POST", CMS, dict(cm(name), metadata={"name": name, "labels": {"tier": tier}}))
    s.call("delete", "DELETE", q(CMS, labelSelector="tier=x"))
    s.call("left", "GET", CMS)


@case
def object_shape_configmap(s: Session) -> None:
    s.call("empty-data", "POST", CMS, cm("a"))
    s.call("null-data", "POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},
                                      "data": None})
    s.call("binary-data", "POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
                                        "binaryData": {"b": "AAEC"}})
    s.call("empty-labels", "POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                         "metadata": {"name": "d", "labels": {}, "annotations": {}}})


@case
def object_shape_secret(s: Session) -> None:
    s.call("string-data", "POST", "/api/v1/namespaces/{ns}/secrets",
           {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": {"user": "admin"}})
    s.call("bad-base64", "POST", "/api/v1/namespaces/{ns}/secrets",
           {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"}, "data": {"x": "not base64!"}})


@case
def object_shape_deployment(s: Session) -> None:
    s.call("create", "POST", DEPLOYMENTS, deployment("web"))


@case
def object_shape_pod(s: Session) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "busybox"}]}}
    created = s.request("POST", PODS, pod)
    # The service-account token volume's name ends in a random suffix.
    for volume in (created.json or {}).get("spec", {}).get("volumes") or []:
        if volume["name"].startswith("kube-api-access-"):
            s.generated_name(volume["name"])
    s.records["create"] = s.normalize(s.describe(created))


@case
def object_shape_service(s: Session) -> None:
    created = s.request("POST", "/api/v1/namespaces/{ns}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc"},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}})
    spec = (created.json or {}).get("spec") or {}
    for ip in spec.get("clusterIPs") or []:
        s.generated_name(ip)
    s.records["create"] = s.normalize(s.describe(created))


@case
def object_shape_namespace(s: Session) -> None:
    created = s.call("create", "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                              "metadata": {"name": f"{s.ns}-x"}})
    if created.status == 201:
        s.request("DELETE", f"/api/v1/namespaces/{s.ns}-x")


@case
def object_shape_lease_and_event(s: Session) -> None:
    s.call("lease", "POST", "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
           {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "l"},
            "spec": {"holderIdentity": "me", "leaseDurationSeconds": 15}})
    s.call("event", "POST", "/api/v1/namespaces/{ns}/events",
           {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "e"}, "reason": "Test", "message": "m",
            "type": "Normal", "involvedObject": {"kind": "ConfigMap", "namespace": s.ns, "name": "a"}})


# -- patches ------------------------------------------------------------------------------------
@case
def merge_patch(s: Session) -> None:
    s.request("POST", CMS, cm("a", k="v", drop="me"))
    s.call("patch", "PATCH", f"{CMS}/a", {"data": {"k": "w", "drop": None, "new": "n"},
                                          "metadata": {"labels": {"l": "1"}}}, content_type=MERGE)
    s.call("stale-rv", "PATCH", f"{CMS}/a", {"metadata": {"resourceVersion": "1"}, "data": {"k": "x"}},
           content_type=MERGE)
    s.call("change-name", "PATCH", f"{CMS}/a", {"metadata": {"name": "b"}}, content_type=MERGE)
    s.call("not-json", "PATCH", f"{CMS}/a", b"{nope", content_type=MERGE)
    s.call("missing-object", "PATCH", f"{CMS}/nope", {"data": {}}, content_type=MERGE)
    s.call("noop", "PATCH", f"{CMS}/a", {}, content_type=MERGE)


@case
def json_patch(s: Session) -> None:
    s.request("POST", CMS, cm("a", k="v"))
    s.call("add-replace-remove", "PATCH", f"{CMS}/a", [
        {"op": "add", "path": "/data/n", "value": "1"}, {"op": "replace", "path": "/data/k", "value": "w"},
        {"op": "remove", "path": "/data/n"}], content_type=JSON_PATCH)
    s.call("replace-missing-key", "PATCH", f"{CMS}/a", [{"op": "replace", "path": "/data/missing",
                                                         "value": "x"}], content_type=JSON_PATCH)
    s.call("remove-missing-key", "PATCH", f"{CMS}/a", [{"op": "remove", "path": "/data/gone"}],
           content_type=JSON_PATCH)
    s.call("test-fails", "PATCH", f"{CMS}/a", [{"op": "test", "path": "/data/k", "value": "nope"}],
           content_type=JSON_PATCH)
    s.call("test-passes", "PATCH", f"{CMS}/a", [{"op": "test", "path": "/data/k", "value": "w"},
                                                {"op": "add", "path": "/metadata/labels", "value": {"t": "1"}}],
           content_type=JSON_PATCH)
    s.call("add-into-missing-parent", "PATCH", f"{CMS}/a", [{"op": "add", "path": "/metadata/annotations/x",
                                                             "value": "1"}], content_type=JSON_PATCH)
    s.call("bad-op", "PATCH", f"{CMS}/a", [{"op": "frobnicate", "path": "/data/k"}], content_type=JSON_PATCH)
    s.call("not-a-list", "PATCH", f"{CMS}/a", {"op": "add"}, content_type=JSON_PATCH)
    s.call("move-copy", "PATCH", f"{CMS}/a", [{"op": "copy", "from": "/data/k", "path": "/data/c"},
                                              {"op": "move", "from": "/data/c", "path": "/data/m"}],
           content_type=JSON_PATCH)


@case
def strategic_merge_patch(s: Session) -> None:
    s.request("POST", DEPLOYMENTS, deployment("web"))
    s.call("add-container", "PATCH", f"{DEPLOYMENTS}/web", {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "image": "busybox"}]}}}}, content_type=STRATEGIC, fields=SPEC)
    s.call("merge-env-by-name", "PATCH", f"{DEPLOYMENTS}/web", {"spec": {"template": {"spec": {"containers": [
        {"name": "web", "env": [{"name": "B", "value": "2"}]}]}}}}, content_type=STRATEGIC, fields=SPEC)
    s.call("delete-container", "PATCH", f"{DEPLOYMENTS}/web", {"spec": {"template": {"spec": {"containers": [
        {"name": "side", "$patch": "delete"}]}}}}, content_type=STRATEGIC, fields=SPEC)
    s.call("null-deletes", "PATCH", f"{DEPLOYMENTS}/web", {"spec": {"progressDeadlineSeconds": None}},
           content_type=STRATEGIC, fields=SPEC)
    s.call("on-custom-resource", "PATCH", f"{WIDGETS}/x", {"spec": {"size": 2}}, content_type=STRATEGIC)
    s.request("POST", WIDGETS, widget("w", size=1))
    s.call("on-existing-custom-resource", "PATCH", f"{WIDGETS}/w", {"spec": {"size": 2}},
           content_type=STRATEGIC)


@case
def unknown_patch_type(s: Session) -> None:
    s.request("POST", CMS, cm("a"))
    s.call("text-plain", "PATCH", f"{CMS}/a", b"x", content_type="text/plain")
    s.call("json-as-patch", "PATCH", f"{CMS}/a", {"data": {}}, content_type="application/json")


@case
def server_side_apply(s: Session) -> None:
    doc = json.dumps(cm("a", k="v"))
    s.call("create", "PATCH", q(f"{CMS}/a", fieldManager="one"), doc, content_type=APPLY)
    s.call("same-manager", "PATCH", q(f"{CMS}/a", fieldManager="one"), doc, content_type=APPLY)
    other = json.dumps(cm("a", k="other"))
    s.call("conflict", "PATCH", q(f"{CMS}/a", fieldManager="two"), other, content_type=APPLY)
    s.call("force", "PATCH", q(f"{CMS}/a", fieldManager="two", force="true"), other, content_type=APPLY)
    s.call("no-field-manager", "PATCH", f"{CMS}/a", doc, content_type=APPLY)
    s.call("bad-yaml", "PATCH", q(f"{CMS}/a", fieldManager="one"), "a: [", content_type=APPLY)
    s.call("force-on-other-type", "PATCH", q(f"{CMS}/a", fieldManager="one", force="true"),
           {"data": {}}, content_type=MERGE)
    s.call("yaml-body", "PATCH", q(f"{CMS}/b", fieldManager="one"),
           "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\ndata:\n  k: v\n", content_type=APPLY)
    s.call("name-mismatch", "PATCH", q(f"{CMS}/c", fieldManager="one"), json.dumps(cm("d")), content_type=APPLY)
    s.call("get", "GET", f"{CMS}/a")


@case
def apply_on_deployment(s: Session) -> None:
    doc = json.dumps(deployment("web"))
    s.call("create", "PATCH", q(f"{DEPLOYMENTS}/web", fieldManager="one"), doc, content_type=APPLY)
    scaled = deployment("web", replicas=3)
    s.call("conflict-replicas", "PATCH", q(f"{DEPLOYMENTS}/web", fieldManager="two"), json.dumps(scaled),
           content_type=APPLY)


@case
def apply_values_its_type_cannot_hold(s: Session) -> None:
    """YAML 1.1 as go-yaml reads it (``y``/``n``/``off`` are booleans, scalar keys become strings) and
    the 500 server-side apply answers for values of the wrong type, metadata included."""
    head = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n"
    s.call("float-in-data", "PATCH", q(f"{CMS}/t1", fieldManager="m"),
           head.format(name="t1") + "  labels:\n    a: !!float 1\ndata:\n  a: 2.5\n", content_type=APPLY)
    s.call("undeclared-first", "PATCH", q(f"{CMS}/t2", fieldManager="m"),
           head.format(name="t2") + "  foo: 1\n  labels:\n    a: 1\ndata:\n  z: [1]\n  x: {a: 1}\n",
           content_type=APPLY)
    s.call("name-not-a-string", "PATCH", q(f"{CMS}/t3", fieldManager="m"), head.format(name="5"),
           content_type=APPLY)
    s.call("bool-key", "PATCH", q(f"{CMS}/t4", fieldManager="m"),
           head.format(name="t4") + "data:\n  n: v\n  1: w\n", content_type=APPLY)
    s.call("yaml-y-is-true", "POST", CMS, head.format(name="y"), content_type="application/yaml")
    s.call("get-t4", "GET", f"{CMS}/t4")


# -- validation ---------------------------------------------------------------------------------
UNKNOWN_FIELD = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "u", "bogus": 1},
                 "data": {"k": "v"}, "extra": True}


@case
def field_validation(s: Session) -> None:
    for mode in ("Strict", "Warn", "Ignore"):
        body = json.loads(json.dumps(UNKNOWN_FIELD))
        body["metadata"]["name"] = mode.lower()
        s.call(f"create-{mode}", "POST", q(CMS, fieldValidation=mode), body)
    body = json.loads(json.dumps(UNKNOWN_FIELD))
    body["metadata"]["name"] = "default"
    s.call("create-default", "POST", CMS, body)
    s.call("create-bad-mode", "POST", q(CMS, fieldValidation="Loud"), cm("bad"))
    s.call("duplicate-field-strict", "POST", q(CMS, fieldValidation="Strict"),
           b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"k":"1","k":"2"}}')
    s.call("patch-strict", "PATCH", q(f"{CMS}/warn", fieldValidation="Strict"), {"nonsense": 1},
           content_type=MERGE)
    s.call("apply-strict", "PATCH", q(f"{CMS}/ap", fieldManager="m", fieldValidation="Strict"),
           json.dumps(dict(cm("ap"), extra=1)), content_type=APPLY)


@case
def validation_builtin(s: Session) -> None:
    bad = deployment("neg")
    bad["spec"]["replicas"] = -1
    s.call("negative-replicas", "POST", DEPLOYMENTS, bad)
    no_selector = deployment("nosel")
    del no_selector["spec"]["selector"]
    s.call("missing-selector", "POST", DEPLOYMENTS, no_selector)
    mismatch = deployment("mismatch")
    mismatch["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    s.call("selector-mismatch", "POST", DEPLOYMENTS, mismatch)
    no_image = deployment("noimage")
    del no_image["spec"]["template"]["spec"]["containers"][0]["image"]
    s.call("missing-image", "POST", DEPLOYMENTS, no_image)
    s.call("string-replicas", "POST", DEPLOYMENTS,
           dict(deployment("strrep"), spec=dict(deployment("strrep")["spec"], replicas="two")))


@case
def validation_crd_schema(s: Session) -> None:
    s.call("valid", "POST", WIDGETS, widget("ok", size=3, color="red", tags=["a"]))
    s.call("wrong-type", "POST", WIDGETS, widget("wrongtype", size="big"))
    s.call("out-of-range", "POST", WIDGETS, widget("range", size=50))
    s.call("not-in-enum", "POST", WIDGETS, widget("enum", size=1, color="green"))
    s.call("missing-required", "POST", WIDGETS, widget("req", color="red"))
    s.call("unknown-field-strict", "POST", q(WIDGETS, fieldValidation="Strict"), widget("strict", size=1, x=1))
    s.call("unknown-field-default", "POST", WIDGETS, widget("pruned", size=1, x=1))
    s.call("array-of-wrong-items", "POST", WIDGETS, widget("items", size=1, tags=[1, 2]))


@case
def custom_resource_lifecycle(s: Session) -> None:
    created = s.call("create", "POST", WIDGETS, widget("w", size=1, replicas=1))
    body = created.json
    body["status"] = {"phase": "Ready"}
    body["spec"]["size"] = 2
    s.call("update-ignores-status", "PUT", f"{WIDGETS}/w", body)
    status = s.request("GET", f"{WIDGETS}/w").json
    status["status"] = {"phase": "Ready", "replicas": 1}
    status["spec"]["size"] = 9
    s.call("status-ignores-spec", "PUT", f"{WIDGETS}/w/status", status)
    s.call("scale-get", "GET", f"{WIDGETS}/w/scale")
    s.call("scale-patch", "PATCH", f"{WIDGETS}/w/scale", {"spec": {"replicas": 4}}, content_type=MERGE)
    s.call("metadata-only-keeps-generation", "PATCH", f"{WIDGETS}/w", {"metadata": {"labels": {"a": "b"}}},
           content_type=MERGE)
    s.call("list", "GET", WIDGETS)
    s.call("table", "GET", WIDGETS, accept=TABLE)


# -- subresources -------------------------------------------------------------------------------
@case
def deployment_scale(s: Session) -> None:
    s.request("POST", DEPLOYMENTS, deployment("web"))
    # A Scale's status.replicas is the deployment controller's count of pods so far, written at its
    # own pace on each server: the answers are compared without it (errors are compared whole).
    scale_fields = ("apiVersion", "kind", "metadata", "spec")
    scale = s.call("get", "GET", f"{DEPLOYMENTS}/web/scale", fields=scale_fields)
    body = scale.json
    body["spec"]["replicas"] = 2
    # The deployment controller writes status between the GET and the PUT on a real cluster: the
    # PUT is unconditional, as `kubectl scale` without --resource-version is.
    body["metadata"].pop("resourceVersion", None)
    s.call("put", "PUT", f"{DEPLOYMENTS}/web/scale", body, fields=scale_fields)
    s.call("patch", "PATCH", f"{DEPLOYMENTS}/web/scale", {"spec": {"replicas": 3}}, content_type=MERGE,
           fields=scale_fields)
    s.call("negative", "PATCH", f"{DEPLOYMENTS}/web/scale", {"spec": {"replicas": -3}}, content_type=MERGE)
    s.call("missing", "GET", f"{DEPLOYMENTS}/nope/scale")


@case
def deployment_status(s: Session) -> None:
    s.request("POST", DEPLOYMENTS, deployment("web", replicas=0))
    current = s.request("GET", f"{DEPLOYMENTS}/web/status").json
    current["spec"]["replicas"] = 7
    current["status"] = {"observedGeneration": 1, "replicas": 0}
    current["metadata"].pop("resourceVersion", None)
    s.call("put-status", "PUT", f"{DEPLOYMENTS}/web/status", current, fields=("kind", "spec"))
    s.call("patch-status", "PATCH", f"{DEPLOYMENTS}/web/status", {"status": {"replicas": 0}},
           content_type=MERGE, fields=("kind", "spec"))
    s.call("spec-kept", "GET", f"{DEPLOYMENTS}/web", fields=("kind", "spec"))


# -- lists and paging ---------------------------------------------------------------------------
def five_configmaps(s: Session) -> None:
    for i in range(5):
        s.request("POST", CMS, {"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": f"c{i}", "labels": {"i": str(i), "even": str(i % 2 == 0)}}})


@case
def list_paging(s: Session) -> None:
    five_configmaps(s)
    first = s.call("page-1", "GET", q(CMS, limit=2))
    token = (first.json or {}).get("metadata", {}).get("continue", "")
    second = s.call("page-2", "GET", q(CMS, limit=2, **{"continue": token}))
    token = (second.json or {}).get("metadata", {}).get("continue", "")
    s.call("page-3", "GET", q(CMS, limit=2, **{"continue": token}))
    s.call("limit-0", "GET", q(CMS, limit=0))
    s.call("limit-with-selector", "GET", q(CMS, limit=1, labelSelector="even=True"))
    s.call("bad-continue", "GET", q(CMS, limit=2, **{"continue": "garbage"}))
    s.call("bad-limit", "GET", q(CMS, limit="x"))


@case
def list_resource_version_semantics(s: Session) -> None:
    five_configmaps(s)
    listed = s.request("GET", CMS)
    rv = listed.rv
    s.call("rv-0-limit", "GET", q(CMS, resourceVersion="0", limit=2))
    s.call("match-without-rv", "GET", q(CMS, resourceVersionMatch="NotOlderThan"))
    s.call("exact", "GET", q(CMS, resourceVersion=rv, resourceVersionMatch="Exact"))
    s.call("not-older-than", "GET", q(CMS, resourceVersion=rv, resourceVersionMatch="NotOlderThan"))
    s.call("bad-match", "GET", q(CMS, resourceVersion=rv, resourceVersionMatch="Newest"))
    s.call("exact-with-rv-0", "GET", q(CMS, resourceVersion="0", resourceVersionMatch="Exact"))
    s.call("continue-and-rv", "GET", q(CMS, resourceVersion=rv, **{"continue": "x"}))
    s.call("not-a-number", "GET", q(CMS, resourceVersion="abc"))


@case
def list_selectors(s: Session) -> None:
    five_configmaps(s)
    s.call("equality", "GET", q(CMS, labelSelector="i=1"))
    s.call("inequality", "GET", q(CMS, labelSelector="i!=1,even=True"))
    s.call("set", "GET", q(CMS, labelSelector="i in (1,2)"))
    s.call("notin", "GET", q(CMS, labelSelector="i notin (1,2)"))
    s.call("exists", "GET", q(CMS, labelSelector="even"))
    s.call("not-exists", "GET", q(CMS, labelSelector="!nothing"))
    s.call("bad-label-selector", "GET", q(CMS, labelSelector="i in 1"))
    s.call("field-name", "GET", q(CMS, fieldSelector="metadata.name=c3"))
    s.call("field-not-name", "GET", q(CMS, fieldSelector="metadata.name!=c3"))
    s.call("unsupported-field", "GET", q(CMS, fieldSelector="data.k=v"))
    s.call("bad-field-selector", "GET", q(CMS, fieldSelector="metadata.name"))


@case
def list_across_namespaces(s: Session) -> None:
    s.request("POST", CMS, dict(cm("x"), metadata={"name": "x", "labels": {"diff-case": s.ns}}))
    s.call("all-namespaces", "GET", q("/api/v1/configmaps", labelSelector=f"diff-case={s.ns}"))
    s.call("namespaces-field", "GET", q("/api/v1/namespaces", fieldSelector=f"metadata.name={s.ns}"))


@case
def list_output_formats(s: Session) -> None:
    five_configmaps(s)
    s.call("table", "GET", CMS, accept=TABLE)
    s.call("table-with-fallback", "GET", CMS, accept=f"{TABLE},application/json")
    s.call("protobuf", "GET", CMS, accept=PROTOBUF)
    s.call("protobuf-or-json", "GET", CMS, accept=f"{PROTOBUF},application/json")
    s.call("yaml", "GET", f"{CMS}/c1", accept="application/yaml")
    s.call("unacceptable", "GET", CMS, accept="text/html")
    s.call("partial-metadata", "GET", CMS,
           accept="application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io")


@case
def list_unknown_resources(s: Session) -> None:
    s.call("unknown-resource", "GET", "/api/v1/namespaces/{ns}/nothings")
    s.call("unknown-group", "GET", "/apis/nope.example.com/v1/namespaces/{ns}/things")
    s.call("unknown-version", "GET", "/apis/apps/v9/namespaces/{ns}/deployments")
    s.call("method-not-allowed", "POST", f"{CMS}/a", cm("a"))
    s.call("list-cluster-scoped-in-namespace", "GET", "/api/v1/namespaces/{ns}/nodes")


# -- watches ------------------------------------------------------------------------------------
def churn(s: Session, name: str = "w") -> Callable[[], None]:
    def run() -> None:
        time.sleep(0.3)
        s.request("POST", CMS, cm(name, n="0"))
        s.request("PATCH", f"{CMS}/{name}", {"data": {"n": "1"}}, content_type=MERGE)
        s.request("DELETE", f"{CMS}/{name}")
    return run


@case
def watch_from_zero(s: Session) -> None:
    s.request("POST", CMS, cm("pre"))
    s.watch("events", q(CMS, watch=1, resourceVersion="0"), during=churn(s), until=4)


@case
def watch_from_list(s: Session) -> None:
    s.request("POST", CMS, cm("pre"))
    rv = s.request("GET", CMS).rv
    s.watch("events", q(CMS, watch=1, resourceVersion=rv), during=churn(s), until=3)


@case
def watch_without_rv(s: Session) -> None:
    s.request("POST", CMS, cm("pre"))
    s.watch("events", q(CMS, watch=1), during=churn(s), until=4)


@case
def watch_initial_events_end(s: Session) -> None:
    s.request("POST", CMS, cm("pre"))
    s.watch("rv0-bookmarks", q(CMS, watch=1, resourceVersion="0", allowWatchBookmarks="true"), until=2)
    s.watch("send-initial-events", q(CMS, watch=1, sendInitialEvents="true", allowWatchBookmarks="true",
                                     resourceVersionMatch="NotOlderThan"), until=2)
    s.watch("send-initial-events-no-bookmarks", q(CMS, watch=1, sendInitialEvents="true",
                                                  resourceVersionMatch="NotOlderThan"), until=2, seconds=2)
    s.watch("send-initial-events-no-match", q(CMS, watch=1, sendInitialEvents="true",
                                              allowWatchBookmarks="true"), until=2, seconds=2)
    s.watch("send-initial-events-false", q(CMS, watch=1, sendInitialEvents="false", allowWatchBookmarks="true",
                                           resourceVersionMatch="NotOlderThan", resourceVersion="0"), seconds=1.5)


@case
def watch_bookmark_cadence(s: Session) -> None:
    """Real servers send a watch's bookmarks about once a minute: none in a few quiet seconds."""
    rv = s.request("GET", CMS).rv
    s.watch("quiet", q(CMS, watch=1, resourceVersion=rv, allowWatchBookmarks="true"), seconds=6)


@case
def watch_too_old(s: Session) -> None:
    # Not compared: a watch from resourceVersion 1. A real server's answer depends on what its watch
    # cache still holds (a cluster started a minute ago replays from 1, an older one answers 410);
    # tests/realcluster/test_informers_real.py forces a real 410 with a second API server instead.
    s.watch("not-a-number", q(CMS, watch=1, resourceVersion="abc"), seconds=2)


@case
def watch_legacy_paths(s: Session) -> None:
    rv = s.request("GET", CMS).rv
    s.watch("namespaced", q("/api/v1/watch/namespaces/{ns}/configmaps", resourceVersion=rv), during=churn(s),
            until=3)
    s.request("POST", CMS, cm("one"))
    s.watch("single-object", q("/api/v1/watch/namespaces/{ns}/configmaps/one", resourceVersion="0"), until=1)


@case
def watch_selectors(s: Session) -> None:
    s.request("POST", CMS, dict(cm("a"), metadata={"name": "a", "labels": {"sel": "yes"}}))
    rv = s.request("GET", CMS).rv

    def relabel() -> None:
        time.sleep(0.3)
        s.request("PATCH", f"{CMS}/a", {"metadata": {"labels": {"sel": "no"}}}, content_type=MERGE)
        s.request("PATCH", f"{CMS}/a", {"metadata": {"labels": {"sel": "yes"}}}, content_type=MERGE)
        s.request("PATCH", f"{CMS}/a", {"data": {"x": "1"}}, content_type=MERGE)
    s.watch("label-leaves-and-returns", q(CMS, watch=1, resourceVersion=rv, labelSelector="sel=yes"),
            during=relabel, until=3)
    s.request("POST", CMS, cm("b"))
    rv = s.request("GET", CMS).rv

    def touch() -> None:
        time.sleep(0.3)
        s.request("PATCH", f"{CMS}/a", {"data": {"y": "1"}}, content_type=MERGE)
        s.request("PATCH", f"{CMS}/b", {"data": {"y": "1"}}, content_type=MERGE)
    s.watch("field-name", q(CMS, watch=1, resourceVersion=rv, fieldSelector="metadata.name=b"), during=touch,
            until=1)


@case
def watch_timeout(s: Session) -> None:
    rv = s.request("GET", CMS).rv
    started = time.monotonic()
    s.watch("ends", q(CMS, watch=1, resourceVersion=rv, timeoutSeconds=1), seconds=5)
    s.record("ended-in-time", time.monotonic() - started < 4)


@case
def watch_delete_shape(s: Session) -> None:
    s.request("POST", CMS, cm("a", k="v"))
    rv = s.request("GET", CMS).rv

    def delete() -> None:
        time.sleep(0.3)
        s.request("DELETE", f"{CMS}/a")
    events = s.watch("events", q(CMS, watch=1, resourceVersion=rv), during=delete, until=1)
    s.record("deleted-object", events[0]["object"] if events else None)


@case
def watch_formats(s: Session) -> None:
    s.request("POST", CMS, cm("a"))
    s.watch("table", q(CMS, watch=1, resourceVersion="0"), accept=TABLE, until=1,
            describe=lambda e: [e.get("type"), (e.get("object") or {}).get("kind"),
                                len((e.get("object") or {}).get("rows") or [])])
    response = s.request("GET", q(CMS, watch=1, resourceVersion="0", timeoutSeconds=1), accept=PROTOBUF)
    # Each frame read as a Go client reads it (a 4-byte big-endian length, a WatchEvent, its object's
    # envelope): a look at raw[4:7] could not tell a real server's frames from anything else.
    s.record("protobuf", {"status": response.status, "contentType": response.content_type,
                          "frames": _watch_frames(response.raw)})


def _watch_frames(raw: bytes) -> list[Any]:
    frames, pos = [], 0
    while pos + 4 <= len(raw):
        length = int.from_bytes(raw[pos:pos + 4], "big")
        event = {number: value for number, _, value in protobuf.read_fields(raw[pos + 4:pos + 4 + length])}
        envelope = next(value for number, _, value in protobuf.read_fields(event[2]) if number == 1)
        obj = protoenc.decode_response(envelope)
        frames.append([event[1].decode(), obj["kind"], obj["metadata"].get("name")])
        pos += 4 + length
    return frames if pos == len(raw) else [*frames, f"{len(raw) - pos} bytes left over"]


@case
def watch_with_finalizer(s: Session) -> None:
    s.request("POST", CMS, dict(cm("f"), metadata={"name": "f", "finalizers": ["diff.ctrlscope.dev/hold"]}))
    rv = s.request("GET", CMS).rv

    def finish() -> None:
        time.sleep(0.3)
        s.request("DELETE", f"{CMS}/f")
        s.request("PATCH", f"{CMS}/f", {"metadata": {"finalizers": None}}, content_type=MERGE)
    s.watch("events", q(CMS, watch=1, resourceVersion=rv), during=finish, until=3)


# -- finalizers and garbage collection ----------------------------------------------------------
@case
def finalizers(s: Session) -> None:
    s.request("POST", CMS, dict(cm("f"), metadata={"name": "f", "finalizers": ["diff.ctrlscope.dev/hold"]}))
    s.call("delete", "DELETE", f"{CMS}/f")
    s.call("terminating", "GET", f"{CMS}/f")
    s.call("add-finalizer-while-terminating", "PATCH", f"{CMS}/f",
           {"metadata": {"finalizers": ["diff.ctrlscope.dev/hold", "diff.ctrlscope.dev/late"]}},
           content_type=MERGE)
    s.call("change-while-terminating", "PATCH", f"{CMS}/f", {"data": {"k": "v"}}, content_type=MERGE)
    s.call("release", "PATCH", f"{CMS}/f", {"metadata": {"finalizers": None}}, content_type=MERGE)
    s.call("gone", "GET", f"{CMS}/f")


def wait_for(s: Session, path: str, gone: bool, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (s.request("GET", path).status == 404) == gone:
            return True
        time.sleep(0.2)
    return False


def owned(s: Session, name: str, owner: dict[str, Any]) -> None:
    meta = {"name": name, "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                               "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}]}
    s.request("POST", CMS, dict(cm(name), metadata=meta))


@case
def garbage_collection(s: Session) -> None:
    owner = s.request("POST", CMS, cm("owner")).json
    owned(s, "child", owner)
    s.call("delete-owner", "DELETE", f"{CMS}/owner")
    s.record("child-collected", wait_for(s, f"{CMS}/child", gone=True))
    owner = s.request("POST", CMS, cm("owner2")).json
    owned(s, "orphan", owner)
    s.call("orphan", "DELETE", f"{CMS}/owner2", {"propagationPolicy": "Orphan"})
    s.record("owner-gone", wait_for(s, f"{CMS}/owner2", gone=True))
    s.call("orphan-kept", "GET", f"{CMS}/orphan")
    owner = s.request("POST", CMS, cm("owner3")).json
    owned(s, "fg-child", owner)
    s.call("foreground", "DELETE", f"{CMS}/owner3", {"propagationPolicy": "Foreground"})
    s.record("foreground-owner-gone", wait_for(s, f"{CMS}/owner3", gone=True))
    s.record("foreground-child-gone", wait_for(s, f"{CMS}/fg-child", gone=True))


# -- discovery, OpenAPI, health -----------------------------------------------------------------
def resource_entry(body: Any, name: str) -> Any:
    return next((r for r in (body or {}).get("resources") or [] if r.get("name") == name), None)


@case
def discovery(s: Session) -> None:
    version = s.request("GET", "/version").json or {}
    s.record("version-keys", sorted(version))
    core = s.request("GET", "/api")
    s.record("api", {"status": core.status, "kind": core.json.get("kind"), "versions": core.json.get("versions")})
    v1 = s.request("GET", "/api/v1").json
    for name in ("configmaps", "pods", "pods/status", "pods/log", "namespaces", "events"):
        s.record(f"api-v1 {name}", resource_entry(v1, name))
    apps = s.request("GET", "/apis/apps/v1").json
    for name in ("deployments", "deployments/scale", "deployments/status"):
        s.record(f"apps-v1 {name}", resource_entry(apps, name))
    crd = s.request("GET", f"/apis/{CRD_GROUP}/v1").json
    for name in ("widgets", "widgets/status", "widgets/scale"):
        s.record(f"crd {name}", resource_entry(crd, name))
    groups = s.request("GET", "/apis").json
    s.record("apis kind", groups.get("kind"))
    names = {g["name"] for g in groups.get("groups") or []}
    s.record("apis has", {g: g in names for g in ("apps", "coordination.k8s.io", "apiextensions.k8s.io",
                                                   "batch", "rbac.authorization.k8s.io", CRD_GROUP)})
    apps_group = next((g for g in groups.get("groups") or [] if g["name"] == "apps"), None)
    s.record("apis apps", apps_group)
    s.call("unknown-group", "GET", "/apis/nope.example.com")
    s.call("unknown-group-version", "GET", "/apis/apps/v9")


@case
def discovery_aggregated(s: Session) -> None:
    accept = ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
              "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json")
    for path in ("/api", "/apis"):
        response = s.request("GET", path, accept=accept)
        body = response.json or {}
        summary: dict[str, Any] = {"status": response.status, "contentType": response.content_type,
                                   "kind": body.get("kind"), "apiVersion": body.get("apiVersion")}
        for group in body.get("items") or []:
            if group["metadata"].get("name", "") in ("", "apps", CRD_GROUP):
                for version in group.get("versions") or []:
                    for resource in version.get("resources") or []:
                        if resource["resource"] in ("configmaps", "deployments", "widgets"):
                            summary[f"{group['metadata'].get('name', '')}/{version['version']}/"
                                    f"{resource['resource']}"] = resource
        s.record(path, summary)


@case
def openapi(s: Session) -> None:
    v3 = s.request("GET", "/openapi/v3")
    paths = (v3.json or {}).get("paths") or {}
    s.record("v3-index", {"status": v3.status, "has": {p: p in paths for p in ("api/v1", "apis/apps/v1",
                                                                              f"apis/{CRD_GROUP}/v1")}})
    group = s.request("GET", "/openapi/v3/apis/apps/v1")
    s.record("v3-apps", {"status": group.status, "contentType": _media(group.content_type),
                         "openapi": (group.json or {}).get("openapi")})
    v2 = s.request("GET", "/openapi/v2")
    s.record("v2-json", {"status": v2.status, "contentType": _media(v2.content_type),
                         "swagger": (v2.json or {}).get("swagger"),
                         "has-configmap": "io.k8s.api.core.v1.ConfigMap" in ((v2.json or {}).get("definitions") or {})})
    proto = s.request("GET", "/openapi/v2", accept="application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
    s.record("v2-protobuf", {"status": proto.status, "contentType": _media(proto.content_type)})


def _media(content_type: str) -> str:
    return content_type.split(";")[0].strip()


@case
def health(s: Session) -> None:
    for path in ("/healthz", "/readyz", "/livez"):
        response = s.request("GET", path, accept="*/*")
        s.record(path, {"status": response.status, "body": response.raw.decode(errors="replace")})
    verbose = s.request("GET", "/readyz?verbose", accept="*/*")
    s.record("/readyz?verbose", {"status": verbose.status, "last-line": verbose.raw.decode().strip().splitlines()[-1]})


# -- resourceVersion and optimistic concurrency across kinds ------------------------------------
@case
def generation(s: Session) -> None:
    s.request("POST", DEPLOYMENTS, deployment("web"))
    steps = [("label-only", {"metadata": {"labels": {"a": "b"}}}), ("spec-change", {"spec": {"replicas": 2}}),
             ("status-on-main-resource", {"status": {"replicas": 5}})]
    for label, patch in steps:
        response = s.call(label, "PATCH", f"{DEPLOYMENTS}/web", patch, content_type=MERGE, fields=SPEC)
        s.record(f"{label} generation", ((response.json or {}).get("metadata") or {}).get("generation"))


@case
def large_resource_version(s: Session) -> None:
    """A list at a revision the server has not reached: it waits, then answers 504 (informers hit
    this against a lagging watch cache)."""
    s.call("list-future", "GET", q(CMS, resourceVersion="999999999", resourceVersionMatch="NotOlderThan"),
           timeout=20)
    s.call("get-future", "GET", q(f"{CMS}/nope", resourceVersion="999999999"), timeout=20)
