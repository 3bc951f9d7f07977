"""The simulated scheduler + kubelet: pods move Pending → ContainerCreating → Running/Ready.

A real node agent registers its Node, renews its Lease, watches pods bound to it and reports their
progress through ``pods/status``; here one ``Kubelet`` plays every node (``sim-node-1`` …, see
``nodes``) and the scheduler too. For each new pod it schedules two status writes:

1. after ``schedule_delay``: bound (``spec.nodeName``) to the Ready, schedulable node with the fewest
   pods, ``PodScheduled``, containers waiting in ``ContainerCreating`` — or, when no node fits,
   ``PodScheduled=False`` (Unschedulable) and another attempt a second later;
2. after ``start_delay`` more: ``Running``, containers running and ready, an IP from the node's pod
   CIDR, ``Ready``.

Deadlines use the injected clock's ``now()``, so a test with a ``FakeClock`` steps time instead of
sleeping; a small real-time ticker notices when deadlines have passed. ``pause()`` stops progress
and lease renewal (fault injection: nodes that stopped reporting); pending transitions fire after
``resume()``.

Logs are synthetic and computed, not stored: container ``c`` of a running pod has printed one line
per ``log_interval`` seconds since it started, so ``pods/log`` costs nothing until someone reads it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
import time
from typing import Any

from controllers.clock import Clock
from controllers.schema import WatchEventType
from controllers.sim.background import BackgroundLoop
from controllers.sim.errors import StatusError
from controllers.sim.events import EventRecorder
from controllers.sim.nodes import (
    LEASE_RENEW_INTERVAL,
    NODE_LEASE_NAMESPACE,
    choose_node,
    lease_manifest,
    node_address,
    node_manifest,
    node_names,
)
from controllers.sim.resources import ResourceType
from controllers.sim.store import Store, copy_obj, rfc3339
from controllers.sim.watch import WatchEvent

log = logging.getLogger(__name__)
_POD_KEY = ("", "pods")
_NODE_KEY = ("", "nodes")
_LEASE_KEY = ("coordination.k8s.io", "leases")
# How long an unschedulable pod waits before the scheduler tries again (its initial backoff).
_RETRY_DELAY = 1.0


def _rfc3339_micro(ts: float) -> str:
    """MicroTime, the format of a Lease's ``renewTime``."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1e6) % 1_000_000:06d}Z"


