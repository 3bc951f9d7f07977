"""Fidelity: ctrlscope's Python controller against real controller-runtime, on the same scenario.

Both run the fidelity Reconciler (``controllers/examples/fidelity.py`` and ``go/cmd/fidelity``, the
same logic: every reconcile takes WORK seconds; a ConfigMap annotated ``ctrlscope.dev/fail-first: N``
fails its first N reconciles) at the same time, against one API server, on the same objects: they
see the same watch events. Every test runs twice: on the simulator, and on the real kube-apiserver
(``controllers/realcluster``), whose watch delivery is slower and whose timing is not ctrlscope's. The comparison uses only what each published (protocol v1), so it holds
the Python runtime to upstream's per-key behaviour:

- retries: the same results in the same order, the default controller rate limiter's delays (5 ms
  doubling) with the same requeue counts, and forget after the success;
- a burst of updates to one object while it is queued or being reconciled: the queue absorbs
  them (dedup while queued; defer while processing, then requeue after done), and the number of
  reconciles the burst causes agrees within BURST_TOLERANCE (timing decides the exact count in
  both: which updates land while the key is queued versus being processed).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.informers.listwatch import ApiError
from controllers.process import stop_process
from tests.conftest import ROOT, wait_until
from tests.golang.telemetry import Published

NAMESPACE = "fidelity"
WORK = 0.2  # seconds per reconcile: long enough for a burst to land while one runs
FAIL_FIRST = 5
BURST = 20
BURST_TOLERANCE = 2
WORKERS = {"python": "py-fidelity", "go": "go-fidelity"}


def queue_topic(worker: str) -> str:
    return f"w/{worker}/queue/fidelity"


def controller_topic(worker: str) -> str:
    return f"w/{worker}/controller/fidelity"


def configmap(name: str, annotations: dict[str, str] | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": NAMESPACE, "annotations": annotations or {}},
            "data": {"n": "0"}}


@pytest.fixture(params=["simulator", pytest.param("real", marks=pytest.mark.realcluster)])
def cluster_kubeconfig(request: pytest.FixtureRequest):
    """The kubeconfig of the API server both controllers run against."""
    if request.param == "real":
        return request.getfixturevalue("realcluster").kubeconfig
    return request.getfixturevalue("sim_kubeconfig")


@pytest.fixture
def both(go_process, cluster_kubeconfig, redis_url, prefix, tmp_path):
    client = KubernetesClient.from_kubeconfig(str(cluster_kubeconfig))
    try:
        client.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as exc:
        if exc.code != 409:
            raise
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_FIDELITY_NAMESPACE": NAMESPACE, "CTRLSCOPE_FIDELITY_WORK": str(WORK)}
    with open(tmp_path / "py-fidelity.log", "wb") as log:
        py = subprocess.Popen([sys.executable, "manage.py", "runcontrollers", "--controller",
                               "controllers.examples.fidelity:setup", "--kubeconfig", str(cluster_kubeconfig),
                               "--worker-name", WORKERS["python"], "--status-every", "0"],
                              cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    go = go_process("fidelity", "--kubeconfig", str(cluster_kubeconfig), "--worker-name", WORKERS["go"],
                    "--namespace", NAMESPACE, "--work", f"{int(WORK * 1000)}ms")
    published = Published(redis_url, prefix)
    try:
        for worker in WORKERS.values():
            wait_until(lambda w=worker: (published.state(f"w/{w}/components").get("controller/fidelity") or {})
                       .get("started"), timeout=60, what=f"{worker}'s controller to start")
        yield client, published
    finally:
        published.close()
        stop_process(py)
        go.stop()


def key_records(published: Published, topic: str, kind: str, key: str) -> list[dict]:
    return [r for r in published.records(topic, kind) if r.get("key") == key]


def settled(published: Published, key: str) -> bool:
    """Neither queue holds the key any more (nothing queued, processing or waiting)."""
    # One snapshot read per queue: the key may leave the queue between two reads.
    states = (published.state(queue_topic(w)) for w in WORKERS.values())
    return all(state.get(key, {}).get("s", "idle") == "idle" for state in states)


def test_retries_follow_the_default_controller_rate_limiter_in_both(both):
    client, published = both
    key = f"{NAMESPACE}/flaky"
    client.send_json("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                     configmap("flaky", {"ctrlscope.dev/fail-first": str(FAIL_FIRST)}))
    for worker in WORKERS.values():
        wait_until(lambda w=worker: any(r["result"] == "success" for r in
                                        key_records(published, controller_topic(w), "reconcile", key)),
                   timeout=60, what=f"{worker} to converge")
    seen = {}
    for runtime, worker in WORKERS.items():
        results = [r["result"] for r in key_records(published, controller_topic(worker), "reconcile", key)]
        queue = key_records(published, queue_topic(worker), "queue", key)
        retries = [(r["delay"], r["requeues"]) for r in queue if r["op"] == "add_rate_limited"]
        forgets = [r["requeues"] for r in queue if r["op"] == "forget"]
        seen[runtime] = (results, retries, forgets)
        assert results == ["error"] * FAIL_FIRST + ["success"], (runtime, results)
        assert [d for d, _ in retries] == pytest.approx([0.005 * 2 ** i for i in range(FAIL_FIRST)]), (runtime, retries)
        assert [n for _, n in retries] == list(range(1, FAIL_FIRST + 1)), (runtime, retries)
        assert forgets[-1] == FAIL_FIRST, (runtime, forgets)
    print(f"retries: {seen['go'][1]}")
    assert seen["python"] == seen["go"]


def test_a_burst_of_updates_is_absorbed_alike(both):
    client, published = both
    key = f"{NAMESPACE}/burst"
    path = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
    client.send_json("POST", path, configmap("burst"))
    for worker in WORKERS.values():
        wait_until(lambda w=worker: key_records(published, controller_topic(w), "reconcile", key),
                   timeout=30, what=f"{worker}'s first reconcile")
    wait_until(lambda: settled(published, key), timeout=30, what="both queues to settle")
    before = {w: len(key_records(published, controller_topic(w), "reconcile", key)) for w in WORKERS.values()}
    ops_before = {w: len(key_records(published, queue_topic(w), "queue", key)) for w in WORKERS.values()}
    for i in range(BURST):
        client.send_json("PUT", f"{path}/burst", {**configmap("burst"), "data": {"n": str(i + 1)}})
    time.sleep(WORK)
    wait_until(lambda: settled(published, key), timeout=30, what="both queues to settle after the burst")
    counts = {}
    for runtime, worker in WORKERS.items():
        ops = [r["op"] for r in key_records(published, queue_topic(worker), "queue", key)][ops_before[worker]:]
        reconciles = len(key_records(published, controller_topic(worker), "reconcile", key)) - before[worker]
        counts[runtime] = reconciles
        assert ops.count("add") + ops.count("dedup") + ops.count("defer") == BURST, (runtime, ops)
        assert ops.count("dedup") + ops.count("defer") > 0, (runtime, ops)  # the burst was absorbed
        assert ops.count("requeue") == ops.count("get") - ops.count("add"), (runtime, ops)
        assert 1 <= reconciles < BURST, (runtime, reconciles)
    print(f"burst of {BURST} updates: reconciles {counts}")  # shown with -s; the closing numbers
    assert abs(counts["python"] - counts["go"]) <= BURST_TOLERANCE, counts
