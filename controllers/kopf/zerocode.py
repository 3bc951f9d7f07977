"""Zero-code mode: a kopf operator running anywhere, seen through what it stores on its objects.

``manage.py runcontrollers --kopf podsets.demo.ctrlscope.dev`` runs one ctrlscope informer on the
resource (resolved through API discovery, as kubectl resolves ``RESOURCE.GROUP``) and a
``ZeroCodeKopf`` as that informer's event handler. The operator is not touched: no import, no
sidecar, no restart. Every watch event of an object is diffed, per handler, against the progress
the object stored last time (``controllers.kopf.progress`` reads it) and reported to the Observer as
the same per-object handler view the in-process mode publishes, under the same controller name:

- **progress** -- every handler whose stored record changed: ``on_progress`` with its state
  (pending / retrying / succeeded / failed), retries (its failed attempts, as the protocol counts
  them; kopf's own count includes a successful last attempt), ``next_at`` (the stored ``delayed``), cause (the
  stored purpose) and error (the stored message); ``None`` when kopf dropped the record without
  finishing the cycle (a newer cause superseded it, or the object is gone).
- **attempts** -- kopf adds one to ``retries`` per attempt and stores each outcome, so every increase
  of ``retries`` is an attempt that ended: ``on_reconcile_start`` / ``on_reconcile_end`` with the
  handler, cause, retry, and what kopf stored about what happens next (``result``, ``error_kind``,
  ``delay`` = stored ``delayed`` - now). On the controller's queue topic each attempt is an instant
  ``get`` / ``done`` (when its outcome was stored) and each delayed retry an ``add_after`` with that
  delay: the timeline's countdown to the next attempt.
- **the end of a cycle** -- when every handler of a cause has finished, kopf deletes all their
  records and, in the same PATCH, writes the object's new last-handled configuration (with status
  storage: in the status PATCH right after it). Records that vanish *after* the configuration changed
  are the end of a cycle, not a supersession: a handler that was still pending or retrying then had
  its last attempt in that very cycle, and is reported as one more attempt, succeeded. (kopf never
  stores that last outcome, so a last attempt that failed for good looks exactly the same -- it is
  in ``UNSEEN``.) The end of a deletion cycle writes no configuration; kopf removes the finalizer
  right after the purge, so records of ``delete`` handlers that vanish from an object being deleted
  are an end of cycle too.

What cannot be seen this way is published with the controller (``UNSEEN``) and shown on its page.

An object seen for the first time (the initial LIST, or an object that appeared in a relist) is a
baseline: its stored progress is reported, but the attempts behind it are history ctrlscope did not
watch and are not invented. Only changes seen afterwards count attempts.

All calls come from the informer's handler thread for this handler (one at a time, in order), so the
per-object memory (``_seen``: only objects with stored progress) needs no lock.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from controllers.clock import Clock, RealClock
from controllers.informers.keys import DeletedFinalStateUnknown, object_key
from controllers.kopf import controller_name
from controllers.kopf.progress import (
    DEFAULT_FORMAT,
    HandlerProgressView,
    ProgressFormat,
    diff_base,
    failure_kind,
    foreign_prefixes,
    read_progress,
    retry_kind,
)
from controllers.observer import NOOP_OBSERVER, Observer, active_observer
from controllers.schema import ErrorKind, HandlerCause, HandlerProgress, ObservationMode, QueueOp, ReconcileResult

if TYPE_CHECKING:
    from controllers.reconcile.manager import Manager

log = logging.getLogger("ctrlscope.kopf.zerocode")

UNSEEN = (
    "How long handlers run: kopf stores only each attempt's outcome, so attempts show as instant, "
    "at the moment their outcome was stored; a handler running right now shows as pending or retrying.",
    "The operator's log lines: they stay in the operator's process (and in kopf's Kubernetes Events).",
    "Timers, daemons and @kopf.on.event handlers: kopf stores no progress for them.",
    "A handler that finishes on its first attempt in the cycle that completes the object's handling "
    "(an object's only handler, say) leaves no trace: kopf stores its outcome and deletes it in the same "
    "patch.",
    "A handler whose last attempt completed the cycle shows as succeeded: kopf deletes all progress "
    "at the end of a cycle without storing that attempt's outcome, even when it failed for good.",
    "A TemporaryError and any other exception store the same fields: both show as a temporary error "
    "retried after the delay kopf stored.",
    "Attempts made between two stored states that the watch did not deliver one by one (while "
    "ctrlscope was not watching, or across a relist) are merged: counted from kopf's retries, without "
    "their errors or times; attempts made before ctrlscope first saw an object are not shown.",
    "Handler ids come from annotation names: '/' shows as '.' unless a parent lists the sub-handler, "
    "and ids longer than 63 characters show cut and hashed.",
    "Nothing at all if the operator stores its progress under another annotation prefix or storage "
    "than ctrlscope reads (--kopf-prefix, --kopf-storage; kopf's defaults: kopf.zalando.org, "
    "annotations).",
)
"""What zero-code mode cannot see, as sentences for the controller's page (components ``unseen``)."""


