"""What a kopf operator stores on an object about its handlers, read back from outside.

kopf (``kopf/_core/actions/progression.py``, ``kopf/_cogs/configs/progress.py``) keeps no handler
state in memory between two handling cycles of an object: after every cycle it writes, per handler,
one small record onto the object itself, and the next cycle reads them back to decide which handler
runs next and when. That is what makes zero-code observation possible -- any client that can watch
the object sees the same records kopf will act on.

**The record** (a JSON object), per handler id:

- ``started`` -- when the handler's first attempt for this cause began; ``stopped`` -- when it
  finished (succeeded or failed for good); ``delayed`` -- when kopf will run it again. ISO 8601 in
  UTC, written from the operator's clock (naive in older kopf versions, ``+00:00`` in newer ones).
- ``retries`` -- attempts made so far: every attempt, successful or not, adds one, so a handler
  that succeeded on its third attempt stores ``retries: 3``.
- ``success`` / ``failure`` -- final outcome; neither means it is pending or waiting to retry.
- ``purpose`` -- the cause the handler is run for (``create``, ``update``, ``delete``, ``resume``).
- ``message`` -- the last error's text; ``subrefs`` -- ids of its sub-handlers, all levels deep.

**Where it is stored** (``settings.persistence.progress_storage``):

- annotations (kopf's default, ``SmartProgressStorage``): ``{prefix}/{name}``, the record JSON-encoded,
  with ``prefix`` ``kopf.zalando.org`` unless configured. ``name`` is the handler id made
  annotation-safe -- ``/`` becomes ``.`` and ``<``/``>`` become ``_`` (``parent/child`` is stored as
  ``parent.child``; a field handler ``fn/spec.replicas`` as ``fn.spec.replicas``) -- and cut to 63
  characters with a hash suffix when longer. kopf also writes every key a second time in its older
  ("v1") form, cut to fit 63 characters *including* the prefix, whenever that form differs; the two
  carry the same value and are read here as one handler. On ReplicaSets owned by a Deployment every
  name ends in ``-ofDRS`` (Kubernetes copies a Deployment's annotations onto its ReplicaSets).
- status (``StatusProgressStorage``): ``status.kopf.progress.{handler_id}``, the record as a
  nested object under the handler's real id. The default storage still *reads* this field (to
  upgrade from old kopf versions) but no longer writes it.

Alongside: ``{prefix}/touch-dummy`` (``status.kopf.dummy`` with status storage) is a timestamp kopf
writes only to wake itself up when a delayed retry is due -- it is not progress and is ignored here;
``{prefix}/last-handled-configuration`` (the "diff-base") is the object's essence as last handled,
written when a cycle is done (every handler of the cause finished) -- see ``diff_base``.

**When records disappear**: at the end of a cycle kopf *purges* every record of its handlers, in the
same PATCH that writes the new diff-base (annotations), or in the status PATCH right after it
(status storage, patched as a subresource). The final records of that last cycle are never written
at all -- a handler that finishes in the cycle that completes the object's handling leaves no trace
but the purge itself. Records are also purged, without a new diff-base, when a new cause supersedes
an unfinished one. ``controllers.kopf.zerocode`` uses ``diff_base`` to tell the two apart.

This module is pure: an object (a raw dict) in, ``{handler_id: HandlerProgressView}`` out.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from controllers.schema import ErrorKind, HandlerCause, HandlerProgress

DEFAULT_PREFIX = "kopf.zalando.org"
DIFF_BASE_KEY = "last-handled-configuration"
TOUCH_KEY = "touch-dummy"
MARKER_KEY = "kopf-managed"  # kopf's "this prefix is a kopf operator's" mark (non-kopf.* prefixes)
STATUS_PATH = ("status", "kopf", "progress")
STATUS_DIFF_BASE_PATH = ("status", "kopf", DIFF_BASE_KEY)
NAME_LIMIT = 63  # Kubernetes: an annotation key's name part (after the prefix) is at most 63 chars
DEPLOYMENT_REPLICASET_MARK = "-ofDRS"



class Storage(StrEnum):
    """Which of kopf's progress storages to read (``--kopf-storage``)."""

    ANNOTATIONS = "annotations"
    STATUS = "status"
    BOTH = "both"  # annotations first, then status: the order kopf's default storage reads them in


