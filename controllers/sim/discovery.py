"""API discovery and OpenAPI v3 documents, generated from the ``Registry``.

kubectl learns what exists from discovery before every command with a cold cache:

* aggregated discovery (``APIGroupDiscoveryList``, apidiscovery.k8s.io/v2) when it asks for it in
  ``Accept`` — and it only understands the answer if the Content-Type names that type exactly;
* legacy discovery (``APIVersions``, ``APIGroupList``, one ``APIResourceList`` per group version),
  which the Python DynamicClient always uses.

``kubectl apply`` also reads OpenAPI v3 to learn that the server accepts ``fieldValidation`` for a
kind (then it validates server-side instead of refusing to run). The stubs publish, per resource, a
``patch`` operation with ``x-kubernetes-group-version-kind`` and that parameter, and for built-in
kinds the field schemas ``kubectl explain`` reads (``openapi_models``: from the ``kubernetes``
package's models, without patch extensions), for custom resources their CRD version's
``openAPIV3Schema`` with apiVersion, kind and metadata added, as the API server publishes it. They
deliberately
do not advertise strategic merge patch in the request body: kubectl then builds its apply patch from
the merge keys compiled into it for built-in kinds (exactly what it sends to a real cluster), and
falls back to a JSON merge patch for custom resources, as it does against real CRDs.

Documents are rebuilt only when the registry's generation changes (a CRD came or went); the hash in
``serverRelativeURL`` changes with it so kubectl's OpenAPI cache notices.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import orjson

from controllers.sim.openapi_models import SchemaBuilder
from controllers.sim.resources import Registry, ResourceType
from controllers.simulated import SIMULATOR_GIT_COMMIT

AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
_SUB_VERBS = {"status": ["get", "patch", "update"], "scale": ["get", "patch", "update"], "log": ["get"]}


# What ``kubectl explain <kind>`` prints for a kind without a model (custom resources): it can name the
# kind, not its fields. Built-in kinds get field schemas from ``openapi_models``.
_STUB_NOTE = ("The ctrlscope simulator serves no field schema for this kind, so kubectl explain cannot list its "
              "fields; see https://kubernetes.io/docs/reference/kubernetes-api/")


def _sub_kind(rt: ResourceType, sub: str) -> tuple[str, str, str]:
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    if sub == "log":
        return ("", "v1", "Pod")
    return (rt.group, rt.version, rt.kind)


def _subresources(rt: ResourceType) -> list[str]:
    """In the order the API server lists them: a built-in type's sorted by name (its storage map is
    walked in order), a CRD's as its handler adds them (status, then scale)."""
    return sorted(rt.subresources()) if rt.builtin else rt.subresources()


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """The API server's discovery.StorageVersionHash: the first 8 bytes of sha256("group/version/kind")
    of the version objects are stored in, base64. Clients (the storage-version migrator) only compare
    it for changes."""
    return base64.b64encode(hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()[:8]).decode()


# kube-apiserver's group priority order (how /apis lists built-in groups); CRD groups follow.
_GROUP_ORDER = ("apiregistration.k8s.io", "apps", "events.k8s.io", "authentication.k8s.io", "authorization.k8s.io",
                "autoscaling", "batch", "certificates.k8s.io", "networking.k8s.io", "policy",
                "rbac.authorization.k8s.io", "storage.k8s.io", "admissionregistration.k8s.io", "apiextensions.k8s.io",
                "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "resource.k8s.io",
                "flowcontrol.apiserver.k8s.io", "storagemigration.k8s.io")


