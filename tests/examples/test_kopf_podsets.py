"""The kopf PodSet operator (``controllers/examples/kopf_podsets.py``) against the simulator over HTTP,
run by real kopf the two ways a user runs it: ``kopf run`` and ``manage.py runkopf``; and the
``kopf-vs-reconciler`` scenario with it and the Python worker's Reconciler side by side."""

from __future__ import annotations

import time

import orjson
import pytest

from controllers.examples.podset import setup
from controllers.kopf import controller_name
from controllers.reconcile import Manager
from controllers.scenarios import SCENARIOS, ScenarioContext
from controllers.scenarios.telemetry import TelemetryReader
from controllers.schema import SCOREBOARD_TABLE, RecordKind, TopicKind, worker_topic
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.conftest import ROOT, wait_until

# The kopf tests' fixtures: the simulator process, its client, a namespace per test, kopf operators.
from tests.kopf.conftest import create_podset, get_podset, kopf_operator, kube, namespace, sim_kubeconfig  # noqa: F401

# Not imported here: importing it would register its handlers in this process's kopf registry.
OPERATOR = ROOT / "controllers" / "examples" / "kopf_podsets.py"
BACKOFF_ENV = "PODSET_KOPF_BACKOFF"
CONTROLLER = controller_name("demo.ctrlscope.dev", "podsets")


def _pods(kube, ns: str, name: str) -> int:  # noqa: F811
    return len(ScenarioContext(kube, namespace=ns).pods_of(name))


def _scale(kube, ns: str, name: str, replicas: int) -> None:  # noqa: F811
    ScenarioContext(kube, namespace=ns).scale(name, replicas)


@pytest.mark.parametrize("mode", ["plain", "inprocess"])
def test_the_operator_makes_the_pods_match_replicas_and_a_deleted_pod_waits_for_the_next_podset_change(
        mode, kube, namespace, kopf_operator, redis_url, prefix):  # noqa: F811
    op = kopf_operator(OPERATOR, namespace, mode=mode, worker="kopf-podsets-test")
    op.wait_for_output("Activity 'configure' succeeded")
    create_podset(kube, namespace, "web", replicas=3)
    # The other implementations' PodSets are not kopf's.
    create_podset(kube, namespace, "not-mine", replicas=2, implementation="reconciler")
    status = lambda: (get_podset(kube, namespace, "web").get("status") or {}).get("replicas")  # noqa: E731
    wait_until(lambda: _pods(kube, namespace, "web") == 3 and status() == 3, timeout=20, what="3 pods on create")
    for replicas in (5, 2):
        _scale(kube, namespace, "web", replicas)
        wait_until(lambda r=replicas: _pods(kube, namespace, "web") == r and status() == r, timeout=20,
                   what=f"{replicas} pods after scaling")

    # kopf watches PodSets, not pods: a pod deleted behind its back is not replaced...
    victim = ScenarioContext(kube, namespace=namespace).pods_of("web")[0]
    kube.send_json("DELETE", f"/api/v1/namespaces/{namespace}/pods/{victim}")
    wait_until(lambda: _pods(kube, namespace, "web") == 1, timeout=10, what="the pod to go")
    time.sleep(2)
    assert _pods(kube, namespace, "web") == 1, "nothing told kopf about the pod"
    # ...until the PodSet changes: then the handler counts the pods that exist, and creates 2, not 1.
    _scale(kube, namespace, "web", 3)
    wait_until(lambda: _pods(kube, namespace, "web") == 3 and status() == 3, timeout=20, what="3 pods again")
    assert _pods(kube, namespace, "not-mine") == 0, "a reconciler PodSet is left to the reconciler"
    assert not (get_podset(kube, namespace, "not-mine").get("status") or {}).get("replicas")

    output = op.stop()
    assert "a failed handler is retried after 60 s" in output, "kopf's default backoff unless told otherwise"
    if mode == "inprocess":
        # The same operator, seen: its handler attempts and API writes, through the official client.
        from tests.kopf.test_inprocess import records

        topic = worker_topic("kopf-podsets-test", TopicKind.CONTROLLER, CONTROLLER)
        attempts = [r for r in records(redis_url, prefix, topic, RecordKind.RECONCILE)
                    if r["key"] == f"{namespace}/web" and r.get("handler") == "converge"]
        assert len(attempts) == 4 and {a["result"] for a in attempts} == {"success"}
        writes = records(redis_url, prefix, topic, RecordKind.WRITE)
        pods_path = f"/api/v1/namespaces/{namespace}/pods"
        assert sum(w["method"] == "POST" and w["path"] == pods_path for w in writes) == 3 + 2 + 2
        assert sum(w["method"] == "DELETE" and w["path"].startswith(pods_path + "/") for w in writes) == 3
        # v1.7: the official client's writes say which resourceVersion they got back (the created
        # pods' own); kopf's aiohttp patches cannot (their body is read after the trace hook).
        created = [w["rv"] for w in writes if w["method"] == "POST" and w["path"] == pods_path]
        assert len(set(created)) == 7 and all(rv.isdigit() for rv in created)


