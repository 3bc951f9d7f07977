"""In-process mode against real kopf: ``manage.py runkopf -- <kopf run args>`` runs an unmodified
handler file with kopf's own machinery; these tests read what it published to a real Redis while
it handled PodSets on the simulator (over HTTP). The handler-retry test runs once per kopf version
the mode supports (requirements.txt's and requirements-kopf.txt's)."""

from __future__ import annotations

import time

import pytest

from controllers.kopf import controller_name, informer_name
from controllers.schema import (
    ComponentKind,
    ErrorKind,
    HandlerCause,
    HandlerProgress,
    ObservationMode,
    QueueOp,
    ReconcileResult,
    RecordKind,
    Runtime,
    TopicKind,
    WatchEndReason,
    worker_topic,
)
from controllers.sim.faults_client import SimFaults
from tests.conftest import wait_until
from tests.kopf.conftest import create_podset, get_podset, kopf_versions
from tests.telemetry.test_publisher import read_snapshot, read_stream

CONTROLLER = controller_name("demo.ctrlscope.dev", "podsets")
MERGE = {"Content-Type": "application/merge-patch+json"}
WORKER = "kopf-test"


def records(redis_url: str, prefix: str, topic: str, kind: str | None = None) -> list[dict]:
    out = [r for _, frame in read_stream(redis_url, prefix, topic) for r in frame.get("r", [])]
    return [r for r in out if kind is None or r["k"] == kind]


def controller_topic(worker: str = WORKER) -> str:
    return worker_topic(worker, TopicKind.CONTROLLER, CONTROLLER)


def attempts(redis_url: str, prefix: str, key: str, handler: str, worker: str = WORKER) -> list[dict]:
    return [r for r in records(redis_url, prefix, controller_topic(worker), RecordKind.RECONCILE)
            if r["key"] == key and r.get("handler") == handler]


@pytest.mark.parametrize("version", kopf_versions())
def test_temporary_errors_retry_after_their_delay_and_a_permanent_error_is_not_retried(
        version, kube, namespace, kopf_operator, redis_url, prefix):
    op = kopf_operator("retrying.py", namespace, kopf_version=version)
    op.wait_for_output(f"kopf {version} in-process")
    create_podset(kube, namespace, "web", audit="fail")
    key = f"{namespace}/web"
    wait_until(lambda: len(attempts(redis_url, prefix, key, "create_fn")) >= 3, timeout=30,
               what="three create_fn attempts")
    created = attempts(redis_url, prefix, key, "create_fn")
    assert [(a["result"], a["error_kind"], a["delay"], a["retry"]) for a in created] == [
        (ReconcileResult.ERROR, ErrorKind.TEMPORARY, 1.0, 0),
        (ReconcileResult.ERROR, ErrorKind.TEMPORARY, 1.0, 1),
        (ReconcileResult.SUCCESS, None, None, 2)]
    assert all(a["cause"] == HandlerCause.CREATE for a in created)
    assert "not ready yet (attempt 1)" in created[0]["error"]
    # kopf waited the delay between attempts (and not its 60 s default backoff).
    gaps = [(b["ts"] - a["ts"]) / 1000 for a, b in zip(created, created[1:], strict=False)]
    assert all(0.9 <= g < 5 for g in gaps), gaps
    # The object really converged the way kopf does it, unchanged by ctrlscope.
    assert wait_until(lambda: (get_podset(kube, namespace, "web").get("status") or {}).get("created"), timeout=10)

    audit = attempts(redis_url, prefix, key, "audit")
    assert [(a["result"], a["error_kind"]) for a in audit] == [(ReconcileResult.TERMINAL, ErrorKind.PERMANENT)]
    assert "audit refused" in audit[0]["error"]

    # The per-object handler view.
    _, state = read_snapshot(redis_url, prefix, controller_topic())
    handlers = state[key]["handlers"]
    assert handlers["create_fn"]["state"] == HandlerProgress.SUCCEEDED and handlers["create_fn"]["retries"] == 2
    assert handlers["audit"]["state"] == HandlerProgress.FAILED
    # kopf runs one handler per cycle (its default lifecycle, asap): audit waited for its turn,
    # pending, while create_fn ran first (create_fn then waited out its delay: retrying, not pending).
    pending = [r for r in records(redis_url, prefix, controller_topic(), RecordKind.PROGRESS)
               if r["key"] == key and r["state"] == HandlerProgress.PENDING]
    assert [r["handler"] for r in pending] == ["audit"], pending

    # Each retry was scheduled on the object's queue with kopf's delay: the timeline's countdown.
    queue = records(redis_url, prefix, worker_topic(WORKER, TopicKind.QUEUE, CONTROLLER), RecordKind.QUEUE)
    assert [q["delay"] for q in queue if q["key"] == key and q["op"] == QueueOp.ADD_AFTER] == [1.0, 1.0]
    assert {QueueOp.ADD, QueueOp.GET, QueueOp.DONE} <= {q["op"] for q in queue if q["key"] == key}

    # The operator's log lines, per object, from inside the handler that logged them.
    logs = records(redis_url, prefix, controller_topic(), RecordKind.LOG)
    mine = [(r["handler"], r["message"]) for r in logs if r["key"] == key and r.get("handler")]
    assert ("create_fn", "create_fn attempt 1") in mine
    assert any(h == "audit" and "failed permanently" in m for h, m in mine)
    # kopf's own API writes for the object (progress annotations, status) are counted.
    writes = records(redis_url, prefix, controller_topic(), RecordKind.WRITE)
    assert any(w["method"] == "PATCH" and w["path"].endswith("/podsets/web") and w["code"] == 200 for w in writes)

    # Who published it, and how it sees the operator.
    _, comps = read_snapshot(redis_url, prefix, worker_topic(WORKER, TopicKind.COMPONENTS))
    assert comps[f"{ComponentKind.WORKER}/{WORKER}"]["runtime"] == Runtime.KOPF
    controller = comps[f"{ComponentKind.CONTROLLER}/{CONTROLLER}"]
    assert controller["mode"] == ObservationMode.IN_PROCESS and controller["unseen"]
    assert controller["watches"] == [informer_name("demo.ctrlscope.dev/v1", "PodSet", namespace)]

    # No retry of the permanent failure, ever (kopf's default backoff would be 60 s; 2 s is plenty
    # for a wrongly scheduled one with a 1 s delay).
    op.wait_for_output("Creation is processed")
    time.sleep(2)
    assert len(attempts(redis_url, prefix, key, "audit")) == 1
    assert len(attempts(redis_url, prefix, key, "create_fn")) == 3


