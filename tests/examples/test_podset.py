"""PodSet against the simulator over HTTP: the Reconciler converges, the handler-only version drifts."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import pytest

from controllers.examples.podset import (
    API_VERSION,
    KOPF,
    FlakyReconciler,
    PodSetScoreboard,
    pod_for,
    podset,
    setup,
)
from controllers.informers.http_client import KubernetesClient
from controllers.observer import Observer
from controllers.reconcile import Manager, Request
from controllers.sim import SimCluster
from tests.conftest import wait_until
from tests.sim.conftest import FAST


@pytest.fixture
def cluster(tmp_path):
    sim = SimCluster(port=0, **FAST).start()
    client = KubernetesClient.from_kubeconfig(str(sim.write_kubeconfig(tmp_path / "kubeconfig")))
    yield sim, client
    sim.stop()


def pods_of(client, name: str) -> list[str]:
    owner = client.get_json(f"/apis/{API_VERSION}/namespaces/default/podsets/{name}")
    uid = owner["metadata"]["uid"]
    return sorted(p["metadata"]["name"] for p in client.get_json("/api/v1/namespaces/default/pods")["items"]
                  if any(r.get("uid") == uid for r in p["metadata"].get("ownerReferences") or [])
                  and not p["metadata"].get("deletionTimestamp"))


def scale(client, name: str, replicas: int) -> None:
    obj = client.get_json(f"/apis/{API_VERSION}/namespaces/default/podsets/{name}")
    obj["spec"]["replicas"] = replicas
    client.send_json("PUT", f"/apis/{API_VERSION}/namespaces/default/podsets/{name}", obj)


def test_reconciler_restores_killed_pods_and_the_handler_version_drifts(cluster):
    _, client = cluster
    manager = Manager(client, freeze_gc_after_sync=False)
    setup(manager)
    manager.start()
    try:
        for name, impl in (("by-handlers", "handlers"), ("by-reconciler", "reconciler")):
            client.send_json("POST", f"/apis/{API_VERSION}/namespaces/default/podsets", podset(name, impl, 3))
        wait_until(lambda: len(pods_of(client, "by-handlers")) == 3, what="handler pods")
        wait_until(lambda: len(pods_of(client, "by-reconciler")) == 3, what="reconciler pods")

        # Pod killer: one pod of each dies.
        for name in ("by-handlers", "by-reconciler"):
            client.send_json("DELETE", f"/api/v1/namespaces/default/pods/{pods_of(client, name)[0]}")
        wait_until(lambda: len(pods_of(client, "by-reconciler")) == 3, what="reconciler to restore 3 pods")
        time.sleep(1.0)
        assert len(pods_of(client, "by-handlers")) == 2, "nothing watches the pods: the loss is permanent"

        # Scale both to 5: the handler adds the difference (2) to what it believes exists.
        scale(client, "by-handlers", 5)
        scale(client, "by-reconciler", 5)
        wait_until(lambda: len(pods_of(client, "by-reconciler")) == 5, what="reconciler to reach 5")
        wait_until(lambda: len(pods_of(client, "by-handlers")) == 4, what="handlers to add 2")
        time.sleep(0.5)
        assert len(pods_of(client, "by-handlers")) == 4 and len(pods_of(client, "by-reconciler")) == 5
        status = client.get_json(f"/apis/{API_VERSION}/namespaces/default/podsets/by-reconciler")["status"]
        assert status["replicas"] == 5
    finally:
        manager.stop()


def test_flaky_reconciler_fails_at_its_rate_and_delegates_otherwise():
    calls = []

    class Inner:
        def reconcile(self, request):
            calls.append(request)

    flaky = FlakyReconciler(Inner(), failure_rate=0.5, latency=0, seed=1)
    failures = 0
    for i in range(200):
        try:
            flaky.reconcile(Request("default", f"k{i}"))
        except RuntimeError:
            failures += 1
    assert 70 <= failures <= 130 and len(calls) == 200 - failures
    with pytest.raises(ValueError):
        FlakyReconciler(Inner(), failure_rate=1.5)


class StatusRecorder(Observer):
    """Keeps the latest row of every status table the controllers report."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict] = {}

    def on_status(self, table: str, *, key: str, value: dict | None) -> None:
        self.rows[(table, key)] = value


@contextlib.contextmanager
def scoreboard_rows(client: KubernetesClient) -> Iterator[Callable[[str], dict]]:
    """Both PodSet implementations running in a Manager; yields ``row(implementation)``: the
    scoreboard row last reported for it ({} until then)."""
    status = StatusRecorder()
    manager = Manager(client, observer=status, freeze_gc_after_sync=False)
    setup(manager)
    manager.start()
    try:
        yield lambda impl: status.rows.get((PodSetScoreboard.TABLE, impl)) or {}
    finally:
        manager.stop()


