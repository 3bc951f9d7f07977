"""``python manage.py runkopf [options] -- <kopf run arguments>``: a kopf operator, unmodified, in-process.

Everything after ``--`` is what you would give ``kopf run`` (``--standalone -n default handlers.py``);
kopf parses it and runs the operator with its own machinery. Before that, this command installs
ctrlscope's in-process instrumentation (``controllers.kopf.inprocess``) and starts a publisher, so
the operator's handler attempts, per-object processing, watch streams, log lines and API writes
show up on the dashboard as worker ``--worker-name``.

Cluster: ``--kubeconfig F`` (kopf then logs in with it, through the official client as usual) or
``--in-cluster`` (kopf's own login, which tries the pod's service account first); neither: kopf's
default (``$KUBECONFIG``, ``~/.kube/config``). The handler file is never changed or wrapped.

With an OTLP endpoint configured (README "OpenTelemetry": ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``CTRLSCOPE_OTLP_ENDPOINT``) the same reports also become spans, exported beside the records.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from controllers.publish import ProtocolPublisher
from controllers.schema import Runtime, WriteMode
from controllers.telemetry.otel_env import otlp_from_environment, otlp_traces_endpoint
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis

LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR}


class Command(BaseCommand):
    help = "Run an unmodified kopf operator with ctrlscope's in-process telemetry: runkopf [options] -- <kopf run args>"

    def run_from_argv(self, argv: list[str]) -> None:
        # Django's parser would take kopf's flags for its own: split them off at "--" first.
        if "--" in argv:
            i = argv.index("--")
            argv, self._kopf_args = argv[:i], argv[i + 1:]
        else:
            self._kopf_args = []
        super().run_from_argv(argv)

    def add_arguments(self, parser):
        parser.add_argument("--worker-name", default=os.environ.get("CTRLSCOPE_WORKER", "kopf"),
                            help="names this operator's telemetry topics (default: kopf)")
        where = parser.add_mutually_exclusive_group()
        where.add_argument("--kubeconfig", help="kubeconfig file kopf logs in with")
        where.add_argument("--in-cluster", action="store_true", help="kopf's own login (the pod's service account)")
        parser.add_argument("--cluster-name", default="", help="how the dashboard names the cluster")
        parser.add_argument("--allow-writes", action="store_true",
                            help="run against a cluster that is not the simulated one (a kopf operator writes to "
                                 "the objects it handles; see README 'Read-only by default')")
        parser.add_argument("--log-level", choices=sorted(LOG_LEVELS), default="info",
                            help="object log lines at or above this level are published (info)")
        parser.add_argument("--unsupported-kopf", action="store_true",
                            help="run with a kopf version outside the tested range anyway")

    def handle(self, *args, **opts):
        kopf_args = list(getattr(self, "_kopf_args", []))
        if not kopf_args:
            raise CommandError("nothing to run: pass kopf's arguments after --, e.g. "
                               "runkopf -- --standalone -n default handlers.py")
        if kopf_args[0] == "run":
            kopf_args = kopf_args[1:]
        try:
            otlp_traces_endpoint()  # a bad OTLP variable stops the worker before anything starts
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        from controllers.kopf import inprocess

        try:
            inprocess.check_version()
        except inprocess.KopfVersionError as exc:
            if not opts["unsupported_kopf"]:
                raise CommandError(str(exc)) from exc
        server, client = self._configure_cluster(opts)
        from controllers.informers.write_guard import ask_server

        # ~10 s of tries: a simulator may still be starting.
        simulated, version = ask_server(client, attempts=5)
        if not simulated and not opts["allow_writes"]:
            # kopf stores its progress on the objects it handles: it cannot run without writing, and
            # its requests go through its own client, which no guard of ctrlscope's sees. So a kopf
            # worker that may not write does not start.
            why = ("is not the simulated cluster" if simulated is False
                   else "did not answer /version, so it is not known to be the simulated cluster")
            raise CommandError(f"{server} {why}. A kopf operator writes to the objects it handles (its progress "
                               "is stored on them), so runkopf is read-only by refusing to start: pass "
                               "--allow-writes to run it against this cluster. Nothing was started.")
        try:
            redis_handle = ensure_redis(settings.RUN_DIR)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        try:
            otel = otlp_from_environment(worker=opts["worker_name"])
        except ValueError as exc:  # the SDK's OTEL_BSP_* settings
            redis_handle.stop()
            raise CommandError(f"OpenTelemetry: {exc}") from exc
        publisher = ProtocolPublisher(redis_handle.url, worker=opts["worker_name"], runtime=Runtime.KOPF,
                                      prefix=settings.CTRLSCOPE_PREFIX, observers=[otel] if otel else []).start()
        publisher.describe_cluster(name=opts["cluster_name"] or server, server=server, version=version,
                                   simulated=simulated, writes=WriteMode.ALLOWED)
        self.stdout.write(f"kopf {inprocess.kopf_version()} in-process, worker {publisher.worker!r}: "
                          f"kopf run {' '.join(kopf_args)}")
        self.stdout.flush()
        try:
            with inprocess.instrumented(publisher, unsupported=opts["unsupported_kopf"],
                                        log_level=LOG_LEVELS[opts["log_level"]]):
                code = self._run_kopf(kopf_args)
        finally:
            if otel is not None:
                otel.shutdown()  # ends open spans and flushes the batch to the collector
            publisher.stop()
            redis_handle.stop()
        if code:
            sys.exit(code)

    def _configure_cluster(self, opts) -> tuple[str, Any]:
        """Point kopf's login at the cluster; the server URL (never a credential) for the dashboard,
        and a client to ask it whether it is the simulated cluster."""
        from controllers.informers.http_client import KubernetesClient

        if opts["in_cluster"]:
            host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
            if not host:
                raise CommandError("--in-cluster: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)")
            try:
                return f"https://{host}:{port}", KubernetesClient.in_cluster()
            except Exception as exc:  # the service account's files are missing or unreadable
                raise CommandError(f"--in-cluster: cannot load the pod's service account: {exc}") from exc
        if opts["kubeconfig"]:
            if not os.path.isfile(opts["kubeconfig"]):
                raise CommandError(f"--kubeconfig {opts['kubeconfig']}: no such file")
            os.environ["KUBECONFIG"] = opts["kubeconfig"]
            # The official client reads $KUBECONFIG once, when it is imported (it may be already):
            # kopf's login and the handlers' own load_kube_config() must both find this file.
            from kubernetes.config import kube_config

            kube_config.KUBE_CONFIG_DEFAULT_LOCATION = opts["kubeconfig"]
        try:
            client = KubernetesClient.from_kubeconfig(opts["kubeconfig"], None)
        except Exception as exc:  # kubeconfig errors come in many types; all mean "cannot connect"
            raise CommandError(f"cannot load cluster configuration: {exc}") from exc
        return client.server, client

    def _run_kopf(self, kopf_args: list[str]) -> int:
        from kopf import cli

        # kopf configures logging itself (its flags: --verbose, --quiet, --log-format): the
        # operator's output must read as it would without ctrlscope, not twice.
        logging.getLogger().handlers.clear()
        try:
            cli.main(args=["run", *kopf_args], prog_name="kopf", standalone_mode=False)
        except SystemExit as exc:  # click's own exit (e.g. --help)
            return int(exc.code or 0) if not isinstance(exc.code, str) else 1
        except KeyboardInterrupt:
            return 0
        except Exception as exc:  # click usage errors and an operator that fails to start
            import click

            if isinstance(exc, click.ClickException):
                exc.show()
                return exc.exit_code
            raise
        return 0