# -- the resource ------------------------------------------------------------------------------------
class UnknownResource(LookupError):
    """The cluster serves no resource by that name."""


class DiscoveryClient(Protocol):
    def get_json(self, path: str) -> dict[str, Any]: ...


@dataclasses.dataclass(frozen=True)
class KopfResource:
    """One resource a kopf operator handles, as discovery names it."""

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def controller(self) -> str:
        return controller_name(self.group, self.plural)


def resolve_resource(client: DiscoveryClient, spec: str) -> KopfResource:
    """``RESOURCE[.VERSION][.GROUP]`` (``podsets.demo.ctrlscope.dev``, ``podsets.v1.demo.ctrlscope.dev``,
    ``pods``, ``ps``) to the served resource, through API discovery as kubectl does: the group's
    preferred version unless one is given; a name matches a resource's plural, singular, kind or
    short names. Raises ``UnknownResource`` with what is served instead."""
    name, _, rest = spec.strip().partition(".")
    if not name:
        raise UnknownResource(f"{spec!r} is not a resource name (expected RESOURCE.GROUP, e.g. podsets.apps)")
    groups = _served_groups(client)
    if rest:
        if rest in groups:
            candidates = [(rest, groups[rest][0])]
        else:
            version, _, group = rest.partition(".")
            if group in groups and version not in groups[group]:
                raise UnknownResource(f"the server serves {group} in {', '.join(groups[group])}, not {version!r}")
            if group not in groups:
                served = ", ".join(sorted(g for g in groups if g)) or "none"
                raise UnknownResource(f"the server serves no API group {rest!r} (served groups: {served})")
            candidates = [(group, version)]
    else:
        candidates = [(group, versions[0]) for group, versions in groups.items()]  # the core group first
    found = [r for group, version in candidates if (r := _find(client, group, version, name)) is not None]
    if not found:
        where = f" in {candidates[0][0] or 'the core group'}" if rest else ""
        raise UnknownResource(f"the server doesn't have a resource type {name!r}{where}")
    if len(found) > 1 and found[0].group:
        options = ", ".join(f"{r.plural}.{r.group}" for r in found)
        raise UnknownResource(f"{spec!r} is ambiguous: {options}; name the group")
    return found[0]


def _served_groups(client: DiscoveryClient) -> dict[str, list[str]]:
    """Group -> served versions, preferred first; the core group ("") first."""
    groups: dict[str, list[str]] = {"": list(client.get_json("/api").get("versions") or ["v1"])}
    for group in client.get_json("/apis").get("groups") or []:
        preferred = (group.get("preferredVersion") or {}).get("version")
        versions = [v.get("version") for v in group.get("versions") or [] if v.get("version")]
        groups[group["name"]] = sorted(versions, key=lambda v: v != preferred)
    return groups


def _find(client: DiscoveryClient, group: str, version: str, name: str) -> KopfResource | None:
    path = f"/apis/{group}/{version}" if group else f"/api/{version}"
    lowered = name.lower()
    for entry in client.get_json(path).get("resources") or []:
        plural = entry.get("name", "")
        if "/" in plural:
            continue  # a subresource
        names = {plural, entry.get("singularName") or "", entry.get("kind", "").lower(), *(entry.get("shortNames") or [])}
        if lowered in names:
            return KopfResource(group=group, version=version, plural=plural, kind=entry["kind"],
                                namespaced=bool(entry.get("namespaced", True)))
    return None