def test_scoreboard_reports_desired_versus_actual_and_convergence_per_implementation(cluster):
    _, client = cluster
    with scoreboard_rows(client) as row:
        for name, impl in (("score-handlers", "handlers"), ("score-reconciler", "reconciler")):
            client.send_json("POST", f"/apis/{API_VERSION}/namespaces/default/podsets", podset(name, impl, 2))
        wait_until(lambda: row("reconciler").get("actual") == 2 and row("handlers").get("actual") == 2,
                   timeout=15, what="both implementations at 2 pods")
        assert row("handlers")["desired"] == 2 and row("handlers")["converged"] == 1
        assert row("handlers")["handler_calls"] >= 1 and row("handlers")["reconciles"] == 0
        assert row("reconciler")["reconciles"] >= 1 and row("reconciler")["handler_calls"] == 0
        for name in ("score-handlers", "score-reconciler"):
            client.send_json("DELETE", f"/api/v1/namespaces/default/pods/{pods_of(client, name)[0]}")
        wait_until(lambda: row("handlers").get("converging_s") is not None, timeout=10,
                   what="the handler PodSet to be reported as diverged")
        wait_until(lambda: row("reconciler").get("last_converge_s") is not None and row("reconciler")["actual"] == 2,
                   timeout=15, what="the reconciler's convergence to be measured")
        assert row("handlers")["actual"] == 1 and row("handlers")["converged"] == 0, "nothing repairs it"
        assert row("reconciler")["api_calls"] >= 3


def test_kopf_podsets_are_left_to_kopf_and_get_their_own_scoreboard_row(cluster):
    _, client = cluster
    with scoreboard_rows(client) as row:
        wait_until(lambda: row("reconciler"), timeout=10, what="a first scoreboard")
        assert not row(KOPF), "no kopf row while no PodSet is kopf's"
        owner = client.send_json("POST", f"/apis/{API_VERSION}/namespaces/default/podsets", podset("by-kopf", KOPF, 2))
        wait_until(lambda: row(KOPF).get("podsets") == 1, timeout=10, what="a kopf row")
        assert (row(KOPF)["desired"], row(KOPF)["actual"], row(KOPF)["converged"]) == (2, 0, 0)
        # What the kopf operator did is in its own process: this worker does not pretend to know it.
        assert all(row(KOPF)[k] is None for k in ("handler_calls", "reconciles", "api_calls", "retried_errors"))
        time.sleep(1)
        assert pods_of(client, "by-kopf") == [], "neither the handlers nor the reconciler touch a kopf PodSet"
        for _ in range(2):  # the pods the kopf operator would make, counted from this worker's cache
            client.send_json("POST", "/api/v1/namespaces/default/pods", pod_for(owner))
        wait_until(lambda: row(KOPF).get("actual") == 2 and row(KOPF)["converged"] == 1, timeout=10,
                   what="the kopf PodSet to be reported converged")
        assert row(KOPF)["last_converge_s"] is not None


def test_a_status_write_that_meets_a_newer_object_is_retried_not_dropped():
    """Regression (tests/chaos): a 409 on the status write was swallowed, waiting for "the next
    event" -- but with another writer touching only metadata, every next event is filtered by
    GenerationChangedPredicate, and the status stayed wrong for good. Now the reconcile requeues."""
    from types import SimpleNamespace

    from controllers.examples.podset import OWNER_INDEX, PodSetReconciler
    from controllers.informers import ApiError
    from controllers.reconcile import Result

    owner = podset("web", "reconciler", 1)
    owner["metadata"].update(uid="u1", resourceVersion="7", generation=1)
    pod = {"metadata": {"name": "web-a", "namespace": "default",
                        "ownerReferences": [{"uid": "u1", "controller": True}]}}
    podsets = SimpleNamespace(store=SimpleNamespace(get_by_key=lambda key: owner if key == "default/web" else None))
    pods = SimpleNamespace(store=SimpleNamespace(by_index=lambda index, uid: [pod] if (index, uid) == (OWNER_INDEX, "u1") else []))

    from controllers.reconcile import Client

    class RecordingApi:
        """The API as the reconciler's Client sees it: the status write conflicts once."""

        conflicts = 1
        writes: list[str] = []

        def resource_path(self, api_version, kind, namespace=None, name=None, subresource=None):
            return f"/apis/{api_version}/namespaces/{namespace}/{kind.lower()}s/{name}/{subresource}"

        def send_json(self, method, path, body=None, **kw):
            self.writes.append(f"{method} {path}")
            if path.endswith("/status") and self.conflicts:
                self.conflicts -= 1
                raise ApiError(409, "Conflict", "the object has been modified")
            return body

    api = RecordingApi()
    reconciler = PodSetReconciler(Client(api), podsets, pods)
    assert reconciler.reconcile(Request("default", "web")) == Result(requeue=True)
    assert reconciler.reconcile(Request("default", "web")) == Result()
    assert api.writes == [f"PUT /apis/{API_VERSION}/namespaces/default/podsets/web/status"] * 2
