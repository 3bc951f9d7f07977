"""Detectors: the rules that notice a stuck or sick key or informer, and their thresholds.

Each rule follows the calls a runtime already reports (protocol/README.md, "Provenance,
self-triggering and findings", fixes them and ``protocol/vectors/encode/`` their exact output):

key rules (per controller and request key; published on the controller's topic)
    ``hot_loop``        consecutive ``self_triggered`` attempts (``HOT_LOOP_ATTEMPTS``), broken by an
                        attempt that is not, or by ``HOT_LOOP_QUIET`` s without one. It names the
                        fields its own writes keep changing and what usually fixes that.
    ``failing``         consecutive retried results (error, panic, requeue), with the rate limiter's
                        last delay for the key and the cap it will reach.
    ``terminal``        a terminal error, until the key's next success.
    ``slow_reconcile``  an attempt running longer than ``SLOW_AFTER`` s.
    ``waiting``         a key ready in its queue that no worker took for ``WAITING_AFTER`` s.
informer rules (per informer; published on the informer's topic)
    ``not_synced``      no ``synced`` ``SYNC_TIMEOUT`` s after it started.
    ``watch_silent``    an open watch with no event, bookmark or end for ``SILENT_AFTER`` s.
    ``relist_storm``    ``RELIST_COUNT`` relists within ``RELIST_WINDOW`` s.

The time rules are checked by ``evaluate``, which the publisher runs before every flush, with its
clock: a finding opens at most one flush interval late, and nothing runs between flushes. Ready keys
are kept in a heap by the time they would start waiting too long, so a flush looks at the keys that
are due and not at every queued key.

Thresholds come from ``DetectionConfig``: the protocol's defaults (``DETECT_DEFAULTS``), overridden by
``CTRLSCOPE_DETECT_{NAME}`` environment variables (``CTRLSCOPE_DETECT=off`` turns provenance and
detection off: a benchmark's baseline). A bad value stops the worker with a sentence naming it.

Like the FindingBook, this class does no locking: the telemetry observer calls it under its lock.
"""

from __future__ import annotations

import heapq
import math
import os
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from controllers.clock import Clock, RealClock, wall_ms
from controllers.schema import (
    DETECT_DEFAULTS,
    HOT_LOOP_ADVICE,
    RETRIED_RESULTS,
    FindingKind,
    QueueOp,
    ReconcileResult,
    ReflectorState,
    rate_limiter_max,
)
from controllers.telemetry.field_diff import MANAGED_FIELDS_PATH
from controllers.telemetry.findings import FindingBook

ENV_PREFIX = "CTRLSCOPE_DETECT_"
ENV_SWITCH = "CTRLSCOPE_DETECT"
_OFF = frozenset({"0", "off", "false", "no"})


@dataclass(frozen=True, slots=True)
class DetectionConfig:
    """The detection thresholds (counts, and seconds); defaults are the protocol's."""

    hot_loop_attempts: int = int(DETECT_DEFAULTS["hot_loop_attempts"])
    hot_loop_quiet: float = DETECT_DEFAULTS["hot_loop_quiet"]
    failing_after: int = int(DETECT_DEFAULTS["failing_after"])
    slow_after: float = DETECT_DEFAULTS["slow_after"]
    waiting_after: float = DETECT_DEFAULTS["waiting_after"]
    sync_timeout: float = DETECT_DEFAULTS["sync_timeout"]
    silent_after: float = DETECT_DEFAULTS["silent_after"]
    relist_count: int = int(DETECT_DEFAULTS["relist_count"])
    relist_window: float = DETECT_DEFAULTS["relist_window"]

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], *, source: str = "") -> DetectionConfig:
        """Thresholds by their names (``hot_loop_attempts``...), the rest defaults. ``source`` names
        where a value came from in the error (``CTRLSCOPE_DETECT_``: the environment)."""
        known = {f.name: f for f in fields(cls)}
        parsed: dict[str, Any] = {}
        for name, raw in values.items():
            spec = known.get(name)
            where = f"{source}{name.upper()}={raw!r}" if source else f"{name}={raw!r}"
            if spec is None:
                raise ValueError(f"{where}: no such detection threshold (known: {', '.join(known)})")
            parsed[name] = _threshold(raw, whole=spec.type in (int, "int"), where=where)
        return cls(**parsed)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DetectionConfig | None:
        """From ``CTRLSCOPE_DETECT_{NAME}`` variables; ``None`` when ``CTRLSCOPE_DETECT`` is off."""
        env = os.environ if environ is None else environ
        if env.get(ENV_SWITCH, "").strip().lower() in _OFF:
            return None
        values = {k[len(ENV_PREFIX):].lower(): v for k, v in env.items() if k.startswith(ENV_PREFIX)}
        return cls.from_mapping(values, source=ENV_PREFIX)


