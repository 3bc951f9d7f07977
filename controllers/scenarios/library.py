"""The scenarios. Each narrates what to watch and checks, at the end, that it really happened.

Implemented here: retry storm and pod killer (measured by pod counts from the API) and burst
coalescing and watch break and relist (handler calls, reconciles, lists, tombstones and the cache,
read from the worker's telemetry), and controller restart (the worker is killed and supervised
back) and leader failover (two replicas on a Lease; the holder is killed), and kopf versus the
reconciler (both frameworks' retries under the same errors, from both workers' telemetry), and
watcher versus informer (a raw watch loop's three common shapes beside the source document's informer,
measured by the server's request counts and the sides' telemetry: ``watcher_vs_informer.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from controllers.examples.podset import GROUP, KOPF
from controllers.informers import ApiError
from controllers.kopf import controller_name
from controllers.scenarios import watcher_vs_informer as wvi
from controllers.scenarios.base import KOPF_WORKER, Scenario, ScenarioContext, ScenarioResult
from controllers.schema import (
    FAILED_RESULTS,
    ComponentKind,
    HandlerEvent,
    QueueOp,
    RecordKind,
    TopicKind,
    WatchEndReason,
)

HANDLERS, RECONCILER = "handlers", "reconciler"
RECONCILER_CONTROLLER = "podset"
"""The controller the Python worker runs the PodSet Reconciler as (``podset._wire``)."""
KOPF_CONTROLLER = controller_name(GROUP, "podsets")
KOPF_DEFAULT_BACKOFF = 60.0
"""kopf's ``settings.execution.default_backoff``, for when no failed attempt says otherwise."""
LUCKY_ROUNDS = 4
"""How often kopf-vs-reconciler scales up again when kopf's handler succeeded despite the errors."""


def _fresh_podsets(ctx: ScenarioContext, podsets: list[tuple[str, str]], replicas: int) -> None:
    """(Re)create each ``(name, implementation)`` PodSet and wait until each has ``replicas`` pods."""
    for name, implementation in podsets:
        ctx.recreate_podset(name, implementation, replicas)
    for name, _ in podsets:
        if ctx.wait_for(lambda n=name: len(ctx.pods_of(n)) == replicas, timeout=30) is None:
            raise RuntimeError(f"{name} did not reach {replicas} pods before the scenario began")


def _prepare(ctx: ScenarioContext, prefix: str, replicas: int) -> tuple[str, str]:
    """A handler-driven and a reconciled PodSet, fresh and settled."""
    by_handlers, by_reconciler = f"{prefix}-handlers", f"{prefix}-reconciler"
    _fresh_podsets(ctx, [(by_handlers, HANDLERS), (by_reconciler, RECONCILER)], replicas)
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
    ctx.clock.sleep(0.5)  # let the set-up events drain so the window below counts only the burst
    start_ms = ctx.wall_ms()
    ctx.say("200 spec updates to each PodSet within about a second, from 8 concurrent writers.")
    templates = {name: ctx.client.get_json(f"{ctx.podsets_path()}/{name}") for name in (by_handlers, by_reconciler)}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: _touch(ctx, templates[job[0]], job[1]),
                      [(name, i) for i in range(200) for name in templates]))
    ctx.sleep(3)
    end_ms = ctx.wall_ms()
    key_h, key_r = f"{ctx.namespace}/{by_handlers}", f"{ctx.namespace}/{by_reconciler}"
    handler_calls = len(ctx.telemetry.records(TopicKind.INFORMER, start_ms, end_ms, lambda r: r.get("k") == RecordKind.HANDLER
                                              and r.get("handler") == "podset-handlers" and r.get("key") == key_h))
    reconciles = len(ctx.telemetry.records(TopicKind.CONTROLLER, start_ms, end_ms,
                                           lambda r: r.get("k") == RecordKind.RECONCILE and r.get("key") == key_r))
    adds = len(ctx.telemetry.records(TopicKind.QUEUE, start_ms, end_ms, lambda r: r.get("k") == RecordKind.QUEUE and r.get("key") == key_r
                                     and r.get("op") in (QueueOp.ADD, QueueOp.DEDUP, QueueOp.DEFER)))
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


