"""Telemetry protocol v1 in code: the one definition of every name a publisher and the dashboard share.

``protocol/README.md`` is the language-neutral specification; this module is its Python spelling, and
``tests/protocol/test_spec_tables.py`` fails when the two disagree. Everything a runtime written in
another language must know (a Go controller, a kopf operator) is here and in ``protocol/``:

- the protocol version a frame carries (``"v": "MAJOR.MINOR"``), and what a reader does with others;
- the topic layout (``w/{worker}/{kind}/{name}`` and the few global topics) with builders and a parser;
- the vocabulary of records: their kinds (``"k"``) and the closed sets of values their fields take
  (queue ops, reconcile results, delta types, watch event types, watch-end reasons, ...);
- the queue item model (``fold_queue_op``): how a topic's per-key queue state follows from its
  records, which the Python publisher, the Go publisher and the protocol vectors all use.

Why ``StrEnum``: a member *is* its wire string (``QueueOp.ADD == "add"``), so records stay plain
JSON-ready dicts on the hot path, while control flow compares members, never free-form strings.

This module imports nothing from the runtime, the telemetry publisher or Django: the runtime's
observer interface (``controllers/observer.py``) and the dashboard both depend on it, never the reverse.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

PROTOCOL_MAJOR = 1
PROTOCOL_MINOR = 7
PROTOCOL_VERSION = f"{PROTOCOL_MAJOR}.{PROTOCOL_MINOR}"
"""What every frame says in ``"v"``. A reader speaks one major version: frames of another major are
not interpreted (the dashboard shows a notice); a newer minor only adds optional fields and record
kinds, which readers of an older minor ignore."""


_VERSION = re.compile(r"([0-9]+)(?:\.([0-9]+))?")


def version_major(version: Any) -> int | None:
    """The major number of a ``"MAJOR.MINOR"`` version; ``1`` for a frame without ``"v"`` (published
    before the protocol was versioned: it is v1), ``None`` for anything unreadable. The same rule as
    ``ctrlscopeProtocol.major`` in the browser (``_VERSION``, with ASCII digits only)."""
    if version is None:
        return PROTOCOL_MAJOR
    m = _VERSION.fullmatch(version) if isinstance(version, str) else None
    return int(m.group(1)) if m else None


# -- records ------------------------------------------------------------------------------------------
INFORMER_SCOPE_FIELDS = ("namespace", "label_selector", "field_selector", "metadata_only", "transform")
"""v1.3: what may narrow an informer, as optional fields of its ``informer`` record and component:
``namespace`` (one namespace, not all), ``label_selector`` / ``field_selector`` (the server's syntax,
as sent), ``metadata_only`` (true: the cache holds ``PartialObjectMetadata``) and ``transform`` (what
changes objects before they are cached, named for people, e.g. "strip managedFields"). Absent: not
narrowed that way."""


def informer_scope_fields(scope: dict[str, Any] | None) -> dict[str, Any]:
    """The ``INFORMER_SCOPE_FIELDS`` of ``scope`` that say something (set, and of the right type)."""
    if not scope:
        return {}
    out: dict[str, Any] = {}
    for field in INFORMER_SCOPE_FIELDS:
        value = scope.get(field)
        if field == "metadata_only":
            if value is True:
                out[field] = True
        elif isinstance(value, str) and value:
            out[field] = value
    return out

class RecordKind(StrEnum):
    """A record's ``"k"``: what happened. Fields per kind are in ``protocol/schema/records/``."""

    # informer topics
    INFORMER = "informer"  # an informer started (its FIFO model and resync period)
    LIST = "list"  # a LIST (initial list or relist) finished
    WATCH_START = "watch_start"
    WATCH = "watch"  # one watch event arrived
    BOOKMARK = "bookmark"
    WATCH_END = "watch_end"
    BACKOFF = "backoff"  # the reflector waits before listing or watching again
    STATE = "state"  # the reflector's state changed (ReflectorState)
    FIFO = "fifo"  # a delta was queued in / popped from the DeltaFIFO
    HANDLER = "handler"  # an event handler ran
    # watcher topics (v1.6; also watch_start, watch, watch_end and state)
    WATCHER = "watcher"  # a raw watch loop started (its resource and what it does when its stream ends)
    READ = "read"  # the watch loop read an object from the API server (a GET: it has no cache)
    # queue topics
    QUEUE = "queue"  # one workqueue operation (QueueOp)
    # controller topics
    EVENT = "event"  # a watched object's event reached a controller (mapped or filtered)
    RECONCILE_START = "reconcile_start"
    RECONCILE = "reconcile"  # Reconcile returned or raised (ReconcileResult)
    WRITE = "write"  # an API write made from a Reconcile
    LEADER = "leader"  # leader election changed (on the leader- pseudo-controller topic)
    LOG = "log"  # v1.1: a line the controller logged about one object (kopf's object loggers)
    PROGRESS = "progress"  # v1.1: one handler's stored progress on an object (kopf's annotations)
    FINDING = "finding"  # v1.7: a stuck or sick key or informer, stated (FindingKind); also on informer topics
    # other topics
    METRICS = "metrics"  # a metrics sample (w/{worker}/metrics)
    SETUP_ERROR = "setup_error"  # a controller the worker could not start (w/{worker}/errors)
    FAULT = "fault"  # an injected fault (cluster/faults)
    NARRATION = "narration"  # a scenario's narration line (scenarios)
    REPLAY = "replay"  # a replayed recording's marker