def _threshold(raw: Any, *, whole: bool, where: str) -> float | int:
    try:
        value = float(raw.strip() if isinstance(raw, str) else raw)
    except (TypeError, ValueError):
        value = math.nan
    if whole:
        if not (math.isfinite(value) and value.is_integer() and value >= 1):
            raise ValueError(f"{where}: must be a whole number, at least 1")
        return int(value)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{where}: must be a number of seconds greater than 0")
    return value


def number(x: float) -> str:
    """A number as messages write it: the shortest decimal that reads back the same, no fraction
    when whole (``60``, ``0.5``)."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


@dataclass(slots=True)
class _Streak:
    """A key's consecutive self-triggered attempts."""

    count: int = 0
    first: float = 0.0
    last: float = 0.0
    paths: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class _Failures:
    """A key's consecutive retried results, and the rate limiter's last delay for it since the
    streak's first attempt started."""

    count: int = 0
    first: float = 0.0
    last: float = 0.0
    error: str | None = None
    delay: float | None = None


@dataclass(slots=True)
class _Ready:
    """A key in a queue: ready since (wall ms; None: not ready) unless a worker has it."""

    since: float | None = None
    processing: bool = False


@dataclass(slots=True)
class _Informer:
    started: float | None = None  # its informer call (None: not seen)
    synced: bool = False
    stopped: bool = False
    listed: bool = False  # a LIST succeeded: every later one is a relist
    failed_lists: int = 0
    list_error: str | None = None
    relists: deque[float] = field(default_factory=deque)
    last_end: str | None = None
    watching: bool = False
    active: float = 0.0  # the watch's last sign of life: its start, an event, a bookmark
    rv: str | None = None