# -- attempts --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Attempt:
    """One handler attempt that ended, as inferred from two stored states."""

    handler: str
    retry: int  # kopf's ``retry``: 0 on the first attempt
    cause: HandlerCause | None
    result: ReconcileResult
    error_kind: ErrorKind | None = None
    delay: float | None = None  # seconds until kopf runs the handler again
    error: str | None = None


def infer_attempts(old: HandlerProgressView | None, new: HandlerProgressView,
                   views: Mapping[str, HandlerProgressView], now: float) -> list[Attempt]:
    """The attempts that ended between stored record ``old`` (``None``: none stored) and ``new``:
    one per added retry. Only the last one's outcome is stored; the earlier ones (merged: the watch
    did not deliver the states in between) were failures kopf retried, with errors and delays unknown.
    A different ``started`` is a new cycle for the handler: its retries count from zero."""
    first = old.retries if old is not None and old.started == new.started and old.retries <= new.retries else 0
    if new.retries <= first:
        return []
    merged = [Attempt(new.handler, retry, new.cause, ReconcileResult.ERROR, ErrorKind.TEMPORARY)
              for retry in range(first, new.retries - 1)]
    return [*merged, _last_attempt(new, views, now)]


def _last_attempt(view: HandlerProgressView, views: Mapping[str, HandlerProgressView], now: float) -> Attempt:
    retry = view.retries - 1
    if view.success:
        return Attempt(view.handler, retry, view.cause, ReconcileResult.SUCCESS)
    if view.failure:
        return Attempt(view.handler, retry, view.cause, ReconcileResult.TERMINAL, failure_kind(view),
                       error=view.message)
    kind = retry_kind(view, views)
    # The operator's clock wrote ``delayed``: with clock skew "now" may already be past it.
    delay = max(0.0, view.delayed - now) if view.delayed is not None else 0.0
    result = ReconcileResult.REQUEUE_AFTER if kind == ErrorKind.CHILDREN else ReconcileResult.ERROR
    return Attempt(view.handler, retry, view.cause, result, kind, delay, view.error())


def completing_attempt(view: HandlerProgressView) -> Attempt:
    """The last attempt of a handler whose records kopf purged at the end of a cycle while it was
    unfinished: it ran once more, and the cycle ended (reported as a success: see ``UNSEEN``)."""
    return Attempt(view.handler, view.retries, view.cause, ReconcileResult.SUCCESS)


# -- the event handler -------------------------------------------------------------------------------
@dataclasses.dataclass
class _Seen:
    """What one object stored last time: its handlers' records, and the diff-base each record was
    last written under (a record that vanishes after the diff-base changed ended a cycle)."""

    views: dict[str, HandlerProgressView] = dataclasses.field(default_factory=dict)
    base_at: dict[str, str | None] = dataclasses.field(default_factory=dict)


