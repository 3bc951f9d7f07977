"""``python manage.py realcluster`` (``ctrlscope realcluster``): a real Kubernetes control plane on loopback.

Builds the control plane if the pinned binaries are not cached yet (progress lines while it builds),
starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok's fake nodes, writes
``--kubeconfig`` when the cluster takes pods, and runs until Ctrl-C or SIGTERM, then stops every
component. A thin wrapper: the work is ``controllers.realcluster``, which does not know Django.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from controllers.realcluster import BuildError, ClusterError, RealCluster, ensure_built


class Command(BaseCommand):
    help = ("Build (if needed) and run a real Kubernetes control plane (etcd, kube-apiserver, controller-manager, "
            "scheduler, kwok nodes) on loopback; Ctrl-C stops it.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--kubeconfig", default=str(settings.RUN_DIR / "kubeconfig-real.yaml"),
                            help="where to write the admin kubeconfig once the cluster is ready "
                                 "(default: the run directory's kubeconfig-real.yaml)")
        parser.add_argument("--port", type=int, default=0,
                            help="the API server's port on 127.0.0.1 (default 0: a free one)")
        parser.add_argument("--nodes", type=int, default=2, help="fake (kwok) nodes to create (default 2)")
        parser.add_argument("--data-dir", default=str(settings.RUN_DIR / "realcluster"),
                            help="certificates, tokens, etcd's data and the components' logs; emptied at start "
                                 "(default: the run directory's realcluster/)")
        parser.add_argument("--build-only", action="store_true",
                            help="build the pinned control plane into the cache (if needed) and exit")

    def handle(self, *args: Any, **opts: Any) -> None:
        # Until the cluster is up, SIGTERM interrupts like Ctrl-C does (a build or a start-up is
        # abandoned and cleaned up); once it runs, either signal asks the wait loop to stop it.
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, _interrupt)
        try:
            binaries = ensure_built(say=self._say)
        except BuildError as exc:
            raise CommandError(str(exc)) from exc
        self._say(f"realcluster: binaries {binaries.directory}")
        if opts["build_only"]:
            return
        kubeconfig = Path(opts["kubeconfig"]).resolve()
        kubeconfig.unlink(missing_ok=True)  # whoever waits for the file must not find a stale one
        try:
            cluster = RealCluster(binaries, Path(opts["data_dir"]).resolve(), port=opts["port"],
                                  nodes=opts["nodes"], say=self._say)
            with cluster:
                cluster.start(kubeconfig)
                for sig in (signal.SIGINT, signal.SIGTERM):
                    signal.signal(sig, lambda *_: stopping.set())
                self._say(f"realcluster: try: KUBECONFIG={kubeconfig} kubectl get nodes,pods -A")
                self._say("realcluster: Ctrl-C stops it")
                while not stopping.wait(1.0):
                    cluster.check()
                self._say("realcluster: stopping")
        except ClusterError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            kubeconfig.unlink(missing_ok=True)
        self._say("realcluster: stopped")

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt
