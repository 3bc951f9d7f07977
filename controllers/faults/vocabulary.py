"""The fault vocabulary: every name a fault request, a fault record or a capability is spelled with.

One definition for the simulator, the fault proxy, ``SimFaults`` and the dashboard: a fault kind is
what ``GET /_sim/faults`` lists in ``events[].fault`` and what ``cluster/faults`` records carry (the
Faults panel's ``describe`` in ``faults.js`` reads these strings); a capability is what a backend
may be unable to do, and ``unsupported`` in ``GET /_sim/faults`` names it with the reason.
"""

from __future__ import annotations

from enum import StrEnum

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection", "*")
"""Verbs a rule matches, as the API server's request info names them; ``*`` matches any."""

ACTOR_HEADER = "X-Ctrlscope-Actor"
"""Request header naming who injects a fault; recorded as the fault's ``by``."""
MAX_ACTOR = 128
MAX_EVENTS = 1000
"""The fault log ``GET /_sim/faults`` returns: the newest this many."""
MAX_STALL = 3600.0
"""Seconds a network stall may last at most."""


class Fault(StrEnum):
    """A fault record's kind (``event["fault"]``)."""

    DROP_WATCHES = "drop-watches"
    END_WATCHES = "end-watches"
    COMPACT = "compact"
    ERRORS = "errors"
    ERRORS_CLEARED = "errors-cleared"
    LATENCY = "latency"
    LATENCY_CLEARED = "latency-cleared"
    STALL = "stall"
    KUBELET_PAUSE = "kubelet-pause"
    KUBELET_RESUME = "kubelet-resume"
    KILL_PODS = "kill-pods"
    RESET = "reset"


class Capability(StrEnum):
    """What a backend may not be able to do. The rules (errors, latency, a stall) and ending or
    dropping watches work wherever requests pass through ctrlscope, so they are not listed."""

    COMPACT = "compact"
    KUBELET = "kubelet"
    KILL_PODS = "kill-pods"
    RESET = "reset"
