"""OpenTelemetry spans from a kopf operator run in-process (``manage.py runkopf``): its handler
attempts go through the publisher API's observer hooks, so the same sink makes them spans.

The tests' ``retrying.py`` operator handles a PodSet on the simulator: ``create_fn`` fails twice with
kopf's ``TemporaryError(delay=1)`` and then succeeds, ``audit`` fails for good. The collector receives
one reconcile span per handler attempt, named after the controller, with the handler, its retry
number, kopf's own delay and the result; each retry links to the attempt that left it; the links
are the triggers of the ``reconcile_start`` records the worker published.
"""

from __future__ import annotations

from controllers.kopf import controller_name
from controllers.schema import RecordKind, TopicKind, worker_topic
from tests.golang.telemetry import Published
from tests.kopf.conftest import create_podset, kopf_operator, kube, namespace  # noqa: F401  (fixtures)
from tests.otel.spans import Received, assert_links_are_the_provenance, trigger_kinds

CONTROLLER = controller_name("demo.ctrlscope.dev", "podsets")
WORKER = "kopf-otel"


def test_kopf_in_process_handler_attempts_are_spans_linked_to_their_retries(
        kube, namespace, kopf_operator, otel_collector, redis_url: str, prefix: str) -> None:  # noqa: F811
    op = kopf_operator("retrying.py", namespace, worker=WORKER,
                       env={"OTEL_EXPORTER_OTLP_ENDPOINT": otel_collector.endpoint, "OTEL_BSP_SCHEDULE_DELAY": "100"})
    op.wait_for_output("in-process")
    create_podset(kube, namespace, "web", audit="fail")
    key = f"{namespace}/web"

    def of_key(spans):
        return [s for s in spans if s.name == f"reconcile {CONTROLLER}" and s.attributes.get("ctrlscope.key") == key]

    spans = otel_collector.wait_for(lambda s: len(of_key(s)) >= 4, timeout=60,
                                    what="four handler attempts (create_fn thrice, audit once)")
    received = Received(spans, CONTROLLER)
    attempts = received.attempts(key)
    created = [s for s in attempts if s.attributes["ctrlscope.handler"] == "create_fn"]
    assert [(s.attributes["ctrlscope.retry"], s.attributes["ctrlscope.result"], s.status,
             s.attributes.get("ctrlscope.delay")) for s in created] == [
        (0, "error", "ERROR", 1.0), (1, "error", "ERROR", 1.0), (2, "success", "UNSET", None)]
    assert "not ready yet (attempt 1)" in created[0].status_message
    (audit,) = [s for s in attempts if s.attributes["ctrlscope.handler"] == "audit"]
    assert (audit.attributes["ctrlscope.result"], audit.status) == ("terminal", "ERROR")
    assert "audit refused" in audit.status_message
    assert all(s.attributes["ctrlscope.cause"] == "create" for s in attempts)
    assert {s.resource.get("service.name") for s in spans} == {WORKER}
    # kopf waited its delay between the attempts the spans show.
    assert all(0.9 <= b.start_ns / 1e9 - a.end_ns / 1e9 < 5 for a, b in zip(created, created[1:], strict=False))
    # Each failed attempt left a retry, linked from the key's next attempt (whichever handler kopf ran
    # next: provenance is per key) with kopf's delay; nothing else triggered these attempts.
    retries = [(link, target) for s in attempts for link, target in zip(s.links, received.linked(s), strict=True)]
    assert [(link.attributes["ctrlscope.trigger.kind"], link.attributes.get("ctrlscope.delay"), target.span_id)
            for link, target in retries] == [("retry", 1.0, created[0].span_id), ("retry", 1.0, created[1].span_id)]
    assert_links_are_the_provenance(received)

    published = Published(redis_url, prefix)
    try:
        starts = [r for r in published.records(worker_topic(WORKER, TopicKind.CONTROLLER, CONTROLLER),
                                               RecordKind.RECONCILE_START) if r["key"] == key]
    finally:
        published.close()
    assert [(r["handler"], r["trigger_count"], trigger_kinds(r)) for r in starts] == \
           [(s.attributes["ctrlscope.handler"], s.attributes["ctrlscope.trigger_count"], trigger_kinds(s))
            for s in attempts]
