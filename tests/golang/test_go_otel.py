"""OpenTelemetry spans from a real controller-runtime program, as a real OpenTelemetry Collector
receives them (issue 31, item 6).

``go/cmd/status-writer`` runs against the simulator with ``CTRLSCOPE_OTLP_ENDPOINT`` naming a
collector built from upstream and run on loopback (``controllers/realcluster/otelcol.py``): the
program's ``ctrlscope/otel`` sink exports over OTLP/HTTP through the SDK's batch processor, beside
the publisher writing to a real Redis. A Job annotated to fail its first two reconciles, whose
reconciler then writes its status twice (each write coming back as an update event):

- five ``reconcile status-writer`` spans: error, error (status ERROR with the error's text, the rate
  limiter's delays 5 ms and 10 ms), then three successes;
- the links are the provenance: the first attempt links to the ``event create`` span, each retry to
  the attempt that left it, each later attempt to the ``event update`` span of its own write coming
  back (``ctrlscope.event.self``, with the fields it changed in ``ctrlscope.event.diff``); in kind, order and count they are the triggers of the
  ``reconcile_start`` records the same program published to Redis;
- each status write is a client span under its attempt's span, with its status code and the
  resourceVersion the write record says;
- the spans carry the worker as service.name and ctrlscope.worker, and arrive when the program stops
  (the sink flushes on the way out).
"""

from __future__ import annotations

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.realcluster.otelcol import Span
from tests.golang.telemetry import Published
from tests.golang.test_go_detections import (  # noqa: F401  (status_writer: a fixture)
    CONTROLLER,
    NAMESPACE,
    job,
    start_writer,
    status_writer,
)

WORKER = "go-otel"
FAIL_FIRST = 2
WRITES = 2
RECONCILE = f"reconcile {CONTROLLER}"


def complete(spans: list[Span]) -> bool:
    """Every span a reconcile span links to has arrived, and the writes' spans under them."""
    ids = {s.span_id for s in spans}
    reconciles = [s for s in spans if s.name == RECONCILE]
    linked = all(link.span_id in ids for s in reconciles for link in s.links)
    children = [s for s in spans if s.parent_span_id in {r.span_id for r in reconciles}]
    return linked and len(children) >= WRITES


