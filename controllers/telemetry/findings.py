"""FindingBook: the open findings of one publisher, and when each is published.

A finding (protocol 1.7, record kind ``finding``) states that a key or an informer is stuck or sick:
a hot loop, a key failing again and again, a watch that went silent. The rules that notice them are
``detectors.py``; this module keeps what they found and publishes it the protocol's way:

- a finding is published when it **opens**, again when its ``count``, ``detail`` or ``message``
  change, and when it **closes** (``open: false``, with its last values);
- a change is published at most once per ``FINDING_UPDATE_MS`` per finding: a change within a second
  of the finding's last record is *held*, and the first flush at least a second later publishes it
  (``flush_held``) with the values of then. A hot loop reconciling 50 times a second thus costs a
  record a second, not fifty;
- the open findings are also in their component's entry (``controller/{c}`` or ``informer/{i}``) as
  ``findings``, ``{"{finding}/{subject}": {finding, subject, since, count, message}}``, rewritten with
  each record: what the overview lists without reading the topics. At most ``FINDINGS_MAX`` per
  component, the earliest opened dropped first (and not brought back).

Key findings go to the controller's topic and entry, informer findings to the informer's. The book
does no locking and reads no clock: the telemetry observer calls it under its lock with each call's
time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controllers.schema import (
    FINDING_UPDATE_MS,
    FINDINGS_MAX,
    KEY_FINDINGS,
    ComponentKind,
    FindingKind,
    RecordKind,
    TopicKind,
)

Emit = Callable[[TopicKind, str, dict[str, Any]], None]
"""Publishes a record on the topic of (kind, component name), stamping its ``ts``."""
SetFindings = Callable[[ComponentKind, str, dict[str, Any]], None]
"""Rewrites a component entry's ``findings``."""


@dataclass(slots=True)
class Finding:
    """One open finding: its values now, and what was last published of them."""

    kind: FindingKind
    owner: str  # the controller (or queue) or informer it is about
    subject: str
    since: float
    count: int
    detail: dict[str, Any]
    message: str
    published_at: float
    published: tuple[int, dict[str, Any], str]
    listed: bool | None  # in its component's entry: None until it opens, False once dropped (FINDINGS_MAX)

    @property
    def held(self) -> bool:
        """A change not published yet."""
        return self.published != (self.count, self.detail, self.message)


class FindingBook:
    """The open findings, keyed by (kind, owner, subject); see the module docstring."""

    def __init__(self, emit: Emit, set_findings: SetFindings) -> None:
        self._emit = emit
        self._set_findings = set_findings
        self._open: dict[tuple[FindingKind, str, str], Finding] = {}
        # Per component, its entry's findings in the order they opened (dicts keep insertion order).
        self._entries: dict[tuple[ComponentKind, str], dict[str, dict[str, Any]]] = {}

    def get(self, kind: FindingKind, owner: str, subject: str) -> Finding | None:
        """The open finding, if there is one."""
        return self._open.get((kind, owner, subject))

    def report(self, kind: FindingKind, owner: str, subject: str, *, ts: float, since: float, count: int,
               detail: dict[str, Any], message: str) -> None:
        """The rule holds: open the finding (published now), or update its values (published now, or
        held when its last record is less than a second old). ``since`` counts only when it opens."""
        f = self._open.get((kind, owner, subject))
        if f is None:
            f = self._open[(kind, owner, subject)] = Finding(kind, owner, subject, since, count, detail, message,
                                                             ts, (count, detail, message), listed=None)
            self._publish(f, ts, is_open=True)
            return
        f.count, f.detail, f.message = count, detail, message
        if f.held and ts - f.published_at >= FINDING_UPDATE_MS:
            self._publish(f, ts, is_open=True)

    def close(self, kind: FindingKind, owner: str, subject: str, *, ts: float) -> None:
        """The rule no longer holds: publish the close (a held change goes with it)."""
        f = self._open.pop((kind, owner, subject), None)
        if f is not None:
            self._publish(f, ts, is_open=False)

    def flush_held(self, kind: FindingKind, ts: float) -> None:
        """Publish the held changes of ``kind`` whose last record is at least a second old (in
        (owner, subject) order, as a flush does)."""
        due = [f for f in self._open.values() if f.kind == kind and f.held and ts - f.published_at >= FINDING_UPDATE_MS]
        for f in sorted(due, key=lambda f: (f.owner, f.subject)):
            self._publish(f, ts, is_open=True)

    def open_findings(self, kind: FindingKind) -> list[Finding]:
        """The open findings of ``kind``."""
        return [f for f in self._open.values() if f.kind == kind]

    def _publish(self, f: Finding, ts: float, *, is_open: bool) -> None:
        key_finding = f.kind in KEY_FINDINGS
        topic = TopicKind.CONTROLLER if key_finding else TopicKind.INFORMER
        component = ComponentKind.CONTROLLER if key_finding else ComponentKind.INFORMER
        self._emit(topic, f.owner, {"k": RecordKind.FINDING, "finding": f.kind, "subject": f.subject,
                                    "open": is_open, "since": f.since, "count": f.count, "detail": f.detail,
                                    "message": f.message})
        f.published_at, f.published = ts, (f.count, f.detail, f.message)
        entries = self._entries.setdefault((component, f.owner), {})
        name = f"{f.kind}/{f.subject}"
        if is_open and f.listed is None:  # it opens: listed, the earliest opened dropped when full
            if len(entries) >= FINDINGS_MAX:
                dropped = next(iter(entries))
                del entries[dropped]
                kind, _, subject = dropped.partition("/")
                gone = self._open.get((FindingKind(kind), f.owner, subject))
                if gone is not None:
                    gone.listed = False
            f.listed = True
        elif not f.listed:
            return  # dropped from the entry: it does not come back
        if is_open:
            entries[name] = {"finding": f.kind, "subject": f.subject, "since": f.since, "count": f.count,
                             "message": f.message}
        else:
            del entries[name]
        self._set_findings(component, f.owner, dict(entries))