class Discovery:
    """Discovery and OpenAPI documents for the current registry, cached per registry generation."""

    def __init__(self, registry: Registry, git_version: str = "v1.32.0") -> None:
        self.registry = registry
        self.git_version = git_version
        self._cache: dict[str, bytes] = {}
        self._generation = -1

    def _cached(self, name: str, build: Any) -> bytes:
        if self._generation != self.registry.generation:
            self._cache.clear()
            self._generation = self.registry.generation
        data = self._cache.get(name)
        if data is None:
            data = self._cache[name] = orjson.dumps(build())
        return data

    def version(self) -> dict[str, Any]:
        major, minor = self.git_version.lstrip("v").split(".")[:2]
        # Since 1.31 the server also says which version it emulates (itself, without
        # --emulated-version) and the oldest it stays compatible with (one minor back).
        return {"major": major, "minor": minor, "emulationMajor": major, "emulationMinor": minor,
                "minCompatibilityMajor": major, "minCompatibilityMinor": str(max(0, int(minor) - 1)),
                "gitVersion": self.git_version, "gitCommit": SIMULATOR_GIT_COMMIT,
                "gitTreeState": "clean", "buildDate": "2025-01-01T00:00:00Z", "goVersion": "go1.23.0",
                "compiler": "gc", "platform": "linux/amd64"}

    def _groups(self) -> list[tuple[str, list[str]]]:
        """Served groups and their versions, as the API server orders them: built-in groups by
        priority, then CRD groups as they came."""
        groups = list(self.registry.group_versions().items())
        rank = {g: i for i, g in enumerate(_GROUP_ORDER)}
        return sorted(groups, key=lambda gv: rank.get(gv[0], len(rank) if gv[0] else -1))

    def _types(self, group: str, version: str) -> list[ResourceType]:
        """A group version's types in discovery order: built-in ones sorted by resource name."""
        types = self.registry.types_in(group, version)
        return sorted(types, key=lambda rt: (not rt.builtin, rt.plural if rt.builtin else ""))

    # ---- legacy ------------------------------------------------------------------------------

    def api_versions(self, server_address: str) -> bytes:
        return orjson.dumps({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]})

    def api_group_list(self) -> bytes:
        def build() -> dict[str, Any]:
            groups = []
            for group, versions in self._groups():
                if group:
                    groups.append(self._api_group(group, versions))
            return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

        return self._cached("apis", build)

    @staticmethod
    def _api_group(group: str, versions: list[str]) -> dict[str, Any]:
        return {"name": group, "versions": [{"groupVersion": f"{group}/{v}", "version": v} for v in versions],
                "preferredVersion": {"groupVersion": f"{group}/{versions[0]}", "version": versions[0]}}

    def api_group(self, group: str) -> bytes | None:
        versions = self.registry.group_versions().get(group)
        if not versions or not group:
            return None
        return orjson.dumps({"kind": "APIGroup", "apiVersion": "v1", **self._api_group(group, versions)})

    def resource_list(self, group: str, version: str) -> bytes | None:
        types = self._types(group, version)
        if not types:
            return None

        def build() -> dict[str, Any]:
            resources: list[dict[str, Any]] = []
            for rt in types:
                entry: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                                         "kind": rt.kind, "verbs": list(rt.verbs)}
                if rt.short_names:
                    entry["shortNames"] = list(rt.short_names)
                if rt.categories:
                    entry["categories"] = list(rt.categories)
                storage = self.registry.storage_type(rt.key) or rt
                entry["storageVersionHash"] = storage_version_hash(storage.group, storage.version, storage.kind)
                resources.append(entry)
                for sub in _subresources(rt):
                    g, v, k = _sub_kind(rt, sub)
                    sub_entry: dict[str, Any] = {"name": f"{rt.plural}/{sub}", "singularName": "",
                                                 "namespaced": rt.namespaced, "kind": k, "verbs": _SUB_VERBS[sub]}
                    if sub == "scale":
                        sub_entry["group"], sub_entry["version"] = g, v
                    resources.append(sub_entry)
            gv = f"{group}/{version}" if group else version
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

        return self._cached(f"rl/{group}/{version}", build)

    # ---- aggregated --------------------------------------------------------------------------

    def aggregated(self, core: bool) -> bytes:
        def build() -> dict[str, Any]:
            items = []
            for group, versions in self._groups():
                if bool(group) == core:
                    continue
                items.append({
                    "metadata": {"name": group, "creationTimestamp": None},
                    "versions": [{"version": v, "resources": [self._agg_resource(rt) for rt in self._types(group, v)],
                                  "freshness": "Current"} for v in versions],
                })
            return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
                    "metadata": {}, "items": items}

        return self._cached(f"agg/{core}", build)

    @staticmethod
    def _agg_resource(rt: ResourceType) -> dict[str, Any]:
        def response_kind(group: str, version: str, kind: str) -> dict[str, str]:
            # A built-in resource's own kind is named without group and version (the aggregated
            # discovery handler leaves them empty when they are the group version's own); a CRD's
            # handler fills them in.
            if rt.builtin and (group, version) == (rt.group, rt.version):
                group = version = ""
            return {"group": group, "version": version, "kind": kind}

        entry: dict[str, Any] = {
            "resource": rt.plural,
            "responseKind": response_kind(rt.group, rt.version, rt.kind),
            "scope": rt.scope,
            "singularResource": rt.singular,
            "verbs": list(rt.verbs),
        }
        if rt.short_names:
            entry["shortNames"] = list(rt.short_names)
        if rt.categories:
            entry["categories"] = list(rt.categories)
        subs = []
        for sub in _subresources(rt):
            subs.append({"subresource": sub, "responseKind": response_kind(*_sub_kind(rt, sub)),
                         "verbs": _SUB_VERBS[sub]})
        if subs:
            entry["subresources"] = subs
        return entry

    # ---- OpenAPI v2 ----

    def openapi_v2(self) -> bytes:
        """The Swagger 2.0 document of everything served, as ``/openapi/v2`` answers JSON: the v3
        documents' paths and schemas in v2's shape (``definitions``, body parameters, response
        schemas), built-in kinds under their Go names (``io.k8s.api.core.v1.ConfigMap``)."""

        def build() -> dict[str, Any]:
            paths: dict[str, Any] = {}
            definitions: dict[str, Any] = {}
            for _, group, version in self._gv_paths():
                raw = self.openapi_doc_bytes(group, version)
                if raw is None:
                    continue
                doc = orjson.loads(raw.replace(b"#/components/schemas/", b"#/definitions/"))
                definitions.update(doc["components"]["schemas"])
                for path, ops in doc["paths"].items():
                    paths[path] = {verb: _v2_operation(op) for verb, op in ops.items()}
            major, minor = self.git_version.lstrip("v").split(".")[:2]
            return {"swagger": "2.0", "info": {"title": "Kubernetes", "version": f"{major}.{minor}"},
                    "paths": paths, "definitions": definitions}

        return self._cached("openapi/v2", build)

    def openapi_v2_protobuf(self) -> bytes:
        """A minimal gnostic ``openapi_v2.Document``: swagger "2.0", info, no paths or definitions."""

        def field(number: int, payload: bytes) -> bytes:
            return bytes([(number << 3) | 2, len(payload)]) + payload

        info = field(1, b"Kubernetes") + field(2, self.git_version.encode())
        return field(1, b"2.0") + field(2, info)

    # ---- OpenAPI v3 --------------------------------------------------------------------------

    def _gv_paths(self) -> list[tuple[str, str, str]]:
        out = []
        for group, versions in self.registry.group_versions().items():
            for v in versions:
                out.append((f"apis/{group}/{v}" if group else f"api/{v}", group, v))
        return out

    def openapi_index(self) -> bytes:
        def build() -> dict[str, Any]:
            paths = {}
            for path, group, version in self._gv_paths():
                digest = hashlib.sha256(self.openapi_doc_bytes(group, version) or b"").hexdigest()[:16].upper()
                paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
            return {"paths": paths}

        return self._cached("openapi", build)

    def openapi_doc_bytes(self, group: str, version: str) -> bytes | None:
        types = self.registry.types_in(group, version)
        if not types:
            return None
        return self._cached(f"openapi/{group}/{version}", lambda: self._openapi_doc(types))

    def _openapi_doc(self, types: list[ResourceType]) -> dict[str, Any]:
        paths: dict[str, Any] = {}
        schemas: dict[str, Any] = {}
        builder = SchemaBuilder()
        patch_types = ["application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"]
        for rt in types:
            schema_name = f"{_schema_prefix(rt)}.{rt.kind}"
            gvk = {"group": rt.group, "version": rt.version, "kind": rt.kind}
            ref = {"$ref": f"#/components/schemas/{schema_name}"}
            schema = builder.kind(rt.group, rt.version, rt.kind) if rt.builtin else _crd_schema(rt, builder)
            if schema is None:
                schemas[schema_name] = {"type": "object", "description": f"{rt.kind}. {_STUB_NOTE}",
                                        "x-kubernetes-group-version-kind": [gvk],
                                        "x-kubernetes-preserve-unknown-fields": True}
            else:
                schemas[schema_name] = {**schema, "x-kubernetes-group-version-kind": [gvk]}
            base = f"/apis/{rt.group}/{rt.version}" if rt.group else f"/api/{rt.version}"
            scoped = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
            params = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                      {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": True}},
                      {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
            item_ops = {
                "get": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "get",
                        "responses": {"200": {"content": {"application/json": {"schema": ref}}}}},
                "put": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "put", "parameters": params,
                        "requestBody": {"content": {"*/*": {"schema": ref}}},
                        "responses": {"200": {"content": {"application/json": {"schema": ref}}}}},
                "patch": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "patch",
                          "parameters": [*params, {"name": "force", "in": "query", "schema": {"type": "boolean"}}],
                          "requestBody": {"content": {t: {"schema": {"type": "object"}} for t in patch_types}},
                          "responses": {"200": {"content": {"application/json": {"schema": ref}}}}},
                "delete": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "delete"},
            }
            paths[scoped] = {
                "post": {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "post", "parameters": params,
                         "requestBody": {"content": {"*/*": {"schema": ref}}},
                         "responses": {"201": {"content": {"application/json": {"schema": ref}}}}},
            }
            if "get" in rt.verbs:  # create-only reviews have no items to read, update or delete
                paths[f"{scoped}/{{name}}"] = item_ops
                paths[scoped]["get"] = {"x-kubernetes-group-version-kind": gvk, "x-kubernetes-action": "list"}
        return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": self.git_version},
                "paths": paths, "components": {"schemas": {**builder.components, **schemas}}}


