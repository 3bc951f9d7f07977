"""Provenance: the triggers each reconcile absorbed, and which of them were the controller's own writes.

A workqueue merges causes: a key added twenty times while it waits is taken once, and an add while
it is being processed only marks it dirty. So a reconciler never learns why it ran (controller-runtime
#1186: "there is no correlation between an event and a single reconcile"). The publisher's observer
sees every cause before the queue merges it, so it keeps them (protocol 1.7, "Provenance,
self-triggering and findings"):

- per controller and request key, the **pending triggers**: every ``event`` mapped to the key, every
  retry (a previous attempt's ``error``, ``panic`` or ``requeue``) and ``requeue_after``. The next
  ``reconcile_start`` of the key takes them all (``take``): exactly what dedup merged and what the
  dirty re-add carried. An event that comes while the key is processed is pending for the attempt
  after, as the queue's dirty set has it;
- per controller, the **written resourceVersions**: the ``rv`` each successful write got back, with
  the key the request path names. An event whose new object has one of them is that write coming
  back (``self``). When every trigger of an attempt is such an event, the attempt is
  ``self_triggered``: the controller is reacting to itself, which is how a reconciler that writes its
  status every time loops (controller-runtime #2831, operator-sdk #3332).

The class holds state only; the telemetry observer calls it under its own lock, in the order the
runtime reported things, and builds the records.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from controllers.schema import (
    RETRIED_RESULTS,
    TRIGGERS_MAX,
    WRITTEN_MAX,
    ControllerEvent,
    ReconcileResult,
    TriggerKind,
)


def written_key(path: str) -> str | None:
    """The key of the object a write's request path names (``/api/v1/namespaces/ns/pods/web/status``
    → ``ns/web``; a cluster-scoped ``/apis/g/v1/things/t`` → ``t``); ``None`` for a collection (a
    create, whose object's name only the answer has) or a path that is not an API path."""
    # A path, as the runtimes report writes (the common case, on every write: no URL parsing), or a URL.
    path = path.partition("?")[0] if path.startswith("/") else urlsplit(path).path
    segments = [unquote(s) if "%" in s else s for s in path.split("/") if s]
    if len(segments) >= 2 and segments[0] == "api":
        rest = segments[2:]
    elif len(segments) >= 3 and segments[0] == "apis":
        rest = segments[3:]
    else:
        return None
    if len(rest) >= 3 and rest[0] == "namespaces":
        return f"{rest[1]}/{rest[3]}" if len(rest) >= 4 else None
    return rest[1] if len(rest) >= 2 else None


@dataclass(slots=True)
class _Pending:
    """One key's triggers since its last attempt started. Invariant: ``count`` ≥ ``len(triggers)``
    (the deque keeps the last ``TRIGGERS_MAX``); ``all_self`` is true while every one of the
    ``count`` triggers was a self event (vacuously true when there are none)."""

    triggers: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=TRIGGERS_MAX))
    count: int = 0
    all_self: bool = True
    # The delay of the key's last add_rate_limited since its current attempt started: a runtime may
    # report it before or after the attempt's result (Python before, client-go after).
    rate_limited: float | None = None


