"""Typed decoding, fieldValidation and schema validation, held to what kube-apiserver v1.37.2 answers.

Every expectation here was read off a real API server (tests/differential plays the same requests
against one): the status code, the reason, the causes and the Warning headers a client sees.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from controllers.sim import SimCluster

CMS = "/api/v1/namespaces/{ns}/configmaps"
DEPLOYMENTS = "/apis/apps/v1/namespaces/{ns}/deployments"
GROUP = "fv.ctrlscope.dev"
GADGETS = f"/apis/{GROUP}/v1/namespaces/{{ns}}/gadgets"


class Answer:
    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.warnings = [v for k, v in headers if k.lower() == "warning"]
        self.json: Any = json.loads(body) if body else None

    @property
    def causes(self) -> list[tuple[str, str, str]]:
        return [(c["field"], c["reason"], c["message"]) for c in (self.json.get("details") or {}).get("causes", [])]


def call(sim: SimCluster, method: str, path: str, body: Any = None, ctype: str = "application/json") -> Answer:
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(sim.url + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", ctype)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return Answer(resp.status, resp.getheaders(), resp.read())
    except urllib.error.HTTPError as e:
        return Answer(e.code, list(e.headers.items()), e.read())


def cm(name: str, **extra: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, **extra}


def deployment(name: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"schedulerName": "nobody",
                                           "containers": [{"name": "web", "image": "nginx"}]}}}}


# -- fieldValidation on built-in kinds -----------------------------------------------------------
def test_strict_rejects_unknown_fields_naming_each_in_document_order(sim: SimCluster, ns: str) -> None:
    body = cm("s", metadata={"name": "s", "bogus": 1}, data={"k": "v"}, extra=True)
    got = call(sim, "POST", CMS.format(ns=ns) + "?fieldValidation=Strict", body)
    assert (got.status, got.json["reason"]) == (400, "BadRequest")
    assert got.json["message"] == ('ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding '
                                   'error: unknown field "metadata.bogus", unknown field "extra"')
    assert call(sim, "GET", CMS.format(ns=ns) + "/s").status == 404


@pytest.mark.parametrize("query", ["", "?fieldValidation=Warn"])
def test_warn_is_the_default_drops_unknown_fields_and_says_so_per_field(sim: SimCluster, ns: str, query: str) -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"w","bogus":1},"data":{"k":"v","k":"w"},' \
          b'"extra":true}'
    got = call(sim, "POST", CMS.format(ns=ns) + query, raw)
    assert got.status == 201
    assert got.warnings == ['299 - "unknown field \\"metadata.bogus\\""', '299 - "duplicate field \\"data.k\\""',
                            '299 - "unknown field \\"extra\\""']
    stored = call(sim, "GET", CMS.format(ns=ns) + "/w").json
    assert "extra" not in stored and "bogus" not in stored["metadata"]
    assert stored["data"] == {"k": "w"}  # the last occurrence, as encoding/json keeps it


def test_ignore_drops_unknown_fields_silently(sim: SimCluster, ns: str) -> None:
    got = call(sim, "POST", CMS.format(ns=ns) + "?fieldValidation=Ignore", cm("i", extra=1))
    assert (got.status, got.warnings) == (201, [])
    assert "extra" not in got.json


def test_duplicate_field_is_a_strict_error(sim: SimCluster, ns: str) -> None:
    raw = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"dup"},"data":{"k":"1","k":"2"}}'
    got = call(sim, "POST", CMS.format(ns=ns) + "?fieldValidation=Strict", raw)
    assert got.status == 400
    assert got.json["message"].endswith('strict decoding error: duplicate field "data.k"')


@pytest.mark.parametrize(("method", "suffix", "options"), [("POST", "", "CreateOptions"),
                                                           ("PUT", "/x", "UpdateOptions")])
def test_an_unsupported_mode_is_invalid_options(sim: SimCluster, ns: str, method: str, suffix: str,
                                                options: str) -> None:
    call(sim, "POST", CMS.format(ns=ns), cm("x"))
    got = call(sim, method, CMS.format(ns=ns) + suffix + "?fieldValidation=Loud", cm("x"))
    assert (got.status, got.json["reason"]) == (422, "Invalid")
    assert got.json["details"]["kind"] == options and got.json["details"]["group"] == "meta.k8s.io"
    assert got.causes == [("fieldValidation", "FieldValueNotSupported",
                           'Unsupported value: "Loud": supported values: "", "Ignore", "Strict", "Warn"')]


def test_patch_strict_is_422_on_the_patch_and_warn_names_the_field(sim: SimCluster, ns: str) -> None:
    call(sim, "POST", CMS.format(ns=ns), cm("p", data={"k": "v"}))
    strict = call(sim, "PATCH", CMS.format(ns=ns) + "/p?fieldValidation=Strict", {"nonsense": 1},
                  "application/merge-patch+json")
    assert (strict.status, strict.json["reason"]) == (422, "Invalid")
    [(field, reason, message)] = strict.causes
    assert (field, reason) == ("patch", "FieldValueInvalid")
    assert message.endswith('strict decoding error: unknown field "nonsense"')
    warned = call(sim, "PATCH", CMS.format(ns=ns) + "/p", {"nonsense": 1}, "application/merge-patch+json")
    assert warned.status == 200 and warned.warnings == ['299 - "unknown field \\"nonsense\\""']
    assert "nonsense" not in warned.json


def test_apply_cannot_build_a_typed_object_with_an_unknown_field_whatever_the_mode(sim: SimCluster, ns: str) -> None:
    for mode in ("Strict", "Warn", "Ignore"):
        got = call(sim, "PATCH", CMS.format(ns=ns) + f"/ap?fieldManager=m&fieldValidation={mode}",
                   json.dumps(cm("ap", extra=1)).encode(), "application/apply-patch+yaml")
        assert got.status == 500 and "reason" not in got.json
        assert got.json["message"] == ("failed to create typed patch object (/ap; /v1, Kind=ConfigMap): "
                                       ".extra: field not declared in schema")


# -- typed decoding ------------------------------------------------------------------------------
@pytest.mark.parametrize(("path", "body", "message"), [
    (CMS, cm("n", data={"k": 1}),
     'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct '
     "field ConfigMap.data of type string"),
    (DEPLOYMENTS, dict(deployment("d"), spec=dict(deployment("d")["spec"], replicas="two")),
     'Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct '
     "field DeploymentSpec.spec.replicas of type int32"),
    ("/api/v1/namespaces/{ns}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "t"},
                                         "data": {"x": "not base64!"}},
     'Secret in version "v1" cannot be handled as a Secret: illegal base64 data at input byte 3'),
])
def test_a_value_its_go_type_cannot_hold_is_a_bad_request(sim: SimCluster, ns: str, path: str, body: Any,
                                                          message: str) -> None:
    got = call(sim, "POST", path.format(ns=ns), body)
    assert (got.status, got.json["reason"], got.json["message"]) == (400, "BadRequest", message)


def test_unknown_fields_deep_in_lists_are_named_with_their_index(sim: SimCluster, ns: str) -> None:
    body = deployment("deep")
    container = body["spec"]["template"]["spec"]["containers"][0]
    container.update(foo=1, ports=[{"containerPort": 80, "bar": 2}])
    got = call(sim, "POST", DEPLOYMENTS.format(ns=ns), body)
    assert got.status == 201
    assert got.warnings == ['299 - "unknown field \\"spec.template.spec.containers[0].foo\\""',
                            '299 - "unknown field \\"spec.template.spec.containers[0].ports[0].bar\\""']


# -- built-in validation -------------------------------------------------------------------------
def test_deployment_selector_must_select_the_template(sim: SimCluster, ns: str) -> None:
    mismatch = deployment("mismatch")
    mismatch["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    got = call(sim, "POST", DEPLOYMENTS.format(ns=ns), mismatch)
    assert [(f, r) for f, r, _ in got.causes] == [("spec.template.metadata.labels", "FieldValueInvalid")]
    no_selector = deployment("nosel")
    del no_selector["spec"]["selector"]
    got = call(sim, "POST", DEPLOYMENTS.format(ns=ns), no_selector)
    assert [(f, r) for f, r, _ in got.causes] == [("spec.selector", "FieldValueRequired"),
                                                  ("spec.template.metadata.labels", "FieldValueInvalid")]
    no_image = deployment("noimage")
    del no_image["spec"]["template"]["spec"]["containers"][0]["image"]
    got = call(sim, "POST", DEPLOYMENTS.format(ns=ns), no_image)
    assert got.causes == [("spec.template.spec.containers[0].image", "FieldValueRequired", "Required value")]


def test_names_and_generate_names(sim: SimCluster, ns: str) -> None:
    missing = call(sim, "POST", CMS.format(ns=ns), {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})
    assert missing.causes == [("metadata.name", "FieldValueRequired",
                               "Required value: name or generateName is required")]
    assert "name" not in missing.json["details"]
    bad = call(sim, "POST", CMS.format(ns=ns), {"apiVersion": "v1", "kind": "ConfigMap",
                                                "metadata": {"generateName": "Gen_"}})
    assert [(f, r) for f, r, _ in bad.causes] == [("metadata.generateName", "FieldValueInvalid"),
                                                  ("metadata.name", "FieldValueInvalid")]
    good = call(sim, "POST", CMS.format(ns=ns), {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"generateName": "gen-"}})
    assert good.status == 201 and good.json["metadata"]["name"].startswith("gen-")


def test_an_immutable_configmap_keeps_its_data_but_not_its_labels(sim: SimCluster, ns: str) -> None:
    created = call(sim, "POST", CMS.format(ns=ns), cm("a", data={"k": "v"}, immutable=True)).json
    created["data"]["k"] = "w"
    got = call(sim, "PUT", CMS.format(ns=ns) + "/a", created)
    assert got.causes == [("data", "FieldValueForbidden", "Forbidden: field is immutable when `immutable` is set")]
    labelled = call(sim, "PATCH", CMS.format(ns=ns) + "/a", {"metadata": {"labels": {"x": "y"}}},
                    "application/merge-patch+json")
    assert labelled.status == 200 and labelled.json["data"] == {"k": "v"}


def test_no_new_finalizer_on_an_object_being_deleted(sim: SimCluster, ns: str) -> None:
    call(sim, "POST", CMS.format(ns=ns), cm("f", metadata={"name": "f", "finalizers": ["x.dev/hold"]}))
    call(sim, "DELETE", CMS.format(ns=ns) + "/f")
    got = call(sim, "PATCH", CMS.format(ns=ns) + "/f", {"metadata": {"finalizers": ["x.dev/hold", "x.dev/late"]}},
               "application/merge-patch+json")
    assert got.status == 422
    assert got.causes == [("metadata.finalizers", "FieldValueForbidden",
                           "Forbidden: no new finalizers can be added if the object is being deleted, found new "
                           'finalizers []string{"x.dev/late"}')]
    call(sim, "PATCH", CMS.format(ns=ns) + "/f", {"metadata": {"finalizers": None}}, "application/merge-patch+json")


def test_negative_scale_names_its_cause(sim: SimCluster, ns: str) -> None:
    call(sim, "POST", DEPLOYMENTS.format(ns=ns), deployment("web"))
    got = call(sim, "PATCH", DEPLOYMENTS.format(ns=ns) + "/web/scale", {"spec": {"replicas": -3}},
               "application/merge-patch+json")
    assert (got.status, got.json["details"]["kind"]) == (422, "Scale")
    assert got.causes == [("spec.replicas", "FieldValueInvalid",
                           "Invalid value: -3: must be greater than or equal to 0")]


# -- custom resources: the CRD's structural schema -----------------------------------------------
CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": f"gadgets.{GROUP}"},
    "spec": {"group": GROUP, "scope": "Namespaced",
             "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                 "type": "object", "properties": {"spec": {
                     "type": "object", "required": ["size"], "properties": {
                         "size": {"type": "integer", "minimum": 1, "maximum": 10},
                         "color": {"type": "string", "enum": ["red", "blue"]},
                         "name": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                         "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                         "uniq": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
                         "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                         "opaque": {"type": "object"},
                         "nul": {"type": "string", "nullable": True},
                         "nonnul": {"type": "string"},
                         "deflt": {"type": "string", "default": "dv"},
                         "ios": {"x-kubernetes-int-or-string": True}}}}}}}]}}


@pytest.fixture(scope="module")
def gadgets(sim: SimCluster) -> str:
    assert call(sim, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD).status == 201
    deadline = time.monotonic() + 10
    while call(sim, "GET", f"/apis/{GROUP}/v1").status != 200:
        assert time.monotonic() < deadline, "the CRD was never served"
        time.sleep(0.05)
    return GADGETS


def gadget(name: str, /, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Gadget", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize(("spec", "causes"), [
    ({"size": "big"}, [("spec.size", "FieldValueTypeInvalid",
                        'Invalid value: "string": spec.size in body must be of type integer: "string"')]),
    ({"size": 50}, [("spec.size", "FieldValueInvalid",
                     "Invalid value: 50: spec.size in body should be less than or equal to 10")]),
    ({"size": 0}, [("spec.size", "FieldValueInvalid",
                    "Invalid value: 0: spec.size in body should be greater than or equal to 1")]),
    ({"size": 1, "color": "green"}, [("spec.color", "FieldValueNotSupported",
                                      'Unsupported value: "green": supported values: "red", "blue"')]),
    ({"color": "red"}, [("spec.size", "FieldValueRequired", "Required value")]),
    ({"size": 1, "tags": [1, "a"]}, [("spec.tags[0]", "FieldValueTypeInvalid",
                                      'Invalid value: "integer": spec.tags[0] in body must be of type string: '
                                      '"integer"')]),
    ({"size": 1, "tags": ["a", "b", "c"]}, [("spec.tags", "FieldValueTooMany", "Too many: 3: must have at most 2 items")]),
    ({"size": 1, "name": "ABCDEFG"}, [("spec.name", "FieldValueTooLong", "Too long: may not be more than 5 bytes")]),
    ({"size": 1, "name": "AB"}, [("spec.name", "FieldValueInvalid",
                                  "Invalid value: \"AB\": spec.name in body should match '^[a-z]+$'")]),
    ({"size": 1, "uniq": ["a", "a"]}, [("spec.uniq[1]", "FieldValueDuplicate", 'Duplicate value: "a"')]),
    ({"size": 1, "ios": True}, [("spec.ios", "FieldValueTypeInvalid",
                                 'Invalid value: "boolean": spec.ios in body must be of type integer,string: '
                                 '"boolean"')]),
])
def test_schema_violations_are_invalid_with_the_real_causes(sim: SimCluster, ns: str, gadgets: str,
                                                            spec: dict[str, Any],
                                                            causes: list[tuple[str, str, str]]) -> None:
    got = call(sim, "POST", gadgets.format(ns=ns), gadget("g", **spec))
    assert (got.status, got.json["reason"]) == (422, "Invalid")
    assert got.json["message"].startswith(f'Gadget.{GROUP} "g" is invalid: ')
    assert got.causes == causes


def test_pruning_defaulting_and_nulls(sim: SimCluster, ns: str, gadgets: str) -> None:
    got = call(sim, "POST", gadgets.format(ns=ns), gadget("p", size=1, x=1, free={"z": 1}, opaque={"a": 1},
                                                          nul=None, nonnul=None))
    assert got.status == 201
    assert got.warnings == ['299 - "unknown field \\"spec.opaque.a\\""', '299 - "unknown field \\"spec.x\\""']
    assert got.json["spec"] == {"size": 1, "free": {"z": 1}, "opaque": {}, "nul": None, "deflt": "dv"}
    strict = call(sim, "POST", gadgets.format(ns=ns) + "?fieldValidation=Strict", gadget("q", size=1, x=1))
    assert (strict.status, strict.json["message"]) == (
        400, 'Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: unknown field "spec.x"')


def test_an_apiversion_that_is_not_a_string_cannot_even_be_read(sim: SimCluster, ns: str) -> None:
    got = call(sim, "POST", CMS.format(ns=ns), {"apiVersion": ["v1"], "kind": "ConfigMap", "metadata": {"name": "v"}})
    assert (got.status, got.json["reason"]) == (400, "BadRequest")
    assert got.json["message"].startswith("the object provided is unrecognized (must be of type ConfigMap): couldn't "
                                          "get version/kind; json parse error: json: cannot unmarshal array into Go "
                                          "struct field .apiVersion of type string")
    call(sim, "POST", CMS.format(ns=ns), cm("v"))
    patched = call(sim, "PATCH", CMS.format(ns=ns) + "/v", {"kind": 5}, "application/merge-patch+json")
    assert (patched.status, patched.causes[0][:2]) == (422, ("patch", "FieldValueInvalid"))
    assert patched.causes[0][2].endswith("json: cannot unmarshal number into Go struct field .kind of type string")