_TYPE_META_DOCS = {
    "apiVersion": "APIVersion defines the versioned schema of this representation of an object. Servers should "
                  "convert recognized schemas to the latest internal value, and may reject unrecognized values. More "
                  "info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
    "kind": "Kind is a string value representing the REST resource this object represents. Servers may infer this "
            "from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: "
            "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
}
_METADATA_DOC = ("Standard object's metadata. More info: "
                 "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")


def _crd_schema(rt: ResourceType, builder: SchemaBuilder) -> dict[str, Any] | None:
    """A custom resource's schema as the API server publishes it: the CRD version's openAPIV3Schema,
    with apiVersion, kind and metadata (ObjectMeta) filled in -- what ``kubectl explain`` reads."""
    crd = rt.schema
    if not isinstance(crd, dict):
        return None
    properties = {name: {"description": doc, "type": "string"} for name, doc in _TYPE_META_DOCS.items()}
    metadata = builder.type_schema("V1ObjectMeta")
    properties["metadata"] = {"description": _METADATA_DOC, "allOf": metadata.get("allOf", [metadata])}
    properties.update({k: v for k, v in (crd.get("properties") or {}).items() if k not in properties})
    return {**{k: v for k, v in crd.items() if k != "properties"}, "type": "object", "properties": properties}


