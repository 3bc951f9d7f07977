"""The catalogue of resource types the simulator serves.

A ``ResourceType`` is one entry of API discovery: group/version, plural, kind, scope, short names,
and which subresources exist. The ``Registry`` holds the built-in types and, the moment a
CustomResourceDefinition is written, the types it defines, so discovery, OpenAPI, routing and
storage all read from one place and a new CRD is served at once (kubectl rediscovers on a cache
miss and must find it on the first retry).

Storage is keyed by ``(group, plural)`` rather than by version: like a real API server, a CRD with
several served versions stores one object and only the ``apiVersion`` shown to clients changes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
# What the API server lists for a custom resource, in the order its CRD handler lists them.
CRD_VERBS = ("delete", "deletecollection", "get", "list", "patch", "create", "update", "watch")


@dataclass(frozen=True)
class ScaleSpec:
    """Where a ``/scale`` subresource reads and writes replicas (CRD ``subresources.scale``)."""

    spec_replicas: str = ".spec.replicas"
    status_replicas: str = ".status.replicas"
    label_selector: str | None = ".status.selector"


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry of a CRD version."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    description: str = ""
    format: str = ""


@dataclass(frozen=True)
class ResourceType:
    """One servable resource: what discovery lists and what routing and storage key on."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status: bool = False
    scale: ScaleSpec | None = None
    log: bool = False
    # Strategic merge patch only exists for types compiled into the API server; CRs get 415.
    builtin: bool = True
    # generation counts spec changes; types without a spec (ConfigMap, Secret, ...) have none.
    generation: bool = False
    printer_columns: tuple[PrinterColumn, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    # DNS label (63) rather than DNS subdomain (253) names: namespaces and services.
    dns_label_names: bool = False
    # Reviews (``kubectl auth can-i``) are answered per request and never stored (see ``reviews``).
    stored: bool = True
    # A CRD version's openAPIV3Schema: what ``structural`` prunes, defaults and validates against.
    schema: dict[str, Any] | None = field(default=None, compare=False, hash=False, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: one bucket per group and plural, shared by all served versions."""
        return (self.group, self.plural)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    @property
    def scope(self) -> str:
        return "Namespaced" if self.namespaced else "Cluster"

    def subresources(self) -> list[str]:
        subs = []
        if self.status:
            subs.append("status")
        if self.scale is not None:
            subs.append("scale")
        if self.log:
            subs.append("log")
        return subs


def _core(plural: str, kind: str, namespaced: bool = True, **kw: Any) -> ResourceType:
    return ResourceType(group="", version="v1", plural=plural, kind=kind, namespaced=namespaced,
                        singular=kind.lower(), **kw)


BUILTINS: tuple[ResourceType, ...] = (
    # No deletecollection: the namespace registry does not offer it (a namespace goes one at a time,
    # through its finalizers).
    _core("namespaces", "Namespace", namespaced=False, short_names=("ns",), status=True, dns_label_names=True,
          verbs=tuple(v for v in ALL_VERBS if v != "deletecollection")),
    _core("nodes", "Node", namespaced=False, short_names=("no",), status=True),
    # A pod counts spec changes in metadata.generation since Kubernetes 1.33 (PodObservedGenerationTracking).
    _core("pods", "Pod", short_names=("po",), categories=("all",), status=True, log=True, generation=True),
    _core("configmaps", "ConfigMap", short_names=("cm",)),
    _core("secrets", "Secret"),
    _core("services", "Service", short_names=("svc",), categories=("all",), status=True, dns_label_names=True),
    _core("events", "Event", short_names=("ev",)),
    ResourceType(group="apps", version="v1", plural="deployments", kind="Deployment", namespaced=True,
                 singular="deployment", short_names=("deploy",), categories=("all",), status=True,
                 scale=ScaleSpec(), generation=True),
    ResourceType(group="apps", version="v1", plural="replicasets", kind="ReplicaSet", namespaced=True,
                 singular="replicaset", short_names=("rs",), categories=("all",), status=True,
                 scale=ScaleSpec(), generation=True),
    ResourceType(group="coordination.k8s.io", version="v1", plural="leases", kind="Lease", namespaced=True,
                 singular="lease"),
    # Served and stored so that manifests (deploy/) apply and dry-run as on a real cluster; no
    # controller acts on them: a StatefulSet or Job creates no pods, a claim is never bound, RBAC is
    # not enforced (every client is system:masters), a NetworkPolicy filters nothing.
    _core("serviceaccounts", "ServiceAccount", short_names=("sa",)),
    _core("persistentvolumeclaims", "PersistentVolumeClaim", short_names=("pvc",), status=True),
    ResourceType(group="apps", version="v1", plural="statefulsets", kind="StatefulSet", namespaced=True,
                 singular="statefulset", short_names=("sts",), categories=("all",), status=True,
                 scale=ScaleSpec(), generation=True),
    ResourceType(group="batch", version="v1", plural="jobs", kind="Job", namespaced=True, singular="job",
                 categories=("all",), status=True, generation=True),
    ResourceType(group="policy", version="v1", plural="poddisruptionbudgets", kind="PodDisruptionBudget",
                 namespaced=True, singular="poddisruptionbudget", short_names=("pdb",), status=True,
                 generation=True),
    ResourceType(group="networking.k8s.io", version="v1", plural="networkpolicies", kind="NetworkPolicy",
                 namespaced=True, singular="networkpolicy", short_names=("netpol",), generation=True),
    *(ResourceType(group="rbac.authorization.k8s.io", version="v1", plural=kind.lower() + "s", kind=kind,
                   namespaced=namespaced, singular=kind.lower())
      for kind, namespaced in (("Role", True), ("RoleBinding", True), ("ClusterRole", False),
                               ("ClusterRoleBinding", False))),
    ResourceType(group="authorization.k8s.io", version="v1", plural="selfsubjectaccessreviews",
                 kind="SelfSubjectAccessReview", namespaced=False, singular="selfsubjectaccessreview",
                 verbs=("create",), stored=False),
    ResourceType(group="authorization.k8s.io", version="v1", plural="selfsubjectrulesreviews",
                 kind="SelfSubjectRulesReview", namespaced=False, singular="selfsubjectrulesreview",
                 verbs=("create",), stored=False),
    ResourceType(group="authentication.k8s.io", version="v1", plural="selfsubjectreviews",
                 kind="SelfSubjectReview", namespaced=False, singular="selfsubjectreview",
                 verbs=("create",), stored=False),
    ResourceType(group="apiextensions.k8s.io", version="v1", plural="customresourcedefinitions",
                 kind="CustomResourceDefinition", namespaced=False, singular="customresourcedefinition",
                 short_names=("crd", "crds"), categories=("api-extensions",), status=True, generation=True),
)


@dataclass
class Registry:
    """Every served ``ResourceType``, built-ins first, CRD-defined types as CRDs come and go.

    Invariant: ``by_gvr`` and ``by_key`` describe the same set of types; a key is present in
    ``crd_owner`` exactly when that type comes from a CRD (its name is the value).
    """

    by_gvr: dict[tuple[str, str, str], ResourceType] = field(default_factory=dict)
    by_key: dict[tuple[str, str], list[ResourceType]] = field(default_factory=dict)
    crd_owner: dict[tuple[str, str], str] = field(default_factory=dict)
    # Bumped on every change so discovery/OpenAPI caches (and their hashes) know to rebuild.
    generation: int = 0
    _groups: frozenset[str] = field(default=frozenset(), repr=False)
    _groups_at: int = field(default=-1, repr=False)

    @classmethod
    def with_builtins(cls) -> Registry:
        reg = cls()
        for rt in BUILTINS:
            reg._add(rt)
        return reg

    def _add(self, rt: ResourceType) -> None:
        self.by_gvr[(rt.group, rt.version, rt.plural)] = rt
        self.by_key.setdefault(rt.key, []).append(rt)
        self.generation += 1

    @property
    def groups(self) -> frozenset[str]:
        """Every API group served ("" for the core group); kept per generation, as routing asks on
        every request."""
        if self._groups_at != self.generation:
            self._groups = frozenset(g for g, _ in self.by_key)
            self._groups_at = self.generation
        return self._groups

    def lookup(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.by_gvr.get((group, version, plural))

    def storage_type(self, key: tuple[str, str]) -> ResourceType | None:
        """The type whose version objects are stored and shown in by default (the first served)."""
        types = self.by_key.get(key)
        return types[0] if types else None

    def group_versions(self) -> dict[str, list[str]]:
        """Group → served versions, in registration order (the first is preferred)."""
        out: dict[str, list[str]] = {}
        for rt in self.by_gvr.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out

    def types_in(self, group: str, version: str) -> list[ResourceType]:
        return [rt for rt in self.by_gvr.values() if rt.group == group and rt.version == version]

    def register_crd(self, crd: dict[str, Any]) -> None:
        """Serve (or re-serve, after an update) every served version of a CRD."""
        name = crd["metadata"]["name"]
        self.unregister_crd(name)
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group", "")
        plural = names.get("plural", "")
        namespaced = spec.get("scope", "Namespaced") == "Namespaced"
        for ver in spec.get("versions") or []:
            if not ver.get("served", True):
                continue
            subs = ver.get("subresources") or {}
            scale = None
            if "scale" in subs:
                sc = subs["scale"] or {}
                scale = ScaleSpec(
                    spec_replicas=sc.get("specReplicasPath", ".spec.replicas"),
                    status_replicas=sc.get("statusReplicasPath", ".status.replicas"),
                    label_selector=sc.get("labelSelectorPath"),
                )
            columns = tuple(
                PrinterColumn(
                    name=c.get("name", ""),
                    type=c.get("type", "string"),
                    json_path=c.get("jsonPath", ""),
                    priority=int(c.get("priority", 0) or 0),
                    description=c.get("description", ""),
                    format=c.get("format", ""),
                )
                for c in ver.get("additionalPrinterColumns") or []
            )
            rt = ResourceType(
                group=group,
                version=ver.get("name", "v1"),
                plural=plural,
                kind=names.get("kind", ""),
                namespaced=namespaced,
                singular=names.get("singular") or names.get("kind", "").lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                status="status" in subs,
                scale=scale,
                builtin=False,
                generation=True,
                printer_columns=columns,
                verbs=CRD_VERBS,
                schema=(ver.get("schema") or {}).get("openAPIV3Schema"),
            )
            self._add(rt)
        self.crd_owner[(group, plural)] = name

    def unregister_crd(self, name: str) -> tuple[str, str] | None:
        """Stop serving a CRD's types; returns their storage key if it was served."""
        key = next((k for k, v in self.crd_owner.items() if v == name), None)
        if key is None:
            return None
        del self.crd_owner[key]
        for rt in self.by_key.pop(key, []):
            self.by_gvr.pop((rt.group, rt.version, rt.plural), None)
        self.generation += 1
        return key
