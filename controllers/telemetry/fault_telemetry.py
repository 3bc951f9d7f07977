"""FaultTelemetry: injected faults, published on the ``cluster/faults`` topic.

The faults come from whatever serves the fault API (``controllers.faults``): the simulated cluster,
or the fault proxy in front of a real one -- the same records and state from either, with
``backend`` saying which (and the proxy's ``upstream``).

A fault is the cause the dashboard otherwise cannot see: a worker's informer reports a watch that
broke, a 410 and a relist, but not that someone dropped every watch on purpose a moment before. So
the simulator's ``on_fault`` callback — called once per fault on the simulator's event loop, after
the fault took effect — is this object:

* each fault becomes one **record** ``{"k": "fault", "fault", "params", "time", "rv", "by", "ts"}``:
  what happened, with which parameters, who asked for it (the simulator's ``by``, "" if nobody
  said), when (the simulator's RFC 3339 time and resourceVersion, and ``ts`` in ms for ordering next
  to the workers' records);
* the topic's **state** is what the simulator looks like now: ``rules`` (the active error and
  latency rules and whether the kubelet is paused, read from the simulator in the same callback, so
  it is exactly what that fault left behind) and ``simulator`` (its URL, whether it runs, which
  ``backend`` it is: "simulator" or "fault proxy", and a fault proxy's ``upstream`` URL -- never a
  credential).

Nothing here blocks the simulator: ``RedisPublisher.publish`` and ``set_state`` only append to
memory, and the publisher's own thread talks to Redis. A list parameter (``kill-pods``' victims) is
cut to ``MAX_LIST_ITEMS`` so that no record grows with the cluster. The simulator does not import
this module (``.importlinter``); ``manage.py simcluster`` and ``manage.py faultproxy`` wire them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from controllers.clock import Clock, RealClock, wall_ms
from controllers.schema import FAULTS_TOPIC, RecordKind
from controllers.telemetry.publisher import RedisPublisher

TOPIC = FAULTS_TOPIC
MAX_LIST_ITEMS = 20


class FaultSource(Protocol):
    """What a ``FaultInjector`` offers: the callback slot and its active rules."""

    on_fault: Callable[[dict[str, Any]], None] | None

    def rules(self) -> dict[str, Any]: ...


class FaultTelemetry:
    """Publishes one simulator's faults and active rules (see the module docstring)."""

    def __init__(self, publisher: RedisPublisher, *, topic: str = TOPIC, clock: Clock | None = None) -> None:
        self.publisher = publisher
        self.topic = topic
        self.clock = clock or RealClock()
        self._source: FaultSource | None = None
        self._simulator: dict[str, Any] = {}

    def attach(self, source: FaultSource, *, url: str, backend: str = "simulator", upstream: str = "") -> None:
        """Become ``source``'s fault callback and publish its server as running (call on its loop)."""
        self._source = source
        source.on_fault = self
        self._simulator = {"url": url, "running": True, "since": wall_ms(self.clock), "run": self.publisher.name,
                           "backend": backend}
        if upstream:
            self._simulator["upstream"] = upstream
        self.publisher.describe(role=backend, name=url)
        self.publisher.set_state(self.topic, "simulator", self._simulator)
        self.publisher.set_state(self.topic, "rules", source.rules())

    def detach(self) -> None:
        """The simulator stopped: its rules no longer apply to anything."""
        if self._source is not None:
            self._source.on_fault = None
            self._source = None
        self.publisher.set_state(self.topic, "simulator", {**self._simulator, "running": False, "stopped": wall_ms(self.clock)})
        self.publisher.set_state(self.topic, "rules", None)

    def __call__(self, event: dict[str, Any]) -> None:
        params = dict(event.get("params") or {})
        for key, value in list(params.items()):
            if isinstance(value, list) and len(value) > MAX_LIST_ITEMS:
                params[key] = value[:MAX_LIST_ITEMS]
                params[f"{key}Total"] = len(value)
        self.publisher.publish(self.topic, {"k": RecordKind.FAULT, "fault": event.get("fault"), "params": params,
                                            "time": event.get("time"), "rv": event.get("resourceVersion"),
                                            "by": event.get("by", ""), "ts": wall_ms(self.clock)})
        if self._source is not None:
            self.publisher.set_state(self.topic, "rules", self._source.rules())
