"""The OpenAPI v3 documents kubectl explain reads: built-in kinds get field schemas from the
kubernetes package's models, every reference resolves, custom resources get their CRD's schema (a
CRD without one keeps a stub); /openapi/v2 is the same in Swagger 2.0 form."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from controllers.sim import SimCluster
from controllers.sim.openapi_models import SchemaBuilder, component_name


def get(sim: SimCluster, path: str) -> Any:
    with urllib.request.urlopen(sim.url + path, timeout=10) as resp:
        return json.loads(resp.read())


def refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()  # JSONSchemaProps has a "$ref" field
        for value in node.values():
            found |= refs(value)
        return found
    if isinstance(node, list):
        return set().union(*map(refs, node)) if node else set()
    return set()


def resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "allOf" in schema:
        schema = doc["components"]["schemas"][schema["allOf"][0]["$ref"].rsplit("/", 1)[1]]
    return schema


def test_core_documents_have_field_schemas_and_every_reference_resolves(fresh_sim: SimCluster) -> None:
    index = get(fresh_sim, "/openapi/v3")["paths"]
    for path in ("api/v1", "apis/apps/v1", "apis/apiextensions.k8s.io/v1"):
        doc = get(fresh_sim, index[path]["serverRelativeURL"])
        schemas = doc["components"]["schemas"]
        missing = {r for r in refs(doc) if r.rsplit("/", 1)[1] not in schemas}
        assert not missing, (path, sorted(missing)[:5])
    core = get(fresh_sim, index["api/v1"]["serverRelativeURL"])
    pod = core["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Pod"}]
    assert pod["description"].startswith("Pod is a collection of containers")
    spec = resolve(core, pod["properties"]["spec"])
    containers = spec["properties"]["containers"]
    assert containers["type"] == "array" and "containers" in spec["required"]
    container = resolve(core, containers["items"])
    assert container["properties"]["ports"]["items"]["allOf"][0]["$ref"].endswith("/io.k8s.model.ContainerPort")
    assert resolve(core, container["properties"]["ports"]["items"])["required"] == ["containerPort"]
    assert container["properties"]["resources"]["allOf"]  # a reference, described by its type
    labels = resolve(core, pod["properties"]["metadata"])["properties"]["labels"]
    assert labels == {"type": "object", "additionalProperties": {"type": "string"}, "description": labels["description"]}


def test_custom_resources_keep_the_stub_and_names_drop_the_version_prefix(fresh_sim: SimCluster) -> None:
    builder = SchemaBuilder()
    assert builder.kind("demo.ctrlscope.dev", "v1", "PodSet") is None
    assert component_name("V1PodSpec") == "io.k8s.model.PodSpec"
    assert component_name("CoreV1ResourceClaim") == "io.k8s.model.ResourceClaim"
    assert component_name("V1beta1Lease") == "io.k8s.model.Lease"
    assert builder.kind("apiextensions.k8s.io", "v1", "CustomResourceDefinition") is not None
    props = builder.components["io.k8s.model.JSONSchemaProps"]["properties"]
    assert props["properties"]["additionalProperties"]["allOf"][0]["$ref"].endswith("/io.k8s.model.JSONSchemaProps"), \
        "a model that refers to itself becomes a recursive reference, not an endless one"


def test_custom_resources_publish_their_crd_schema(fresh_sim: SimCluster) -> None:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "gizmos.oa.example.com"},
           "spec": {"group": "oa.example.com", "scope": "Namespaced",
                    "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
                        "type": "object", "properties": {"spec": {"type": "object", "required": ["size"],
                                                                  "properties": {"size": {"type": "integer"}}}}}}}]}}
    request = urllib.request.Request(fresh_sim.url + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                     data=json.dumps(crd).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=10).read()
    doc = get(fresh_sim, "/openapi/v3/apis/oa.example.com/v1")
    schema = doc["components"]["schemas"]["com.example.oa.v1.Gizmo"]
    assert list(schema["properties"]) == ["apiVersion", "kind", "metadata", "spec"]
    assert schema["properties"]["spec"] == crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert resolve(doc, schema["properties"]["metadata"])["properties"]["name"]["type"] == "string"
    swagger = get(fresh_sim, "/openapi/v2")
    assert swagger["swagger"] == "2.0" and swagger["definitions"]["com.example.oa.v1.Gizmo"]["properties"]["spec"] == \
        schema["properties"]["spec"]