def test_a_failed_handler_is_retried_after_the_backoff_from_the_environment(kube, namespace, kopf_operator):  # noqa: F811
    from controllers.sim.faults_client import SimFaults

    op = kopf_operator(OPERATOR, namespace, mode="plain", env={BACKOFF_ENV: "2"})
    op.wait_for_output("a failed handler is retried after 2 s")
    faults = SimFaults(kube)
    faults.errors(verb="create", resource="pods", rate=1.0, code=500)
    try:
        create_podset(kube, namespace, "web", replicas=2)
        op.wait_for_output("will try again in 2.0 seconds", timeout=20)
    finally:
        faults.clear_errors()
    cleared = time.monotonic()
    wait_until(lambda: _pods(kube, namespace, "web") == 2, timeout=20, what="2 pods after the errors")
    took = time.monotonic() - cleared
    assert took < 2 + 1.5, f"converged {took:.2f} s after the errors stopped: at kopf's next retry"


def test_the_kopf_vs_reconciler_scenario_holds_at_a_quarter_of_demo_time(
        kube, namespace, kopf_operator, redis_url, prefix):  # noqa: F811
    publisher = RedisPublisher(redis_url, prefix=prefix).start()
    manager = Manager(kube, freeze_gc_after_sync=False, observer=TelemetryObserver(publisher, worker="scn"))
    setup(manager)
    manager.start()
    readers = [TelemetryReader(redis_url, prefix=prefix, worker=w) for w in ("scn", "kopf-scn")]
    op = kopf_operator(OPERATOR, namespace, worker="kopf-scn", env={BACKOFF_ENV: "3"})
    try:
        op.wait_for_output("Activity 'configure' succeeded")
        said: list[str] = []
        ctx = ScenarioContext(kube, namespace=namespace, time_scale=0.25, say=said.append, telemetry=readers[0],
                              kopf_telemetry=readers[1], actor="scenario kopf-vs-reconciler")
        result = SCENARIOS["kopf-vs-reconciler"].run(ctx)
        m = result.measurements
        print(m)
        assert said
        assert result.ok, ([(c.text, c.detail) for c in result.claims if not c.held], m)
        assert m["kopf_backoff_s"] == 3.0
        assert m["kopf_failed_attempts"] >= 1 and m["reconciler_failed_reconciles"] >= 1
        assert m["kopf_api_writes"] > 0 and m["reconciler_api_writes"] > 0
        # The Python worker's scoreboard shows the kopf PodSets from its caches (kopf's own counts: unknown).
        _, rows = readers[0].reader.snapshot(worker_topic("scn", TopicKind.STATUS, SCOREBOARD_TABLE))
        kopf_row = orjson.loads(rows[b"kopf"])
        assert kopf_row["podsets"] >= 1 and kopf_row["api_calls"] is None
    finally:
        for reader in readers:
            reader.close()
        manager.stop()
        publisher.stop()
