"""Redaction: nothing secret leaves the worker.

Applied to every object before it is summarised, published or shown by the inspector
(``inspector.py``). A Secret loses the values of ``data`` and ``stringData`` and the
``kubectl.kubernetes.io/last-applied-configuration`` annotation, which ``kubectl apply`` fills with
the whole manifest -- the values in clear text. ``managedFields`` stays: it names fields, never
values. The input is never modified.

A redacted value keeps what a reader needs to follow changes without learning the secret: the keys
stay, each value becomes ``<redacted> (N chars, #fingerprint)``. The length tells an empty value from
a filled one; the fingerprint is an HMAC-SHA256 under a key that is random per worker process and
never leaves it, over the object's uid, the field, the key and the value. So the inspector's diff
shows *that* a value changed (its fingerprint changes) while the fingerprint cannot be checked
against guessed values offline, and equal values in different Secrets or keys do not look equal.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
SECRET_FIELDS = ("data", "stringData")
REDACTED = "<redacted>"

_FINGERPRINT_KEY = secrets.token_bytes(32)  # per process: fingerprints mean nothing outside it


def _mask(owner: str, field: str, name: str, value: Any) -> str:
    text = value if isinstance(value, str) else ""
    message = "\0".join((owner, field, name, text)).encode()
    fingerprint = hmac.new(_FINGERPRINT_KEY, message, hashlib.sha256).hexdigest()[:8]
    return f"{REDACTED} ({len(text)} chars, #{fingerprint})"


def redact(obj: Any) -> Any:
    """A copy of ``obj`` safe to publish (``obj`` itself when nothing needs hiding)."""
    if not isinstance(obj, dict) or obj.get("kind") != "Secret":
        return obj
    out = dict(obj)
    meta = out.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    owner = str(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")
    for field in SECRET_FIELDS:
        values = out.get(field)
        if isinstance(values, dict):
            out[field] = {k: _mask(owner, field, k, v) for k, v in values.items()}
        elif values is not None:  # malformed (the API server would refuse it): hide it whole
            out[field] = _mask(owner, field, "", values)
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        out["metadata"] = {**meta, "annotations": {
            **annotations, LAST_APPLIED: _mask(owner, "annotations", LAST_APPLIED, annotations[LAST_APPLIED])}}
    return out
