"""Event recording for the simulated control plane (core/v1 ``Event`` objects).

Real controllers and kubelets explain themselves through Events: ``kubectl describe`` shows them
(it lists events with a ``involvedObject.*`` field selector) and ctrlscope's dashboard can stream
them next to its own observations. The simulated scheduler, kubelet and controllers record the same
reasons a real cluster would (Scheduled, Pulled, Created, Started, SuccessfulCreate,
ScalingReplicaSet, ...).

Events are ordinary objects in the store, so they take resourceVersions and reach watchers like
everything else. A real cluster expires them after an hour; here the recorder keeps the newest
``max_events`` and deletes the oldest beyond that, so a long demo does not grow without bound.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from controllers.sim.errors import StatusError
from controllers.sim.store import Store, rfc3339

_EVENTS = ("", "events")


class EventRecorder:
    """Writes core/v1 Events about objects on behalf of a named component."""

    def __init__(self, store: Store, *, max_events: int = 2000) -> None:
        self.store = store
        self.max_events = max_events
        # (namespace, name) of the events this recorder wrote, oldest first.
        self._recorded: deque[tuple[str, str]] = deque()

    def record(self, obj: dict[str, Any], *, reason: str, message: str, component: str,
               type: str = "Normal") -> None:
        rt = self.store.registry.storage_type(_EVENTS)
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        if rt is None or self.store.find(("", "namespaces"), "", ns) is None:
            return
        now = rfc3339(self.store.clock.wall())
        # Fixed-width hex of the next RV: unique, and name order is creation order as on a real cluster.
        name = f"{meta['name']}.{self.store.rv + 1:016x}"
        event = {
            "metadata": {"name": name, "namespace": ns},
            "involvedObject": {"kind": obj.get("kind"), "namespace": meta.get("namespace"), "name": meta["name"],
                               "uid": meta.get("uid"), "apiVersion": obj.get("apiVersion"),
                               "resourceVersion": meta.get("resourceVersion")},
            "reason": reason,
            "message": message,
            "source": {"component": component},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "type": type,
            "reportingComponent": component,
            "reportingInstance": "",
        }
        try:
            self.store.create(rt, ns, event, manager=component)
        except StatusError:
            return  # namespace terminating: a real recorder drops the event too
        self._recorded.append((ns, name))
        while len(self._recorded) > self.max_events:
            old_ns, old_name = self._recorded.popleft()
            try:
                self.store.delete(rt, old_ns, old_name)
            except StatusError:
                pass
