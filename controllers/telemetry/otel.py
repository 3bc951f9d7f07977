"""OtelObserver: a worker's reconciles, controller events and API writes as OpenTelemetry spans.

An ``Observer`` like the telemetry observer, joined to it with ``FanoutObserver`` when OTLP is
configured (``otel_env.otlp_from_environment``): the same hook calls that become protocol records
become spans, exported over OTLP/HTTP by the maintained exporter (``opentelemetry-sdk``, a batch span
processor, ``opentelemetry-exporter-otlp-proto-http``) to whatever collector or backend the
standard ``OTEL_EXPORTER_OTLP_*`` variables name. Per controller:

- ``event {type} {key}``: a short span for each watched object's event that the controller's handler
  mapped to requests (``on_event`` with ``requests``; a predicate's drop makes none). Its own trace.
  Attributes ``ctrlscope.event.type``, ``.key``, ``.source`` (the handler), ``.rv``, ``.diff`` (an
  update's changed field paths, protocol 1.7's rule), ``.self`` (the controller's own write) and
  ``ctrlscope.requests``: the runtime's ``on_event`` gives what it has (no objects: no rv, no diff).
- ``reconcile {controller}``: one span per attempt, from ``on_reconcile_start`` to
  ``on_reconcile_end``, a trace of its own (an attempt is caused by many events, so no event is its
  parent). Attributes ``ctrlscope.controller``, ``ctrlscope.key``, ``ctrlscope.result``,
  ``ctrlscope.requeue_after``, ``ctrlscope.rate_limiter.delay`` (the delay of the key's
  ``add_rate_limited`` that answered this attempt, when the controller's queue reported one),
  ``ctrlscope.trigger_count`` and ``ctrlscope.self_triggered``; status ERROR on error, panic and
  terminal, with the error's text.
- ``{METHOD} {path}``: a CLIENT span per API write the attempt made (any request but a GET), a
  child of the reconcile span, with ``http.response.status_code`` (ERROR when it is 0 or ≥ 400), and
  a write the worker refused itself (read-only) as an ERROR span with ``ctrlscope.write.refused``.

**Links are the provenance.** The reconcile span links to one span per trigger of the attempt, as
protocol 1.7 defines them (``provenance.py``): each event trigger to its ``event`` span, each
``retry`` and ``requeue_after`` trigger to the span of the attempt that left it; the link's
attributes say which (``ctrlscope.trigger.kind``, and the event type, resourceVersion and ``self``,
or the retry's result and delay). The sink keeps its own ``Provenance`` fed by the same calls as the
telemetry observer's, so the links are exactly the ``reconcile_start`` record's ``triggers`` (the
last ``TRIGGERS_MAX``) and ``ctrlscope.trigger_count`` its ``trigger_count``: 40 merged update
events make one reconcile span with 20 links and a count of 40. Each trigger the sink's Provenance
adds carries the span context it links to, under ``LINK`` (these triggers are never published).

Which attempt a write belongs to: a worker calls Reconcile on its own thread, so a request reported
on a thread with an attempt open is that attempt's; an asynchronous caller (kopf in-process, through
the publisher API) names the controller instead, whose handlers of several objects share one
thread: the running attempt of the object the request path names is taken, else the controller's
latest running one. A write made outside any running attempt (kopf patching its progress after a
handler returned) is no span, as a read is none.

The rate limiter's delay: the Python runtime reports ``add_rate_limited`` before ``on_reconcile_end``,
client-go's loop after it. An attempt that ended with a retried result and no delay yet keeps its
span open (its end time already fixed) until the delay comes, the key's next attempt starts, or the
sink shuts down, so the attribute is there whatever the order. A framework's handler attempt (kopf:
``handler`` given) has its own retry delay instead, ``ctrlscope.delay``, and ends at once.

Every hook only creates or ends spans in memory, under one lock: the batch processor appends each
ended span to a bounded queue (``OTEL_BSP_MAX_QUEUE_SIZE``, 2048; when it is full the oldest is
dropped, never waited for) that its own thread exports. A collector that is down, refuses or hangs
costs that thread retries and the spans it drops, never the runtime a wait. ``shutdown`` ends what
is still open and flushes for at most ``timeout`` seconds (the exporter alone would retry each
remaining batch for up to ``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s, and the SDK wait 30 s for them all).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, set_span_in_context

from controllers.clock import Clock, RealClock
from controllers.observer import Observer
from controllers.schema import RETRIED_RESULTS, QueueOp, ReconcileResult, TriggerKind
from controllers.telemetry.field_diff import diff_paths
from controllers.telemetry.provenance import Provenance, written_key
from controllers.telemetry.summary import resource_version

SCOPE = "ctrlscope"
"""The instrumentation scope of every span this sink makes."""
LINK = "otel_link"
"""The key under which a trigger of the sink's own Provenance carries the span context it links to."""
ERROR_RESULTS = frozenset({ReconcileResult.ERROR, ReconcileResult.PANIC, ReconcileResult.TERMINAL})
_ROOT = Context()
"""An empty context: a reconcile span has no parent, whatever span is current on the worker's thread."""


