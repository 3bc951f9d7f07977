"""``python manage.py scenario NAME``: run a guided scenario against the demo's cluster.

The cluster is the running demo's when the demo started it (the simulator, or ``demo --real``'s
control plane through its fault proxy: ``run/demo.json`` names the kubeconfig), else the simulated
cluster's kubeconfig. A scenario that injects faults refuses to run where no fault API answers
(``GET /_sim/faults``: the simulator and the fault proxy serve it, a bare API server does not).

Prints the narration, runs the script, then each claim with whether it held; exits 1 if any did
not. Narration and results are also published to the ``scenarios`` telemetry topic. Run it while
``make demo`` is up (its worker runs the PodSet controllers the scenarios exercise).
"""

from __future__ import annotations

import json

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from controllers.clock import RealClock
from controllers.informers import ApiError
from controllers.informers.http_client import KubernetesClient
from controllers.scenarios import SCENARIOS, ScenarioContext
from controllers.scenarios.base import DEMO_STATE, KOPF_WORKER, DemoStandby, LeaseHolder, PidFileWorker
from controllers.scenarios.telemetry import TelemetryReader
from controllers.schema import SCENARIOS_TOPIC, RecordKind
from controllers.sim.faults_client import SimFaults
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis


class Command(BaseCommand):
    help = "Run a guided scenario (see --list) against the cluster the demo runs."

    def add_arguments(self, parser):
        parser.add_argument("name", nargs="?", help="scenario name")
        parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
        parser.add_argument("--kubeconfig",
                            help="cluster to drive (default: the running demo's cluster when it is the demo's own -- "
                                 "the simulator or --real's --, else the simulated cluster, CTRLSCOPE_SIM_KUBECONFIG)")
        parser.add_argument("--speed", type=float, default=1.0, help="time scale; 0.25 runs 4x faster")
        parser.add_argument("--worker", default="demo", help="worker whose telemetry is counted (default: demo)")
        parser.add_argument("--kopf-worker", default=KOPF_WORKER,
                            help=f"worker running the kopf PodSet operator (kopf-vs-reconciler; default: {KOPF_WORKER})")
        parser.add_argument("--lease", default="default/ctrlscope-demo",
                            help="Lease the demo's workers campaign for (leader-failover)")

    def handle(self, *args, **opts):
        if opts["list"] or not opts["name"]:
            for s in SCENARIOS.values():
                self.stdout.write(f"{s.name:14} {s.title}")
            if not opts["list"]:
                raise CommandError("name a scenario to run")
            return
        scenario = SCENARIOS.get(opts["name"])
        if scenario is None:
            raise CommandError(f"no scenario {opts['name']!r}; choose from: {', '.join(SCENARIOS)}")
        if opts["speed"] <= 0:
            raise CommandError("--speed must be positive")
        opts["kubeconfig"] = opts["kubeconfig"] or default_kubeconfig()
        try:
            client = KubernetesClient.from_kubeconfig(opts["kubeconfig"])
        except Exception as exc:  # any kubeconfig problem means: cannot reach the cluster
            raise CommandError(f"cannot load {opts['kubeconfig']}: {exc} (is `make demo` running?)") from exc
        if scenario.needs_faults and not has_fault_api(client):
            raise CommandError(f"{scenario.name} injects faults, and {client.server} serves no fault API: run it on "
                               "`make demo`'s simulator, or on `make demo`'s --real (a fault proxy in front of it)")
        try:
            redis_handle = ensure_redis(settings.RUN_DIR)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        clock = RealClock()
        publisher = RedisPublisher(redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX, clock=clock)
        publisher.describe(role="scenario", name=scenario.title)
        publisher.start()

        running = {"title": scenario.title, "narration": list(scenario.narration), "running": True,
                   "started": clock.wall() * 1000, "line": ""}

        def say(line: str) -> None:
            self.stdout.write(f"  > {line}")
            self.stdout.flush()
            publisher.publish(SCENARIOS_TOPIC, {"k": RecordKind.NARRATION, "scenario": scenario.name, "text": line, "ts": clock.wall() * 1000})
            # The state keeps the latest line, so a page opened mid-scenario shows it at once.
            running["line"] = line
            publisher.set_state(SCENARIOS_TOPIC, scenario.name, dict(running))

        try:
            self.stdout.write(self.style.MIGRATE_HEADING(scenario.title))
            for paragraph in scenario.narration:
                self.stdout.write(f"  {paragraph}")
            publisher.set_state(SCENARIOS_TOPIC, scenario.name, dict(running))
            reader = TelemetryReader(redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX, worker=opts["worker"])
            kopf_reader = TelemetryReader(redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX, worker=opts["kopf_worker"])
            try:
                lease_ns, _, lease_name = opts["lease"].partition("/")
                standby = DemoStandby(settings.RUN_DIR, lambda worker: TelemetryReader(
                    redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX, worker=worker), clock=clock)
                result = scenario.run(ScenarioContext(client, time_scale=opts["speed"], clock=clock, say=say,
                                                      telemetry=reader, kopf_telemetry=kopf_reader,
                                                      workers=PidFileWorker(settings.RUN_DIR / "worker.pid", clock=clock),
                                                      lease=LeaseHolder(client, lease_ns, lease_name),
                                                      standby=standby, actor=f"scenario {scenario.name}",
                                                      kubeconfig=opts["kubeconfig"], redis_url=redis_handle.url,
                                                      prefix=settings.CTRLSCOPE_PREFIX))
            finally:
                reader.close()
                kopf_reader.close()
            for claim in result.claims:
                mark = self.style.SUCCESS("held") if claim.held else self.style.ERROR("DID NOT HOLD")
                self.stdout.write(f"  [{mark}] {claim.text} ({claim.detail})")
            publisher.set_state(SCENARIOS_TOPIC, scenario.name, {
                "title": scenario.title, "narration": list(scenario.narration), "running": False,
                "claims": [{"text": c.text, "held": c.held, "detail": c.detail} for c in result.claims],
                "measurements": result.measurements, "table": result.table, "finished": clock.wall() * 1000})
        finally:
            publisher.stop()
            redis_handle.stop()
        if not result.ok:
            raise CommandError("some claims did not hold")


def has_fault_api(client: KubernetesClient) -> bool:
    """Whether ``client``'s cluster serves the fault API (the simulator, or a fault proxy in front of one)."""
    try:
        SimFaults(client, timeout=10).status()
    except (ApiError, OSError, ValueError):
        return False
    return True


def default_kubeconfig() -> str:
    """The running demo's cluster, if it is one the demo started (run/demo.json names it: scenarios
    create, scale and delete PodSets and pods, so never a cluster given with --kubeconfig); else the
    simulated cluster's kubeconfig."""
    try:
        demo = json.loads((settings.RUN_DIR / DEMO_STATE).read_text())
    except (OSError, ValueError):
        demo = {}
    kubeconfig = demo.get("kubeconfig") if isinstance(demo, dict) else None
    if isinstance(kubeconfig, str) and kubeconfig:
        return kubeconfig
    return settings.CTRLSCOPE_SIM_KUBECONFIG or str(settings.RUN_DIR / "kubeconfig-sim.yaml")