@dataclasses.dataclass(frozen=True)
class ProgressFormat:
    """Where the operator stores its progress: must match the operator's settings, or nothing is seen."""

    prefix: str = DEFAULT_PREFIX
    storage: Storage = Storage.BOTH


DEFAULT_FORMAT = ProgressFormat()
"""kopf's defaults: annotations under ``kopf.zalando.org``, with status read too (as kopf reads it)."""


@dataclasses.dataclass(frozen=True)
class HandlerProgressView:
    """One handler's stored record, decoded. Equal views mean kopf stored nothing new about it."""

    handler: str
    retries: int = 0
    started: float | None = None  # wall seconds (Unix time), as the operator's clock wrote them
    stopped: float | None = None
    delayed: float | None = None
    purpose: str | None = None
    success: bool = False
    failure: bool = False
    message: str | None = None
    subrefs: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        return self.success or self.failure

    @property
    def failed_attempts(self) -> int:
        """The protocol's ``retries`` (failed attempts so far): kopf's ``retries`` counts every
        attempt, so a handler that succeeded stores one more than it failed."""
        return self.retries - 1 if self.success and self.retries else self.retries

    @property
    def cause(self) -> HandlerCause | None:
        """The stored ``purpose`` as a protocol cause (``None`` if kopf stored none or an unknown one)."""
        try:
            return HandlerCause(self.purpose) if self.purpose else None
        except ValueError:
            return None

    def state(self, now: float) -> HandlerProgress:
        """Where the handler is at wall time ``now``. kopf stores nothing while an attempt runs, so a
        stored record is never ``running``: an unfinished handler that has had an attempt (or has a
        retry scheduled) is ``retrying``, one that has had none is ``pending``."""
        if self.success:
            return HandlerProgress.SUCCEEDED
        if self.failure:
            return HandlerProgress.FAILED
        if self.retries > 0 or (self.delayed is not None and self.delayed > now):
            return HandlerProgress.RETRYING
        return HandlerProgress.PENDING

    def error(self) -> str | None:
        """The stored error text; ``None`` for a parent waiting for its sub-handlers (kopf stores the
        internal retry's empty text there, as ``"None"`` or ``""``)."""
        if self.subrefs and not self.finished and self.message in ("None", ""):
            return None
        return self.message


# kopf's own texts for the two ways a handler is given up (HandlerTimeoutError, HandlerRetriesError,
# raised in kopf/_core/actions/execution.py); anything else stored as a failure is a PermanentError
# (or an exception under errors=PERMANENT). A user's PermanentError worded like these would be misread.
_TIMEOUT = re.compile(r"has timed out after |will time out after |it would time out in ")
_RETRIES = re.compile(r"has exceeded \d+ retries|will exceed \d+ retries|it would exceed \d+ retries")


def failure_kind(view: HandlerProgressView) -> ErrorKind:
    """Why a handler stored as failed was given up: timeout, retries, else permanent."""
    message = view.message or ""
    if _TIMEOUT.search(message):
        return ErrorKind.TIMEOUT
    if _RETRIES.search(message):
        return ErrorKind.RETRIES
    return ErrorKind.PERMANENT


def retry_kind(view: HandlerProgressView, views: Mapping[str, HandlerProgressView]) -> ErrorKind:
    """Why an unfinished handler will run again: ``children`` when one of its sub-handlers is
    unfinished, else ``temporary``.

    A ``kopf.TemporaryError`` and any other exception (under kopf's default ``errors=TEMPORARY``)
    store exactly the same fields -- ``delayed``, ``retries``, ``message`` -- and kopf treats them the
    same way: retried at ``delayed``. Only the delay's origin differs (the error's own ``delay`` or the
    handler's ``backoff``), and both default to 60 s. So every stored retry is reported as
    ``temporary``: a retry after the delay kopf stored.
    """
    if any(not (sub := views.get(ref)) or not sub.finished for ref in view.subrefs):
        return ErrorKind.CHILDREN
    return ErrorKind.TEMPORARY