class WatchEventType(StrEnum):
    """A watch event's ``type`` as the API server sends it (client-go ``watch.EventType``)."""

    ADDED = "ADDED"
    MODIFIED = "MODIFIED"
    DELETED = "DELETED"
    BOOKMARK = "BOOKMARK"
    ERROR = "ERROR"


class DeltaType(StrEnum):
    """What a DeltaFIFO delta records (client-go ``DeltaType``): distinct from WatchEventType."""

    ADDED = "Added"
    UPDATED = "Updated"
    DELETED = "Deleted"
    REPLACED = "Replaced"
    SYNC = "Sync"


class FifoOp(StrEnum):
    QUEUED = "queued"
    POPPED = "popped"


class HandlerEvent(StrEnum):
    """Which ResourceEventHandler method ran (OnAdd / OnUpdate / OnDelete)."""

    ADD = "add"
    UPDATE = "update"
    DELETE = "delete"


class HandlerOutcome(StrEnum):
    OK = "ok"
    ERROR = "error"


class ReflectorState(StrEnum):
    LISTING = "listing"
    RELISTING = "relisting"
    WATCHING = "watching"
    BACKING_OFF = "backing-off"
    SYNCED = "synced"
    STOPPED = "stopped"


class WatchEndReason(StrEnum):
    """Why a watch ended (``watch_end`` record ``reason``; the text of an error is in ``error``)."""

    CLOSED = "closed"  # the server ended it normally (timeout): the reflector watches again
    EXPIRED = "expired"  # 410 Gone: the resourceVersion is too old, relist
    TOO_MANY_REQUESTS = "429"  # throttled: back off, then watch again
    STOPPED = "stopped"  # the informer is stopping
    INITIAL_EVENTS_INCOMPLETE = "initial events incomplete"  # a WatchList stream ended before its end bookmark
    VERY_SHORT = "very short watch"  # closed at once with no event: relist after backoff, as upstream
    ERROR = "error"  # an error status event or a broken stream


class WatcherVariant(StrEnum):
    """v1.6: what a raw watch loop (a program's own ``Watch`` loop, no informer) does when its watch
    stream ends (``watcher`` record and component ``variant``). None of them relists on 410 Expired:
    that is what a reflector adds."""

    STOPS_ON_END = "stops-on-end"  # its for-loop returns when the server closes the watch: it stops watching
    RESTART_FROM_EMPTY = "restart-from-empty"  # watches again from resourceVersion "": every object arrives as ADDED again
    RESTART_FROM_LAST = "restart-from-last"  # watches again from its last resourceVersion; a 410 is an error like any other


class QueueOp(StrEnum):
    """A ``queue`` record's ``op`` (client-go workqueue operations, split by outcome)."""

    ADD = "add"  # the key was queued
    DEDUP = "dedup"  # already queued (or waiting): the add is absorbed
    DEFER = "defer"  # being processed: marked dirty, queued again at done
    GET = "get"  # a worker took it (duration: seconds since the first unprocessed add)
    DONE = "done"  # the worker finished (duration: seconds since get)
    REQUEUE = "requeue"  # done put a key that was added while processing back in the FIFO
    ADD_AFTER = "add_after"  # queued after ``delay`` seconds
    ADD_RATE_LIMITED = "add_rate_limited"  # queued after the rate limiter's ``delay``; ``requeues`` includes this one
    FORGET = "forget"  # the rate limiter forgot the key (requeues back to 0)
    SHUTDOWN = "shutdown"  # the queue shut down (key is empty)


QUEUE_ADDS = frozenset({QueueOp.ADD, QueueOp.DEDUP, QueueOp.DEFER, QueueOp.ADD_AFTER, QueueOp.ADD_RATE_LIMITED})
"""Ops that are an Add by someone (an event, a retry, a requeue request): the queue's input rate."""


class RateLimiterType(StrEnum):
    """v1.5: which kind of limiter a RateLimiterSpec describes (client-go ``default_rate_limiters.go``).

    A controller component's ``rate_limiter`` describes its workqueue's limiter, so that a reader can
    say which part chose a retry's delay and what the next one will be (``rate_limiter_step``)."""

    EXPONENTIAL = "exponential"  # per key: ``base`` s doubled per requeue (the n-th waits base·2^(n-1)), at most ``max``
    FAST_SLOW = "fast_slow"  # per key: ``fast`` s for the first ``fast_attempts`` requeues, then ``slow`` s
    BUCKET = "bucket"  # the whole queue's token bucket: ``qps`` retries/s after a ``burst``; 0 while tokens last
    MAX_OF = "max_of"  # the longest delay of its limiters (``of``)
    OTHER = "other"  # a limiter the publisher cannot describe (``name``: what it is)