class ZeroCodeKopf:
    """An informer event handler (``on_add`` / ``on_update`` / ``on_delete``) that reports a kopf
    operator's stored progress on one resource, and a Manager runnable that says the controller
    started. It only reads, so it runs on every replica (``need_leader_election = False``)."""

    need_leader_election = False

    def __init__(self, resource: KopfResource, *, informer: str, observer: Observer | None = None,
                 fmt: ProgressFormat = DEFAULT_FORMAT, clock: Clock | None = None) -> None:
        self.resource = resource
        self.name = resource.controller
        self.informer = informer
        self.fmt = fmt
        self.clock: Clock = clock or RealClock()
        self._obs: Observer = active_observer(observer) or NOOP_OBSERVER
        self._seen: dict[str, _Seen] = {}
        self._warned_prefixes: set[str] = set()
        self._describe(started=False)

    # -- runnable ------------------------------------------------------------------------------
    def start(self) -> None:
        self._describe(started=True)

    def stop(self) -> None:
        self._describe(started=False)

    def _describe(self, *, started: bool) -> None:
        self._obs.on_controller(self.name, watches=[self.informer], workers=0, started=started,
                                mode=ObservationMode.ZERO_CODE, unseen=list(UNSEEN))

    # -- informer events -----------------------------------------------------------------------
    def on_add(self, obj: dict[str, Any]) -> None:
        self._observe(object_key(obj), obj, live=False)

    def on_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        self._observe(object_key(new), new, live=True)

    def on_delete(self, obj: Any) -> None:
        key = object_key(obj)
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        self._observe(key, obj, live=True)  # the last state may carry a purge not seen before
        for handler in self._seen.pop(key, _Seen()).views:
            self._obs.on_progress(self.name, key=key, handler=handler, state=None)

    # -- the diff ------------------------------------------------------------------------------
    def _observe(self, key: str, obj: dict[str, Any], *, live: bool) -> None:
        self._check_prefix(obj)
        now = self.clock.wall()
        views = read_progress(obj, self.fmt)
        seen = self._seen.get(key)
        if seen is None:
            if not views:
                return
            seen = self._seen[key] = _Seen()
        base = diff_base(obj, self.fmt)
        for handler, view in views.items():
            old = seen.views.get(handler)
            if old == view:
                continue  # unchanged (kopf's touch-dummy wake-ups, other writers' changes)
            if live:
                for attempt in infer_attempts(old, view, views, now):
                    self._report_attempt(key, attempt)
            self._report_progress(key, view, now)
            seen.base_at[handler] = base
        deleting = bool((obj.get("metadata") or {}).get("deletionTimestamp"))
        for handler, old in seen.views.items():
            if handler in views:
                continue
            ended_cycle = seen.base_at.get(handler) != base or (deleting and old.cause == HandlerCause.DELETE)
            if not ended_cycle:
                self._obs.on_progress(self.name, key=key, handler=handler, state=None)
            elif not old.finished:
                self._report_attempt(key, completing_attempt(old))
                self._obs.on_progress(self.name, key=key, handler=handler, state=HandlerProgress.SUCCEEDED,
                                      retries=old.failed_attempts, cause=old.cause)
            # A handler that had finished keeps the outcome it stored: the purge changes nothing for it.
            seen.base_at.pop(handler, None)
        seen.views = views
        if not views:
            del self._seen[key]

    def _report_progress(self, key: str, view: HandlerProgressView, now: float) -> None:
        next_at = view.delayed * 1000 if view.delayed is not None and not view.finished else None
        self._obs.on_progress(self.name, key=key, handler=view.handler, state=view.state(now),
                              retries=view.failed_attempts, next_at=next_at, cause=view.cause, error=view.error())

    def _report_attempt(self, key: str, attempt: Attempt) -> None:
        obs, name = self._obs, self.name
        obs.on_queue(name, op=QueueOp.GET, key=key, depth=0)
        obs.on_reconcile_start(name, key=key, worker=0, handler=attempt.handler, cause=attempt.cause,
                               retry=attempt.retry)
        requeue_after = (attempt.delay or 0.0) if attempt.result == ReconcileResult.REQUEUE_AFTER else 0.0
        obs.on_reconcile_end(name, key=key, worker=0, duration=0.0, result=attempt.result,
                             requeue_after=requeue_after, error=attempt.error, handler=attempt.handler,
                             cause=attempt.cause, retry=attempt.retry, delay=attempt.delay,
                             error_kind=attempt.error_kind)
        obs.on_queue(name, op=QueueOp.DONE, key=key, depth=0)
        if attempt.delay:
            obs.on_queue(name, op=QueueOp.ADD_AFTER, key=key, depth=0, delay=attempt.delay)

    def _check_prefix(self, obj: dict[str, Any]) -> None:
        new = foreign_prefixes(obj, self.fmt) - self._warned_prefixes
        if new:
            self._warned_prefixes |= new
            log.warning("%s: objects carry kopf's state under annotation prefix %s, not %s: if that is the "
                        "operator's, pass --kopf-prefix %s", self.name, ", ".join(sorted(new)), self.fmt.prefix,
                        sorted(new)[0])


def setup(manager: Manager, spec: str | KopfResource, *, fmt: ProgressFormat = DEFAULT_FORMAT) -> ZeroCodeKopf:
    """Watch ``spec`` (a resource name, resolved through the Manager's client, or a resolved
    ``KopfResource``) with the Manager's shared informer and report its kopf progress."""
    resource = spec if isinstance(spec, KopfResource) else resolve_resource(manager.factory.client, spec)
    informer = manager.informer_for(resource.api_version, resource.kind)
    handler = ZeroCodeKopf(resource, informer=informer.name, observer=manager.observer, fmt=fmt,
                           clock=manager.clock)
    informer.add_event_handler(on_add=handler.on_add, on_update=handler.on_update, on_delete=handler.on_delete,
                               name="kopf-progress")
    manager.metrics.register_controller(handler.name, 0)
    manager.add_runnable(handler)
    return handler
