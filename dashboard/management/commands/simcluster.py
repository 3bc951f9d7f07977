"""``python manage.py simcluster``: run the embedded simulated Kubernetes cluster in the foreground.

A thin wrapper: all behaviour lives in ``controllers.sim`` (``run_server``), which does not know
Django exists. Writes a kubeconfig that kubectl and ``kubernetes.config.load_kube_config()`` accept
and stops cleanly on Ctrl-C / SIGTERM (saving ``--state`` if given).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from controllers.sim import run_server


class Command(BaseCommand):
    help = "Run the simulated Kubernetes API server (kubectl and the kubernetes client work against it)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
        parser.add_argument("--port", type=int, default=6443, help="port to listen on; 0 picks a free one")
        parser.add_argument("--kubeconfig", default="run/kubeconfig-sim.yaml", help="where to write the kubeconfig")
        parser.add_argument("--state", default=None, help="load state from FILE on start, save it on shutdown")
        parser.add_argument("--start-delay", type=float, default=1.0,
                            help="seconds a pod spends in ContainerCreating before it runs")
        parser.add_argument("--seed", type=int, default=0, help="seed for fault injection randomness")

    def handle(self, *args: Any, **options: Any) -> None:
        run_server(host=options["host"], port=options["port"], kubeconfig=options["kubeconfig"],
                   state_file=options["state"], start_delay=options["start_delay"], seed=options["seed"],
                   announce=self._announce)

    def _announce(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
