"""What provenance and detection (protocol v1.7) add per event and per reconcile.

The same workload runs through two ``TelemetryObserver``s over an in-memory publisher (not started:
records stay in its buffer, which the benchmark empties between runs, so no Redis and no publisher
thread share the CPU with the timing): the peer with ``detection=None`` -- exactly the hooks'
1.6 work, the records without ``source``/``rv``/``diff``/``self``/``triggers`` -- and the default,
detection on with the protocol's thresholds. Per key and round, the hooks a controller calls:

- an **event**: the informer's ``on_watch_event``, the controller's ``on_event`` with its source and
  both objects (an update: provenance diffs them and checks the rv against the writes), the queue's
  ``on_queue(add)``;
- a **reconcile**: ``on_queue(get)``, ``on_reconcile_start`` (takes the pending triggers, the
  hot-loop rule), the Reconcile's write (``on_request``, with the rv it got back), ``on_reconcile_end``
  (failing/terminal rules, the retry triggers), ``on_queue(forget)``, ``on_queue(done)``.

Workloads: a small ConfigMap (one data field changing), the 3.7 KB Pod of ``bench/informer.py`` (each
container's restartCount changing), a 20-container Pod (24 KB, 20 paths changing: 16 listed, the rest
counted); and the Pod as a hot loop (every event is the controller's own write coming back: findings
open and update). Times are the calling thread's CPU time. The publisher thread's share is shown as
the bytes of the records each cycle adds and their ``orjson.dumps`` time. Goal: detection adds at
most ``GOAL_US`` µs per event and per reconcile on the Pod.

Then the same two observers under the whole pipeline, for scale: ``bench/informer.py``'s canned watch
stream of Pods (half ADDED, half MODIFIED, served by another process) through a SharedInformer to a
Controller whose Reconcile does nothing, measured as this process' CPU time per watch event.
Run: ``python bench/provenance.py [--keys 1000] [-n 10000]``.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.informer import Counter, ServerProcess, canned_stream, make_pod  # noqa: E402
from controllers.informers import SharedInformer  # noqa: E402
from controllers.informers.http_client import KubernetesClient  # noqa: E402
from controllers.reconcile import Controller  # noqa: E402
from controllers.schema import ControllerEvent, QueueOp, ReconcileResult, WatchEventType  # noqa: E402
from controllers.telemetry.detectors import DetectionConfig  # noqa: E402
from controllers.telemetry.publisher import RedisPublisher  # noqa: E402
from controllers.telemetry.telemetry_observer import TelemetryObserver  # noqa: E402

GOAL_US = 5.0
CONTROLLER = "pods"
INFORMER = "v1/Pod"
SOURCE = f"controller/{CONTROLLER} (For)"


def configmap(i: int, rv: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"cm-{i}", "namespace": "team-1", "uid": f"uid-{i}", "resourceVersion": str(rv),
                         "labels": {"app": "web"}},
            "data": {"mode": "blue", "revision": str(rv % 3)}}


def big_pod(i: int, rv: int) -> dict[str, Any]:
    pod = make_pod(i, rv)
    template = pod["spec"]["containers"][0]
    pod["spec"]["containers"] = [dict(template, name=f"c{n}") for n in range(20)]
    status = pod["status"]["containerStatuses"][0]
    pod["status"]["containerStatuses"] = [dict(status, name=f"c{n}") for n in range(20)]
    return pod


class Workload:
    """Per key, two versions of its object (rv 2i and 2i+1, a status field apart) that the events
    alternate between; a write's rv is the next event's (``hot``: the controller's own) or never seen."""

    def __init__(self, make: Callable[[int, int], dict[str, Any]], keys: int, *, hot: bool) -> None:
        self.objects = [(make(i, 2 * i), make(i, 2 * i + 1)) for i in range(keys)]
        self.keys = [f"{o[0]['metadata']['namespace']}/{o[0]['metadata']['name']}" for o in self.objects]
        self.paths = [f"/api/v1/namespaces/{k.replace('/', '/pods/')}/status" for k in self.keys]
        self.hot = hot
        self.size = len(orjson.dumps(self.objects[0][0]))

    def events(self, obs: TelemetryObserver, rnd: int) -> None:
        on_watch_event, on_event, on_queue = obs.on_watch_event, obs.on_event, obs.on_queue
        for key, pair in zip(self.keys, self.objects, strict=True):
            old, new = pair[rnd % 2], pair[(rnd + 1) % 2]
            rv = new["metadata"]["resourceVersion"]
            on_watch_event(INFORMER, event_type=WatchEventType.MODIFIED, key=key, resource_version=rv)
            on_event(CONTROLLER, event=ControllerEvent.UPDATE, key=key, requests=[key], source=SOURCE, old=old,
                     new=new)
            on_queue(CONTROLLER, op=QueueOp.ADD, key=key, depth=1)

    def reconciles(self, obs: TelemetryObserver, rnd: int) -> None:
        on_queue, start, request, end = obs.on_queue, obs.on_reconcile_start, obs.on_request, obs.on_reconcile_end
        for key, path, pair in zip(self.keys, self.paths, self.objects, strict=True):
            # hot: the write makes the version the next round's event brings (rv of pair[rnd % 2])
            rv = pair[rnd % 2]["metadata"]["resourceVersion"] if self.hot else f"w{rnd}"
            on_queue(CONTROLLER, op=QueueOp.GET, key=key, depth=0, duration=0.001)
            start(CONTROLLER, key=key, worker=0)
            request(method="PATCH", path=path, code=200, duration=0.002, rv=rv)
            end(CONTROLLER, key=key, worker=0, duration=0.003, result=ReconcileResult.SUCCESS)
            on_queue(CONTROLLER, op=QueueOp.FORGET, key=key, depth=0)
            on_queue(CONTROLLER, op=QueueOp.DONE, key=key, depth=0, duration=0.003)


def observer(detection: DetectionConfig | None) -> tuple[TelemetryObserver, RedisPublisher]:
    # Never started (no connection); frames as large as a round, so that no record wakes a thread.
    pub = RedisPublisher("redis://127.0.0.1:1/0", buffer_limit=10_000_000, max_frame_items=10_000_000)
    obs = TelemetryObserver(pub, worker="bench", detection=detection)
    obs.on_informer(INFORMER, fifo="DeltaFIFO", resync_period=0.0)
    obs.on_controller(CONTROLLER, watches=[INFORMER], workers=1, started=True)
    return obs, pub


def measure(work: Workload, rounds: int) -> dict[str, dict[str, float]]:
    """Per configuration (``off``: the peer, ``on``): µs per event and per reconcile (best round),
    and the bytes and encode µs of the records per cycle. Times are the thread's CPU time (a busy
    machine's other processes do not count), and the two run round by round in turn, so that what
    else the machine does (caches, frequency) weighs on both alike."""
    runs = {"off": observer(None), "on": observer(DetectionConfig())}
    out = {name: {"event": float("inf"), "reconcile": float("inf"), "bytes": 0.0, "encode": 0.0} for name in runs}
    n = len(work.keys)
    for rnd in range(rounds):
        for name, (obs, pub) in runs.items():
            pub._buffer.clear()  # what the publisher thread would have taken
            # The objects are a synced cache's: a worker freezes them out of the collector's reach
            # (gc_freeze.py), so collections here see only what the hooks allocate, as in a worker.
            gc.collect()
            gc.freeze()
            t0 = time.thread_time()
            work.events(obs, rnd)
            t1 = time.thread_time()
            work.reconciles(obs, rnd)
            t2 = time.thread_time()
            gc.unfreeze()
            best = out[name]
            best["event"] = min(best["event"], (t1 - t0) / n * 1e6)
            best["reconcile"] = min(best["reconcile"], (t2 - t1) / n * 1e6)
            if rnd == rounds - 1:
                records = [r for _, r in pub._buffer]
                e0 = time.thread_time()
                best["bytes"] = sum(len(orjson.dumps(r)) for r in records) / n
                best["encode"] = (time.thread_time() - e0) / n * 1e6
    return out


def pipeline(server: ServerProcess, n: int, detection: DetectionConfig | None) -> float:
    """This process' CPU µs per watch event: the canned stream through an informer and a Controller
    (one worker, a Reconcile that does nothing) reporting to a TelemetryObserver."""
    obs, _ = observer(detection)
    informer = SharedInformer(KubernetesClient.for_host(server.url).list_watch("v1", "Pod"), observer=obs,
                              freeze_gc_after_sync=True)
    controller = Controller(CONTROLLER, lambda request: None, observer=obs)
    controller.watch(informer)
    counter = Counter(n)
    informer.add_event_handler(on_add=counter.hit, on_update=counter.hit)
    cpu = time.process_time()
    informer.start()
    controller.start()
    counter.done.wait(300)
    idle = 0
    while idle < 3:  # the queue drained and no worker busy, three looks in a row
        idle = idle + 1 if not len(controller.queue) and not controller.metrics.active_workers else 0
        time.sleep(0.002)
    cpu = time.process_time() - cpu
    controller.stop()
    informer.stop()
    gc.unfreeze()
    gc.collect()
    assert counter.n >= n
    return cpu / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("-n", type=int, default=10_000, help="watch events in the pipeline's canned stream")
    parser.add_argument("--runs", type=int, default=3, help="pipeline runs per observer (best of)")
    args = parser.parse_args()
    workloads = {
        "ConfigMap": Workload(configmap, args.keys, hot=False),
        "Pod": Workload(make_pod, args.keys, hot=False),
        "Pod, 20 containers": Workload(big_pod, args.keys, hot=False),
        "Pod, hot loop": Workload(make_pod, args.keys, hot=True),
    }
    print(f"{args.keys:,} keys, best of {args.rounds} rounds; peer: TelemetryObserver(detection=None)")
    print()
    print("| workload | object | µs/event off → on (added) | µs/reconcile off → on (added) "
          "| record bytes/cycle off → on | encode µs/cycle off → on |")
    print("|---|---:|---:|---:|---:|---:|")
    added: dict[str, tuple[float, float]] = {}
    for name, work in workloads.items():
        results = measure(work, args.rounds)
        off, on = results["off"], results["on"]
        added[name] = (on["event"] - off["event"], on["reconcile"] - off["reconcile"])
        print(f"| {name} | {work.size / 1024:.1f} KB "
              f"| {off['event']:.2f} → {on['event']:.2f} ({added[name][0]:+.2f}) "
              f"| {off['reconcile']:.2f} → {on['reconcile']:.2f} ({added[name][1]:+.2f}) "
              f"| {off['bytes']:.0f} → {on['bytes']:.0f} | {off['encode']:.2f} → {on['encode']:.2f} |")
    event, reconcile = added["Pod"]
    met = event <= GOAL_US and reconcile <= GOAL_US
    print()
    print(f"Goal (the 3.7 KB Pod: at most {GOAL_US:g} µs added per event and per reconcile): "
          f"{'met' if met else 'NOT met'} -- +{event:.2f} µs per event, +{reconcile:.2f} µs per reconcile")

    data, pod_size = canned_stream(args.n)
    server = ServerProcess(data)
    best = {"off": float("inf"), "on": float("inf")}
    for _ in range(args.runs):
        for name, detection in (("off", None), ("on", DetectionConfig())):
            server.reset()
            best[name] = min(best[name], pipeline(server, args.n, detection))
    server.close()
    print()
    print(f"Whole pipeline: {args.n:,} Pod watch events (~{pod_size:,} B) -> SharedInformer -> Controller "
          f"(no-op Reconcile), process CPU µs per event, best of {args.runs}:")
    print("| TelemetryObserver | µs/event | events/s of one core |")
    print("|---|---:|---:|")
    for name in ("off", "on"):
        label = "detection=None (peer)" if name == "off" else "detection on"
        print(f"| {label} | {best[name]:.1f} | {1e6 / best[name]:,.0f} |")
    print(f"detection costs {best['on'] - best['off']:+.1f} µs per event here "
          f"({(best['on'] / best['off'] - 1) * 100:+.0f} %)")


if __name__ == "__main__":
    main()
