"""Provenance and hot-loop detection in a real controller-runtime program (issue 31).

``go/cmd/status-writer`` reconciles the Jobs of one namespace on the simulator and writes a status
condition that says when it reconciled, every time (the loop upstream users report: each status
write is an update event that enqueues the same key). What it published to a real Redis says:

- each event record carries the handler that mapped it (``controller/status-writer (For)``), the
  object's resourceVersions, the changed fields, and ``self`` when it is the status write coming
  back, matched by the resourceVersion in the controller's write record (the REST transport reads
  it from the response);
- from the second attempt on, attempts are ``self_triggered`` with those events as their triggers,
  and a ``hot_loop`` finding opens at the third such attempt in a row, naming the status field that
  keeps changing, listed in the controller's components entry;
- a burst of 20 updates of one object while its key is being processed (go/cmd/fidelity, whose
  Reconcile takes half a second): the one or two attempts that follow list all 20 update events as
  their triggers, with each update's resourceVersion, though the queue merged them;
- the same program watching with ``predicate.GenerationChangedPredicate{}`` writes the same status
  once: its write comes back, the predicate drops it (the dropped event still says ``self``), and no
  attempt is self-triggered and nothing is flagged.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.informers.listwatch import ApiError
from controllers.schema import DETECT_DEFAULTS, HOT_LOOP_ADVICE
from tests.conftest import wait_until
from tests.golang.conftest import GoProcess
from tests.golang.telemetry import Published

PROGRAM = "status-writer"
CONTROLLER = "status-writer"
NAMESPACE = "status-writer"
MAX_WRITES = 6
CHANGING = "status.conditions.0.message"  # the field the reconciler rewrites every time
HOT_LOOP_ATTEMPTS = int(DETECT_DEFAULTS["hot_loop_attempts"])


@pytest.fixture
def status_writer(go_programs: dict[str, Path]) -> Path:
    return go_programs[PROGRAM]


def job(name: str, annotations: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}},
            "spec": {"template": {"spec": {"restartPolicy": "Never",
                                           "containers": [{"name": "main", "image": "busybox:1.36"}]}}}}


def start_writer(binary: Path, kubeconfig: Path, worker: str, tmp_path: Path, redis_url: str, prefix: str,
                 *args: str, env: dict[str, str] | None = None) -> GoProcess:
    """The namespace, and the program running against it until its controller has started."""
    client = KubernetesClient.from_kubeconfig(str(kubeconfig))
    try:
        client.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as exc:
        if exc.code != 409:
            raise
    proc = GoProcess(binary, ["--kubeconfig", str(kubeconfig), "--worker-name", worker, "--namespace", NAMESPACE,
                              "--max-writes", str(MAX_WRITES), *args],
                     redis_url=redis_url, prefix=prefix, log=tmp_path / f"{worker}.log", env=env)
    published = Published(redis_url, prefix)
    try:
        wait_until(lambda: (published.state(f"w/{worker}/components").get(f"controller/{CONTROLLER}") or {})
                   .get("started") or proc.proc.poll() is not None, timeout=60, what=f"{worker}'s controller to start")
    finally:
        published.close()
    assert proc.proc.poll() is None, proc.output()[-3000:]
    return proc


@pytest.fixture
def published(redis_url: str, prefix: str):
    p = Published(redis_url, prefix)
    yield p
    p.close()


def of_key(records: list[dict], key: str) -> list[dict]:
    return [r for r in records if r.get("key") == key or r.get("subject") == key]


def test_a_reconciler_writing_its_status_every_time_is_flagged_hot_loop_naming_the_field(
        status_writer, sim_kubeconfig, published, redis_url, prefix, tmp_path):
    worker = "go-hot-loop"
    topic = f"w/{worker}/controller/{CONTROLLER}"
    key = f"{NAMESPACE}/looper"
    proc = start_writer(status_writer, sim_kubeconfig, worker, tmp_path, redis_url, prefix)
    try:
        KubernetesClient.from_kubeconfig(str(sim_kubeconfig)).send_json(
            "POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", job("looper"))
        wait_until(lambda: [f for f in of_key(published.records(topic, "finding"), key) if f["finding"] == "hot_loop"],
                   timeout=30, what="a hot_loop finding for the looping key")
        # every write has come back once the loop ran out of writes: one attempt after the last
        wait_until(lambda: len(of_key(published.records(topic, "reconcile"), key)) >= MAX_WRITES + 1, timeout=30,
                   what="the loop to run out of writes")
        time.sleep(0.5)  # nothing more should come; the frames of the last attempt are out
        records = of_key(published.records(topic), key)
        components = published.state(f"w/{worker}/components")
    finally:
        proc.stop()

    writes = [r for r in published.records(topic, "write")]
    assert len(writes) == MAX_WRITES, writes
    for w in writes:  # the transport read each write's resourceVersion from the response
        assert (w["method"], w["path"], w["code"]) == ("PUT", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs/looper/status",
                                                       200), w
        assert w["rv"], w
    written = [w["rv"] for w in writes]

    events = [r for r in records if r["k"] == "event"]
    assert events[0]["event"] == "create" and not events[0].get("self"), events[0]
    updates = [e for e in events if e["event"] == "update"]
    assert [u["rv"] for u in updates] == written, (updates, written)  # each write came back, in order
    for u in updates:
        assert u["source"] == f"controller/{CONTROLLER} (For)" and u["requests"] == [key], u
        assert u["self"] is True and u["old_rv"] != u["rv"], u
    # the first write adds the condition (and the status manager's managedFields entry), every later
    # one changes its message
    assert "status.conditions" in updates[0]["diff"], updates[0]
    for u in updates[1:]:
        assert CHANGING in u["diff"] and all(p.startswith("status.") or p == "metadata.managedFields"
                                             for p in u["diff"]), u

    starts = [r for r in records if r["k"] == "reconcile_start"]
    assert len(starts) == MAX_WRITES + 1, starts
    first, rest = starts[0], starts[1:]
    assert [t["type"] for t in first["triggers"]] == ["create"] and not first.get("self_triggered"), first
    for n, (s, rv) in enumerate(zip(rest, written, strict=True)):
        # attempt n+1 ran because of write n coming back, and of nothing else
        assert s.get("self_triggered") is True, (n, s)
        assert s["trigger_count"] == 1, (n, s)
        [t] = s["triggers"]
        assert (t["kind"], t["type"], t["rv"], t["self"]) == ("event", "update", rv, True), (n, t)

    findings = [r for r in records if r["k"] == "finding" and r["finding"] == "hot_loop"]
    opened = findings[0]
    # flagged at the HOT_LOOP_ATTEMPTS-th self-triggered attempt: within the first few attempts
    before = [r for r in records[:records.index(opened)] if r["k"] == "reconcile_start"]
    assert len(before) == 1 + HOT_LOOP_ATTEMPTS, [r["k"] for r in records]
    assert opened["open"] is True and opened["count"] == HOT_LOOP_ATTEMPTS, opened
    detail = opened["detail"]
    # the field that keeps changing first; only status changes (the writer's managedFields entry, which
    # the API server renews on every write, is neither listed nor judged), so the status advice
    assert detail["fields"][0] == CHANGING and all(p.startswith("status.") for p in detail["fields"]), detail
    assert detail["status_only"] is True and detail["advice"] == HOT_LOOP_ADVICE["status"], detail
    assert detail["rate"] > 0, detail
    assert CHANGING in opened["message"], opened
    # later attempts of the streak raise the count; the components entry lists it while open
    assert findings[-1]["open"] is True and findings[-1]["count"] >= findings[0]["count"], findings
    listed = components[f"controller/{CONTROLLER}"]["findings"][f"hot_loop/{key}"]
    assert listed["finding"] == "hot_loop" and listed["subject"] == key and listed["count"] >= HOT_LOOP_ATTEMPTS, listed


def test_with_generation_changed_predicate_the_same_writes_are_never_flagged(
        status_writer, sim_kubeconfig, published, redis_url, prefix, tmp_path):
    worker = "go-no-hot-loop"
    topic = f"w/{worker}/controller/{CONTROLLER}"
    key = f"{NAMESPACE}/calm"
    proc = start_writer(status_writer, sim_kubeconfig, worker, tmp_path, redis_url, prefix, "--predicate", "generation")
    try:
        KubernetesClient.from_kubeconfig(str(sim_kubeconfig)).send_json(
            "POST", f"/apis/batch/v1/namespaces/{NAMESPACE}/jobs", job("calm"))
        # the status write comes back and the predicate drops it
        dropped = wait_until(lambda: [e for e in of_key(published.records(topic, "event"), key)
                                      if e.get("filtered_by")], timeout=30, what="the write's event, dropped")
        time.sleep(1.5)  # time for a loop to show, were there one
        records = of_key(published.records(topic), key)
        components = published.state(f"w/{worker}/components")
    finally:
        proc.stop()

    [write] = published.records(topic, "write")
    [event] = dropped
    assert event["filtered_by"] == "GenerationChangedPredicate" and event["requests"] == [], event
    assert event["self"] is True and event["rv"] == write["rv"] and "status.conditions" in event["diff"], (event, write)
    starts = [r for r in records if r["k"] == "reconcile_start"]
    assert len(starts) == 1 and [t["type"] for t in starts[0]["triggers"]] == ["create"], starts
    assert not any(s.get("self_triggered") for s in starts), starts
    assert not [r for r in records if r["k"] == "finding"], records
    assert components[f"controller/{CONTROLLER}"].get("findings", {}) == {}, components[f"controller/{CONTROLLER}"]


BURST = 20


def test_a_burst_of_updates_while_processing_is_listed_in_full_by_the_attempts_that_follow(
        go_programs, sim_kubeconfig, published, redis_url, prefix, tmp_path):
    fidelity = go_programs["fidelity"]
    worker, namespace = "go-burst", "burst"
    topic = f"w/{worker}/controller/fidelity"
    key = f"{namespace}/burst"
    client = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    client.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    proc = GoProcess(fidelity, ["--kubeconfig", str(sim_kubeconfig), "--worker-name", worker, "--namespace", namespace,
                                "--work", "500ms"], redis_url=redis_url, prefix=prefix, log=tmp_path / "fidelity.log")
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    try:
        wait_until(lambda: (published.state(f"w/{worker}/components").get("controller/fidelity") or {}).get("started"),
                   timeout=60, what="the controller to start")
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "burst", "namespace": namespace},
                "data": {"n": "0"}}
        client.send_json("POST", path, body)
        wait_until(lambda: of_key(published.records(topic, "reconcile_start"), key), timeout=30,
                   what="the first attempt")
        rvs = [client.send_json("PUT", f"{path}/burst", {**body, "data": {"n": str(i + 1)}})["metadata"]["resourceVersion"]
               for i in range(BURST)]
        wait_until(lambda: published.state(f"w/{worker}/queue/fidelity").get(key, {}).get("s", "idle") == "idle"
                   and len(of_key(published.records(topic, "reconcile"), key)) >= 2, timeout=30,
                   what="the queue to settle after the burst")
        starts = of_key(published.records(topic, "reconcile_start"), key)
    finally:
        proc.stop()

    assert [t["type"] for t in starts[0]["triggers"]] == ["create"], starts[0]
    after = starts[1:]
    assert 1 <= len(after) <= 2, after  # the queue merged the burst into one or two attempts
    assert sum(s["trigger_count"] for s in after) == BURST, [s["trigger_count"] for s in after]
    listed = [t for s in after for t in s["triggers"]]
    assert [(t["kind"], t["type"]) for t in listed] == [("event", "update")] * BURST, listed
    assert [t["rv"] for t in listed] == rvs  # every update, in order, with its resourceVersion
    assert not any(s.get("self_triggered") for s in after), after
