"""Patch metadata for built-in kinds: which lists merge, and by which key.

Strategic merge patch, server-side apply and managedFields all need the same knowledge the Go
structs carry in their tags (``patchStrategy:"merge" patchMergeKey:"name"``): ``containers`` and
``env`` are maps keyed by ``name``, ``ports`` by ``containerPort``, ``volumeMounts`` by
``mountPath``; ``finalizers`` is a set of strings; every other list is atomic and replaced whole.
Paths are dotted field names from the object root, without list indices; the PodSpec table is
mounted wherever a PodSpec appears (a pod's ``spec``, a workload's ``spec.template.spec``).
Custom resources have no such metadata: their lists are atomic, as on a real cluster.
"""

from __future__ import annotations

# Merge key of each list field; "" marks a list of primitives merged as a set.
_POD_SPEC_LISTS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
    "resourceClaims": "name",
}
_CONTAINER_LISTS: dict[str, str] = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_METADATA_LISTS: dict[str, str] = {"metadata.finalizers": "", "metadata.ownerReferences": "uid"}


def _pod_spec_table(prefix: str) -> dict[str, str]:
    table = {f"{prefix}.{k}": v for k, v in _POD_SPEC_LISTS.items()}
    for containers in ("containers", "initContainers", "ephemeralContainers"):
        for k, v in _CONTAINER_LISTS.items():
            table[f"{prefix}.{containers}.{k}"] = v
    return table


_TABLES: dict[tuple[str, str], dict[str, str]] = {
    ("", "pods"): {
        **_pod_spec_table("spec"),
        "status.conditions": "type",
        "status.podIPs": "ip",
    },
    ("apps", "deployments"): {**_pod_spec_table("spec.template.spec"), "status.conditions": "type"},
    ("apps", "replicasets"): {**_pod_spec_table("spec.template.spec"), "status.conditions": "type"},
    ("", "services"): {"spec.ports": "port", "status.conditions": "type"},
    ("", "namespaces"): {"status.conditions": "type"},
    ("", "nodes"): {"spec.podCIDRs": "", "status.conditions": "type", "status.addresses": "type"},
}


def list_strategy(key: tuple[str, str], builtin: bool, path: str) -> str | None:
    """How the list at ``path`` merges: its merge key, "" for a set of primitives, None if atomic."""
    if path in _METADATA_LISTS:
        return _METADATA_LISTS[path]
    if not builtin:
        return None
    return _TABLES.get(key, {}).get(path)