def read_progress(obj: Mapping[str, Any], fmt: ProgressFormat = DEFAULT_FORMAT) -> dict[str, HandlerProgressView]:
    """Every handler's stored progress on ``obj``, by handler id.

    Ids are recovered as far as the storage allows: status keys are the real ids; an annotation name
    is the id itself when the id was annotation-safe and short, else it is matched against the real
    ids the object names elsewhere (sub-handler ``subrefs``, status keys), else it is shown as stored
    (``fn.spec.replicas`` for ``fn/spec.replicas``; a cut, hash-suffixed name for a long id).
    """
    from_annotations = _annotation_records(obj, fmt.prefix) if fmt.storage != Storage.STATUS else {}
    from_status = _status_records(obj) if fmt.storage != Storage.ANNOTATIONS else {}
    known_ids = set(from_status)
    for record in (*from_annotations.values(), *from_status.values()):
        known_ids.update(_subrefs(record))
    real_id = {annotation_name(i): i for i in known_ids}
    records: dict[str, dict[str, Any]] = {}
    for name, record in from_annotations.items():
        records.setdefault(real_id.get(name, name), record)
    for handler_id, record in from_status.items():
        records.setdefault(handler_id, record)  # kopf reads annotations first
    return {handler_id: _view(handler_id, record) for handler_id, record in records.items()}


def diff_base(obj: Mapping[str, Any], fmt: ProgressFormat = DEFAULT_FORMAT) -> str | None:
    """The stored last-handled configuration (annotation, else ``status.kopf``), as stored: kopf
    writes it when a cycle is done, so a change of it marks the end of a cycle."""
    annotations = _annotations(obj)
    mark = DEPLOYMENT_REPLICASET_MARK if _marked(obj) else ""
    value = annotations.get(f"{fmt.prefix}/{DIFF_BASE_KEY}{mark}")
    if value is None:
        value = _resolve(obj, STATUS_DIFF_BASE_PATH)
    return value if isinstance(value, str) else None


def foreign_prefixes(obj: Mapping[str, Any], fmt: ProgressFormat = DEFAULT_FORMAT) -> set[str]:
    """Annotation prefixes other than ``fmt.prefix`` under which a kopf operator stored its diff-base
    on ``obj``: the operator runs with a prefix ctrlscope was not told about."""
    return {key.rpartition("/")[0] for key in _annotations(obj)
            if key.endswith(f"/{DIFF_BASE_KEY}") and key.rpartition("/")[0] != fmt.prefix}


# -- annotation names -------------------------------------------------------------------------------
def safe_name(handler_id: str) -> str:
    """The handler id with the characters annotation names cannot hold replaced, as kopf does."""
    return handler_id.replace("/", ".").replace("<", "_").replace(">", "_")


def _hash_suffix(text: str) -> str:
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=4).digest()
    return ("-" + base64.b64encode(digest, altchars=b"-.").decode("ascii")).rstrip("=-.")


def annotation_name(handler_id: str) -> str:
    """The name part of the annotation kopf stores ``handler_id``'s progress under (its current,
    "v2" naming): the safe id, cut and suffixed with a hash of the id when longer than 63."""
    suffix = _hash_suffix(handler_id) if len(handler_id) > NAME_LIMIT else ""
    return safe_name(handler_id)[:max(0, NAME_LIMIT - len(suffix))] + suffix


def legacy_annotation_name(safe: str, prefix: str) -> str:
    """kopf's older ("v1") name for a handler whose safe id is ``safe``: cut so that prefix, ``/``
    and name fit 63 characters, with a hash of the safe id when cut."""
    limit = NAME_LIMIT - len(prefix) - 1
    if len(safe) <= limit:
        return safe
    suffix = _hash_suffix(safe)
    return safe[:max(0, limit - len(suffix))] + suffix


