"""Defaulting, admission and allocation: the fields a real API server fills in when an object is written.

Clients compare what they sent with what they read back (``kubectl apply`` three-way diffs, controllers
checking ``observedGeneration``), so the simulator stores what a real cluster would store. Three
stages fill fields in, and which one does matters, because only the first is owned by the writer in
``managedFields``:

1. ``apply_defaults`` -- the defaulting functions run when the body is decoded: a pod gets
   ``restartPolicy: Always`` and ``enableServiceLinks: true``, a deployment its rolling-update
   strategy, a service ``type: ClusterIP``. The writer owns these like the fields it sent.
2. ``prepare_for_create`` -- what the registry and the admission plugins add after field tracking:
   a pod's service account (``default``), its projected ``kube-api-access-xxxxx`` token volume
   mounted in every container, the not-ready/unreachable tolerations (300 s) and its priority; a
   namespace's ``spec.finalizers``.
3. ``allocate_service_ips`` -- a service's cluster IP and IP families, allocated by the registry.

None of them ever overrides what the client set.
"""

from __future__ import annotations

import base64
from typing import Any

from controllers.sim.resources import ResourceType


def _container_defaults(container: dict[str, Any]) -> None:
    image = container.get("image") or ""
    if not isinstance(image, str):
        return  # validation reports it
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    if "@" not in image:
        container.setdefault("imagePullPolicy", "Always" if tag in ("", "latest") else "IfNotPresent")
    else:
        container.setdefault("imagePullPolicy", "IfNotPresent")
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("resources", {})
    ports = container.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")


def pod_spec_defaults(spec: dict[str, Any]) -> None:
    """Defaults for a PodSpec, shared by pods and the templates of deployments and replica sets."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    for field in ("initContainers", "containers"):
        containers = spec.get(field)
        for c in containers if isinstance(containers, list) else []:
            if isinstance(c, dict):
                _container_defaults(c)


def _workload_defaults(obj: dict[str, Any], deployment: bool) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return  # validation reports it
    spec.setdefault("replicas", 1)
    if deployment:
        # A Deployment's own (the ReplicaSets it keeps); ReplicaSetSpec has no such field.
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
        strategy = spec.setdefault("strategy", {})
        if isinstance(strategy, dict):
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                strategy.setdefault("rollingUpdate", {"maxUnavailable": "25%", "maxSurge": "25%"})
    template = spec.get("template")
    if isinstance(template, dict):
        if isinstance(template.get("spec"), dict):
            pod_spec_defaults(template["spec"])


def _service_defaults(obj: dict[str, Any]) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    kind = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if kind != "ExternalName":
        # An ExternalName service is only a DNS alias: no cluster IP, no IP families, no traffic policy.
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if kind in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if kind == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    ports = spec.get("ports")
    for port in ports if isinstance(ports, list) else []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            # IntOrString's zero value (0 or "") means unset, as a protobuf body always carries one.
            if "port" in port and port.get("targetPort") in (None, 0, ""):
                port["targetPort"] = port["port"]


def allocate_service_ips(obj: dict[str, Any], cluster_ip: str) -> None:
    """A service's cluster IP (``cluster_ip``, or the one it holds) and IP families, as the service
    registry allocates them; nothing for an ExternalName service."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("type") == "ExternalName":
        return
    if spec.get("clusterIP") != "None" and cluster_ip:
        spec.setdefault("clusterIP", cluster_ip)
    if spec.get("clusterIP"):
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")


