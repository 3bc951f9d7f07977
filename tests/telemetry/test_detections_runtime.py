"""Provenance and findings (protocol v1.7) from ctrlscope's Python runtime against the simulator over
real HTTP, read back from a real Redis as the dashboard reads them: the runtime hands the observer
each event's source and objects (``Controller.watch``) and each write's resourceVersion
(``KubernetesClient.send``), and the telemetry observer turns them into ``self``, ``triggers`` and
``finding`` records. The encode vectors fix the rules exactly; these tests prove the runtime feeds
them, through the real informer, workqueue and API client.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.reconcile import Manager, Request, Result, TerminalError
from controllers.reconcile.controller import Controller
from controllers.reconcile.predicates import GenerationChangedPredicate, Predicate
from controllers.schema import FindingKind, TopicKind, rate_limiter_max, worker_topic
from controllers.sim import SimCluster
from controllers.sim.faults_client import SimFaults
from controllers.telemetry.detectors import DetectionConfig
from controllers.telemetry.telemetry_observer import FROM_ENV, TelemetryObserver
from controllers.workqueue import ItemExponentialFailureRateLimiter, describe_rate_limiter
from tests.conftest import wait_until
from tests.golang.telemetry import Published

NS = "default"
CHANGED = "status.conditions.0.message"  # the field status_writer changes every time
STS = "/apis/apps/v1/namespaces/default/statefulsets"


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    """No control plane: nothing but the test and its controller writes the StatefulSets (no
    controller acts on them in the simulator), bookmarks every 0.2 s."""
    cluster = SimCluster(port=0, bookmark_interval=0.2, control_plane=False, publish_root_ca=False).start()
    yield cluster
    cluster.stop()


def statefulset(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "namespace": NS, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "serviceName": name,
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def merge_patch(client: KubernetesClient, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return client.send_json("PATCH", path, body, headers={"Content-Type": "application/merge-patch+json"})


@dataclass
class Worker:
    """A Manager publishing through a TelemetryObserver to Redis, and the reader of what it published."""

    client: KubernetesClient
    manager: Manager
    telemetry: TelemetryObserver
    published: Published

    def controller(self, name: str, reconcile: Callable[[Request], Result | None], *,
                   predicates: tuple[Predicate, ...] = (), **kw: Any) -> Controller:
        controller = self.manager.new_controller(name, reconcile, **kw)
        controller.watch(self.manager.informer_for("apps/v1", "StatefulSet", NS), predicates=predicates)
        return controller

    def records(self, kind: TopicKind, name: str, record: str) -> list[dict[str, Any]]:
        return self.published.records(self.telemetry.topic(kind, name), record)

    def findings(self, controller: str, finding: FindingKind, key: str) -> list[dict[str, Any]]:
        return [r for r in self.records(TopicKind.CONTROLLER, controller, "finding")
                if r["finding"] == finding and r["subject"] == key]

    def attempts(self, controller: str, key: str) -> list[dict[str, Any]]:
        return [r for r in self.records(TopicKind.CONTROLLER, controller, "reconcile_start") if r["key"] == key]


@contextlib.contextmanager
def worker(sim: SimCluster, publisher_factory, redis_url: str, prefix: str,
           detection: DetectionConfig | str = FROM_ENV) -> Iterator[Worker]:
    client = KubernetesClient.for_host(sim.url)
    publisher = publisher_factory().start()
    telemetry = TelemetryObserver(publisher, worker="detect", detection=detection)
    manager = Manager(client, observer=telemetry, freeze_gc_after_sync=False)
    published = Published(redis_url, prefix)
    try:
        yield Worker(client, manager, telemetry, published)
    finally:
        manager.stop()
        published.close()


def status_writer(client: KubernetesClient, limit: int) -> tuple[Callable[[Request], None], list[int]]:
    """A reconciler that writes a new status condition message on every attempt (the classic hot
    loop: "reconciled 7 times", a timestamp...), at most ``limit`` times so that a failing test stops."""
    written: list[int] = []
    counter = itertools.count(1)

    def reconcile(request: Request) -> None:
        if len(written) < limit:
            n = next(counter)
            condition = {"type": "Reconciled", "status": "True", "reason": "Done", "message": f"reconciled {n} times"}
            merge_patch(client, f"{STS}/{request.name}/status", {"status": {"conditions": [condition]}})
            written.append(n)

    return reconcile, written


def test_a_reconciler_writing_its_status_every_time_is_a_hot_loop_naming_the_field(
        sim, publisher_factory, redis_url, prefix) -> None:
    with worker(sim, publisher_factory, redis_url, prefix) as w:
        reconcile, written = status_writer(w.client, limit=40)
        w.controller("status-writer", reconcile)
        w.manager.start()
        w.client.send_json("POST", STS, statefulset("loops"))
        hot = wait_until(lambda: [f for f in w.findings("status-writer", FindingKind.HOT_LOOP, "default/loops")
                                  if f["open"]], timeout=20, what="a hot_loop finding")[0]
        attempts = w.attempts("status-writer", "default/loops")
        events = [r for r in w.records(TopicKind.CONTROLLER, "status-writer", "event") if r["key"] == "default/loops"]

    # The first attempt ran for the create; each later one for its own status write coming back.
    assert attempts[0]["triggers"][0]["type"] == "create" and not attempts[0].get("self_triggered")
    streak = attempts[1:hot["count"] + 1]
    assert len(streak) == hot["count"] >= 3, "the finding opens at HOT_LOOP_ATTEMPTS (3) in a row"
    assert all(a.get("self_triggered") for a in streak)
    for attempt in streak:
        (trigger,) = attempt["triggers"]
        assert trigger["kind"] == "event" and trigger["self"] is True and trigger["type"] == "update"
        assert trigger["source"] == "controller/status-writer (For)"
        # (the first write adds the conditions; each later one changes the message)
        assert CHANGED in trigger["diff"] or "status.conditions" in trigger["diff"]
    # Every self event is one of the controller's writes: its rv is what a write got back.
    write_rvs = {r["rv"] for r in w.records(TopicKind.CONTROLLER, "status-writer", "write")}
    assert {e["rv"] for e in events if e.get("self")} <= write_rvs and len(written) >= len(streak)
    assert CHANGED in hot["detail"]["fields"] and CHANGED in hot["message"]
    # Only the status changes: the writer's managedFields entry, renewed by every write, is not judged.
    assert all(p.startswith("status.") for p in hot["detail"]["fields"]), hot["detail"]["fields"]
    assert hot["detail"]["status_only"] is True and "predicate" in hot["detail"]["advice"]
    assert hot["detail"]["rate"] > 0


def test_the_same_reconciler_behind_generation_changed_predicate_is_never_flagged(
        sim, publisher_factory, redis_url, prefix) -> None:
    with worker(sim, publisher_factory, redis_url, prefix) as w:
        reconcile, written = status_writer(w.client, limit=40)
        w.controller("filtered", reconcile, predicates=(GenerationChangedPredicate(),))
        w.manager.start()
        w.client.send_json("POST", STS, statefulset("calm"))
        for replicas in (2, 3, 4):  # spec changes: each passes the predicate and reconciles once
            wait_until(lambda n=replicas: len(written) == n - 1, what=f"attempt {replicas - 1}")
            merge_patch(w.client, f"{STS}/calm", {"spec": {"replicas": replicas}})
        wait_until(lambda: len(written) == 4, what="the fourth attempt")

        def dropped() -> list[dict[str, Any]]:
            return [r for r in w.records(TopicKind.CONTROLLER, "filtered", "event") if r["filtered_by"]]

        wait_until(lambda: len(dropped()) >= 4, what="the four status writes' events, filtered")
        time.sleep(0.5)  # a loop would have run dozens of attempts by now
        filtered = dropped()
        attempts = w.attempts("filtered", "default/calm")
        findings = w.records(TopicKind.CONTROLLER, "filtered", "finding")

    assert len(attempts) == 4 and not any(a.get("self_triggered") for a in attempts)
    assert [a["triggers"][0]["type"] for a in attempts] == ["create", "update", "update", "update"]
    assert not any(t.get("self") for a in attempts for t in a["triggers"]), "spec changes are the test's"
    # The own writes did come back, and the predicate dropped them: that is why nothing loops.
    assert len(filtered) == 4 and all(r.get("self") for r in filtered)
    assert {(r["filtered_by"], r["source"]) for r in filtered} == {("GenerationChangedPredicate",
                                                                   "controller/filtered (For)")}
    assert findings == []


def test_a_burst_of_20_updates_while_processing_and_while_queued_is_listed_on_the_next_attempt(
        sim, publisher_factory, redis_url, prefix) -> None:
    """One worker: ``target``'s first attempt holds it while 10 updates arrive (the dirty re-add);
    then ``blocker``, queued ahead of it, holds the worker while 10 more arrive for the queued key
    (dedup). The attempt that follows absorbed all 20."""
    target_gate, blocker_gate = threading.Event(), threading.Event()
    held: dict[str, list[threading.Event | None]] = {"target": [target_gate], "blocker": [None, blocker_gate]}
    entered: list[str] = []

    def reconcile(request: Request) -> None:
        entered.append(request.name)
        gates = held.get(request.name)
        gate = gates.pop(0) if gates else None  # which of its attempts is held
        if gate is not None:
            gate.wait(30)

    with worker(sim, publisher_factory, redis_url, prefix) as w:
        w.controller("burst", reconcile)
        w.client.send_json("POST", STS, statefulset("blocker"))
        w.manager.start()
        wait_until(lambda: entered == ["blocker"], what="blocker's first attempt")
        wait_until(lambda: w.attempts("burst", "default/blocker"), what="the blocker's attempt published")
        w.client.send_json("POST", STS, statefulset("target"))
        wait_until(lambda: entered[-1:] == ["target"], what="target's first attempt")

        def updates_seen(n: int) -> bool:
            return len([r for r in w.records(TopicKind.CONTROLLER, "burst", "event")
                        if r["key"] == "default/target" and r["event"] == "update"]) >= n

        rvs = [merge_patch(w.client, f"{STS}/target", {"metadata": {"labels": {"n": str(i)}}})
               ["metadata"]["resourceVersion"] for i in range(10)]
        wait_until(lambda: updates_seen(10), what="10 updates while processing")
        merge_patch(w.client, f"{STS}/blocker", {"metadata": {"labels": {"go": "first"}}})  # queued ahead
        wait_until(lambda: len([r for r in w.records(TopicKind.QUEUE, "burst", "queue")
                                if r["key"] == "default/blocker" and r["op"] == "add"]) >= 2,
                   what="blocker queued while target is processing")
        target_gate.set()
        wait_until(lambda: entered[-1:] == ["blocker"], what="blocker holding the worker")
        rvs += [merge_patch(w.client, f"{STS}/target", {"metadata": {"labels": {"n": str(i)}}})
                ["metadata"]["resourceVersion"] for i in range(10, 20)]
        wait_until(lambda: updates_seen(20), what="10 updates while queued")
        blocker_gate.set()
        wait_until(lambda: len(w.attempts("burst", "default/target")) >= 2, what="target's next attempt")
        time.sleep(0.3)  # a second attempt, if the runtime made one, is published by now
        after = w.attempts("burst", "default/target")[1:]
        queue_ops = [r["op"] for r in w.records(TopicKind.QUEUE, "burst", "queue") if r["key"] == "default/target"]

    assert 1 <= len(after) <= 2
    assert sum(a["trigger_count"] for a in after) == 20
    triggers = [t for a in after for t in a["triggers"]]
    assert [t["rv"] for t in triggers] == rvs, "every update, in order, with its resourceVersion"
    assert {(t["kind"], t["type"], t["source"]) for t in triggers} == {("event", "update", "controller/burst (For)")}
    assert all("metadata.labels.n" in t["diff"] for t in triggers)
    # The queue merged the 20 adds (deferred while processing, deduplicated while queued): the
    # attempt's triggers are what is left of them.
    assert queue_ops.count("defer") + queue_ops.count("dedup") == 20


def test_a_silent_watch_is_flagged_within_the_threshold_and_closes_when_events_resume(
        sim, publisher_factory, redis_url, prefix, monkeypatch) -> None:
    monkeypatch.setenv("CTRLSCOPE_DETECT_SILENT_AFTER", "1")
    with worker(sim, publisher_factory, redis_url, prefix) as w:
        informer = w.manager.informer_for("apps/v1", "StatefulSet", NS)
        w.controller("quiet", lambda request: None)
        w.manager.start()
        topic = w.telemetry.topic(TopicKind.INFORMER, informer.name)
        # The server sends a watch a bookmark only once the cluster's revision passed the watch's
        # start (as the API server's cacher does): any write will do.
        w.client.send_json("POST", "/api/v1/namespaces/default/configmaps",
                           {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tick"}})
        wait_until(lambda: len(w.published.records(topic, "bookmark")) >= 2, what="the watch's bookmarks")
        faults = SimFaults(KubernetesClient.for_host(sim.url))
        asked = time.time() * 1000
        faults.stall(4)
        stalled = time.time() * 1000  # in effect by now

        def silent() -> list[dict[str, Any]]:
            return [r for r in w.published.records(topic, "finding") if r["finding"] == FindingKind.WATCH_SILENT]

        opened = wait_until(lambda: [r for r in silent() if r["open"]], timeout=4, what="watch_silent")[0]
        closed = wait_until(lambda: [r for r in silent() if not r["open"]], timeout=10, what="its close")[0]
        entry = w.published.state(worker_topic("detect", TopicKind.COMPONENTS))[f"informer/{informer.name}"]

    assert opened["subject"] == informer.name and opened["count"] == 1
    # Silent since the last bookmark before the stall (they come every 0.2 s).
    assert asked - 1000 <= opened["since"] <= stalled
    # Flagged at the first flush 1 s into the silence (flushes every 20 ms; slack for a busy machine).
    assert opened["since"] + 1000 <= opened["ts"] <= stalled + 1000 + 1000
    assert "1 s" in opened["message"] and opened["detail"]["rv"]
    # The stall ends after 4 s: the held bookmarks and events flow again and close it.
    assert closed["ts"] >= asked + 3900 and closed["since"] == opened["since"]
    assert entry["findings"] == {}


def test_a_failing_key_states_its_next_and_max_delay_and_a_terminal_one_is_terminal(
        sim, publisher_factory, redis_url, prefix) -> None:
    failures = {"default/flaky": 6}
    limiter = ItemExponentialFailureRateLimiter(0.01, 0.08)

    def reconcile(request: Request) -> None:
        key = str(request)
        if request.name == "doomed" and failures.get(key, 1):
            failures[key] = 0
            raise TerminalError("the spec names an image that cannot exist")
        if failures.get(key, 0) > 0:
            failures[key] -= 1
            raise RuntimeError(f"attempt failed, {failures[key]} more to go")

    config = DetectionConfig(failing_after=3)
    with worker(sim, publisher_factory, redis_url, prefix, detection=config) as w:
        w.controller("flaky", reconcile, rate_limiter=limiter)
        w.manager.start()
        w.client.send_json("POST", STS, statefulset("flaky"))
        w.client.send_json("POST", STS, statefulset("doomed"))
        closed = wait_until(lambda: [f for f in w.findings("flaky", FindingKind.FAILING, "default/flaky")
                                     if not f["open"]], timeout=15, what="failing to close")[0]
        failing = [f for f in w.findings("flaky", FindingKind.FAILING, "default/flaky") if f["open"]]
        terminal = wait_until(lambda: w.findings("flaky", FindingKind.TERMINAL, "default/doomed"),
                              what="a terminal finding")
        merge_patch(w.client, f"{STS}/doomed", {"spec": {"replicas": 2}})  # something changed: it succeeds
        terminal = wait_until(lambda: (lambda fs: fs if len(fs) >= 2 else None)(
            w.findings("flaky", FindingKind.TERMINAL, "default/doomed")), what="terminal to close")
        delays = [r["delay"] for r in w.records(TopicKind.QUEUE, "flaky", "queue")
                  if r["key"] == "default/flaky" and r["op"] == "add_rate_limited"]
        results = [r["result"] for r in w.records(TopicKind.CONTROLLER, "flaky", "reconcile")
                   if r["key"] == "default/flaky"]

    assert results == ["error"] * 6 + ["success"]
    assert delays == [0.01, 0.02, 0.04, 0.08, 0.08, 0.08]
    first = failing[0]
    assert first["count"] == 3 and first["detail"]["next_delay"] == delays[2]
    assert first["detail"]["max_delay"] == rate_limiter_max(describe_rate_limiter(limiter)) == 0.08
    assert first["message"].startswith("failed 3 times in a row: RuntimeError: attempt failed")
    # Changes within a second are held: the close carries the last values.
    assert closed["count"] == 6 and closed["detail"]["next_delay"] == 0.08
    assert closed["detail"]["last_error"] == "RuntimeError: attempt failed, 0 more to go"
    assert [t["open"] for t in terminal] == [True, False]
    assert terminal[0]["detail"]["error"] == "TerminalError: the spec names an image that cannot exist"
    assert terminal[0]["message"] == "terminal error: TerminalError: the spec names an image that cannot exist"