class Detectors:
    """The rules (see the module docstring), publishing through a FindingBook."""

    def __init__(self, book: FindingBook, config: DetectionConfig | None = None, *, clock: Clock | None = None) -> None:
        self.book = book
        self.config = config or DetectionConfig()
        self.clock = clock or RealClock()
        self._streaks: dict[tuple[str, str], _Streak] = {}
        self._failures: dict[tuple[str, str], _Failures] = {}
        self._running: dict[tuple[str, str], tuple[float, int, str | None]] = {}
        self._ready: dict[tuple[str, str], _Ready] = {}
        self._due: list[tuple[float, str, str, float]] = []  # (deadline, queue, key, ready since): a heap
        self._limiters: dict[str, dict[str, Any] | None] = {}
        self._informers: dict[str, _Informer] = {}

    # -- key rules ---------------------------------------------------------------------------------
    def rate_limiter(self, controller: str, spec: dict[str, Any] | None) -> None:
        """The controller's workqueue limiter (a RateLimiterSpec), for ``failing``'s ``max_delay``."""
        self._limiters[controller] = spec

    def attempt_start(self, controller: str, key: str, *, ts: float, self_triggered: bool,
                      triggers: Iterable[dict[str, Any]], worker: int, handler: str | None) -> None:
        """A ``reconcile_start`` of the key (after its record)."""
        ck = (controller, key)
        streak = self._streaks.get(ck)
        if self_triggered:
            if streak is None:
                streak = self._streaks[ck] = _Streak(first=ts)
            streak.count += 1
            streak.last = ts
            for trigger in triggers:
                streak.paths.update(trigger.get("diff") or ())
            if streak.count >= self.config.hot_loop_attempts:
                self._report_hot_loop(controller, key, streak, ts)
        elif streak is not None:
            self._break_streak(controller, key, ts)
        failures = self._failures.get(ck)
        if failures is not None and not failures.count:
            failures.delay = None  # a new streak may begin: only its own retries' delays count
        self._running[ck] = (ts, worker, handler)

    def _report_hot_loop(self, controller: str, key: str, s: _Streak, ts: float) -> None:
        # metadata.managedFields changes with every write (the API server stamps the manager's entry
        # with the write's time): it says nothing about what the loop changes, so it is neither listed
        # (unless it is all that changed) nor judged.
        judged = [p for p in s.paths if p != MANAGED_FIELDS_PATH]
        listed = {p: n for p, n in s.paths.items() if p in judged} if judged else s.paths
        fields_ = [p for p, _ in sorted(listed.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
        status_only = bool(judged) and all(p == "status" or p.startswith("status.") for p in judged)
        metadata = bool(judged) and all(p == "metadata" or p.startswith("metadata.") for p in judged)
        advice = HOT_LOOP_ADVICE["status" if status_only else "metadata" if metadata else "other"]
        rate = None if s.last == s.first else (s.count - 1) / ((s.last - s.first) / 1000)
        message = f"{s.count} reconciles in a row triggered by its own writes"
        if fields_:
            message += f"; changing: {', '.join(fields_)}"
        self.book.report(FindingKind.HOT_LOOP, controller, key, ts=ts, since=s.first, count=s.count,
                         detail={"rate": rate, "fields": fields_, "status_only": status_only, "advice": advice},
                         message=message)

    def _break_streak(self, controller: str, key: str, ts: float) -> None:
        del self._streaks[(controller, key)]
        self.book.close(FindingKind.HOT_LOOP, controller, key, ts=ts)

    def attempt_end(self, controller: str, key: str, *, ts: float, result: str, error: str | None) -> None:
        """A ``reconcile`` of the key (after its record)."""
        ck = (controller, key)
        failures = self._failures.get(ck)
        if result in RETRIED_RESULTS:
            if failures is None:
                failures = self._failures[ck] = _Failures()
            if not failures.count:
                failures.first = ts
            failures.count += 1
            failures.last, failures.error = ts, error
            self._report_failing(controller, key, failures, ts)
        elif failures is not None:
            del self._failures[ck]
            self.book.close(FindingKind.FAILING, controller, key, ts=ts)
        if result == ReconcileResult.TERMINAL:
            open_ = self.book.get(FindingKind.TERMINAL, controller, key)
            self.book.report(FindingKind.TERMINAL, controller, key, ts=ts, since=ts,
                             count=open_.count + 1 if open_ is not None else 1, detail={"error": error},
                             message="terminal error" + (f": {error}" if error else ""))
        elif result == ReconcileResult.SUCCESS:
            self.book.close(FindingKind.TERMINAL, controller, key, ts=ts)
        if self._running.pop(ck, None) is not None:
            self.book.close(FindingKind.SLOW_RECONCILE, controller, key, ts=ts)

    def _report_failing(self, controller: str, key: str, f: _Failures, ts: float) -> None:
        if f.count < self.config.failing_after:
            return
        detail = {"since_first_failure_s": (f.last - f.first) / 1000, "last_error": f.error, "next_delay": f.delay,
                  "max_delay": rate_limiter_max(self._limiters.get(controller))}
        message = f"failed {f.count} times in a row" + (f": {f.error}" if f.error else "")
        self.book.report(FindingKind.FAILING, controller, key, ts=ts, since=f.first, count=f.count, detail=detail,
                         message=message)

    def queue_op(self, queue: str, op: str, key: str, *, ts: float, delay: float | None) -> None:
        """A ``queue`` record (after it): the ``waiting`` rule, and a retry's delay for ``failing``."""
        if op == QueueOp.SHUTDOWN:
            for qk in [qk for qk in self._ready if qk[0] == queue]:
                del self._ready[qk]
            return
        qk = (queue, key)
        ready = self._ready.get(qk)
        if op in (QueueOp.ADD, QueueOp.REQUEUE, QueueOp.ADD_AFTER, QueueOp.ADD_RATE_LIMITED):
            at = ts if op in (QueueOp.ADD, QueueOp.REQUEUE) else ts + (delay or 0.0) * 1000
            if ready is None:
                ready = self._ready[qk] = _Ready()
            if ready.since is None or at < ready.since:
                self._ready_since(queue, key, ready, at)
            if op == QueueOp.ADD_RATE_LIMITED:
                failures = self._failures.get(qk)
                if failures is None:
                    failures = self._failures[qk] = _Failures()
                failures.delay = delay
                if self.book.get(FindingKind.FAILING, queue, key) is not None:
                    self._report_failing(queue, key, failures, ts)
        elif op == QueueOp.GET:
            if ready is None:
                ready = self._ready[qk] = _Ready()
            ready.since, ready.processing = None, True
            self.book.close(FindingKind.WAITING, queue, key, ts=ts)
        elif op == QueueOp.DONE and ready is not None:
            ready.processing = False
            if ready.since is None:
                del self._ready[qk]
            elif ready.since < ts:
                self._ready_since(queue, key, ready, ts)  # not waiting while it was being processed

    def _ready_since(self, queue: str, key: str, ready: _Ready, at: float) -> None:
        ready.since = at
        heapq.heappush(self._due, (at + self.config.waiting_after * 1000, queue, key, at))

    # -- informer rules ------------------------------------------------------------------------
    def _informer(self, informer: str) -> _Informer:
        i = self._informers.get(informer)
        if i is None:
            i = self._informers[informer] = _Informer()
        return i

    def informer(self, informer: str, *, ts: float) -> None:
        """An ``informer`` call: it (re)starts; its open findings close and its rules start again."""
        for kind in (FindingKind.NOT_SYNCED, FindingKind.WATCH_SILENT, FindingKind.RELIST_STORM):
            self.book.close(kind, informer, informer, ts=ts)
        self._informers[informer] = _Informer(started=ts)

    def list(self, informer: str, *, ts: float, error: str | None) -> None:
        """A ``list`` record (after it)."""
        i = self._informer(informer)
        if error is not None:
            i.failed_lists += 1
            i.list_error = error
            if self.book.get(FindingKind.NOT_SYNCED, informer, informer) is not None:
                self._report_not_synced(informer, i, ts)
        if i.listed:  # a retry of the initial LIST is not a relist: not_synced says that story
            i.relists.append(ts)
            self._relists(informer, i, ts)
        elif error is None:
            i.listed = True

    def _report_not_synced(self, informer: str, i: _Informer, ts: float) -> None:
        message = f"not synced {number(self.config.sync_timeout)} s after it started"
        if i.list_error is not None:
            message += f"; last LIST error: {i.list_error}"
        self.book.report(FindingKind.NOT_SYNCED, informer, informer, ts=ts, since=i.started or ts,
                         count=i.failed_lists, detail={"last_error": i.list_error}, message=message)

    def _relists(self, informer: str, i: _Informer, ts: float) -> None:
        """Slide the relist window to ``ts``; open, update or close the storm."""
        start = ts - self.config.relist_window * 1000
        while i.relists and i.relists[0] < start:
            i.relists.popleft()
        count = len(i.relists)
        if count >= self.config.relist_count:
            self.book.report(FindingKind.RELIST_STORM, informer, informer, ts=ts, since=i.relists[0], count=count,
                             detail={"last_end": i.last_end},
                             message=f"{count} relists within {number(self.config.relist_window)} s")
        else:
            self.book.close(FindingKind.RELIST_STORM, informer, informer, ts=ts)

    def watch_start(self, informer: str, *, ts: float, rv: str | None) -> None:
        i = self._informer(informer)
        i.watching, i.active, i.rv = True, ts, rv
        self.book.close(FindingKind.WATCH_SILENT, informer, informer, ts=ts)

    def watch_alive(self, informer: str, *, ts: float, rv: str | None) -> None:
        """A watch event or a bookmark: the watch is not silent."""
        i = self._informer(informer)
        i.active, i.rv = ts, rv
        self.book.close(FindingKind.WATCH_SILENT, informer, informer, ts=ts)

    def watch_end(self, informer: str, *, ts: float, reason: str) -> None:
        i = self._informer(informer)
        i.watching, i.last_end = False, reason
        self.book.close(FindingKind.WATCH_SILENT, informer, informer, ts=ts)

    def reflector_state(self, informer: str, *, ts: float, state: str) -> None:
        if state in (ReflectorState.SYNCED, ReflectorState.STOPPED):
            i = self._informer(informer)
            if state == ReflectorState.SYNCED:
                i.synced = True
            else:
                i.stopped = True
            self.book.close(FindingKind.NOT_SYNCED, informer, informer, ts=ts)

    # -- at flush ------------------------------------------------------------------------------------
    def evaluate(self, now: float | None = None) -> None:
        """The time rules and the held changes, in FindingKind order (a flush runs this first)."""
        now = wall_ms(self.clock) if now is None else now
        cfg, book = self.config, self.book
        quiet = cfg.hot_loop_quiet * 1000
        for controller, key in sorted(ck for ck, s in self._streaks.items() if now - s.last >= quiet):
            self._break_streak(controller, key, now)
        book.flush_held(FindingKind.HOT_LOOP, now)
        book.flush_held(FindingKind.FAILING, now)
        book.flush_held(FindingKind.TERMINAL, now)
        slow = cfg.slow_after * 1000
        for (controller, key), (started, worker, handler) in sorted(self._running.items()):
            if now - started >= slow and book.get(FindingKind.SLOW_RECONCILE, controller, key) is None:
                book.report(FindingKind.SLOW_RECONCILE, controller, key, ts=now, since=started, count=1,
                            detail={"worker": worker, "handler": handler},
                            message=f"reconciling for more than {number(cfg.slow_after)} s")
        book.flush_held(FindingKind.SLOW_RECONCILE, now)
        due: list[tuple[str, str, float]] = []
        while self._due and self._due[0][0] <= now:
            _, queue, key, since = heapq.heappop(self._due)
            ready = self._ready.get((queue, key))
            if ready is not None and not ready.processing and ready.since == since:
                due.append((queue, key, since))
        for queue, key, since in sorted(due):
            book.report(FindingKind.WAITING, queue, key, ts=now, since=since, count=1, detail={"queue": queue},
                        message=f"queued for more than {number(cfg.waiting_after)} s without a worker taking it")
        book.flush_held(FindingKind.WAITING, now)
        informers = sorted(self._informers.items())
        for name, i in informers:
            if (i.started is not None and not i.synced and not i.stopped and now - i.started >= cfg.sync_timeout * 1000
                    and book.get(FindingKind.NOT_SYNCED, name, name) is None):
                self._report_not_synced(name, i, now)
        book.flush_held(FindingKind.NOT_SYNCED, now)
        for name, i in informers:
            if (i.watching and now - i.active >= cfg.silent_after * 1000
                    and book.get(FindingKind.WATCH_SILENT, name, name) is None):
                book.report(FindingKind.WATCH_SILENT, name, name, ts=now, since=i.active, count=1, detail={"rv": i.rv},
                            message=f"watch silent for more than {number(cfg.silent_after)} s: no event, bookmark or end")
        book.flush_held(FindingKind.WATCH_SILENT, now)
        for name, i in informers:
            if i.relists:
                self._relists(name, i, now)
        book.flush_held(FindingKind.RELIST_STORM, now)

