"""The simulated scheduler + kubelet: pods move Pending → ContainerCreating → Running/Ready.

A real node agent watches pods bound to it and reports their progress through ``pods/status``; here
one ``Kubelet`` plays every node. For each new pod it schedules two status writes:

1. after ``schedule_delay``: bound to ``sim-node-1`` (``spec.nodeName``), ``PodScheduled``, containers
   waiting in ``ContainerCreating``;
2. after ``start_delay`` more: ``Running``, containers running and ready, a pod IP, ``Ready``.

Deadlines use the injected clock's ``now()``, so a test with a ``FakeClock`` steps time instead of
sleeping; a small real-time ticker notices when deadlines have passed. ``pause()`` stops progress
(fault injection: a node that stopped reporting); pending transitions fire after ``resume()``.

Logs are synthetic and computed, not stored: container ``c`` of a running pod has printed one line
per ``log_interval`` seconds since it started, so ``pods/log`` costs nothing until someone reads it.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from typing import Any

from controllers.clock import Clock
from controllers.sim.background import BackgroundLoop
from controllers.sim.errors import StatusError
from controllers.sim.events import EventRecorder
from controllers.sim.resources import ResourceType
from controllers.sim.store import Store, copy_obj, rfc3339
from controllers.sim.watch import ADDED, DELETED, MODIFIED, WatchEvent

NODE_NAME = "sim-node-1"
log = logging.getLogger(__name__)
_POD_KEY = ("", "pods")


class Kubelet(BackgroundLoop):
    """Drives pod status for every pod in the store."""

    def __init__(self, store: Store, *, clock: Clock, schedule_delay: float = 0.2, start_delay: float = 1.0,
                 log_interval: float = 1.0, tick: float = 0.02, events: EventRecorder | None = None,
                 stop_delay: float | None = None) -> None:
        self.store = store
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
        self._ip = itertools.count(2)
        store.listeners.append(self._on_event)

    def _pod_type(self) -> ResourceType:
        rt = self.store.registry.storage_type(_POD_KEY)
        assert rt is not None
        return rt

    def _on_event(self, ev: WatchEvent) -> None:
        if ev.key != _POD_KEY:
            return
        meta = ev.obj["metadata"]
        uid = meta["uid"]
        if ev.type == DELETED:
            self._pods.pop(uid, None)
            self._started.pop(uid, None)
        elif ev.type == ADDED:
            self._pods[uid] = (meta.get("namespace", ""), meta["name"])
            phase = (ev.obj.get("status") or {}).get("phase")
            if phase in (None, "Pending"):
                self._schedule(uid, self.schedule_delay, "scheduled")
        elif ev.type == MODIFIED and meta.get("deletionTimestamp") and ev.old is not None \
                and not ev.old["metadata"].get("deletionTimestamp"):
            self._schedule(uid, self.stop_delay, "terminate")

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
        """Apply every transition whose deadline has passed."""
        now = self.clock.now()
        while self._timeline and self._timeline[0][0] <= now:
            _, _, uid, stage = heapq.heappop(self._timeline)
            if uid in self._pods:
                try:
                    self._advance(uid, stage)
                except Exception:
                    log.exception("simulated kubelet failed to move pod %s to %s", self._pods.get(uid), stage)

    def _advance(self, uid: str, stage: str) -> None:
        ns, name = self._pods[uid]
        rt = self._pod_type()
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
            if not new["spec"].get("nodeName"):
                new["spec"]["nodeName"] = NODE_NAME
                self._write(rt, new, status=False)
                new = copy_obj(self.store.find(_POD_KEY, ns, name))
                status = new.setdefault("status", {})
            status.update({
                "phase": "Pending",
                "hostIP": "10.0.0.1",
                "startTime": now,
                "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": now}],
                "containerStatuses": [{"name": c, "image": images[c], "imageID": "", "ready": False,
                                       "restartCount": 0, "started": False,
                                       "state": {"waiting": {"reason": "ContainerCreating"}}} for c in containers],
            })
            self._write(rt, new, status=True)
            self._schedule(uid, self.start_delay, "running")
            self._record(pod, "Scheduled", f"Successfully assigned {ns}/{name} to {NODE_NAME}", "default-scheduler")
        elif stage == "running":
            n = next(self._ip)
            ip = f"10.244.{(n >> 8) & 255}.{n & 255}"
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

    def _record(self, pod: dict[str, Any], reason: str, message: str, component: str = "kubelet") -> None:
        if self.events is not None:
            self.events.record(pod, reason=reason, message=message, component=component)

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
        lines = [(rfc3339(started), f"[{container}] starting {image} on {NODE_NAME}")]
        for i in range(1, min(count, 10_000)):
            lines.append((rfc3339(started + i * self.log_interval),
                          f"[{container}] tick {i}: serving requests, {i * 7 % 13} in flight"))
        return lines

    def forget_all(self) -> None:
        self._timeline.clear()
        self._pods.clear()
        self._started.clear()

    def adopt(self) -> None:
        """Take over pods loaded from saved state: resume their lifecycle where it stopped."""
        for (ns, name), pod in self.store.bucket(_POD_KEY).objects.items():
            uid = pod["metadata"]["uid"]
            self._pods[uid] = (ns, name)
            phase = (pod.get("status") or {}).get("phase")
            if phase == "Running":
                self._started[uid] = self.clock.wall()
            elif phase in (None, "Pending"):
                self._schedule(uid, self.schedule_delay, "scheduled")