def _legacy_twins(name: str, prefix: str) -> set[str]:
    """The v1 names kopf writes next to v2 name ``name``. A 63-character name is either an id of
    exactly that length or a longer id cut and hashed; for the latter the v1 hash is of the safe id,
    the same as the v2 one when the id needed no replacements (a sub-handler's id, which did, is
    known from its parent's subrefs and matched exactly)."""
    twins = {legacy_annotation_name(name, prefix)}
    cut = re.fullmatch(r"(.*)(-[A-Za-z0-9.-]{1,6})", name)
    if len(name) == NAME_LIMIT and cut:
        stem, suffix = cut.groups()
        limit = NAME_LIMIT - len(prefix) - 1
        twins.add(stem[:max(0, limit - len(suffix))] + suffix)
    twins.discard(name)
    return twins


def _annotation_records(obj: Mapping[str, Any], prefix: str) -> dict[str, dict[str, Any]]:
    """Records by v2 annotation name (v1 twins dropped)."""
    mark = DEPLOYMENT_REPLICASET_MARK if _marked(obj) else ""
    raw: dict[str, str] = {}
    for key, value in _annotations(obj).items():
        key_prefix, sep, name = key.partition("/")
        if not sep or key_prefix != prefix:
            continue
        if mark:
            if not name.endswith(mark):
                continue
            name = name[:-len(mark)]
        if name in (DIFF_BASE_KEY, TOUCH_KEY, MARKER_KEY):
            continue
        raw[name] = value
    records: dict[str, dict[str, Any]] = {}
    for name, value in raw.items():
        record = _decode(value)
        if record is not None:
            records[name] = record
    for name in list(records):
        for twin in _legacy_twins(name, prefix):
            if twin in records and raw[twin] == raw[name]:
                del records[twin]
    # A sub-handler id longer than 63 has a v2 hash of the id but a v1 hash of the safe id, which
    # differ (the id holds a "/"): its parent's subrefs give the id, and so the exact v1 name.
    for record in list(records.values()):
        for ref in _subrefs(record):
            v2 = annotation_name(ref)
            twin = legacy_annotation_name(safe_name(ref), prefix)
            if twin != v2 and twin in records and v2 in raw and raw.get(twin) == raw[v2]:
                del records[twin]
    return records


def _status_records(obj: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    container = _resolve(obj, STATUS_PATH)
    if not isinstance(container, Mapping):
        return {}
    return {str(k): dict(v) for k, v in container.items() if _is_record(v)}


def _decode(value: Any) -> dict[str, Any] | None:
    """An annotation value as a progress record, or ``None`` (another tool's annotation)."""
    try:
        record = json.loads(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return record if _is_record(record) else None


def _is_record(value: Any) -> bool:
    # Not a test of the exact field set: a newer kopf may store more fields, and that must not hide
    # the handler. Every record kopf writes has ``started`` and ``retries``.
    return isinstance(value, Mapping) and ("started" in value or "retries" in value)


def _view(handler_id: str, record: Mapping[str, Any]) -> HandlerProgressView:
    retries = record.get("retries")
    return HandlerProgressView(
        handler=handler_id,
        retries=retries if isinstance(retries, int) and retries > 0 else 0,
        started=parse_time(record.get("started")),
        stopped=parse_time(record.get("stopped")),
        delayed=parse_time(record.get("delayed")),
        purpose=record.get("purpose") if isinstance(record.get("purpose"), str) else None,
        success=record.get("success") is True,
        failure=record.get("failure") is True,
        message=record.get("message") if isinstance(record.get("message"), str) else None,
        subrefs=tuple(_subrefs(record)),
    )


def _subrefs(record: Mapping[str, Any]) -> list[str]:
    refs = record.get("subrefs")
    return [r for r in refs if isinstance(r, str)] if isinstance(refs, list) else []


def parse_time(value: Any) -> float | None:
    """A kopf timestamp (ISO 8601, UTC, with or without an offset) as Unix seconds."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    annotations = (obj.get("metadata") or {}).get("annotations")
    return annotations if isinstance(annotations, Mapping) else {}


def _marked(obj: Mapping[str, Any]) -> bool:
    """kopf's one special case of key names: a ReplicaSet owned by a Deployment."""
    owners = (obj.get("metadata") or {}).get("ownerReferences") or []
    return obj.get("kind") == "ReplicaSet" and any(o.get("kind") == "Deployment" for o in owners)


def _resolve(obj: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = obj
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value
