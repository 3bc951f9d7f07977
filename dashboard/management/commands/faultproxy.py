"""``python manage.py faultproxy``: the simulator's faults on any cluster, through a proxy in front of it.

A thin wrapper over ``controllers.faultproxy`` (which knows nothing of Django): it loads the upstream
from ``--upstream-kubeconfig`` (and ``--context``), checks the safety rules, runs the proxy in the
foreground until Ctrl-C / SIGTERM and writes ``--kubeconfig`` for its clients: the workers, kubectl,
a Go controller, the dashboard's Faults panel (``CTRLSCOPE_SIM_KUBECONFIG``) and the scenarios.

Safety rules, each a clear error before anything listens:

* the proxy listens on loopback only (``--listen``): it acts with the upstream's credentials;
* an upstream that is not on this machine needs ``--allow-remote-upstream``: breaking a shared
  cluster's watches on purpose should be a decision, not a typo;
* ``--kubeconfig`` may not be the upstream kubeconfig (it would be overwritten with the proxy's).

Unless ``--no-telemetry``, every fault is published to the ``cluster/faults`` topic exactly as
``manage.py simcluster`` publishes the simulator's, so every dashboard page shows it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from controllers.faultproxy.server import FaultProxy, run_proxy
from controllers.faultproxy.upstream import Upstream, UpstreamError, is_loopback_host
from dashboard.management.fault_telemetry import published_faults


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:0`` for IPv6) → (host, port); a ``CommandError`` says what is wrong."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise CommandError(f"--listen takes HOST:PORT, such as 127.0.0.1:0 (0 picks a free port): {value!r}")
    if not is_loopback_host(host):
        raise CommandError(f"--listen {value}: the fault proxy listens on loopback only, because whoever reaches it "
                           "acts with the upstream's credentials")
    return host, int(port)


class Command(BaseCommand):
    help = "Run the fault proxy: inject the simulator's faults into any cluster (clients use --kubeconfig)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--upstream-kubeconfig", required=True,
                            help="kubeconfig of the cluster to forward to (its credentials stay in the proxy)")
        parser.add_argument("--context", help="context of --upstream-kubeconfig (default: its current-context)")
        parser.add_argument("--kubeconfig", default=str(settings.RUN_DIR / "kubeconfig-faultproxy.yaml"),
                            help="where to write the kubeconfig clients use to reach the proxy (default: the run "
                                 "directory's kubeconfig-faultproxy.yaml; removed when the proxy stops)")
        parser.add_argument("--listen", default="127.0.0.1:0", help="loopback HOST:PORT to listen on (default 127.0.0.1:0)")
        parser.add_argument("--allow-remote-upstream", action="store_true",
                            help="allow an upstream API server that is not on this machine")
        parser.add_argument("--seed", type=int, default=0, help="seed for fault injection randomness")
        parser.add_argument("--no-telemetry", action="store_true",
                            help="do not publish injected faults to Redis (topic cluster/faults)")

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = parse_listen(options["listen"])
        upstream_path = options["upstream_kubeconfig"]
        out = options["kubeconfig"]
        if os.path.exists(out) and os.path.exists(upstream_path) and os.path.samefile(out, upstream_path):
            raise CommandError(f"--kubeconfig {out} is the upstream kubeconfig: the proxy would overwrite it with "
                               "its own; write it somewhere else")
        try:
            upstream = Upstream.from_kubeconfig(upstream_path, options["context"])
        except UpstreamError as exc:
            raise CommandError(str(exc)) from None
        if not options["allow_remote_upstream"] and not is_loopback_host(upstream.host):
            raise CommandError(f"the upstream API server {upstream.url} (context {upstream.context}) is not on this "
                               "machine; the fault proxy breaks its clients' requests on purpose, so say so: "
                               "--allow-remote-upstream")
        proxy = FaultProxy(upstream, host=host, port=port, seed=options["seed"])

        with published_faults(not options["no_telemetry"], self._announce) as faults:
            def on_start(p: FaultProxy) -> None:
                faults.attach(p.faults, url=p.url, backend=p.backend.name, upstream=upstream.url)

            try:
                run_proxy(proxy, kubeconfig=Path(out), announce=self._announce, on_start=on_start)
            except UpstreamError as exc:
                raise CommandError(str(exc)) from None

    def _announce(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()
