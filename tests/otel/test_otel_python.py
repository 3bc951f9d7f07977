"""OpenTelemetry spans from ctrlscope's Python runtime, as a real OpenTelemetry Collector receives them.

The runtime runs ``tests/otel/reconciler.py`` against the simulator over real HTTP, with the
telemetry observer (publishing to a real Redis) and the OTLP sink fanned out side by side, the sink
exporting over OTLP/HTTP through the SDK's batch processor to the collector built from upstream
(``controllers/realcluster/otelcol.py``), which writes what it received to a file. Then:

- a key that fails twice then succeeds: three reconcile spans, error, error, success, each retry
  linked to the attempt that left it, with the rate limiter's delays (5 ms, 10 ms); the success's
  write is its child span, and the write's watch event (``self``: the resourceVersion the write got
  back, its diff the field written) starts one more attempt, ``self_triggered``, that writes nothing;
- a key whose first attempt asks to run again after 0.2 s: the second links to the first
  (``requeue_after``, with its delay);
- a burst of updates to another key while it is queued and processed: a few attempts absorb them,
  each linking to the event spans of the updates it absorbed;
- the links are the provenance: every reconcile span's links are, in order and kind, the triggers
  of the ``reconcile_start`` record the telemetry observer published for the same attempt, and its
  ``trigger_count`` and ``self_triggered`` are the record's;
- ``manage.py runcontrollers`` exports the same spans when ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set,
  named after the worker, and flushes them when stopped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.observer import FanoutObserver
from controllers.process import stop_process
from controllers.reconcile import Manager
from controllers.schema import RecordKind
from controllers.telemetry.otel_env import otlp_from_environment
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.conftest import ROOT, wait_until
from tests.golang.telemetry import Published
from tests.otel import reconciler
from tests.otel.spans import Received, assert_links_are_the_provenance, assert_writes_are_children, trigger_kinds

CM = "/api/v1/namespaces/default/configmaps"
FAIL_FIRST = 2
BURST = 12
REQUEUE_AFTER = 0.2
WORKER = "py-otel"


def configmap(name: str, n: int, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"n": str(n)},
            "metadata": {"name": name, "annotations": annotations or {}}}


def settled(reconciled: reconciler.WritingReconciler, quiet: float = 1.0) -> bool:
    """True once no attempt started for ``quiet`` seconds (polled)."""
    before = dict(reconciled.attempts)
    time.sleep(quiet)
    return reconciled.attempts == before


@pytest.fixture
def otlp_env(otel_collector, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CTRLSCOPE_OTLP_ENDPOINT", otel_collector.endpoint)
    monkeypatch.setenv("OTEL_BSP_SCHEDULE_DELAY", "100")  # ms: the batch goes out soon after each span
    return otel_collector


def test_reconcile_spans_link_to_their_triggers_and_parent_their_writes(sim, otlp_env, redis_url: str, prefix: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    collector = otlp_env
    monkeypatch.setenv("CTRLSCOPE_OTEL_WORK", "0.1")
    client = KubernetesClient.for_host(sim.url)
    client.send_json("POST", CM, configmap("flaky", 1, {reconciler.FAIL_FIRST: str(FAIL_FIRST)}))
    client.send_json("POST", CM, configmap("burst", 0))
    client.send_json("POST", CM, configmap("later", 1, {reconciler.REQUEUE_FIRST: str(REQUEUE_AFTER)}))
    publisher = RedisPublisher(redis_url, prefix=prefix).start()
    telemetry = TelemetryObserver(publisher, worker=WORKER)
    sink = otlp_from_environment(worker=WORKER)
    assert sink is not None
    manager = Manager(KubernetesClient.for_host(sim.url), observer=FanoutObserver(telemetry, sink))
    reconciled = reconciler.setup(manager)
    manager.start()
    try:
        wait_until(lambda: reconciled.attempts.get("default/flaky", 0) >= FAIL_FIRST + 1 and reconciled.writes,
                   timeout=20, what="the flaky key to fail twice and then write")
        for n in range(1, BURST + 1):  # while the key is queued and while it is being processed
            client.send_json("PATCH", f"{CM}/burst", {"data": {"n": str(n)}},
                             headers={"Content-Type": "application/merge-patch+json"})
            time.sleep(0.02)
        wait_until(lambda: settled(reconciled), timeout=30, what="the controller to settle")
    finally:
        manager.stop()
        sink.shutdown()
        publisher.stop()
    attempts = sum(reconciled.attempts.values())
    spans = collector.wait_for(lambda s: sum(x.name == f"reconcile {reconciler.CONTROLLER}" for x in s) >= attempts,
                               what=f"{attempts} reconcile spans")
    received = Received(spans, reconciler.CONTROLLER)
    assert len(received.reconciles) == attempts
    assert {s.resource.get("service.name") for s in spans} == {WORKER}

    # The key that fails twice: error, error, success (which writes), then the write's own event.
    flaky = received.attempts("default/flaky")
    assert [s.attributes["ctrlscope.result"] for s in flaky] == ["error", "error", "success", "success"]
    assert [s.status for s in flaky] == ["ERROR", "ERROR", "UNSET", "UNSET"]
    assert all("injected failure" in s.status_message for s in flaky[:2])
    assert [s.attributes.get("ctrlscope.rate_limiter.delay") for s in flaky] == [0.005, 0.01, None, None]
    assert trigger_kinds(flaky[0]) == ["event"] and received.linked(flaky[0])[0].name == "event create default/flaky"
    assert trigger_kinds(flaky[1]) == ["retry"] and trigger_kinds(flaky[2]) == ["retry"]
    assert trigger_kinds(flaky[3]) == ["event"]
    write_event = received.linked(flaky[3])[0]
    assert write_event.name == "event update default/flaky"
    (write,) = [w for w in received.writes if w.parent_span_id == flaky[2].span_id]
    # The controller's own write came back: the event is marked self (its rv is the one the PATCH
    # got back), it changed the field written, and the attempt it alone caused is self-triggered.
    assert write_event.attributes["ctrlscope.event.self"] is True
    assert write_event.attributes["ctrlscope.event.rv"] == write.attributes["ctrlscope.rv"]
    diff = write_event.attributes["ctrlscope.event.diff"]
    assert "data.observed" in diff and set(diff) <= {"data.observed", "metadata.managedFields"}, diff
    assert write_event.attributes["ctrlscope.event.source"] == f"controller/{reconciler.CONTROLLER} (For)"
    assert flaky[3].links[0].attributes["ctrlscope.event.self"] is True
    assert [s.attributes["ctrlscope.self_triggered"] for s in flaky] == [False, False, False, True]
    assert write.name == "PATCH /api/v1/namespaces/default/configmaps/flaky"
    assert write.attributes["http.response.status_code"] == 200
    assert not [w for w in received.writes if w.parent_span_id == flaky[3].span_id]  # nothing left to write

    # The burst: BURST updates merged into far fewer attempts, which link to every one of them.
    burst = received.attempts("default/burst")
    updates = [e for e in received.events if e.name == "event update default/burst"]
    assert len(updates) >= BURST  # and the controller's own writes' events
    assert len(burst) < BURST
    assert sum(s.attributes["ctrlscope.trigger_count"] for s in burst) == len(updates) + 1  # + the create
    assert max(s.attributes["ctrlscope.trigger_count"] for s in burst) > 1  # dedup merged some

    # A requeue_after: the attempt it asked for links to the attempt that asked, with the delay.
    later = received.attempts("default/later")
    assert [(s.attributes["ctrlscope.result"], s.attributes["ctrlscope.requeue_after"]) for s in later] == [
        ("requeue_after", REQUEUE_AFTER), ("success", 0.0), ("success", 0.0)]  # the last: its own write's event
    assert trigger_kinds(later[1]) == ["requeue_after"]
    assert later[1].links[0].span_id == later[0].span_id
    assert later[1].links[0].attributes["ctrlscope.delay"] == REQUEUE_AFTER
    assert later[1].start_ns - later[0].end_ns >= REQUEUE_AFTER * 1e9 * 0.9

    assert_links_are_the_provenance(received)
    assert_writes_are_children(received, method="PATCH", path_prefix=CM)

    # The links are the triggers the telemetry observer published, attempt by attempt.
    published = Published(redis_url, prefix)
    try:
        starts = published.records(f"w/{WORKER}/controller/{reconciler.CONTROLLER}", RecordKind.RECONCILE_START)
    finally:
        published.close()
    for key in ("default/flaky", "default/burst", "default/later"):
        records = [r for r in starts if r["key"] == key]
        spans_of_key = received.attempts(key)
        assert [(r["trigger_count"], trigger_kinds(r), bool(r.get("self_triggered"))) for r in records] == \
               [(s.attributes["ctrlscope.trigger_count"], trigger_kinds(s), s.attributes["ctrlscope.self_triggered"])
                for s in spans_of_key]
        for record, span in zip(records, spans_of_key, strict=True):
            for trigger, target in zip(record["triggers"], received.linked(span), strict=True):
                if trigger["kind"] in ("event", "resync"):
                    assert target.name == f"event {trigger['type']} {trigger['key']}"
                    assert target.attributes.get("ctrlscope.event.rv") == trigger.get("rv")


def test_runcontrollers_exports_spans_when_an_otlp_endpoint_is_set(sim_kubeconfig: Path, otel_collector,
                                                                   redis_url: str, prefix: str,
                                                                   tmp_path: Path) -> None:
    client = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    client.send_json("POST", CM, configmap("worker-key", 1, {reconciler.FAIL_FIRST: "1"}))
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "OTEL_EXPORTER_OTLP_ENDPOINT": otel_collector.endpoint, "CTRLSCOPE_OTEL_WORK": "0.01"}
    log = tmp_path / "worker.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "manage.py", "runcontrollers", "--controller",
                                 "tests.otel.reconciler:setup", "--kubeconfig", str(sim_kubeconfig),
                                 "--worker-name", "otel-worker", "--status-every", "0"],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    published = Published(redis_url, prefix)
    topic = f"w/otel-worker/controller/{reconciler.CONTROLLER}"
    try:
        # error, success (which writes), success (the write's event): then nothing is pending.
        wait_until(lambda: len([r for r in published.records(topic, RecordKind.RECONCILE)
                                if r["key"] == "default/worker-key"]) >= 3, timeout=30,
                   what="three attempts of the key, as the worker published them")
    finally:
        stop_process(proc)  # SIGTERM: the worker shuts the sink down, which flushes the last batch
        published.close()
    assert proc.returncode == 0, log.read_text()[-3000:]
    spans = otel_collector.wait_for(lambda s: sum(x.name == "reconcile otel-demo" for x in s) >= 3,
                                    what="the worker's three reconcile spans")
    assert {s.resource.get("service.name") for s in spans} == {"otel-worker"}
    assert {s.resource.get("ctrlscope.worker") for s in spans} == {"otel-worker"}
    received = Received(spans, "otel-demo")
    attempts = received.attempts("default/worker-key")
    assert [s.attributes["ctrlscope.result"] for s in attempts] == ["error", "success", "success"]
    assert_links_are_the_provenance(received)
    assert_writes_are_children(received, method="PATCH", path_prefix=CM)