def test_a_timer_and_a_daemon_show_their_periodic_invocations(kube, namespace, kopf_operator, redis_url, prefix):
    op = kopf_operator("periodic.py", namespace)
    op.wait_for_output("in-process")
    create_podset(kube, namespace, "ticker")
    key = f"{namespace}/ticker"
    wait_until(lambda: len(attempts(redis_url, prefix, key, "heartbeat")) >= 4, timeout=20,
               what="four timer invocations")
    beats = attempts(redis_url, prefix, key, "heartbeat")
    assert all(b["cause"] == HandlerCause.TIMER and b["result"] == ReconcileResult.SUCCESS for b in beats), \
        [(b["cause"], b["result"]) for b in beats]
    intervals = [(b["ts"] - a["ts"]) / 1000 for a, b in zip(beats, beats[1:], strict=False)]
    assert all(0.3 <= i <= 2.0 for i in intervals), intervals

    # The daemon is one long-running invocation: started, not ended, logging its ticks.
    wait_until(lambda: sum("daemon tick" in r["message"] for r in records(
        redis_url, prefix, controller_topic(), RecordKind.LOG) if r["key"] == key) >= 3, timeout=20,
        what="three daemon ticks in the published logs")
    starts = [r for r in records(redis_url, prefix, controller_topic(), RecordKind.RECONCILE_START)
              if r["key"] == key and r.get("handler") == "watcher_daemon"]
    assert [s["cause"] for s in starts] == [HandlerCause.DAEMON]
    ticks = [r for r in records(redis_url, prefix, controller_topic(), RecordKind.LOG)
             if r["key"] == key and "daemon tick" in r["message"]]
    assert all(t["handler"] == "watcher_daemon" for t in ticks)
    _, state = read_snapshot(redis_url, prefix, controller_topic())
    assert state[key]["handlers"]["watcher_daemon"]["state"] == HandlerProgress.RUNNING

    # Deleting the object stops the daemon: kopf cancels it, and its attempt ends.
    kube.send_json("DELETE", f"/apis/demo.ctrlscope.dev/v1/namespaces/{namespace}/podsets/ticker")
    wait_until(lambda: attempts(redis_url, prefix, key, "watcher_daemon"), timeout=20, what="the daemon's end")