class ReconcileResult(StrEnum):
    """controller-runtime's ``controller_runtime_reconcile_total`` result labels, plus panic."""

    SUCCESS = "success"
    ERROR = "error"
    REQUEUE = "requeue"
    REQUEUE_AFTER = "requeue_after"
    TERMINAL = "terminal"  # a TerminalError: not retried
    PANIC = "panic"  # an unexpected exception (counted as an error too)


FAILED_RESULTS = frozenset({ReconcileResult.ERROR, ReconcileResult.TERMINAL, ReconcileResult.PANIC})

RETRIED_RESULTS = frozenset({ReconcileResult.ERROR, ReconcileResult.PANIC, ReconcileResult.REQUEUE})
"""v1.7: results the workqueue retries with the rate limiter's backoff: each adds a ``retry`` trigger
to the key's next attempt, and consecutive ones make a ``failing`` finding."""


class TriggerKind(StrEnum):
    """v1.7: what one trigger of an attempt was (``reconcile_start`` ``triggers`` entries ``kind``):
    the causes a workqueue's dedup merges, recorded by the publisher's observer layer."""

    EVENT = "event"  # a watched object's event mapped to the key (an ``event`` record)
    RESYNC = "resync"  # an update whose resourceVersion did not change: an informer resync
    RETRY = "retry"  # the key's previous attempt failed (error, panic) or asked to be requeued
    REQUEUE_AFTER = "requeue_after"  # the key's previous attempt asked to run again after ``delay`` s


class FindingKind(StrEnum):
    """v1.7: what a ``finding`` record states about a key or an informer (stuck or sick). The rules
    and their thresholds (``DETECT_DEFAULTS``) are in protocol/README.md, "Findings"."""

    HOT_LOOP = "hot_loop"  # the key's last attempts were all triggered by its own writes
    FAILING = "failing"  # the key failed several attempts in a row (retried with backoff)
    TERMINAL = "terminal"  # the key's attempt ended with a terminal error (not retried)
    SLOW_RECONCILE = "slow_reconcile"  # an attempt of the key has been running too long
    WAITING = "waiting"  # the key is ready in the queue and no worker has taken it for too long
    NOT_SYNCED = "not_synced"  # the informer has not synced long after it started
    WATCH_SILENT = "watch_silent"  # the informer's open watch has said nothing for too long
    RELIST_STORM = "relist_storm"  # the informer relisted too often in a short window


KEY_FINDINGS = frozenset({FindingKind.HOT_LOOP, FindingKind.FAILING, FindingKind.TERMINAL,
                          FindingKind.SLOW_RECONCILE, FindingKind.WAITING})
"""v1.7: findings about a key, published on the controller's topic (the others are an informer's)."""

DETECT_DEFAULTS: dict[str, float] = {
    "hot_loop_attempts": 3,  # consecutive self-triggered attempts that make a hot loop
    "hot_loop_quiet": 60.0,  # s without an attempt that end a hot loop
    "failing_after": 5,  # consecutive retried results that make a key failing
    "slow_after": 60.0,  # s an attempt may run
    "waiting_after": 60.0,  # s a ready key may wait for a worker
    "sync_timeout": 60.0,  # s an informer may take to sync
    "silent_after": 300.0,  # s an open watch may go without an event, a bookmark or its end
    "relist_count": 3,  # relists within relist_window that make a storm
    "relist_window": 60.0,  # s
}
"""v1.7: the detection thresholds and their defaults (env ``CTRLSCOPE_DETECT_{NAME}`` upper case);
the counts are integers, the others seconds."""

TRIGGERS_MAX = 20
"""v1.7: a ``reconcile_start`` lists at most the last this many of its triggers (``trigger_count``
says how many there were)."""
DIFF_MAX_PATHS = 16
"""v1.7: an event's ``diff`` lists at most this many paths (``diff_more``: how many more differ)."""
DIFF_MAX_DEPTH = 6
"""v1.7: a diff path has at most this many segments (deeper differences are reported at that depth)."""
WRITTEN_MAX = 1000
"""v1.7: per controller, how many successful writes' resourceVersions are remembered to recognise
their events coming back (self-triggering)."""
FINDINGS_MAX = 100
"""v1.7: a component entry's ``findings`` holds at most this many open findings (oldest opened
dropped first)."""
FINDING_UPDATE_MS = 1000
"""v1.7: an open finding is published again at most once per this many ms."""