def watch_break(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("watch-break")
    if ctx.telemetry is None:
        raise RuntimeError("watch-break reads handler calls and the cache from telemetry: no reader given")
    kept, doomed = "gap-kept", "gap-doomed"
    _fresh_podsets(ctx, [(kept, HANDLERS), (doomed, HANDLERS)], 1)
    ctx.clock.sleep(0.5)
    start_ms = ctx.wall_ms()
    ctx.say("Watches on PodSets are dropped, and re-watching is held up for 2 s (API latency).")
    ctx.faults.latency(verb="watch", resource="podsets", ms=2000)
    try:
        ctx.faults.drop_watches()
        ctx.say(f"Meanwhile {kept} is scaled 1 → 2 → 3 → 4 and {doomed} is deleted; then history is compacted.")
        for replicas in (2, 3, 4):
            ctx.scale(kept, replicas)
        ctx.client.send_json("DELETE", f"{ctx.podsets_path()}/{doomed}")
        ctx.faults.compact_history()
    finally:
        ctx.faults.clear_latency()
    ctx.say("The informer's watch from its old resourceVersion gets 410 Expired: it relists.")
    key_kept, key_doomed = f"{ctx.namespace}/{kept}", f"{ctx.namespace}/{doomed}"

    def handler_records() -> list[dict]:
        return ctx.telemetry.records(TopicKind.INFORMER, start_ms, ctx.wall_ms(),
                                     lambda r: r.get("k") == RecordKind.HANDLER and r.get("handler") == "podset-handlers")

    ctx.wait_for(lambda: any(r["key"] == key_doomed and r["event"] == HandlerEvent.DELETE for r in handler_records()), timeout=20)
    ctx.sleep(1)
    records = handler_records()
    kept_updates = [r for r in records if r["key"] == key_kept and r["event"] == HandlerEvent.UPDATE]
    tombstones = [r for r in records if r["key"] == key_doomed and r.get("tombstone")]
    relisted = ctx.telemetry.records(TopicKind.INFORMER, start_ms, ctx.wall_ms(),
                                     lambda r: r.get("k") == RecordKind.LIST and not r.get("error"))
    def is_expiry(r: dict) -> bool:
        if r.get("k") == RecordKind.WATCH_END:
            return r.get("reason") == WatchEndReason.EXPIRED
        reason = str(r.get("reason", "")).lower()  # a backoff's reason is the error's text
        return r.get("k") == RecordKind.BACKOFF and ("410" in reason or "expired" in reason)

    expired = ctx.telemetry.records(TopicKind.INFORMER, start_ms, ctx.wall_ms(), is_expiry)
    result.measurements.update(updates_seen=len(kept_updates), tombstones=len(tombstones), relists=len(relisted))
    result.claim("the watch ended with 410 Expired and the informer relisted", bool(relisted) and bool(expired),
                 f"{len(expired)} expiry records, {len(relisted)} lists")
    result.claim(f"the handler saw {kept} go from 1 to 4 in one update: states 2 and 3 were never seen",
                 len(kept_updates) == 1, f"{len(kept_updates)} update call(s)")
    result.claim(f"the delete of {doomed} arrived as a DeletedFinalStateUnknown tombstone", len(tombstones) == 1,
                 f"{len(tombstones)} tombstone(s)")
    cache = ctx.telemetry.cache_keys(start_ms)
    server = {f"{ctx.namespace}/{o['metadata']['name']}" for o in ctx.client.get_json(ctx.podsets_path())["items"]}
    result.claim("the cache still equals the server's state", cache is not None and server <= cache and key_doomed not in cache,
                 f"cache has {sorted(cache or [])}")
    return result


def controller_restart(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("controller-restart")
    if ctx.workers is None:
        raise RuntimeError("controller-restart kills the worker: no worker control given")
    by_handlers, by_reconciler = _prepare(ctx, "restart", 2)
    ctx.say("The worker is killed (SIGKILL): no clean shutdown, work in flight is gone.")
    ctx.workers.kill()
    ctx.say("While it is down, both PodSets are scaled from 2 to 4.")
    ctx.scale(by_handlers, 4)
    ctx.scale(by_reconciler, 4)
    if not ctx.workers.wait_restarted(timeout=30):
        raise RuntimeError("the worker did not come back within 30 s")
    ctx.say("The worker is back. Its informers list everything: every PodSet arrives as an Add.")
    took = ctx.wait_for(lambda: len(ctx.pods_of(by_reconciler)) == 4, timeout=30)
    ctx.sleep(3)
    handler_pods = len(ctx.pods_of(by_handlers))
    result.measurements.update(reconciler_converged_after_s=took, handler_pods=handler_pods, desired=4)
    result.claim("the reconciler converged from state: 4 pods", took is not None, f"{len(ctx.pods_of(by_reconciler))} pods")
    result.claim("the handler-only PodSet did not: its on_add re-created pods blind to what exists",
                 handler_pods != 4, f"{handler_pods} pods for 4 desired")
    return result


def leader_failover(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("leader-failover")
    if ctx.lease is None:
        raise RuntimeError("leader-failover needs workers with leader election on a Lease (make demo)")
    added = False
    if ctx.standby is not None:
        ctx.say("A standby replica (worker demo-standby) starts: it lists and watches like the leader, so its "
                "cache is warm, and it campaigns for the Lease.")
        added = ctx.standby.ensure_standby(timeout=60)
    try:
        return _failover(ctx, result)
    finally:
        if added and ctx.standby is not None:
            ctx.say("The standby replica is stopped again (SIGTERM: a leading replica releases its Lease first).")
            ctx.standby.remove_standby()


def _failover(ctx: ScenarioContext, result: ScenarioResult) -> ScenarioResult:
    by_handlers, by_reconciler = _prepare(ctx, "failover", 2)
    before = ctx.lease.holder()  # type: ignore[union-attr]
    ctx.say(f"The leader {before} is killed (SIGKILL): it cannot release its Lease.")
    killed_at = ctx.clock.now()
    ctx.lease.kill()  # type: ignore[union-attr]
    ctx.say("Both PodSets are scaled to 4 while nobody leads. The standby has a warm cache but must wait "
            "for the Lease to expire before it may act.")
    ctx.scale(by_handlers, 4)
    ctx.scale(by_reconciler, 4)
    took_over = ctx.wait_for(lambda: ctx.lease.holder() not in ("", before), timeout=60)  # type: ignore[union-attr]
    converged = ctx.wait_for(lambda: len(ctx.pods_of(by_reconciler)) == 4, timeout=60)
    after = ctx.lease.holder()  # type: ignore[union-attr]
    total = ctx.clock.now() - killed_at
    ctx.say(f"{after} took over; the reconciled PodSet converged {total:.1f} s after the kill.")
    ctx.say("The new leader's handler-only controller starts with an on_add for every cached PodSet — it "
            "creates 4 pods for a PodSet that already has 2.")
    ctx.sleep(3)
    handler_pods = len(ctx.pods_of(by_handlers))
    result.measurements.update(old_leader=before, new_leader=after, takeover_s=took_over, converged_s=total,
                               handler_pods=handler_pods, desired=4)
    same_replica = after.rsplit("-", 1)[0] == before.rsplit("-", 1)[0]
    result.measurements["taken_by"] = "the restarted replica" if same_replica else "the standby replica"
    result.claim("another process took the Lease", took_over is not None and after != before,
                 f"{before} → {after} ({result.measurements['taken_by']})")
    result.claim("the new leader converged the reconciled PodSet to 4 pods", converged is not None,
                 f"{len(ctx.pods_of(by_reconciler))} pods")
    result.claim("the handler-only PodSet did not: the new leader's on_add created pods blind to what exists",
                 handler_pods != 4, f"{handler_pods} pods for 4 desired")
    return result


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


class _Convergence:
    """When each PodSet first had its wanted number of live pods, polled from the API (clock times)."""

    def __init__(self, ctx: ScenarioContext, want: dict[str, int]) -> None:
        self.ctx = ctx
        self.want = dict(want)
        self.at: dict[str, float] = {}

    def retarget(self, want: int) -> None:
        """Every PodSet now wants ``want`` pods: none has converged to that yet."""
        self.want = dict.fromkeys(self.want, want)
        self.at.clear()

    def poll(self) -> bool:
        """Look once; True when every PodSet has converged."""
        for name, want in self.want.items():
            if name not in self.at:
                try:
                    if len(self.ctx.pods_of(name)) == want:
                        self.at[name] = self.ctx.clock.now()
                except ApiError:
                    pass  # a fault may hit our own reads too
        return len(self.at) == len(self.want)

    def watch(self, seconds: float, *, until: Callable[[], bool] | None = None) -> None:
        """Poll for ``seconds`` of real time at most: until ``until()``, by default until every PodSet
        has converged."""
        deadline = self.ctx.clock.now() + seconds
        while True:
            converged = self.poll()
            if (until() if until is not None else converged) or self.ctx.clock.now() >= deadline:
                return
            self.ctx.clock.sleep(0.1)


def kopf_vs_reconciler(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("kopf-vs-reconciler")
    if ctx.telemetry is None or ctx.kopf_telemetry is None:
        raise RuntimeError("kopf-vs-reconciler counts each framework's attempts and API writes from telemetry: it needs "
                           f"readers for the Python worker and the kopf worker ({KOPF_WORKER} in make demo)")
    kopf_worker = f"{ComponentKind.WORKER}/{ctx.kopf_telemetry.worker}"
    if kopf_worker not in ctx.kopf_telemetry.components():
        raise RuntimeError(f"no kopf worker {ctx.kopf_telemetry.worker!r} has published anything: is the kopf PodSet "
                           "operator running (make demo runs it unless --no-kopf)?")
    by_kopf, by_reconciler = "race-kopf", "race-reconciler"
    _fresh_podsets(ctx, [(by_kopf, KOPF), (by_reconciler, RECONCILER)], 2)
    ctx.clock.sleep(0.5)  # let the set-up events drain so the counts below are the scenario's
    start_ms = ctx.wall_ms()
    key_kopf, key_reconciler = f"{ctx.namespace}/{by_kopf}", f"{ctx.namespace}/{by_reconciler}"

    def kopf_attempts(since_ms: float) -> list[dict]:
        return ctx.kopf_telemetry.records(
            TopicKind.CONTROLLER, since_ms, ctx.wall_ms(), name=KOPF_CONTROLLER,
            where=lambda r: r.get("k") == RecordKind.RECONCILE and r.get("key") == key_kopf)

    want = 10
    ctx.say(f"50 % of pod creations now fail with 500; both PodSets are scaled from 2 to {want}.")
    ctx.faults.errors(verb="create", resource="pods", rate=0.5, code=500)
    try:
        ctx.scale(by_kopf, want)
        ctx.scale(by_reconciler, want)
        scaled = ctx.clock.now()
        track = _Convergence(ctx, {by_kopf: want, by_reconciler: want})
        ctx.say("The reconciler's failed key goes back into the workqueue after 5 ms, 10 ms, 20 ms, …; kopf's "
                "failed handler sleeps its whole backoff before the next attempt. The errors go on for 20 s, then "
                "until kopf's next failed attempt.")
        track.watch(20 * ctx.time_scale, until=lambda: by_kopf in track.at)
        for _ in range(LUCKY_ROUNDS):
            attempts = kopf_attempts(start_ms)
            if attempts and attempts[-1].get("result") not in FAILED_RESULTS:
                want += 4  # one attempt creating 4 pods through 50 % errors succeeds 1 time in 16
                ctx.say(f"kopf's handler got all its pods despite the errors (each creation is a coin toss); both "
                        f"PodSets are scaled to {want}, errors still on.")
                ctx.scale(by_kopf, want)
                ctx.scale(by_reconciler, want)
                scaled = ctx.clock.now()
                track.retarget(want)
            since_ms = ctx.wall_ms()
            track.watch(_kopf_backoff(attempts) + 10, until=lambda since_ms=since_ms: bool(kopf_attempts(since_ms)))
            latest = kopf_attempts(since_ms)
            if latest and latest[-1].get("result") in FAILED_RESULTS:
                backoff = _kopf_backoff(latest)
                ctx.say(f"kopf's handler just failed again and will retry after {backoff:g} s. The errors stop now, "
                        "so what follows is one whole kopf backoff.")
                break
        else:
            backoff = _kopf_backoff(kopf_attempts(start_ms))
            ctx.say(f"kopf's handler did not fail again after {LUCKY_ROUNDS} scale-ups: the errors stop now.")
    finally:
        ctx.faults.clear_errors()
    cleared = ctx.clock.now()
    ctx.say("Errors stopped. The reconciler is at most one short retry away; kopf sleeps out its backoff, then "
            "its handler runs again and converges.")
    track.watch(backoff + 30)
    ctx.clock.sleep(0.5)  # the workers publish every 50 ms: let the last records arrive
    end_ms = ctx.wall_ms()

    def after(name: str, since: float) -> float | None:
        at = track.at.get(name)
        return None if at is None else max(0.0, at - since)

    kopf_after, reconciler_after = after(by_kopf, cleared), after(by_reconciler, cleared)
    counts = _activity(ctx, start_ms, end_ms, key_kopf=key_kopf, key_reconciler=key_reconciler)
    result.measurements.update(
        desired=want, kopf_backoff_s=backoff,
        kopf_converged_after_errors_s=kopf_after, reconciler_converged_after_errors_s=reconciler_after,
        kopf_converged_after_scale_s=after(by_kopf, scaled), reconciler_converged_after_scale_s=after(by_reconciler, scaled),
        **counts)
    ctx.say(f"kopf: {counts['kopf_handler_attempts']} handler attempts, {counts['kopf_api_writes']} API writes; "
            f"reconciler: {counts['reconciler_reconciles']} reconciles, {counts['reconciler_api_writes']} API writes.")
    result.claim(f"both converged to {want} pods", kopf_after is not None and reconciler_after is not None,
                 f"kopf {len(ctx.pods_of(by_kopf))}, reconciler {len(ctx.pods_of(by_reconciler))} pods")
    result.claim("the reconciler converged within 2 s of the errors stopping",
                 reconciler_after is not None and reconciler_after <= 2.0, _seconds(reconciler_after))
    result.claim(f"kopf converged at its next retry, about one backoff ({backoff:g} s) after the errors stopped",
                 kopf_after is not None and 0.7 * backoff <= kopf_after <= backoff + 2.0, _seconds(kopf_after))
    return result


def _activity(ctx: ScenarioContext, start_ms: float, end_ms: float, *, key_kopf: str, key_reconciler: str) -> dict[str, int]:
    """What each framework did in [start_ms, end_ms], from its worker's telemetry: kopf's handler
    attempts and the Reconciler's reconciles of their PodSet, and each controller's API writes (GETs
    are not published as writes; kopf's include its own PATCHes of progress and status)."""
    def failed(records: list[dict]) -> int:
        return sum(1 for r in records if r.get("result") in FAILED_RESULTS)

    def failed_writes(records: list[dict]) -> int:
        return sum(1 for w in records if not 200 <= int(w.get("code") or 0) < 300)

    def of(reader: Any, controller: str, kind: RecordKind, key: str | None = None) -> list[dict]:
        return reader.records(TopicKind.CONTROLLER, start_ms, end_ms, name=controller,
                              where=lambda r: r.get("k") == kind and (key is None or r.get("key") == key))

    attempts = of(ctx.kopf_telemetry, KOPF_CONTROLLER, RecordKind.RECONCILE, key_kopf)
    reconciles = of(ctx.telemetry, RECONCILER_CONTROLLER, RecordKind.RECONCILE, key_reconciler)
    kopf_writes = of(ctx.kopf_telemetry, KOPF_CONTROLLER, RecordKind.WRITE)
    reconciler_writes = of(ctx.telemetry, RECONCILER_CONTROLLER, RecordKind.WRITE)
    return {"kopf_handler_attempts": len(attempts), "kopf_failed_attempts": failed(attempts),
            "reconciler_reconciles": len(reconciles), "reconciler_failed_reconciles": failed(reconciles),
            "kopf_api_writes": len(kopf_writes), "kopf_failed_writes": failed_writes(kopf_writes),
            "reconciler_api_writes": len(reconciler_writes), "reconciler_failed_writes": failed_writes(reconciler_writes)}


def _kopf_backoff(attempts: list[dict]) -> float:
    """The delay kopf gave its failed attempts (its backoff), or its default before any failed."""
    return max((float(a.get("delay") or 0) for a in attempts if a.get("result") in FAILED_RESULTS),
               default=KOPF_DEFAULT_BACKOFF)


def watcher_vs_informer(ctx: ScenarioContext) -> ScenarioResult:
    result = ScenarioResult("watcher-vs-informer")
    run = wvi.Run(ctx)
    run.clean()
    for i in range(wvi.DEPLOYMENTS):
        run.create(i)
    ctx.say(f"{wvi.DEPLOYMENTS} Deployments. The source document's informer (worker {wvi.INFORMER_WORKER}) and three raw "
            f"watch loops (worker {wvi.WATCHERS_WORKER}: stops-on-end, restart-from-empty, restart-from-last) start on "
            "them; each raw loop GETs the Deployment of every event, the informer's handler reads its cache.")
    before = ctx.faults.requests()
    run.start_sides()
    stall_s = max(1.0, 3.0 * ctx.time_scale)
    try:
        last = run.changes[-1]
        run.wait_seen(last, wvi.SIDES, timeout=20)
        ctx.say("Steady state: every Deployment is scaled three times. Every side sees every change.")
        for replicas in (2, 3, 4):
            for i in range(wvi.DEPLOYMENTS):
                last = run.scale(i, replicas)
        run.wait_seen(last, wvi.SIDES, timeout=20)
        closed = run.phase("the server closed every watch")
        ctx.say("The API server closes every watch, as it does whenever a watch's timeout runs out. stops-on-end's "
                "for loop simply ends: its program runs on and watches nothing. restart-from-empty watches again from "
                "\"\": every Deployment arrives as ADDED once more.")
        ctx.faults.end_watches()
        run.probe(closed, 0, 5, timeout=10)
        dropped = run.phase("the connection dropped")
        ctx.say("The connection drops and cannot come back for 2 s. Meanwhile a Deployment is created, one scaled and "
                "one deleted. restart-from-empty never hears of the delete: no watch was open, and a new one only "
                "lists what exists.")
        run.during_outage(lambda: (run.create(6), run.scale(1, 5), run.delete(2)), compact=False)
        run.probe(dropped, 3, 5, timeout=10)
        expired = run.phase("410 Expired (history compacted)")
        ctx.say("The connection drops again; a Deployment is created, one scaled and one deleted, and the API server "
                "compacts its history. Resuming from an old resourceVersion now gets 410 Expired: the informer relists, "
                "restart-from-last tries the same resourceVersion again and again.")
        run.during_outage(lambda: (run.create(7), run.scale(4, 5), run.delete(5)), compact=True)
        run.probe(expired, 0, 6, timeout=10)
        ctx.say(f"A network stall: nothing the API server sends arrives for {stall_s:.1f} s. Each side reads a "
                "Deployment the way its program does: the informer from its cache, the raw loops with a GET.")
        stall = run.stalled_reads(run.key(0), stall_s)
        ctx.sleep(2)
        until_ms = ctx.wall_ms()
        cache_keys = set(run.informer.informer.store.list_keys()) if run.informer else set()
        server_keys = run.server_keys()
    finally:
        run.stop_sides()
    after = ctx.faults.requests()
    measured = wvi.measure(run, before=before, after=after, until_ms=until_ms, stall=stall)
    changes = sum(1 for c in run.changes if c.at >= run.started_ms)
    phases = [p.name for p in run.phases]
    result.table = wvi.results_table(measured, changes=changes, stall_s=stall_s,
                                     cache_equal=cache_keys == server_keys, phases=phases)
    for side, r in measured.items():
        slug = side.replace("-", "_")
        result.measurements.update({f"{slug}_requests": r.total_requests, f"{slug}_api_reads": r.api_reads,
                                    f"{slug}_memory_reads": r.memory_reads, f"{slug}_missed": r.missed,
                                    f"{slug}_duplicates": r.duplicates})
    informer = measured[wvi.INFORMER_SIDE]
    watchers = {w: measured[w] for w in wvi.WATCHERS}
    result.measurements.update(changes=changes, stall_s=stall_s, bytes_per_cached_object=informer.bytes_per_object)
    ctx.say("Requests served: informer " + str(informer.total_requests) + "; "
            + ", ".join(f"{w} {r.total_requests}" for w, r in watchers.items()) + ".")
    result.claim("an informer caches, so it lightens the API server: fewer requests than every raw watch loop, "
                 "and its handler's reads come from memory",
                 informer.api_reads == 0 and all(informer.total_requests < r.total_requests and r.api_reads > 0
                                                 for r in watchers.values()),
                 f"informer {informer.total_requests} requests, {informer.memory_reads} reads from memory; "
                 + "; ".join(f"{w} {r.total_requests} requests, {r.api_reads} GETs" for w, r in watchers.items()))
    result.claim("it survives network failures: the informer saw every change and recovered from every fault, each "
                 "raw watch loop missed changes",
                 informer.missed == 0 and all(v is not None for v in informer.recovered.values())
                 and all(r.missed > 0 for r in watchers.values()),
                 f"changes never seen of {changes}: informer {informer.missed}, "
                 + ", ".join(f"{w} {r.missed}" for w, r in watchers.items()))
    held = informer.stall_read[0] and informer.stall_read[1] < 0.05 and all(
        not r.stall_read[0] or r.stall_read[1] >= 0.5 * stall_s for r in watchers.values())
    result.claim("its cache keeps data while the connection is down: during the stall the informer answered from "
                 "memory, every raw watch loop had to wait for the network", held,
                 f"informer {wvi.stall_text(informer.stall_read, stall_s)}; "
                 + "; ".join(f"{w} {wvi.stall_text(r.stall_read, stall_s)}" for w, r in watchers.items()))
    result.claim("the informer's cache equals the API server's Deployments afterwards", cache_keys == server_keys,
                 f"{len(cache_keys)} cached, {len(server_keys)} on the server"
                 + ("" if cache_keys == server_keys else f"; only cached: {sorted(cache_keys - server_keys)}, "
                                                          f"only on the server: {sorted(server_keys - cache_keys)}"))
    return result


def _seconds(value: float | None) -> str:
    return "not converged" if value is None else f"{value:.2f} s"


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("retry-storm", "Retry storm: 50 % API errors for 20 s", (
        "Pod creations fail half of the time for 20 seconds while both PodSets scale from 2 to 10.",
        "The Reconciler raises on the failed call; its key goes back into the workqueue with exponential "
        "backoff (5 ms doubling), and once the errors stop it converges to 10 pods.",
        "The handler-only PodSet made each creation once, inside its update handler. The failed ones are gone: "
        "it stays below 10 and nothing will ever fix it.",
    ), retry_storm, needs_faults=True),
    Scenario("burst-coalescing", "Burst coalescing: 200 updates in a second", (
        "One PodSet of each kind gets 200 spec updates in about a second.",
        "Every update is a watch event, and every event reaches the handler: ~200 handler calls.",
        "The Reconciler's events become workqueue adds of one key. While the key waits it is deduplicated, while "
        "it is processed it is marked dirty and queued once more: 200 adds → far fewer reconciles (how many "
        "depends on how long one reconcile takes), each reading the latest state.",
    ), burst_coalescing),
    Scenario("watch-break", "Watch break and relist: 410, tombstone, a skipped state", (
        "The PodSet watch is cut and cannot come back for 2 s. Meanwhile one PodSet is scaled 1 → 2 → 3 → 4 "
        "and another is deleted, and the API server compacts its history.",
        "The informer's re-watch from its old resourceVersion gets 410 Expired, so it relists and replaces "
        "its cache: the handler gets ONE update from 1 to 4 (states 2 and 3 never happened as far as it "
        "knows) and the deletion as a DeletedFinalStateUnknown tombstone carrying the last state it knew.",
        "No notification was dropped by a buffer: the handler saw a subsequence of the states. The cache is "
        "still exactly the server's state.",
    ), watch_break, needs_faults=True),
    Scenario("controller-restart", "Controller restart: the worker is killed mid-flight", (
        "The worker process is killed, the PodSets are scaled from 2 to 4 while it is down, and it comes back.",
        "The Reconciler needs no memory: on restart the informer lists every PodSet, each becomes a request, "
        "and reconcile compares what exists with what is wanted — it converges to 4.",
        "The handler-only implementation only knows events. The update from 2 to 4 happened while it was "
        "down; after the restart it gets an Add for the PodSet and creates 4 pods on top of the 2 that "
        "exist. Its earlier work is invisible to it, so it is wrong again — this time with too many.",
    ), controller_restart),
    Scenario("leader-failover", "Leader failover: two worker replicas, the leader dies", (
        "Two worker replicas run the same controllers with leader election on a Lease (the demo adds a "
        "standby for the length of the scenario). Both keep warm informer caches; only the leader reconciles "
        "and only the leader runs the handler-only controller.",
        "The leader is killed without releasing the Lease, and both PodSets are scaled while nobody leads.",
        "Once the Lease expires (lease duration, then a retry period) another process takes it — usually the "
        "standby, sometimes the killed replica after the demo's supervisor restarted it; the scenario says "
        "which — and reconciles from the state in its cache: the reconciled PodSet converges with no event "
        "replayed.",
        "The handler-only controller on the new leader starts with an Add for every PodSet and creates pods "
        "blind to the ones that exist: its PodSet ends with too many.",
    ), leader_failover),
    Scenario("kopf-vs-reconciler", "kopf versus a Reconciler: the same errors, two retry policies", (
        "One PodSet is owned by the kopf operator (worker kopf-podsets, controllers/examples/kopf_podsets.py), one "
        "by the Reconciler. 50 % of pod creations fail with 500 for 20 s while both are scaled from 2 to 10 (and "
        "again by 4 whenever kopf gets all its pods through the errors anyway).",
        "Both retry a failed attempt, and each attempt looks at the pods that exist. What differs is when: "
        "controller-runtime's (and ctrlscope's) workqueue requeues a failed key after 5 ms, doubling each "
        "time, and every pod event wakes it at once; kopf retries a failed handler after a fixed backoff "
        "(60 s by default, or a TemporaryError's delay). The demo runs kopf with a 10 s backoff "
        "(PODSET_KOPF_BACKOFF=10) so nobody waits a minute; the scenario reads the real one from kopf's attempts.",
        "The errors stop right after one of kopf's failed attempts: the Reconciler converges within a second or "
        "two (usually it already has, during the errors), kopf one backoff later.",
        "The results count each framework's handler attempts or reconciles and API writes from their telemetry "
        "(kopf's include its own PATCHes: the progress it stores on the PodSet after every attempt).",
    ), kopf_vs_reconciler, needs_faults=True),
    Scenario("watcher-vs-informer", "Watcher versus informer: a raw watch loop and an informer, measured", (
        "The second source document asks: when writing an operator, a Watcher or an Informer? It answers: an "
        "informer caches, so it lightens the API server; it survives network failures; its cache keeps data while "
        "the connection is down. Here both run on the same Deployments: the document's informer program, and the "
        "raw watch loop people write before they meet informers (controllers/examples/raw_watcher.py), in its three "
        "common shapes.",
        "Each raw loop GETs the Deployment of every event (it has no cache); the informer's handler reads its cache. "
        "The server counts every side's requests by its User-Agent.",
        "Then the faults every watch meets: the server closes it (its timeout), the connection drops, history is "
        "compacted (410 Expired), the network stalls. stops-on-end simply stops; restart-from-empty sees every "
        "Deployment again and never hears of a delete made while it was away; restart-from-last survives a drop but "
        "not a 410. The informer resumes, relists on 410, and answers reads from memory through the stall.",
        "The table counts, per side, the requests the server served, reads from memory and from the API, memory per "
        "cached object, changes never seen, duplicates, when each side saw the next change after each fault, how "
        "long a stream end went unanswered, and a read during the stall.",
    ), watcher_vs_informer, needs_faults=True),
    Scenario("pod-killer", "Pod killer: chaos deletes pods", (
        "Two pods of each PodSet are deleted behind the controllers' backs.",
        "The Reconciler watches the pods it owns: every deletion enqueues its PodSet, and the level-based "
        "reconcile recreates the missing pods.",
        "The handler-only implementation reacts only to PodSet events. No PodSet changed, so no handler "
        "runs: it stays two pods short.",
    ), pod_killer),
)}