def test_reconcile_spans_link_to_their_triggers_and_parent_their_writes(
        status_writer, sim_kubeconfig, otel_collector, redis_url, prefix, tmp_path):  # noqa: F811
    key = f"{NAMESPACE}/flaky"
    env = {"CTRLSCOPE_OTLP_ENDPOINT": otel_collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    proc = start_writer(status_writer, sim_kubeconfig, WORKER, tmp_path, redis_url, prefix, "--max-writes",
                        str(WRITES), env=env)
    published = Published(redis_url, prefix)
    topic = f"w/{WORKER}/controller/{CONTROLLER}"
    attempts = FAIL_FIRST + WRITES + 1  # the last write's event starts one that writes nothing
    try:
        KubernetesClient.from_kubeconfig(str(sim_kubeconfig)).send_json(
            "POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", job("flaky", {"ctrlscope.dev/fail-first": str(FAIL_FIRST)}))
        otel_collector.wait_for(lambda spans: len([s for s in spans if s.name == RECONCILE]) >= attempts, timeout=30,
                           what=f"{attempts} reconcile spans")
        proc.stop()  # flushes what the batch processor holds
        otel_collector.wait_for(complete, timeout=30, what="every linked span and the write spans")
        starts = [r for r in published.records(topic, "reconcile_start") if r["key"] == key]
        writes = published.records(topic, "write")
        events = {e["rv"]: e for e in published.records(topic, "event") if e["key"] == key}
    finally:
        proc.stop()
        published.close()
    spans = otel_collector.spans()
    by_id = {s.span_id: s for s in spans}
    reconciles = sorted((s for s in spans if s.name == RECONCILE and s.attributes["ctrlscope.key"] == key),
                        key=lambda s: s.start_ns)

    assert len(reconciles) == len(starts) == attempts, (len(reconciles), len(starts))
    for s in spans:
        assert s.scope == "ctrlscope" and s.resource["service.name"] == WORKER, s
        assert s.resource["ctrlscope.worker"] == WORKER, s.resource
    results = [s.attributes["ctrlscope.result"] for s in reconciles]
    assert results == ["error"] * FAIL_FIRST + ["success"] * (WRITES + 1), results
    for n, s in enumerate(reconciles[:FAIL_FIRST]):
        assert s.status == "ERROR" and f"injected failure {n + 1} of {FAIL_FIRST}" in s.status_message, s
        # controller-runtime's default rate limiter: 5 ms, doubling per failure of the key
        assert s.attributes["ctrlscope.rate_limiter.delay"] == pytest.approx(0.005 * 2 ** n), s.attributes
    for s in reconciles:
        assert s.attributes["ctrlscope.controller"] == CONTROLLER and s.parent_span_id == "", s
        assert s.attributes["ctrlscope.requeue_after"] == 0.0, s.attributes

    # The links are the provenance: the triggers of each attempt's reconcile_start record.
    for n, (span, start) in enumerate(zip(reconciles, starts, strict=True)):
        kinds = [link.attributes["ctrlscope.trigger.kind"] for link in span.links]
        assert kinds == [t["kind"] for t in start["triggers"]], (n, kinds, start)
        assert span.attributes["ctrlscope.trigger_count"] == start["trigger_count"] == len(span.links), (n, span)
        assert span.attributes["ctrlscope.self_triggered"] is bool(start.get("self_triggered")), (n, span, start)
        missing = [link.span_id for link in span.links if link.span_id not in by_id]
        assert not missing, f"attempt {n} links to spans that never arrived: {missing}"
    [create] = reconciles[0].links
    target = by_id[create.span_id]
    assert target.name == f"event create {key}" and target.attributes["ctrlscope.requests"] == [key], target
    assert target.attributes["ctrlscope.event.source"] == f"controller/{CONTROLLER} (For)", target.attributes
    for n in range(1, FAIL_FIRST + 1):  # each retry links to the attempt that left it
        [retry] = reconciles[n].links
        assert retry.attributes["ctrlscope.trigger.kind"] == "retry" and retry.attributes["ctrlscope.result"] == "error"
        assert retry.span_id == reconciles[n - 1].span_id, n
        assert retry.attributes["ctrlscope.delay"] == pytest.approx(0.005 * 2 ** (n - 1)), retry.attributes

    # Each status write: a client span under its attempt, and its event the next attempt's trigger.
    write_spans = sorted((s for s in spans if s.parent_span_id in {r.span_id for r in reconciles}),
                         key=lambda s: s.start_ns)
    assert len(write_spans) == len(writes) == WRITES, (write_spans, writes)
    for w, record, parent, following in zip(write_spans, writes, reconciles[FAIL_FIRST:], reconciles[FAIL_FIRST + 1:],
                                            strict=False):
        assert w.parent_span_id == parent.span_id and w.trace_id == parent.trace_id, w
        assert parent.start_ns <= w.start_ns <= w.end_ns <= parent.end_ns, (w, parent)
        assert w.name == f"PUT /apis/batch/v1/namespaces/{NAMESPACE}/jobs/flaky/status" == f"PUT {record['path']}", w
        assert w.attributes["http.response.status_code"] == 200 and w.attributes["ctrlscope.rv"] == record["rv"], w
        [back] = following.links
        event = by_id[back.span_id]
        assert event.name == f"event update {key}" and event.attributes["ctrlscope.event.self"] is True, event
        # what the write changed, as the event record says it
        assert event.attributes["ctrlscope.event.diff"] == events[record["rv"]]["diff"], (event, events[record["rv"]])
        assert any(p.startswith("status.conditions") for p in event.attributes["ctrlscope.event.diff"]), event
        assert back.attributes["ctrlscope.event.source"] == f"controller/{CONTROLLER} (For)", back.attributes
        assert event.attributes["ctrlscope.event.rv"] == back.attributes["ctrlscope.event.rv"] == record["rv"], event
        assert following.attributes["ctrlscope.self_triggered"] is True, following
