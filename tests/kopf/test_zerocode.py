"""Zero-code mode end to end, all parts real: a plain kopf operator (``kopf run``, no ctrlscope in it)
handles PodSets on the simulator over HTTP, while ``manage.py runcontrollers --kopf
podsets.demo.ctrlscope.dev`` watches the same objects from another process and publishes what kopf
stores on them to a real Redis. The operator's log says what really happened; the tests compare."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controllers.kopf import controller_name
from controllers.kopf.zerocode import UNSEEN
from controllers.process import stop_process
from controllers.schema import (
    ComponentKind,
    ErrorKind,
    HandlerCause,
    HandlerProgress,
    ObservationMode,
    QueueOp,
    ReconcileResult,
    RecordKind,
    TopicKind,
    worker_topic,
)
from tests.conftest import ROOT, wait_until
from tests.kopf.conftest import create_podset, kopf_versions
from tests.telemetry.test_publisher import read_snapshot, read_stream

RESOURCE = "podsets.demo.ctrlscope.dev"
CONTROLLER = controller_name("demo.ctrlscope.dev", "podsets")
INFORMER = "demo.ctrlscope.dev/v1/PodSet"
WORKER = "zero-code-test"


class Worker:
    """``manage.py runcontrollers --kopf ...`` as a user runs it; output to a log file."""

    def __init__(self, args: list[str], *, name: str, kubeconfig: Path, redis_url: str, prefix: str,
                 log: Path) -> None:
        self.name, self.log, self.redis_url, self.prefix = name, log, redis_url, prefix
        env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "runcontrollers", *args, "--kubeconfig", str(kubeconfig),
                 "--worker-name", name, "--status-every", "0"], cwd=ROOT, env=env, stdout=out,
                stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def components(self) -> dict:
        return read_snapshot(self.redis_url, self.prefix, worker_topic(self.name, TopicKind.COMPONENTS))[1]

    def wait_until_watching(self) -> None:
        """Until the controller has started and its informer has listed (so new objects arrive by watch)."""
        def ready() -> bool:
            assert self.proc.poll() is None, f"the worker exited:\n{self.output()[-3000:]}"
            comps = self.components()
            controller = comps.get(f"{ComponentKind.CONTROLLER}/{CONTROLLER}") or {}
            return bool(controller.get("started") and (comps.get(f"{ComponentKind.INFORMER}/{INFORMER}") or {})
                        .get("synced"))
        wait_until(ready, timeout=30, what="the zero-code worker to watch PodSets")

    def records(self, kind: str, topic_kind: TopicKind = TopicKind.CONTROLLER) -> list[dict]:
        topic = worker_topic(self.name, topic_kind, CONTROLLER)
        return [r for _, frame in read_stream(self.redis_url, self.prefix, topic) for r in frame.get("r", [])
                if r["k"] == kind]

    def attempts(self, key: str, handler: str) -> list[dict]:
        return [r for r in self.records(RecordKind.RECONCILE) if r["key"] == key and r.get("handler") == handler]

    def handlers(self, key: str) -> dict:
        _, state = read_snapshot(self.redis_url, self.prefix, worker_topic(self.name, TopicKind.CONTROLLER, CONTROLLER))
        return (state.get(key) or {}).get("handlers") or {}

    def stop(self) -> None:
        stop_process(self.proc)


@pytest.fixture
def zero_code(kube, sim_kubeconfig: Path, redis_url: str, prefix: str, tmp_path: Path) -> Iterator:
    """``start(*runcontrollers args, name=WORKER)``: a zero-code worker on the PodSets (``kube``: the
    CRD is installed), returned once it watches them."""
    started: list[Worker] = []

    def start(*args: str, name: str = WORKER) -> Worker:
        worker = Worker(["--kopf", RESOURCE, *args], name=name, kubeconfig=sim_kubeconfig, redis_url=redis_url,
                        prefix=prefix, log=tmp_path / f"zero-code-{len(started)}.log")
        started.append(worker)
        worker.wait_until_watching()
        return worker

    yield start
    for worker in started:
        worker.stop()


def logged_attempts(output: str, handler: str) -> int:
    """How many attempts of ``handler`` kopf logged (one line per outcome, kopf's own wording)."""
    return len(re.findall(rf"Handler '{re.escape(handler)}' (failed|succeeded)", output))


@pytest.mark.parametrize("version", kopf_versions())  # the operator's kopf: what it stores must read alike
def test_two_temporary_errors_then_success_are_three_attempts_and_a_permanent_error_is_never_retried(
        version, kube, namespace, kopf_operator, zero_code):
    worker = zero_code()
    operator = kopf_operator("retrying.py", namespace, mode="plain", kopf_version=version)
    create_podset(kube, namespace, "web", audit="fail")
    key = f"{namespace}/web"
    wait_until(lambda: len(worker.attempts(key, "create_fn")) >= 3, timeout=30, what="three create_fn attempts")
    created = worker.attempts(key, "create_fn")
    assert [(a["result"], a["error_kind"], a["retry"]) for a in created] == [
        (ReconcileResult.ERROR, ErrorKind.TEMPORARY, 0),
        (ReconcileResult.ERROR, ErrorKind.TEMPORARY, 1),
        (ReconcileResult.SUCCESS, None, 2)]
    # TemporaryError(delay=1): the delay kopf stored, less the time its PATCH took to reach the watch.
    assert all(0.2 <= a["delay"] <= 1.0 for a in created[:2]), [a["delay"] for a in created]
    assert created[2]["delay"] is None
    assert [a["error"] for a in created] == ["not ready yet (attempt 1)", "not ready yet (attempt 2)", None]
    assert {a["cause"] for a in created} == {HandlerCause.CREATE}
    gaps = [(b["ts"] - a["ts"]) / 1000 for a, b in zip(created, created[1:], strict=False)]
    assert all(0.9 <= g < 5 for g in gaps), gaps

    audit = worker.attempts(key, "audit")
    assert [(a["result"], a["error_kind"], a["error"]) for a in audit] == [
        (ReconcileResult.TERMINAL, ErrorKind.PERMANENT, "audit refused this PodSet")]

    wait_until(lambda: worker.handlers(key).get("create_fn", {}).get("state") == HandlerProgress.SUCCEEDED,
               timeout=10, what="create_fn succeeded in the handlers state")
    handlers = worker.handlers(key)
    assert (handlers["create_fn"]["state"], handlers["create_fn"]["retries"]) == (HandlerProgress.SUCCEEDED, 2)
    assert (handlers["audit"]["state"], handlers["audit"]["error"]) == (HandlerProgress.FAILED,
                                                                        "audit refused this PodSet")
    # kopf stored audit as pending first: it waited for its turn while create_fn ran.
    pending = [r["handler"] for r in worker.records(RecordKind.PROGRESS)
               if r["key"] == key and r["state"] == HandlerProgress.PENDING]
    assert pending == ["audit"]

    # Each retry's countdown on the queue; nothing left there once handled.
    queue = [q for q in worker.records(RecordKind.QUEUE, TopicKind.QUEUE) if q["key"] == key]
    assert [q["delay"] for q in queue if q["op"] == QueueOp.ADD_AFTER] == [a["delay"] for a in created[:2]]
    _, queue_state = read_snapshot(worker.redis_url, worker.prefix, worker_topic(WORKER, TopicKind.QUEUE, CONTROLLER))
    assert key not in queue_state

    # What really happened: as many attempts as kopf logged, and no more after a while.
    operator.wait_for_output("Creation is processed")
    time.sleep(3)
    assert len(worker.attempts(key, "create_fn")) == logged_attempts(operator.output(), "create_fn") == 3
    assert len(worker.attempts(key, "audit")) == logged_attempts(operator.output(), "audit") == 1


def test_the_controller_says_zero_code_and_what_it_cannot_see(zero_code):
    worker = zero_code()
    controller = worker.components()[f"{ComponentKind.CONTROLLER}/{CONTROLLER}"]
    assert controller["mode"] == ObservationMode.ZERO_CODE
    assert controller["unseen"] == list(UNSEEN)
    assert controller["watches"] == [INFORMER] and controller["workers"] == 0


def test_status_storage_is_seen_with_kopf_storage_status(kube, namespace, kopf_operator, zero_code):
    worker = zero_code("--kopf-storage", "status")
    kopf_operator("zerocode_status.py", namespace, mode="plain")
    create_podset(kube, namespace, "db")
    key = f"{namespace}/db"
    wait_until(lambda: len(worker.attempts(key, "retrying")) >= 2, timeout=30, what="two attempts")
    assert [a["result"] for a in worker.attempts(key, "retrying")] == [ReconcileResult.ERROR, ReconcileResult.SUCCESS]
    wait_until(lambda: {h: v["state"] for h, v in worker.handlers(key).items()} == {
        "retrying": HandlerProgress.SUCCEEDED, "second": HandlerProgress.SUCCEEDED}, timeout=10,
        what="both handlers succeeded")


def test_an_operator_with_its_own_prefix_is_invisible_without_kopf_prefix_and_seen_with_it(
        kube, namespace, kopf_operator, zero_code):
    default = zero_code()
    told = zero_code("--kopf-prefix", "ops.example.com", name="told-the-prefix")
    kopf_operator("zerocode_prefix.py", namespace, mode="plain")
    create_podset(kube, namespace, "api")
    key = f"{namespace}/api"
    wait_until(lambda: told.handlers(key).get("provision", {}).get("state") == HandlerProgress.SUCCEEDED,
               timeout=30, what="provision succeeded, seen with --kopf-prefix")
    assert [a["result"] for a in told.attempts(key, "provision")] == [ReconcileResult.ERROR, ReconcileResult.SUCCESS]
    assert not default.handlers(key) and not default.attempts(key, "provision")
    wait_until(lambda: "--kopf-prefix ops.example.com" in default.output(), timeout=10,
               what="the default worker's hint about the operator's prefix")


@pytest.mark.parametrize(("args", "message"), [
    (("--kopf", "widgets"), "the server doesn't have a resource type 'widgets'"),
    (("--kopf", "podsets.nope.example.com"), "serves no API group 'nope.example.com'"),
    (("--kopf", "podsets.v7.demo.ctrlscope.dev"), "serves demo.ctrlscope.dev in v1, not 'v7'"),
    (("--kopf", RESOURCE, "--kopf-prefix", "Not A Prefix"), "expected a DNS subdomain"),
    (("--kopf-storage", "status", "--synthetic", "10"), "only apply with --kopf RESOURCE"),
])
def test_bad_kopf_arguments_fail_with_a_clear_message(args, message, kube, sim_kubeconfig, redis_url, prefix):
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    result = subprocess.run([sys.executable, "manage.py", "runcontrollers", *args, "--kubeconfig",
                             str(sim_kubeconfig)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