@dataclass(slots=True)
class _Attempt:
    """One open reconcile span. ``end_ns`` is set once the attempt returned; the span itself ends
    then, or later when it still waits for its rate limiter's delay (``awaiting_delay``)."""

    controller: str
    key: str
    span: Span
    delay: float | None = None
    end_ns: int | None = None
    awaiting_delay: bool = False


class OtelObserver(Observer):
    """Spans for reconciles, controller events and writes (see the module docstring), made with
    ``provider``'s tracer. ``shutdown`` ends open spans and shuts the provider down (a flush),
    for a bounded time when it knows the ``exporter`` (it stops the exporter's retries then)."""

    def __init__(self, provider: TracerProvider, *, clock: Clock | None = None,
                 exporter: SpanExporter | None = None) -> None:
        self.provider = provider
        self.exporter = exporter
        self.tracer = provider.get_tracer(SCOPE)
        self.clock: Clock = clock or RealClock()
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._provenance = Provenance()
        self._attempts: dict[tuple[str, str], _Attempt] = {}  # open, by (controller, key)
        self._threads: dict[int, _Attempt] = {}  # thread id -> the attempt running on it
        self._latest: dict[str, _Attempt] = {}  # controller -> its latest attempt started (async callers)

    def _now_ns(self) -> int:
        return int(self.clock.wall() * 1e9)

    # -- events ------------------------------------------------------------------------------
    def on_event(self, controller: str, *, event: str, key: str, requests: list[str],
                 filtered_by: str | None = None, source: str | None = None, old: Any = None,
                 new: Any = None) -> None:
        if not requests:
            return
        now = self._now_ns()
        rv = resource_version(new) if new is not None else None
        old_rv = resource_version(old) if old is not None else None
        attributes: dict[str, Any] = {"ctrlscope.controller": controller, "ctrlscope.event.type": str(event),
                                      "ctrlscope.event.key": key, "ctrlscope.requests": list(requests)}
        if source is not None:
            attributes["ctrlscope.event.source"] = source
        if rv is not None:
            attributes["ctrlscope.event.rv"] = rv
        record: dict[str, Any] = {"ts": now / 1e6, "key": key, "event": event, "source": source, "rv": rv}
        if old_rv is not None:
            record["old_rv"] = old_rv
            if rv != old_rv:  # which fields changed: what a looping controller keeps writing
                paths, more = diff_paths(old, new)
                attributes["ctrlscope.event.diff"] = paths
                if more:
                    attributes["ctrlscope.event.diff_more"] = more
        with self._lock:
            # (an update that kept its resourceVersion is a resync: it brings back no write)
            if rv is not None and rv != old_rv and self._provenance.is_self(controller, key, rv):
                record["self"] = attributes["ctrlscope.event.self"] = True
            span = self.tracer.start_span(f"event {event} {key}", start_time=now, attributes=attributes)
            span.end(end_time=now)
            trigger = self._provenance.event(controller, record, requests)
            if trigger is not None:
                trigger[LINK] = span.get_span_context()

    # -- reconciles --------------------------------------------------------------------------
    def on_reconcile_start(self, controller: str, *, key: str, worker: int, handler: str | None = None,
                           cause: str | None = None, retry: int | None = None) -> None:
        now = self._now_ns()
        attributes: dict[str, Any] = {"ctrlscope.controller": controller, "ctrlscope.key": key,
                                      "ctrlscope.worker": worker}
        if handler is not None:
            attributes.update({"ctrlscope.handler": handler, "ctrlscope.cause": str(cause),
                               "ctrlscope.retry": retry if retry is not None else 0})
        with self._lock:
            previous = self._attempts.pop((controller, key), None)
            if previous is not None:  # still waiting for its delay, or never ended: it is over now
                self._end(previous)
            triggers, count, self_triggered = self._provenance.take(controller, key)
            attributes["ctrlscope.trigger_count"] = count
            attributes["ctrlscope.self_triggered"] = self_triggered
            links = [Link(t[LINK], _link_attributes(t)) for t in triggers if LINK in t]
            span = self.tracer.start_span(f"reconcile {controller}", start_time=now, attributes=attributes,
                                          links=links, context=_ROOT)
            attempt = self._attempts[(controller, key)] = _Attempt(controller, key, span)
            self._threads[threading.get_ident()] = attempt
            self._latest[controller] = attempt

    def on_reconcile_end(self, controller: str, *, key: str, worker: int, duration: float, result: str,
                         requeue_after: float = 0.0, error: str | None = None, handler: str | None = None,
                         cause: str | None = None, retry: int | None = None, delay: float | None = None,
                         error_kind: str | None = None) -> None:
        now = self._now_ns()
        with self._lock:
            if self._threads.get(threading.get_ident()) is self._attempts.get((controller, key)):
                self._threads.pop(threading.get_ident(), None)
            attempt = self._attempts.get((controller, key))
            retried = self._provenance.result(controller, key, ts=now / 1e6, result=result,
                                              requeue_after=requeue_after,
                                              delay=delay if handler is not None else None)
            if attempt is None:
                return  # started before this sink was attached
            if retried is not None:
                retried[LINK] = attempt.span.get_span_context()
            span = attempt.span
            span.set_attribute("ctrlscope.result", str(result))
            span.set_attribute("ctrlscope.requeue_after", float(requeue_after))
            if delay is not None:
                span.set_attribute("ctrlscope.delay", float(delay))  # a framework's own retry delay (kopf)
            if error_kind is not None:
                span.set_attribute("ctrlscope.error_kind", str(error_kind))
            if result in ERROR_RESULTS:
                span.set_status(Status(StatusCode.ERROR, error))
            attempt.end_ns = now
            if result in RETRIED_RESULTS and attempt.delay is None and handler is None:
                # client-go reports add_rate_limited after the result (a framework's handler
                # attempt brings its own delay, above, and no queue's)
                attempt.awaiting_delay = True
            else:
                del self._attempts[(controller, key)]
                self._end(attempt)

    def _end(self, attempt: _Attempt) -> None:  # _lock held
        if attempt.delay is not None:
            attempt.span.set_attribute("ctrlscope.rate_limiter.delay", attempt.delay)
        attempt.span.end(end_time=attempt.end_ns if attempt.end_ns is not None else self._now_ns())
        if self._latest.get(attempt.controller) is attempt:
            del self._latest[attempt.controller]

    def on_queue(self, queue: str, *, op: str, key: str, depth: int, delay: float | None = None,
                 requeues: int | None = None, duration: float | None = None) -> None:
        if op != QueueOp.ADD_RATE_LIMITED:
            return
        # A queue is named like its controller (controller-runtime's and every runtime's here).
        with self._lock:
            self._provenance.rate_limited(queue, key, delay)
            attempt = self._attempts.get((queue, key))
            if attempt is None or delay is None:
                return
            attempt.delay = delay
            if attempt.awaiting_delay:
                del self._attempts[(queue, key)]
                self._end(attempt)

    # -- writes ------------------------------------------------------------------------------
    def _attempt_for(self, controller: str | None, path: str) -> _Attempt | None:  # _lock held
        if controller is None:
            return self._threads.get(threading.get_ident())
        key = written_key(path)
        attempt = self._attempts.get((controller, key)) if key is not None else None
        if attempt is not None and attempt.end_ns is None:
            return attempt
        latest = self._latest.get(controller)
        return latest if latest is not None and latest.end_ns is None else None

    def on_request(self, *, method: str, path: str, code: int, duration: float,
                   controller: str | None = None, rv: str | None = None) -> None:
        if method == "GET":
            return  # reads are not spans: a write is what a trace of the attempt needs to show
        end = self._now_ns()
        with self._lock:
            attempt = self._attempt_for(controller, path)
            owner = controller if controller is not None else attempt.controller if attempt is not None else None
            if owner is not None:
                self._provenance.wrote(owner, path=path, code=code, rv=rv)
            if attempt is None:
                return
            attributes: dict[str, Any] = {"http.request.method": method, "url.path": path,
                                          "ctrlscope.controller": attempt.controller, "ctrlscope.key": attempt.key}
            if code:
                attributes["http.response.status_code"] = code
            if rv is not None:
                attributes["ctrlscope.rv"] = rv
            span = self.tracer.start_span(f"{method} {path}", context=set_span_in_context(attempt.span),
                                          kind=SpanKind.CLIENT, start_time=end - int(duration * 1e9),
                                          attributes=attributes)
        if code == 0 or code >= 400:
            span.set_status(Status(StatusCode.ERROR, "no response" if code == 0 else f"HTTP {code}"))
        span.end(end_time=end)

    def on_write_refused(self, *, method: str, path: str, reason: str, controller: str | None = None) -> None:
        now = self._now_ns()
        with self._lock:
            attempt = self._attempt_for(controller, path)
            if attempt is None:
                return
            span = self.tracer.start_span(f"{method} {path}", context=set_span_in_context(attempt.span),
                                          kind=SpanKind.CLIENT, start_time=now,
                                          attributes={"http.request.method": method, "url.path": path,
                                                      "ctrlscope.write.refused": str(reason)})
        span.set_status(Status(StatusCode.ERROR, f"refused by the worker: {reason}"))
        span.end(end_time=now)

    # -- lifecycle ---------------------------------------------------------------------------
    def shutdown(self, timeout: float = 5.0) -> None:
        """End the spans still open (an attempt that never returned ends now, without a result) and
        shut the provider down, which exports what its batch processor holds: for at most about
        ``timeout`` seconds when the exporter is known (then what is left is dropped)."""
        with self._lock:
            for attempt in self._attempts.values():
                self._end(attempt)
            self._attempts.clear()
            self._threads.clear()
        if self.exporter is None:
            self.provider.shutdown()
            return
        # The SDK's shutdown takes no timeout (its batch processor waits up to 30 s for its thread,
        # which retries each batch for up to the exporter's timeout): run it aside, and past the
        # timeout stop the exporter, whose retries then end and whose further batches fail at once.
        flushing = threading.Thread(target=self.provider.shutdown, name="otel-shutdown", daemon=True)
        flushing.start()
        flushing.join(timeout)
        if flushing.is_alive():
            self.exporter.shutdown()
            flushing.join(1.0)


def _link_attributes(trigger: dict[str, Any]) -> dict[str, Any]:
    kind = trigger["kind"]
    attributes: dict[str, Any] = {"ctrlscope.trigger.kind": str(kind)}
    if kind in (TriggerKind.EVENT, TriggerKind.RESYNC):
        attributes["ctrlscope.event.type"] = str(trigger["type"])
        attributes["ctrlscope.event.key"] = trigger["key"]
        if trigger.get("source") is not None:
            attributes["ctrlscope.event.source"] = trigger["source"]
        if trigger.get("rv") is not None:
            attributes["ctrlscope.event.rv"] = trigger["rv"]
        if trigger.get("self"):
            attributes["ctrlscope.event.self"] = True
    else:
        if "result" in trigger:
            attributes["ctrlscope.result"] = str(trigger["result"])
        if trigger.get("delay") is not None:
            attributes["ctrlscope.delay"] = float(trigger["delay"])
    return attributes
