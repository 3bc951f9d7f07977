"""The scenarios. Each narrates what to watch and checks, at the end, that it really happened.

Implemented here: retry storm and pod killer (measured by pod counts from the API) and burst
coalescing (handler calls versus reconciles, counted from the worker's telemetry). Still to come
(see the issue): watch break and relist, controller restart, leader failover.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from controllers.scenarios.base import Scenario, ScenarioContext, ScenarioResult

HANDLERS, RECONCILER = "handlers", "reconciler"


def _prepare(ctx: ScenarioContext, prefix: str, replicas: int) -> tuple[str, str]:
    by_handlers, by_reconciler = f"{prefix}-handlers", f"{prefix}-reconciler"
    ctx.ensure_podset(by_handlers, HANDLERS, replicas)
    ctx.ensure_podset(by_reconciler, RECONCILER, replicas)
    for name in (by_handlers, by_reconciler):
        if ctx.wait_for(lambda n=name: len(ctx.pods_of(n)) == replicas, timeout=30) is None:
            raise RuntimeError(f"{name} did not reach {replicas} pods before the scenario began")
    return by_handlers, by_reconciler


def retry_storm(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("retry-storm")
    by_handlers, by_reconciler = _prepare(ctx, "storm", 2)
    ctx.say("50 % of pod creations now fail with 500 for 20 s; both PodSets are scaled from 2 to 10.")
    ctx.faults.errors(verb="create", resource="pods", rate=0.5, code=500)
    try:
        ctx.scale(by_handlers, 10)
        ctx.scale(by_reconciler, 10)
        ctx.say("Watch the workqueue: the reconciler's key backs off 5 ms, 10 ms, 20 ms, … while errors last.")
        ctx.sleep(20)
    finally:
        ctx.faults.clear_errors()
    ctx.say("Errors stopped. The reconciler converges on its next retry; the handler's lost creations stay lost.")
    took = ctx.wait_for(lambda: len(ctx.pods_of(by_reconciler)) == 10, timeout=40)
    handler_pods = len(ctx.pods_of(by_handlers))
    result.measurements.update(reconciler_converged_after_s=took, handler_pods=handler_pods, desired=10)
    result.claim("the reconciler converged to 10 pods after the errors stopped", took is not None,
                 f"{len(ctx.pods_of(by_reconciler))} pods")
    result.claim("the handler-only PodSet drifted: failed creations were never retried", handler_pods < 10,
                 f"{handler_pods} of 10 pods")
    return result


def burst_coalescing(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("burst-coalescing")
    if ctx.telemetry is None:
        raise RuntimeError("burst-coalescing counts handler calls and reconciles from telemetry: no reader given")
    by_handlers, by_reconciler = _prepare(ctx, "burst", 1)
    time.sleep(0.5)  # let the set-up events drain so the window below counts only the burst
    start_ms = time.time() * 1000
    ctx.say("200 spec updates to each PodSet within about a second, from 8 concurrent writers.")
    templates = {name: ctx.client.get_json(f"{ctx.podsets_path()}/{name}") for name in (by_handlers, by_reconciler)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: _touch(ctx, templates[job[0]], job[1]),
                      [(name, i) for i in range(200) for name in templates]))
    ctx.sleep(3)
    end_ms = time.time() * 1000
    key_h, key_r = f"{ctx.namespace}/{by_handlers}", f"{ctx.namespace}/{by_reconciler}"
    handler_calls = len(ctx.telemetry.records("informer", start_ms, end_ms, lambda r: r.get("k") == "handler"
                                              and r.get("handler") == "podset-handlers" and r.get("key") == key_h))
    reconciles = len(ctx.telemetry.records("controller", start_ms, end_ms,
                                           lambda r: r.get("k") == "reconcile" and r.get("key") == key_r))
    adds = len(ctx.telemetry.records("queue", start_ms, end_ms, lambda r: r.get("k") == "queue" and r.get("key") == key_r
                                     and r.get("op") in ("add", "dedup", "defer")))
    ctx.say(f"{handler_calls} handler calls for the handler PodSet; {adds} queue adds became {reconciles} reconciles.")
    result.measurements.update(handler_calls=handler_calls, queue_adds=adds, reconciles=reconciles)
    result.claim("every update reached the handler: about 200 handler calls", handler_calls >= 150, str(handler_calls))
    result.claim("the workqueue coalesced the burst: at most a third as many reconciles as adds",
                 1 <= reconciles and reconciles * 3 <= adds, f"{adds} adds → {reconciles} reconciles")
    return result


def _touch(ctx: ScenarioContext, template: dict, i: int) -> None:
    """One spec change (a generation bump) that changes nothing else: an unconditional update (no
    resourceVersion), so concurrent writers do not conflict."""
    meta = {k: v for k, v in template["metadata"].items() if k != "resourceVersion"}
    body = {**template, "metadata": meta, "spec": {**template["spec"], "revision": i}}
    ctx.client.send_json("PUT", f"{ctx.podsets_path()}/{meta['name']}", body)


def pod_killer(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("pod-killer")
    by_handlers, by_reconciler = _prepare(ctx, "chaos", 4)
    ctx.say("Chaos: two pods of each PodSet are deleted.")
    for name in (by_handlers, by_reconciler):
        for pod in ctx.pods_of(name)[:2]:
            ctx.client.send_json("DELETE", f"/api/v1/namespaces/{ctx.namespace}/pods/{pod}")
    ctx.say("The reconciler watches its pods (EnqueueRequestForOwner) and recreates them; nothing tells the handlers.")
    took = ctx.wait_for(lambda: len(ctx.pods_of(by_reconciler)) == 4, timeout=20)
    ctx.sleep(3)
    handler_pods = len(ctx.pods_of(by_handlers))
    result.measurements.update(reconciler_restored_after_s=took, handler_pods=handler_pods, desired=4)
    result.claim("the reconciler restored 4 pods", took is not None, f"{len(ctx.pods_of(by_reconciler))} pods")
    result.claim("the handler-only PodSet stays at 2 pods", handler_pods == 2, f"{handler_pods} pods")
    return result


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("retry-storm", "Retry storm: 50 % API errors for 20 s", (
        "Pod creations fail half of the time for 20 seconds while both PodSets scale from 2 to 10.",
        "The Reconciler raises on the failed call; its key goes back into the workqueue with exponential "
        "backoff (5 ms doubling), and once the errors stop it converges to 10 pods.",
        "The handler-only PodSet made each creation once, inside its update handler. The failed ones are gone: "
        "it stays below 10 and nothing will ever fix it.",
    ), retry_storm),
    Scenario("burst-coalescing", "Burst coalescing: 200 updates in a second", (
        "One PodSet of each kind gets 200 spec updates in about a second.",
        "Every update is a watch event, and every event reaches the handler: ~200 handler calls.",
        "The Reconciler's events become workqueue adds of one key. While the key waits it is deduplicated, while "
        "it is processed it is marked dirty and queued once more: 200 adds → far fewer reconciles (how many "
        "depends on how long one reconcile takes), each reading the latest state.",
    ), burst_coalescing),
    Scenario("pod-killer", "Pod killer: chaos deletes pods", (
        "Two pods of each PodSet are deleted behind the controllers' backs.",
        "The Reconciler watches the pods it owns: every deletion enqueues its PodSet, and the level-based "
        "reconcile recreates the missing pods.",
        "The handler-only implementation reacts only to PodSet events. No PodSet changed, so no handler "
        "runs: it stays two pods short.",
    ), pod_killer),
)}