def apply_defaults(rt: ResourceType, obj: dict[str, Any]) -> None:
    """Fill absent fields of a built-in kind in place (create and update alike), as the defaulting
    functions do when a body is decoded."""
    if not rt.builtin:
        return
    if rt.plural == "pods":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            pod_spec_defaults(spec)
            spec.setdefault("enableServiceLinks", True)  # a Pod's default, not a template's
    elif rt.plural == "deployments":
        _workload_defaults(obj, deployment=True)
    elif rt.plural == "replicasets":
        _workload_defaults(obj, deployment=False)
    elif rt.plural == "services":
        _service_defaults(obj)
    elif rt.plural == "secrets":
        obj.setdefault("type", "Opaque")
        string_data = obj.get("stringData")
        if isinstance(string_data, dict) and isinstance(obj.get("data", {}), dict):
            del obj["stringData"]
            data = obj.setdefault("data", {})
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
    elif rt.plural == "namespaces":
        labels = obj.setdefault("metadata", {}).setdefault("labels", {})
        if isinstance(labels, dict):
            labels.setdefault("kubernetes.io/metadata.name", obj["metadata"].get("name", ""))
    elif rt.plural == "customresourcedefinitions":
        spec = obj.get("spec")
        versions = spec.get("versions") if isinstance(spec, dict) else None
        for ver in versions if isinstance(versions, list) else []:
            if isinstance(ver, dict):
                ver.setdefault("served", True)
                ver.setdefault("storage", True)


TOKEN_MOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# What the DefaultTolerationSeconds admission plugin adds: evicted 5 minutes after the node goes.
_DEFAULT_TOLERATIONS = tuple({"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                             for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"))


def _token_volume(name: str) -> dict[str, Any]:
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace",
                                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}


def _tolerates(tolerations: list[Any], key: str) -> bool:
    return any(isinstance(t, dict) and t.get("effect") in (None, "", "NoExecute")
               and (t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
               for t in tolerations)


def _admit_pod(spec: dict[str, Any], suffix: str) -> None:
    """The ServiceAccount, DefaultTolerationSeconds and Priority admission plugins, on create."""
    spec.setdefault("serviceAccountName", "default")
    spec["serviceAccount"] = spec["serviceAccountName"]  # the deprecated alias always mirrors it
    if spec.get("automountServiceAccountToken") is not False:
        needing = [c for field in ("initContainers", "containers") for c in spec.get(field) or []
                   if isinstance(c, dict) and not any(isinstance(m, dict) and m.get("mountPath") == TOKEN_MOUNT_PATH
                                                      for m in c.get("volumeMounts") or [])]
        if needing:
            name = f"kube-api-access-{suffix}"
            spec["volumes"] = [*(spec.get("volumes") or []), _token_volume(name)]
            for c in needing:
                c["volumeMounts"] = [*(c.get("volumeMounts") or []),
                                     {"name": name, "readOnly": True, "mountPath": TOKEN_MOUNT_PATH}]
    tolerations = spec.get("tolerations") if isinstance(spec.get("tolerations"), list) else []
    added = [dict(t) for t in _DEFAULT_TOLERATIONS if not _tolerates(tolerations, t["key"])]
    if added:
        spec["tolerations"] = [*tolerations, *added]
    if not spec.get("priorityClassName"):
        spec.setdefault("priority", 0)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")


def prepare_for_create(rt: ResourceType, obj: dict[str, Any], suffix: str) -> None:
    """What a create gets after field tracking: admission for pods (``suffix`` names the token
    volume), the namespace finalizer (see the module docstring)."""
    if not rt.builtin:
        return
    if rt.plural == "pods":
        spec = obj.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            _admit_pod(spec, suffix)
    elif rt.plural == "namespaces":
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("finalizers", ["kubernetes"])


def initial_status(rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any] | None:
    """The status a freshly created object starts with when the type has a status subresource."""
    if rt.plural == "pods":
        return {"phase": "Pending", "qosClass": "BestEffort"}
    if rt.plural == "namespaces":
        return {"phase": "Active"}
    if rt.plural == "nodes":
        # The node registry keeps the status a kubelet registers with (addresses, capacity, conditions).
        status = obj.get("status")
        return status if isinstance(status, dict) else {}
    if rt.plural == "services":
        return {"loadBalancer": {}}
    if rt.plural == "customresourcedefinitions":
        names = (obj.get("spec") or {}).get("names") or {}
        return {
            "acceptedNames": {k: v for k, v in names.items() if k in ("plural", "singular", "kind", "listKind",
                                                                       "shortNames", "categories")},
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found"},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted"},
            ],
            "storedVersions": [v.get("name") for v in (obj.get("spec") or {}).get("versions") or []
                               if isinstance(v, dict) and v.get("storage")],
        }
    if rt.builtin:
        return {}
    return None
