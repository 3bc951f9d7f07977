"""A generated fleet: many clusters, workers and controllers publishing into one Redis, for the overview.

``Fleet`` builds ``clusters`` × ``workers`` (each worker watches one cluster, as its ``cluster``
component says) running ``controllers`` controllers between them, all through the real runtime's
telemetry: per worker one RedisPublisher, a TelemetryObserver and a MetricsObserver fanned out as the
Manager wires them, and a MetricsSampler. Nothing is written to Redis by hand, so the dashboard reads
exactly what a real platform team's workers would send.

Every controller watches an informer of its own and has a queue depth and some traffic. Some of
them are in trouble, and the runtime's own detectors say so (protocol v1.7 findings): a key that
fails every attempt (``failing``, with its retries), an attempt that never ends (``slow_reconcile``),
a key no worker takes (``waiting``), and a key whose status writes come back as its next trigger
(``hot_loop``). The detection thresholds are lowered (``DETECTION``) so that those open within
seconds instead of the protocol's minutes.

``run(duration, rate)`` then keeps a steady, low rate of updates: ``rate`` controller updates a second
(one watch event → queue → reconcile → result), round robin over the healthy and failing
controllers, a metrics sample per worker a second, everything flushed every ``FLUSH_S``.

Used by ``bench/overview.py`` (the browser bench) and ``tests/dashboard/test_fleet_overview_browser.py``.
Usage (publish into a Redis until interrupted): ``python bench/fleet.py --redis redis://127.0.0.1:6379/0
--prefix ctrlscope: [--clusters 20] [--controllers 200] [--workers 40] [--rate 50]``.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from controllers.clock import Clock, RealClock  # noqa: E402
from controllers.metrics import FAMILIES, MetricsObserver  # noqa: E402
from controllers.observer import FanoutObserver  # noqa: E402
from controllers.schema import FindingKind, QueueOp, ReconcileResult, WatchEventType  # noqa: E402
from controllers.telemetry.detectors import DetectionConfig  # noqa: E402
from controllers.telemetry.metrics_sampler import MetricsSampler  # noqa: E402
from controllers.telemetry.publisher import RedisPublisher  # noqa: E402
from controllers.telemetry.telemetry_observer import TelemetryObserver  # noqa: E402

KINDS = ("deployment", "replicaset", "statefulset", "certificate", "ingress", "dnsrecord", "backup",
         "podautoscaler", "secretsync", "netpolicy")
ENVS = ("prod", "stage", "dev", "edge")
REGIONS = ("eu1", "eu2", "us1", "us2", "ap1")
DETECTION = DetectionConfig(failing_after=3, slow_after=2.0, waiting_after=2.0, hot_loop_attempts=3)
FLUSH_S = 0.1
LIMITER = {"type": "exponential", "base": 0.005, "max": 1000.0}


class Trouble:
    """What is wrong with a controller (the finding its worker's detectors will open), or HEALTHY."""

    HEALTHY = ""
    FAILING = FindingKind.FAILING
    SLOW = FindingKind.SLOW_RECONCILE
    WAITING = FindingKind.WAITING
    LOOPING = FindingKind.HOT_LOOP


def trouble_of(cluster: int, position: int) -> str:
    """The fleet's fixed mix: a quarter of the clusters (1, 5, 9, ...) are in trouble, the rest healthy,
    as on a real platform where trouble is local. In one in trouble, the controllers at ``position`` 0
    and 4 (of its controllers, by index) fail, the one at 7 has an attempt that never ends (or, in
    every other such cluster, loops on its own writes) and the one at 9 has keys no worker takes
    (in every other such cluster)."""
    if cluster % 4 != 1:
        return Trouble.HEALTHY
    if position in (0, 4):
        return Trouble.FAILING
    if position == 7:
        return Trouble.SLOW if cluster % 8 == 1 else Trouble.LOOPING
    if position == 9 and cluster % 8 == 5:
        return Trouble.WAITING
    return Trouble.HEALTHY


def cluster_names(n: int) -> list[str]:
    names = [f"{env}-{region}" for env in ENVS for region in REGIONS]
    names += [f"extra-{i}" for i in range(len(names), n)]
    return names[:n]


@dataclass
class FleetController:
    index: int
    name: str
    informer: str
    namespace: str
    trouble: str
    seq: int = 0
    rv: int = 100


@dataclass
class FleetWorker:
    """One worker's telemetry as runcontrollers wires it."""

    name: str
    cluster: str
    pub: RedisPublisher
    telemetry: TelemetryObserver
    obs: FanoutObserver
    metrics: MetricsObserver
    sampler: MetricsSampler
    controllers: list[FleetController] = field(default_factory=list)


class Fleet:
    """``clusters`` clusters × ``workers`` workers × ``controllers`` controllers (see module docstring)."""

    def __init__(self, redis_url: str, prefix: str, *, clusters: int = 20, controllers: int = 200, workers: int = 40,
                 clock: Clock | None = None, publisher: Callable[..., RedisPublisher] | None = None) -> None:
        if clusters < 1 or workers < clusters or controllers < workers:
            raise ValueError(f"need 1 <= clusters <= workers <= controllers (got {clusters}, {workers}, {controllers})")
        self.clock = clock or RealClock()
        self._lock = threading.Lock()  # run() in a thread, fail() from a test's
        make = publisher or (lambda **kw: RedisPublisher(redis_url, prefix=prefix, **kw))
        self.workers: list[FleetWorker] = []
        names = cluster_names(clusters)
        for w in range(workers):
            cluster = names[w % clusters]
            name = f"{cluster}-w{w // clusters}"
            pub = make(clock=self.clock)
            telemetry = TelemetryObserver(pub, worker=name, clock=self.clock, detection=DETECTION)
            metrics = MetricsObserver(clock=self.clock)
            sampler = MetricsSampler(metrics.registry, pub, topic=telemetry.metrics_topic, families=FAMILIES,
                                     stages=telemetry.stages, clock=self.clock)
            self.workers.append(FleetWorker(name, cluster, pub, telemetry, FanoutObserver(telemetry, metrics), metrics, sampler))
        for i in range(controllers):
            # Worker i % workers, so the cluster is i % clusters and each of its workers has some of its
            # controllers; the kind goes by the controller's position in its cluster (ten distinct).
            fw = self.workers[i % workers]
            position = i // clusters
            kind = KINDS[position % len(KINDS)] + ("" if position < len(KINDS) else f"-{position // len(KINDS)}")
            informer = kind + ("es" if kind.endswith("s") else "s")
            trouble = trouble_of(i % clusters, position)
            fw.controllers.append(FleetController(i, kind, informer, f"team-{i % 7}", trouble))

    @property
    def controllers(self) -> list[tuple[FleetWorker, FleetController]]:
        return [(fw, c) for fw in self.workers for c in fw.controllers]

    def find(self, name: str, worker: str) -> tuple[FleetWorker, FleetController]:
        for fw, c in self.controllers:
            if fw.name == worker and c.name == name:
                return fw, c
        raise KeyError(f"no controller {name} on worker {worker}")

    # -- publishing ----------------------------------------------------------------------------
    def publish_initial(self) -> None:
        """Every worker's cluster, informers and controllers, the first attempts (which open the
        troubled controllers' findings), a first metrics sample; flushed."""
        for fw in self.workers:
            fw.telemetry.describe_cluster(name=fw.cluster, server=f"https://{fw.cluster}.k8s.example:6443",
                                          version="v1.31.2", simulated=False, writes="read-only")
            for c in fw.controllers:
                obs = fw.obs
                obs.on_informer(c.informer, fifo="DeltaFIFO", resync_period=0.0)
                obs.on_list(c.informer, resource_version="100", items=20 + c.index % 50, duration=0.02)
                obs.on_watch_start(c.informer, resource_version="100")
                obs.on_reflector_state(c.informer, state="watching")
                obs.on_reflector_state(c.informer, state="synced")
                fw.metrics.register_controller(c.name, 2)
                obs.on_controller(c.name, watches=[c.informer], workers=2, started=True, rate_limiter=LIMITER)
                self._start_trouble(fw, c)
            fw.sampler.tick()
        self.flush()

    def _key(self, c: FleetController, n: int) -> str:
        return f"{c.namespace}/{c.name}-{n % 40:03d}"

    def _start_trouble(self, fw: FleetWorker, c: FleetController) -> None:
        obs = fw.obs
        if c.trouble == Trouble.SLOW:  # an attempt that never ends: slow_reconcile after slow_after
            key = self._key(c, 999)
            obs.on_queue(c.name, op=QueueOp.ADD, key=key, depth=1)
            obs.on_queue(c.name, op=QueueOp.GET, key=key, depth=0, duration=0.001)
            obs.on_reconcile_start(c.name, key=key, worker=1)
        elif c.trouble == Trouble.WAITING:  # ready, and no worker takes it: waiting after waiting_after
            for n in range(3):
                obs.on_queue(c.name, op=QueueOp.ADD, key=self._key(c, 900 + n), depth=n + 1)
        elif c.trouble == Trouble.LOOPING:  # its status writes come back as its next trigger
            for _ in range(DETECTION.hot_loop_attempts + 1):
                self._loop_once(fw, c)
        elif c.trouble == Trouble.FAILING:
            for _ in range(DETECTION.failing_after):
                self._attempt(fw, c, self._key(c, 777), ReconcileResult.ERROR)

    def _obj(self, key: str, rv: int) -> dict[str, Any]:
        ns, name = key.split("/")
        return {"metadata": {"namespace": ns, "name": name, "resourceVersion": str(rv)}, "status": {"observed": rv}}

    def _loop_once(self, fw: FleetWorker, c: FleetController) -> None:
        key, obs = self._key(c, 555), fw.obs
        old = self._obj(key, c.rv)
        obs.on_queue(c.name, op=QueueOp.GET, key=key, depth=0, duration=0.001)
        obs.on_reconcile_start(c.name, key=key, worker=0)
        c.rv += 1
        ns, name = key.split("/")
        obs.on_request(method="PUT", path=f"/apis/fleet.example/v1/namespaces/{ns}/{c.name}s/{name}/status", code=200,
                       duration=0.002, controller=c.name, rv=str(c.rv))
        obs.on_reconcile_end(c.name, key=key, worker=0, duration=0.004, result=ReconcileResult.SUCCESS)
        obs.on_queue(c.name, op=QueueOp.DONE, key=key, depth=0, duration=0.004)
        new = self._obj(key, c.rv)
        obs.on_watch_event(c.informer, event_type=WatchEventType.MODIFIED, key=key, resource_version=str(c.rv))
        obs.on_event(c.name, event="update", key=key, requests=[key], source=f"controller/{c.name} (For)", old=old, new=new)
        obs.on_queue(c.name, op=QueueOp.ADD, key=key, depth=1)

    def _attempt(self, fw: FleetWorker, c: FleetController, key: str, result: str) -> None:
        obs = fw.obs
        c.rv += 1
        obs.on_watch_event(c.informer, event_type=WatchEventType.MODIFIED, key=key, resource_version=str(c.rv))
        obs.on_store(c.informer, op="upsert", key=key, obj=self._obj(key, c.rv))
        obs.on_handler(c.informer, handler=f"controller/{c.name}", event="update", key=key, outcome="ok", duration=0.0002)
        obs.on_queue(c.name, op=QueueOp.ADD, key=key, depth=1 + c.index % 4)
        obs.on_queue(c.name, op=QueueOp.GET, key=key, depth=c.index % 4, duration=0.001)
        obs.on_reconcile_start(c.name, key=key, worker=0)
        error = "Conflict: the object has been modified" if result == ReconcileResult.ERROR else None
        obs.on_reconcile_end(c.name, key=key, worker=0, duration=0.004, result=result, error=error)
        if result == ReconcileResult.ERROR:
            obs.on_queue(c.name, op=QueueOp.ADD_RATE_LIMITED, key=key, depth=c.index % 4, delay=0.005, requeues=c.seq + 1)
        obs.on_queue(c.name, op=QueueOp.DONE, key=key, depth=c.index % 4, duration=0.004)

    def update(self, fw: FleetWorker, c: FleetController) -> None:
        """One update of controller ``c``: an event through its informer into its queue, reconciled.
        A failing controller's key fails again (its finding's count grows); a looping one loops once more."""
        c.seq += 1
        if c.trouble == Trouble.LOOPING:
            self._loop_once(fw, c)
        elif c.trouble == Trouble.FAILING:
            self._attempt(fw, c, self._key(c, 777), ReconcileResult.ERROR)
        else:
            self._attempt(fw, c, self._key(c, c.seq), ReconcileResult.SUCCESS)

    def fail(self, worker: str, name: str) -> None:
        """Make a healthy controller fail from now on (a test's "one controller changes")."""
        fw, c = self.find(name, worker)
        with self._lock:
            c.trouble = Trouble.FAILING
            for _ in range(DETECTION.failing_after):
                self._attempt(fw, c, self._key(c, 777), ReconcileResult.ERROR)
            fw.pub.flush()

    def sample(self) -> None:
        for fw in self.workers:
            fw.sampler.tick()

    def flush(self) -> None:
        for fw in self.workers:
            fw.pub.flush()

    def run(self, duration: float, rate: float = 50.0, *, stop: Callable[[], bool] = lambda: False) -> int:
        """``rate`` controller updates a second for ``duration`` s (round robin over the controllers
        that are not stuck), a sample per worker a second, flushed every FLUSH_S; returns the updates."""
        movers = [(fw, c) for fw, c in self.controllers if c.trouble not in (Trouble.SLOW, Trouble.WAITING)]
        start = self.clock.now()
        next_sample = start + 1.0
        done = 0
        while not stop():
            now = self.clock.now()
            if now - start >= duration:
                break
            due = int((now - start) * rate)
            with self._lock:
                while done < due:
                    fw, c = movers[done % len(movers)]
                    self.update(fw, c)
                    done += 1
                if now >= next_sample:
                    self.sample()
                    next_sample += 1.0
                self.flush()
            self.clock.sleep(FLUSH_S)
        return done

    def stop(self) -> None:
        for fw in self.workers:
            fw.pub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--prefix", default="ctrlscope:")
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--controllers", type=int, default=200)
    parser.add_argument("--workers", type=int, default=40)
    parser.add_argument("--rate", type=float, default=50.0, help="controller updates per second, over the fleet")
    parser.add_argument("--duration", type=float, default=float("inf"))
    args = parser.parse_args()
    fleet = Fleet(args.redis, args.prefix, clusters=args.clusters, controllers=args.controllers, workers=args.workers)
    fleet.publish_initial()
    print(f"fleet: {args.clusters} clusters, {args.workers} workers, {args.controllers} controllers on {args.redis} "
          f"({args.prefix}); {args.rate:g} updates/s", flush=True)
    try:
        fleet.run(args.duration, args.rate)
    except KeyboardInterrupt:
        pass
    finally:
        fleet.stop()


if __name__ == "__main__":
    main()
