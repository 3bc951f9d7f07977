"""Defaulting: the fields a real API server fills in when an object is written.

Clients compare what they sent with what they read back (``kubectl apply`` three-way diffs, controllers
checking ``observedGeneration``), so the simulator stores what a real cluster would store: a pod gets
``restartPolicy: Always`` and a ``Pending`` status, a deployment gets its rolling-update strategy, a
service gets a ClusterIP. Defaulting only adds fields that are absent; it never overrides the client.
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
        meta = template.setdefault("metadata", {})
        if isinstance(meta, dict):
            meta.setdefault("creationTimestamp", None)
        if isinstance(template.get("spec"), dict):
            pod_spec_defaults(template["spec"])


def _service_defaults(obj: dict[str, Any], cluster_ip: str) -> None:
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    kind = spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    if kind != "ExternalName":
        # An ExternalName service is only a DNS alias: no cluster IP, no IP families, no traffic policy.
        if spec.get("clusterIP") != "None":
            spec.setdefault("clusterIP", cluster_ip)
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
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


def apply_defaults(rt: ResourceType, obj: dict[str, Any], cluster_ip: str) -> None:
    """Fill absent fields of a built-in kind in place (create and update alike)."""
    if not rt.builtin:
        return
    if rt.plural == "pods":
        spec = obj.get("spec")
        if isinstance(spec, dict):
            pod_spec_defaults(spec)
    elif rt.plural == "deployments":
        _workload_defaults(obj, deployment=True)
    elif rt.plural == "replicasets":
        _workload_defaults(obj, deployment=False)
    elif rt.plural == "services":
        _service_defaults(obj, cluster_ip)
    elif rt.plural == "secrets":
        obj.setdefault("type", "Opaque")
        string_data = obj.get("stringData")
        if isinstance(string_data, dict) and isinstance(obj.get("data", {}), dict):
            del obj["stringData"]
            data = obj.setdefault("data", {})
            for k, v in string_data.items():
                data[k] = base64.b64encode(str(v).encode()).decode()
    elif rt.plural == "namespaces":
        spec = obj.setdefault("spec", {})
        if isinstance(spec, dict):
            spec.setdefault("finalizers", ["kubernetes"])
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