HOT_LOOP_ADVICE = {
    "status": ("Its own status writes re-trigger it: skip the write when the status is unchanged, "
               "or filter status-only updates with a predicate (GenerationChangedPredicate)."),
    "metadata": ("Its own metadata writes re-trigger it: write labels, annotations and finalizers only "
                 "when they change (a timestamp in an annotation changes every time)."),
    "other": ("Its own writes re-trigger it: compare before writing and write only what changed, "
              "or filter those updates with a predicate."),
}
"""v1.7: a ``hot_loop`` finding's ``detail.advice``: ``status`` when every changing field is under
``status``, ``metadata`` when every one is under ``metadata``, else ``other``."""


class ErrorKind(StrEnum):
    """v1.1: how a failed handler attempt's error is treated (``reconcile`` record ``error_kind``), for
    frameworks that retry a handler on their own schedule (kopf) rather than through a workqueue."""

    TEMPORARY = "temporary"  # a TemporaryError: retried after its own ``delay``
    EXCEPTION = "exception"  # any other exception: retried after the handler's fixed backoff
    PERMANENT = "permanent"  # a PermanentError: never retried
    TIMEOUT = "timeout"  # the handler ran out of its time budget: given up
    RETRIES = "retries"  # the handler ran out of its retries: given up
    IGNORED = "ignored"  # an exception the framework logs and ignores (kopf's @on.event handlers)
    CHILDREN = "children"  # sub-handlers are unfinished: the parent runs again soon