class Kubelet(BackgroundLoop):
    """Drives pod status for every pod in the store."""

    def __init__(self, store: Store, *, clock: Clock, schedule_delay: float = 0.2, start_delay: float = 1.0,
                 log_interval: float = 1.0, tick: float = 0.02, events: EventRecorder | None = None,
                 stop_delay: float | None = None, nodes: int = 3, kubelet_version: str = "v1.32.0",
                 lease_interval: float = LEASE_RENEW_INTERVAL) -> None:
        self.store = store
        self.node_names = node_names(nodes)
        self.kubelet_version = kubelet_version
        self.lease_interval = lease_interval
        self._lease_due = clock.now() + lease_interval
        # How long a deleted pod stays Terminating before the kubelet has stopped it.
        self.stop_delay = start_delay if stop_delay is None else stop_delay
        self.events = events
        self.clock = clock
        self.schedule_delay = schedule_delay
        self.start_delay = start_delay
        self.log_interval = log_interval
        self.tick = tick
        self.paused = False
        # Invariant: every live pod that has not reached Running has exactly one entry here
        # (deadline, seq, uid, stage); entries for pods that are gone are skipped when popped.
        self._timeline: list[tuple[float, int, str, str]] = []
        self._seq = itertools.count()
        self._pods: dict[str, tuple[str, str]] = {}  # uid → (namespace, name)
        self._started: dict[str, float] = {}  # uid → wall time the containers started
        # Invariant: _placed maps every live pod with a spec.nodeName to it, and _load[n] counts the
        # pods placed on n, so scheduling never scans the pods.
        self._placed: dict[str, str] = {}
        self._load: dict[str, int] = {}
        self._ips: dict[str, itertools.count[int]] = {}  # node → next host number in its pod CIDR
        store.listeners.append(self._on_event)

    def _type(self, key: tuple[str, str]) -> ResourceType:
        rt = self.store.registry.storage_type(key)
        assert rt is not None
        return rt

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.key != _POD_KEY:
            return
        meta = ev.obj["metadata"]
        uid = meta["uid"]
        if ev.type is WatchEventType.DELETED:
            self._pods.pop(uid, None)
            self._started.pop(uid, None)
            self._place(uid, None)
            return
        self._place(uid, (ev.obj.get("spec") or {}).get("nodeName"))
        if ev.type is WatchEventType.ADDED:
            self._pods[uid] = (meta.get("namespace", ""), meta["name"])
            phase = (ev.obj.get("status") or {}).get("phase")
            if phase in (None, "Pending"):
                self._schedule(uid, self.schedule_delay, "scheduled")
        elif ev.type is WatchEventType.MODIFIED and meta.get("deletionTimestamp") and ev.old is not None \
                and not ev.old["metadata"].get("deletionTimestamp"):
            self._schedule(uid, self.stop_delay, "terminate")

    def _place(self, uid: str, node: str | None) -> None:
        old = self._placed.get(uid)
        if old == node:
            return
        if old is not None:
            self._load[old] -= 1
            del self._placed[uid]
        if node:
            self._placed[uid] = node
            self._load[node] = self._load.get(node, 0) + 1

    # ---- nodes -------------------------------------------------------------------------------

    def register_nodes(self) -> None:
        """Create this kubelet's Nodes and their Leases where missing (startup, reset, loaded state)."""
        now = self.clock.wall()
        for index, name in enumerate(self.node_names, 1):
            if self.store.find(_NODE_KEY, "", name) is None:
                node = self.store.create(self._type(_NODE_KEY), None, node_manifest(
                    name, index, kubelet_version=self.kubelet_version, now=rfc3339(now)), manager="kubelet")
                self._record(node, "Starting", "Starting kubelet.")
                self._record(node, "NodeReady", f"Node {name} status is now: NodeReady")
                self._record(node, "RegisteredNode", f"Node {name} event: Registered Node {name} in Controller",
                             "node-controller")
        self.renew_leases()

    def renew_leases(self) -> None:
        """Heartbeat: bump ``renewTime`` of each registered node's Lease, recreating a deleted one."""
        rt = self._type(_LEASE_KEY)
        micro = _rfc3339_micro(self.clock.wall())
        for name in self.node_names:
            if self.store.find(_NODE_KEY, "", name) is None:
                continue  # a deleted node's kubelet has nothing to renew until it re-registers
            lease = self.store.find(_LEASE_KEY, NODE_LEASE_NAMESPACE, name)
            new = lease_manifest(name, now_micro=micro) if lease is None else copy_obj(lease)
            new["spec"]["renewTime"] = micro
            try:
                self.store.update(rt, NODE_LEASE_NAMESPACE, name, new, manager="kubelet", create_if_missing=True)
            except StatusError:
                pass  # kube-node-lease is being deleted; the next renewal tries again

    def _schedule(self, uid: str, delay: float, stage: str) -> None:
        heapq.heappush(self._timeline, (self.clock.now() + delay, next(self._seq), uid, stage))

    def pause(self) -> None:
        self.paused = True

    def resume(self) -> None:
        self.paused = False

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.tick)
            if not self.paused:
                self.step()

    def step(self) -> None:
        """Apply every transition whose deadline has passed, and renew node leases when due."""
        now = self.clock.now()
        if now >= self._lease_due:
            self._lease_due = now + self.lease_interval
            self.renew_leases()
        while self._timeline and self._timeline[0][0] <= now:
            _, _, uid, stage = heapq.heappop(self._timeline)
            if uid in self._pods:
                try:
                    self._advance(uid, stage)
                except Exception:
                    log.exception("simulated kubelet failed to move pod %s to %s", self._pods.get(uid), stage)

    def _advance(self, uid: str, stage: str) -> None:
        ns, name = self._pods[uid]
        rt = self._type(_POD_KEY)
        pod = self.store.find(_POD_KEY, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid:
            return
        if stage == "terminate":
            self._terminate(rt, pod)
            return
        if pod["metadata"].get("deletionTimestamp"):
            return
        now = rfc3339(self.clock.wall())
        containers = [c.get("name", "") for c in (pod.get("spec") or {}).get("containers") or []]
        images = {c.get("name", ""): c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []}
        new = copy_obj(pod)
        status = new.setdefault("status", {})
        if stage == "scheduled":
            node = new["spec"].get("nodeName")
            if not node:
                node, why = choose_node(pod, self.store.bucket(_NODE_KEY).objects.values(), self._load)
                if node is None:
                    self._unschedulable(rt, new, why, now)
                    self._schedule(uid, _RETRY_DELAY, "scheduled")
                    return
                new["spec"]["nodeName"] = node
                self._write(rt, new, status=False)
                new = copy_obj(self.store.find(_POD_KEY, ns, name))
                status = new.setdefault("status", {})
            host_ip = self._node_ip(node)
            if host_ip:
                status.update({"hostIP": host_ip, "hostIPs": [{"ip": host_ip}]})
            status.update({
                "phase": "Pending",
                "startTime": now,
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [{"name": c, "image": images[c], "imageID": "", "ready": False,
                                       "restartCount": 0, "started": False,
                                       "state": {"waiting": {"reason": "ContainerCreating"}}} for c in containers],
            })
            self._write(rt, new, status=True)
            self._schedule(uid, self.start_delay, "running")
            self._record(pod, "Scheduled", f"Successfully assigned {ns}/{name} to {node}", "default-scheduler")
        elif stage == "running":
            ip = self._pod_ip(new["spec"].get("nodeName") or "")
            status.update({
                "phase": "Running",
                "podIP": ip,
                "podIPs": [{"ip": ip}],
                "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                               for t in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
                "containerStatuses": [{"name": c, "image": images[c],
                                       "imageID": f"sim://{images[c]}", "containerID": f"sim://{uid[:8]}-{c}",
                                       "ready": True, "restartCount": 0, "started": True,
                                       "state": {"running": {"startedAt": now}}} for c in containers],
            })
            self._started[uid] = self.clock.wall()
            self._write(rt, new, status=True)
            for c in containers:
                self._record(pod, "Pulled", f'Container image "{images[c]}" already present on machine')
                self._record(pod, "Created", f"Created container {c}")
                self._record(pod, "Started", f"Started container {c}")

    def _unschedulable(self, rt: ResourceType, pod: dict[str, Any], why: str, now: str) -> None:
        """PodScheduled=False with the scheduler's reason; the event only when the reason changes."""
        status = pod.setdefault("status", {})
        previous = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        if previous is not None and previous.get("message") == why:
            return
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                 "message": why, "lastProbeTime": None, "lastTransitionTime": now}]
        self._write(rt, pod, status=True)
        self._record(pod, "FailedScheduling", why, "default-scheduler", type="Warning")

    def _node_ip(self, node: str) -> str:
        found = self.store.find(_NODE_KEY, "", node)
        return node_address(found) if found is not None else ""

    def _pod_ip(self, node: str) -> str:
        """The next address of the node's pod CIDR (``10.244.<n>.0/24``); a /24 wraps after 250 pods."""
        found = self.store.find(_NODE_KEY, "", node)
        cidr = str(((found or {}).get("spec") or {}).get("podCIDR") or "10.244.0.0/24")
        host = next(self._ips.setdefault(node, itertools.count()))
        return f"{cidr.rsplit('.', 1)[0]}.{2 + host % 250}"

    def _terminate(self, rt: ResourceType, pod: dict[str, Any]) -> None:
        """Stop a deleted pod's containers, then remove it (the kubelet's grace-0 delete)."""
        now = rfc3339(self.clock.wall())
        new = copy_obj(pod)
        status = new.get("status") if isinstance(new.get("status"), dict) else {}
        new["status"] = status
        statuses = status.get("containerStatuses")
        if isinstance(statuses, list) and statuses:
            for cs in statuses:
                if isinstance(cs, dict):
                    cs.update({"ready": False, "started": False, "state": {"terminated": {
                        "exitCode": 0, "reason": "Completed", "startedAt": status.get("startTime", now),
                        "finishedAt": now}}})
            status["conditions"] = [{"type": "Ready", "status": "False", "lastTransitionTime": now}]
            for cs in statuses:
                if isinstance(cs, dict):
                    self._record(pod, "Killing", f"Stopping container {cs.get('name')}")
            self._write(rt, new, status=True)
        meta = pod["metadata"]
        try:
            self.store.delete(rt, meta.get("namespace"), meta["name"], grace_period=0)
        except StatusError:
            pass

    def _record(self, obj: dict[str, Any], reason: str, message: str, component: str = "kubelet",
                type: str = "Normal") -> None:
        if self.events is not None:
            self.events.record(obj, reason=reason, message=message, component=component, type=type)

    def _write(self, rt: ResourceType, obj: dict[str, Any], *, status: bool) -> None:
        meta = obj["metadata"]
        try:
            self.store.update(rt, meta.get("namespace"), meta["name"], obj,
                              subresource="status" if status else None, manager="kubelet")
        except StatusError:
            pass  # the pod changed or went away meanwhile; the next event decides

    def waiting_reason(self, pod: dict[str, Any], container: str) -> str | None:
        """Why ``container`` has no logs yet (None once it is running)."""
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            if cs.get("name") == container:
                waiting = (cs.get("state") or {}).get("waiting")
                return waiting.get("reason", "ContainerCreating") if waiting else None
        return "ContainerCreating"

    def logs(self, ns: str, name: str, container: str) -> list[tuple[str, str]]:
        """(timestamp, text) lines ``container`` has written so far."""
        pod = self.store.find(_POD_KEY, ns, name)
        if pod is None:
            return []
        uid = pod["metadata"]["uid"]
        started = self._started.get(uid)
        if started is None:
            return []
        image = next((c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []
                      if c.get("name") == container), "")
        elapsed = max(0.0, self.clock.wall() - started)
        count = 1 + int(elapsed / self.log_interval) if self.log_interval > 0 else 1
        node = (pod.get("spec") or {}).get("nodeName") or "an unknown node"
        lines = [(rfc3339(started), f"[{container}] starting {image} on {node}")]
        for i in range(1, min(count, 10_000)):
            lines.append((rfc3339(started + i * self.log_interval),
                          f"[{container}] tick {i}: serving requests, {i * 7 % 13} in flight"))
        return lines

    def forget_all(self) -> None:
        self._timeline.clear()
        self._pods.clear()
        self._started.clear()
        self._placed.clear()
        self._load.clear()

    def adopt(self) -> None:
        """Take over pods loaded from saved state: resume their lifecycle where it stopped."""
        for (ns, name), pod in self.store.bucket(_POD_KEY).objects.items():
            uid = pod["metadata"]["uid"]
            self._pods[uid] = (ns, name)
            self._place(uid, (pod.get("spec") or {}).get("nodeName"))
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Running":
                self._started[uid] = self.clock.wall()
            elif phase in (None, "Pending"):
                self._schedule(uid, self.schedule_delay, "scheduled")
