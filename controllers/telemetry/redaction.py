"""Redaction: nothing secret leaves the worker.

Applied to every object before it is summarised or published. Secrets lose the values of ``data``
and ``stringData`` (the keys stay, so a user still sees *which* keys changed, and a length so they
can tell an empty value from a filled one), and the ``last-applied-configuration`` annotation, which
``kubectl apply`` fills with the whole manifest — values included. The input is never modified.
"""

from __future__ import annotations

from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_FIELDS = ("data", "stringData")
REDACTED = "<redacted>"


def redact(obj: Any) -> Any:
    """A copy of ``obj`` safe to publish (``obj`` itself when nothing needs hiding)."""
    if not isinstance(obj, dict) or obj.get("kind") != "Secret":
        return obj
    out = dict(obj)
    for field in SECRET_FIELDS:
        values = out.get(field)
        if isinstance(values, dict):
            out[field] = {k: f"{REDACTED} ({len(v) if isinstance(v, str) else 0} chars)" for k, v in values.items()}
    meta = out.get("metadata")
    if isinstance(meta, dict) and isinstance(meta.get("annotations"), dict) and LAST_APPLIED in meta["annotations"]:
        annotations = dict(meta["annotations"])
        annotations[LAST_APPLIED] = REDACTED
        out["metadata"] = {**meta, "annotations": annotations}
    return out
