"""Reading the spans a collector received, for the OpenTelemetry tests of both runtimes: the reconcile
spans of a key in order, the span each link points at, and the provenance checks both share."""

from __future__ import annotations

from collections import Counter
from typing import Any

from controllers.realcluster.otelcol import Span

RECONCILE = "reconcile "
EVENT = "event "


class Received:
    """The spans of one run, indexed: ``by_id`` (span id → span), reconcile spans per key in start order."""

    def __init__(self, spans: list[Span], controller: str) -> None:
        self.spans = spans
        self.controller = controller
        self.by_id = {s.span_id: s for s in spans}
        self.reconciles = sorted((s for s in spans if s.name == f"{RECONCILE}{controller}"), key=lambda s: s.start_ns)
        self.events = [s for s in spans if s.name.startswith(EVENT) and s.attributes.get("ctrlscope.controller") == controller]
        self.writes = [s for s in spans if s.parent_span_id and s.parent_span_id in {r.span_id for r in self.reconciles}]

    def attempts(self, key: str) -> list[Span]:
        return [s for s in self.reconciles if s.attributes["ctrlscope.key"] == key]

    def linked(self, span: Span) -> list[Span]:
        """The spans ``span`` links to, in link order (every one must have arrived)."""
        missing = [link.span_id for link in span.links if link.span_id not in self.by_id]
        assert not missing, f"{span.name} {span.attributes.get('ctrlscope.key')} links to spans that never arrived: {missing}"
        return [self.by_id[link.span_id] for link in span.links]


def assert_links_are_the_provenance(received: Received) -> None:
    """What holds for the spans of any run, whatever the timing: each reconcile span links to one
    span per trigger (every count here stays under the protocol's 20), an event trigger to the
    ``event`` span of an event mapped to the attempt's key, a retry or requeue_after trigger to the
    previous attempt of the same key, which ended with that result; every event span that enqueued a
    key is linked from exactly one attempt of that key (none lost, none counted twice)."""
    links_to_events: Counter[tuple[str, str]] = Counter()
    for key in {s.attributes["ctrlscope.key"] for s in received.reconciles}:
        attempts = received.attempts(key)
        for i, attempt in enumerate(attempts):
            count = attempt.attributes["ctrlscope.trigger_count"]
            assert count == len(attempt.links), (key, i, count, attempt.links)
            for link, target in zip(attempt.links, received.linked(attempt), strict=True):
                kind = link.attributes["ctrlscope.trigger.kind"]
                if kind in ("event", "resync"):
                    assert target.name == f"event {link.attributes['ctrlscope.event.type']} {target.attributes['ctrlscope.event.key']}"
                    assert key in target.attributes["ctrlscope.requests"]
                    assert target.start_ns <= attempt.start_ns, "an event links forward from the attempt it caused"
                    assert link.attributes.get("ctrlscope.event.rv") == target.attributes.get("ctrlscope.event.rv")
                    links_to_events[(target.span_id, key)] += 1
                else:
                    assert kind in ("retry", "requeue_after"), kind
                    assert i > 0 and target.span_id == attempts[i - 1].span_id, \
                        f"{key} attempt {i}: its {kind} link is not to the attempt before it"
                    if kind == "retry":
                        assert link.attributes["ctrlscope.result"] == target.attributes["ctrlscope.result"]
    for event in received.events:
        for key in event.attributes["ctrlscope.requests"]:
            assert links_to_events[(event.span_id, key)] == 1, \
                f"{event.name} → {key} is linked from {links_to_events[(event.span_id, key)]} attempts"


def assert_writes_are_children(received: Received, *, method: str, path_prefix: str) -> list[Span]:
    """Every write span is a CLIENT child of a reconcile span, in its trace, with its HTTP status."""
    writes = [s for s in received.writes if s.name.startswith(f"{method} {path_prefix}")]
    assert writes, f"no {method} {path_prefix}... span under any reconcile span"
    for w in writes:
        parent = received.by_id[w.parent_span_id]
        assert w.trace_id == parent.trace_id
        assert parent.start_ns <= w.start_ns <= w.end_ns <= parent.end_ns
        assert w.attributes["http.request.method"] == method
        assert w.attributes["http.response.status_code"] == 200
        assert w.name == f"{method} {w.attributes['url.path']}"
    return writes


def trigger_kinds(record_or_span: Any) -> list[str]:
    """The kinds of a reconcile_start record's triggers, or of a reconcile span's links, in order."""
    if isinstance(record_or_span, Span):
        return [link.attributes["ctrlscope.trigger.kind"] for link in record_or_span.links]
    return [t["kind"] for t in record_or_span["triggers"]]