def test_ending_the_simulators_watches_shows_kopfs_watch_streams_restarting(
        kube, namespace, kopf_operator, redis_url, prefix):
    op = kopf_operator("retrying.py", namespace)
    op.wait_for_output("in-process")
    topic = worker_topic(WORKER, TopicKind.INFORMER, informer_name("demo.ctrlscope.dev/v1", "PodSet", namespace))
    wait_until(lambda: records(redis_url, prefix, topic, RecordKind.WATCH_START), timeout=20, what="kopf's watch")
    assert records(redis_url, prefix, topic, RecordKind.LIST)
    SimFaults(kube).end_watches()
    wait_until(lambda: len(records(redis_url, prefix, topic, RecordKind.WATCH_START)) >= 2, timeout=20,
               what="a second watch stream")
    ends = records(redis_url, prefix, topic, RecordKind.WATCH_END)
    assert ends and ends[0]["reason"] == WatchEndReason.CLOSED
    # Events still flow on the new stream: kopf handles an object created after the restart.
    create_podset(kube, namespace, "after-restart")
    wait_until(lambda: attempts(redis_url, prefix, f"{namespace}/after-restart", "create_fn"), timeout=20,
               what="handling on the restarted stream")
    kinds = [r["k"] for r in records(redis_url, prefix, topic)]
    assert kinds.index(RecordKind.WATCH_END) < len(kinds) - 1 - kinds[::-1].index(RecordKind.WATCH_START)


def _essence(obj: dict) -> dict:
    """What kopf's handling left on an object, without what differs between any two runs."""
    meta = obj["metadata"]
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()}
    return {"spec": obj.get("spec"), "status": obj.get("status"), "finalizers": meta.get("finalizers"),
            "annotations": sorted(annotations), "labels": meta.get("labels"),
            "last-handled": annotations.get("kopf.zalando.org/last-handled-configuration")}


def test_the_operators_behaviour_is_the_same_with_and_without_ctrlscope(kube, kopf_operator, namespace):
    other = f"{namespace}-plain"
    kube.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": other}})
    kopf_operator("retrying.py", namespace, mode="inprocess").wait_for_output("in-process")
    plain = kopf_operator("retrying.py", other, mode="plain")
    for ns in (namespace, other):
        create_podset(kube, ns, "same", audit="fail")
        create_podset(kube, ns, "fine")
    done = lambda ns, name: ((get_podset(kube, ns, name).get("status") or {}).get("created"))  # noqa: E731
    for ns in (namespace, other):
        for name in ("same", "fine"):
            wait_until(lambda ns=ns, name=name: done(ns, name), timeout=30, what=f"{ns}/{name} handled")
    time.sleep(1.5)  # let kopf's final patches (progress purge, last-handled) land
    for name in ("same", "fine"):
        with_ctrlscope, without = _essence(get_podset(kube, namespace, name)), _essence(get_podset(kube, other, name))
        without["spec"], with_ctrlscope["spec"] = None, None  # (equal anyway: same manifests)
        assert with_ctrlscope == without, name
    assert "Creation is processed" in plain.output()


def test_unsupported_kopf_versions_are_refused_with_what_to_do():
    from controllers.kopf.inprocess import KopfVersionError, check_version

    assert check_version("1.43.0") == (1, 43) and check_version("1.45.2") == (1, 45)
    for bad in ("1.42.5", "1.46.0", "2.0", "nonsense"):
        with pytest.raises(KopfVersionError) as exc:
            check_version(bad)
        assert bad in str(exc.value)
    with pytest.raises(KopfVersionError, match="zero-code mode"):
        check_version("1.30.0")


def test_runkopf_says_what_is_missing(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "manage.py", "runkopf", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=60, env={**__import__("os").environ, "CTRLSCOPE_DEMO": "1"})

    nothing = run("--worker-name", "x")
    assert nothing.returncode != 0 and "pass kopf's arguments after --" in nothing.stderr
    missing = run("--kubeconfig", str(tmp_path / "nope.yaml"), "--", "--standalone", "x.py")
    assert missing.returncode != 0 and "no such file" in missing.stderr


