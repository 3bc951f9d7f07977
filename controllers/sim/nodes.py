"""Simulated nodes: the Node and Lease objects kubelets register, and the scheduler's choice of node.

A real kubelet registers its ``Node`` (capacity, addresses, conditions, ``nodeInfo``) when it starts
and then renews a ``Lease`` of the same name in ``kube-node-lease`` every ten seconds; that lease is
how the control plane knows the node is alive. The simulated kubelet does the same for each of its
nodes (``sim-node-1`` … ``sim-node-N``), so ``kubectl get nodes``, ``-o wide`` and ``describe node``
show what they show on a small real cluster.

Nodes are ordinary stored objects: users may cordon them (``spec.unschedulable``), label them or
create more. ``choose_node`` plays kube-scheduler for the kubelet: among Ready, schedulable nodes
whose labels satisfy the pod's ``nodeSelector`` it picks the one running the fewest pods (name order
breaks ties), which spreads a Deployment's replicas across nodes like the default scheduler's
balancing does. Taints, affinity and resource fit are not modelled.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from typing import Any

NODE_LEASE_NAMESPACE = "kube-node-lease"
LEASE_DURATION = 40  # seconds; the kubelet's default nodeLeaseDurationSeconds
LEASE_RENEW_INTERVAL = 10.0  # seconds; a quarter of the duration, as the kubelet renews

# One shape of node for all: 4 CPUs and 16 GiB, what a small cloud VM or a kind node reports.
_CAPACITY = {"cpu": "4", "ephemeral-storage": "102626232Ki", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
             "memory": "16374624Ki", "pods": "110"}
# Allocatable is capacity minus the kubelet's eviction reserve (100Mi of memory, 10% of disk).
_ALLOCATABLE = {**_CAPACITY, "ephemeral-storage": "94580335255", "memory": "16272224Ki"}
_CONDITIONS = (
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def node_names(count: int) -> tuple[str, ...]:
    return tuple(f"sim-node-{i}" for i in range(1, count + 1))


def internal_ip(index: int) -> str:
    """The address of the ``index``-th node (1-based); pods on it get IPs from ``pod_cidr_prefix``."""
    return f"10.0.0.{index}"


def pod_cidr_prefix(index: int) -> str:
    return f"10.244.{index}"


def _stable_id(name: str, salt: str) -> str:
    return hashlib.sha256(f"{salt}/{name}".encode()).hexdigest()[:32]


def node_manifest(name: str, index: int, *, kubelet_version: str, now: str) -> dict[str, Any]:
    """The Node a kubelet registers for itself (status included: nodes keep it on create)."""
    cidr = f"{pod_cidr_prefix(index)}.0/24"
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                       "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"podCIDR": cidr, "podCIDRs": [cidr], "providerID": f"ctrlscope-sim://{name}"},
        "status": {
            "addresses": [{"type": "InternalIP", "address": internal_ip(index)}, {"type": "Hostname", "address": name}],
            "allocatable": dict(_ALLOCATABLE),
            "capacity": dict(_CAPACITY),
            "conditions": [{"type": t, "status": s, "reason": r, "message": m, "lastHeartbeatTime": now,
                            "lastTransitionTime": now} for t, s, r, m in _CONDITIONS],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": str(uuid.uuid4()),
                "containerRuntimeVersion": "containerd://1.7.24",
                "kernelVersion": "6.8.0-ctrlscope-sim",
                "kubeProxyVersion": kubelet_version,
                "kubeletVersion": kubelet_version,
                "machineID": _stable_id(name, "machine"),
                "operatingSystem": "linux",
                "osImage": "ctrlscope simulated node",
                "systemUUID": str(uuid.UUID(_stable_id(name, "system"))),
            },
        },
    }


def lease_manifest(name: str, *, now_micro: str) -> dict[str, Any]:
    """The node's heartbeat Lease in ``kube-node-lease``, as the kubelet writes it."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": NODE_LEASE_NAMESPACE},
        "spec": {"holderIdentity": name, "leaseDurationSeconds": LEASE_DURATION, "renewTime": now_micro},
    }


def node_ready(node: dict[str, Any]) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def node_address(node: dict[str, Any], kind: str = "InternalIP") -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if isinstance(address, dict) and address.get("type") == kind:
            return str(address.get("address", ""))
    return ""


def choose_node(pod: dict[str, Any], nodes: Iterable[dict[str, Any]],
                pods_per_node: dict[str, int]) -> tuple[str | None, str]:
    """(node to bind ``pod`` to, "") or (None, the scheduler's FailedScheduling message)."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    fits: list[str] = []
    rejected: dict[str, int] = {}
    total = 0
    for node in nodes:
        total += 1
        labels = node["metadata"].get("labels") or {}
        if (node.get("spec") or {}).get("unschedulable"):
            reason = "node(s) were unschedulable"
        elif not node_ready(node):
            reason = "node(s) were not ready"
        elif isinstance(selector, dict) and any(labels.get(k) != v for k, v in selector.items()):
            reason = "node(s) didn't match Pod's node affinity/selector"
        else:
            fits.append(node["metadata"]["name"])
            continue
        rejected[reason] = rejected.get(reason, 0) + 1
    if fits:
        return min(fits, key=lambda name: (pods_per_node.get(name, 0), name)), ""
    why = ", ".join(f"{n} {reason}" for reason, n in sorted(rejected.items()))
    return None, f"0/{total} nodes are available{': ' + why if why else ''}."
