"""What the dashboard is told about one cached object: its compact summary (protocol §5.1).

Full objects never leave the worker. An informer topic's state holds, per key, only what a person
scanning the cache panel needs (resourceVersion, generation, uid, deleting, phase), taken after
redaction so that nothing from a Secret's data can travel even by mistake. The object inspector
answers for one whole object on demand (``inspector.py``).
"""

from __future__ import annotations

from typing import Any

from controllers.telemetry.redaction import redact


def summarize(obj: Any) -> dict[str, Any]:
    """The compact cache entry the dashboard lists (full objects stay in the worker)."""
    obj = redact(obj)
    meta = obj.get("metadata") or {} if isinstance(obj, dict) else {}
    out: dict[str, Any] = {"rv": meta.get("resourceVersion"), "gen": meta.get("generation"),
                           "uid": meta.get("uid")}
    if meta.get("deletionTimestamp"):
        out["deleting"] = True
    status = obj.get("status") if isinstance(obj, dict) else None
    if isinstance(status, dict) and "phase" in status:
        out["phase"] = status["phase"]
    return out


def resource_version(obj: Any) -> str | None:
    """``metadata.resourceVersion`` of an object (``None`` for anything else, e.g. a tombstone)."""
    if isinstance(obj, dict):
        meta = obj.get("metadata")
        if isinstance(meta, dict):
            return meta.get("resourceVersion")
    return None