def test_events_arriving_while_an_object_is_handled_wait_and_are_handled_together(
        kube, namespace, kopf_operator, redis_url, prefix):
    op = kopf_operator("slow.py", namespace)
    op.wait_for_output("in-process")
    create_podset(kube, namespace, "busy", replicas=1)
    key = f"{namespace}/busy"
    path = f"/apis/demo.ctrlscope.dev/v1/namespaces/{namespace}/podsets/busy"
    queue_topic = worker_topic(WORKER, TopicKind.QUEUE, CONTROLLER)
    wait_until(lambda: any(q["key"] == key for q in records(redis_url, prefix, queue_topic, RecordKind.QUEUE)),
               timeout=20, what="the object's first event")
    time.sleep(0.5)
    kube.send_json("PATCH", path, {"spec": {"replicas": 2}}, headers=MERGE)
    wait_until(lambda: attempts(redis_url, prefix, key, "replicas_changed/spec.replicas") or any(
        r["k"] == RecordKind.RECONCILE_START for r in records(redis_url, prefix, controller_topic())),
        timeout=20, what="the update handler to start")
    for replicas in (3, 4, 5, 6):  # while the handler sleeps
        kube.send_json("PATCH", path, {"spec": {"replicas": replicas}}, headers=MERGE)
    wait_until(lambda: any("-> 6" in (r["message"]) for r in records(redis_url, prefix, controller_topic(), RecordKind.LOG)),
               timeout=30, what="the handler to see replicas 6")
    time.sleep(1.5)
    calls = attempts(redis_url, prefix, key, "replicas_changed/spec.replicas")
    queue = [q for q in records(redis_url, prefix, queue_topic, RecordKind.QUEUE) if q["key"] == key]
    absorbed = [q for q in queue if q["op"] in (QueueOp.DEFER, QueueOp.DEDUP)]
    # Five spec changes; the four made while the handler ran waited behind it and reached the
    # handler as one change (3..5 were never seen), as the queue records show.
    assert len(calls) == 2, [c.get("retry") for c in calls]
    assert {c["cause"] for c in calls} == {HandlerCause.FIELD}
    assert absorbed, [q["op"] for q in queue]
    messages = [r["message"] for r in records(redis_url, prefix, controller_topic(), RecordKind.LOG)
                if r["key"] == key and r["message"].startswith("replicas")]
    assert messages == ["replicas 1 -> 2", "replicas 2 -> 6"], messages


def test_a_careless_operator_leaks_no_secret_value_in_logs_or_errors(kube, namespace, kopf_operator, redis_url,
                                                                     prefix):
    import base64

    from tests.telemetry.test_secret_leaks import every_value

    password = "kopf-s3cr3t-Passw0rd"
    encoded = base64.b64encode(password.encode()).decode()
    op = kopf_operator("leaky.py", namespace)
    op.wait_for_output("in-process")
    kube.send_json("POST", f"/api/v1/namespaces/{namespace}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "data": {"password": encoded},
        "metadata": {"name": "db", "labels": {"ctrlscope.dev/leaky": "yes"}}})
    topic = worker_topic(WORKER, TopicKind.CONTROLLER, controller_name("", "secrets"))
    key = f"{namespace}/db"

    def login_attempts() -> list[dict]:
        return [r for r in records(redis_url, prefix, topic, RecordKind.RECONCILE) if r["key"] == key]

    wait_until(lambda: any(r["result"] == ReconcileResult.SUCCESS for r in login_attempts()), timeout=30,
               what="the login handler to fail once, then succeed")
    wait_until(lambda: records(redis_url, prefix, topic, RecordKind.LOG), what="the operator's log lines")
    import redis

    client = redis.Redis.from_url(redis_url)
    try:
        stored = every_value(client, prefix)
    finally:
        client.close()
    assert stored.count(password.encode()) == 0 and stored.count(encoded.encode()) == 0
    assert stored.count(encoded.rstrip("=").encode()) == 0
    mask = f"<redacted: Secret {namespace}/db password>".encode()
    failed = [r for r in login_attempts() if r["result"] != ReconcileResult.SUCCESS]
    assert failed and mask.decode() in failed[0]["error"], failed
    assert any(mask.decode() in r["message"] for r in records(redis_url, prefix, topic, RecordKind.LOG))
