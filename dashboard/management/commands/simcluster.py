"""``python manage.py simcluster``: run the embedded simulated Kubernetes cluster in the foreground.

A thin wrapper: all behaviour lives in ``controllers.sim`` (``run_server``), which does not know
Django — or ctrlscope's telemetry — exists. Writes a kubeconfig that kubectl and
``kubernetes.config.load_kube_config()`` accept and stops cleanly on Ctrl-C / SIGTERM (saving
``--state`` if given).

Unless ``--no-telemetry``, every injected fault and the active fault rules are published to the
``cluster/faults`` topic (``FaultTelemetry`` on a ``RedisPublisher`` thread, found by the same rule
as every other process: ``REDIS_URL``, else 6379, else a private server), so every dashboard page
can show what was broken and when.
"""

from __future__ import annotations

import time
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from controllers.sim import SimCluster, run_server
from dashboard.management.fault_telemetry import published_faults


def first_resource_version() -> int:
    """Where a fresh simulator's resourceVersions start: the wall clock in microseconds, above every
    RV an earlier run on this machine issued (short of a million writes a second), so that a restarted
    simulator -- killed, nothing saved -- never reissues an RV a running informer holds. Its watches
    from an old RV get 410 and relist, as after an etcd restore with --bump-revision --mark-compacted;
    reissued RVs would resume them silently against other objects (stale entries never deleted, new
    objects never seen). A ``--state`` file's RVs are restored as saved, and above this if higher."""
    return time.time_ns() // 1000


class Command(BaseCommand):
    help = "Run the simulated Kubernetes API server (kubectl and the kubernetes client work against it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=6443, help="port to listen on; 0 picks a free one")
        parser.add_argument("--kubeconfig", default=str(settings.RUN_DIR / "kubeconfig-sim.yaml"),
                            help="where to write the kubeconfig (default: the run directory's kubeconfig-sim.yaml)")
        parser.add_argument("--state", default=None, help="load state from FILE on start, save it on shutdown")
        parser.add_argument("--start-delay", type=float, default=1.0,
                            help="seconds a pod spends in ContainerCreating before it runs")
        parser.add_argument("--seed", type=int, default=0, help="seed for fault injection randomness")
        parser.add_argument("--no-telemetry", action="store_true",
                            help="do not publish injected faults to Redis (topic cluster/faults)")

    def handle(self, *args: Any, **options: Any) -> None:
        with published_faults(not options["no_telemetry"], self._announce) as faults:
            def on_start(sim: SimCluster) -> None:
                faults.attach(sim.faults, url=sim.url)

            run_server(host=options["host"], port=options["port"], kubeconfig=options["kubeconfig"],
                       state_file=options["state"], start_delay=options["start_delay"], seed=options["seed"],
                       first_resource_version=first_resource_version(), announce=self._announce, on_start=on_start)

    def _announce(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