class Provenance:
    """Pending triggers per (controller, key) and written resourceVersions per controller."""

    def __init__(self) -> None:
        self._pending: dict[tuple[str, str], _Pending] = {}
        self._written: dict[str, OrderedDict[str, str | None]] = {}

    # -- self-triggering ---------------------------------------------------------------------------
    def wrote(self, controller: str, *, path: str, code: int, rv: str | None) -> None:
        """A write of ``controller`` was answered: a 2xx answer's ``rv`` is remembered (the last
        ``WRITTEN_MAX``) with the key its path names."""
        if rv is None or not 200 <= code < 300:
            return
        written = self._written.get(controller)
        if written is None:
            written = self._written[controller] = OrderedDict()
        written[rv] = written_key(path)
        written.move_to_end(rv)
        if len(written) > WRITTEN_MAX:
            written.popitem(last=False)

    def is_self(self, controller: str, key: str, rv: str | None) -> bool:
        """Whether object ``key`` at ``rv`` is one ``controller`` wrote (a create's key is unknown:
        its rv alone decides)."""
        written = self._written.get(controller)
        if rv is None or not written or rv not in written:
            return False
        wrote = written[rv]
        return wrote is None or wrote == key

    # -- triggers --------------------------------------------------------------------------------
    def _entry(self, controller: str, key: str) -> _Pending:
        p = self._pending.get((controller, key))
        if p is None:
            p = self._pending[(controller, key)] = _Pending()
        return p

    def _add(self, p: _Pending, trigger: dict[str, Any], *, is_self: bool) -> None:
        p.triggers.append(trigger)
        p.count += 1
        p.all_self = p.all_self and is_self

    def event(self, controller: str, record: dict[str, Any], requests: list[str]) -> dict[str, Any] | None:
        """An ``event`` record mapped to ``requests``: one trigger for each distinct key (the same
        dict, returned, so a caller may annotate it: the span sink adds the span it links to)."""
        if not requests:
            return None
        rv, old_rv = record.get("rv"), record.get("old_rv")
        resync = record["event"] == ControllerEvent.UPDATE and rv is not None and rv == old_rv
        trigger: dict[str, Any] = {"kind": TriggerKind.RESYNC if resync else TriggerKind.EVENT, "ts": record["ts"],
                                   "key": record["key"], "type": record["event"], "source": record.get("source"),
                                   "rv": rv}
        for name in ("diff", "diff_more", "self"):
            if name in record:
                trigger[name] = record[name]
        is_self = trigger.get("self", False)
        for key in dict.fromkeys(requests):  # distinct, in order
            self._add(self._entry(controller, key), trigger, is_self=is_self)
        return trigger

    def result(self, controller: str, key: str, *, ts: float, result: str, requeue_after: float,
               delay: float | None) -> dict[str, Any] | None:
        """The key's attempt ended: a retried result leaves a ``retry`` trigger (its ``delay`` the
        framework's own, else the rate limiter's when known), ``requeue_after`` one of its kind;
        the trigger left is returned (``None`` when none)."""
        trigger: dict[str, Any]
        if result in RETRIED_RESULTS:
            p = self._entry(controller, key)
            trigger = {"kind": TriggerKind.RETRY, "ts": ts, "result": result,
                       "delay": delay if delay is not None else p.rate_limited}
        elif result == ReconcileResult.REQUEUE_AFTER:
            p = self._entry(controller, key)
            trigger = {"kind": TriggerKind.REQUEUE_AFTER, "ts": ts, "delay": requeue_after}
        else:
            p_done = self._pending.get((controller, key))
            if p_done is not None and not p_done.count:
                del self._pending[(controller, key)]  # nothing pending: forget the key
            return None
        self._add(p, trigger, is_self=False)
        return trigger

    def rate_limited(self, controller: str, key: str, delay: float | None) -> None:
        """The controller's queue added ``key`` rate-limited after ``delay``: the delay of the retry
        it answers (reported before or after the attempt's result)."""
        p = self._entry(controller, key)
        p.rate_limited = delay
        for trigger in reversed(p.triggers):  # the latest retry (events may have come since)
            if trigger["kind"] == TriggerKind.RETRY:
                if trigger["delay"] is None:
                    trigger["delay"] = delay
                break

    def take(self, controller: str, key: str) -> tuple[list[dict[str, Any]], int, bool]:
        """The key's attempt starts: its pending triggers (the last ``TRIGGERS_MAX``, oldest first),
        how many there were, and whether the attempt is self-triggered; then none are pending."""
        p = self._pending.get((controller, key))
        if p is None:
            p = self._pending[(controller, key)] = _Pending()
            return [], 0, False
        triggers, count, self_triggered = list(p.triggers), p.count, p.count > 0 and p.all_self
        p.triggers.clear()
        p.count, p.all_self, p.rate_limited = 0, True, None
        return triggers, count, self_triggered