class HandlerCause(StrEnum):
    """v1.1: why a handler ran (``reconcile_start``/``reconcile``/``progress`` record ``cause``)."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    RESUME = "resume"  # the operator (re)started and found the object
    FIELD = "field"  # a field handler: one field of the object changed
    EVENT = "event"  # a raw watch-event handler (kopf @on.event: no retries, no progress)
    TIMER = "timer"  # a periodic timer
    DAEMON = "daemon"  # a long-running daemon per object
    INDEX = "index"  # an indexing handler
    ACTIVITY = "activity"  # an operator-level activity: startup, cleanup, login, probe
    ADMISSION = "admission"  # an admission webhook


class HandlerProgress(StrEnum):
    """v1.1: where one handler of one object is (the controller state's ``handlers`` entries)."""

    PENDING = "pending"  # wanted for the object's current cause, not run yet
    RUNNING = "running"
    RETRYING = "retrying"  # failed, will run again at ``next_at``
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # failed permanently: will not run again for this cause


class LogLevel(StrEnum):
    """v1.1: a ``log`` record's ``level`` (Python logging's level names, lower case)."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


class ObservationMode(StrEnum):
    """v1.1: how a controller is seen (its component's ``mode``): from inside the process running it,
    or from outside, from what it stores on the objects it handles."""

    IN_PROCESS = "in-process"
    ZERO_CODE = "zero-code"


class WriteMode(StrEnum):
    """v1.2: whether a worker may write to its cluster (its ``cluster`` component's ``writes``).
    Read-only is the default anywhere but the simulated cluster (``--allow-writes`` lifts it)."""

    ALLOWED = "allowed"
    READ_ONLY = "read-only"


class WriteRefusal(StrEnum):
    """v1.4: why a worker refused one of its own writes (``write`` record ``refused``). Nothing was
    sent, so the write is neither an API write nor a failed one: readers count it apart."""

    READ_ONLY = "read-only"  # the worker only observes (WriteMode read-only): --allow-writes lifts it


class ControllerEvent(StrEnum):
    """An ``event`` record's ``event``: the controller-runtime event handler method that ran."""

    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    GENERIC = "generic"


class ComponentKind(StrEnum):
    """An entry of ``w/{worker}/components`` state is keyed ``{kind}/{name}``."""

    WORKER = "worker"  # the publisher itself: runtime label and protocol version
    INFORMER = "informer"
    CONTROLLER = "controller"
    LEASE = "lease"
    CLUSTER = "cluster"
    WATCHER = "watcher"  # v1.6: a raw watch loop (no cache)


class QueueItemState(StrEnum):
    """A queue topic's state value ``s`` per key (see ``fold_queue_op``)."""

    QUEUED = "queued"  # in the FIFO, ready for a worker
    PROCESSING = "processing"  # a worker has it
    WAITING = "waiting"  # scheduled to be added back at ``ready_at``
    IDLE = "idle"  # nowhere, but the rate limiter still counts its requeues


class ResyncReason(StrEnum):
    """Why the dashboard's websocket replaces a topic's state with a fresh snapshot."""

    WORKER_RESET = "worker-reset"  # the publisher rewrote the snapshot (restart, epoch change, overflow)
    SLOW_CLIENT = "slow-client"  # the browser fell too far behind
    RETENTION = "retention"  # the stream was trimmed past the client's position
    EPOCH_CHANGED = "epoch-changed"  # Redis lost its data since the client's cursor
    STREAM_MISSING = "stream-missing"
    UNKNOWN_POSITION = "unknown-position"
    REDIS_RECONNECTED = "redis-reconnected"


class Runtime(StrEnum):
    """Which runtime a worker runs: only a label on the page; the dashboard treats all alike."""

    PYTHON = "python"
    GO = "go"
    KOPF = "kopf"


class Liveness(StrEnum):
    """Whether a worker publishes now: the one rule (``worker_liveness``) every reader applies, written
    in ``protocol/redis-layout.md`` ("Liveness") and fixed by ``protocol/vectors/liveness/``."""

    LIVE = "live"  # its newest run's presence entry is fresh and not stopped (no entry: a recent frame)
    STOPPED = "stopped"  # its newest run stopped: cleanly (``stopped`` set) or silently (``seen`` too old)
    STALE = "stale"  # it keeps no presence entry, and its last frame is too old (or there is none)


# -- topics -------------------------------------------------------------------------------------------
class TopicKind(StrEnum):
    """The kind segment of a worker topic."""

    INFORMER = "informer"  # w/{worker}/informer/{name}: records + the cache as compact summaries
    QUEUE = "queue"  # w/{worker}/queue/{name}: records + per-key queue item state
    CONTROLLER = "controller"  # w/{worker}/controller/{name}: records + per-key last reconcile
    STATUS = "status"  # w/{worker}/status/{table}: state only, rows a controller reports
    COMPONENTS = "components"  # w/{worker}/components: state only, one entry per component
    METRICS = "metrics"  # w/{worker}/metrics: one sample record a second + latest state
    ERRORS = "errors"  # w/{worker}/errors: setup_error records
    WATCHER = "watcher"  # v1.6: w/{worker}/watcher/{name}: a raw watch loop's records, no state


NAMED_KINDS = frozenset({TopicKind.INFORMER, TopicKind.QUEUE, TopicKind.CONTROLLER, TopicKind.STATUS,
                         TopicKind.WATCHER})
"""Worker topic kinds that take a name segment; the others are one topic per worker."""

WORKER_PREFIX = "w/"
LEADER_PREFIX = "leader-"
"""``w/{worker}/controller/leader-{lock}``: the leader election of a lock, shown like a controller."""
FAULTS_TOPIC = "cluster/faults"
SCENARIOS_TOPIC = "scenarios"
SYNTHETIC_TOPIC = "synthetic"
SCOREBOARD_TABLE = "podset-scoreboard"
"""The status table a scenario banner shows (``w/{worker}/status/scoreboard``)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9:._@-]")
SEGMENT_PATTERN = r"[A-Za-z0-9:._@-]{1,120}"
TOPIC_SEGMENT = re.compile(rf"^{SEGMENT_PATTERN}$")
"""A worker or component name as ``topic_part`` makes it (no "/": one URL segment)."""
TOPIC_PATTERN = r"[A-Za-z0-9][A-Za-z0-9:/._@-]{0,199}"
TOPIC = re.compile(rf"^{TOPIC_PATTERN}$")
"""Any topic name a reader accepts."""
_WORKER_TOPIC = re.compile(rf"^w/({SEGMENT_PATTERN})/([a-z]+)(?:/({SEGMENT_PATTERN}))?$")


def topic_part(name: str) -> str:
    """A name made safe for one topic segment (letters, digits and :._@- kept, "/" and others → "_")."""
    return _UNSAFE.sub("_", name)[:120] or "_"


def worker_topic(worker: str, kind: TopicKind, name: str | None = None) -> str:
    """``w/{worker}/{kind}[/{name}]`` from raw names (each made safe with ``topic_part``)."""
    base = f"{WORKER_PREFIX}{topic_part(worker)}/{kind}"
    if kind in NAMED_KINDS:
        if name is None:
            raise ValueError(f"a {kind} topic needs a name")
        return f"{base}/{topic_part(name)}"
    if name is not None:
        raise ValueError(f"a {kind} topic has no name")
    return base


def worker_topic_prefix(worker: str, kind: TopicKind) -> str:
    """What every topic of one named kind of a worker starts with (``w/{worker}/informer/``)."""
    if kind not in NAMED_KINDS:
        raise ValueError(f"{kind} topics have no name")
    return f"{WORKER_PREFIX}{topic_part(worker)}/{kind}/"


@dataclass(frozen=True, slots=True)
class WorkerTopic:
    """A parsed worker topic."""

    worker: str
    kind: TopicKind
    name: str | None = None

    @property
    def leader_lock(self) -> str | None:
        """For ``controller/leader-{lock}``: the lock's name."""
        if self.kind is TopicKind.CONTROLLER and self.name and self.name.startswith(LEADER_PREFIX):
            return self.name[len(LEADER_PREFIX):]
        return None


def parse_topic(topic: str) -> WorkerTopic | None:
    """The parts of a worker topic; ``None`` for a global topic or anything unknown (readers skip
    topics they do not understand instead of failing)."""
    m = _WORKER_TOPIC.match(topic)
    if m is None:
        return None
    worker, kind_raw, name = m.groups()
    try:
        kind = TopicKind(kind_raw)
    except ValueError:
        return None
    if (name is None) == (kind in NAMED_KINDS):
        return None
    return WorkerTopic(worker, kind, name)


# -- the queue item model -----------------------------------------------------------------------------
def fold_queue_op(state: dict[str, Any] | None, op: str, *, now_ms: float, delay: float | None = None,
                  requeues: int | None = None) -> dict[str, Any] | None:
    """A queue key's next state value after one ``queue`` record (``None``: the key is gone).

    This is the queue topic's snapshot model, the same for every publisher: ``s`` (QueueItemState),
    ``since`` (wall ms it entered ``s``; kept across re-adds while queued), ``ready_at`` (wall ms a
    delayed add fires, while it is in the future: a queued or processing key may also be waiting),
    ``dirty`` (added again while processing) and ``requeues`` (the rate limiter's
    count). A publisher folds each record it emits into its state; ``protocol/vectors/queue/``
    fix the result, so the dashboard reads the same thing from every runtime.
    """
    item: dict[str, Any] = dict(state) if state else {"requeues": 0}
    if item.get("ready_at", now_ms + 1) <= now_ms:
        del item["ready_at"]  # the delayed add has fired (this record may be it)
    if op in (QueueOp.ADD, QueueOp.REQUEUE):
        # since: when the key entered the FIFO; an add of a key already queued does not move it.
        queued_since = item.get("since") if item.get("s") == QueueItemState.QUEUED else None
        item.update(s=QueueItemState.QUEUED.value, since=queued_since or now_ms)
    elif op == QueueOp.DEFER:
        item["dirty"] = True
    elif op == QueueOp.GET:
        item = {"requeues": item.get("requeues", 0), "s": QueueItemState.PROCESSING.value, "since": now_ms,
                **({"ready_at": item["ready_at"]} if "ready_at" in item else {})}
    elif op in (QueueOp.ADD_AFTER, QueueOp.ADD_RATE_LIMITED):
        if delay is not None and delay > 0:  # (a zero delay adds at once: that add is its own record)
            # The delaying queue adds the key back at ready_at; a key being processed shows as
            # waiting once its worker is done with it. A key already waiting keeps the earlier
            # of its two ready times (client-go's delaying queue does the same).
            ready_at = now_ms + delay * 1000
            if not now_ms < item.get("ready_at", ready_at) < ready_at:
                item["ready_at"] = ready_at
            if item.get("s") not in (QueueItemState.QUEUED, QueueItemState.PROCESSING):
                item["s"] = QueueItemState.WAITING.value
        if requeues is not None:  # the limiter's count, already including this retry
            item["requeues"] = requeues
    elif op == QueueOp.FORGET:
        item["requeues"] = 0
    elif op == QueueOp.DONE:
        if item.pop("dirty", False):
            item.update(s=QueueItemState.QUEUED.value, since=now_ms)
        elif item.get("ready_at", 0) > now_ms:
            item["s"] = QueueItemState.WAITING.value
        elif item.get("requeues"):
            item = {"requeues": item["requeues"], "s": QueueItemState.IDLE.value}
        else:
            return None
    if state is None and "s" not in item:
        return None  # an op on a key the state never held that puts it nowhere: nothing to keep
    return item


# -- the rate limiter's delays (v1.5) ------------------------------------------------------------------
def rate_limiter_delay(spec: dict[str, Any] | None, requeues: int) -> float | None:
    """The delay the limiter ``spec`` (a RateLimiterSpec) chooses for a key's ``requeues``-th retry
    (1: the first after a ``forget``), assuming its token buckets have tokens (they only add to it);
    ``None`` when the spec does not say (no spec, an ``other`` limiter alone)."""
    if not isinstance(spec, dict) or requeues < 1:
        return None
    kind = spec.get("type")
    if kind == RateLimiterType.EXPONENTIAL:
        base, cap = float(spec["base"]), float(spec["max"])
        # past ~1000 doublings a float overflows; the cap has long been reached by then
        return cap if requeues > 1000 else min(base * 2.0 ** (requeues - 1), cap)
    if kind == RateLimiterType.FAST_SLOW:
        return float(spec["fast"] if requeues <= int(spec["fast_attempts"]) else spec["slow"])
    if kind == RateLimiterType.BUCKET:
        return 0.0
    if kind == RateLimiterType.MAX_OF:
        known = [d for d in (rate_limiter_delay(s, requeues) for s in spec.get("of") or []) if d is not None]
        return max(known) if known else None
    return None


def rate_limiter_max(spec: dict[str, Any] | None) -> float | None:
    """v1.7: the longest delay the limiter ``spec`` reaches for one key however often it fails (a
    ``failing`` finding's ``max_delay``): ``max`` of an exponential, ``slow`` of a fast_slow, the
    longest of a max_of's parts that say; ``None`` when no part says (a bucket, an ``other``)."""
    if not isinstance(spec, dict):
        return None
    kind = spec.get("type")
    if kind == RateLimiterType.EXPONENTIAL:
        return float(spec["max"])
    if kind == RateLimiterType.FAST_SLOW:
        return float(spec["slow"])
    if kind == RateLimiterType.MAX_OF:
        known = [d for d in (rate_limiter_max(s) for s in spec.get("of") or []) if d is not None]
        return max(known) if known else None
    return None


def rate_limiter_step(spec: dict[str, Any] | None, requeues: int, delay: float) -> dict[str, Any] | None:
    """Which part of the limiter ``spec`` chose ``delay`` for a key's ``requeues``-th retry: the
    first per-key limiter whose delay for that retry it is (within 1 µs + 0.1 %); else, for a delay
    no shorter than every per-key one, the token bucket (it had tokens, or the queue retried faster
    than ``qps`` beyond its burst); else the ``other`` limiter; ``None`` when no part explains it."""
    leaves: list[dict[str, Any]] = []

    def walk(s: Any) -> None:
        if isinstance(s, dict) and s.get("type") == RateLimiterType.MAX_OF:
            for child in s.get("of") or []:
                walk(child)
        elif isinstance(s, dict):
            leaves.append(s)

    walk(spec)
    for leaf in leaves:
        if leaf.get("type") in (RateLimiterType.BUCKET, RateLimiterType.OTHER):
            continue
        expected = rate_limiter_delay(leaf, requeues)
        if expected is not None and abs(delay - expected) <= 1e-6 + 1e-3 * expected:
            return leaf
    longest = rate_limiter_delay(spec, requeues) or 0.0
    for kind in (RateLimiterType.BUCKET, RateLimiterType.OTHER):
        for leaf in leaves:
            if leaf.get("type") == kind and (delay >= longest - 1e-6 or kind == RateLimiterType.OTHER):
                return leaf
    return None


# -- the handler progress model (v1.1) -----------------------------------------------------------------
RETRIED_ERROR_KINDS = frozenset({ErrorKind.TEMPORARY, ErrorKind.EXCEPTION, ErrorKind.CHILDREN})
"""Error kinds after which the framework runs the handler again on its own (at ``ts + delay``)."""


def fold_handler_record(entry: dict[str, Any] | None, record: dict[str, Any]) -> dict[str, Any] | None:
    """One handler's entry in a controller key's ``handlers`` state after one record that names the
    handler (``reconcile_start``, ``reconcile`` or ``progress``); ``None``: the entry is gone.

    The entry is ``{state (HandlerProgress), retries, at, next_at, cause, error}``. ``retries`` counts
    the failed attempts so far, as kopf stores it. A ``reconcile`` whose error the framework retries
    (``error_kind`` temporary / exception / children) leaves the handler ``retrying`` until
    ``next_at = ts + delay·1000``; terminal and panic results (and kinds permanent / timeout /
    retries) leave it ``failed``; success (and an ignored error) ``succeeded``. A ``progress`` record
    is what the object stores, taken as it is (``state`` null removes the entry).
    """
    kind, ts = record.get("k"), record.get("ts", 0)
    if kind == RecordKind.PROGRESS:
        if record.get("state") is None:
            return None
        return {"state": record["state"], "retries": record.get("retries") or 0, "at": ts,
                "next_at": record.get("next_at"), "cause": record.get("cause"), "error": record.get("error")}
    item: dict[str, Any] = dict(entry) if entry else {"retries": 0}
    item["at"] = ts
    if record.get("cause") is not None:
        item["cause"] = record["cause"]
    if kind == RecordKind.RECONCILE_START:
        item.update(state=HandlerProgress.RUNNING.value, next_at=None)
        if record.get("retry") is not None:
            item["retries"] = record["retry"]
        return item
    if kind != RecordKind.RECONCILE:
        return entry
    error_kind, result = record.get("error_kind"), record.get("result")
    retry = record.get("retry", item.get("retries", 0)) or 0
    item["error"] = record.get("error")
    if result == ReconcileResult.SUCCESS or error_kind == ErrorKind.IGNORED:
        item.update(state=HandlerProgress.SUCCEEDED.value, next_at=None, retries=retry)
    elif error_kind in RETRIED_ERROR_KINDS or (result not in FAILED_RESULTS and record.get("delay")):
        delay = record.get("delay") or record.get("requeue_after") or 0
        item.update(state=HandlerProgress.RETRYING.value, next_at=ts + delay * 1000, retries=retry + 1)
    else:
        item.update(state=HandlerProgress.FAILED.value, next_at=None, retries=retry + 1)
    return item


# -- liveness -----------------------------------------------------------------------------------------
ALIVE_MS = 10_000
"""A run is alive while its presence entry's ``seen`` is at most this old (and ``stopped`` is null).
Publishers refresh ``seen`` at least every 2 s, so a few refreshes may be lost."""
FRAME_STALE_MS = 30_000
"""A worker without a presence entry is live while its last frame on ``components`` or ``metrics`` is
at most this old."""
WORKER_ROLE = "worker"
"""The presence entry ``role`` of a worker (its ``name`` is the worker's topic segment)."""


def _ms(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def run_alive(entry: dict[str, Any], now_ms: float) -> bool:
    """A presence entry's run is alive: ``stopped`` null and ``seen`` at most ``ALIVE_MS`` before
    ``now_ms`` (a missing or non-numeric ``seen`` is never fresh)."""
    return not entry.get("stopped") and now_ms - _ms(entry.get("seen")) <= ALIVE_MS


def worker_run(publishers: list[dict[str, Any]], worker: str) -> dict[str, Any] | None:
    """A worker's newest run: the presence entry with role ``worker`` and ``name`` the worker's topic
    segment that started last (ties: the one seen last), or ``None`` when it keeps none."""
    runs = [p for p in publishers if p.get("role") == WORKER_ROLE and p.get("name") == worker]
    return max(runs, key=lambda p: (_ms(p.get("started")), _ms(p.get("seen"))), default=None)


def worker_liveness(publishers: list[dict[str, Any]], worker: str, *, now_ms: float,
                    last_frame_ms: float | None) -> Liveness:
    """Whether ``worker`` publishes now (``protocol/redis-layout.md``, "Liveness"). Its newest run's
    presence entry decides when it has one: frame ages never make a run with a fresh entry stale (an
    idle worker sends no frame for minutes). Without one, its last frame on ``components`` or
    ``metrics`` (``last_frame_ms``, ``None``: none) must be at most ``FRAME_STALE_MS`` old."""
    run = worker_run(publishers, worker)
    if run is not None:
        return Liveness.LIVE if run_alive(run, now_ms) else Liveness.STOPPED
    if last_frame_ms is not None and now_ms - last_frame_ms <= FRAME_STALE_MS:
        return Liveness.LIVE
    return Liveness.STALE


# -- the vocabulary as data ---------------------------------------------------------------------------
VOCABULARY: dict[str, type[StrEnum]] = {
    "RecordKind": RecordKind,
    "WatchEventType": WatchEventType,
    "DeltaType": DeltaType,
    "FifoOp": FifoOp,
    "HandlerEvent": HandlerEvent,
    "HandlerOutcome": HandlerOutcome,
    "ReflectorState": ReflectorState,
    "WatchEndReason": WatchEndReason,
    "WatcherVariant": WatcherVariant,
    "QueueOp": QueueOp,
    "ReconcileResult": ReconcileResult,
    "RateLimiterType": RateLimiterType,
    "ControllerEvent": ControllerEvent,
    "TriggerKind": TriggerKind,
    "FindingKind": FindingKind,
    "ErrorKind": ErrorKind,
    "HandlerCause": HandlerCause,
    "HandlerProgress": HandlerProgress,
    "LogLevel": LogLevel,
    "ObservationMode": ObservationMode,
    "WriteMode": WriteMode,
    "WriteRefusal": WriteRefusal,
    "ComponentKind": ComponentKind,
    "QueueItemState": QueueItemState,
    "ResyncReason": ResyncReason,
    "Runtime": Runtime,
    "TopicKind": TopicKind,
    "Liveness": Liveness,
}


def browser_vocabulary() -> dict[str, Any]:
    """What the page hands its scripts (``{{ protocol|json_script:"cs-protocol" }}``): every enum as
    ``{MEMBER: value}``, the topic constants and patterns, the version. The scripts use these names
    instead of string literals (``tests/protocol/test_js_vocabulary.py`` holds them to it)."""
    return {
        "version": PROTOCOL_VERSION,
        "major": PROTOCOL_MAJOR,
        **{name: {m.name: m.value for m in enum} for name, enum in VOCABULARY.items()},
        "QUEUE_ADDS": sorted(QUEUE_ADDS),
        "FAILED_RESULTS": sorted(FAILED_RESULTS),
        "KEY_FINDINGS": sorted(KEY_FINDINGS),
        "RETRIED_ERROR_KINDS": sorted(RETRIED_ERROR_KINDS),
        "NAMED_KINDS": sorted(NAMED_KINDS),
        "INFORMER_SCOPE_FIELDS": list(INFORMER_SCOPE_FIELDS),
        "alive_ms": ALIVE_MS, "frame_stale_ms": FRAME_STALE_MS, "worker_role": WORKER_ROLE,
        "topics": {"worker_prefix": WORKER_PREFIX, "leader_prefix": LEADER_PREFIX, "faults": FAULTS_TOPIC,
                   "scenarios": SCENARIOS_TOPIC, "scoreboard_table": SCOREBOARD_TABLE,
                   "segment": SEGMENT_PATTERN, "unsafe": _UNSAFE.pattern},
    }