def _v2_operation(op: dict[str, Any]) -> dict[str, Any]:
    """An OpenAPI v3 operation in Swagger 2.0's shape: the request body as a ``body`` parameter,
    media types as ``consumes``/``produces``, response schemas without their media type."""
    out = {k: v for k, v in op.items() if k not in ("requestBody", "responses", "parameters")}
    params = [{"name": p["name"], "in": p["in"], "type": p["schema"]["type"], "uniqueItems": True}
              for p in op.get("parameters") or []]
    body = (op.get("requestBody") or {}).get("content") or {}
    if body:
        out["consumes"] = list(body)
        params.insert(0, {"name": "body", "in": "body", "required": True, "schema": next(iter(body.values()))["schema"]})
    if params:
        out["parameters"] = params
    responses: dict[str, Any] = {}
    for code, response in (op.get("responses") or {}).items():
        content = response.get("content") or {}
        out.setdefault("produces", list(content))
        responses[code] = {"description": "OK" if code == "200" else "Created",
                           **({"schema": next(iter(content.values()))["schema"]} if content else {})}
    if responses:
        out["responses"] = responses
    return out


def _schema_prefix(rt: ResourceType) -> str:
    if not rt.builtin:
        return ".".join(reversed(rt.group.split("."))) + f".{rt.version}"
    if rt.group == "":
        return f"io.k8s.api.core.{rt.version}"
    if rt.group == "apiextensions.k8s.io":
        return f"io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.{rt.version}"
    return f"io.k8s.api.{rt.group.split('.')[0]}.{rt.version}"
