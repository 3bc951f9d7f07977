"""``python manage.py demo`` (what ``make demo`` runs): everything needed to watch controllers, on loopback.

Starts, in order: Redis (redisboot's rule), the database schema, the simulated cluster (unless
``--kubeconfig`` points at a real one), a few sample Deployments and PodSets, the worker running the
example controllers, the kopf PodSet operator (``runkopf``; on a real cluster only with ``--kopf``),
the Go samples (when there is a Go toolchain), and the dashboard under daphne; then prints the URL and
how to point kubectl at the cluster. Ctrl-C (or SIGTERM) stops everything it started, in reverse order. The children run under
a ``controllers.process.Supervisor``: a worker that dies is restarted (the controller-restart
scenario kills it on purpose), a standby worker comes and goes with ``run/standby.want`` (the
leader-failover scenario), and if any other child dies (or a worker crash-loops) the demo says
which one, shows the end of its log, stops the rest and exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import urllib.request
from pathlib import Path

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from controllers import golang
from controllers.process import Child, SupervisionError, Supervisor
from controllers.scenarios.base import DEMO_STATE, KOPF_WORKER, STANDBY_WANT, STANDBY_WORKER
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis, free_port

DEMO_LEASE = "default/ctrlscope-demo"
# Shorter than client-go's 15/10/2 s so a demo failover takes seconds, same ratios rules
# (lease duration > renew deadline > 1.2 x retry period).
DEMO_LEASE_TIMINGS = ["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1"]
# How the demo starts a management command in a child: ``python -m dashboard`` is ``manage.py``, in a
# checkout and in an installed package alike.
MANAGE = ["-m", "dashboard"]
DEFAULT_CONTROLLERS = ["controllers.examples.deployments:setup", "controllers.examples.podset:setup"]
# The Go samples: (worker name, program in go/cmd, extra flags). The Go reconciler writes its own
# ConfigMaps (<name>-go-summary), so it never fights the Python one over <name>-summary.
GO_WORKERS = [("go-informer", "deployment-informer", []),
              ("go-summary", "deployment-summary", ["--summary-suffix", "-go-summary"])]
SAMPLE_DEPLOYMENTS = {"web": ("nginx:1.27", 3), "api": ("ghcr.io/example/api:2.1", 2)}
SAMPLE_PODSETS = {"by-handlers": "handlers", "by-reconciler": "reconciler"}
KOPF_SAMPLE_PODSET = "web-kopf"  # created when the kopf operator runs
KOPF_OPERATOR = "controllers/examples/kopf_podsets.py"
KOPF_RESOURCE = "podsets.demo.ctrlscope.dev"  # what the demo worker watches in zero-code mode
# kopf retries a failed handler after 60 s by default; the demo's operator after 10 s, so the
# kopf-vs-reconciler scenario does not keep its audience waiting a minute (its narration says so).
KOPF_DEMO_BACKOFF = "10"


class Command(BaseCommand):
    help = "Start Redis (if needed), the worker and the dashboard on loopback; Ctrl-C stops them all."
    kopf = False  # whether the kopf operator runs: handle() decides (the samples include its PodSet then)

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("CTRLSCOPE_PORT", "8000")),
                            help="dashboard port on 127.0.0.1 (default 8000; a free one if taken)")
        parser.add_argument("--rate", type=float, default=0.0,
                            help="also publish synthetic observations per second (default 0: off)")
        parser.add_argument("--kubeconfig", default=os.environ.get("CTRLSCOPE_KUBECONFIG"),
                            help="watch a real cluster instead of the simulator (default: the simulator)")
        parser.add_argument("--context", help="kubeconfig context for --kubeconfig")
        parser.add_argument("--replicas", type=int, default=1,
                            help="worker replicas; more than 1 turns on leader election (default 1)")
        parser.add_argument("--controller", action="append",
                            help=f"controllers to run (default: {DEFAULT_CONTROLLERS[0]})")
        parser.add_argument("--kopf", action=argparse.BooleanOptionalAction, default=None,
                            help=f"run the kopf PodSet operator ({KOPF_OPERATOR}) as worker {KOPF_WORKER} "
                                 "(default: on the simulator yes, on a real cluster no: it creates and deletes "
                                 "pods there)")
        parser.add_argument("--no-go", action="store_true", default=golang.skipped(),
                            help="do not build and run the Go sample controllers (default: run them when a "
                                 "Go toolchain is found; CTRLSCOPE_SKIP_GO=1 also skips them)")

    def handle(self, *args, **opts):
        if opts["replicas"] < 1:
            raise CommandError("--replicas must be at least 1")
        run_dir = Path(settings.RUN_DIR)
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            redis_handle = ensure_redis(run_dir)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"redis:     {redis_handle.url} ({redis_handle.source})")
        call_command("migrate", verbosity=0, interactive=False)
        self.operator_password = _demo_operator()
        self.port = opts["port"] if _port_free(opts["port"]) else free_port()
        self.run_dir, self.opts = run_dir, opts
        self.env = {**os.environ, "REDIS_URL": redis_handle.url, "CTRLSCOPE_DEMO": "1",
                    "CTRLSCOPE_ALLOW_ANONYMOUS": "1", "PYTHONUNBUFFERED": "1"}
        stopping = False

        def stop(*_):
            nonlocal stopping
            stopping = True

        signal.signal(signal.SIGINT, stop)
        signal.signal(signal.SIGTERM, stop)
        supervisor = Supervisor(say=self._say, want_standby=run_dir / STANDBY_WANT)
        try:
            self._start(supervisor)
            supervisor.run(lambda: stopping)
        except SupervisionError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            supervisor.stop_all()
            for name in (STANDBY_WANT, DEMO_STATE):
                (run_dir / name).unlink(missing_ok=True)
            redis_handle.stop()
            self.stdout.write("demo stopped.")

    def _say(self, line: str) -> None:
        self.stdout.write(line)
        self.stdout.flush()

    def _start(self, supervisor: Supervisor) -> None:
        """Start the cluster (unless a real one is given), the workers and the dashboard, in order."""
        run_dir, opts = self.run_dir, self.opts
        kubeconfig = opts["kubeconfig"]
        cluster_name: list[str] = []  # a real cluster is named by its kubeconfig context
        self.kopf = opts["kopf"] if opts["kopf"] is not None else not kubeconfig
        if self.kopf and not self._kopf_supported():
            self.kopf = False
        if kubeconfig:
            self.stdout.write(f"cluster:   {kubeconfig} (real cluster; the example controllers write ConfigMaps)")
            # No simulator: the dashboard's Faults panel says so, and never loads these credentials.
            self.env["CTRLSCOPE_SIM_KUBECONFIG"] = ""
        else:
            kubeconfig = str(run_dir / "kubeconfig-sim.yaml")
            self.env["CTRLSCOPE_SIM_KUBECONFIG"] = kubeconfig
            Path(kubeconfig).unlink(missing_ok=True)
            supervisor.start(self._child("simulated cluster", [*MANAGE, "simcluster", "--port", "0",
                                                               "--kubeconfig", kubeconfig], "simcluster"))
            supervisor.wait_ready(Path(kubeconfig).exists, f"{kubeconfig} did not appear")
            self._create_samples(kubeconfig)
            self.stdout.write(f"cluster:   simulated; try: KUBECONFIG={kubeconfig} kubectl get deployments,podsets,pods")
            cluster_name = ["--cluster-name", "simulated"]
        replicas = opts["replicas"]
        # On the simulator the workers always campaign for a Lease (so a standby can be added for
        # the leader-failover scenario); on a real cluster only when replicated, because leader
        # election writes a Lease there.
        leader_election = replicas > 1 or not opts["kubeconfig"]

        def worker(name: str, suffix: str, *, synthetic: bool = False) -> Child:
            argv = [*MANAGE, "runcontrollers", "--kubeconfig", kubeconfig, "--worker-name", name, *cluster_name]
            for spec in opts["controller"] or DEFAULT_CONTROLLERS:
                argv += ["--controller", spec]
            if opts["context"]:
                argv += ["--context", opts["context"]]
            if synthetic and opts["rate"] > 0:
                argv += ["--synthetic", str(opts["rate"])]
            if self.kopf:
                # Both kopf modes side by side: the operator's own worker publishes from inside
                # (runkopf); this one reads only what kopf stores on the PodSets (zero-code).
                argv += ["--kopf", KOPF_RESOURCE]
            if leader_election:
                argv += ["--leader-elect", "--lease", DEMO_LEASE, *DEMO_LEASE_TIMINGS]
            return self._child(f"worker {name}", argv, f"worker{suffix}", pid_file=run_dir / f"worker{suffix}.pid")

        for i in range(replicas):
            supervisor.start(worker("demo" if replicas == 1 else f"demo-{i}", "" if replicas == 1 else f"-{i}",
                                    synthetic=i == 0))
        # The leader-failover scenario asks for a standby replica by creating STANDBY_WANT.
        (run_dir / STANDBY_WANT).unlink(missing_ok=True)
        if leader_election:
            supervisor.make_standby = lambda: worker(STANDBY_WORKER, "-standby")
        (run_dir / DEMO_STATE).write_text(json.dumps({"replicas": replicas, "leader_election": leader_election,
                                                     "lease": DEMO_LEASE if leader_election else None}))
        if replicas > 1:
            self.stdout.write(f"workers:   {replicas} replicas, leader election on Lease {DEMO_LEASE} "
                              "(only the leader reconciles and runs the handler-only PodSet controller)")
        if self.kopf:
            self._start_kopf(supervisor, kubeconfig, cluster_name)
        if not opts["no_go"]:
            self._start_go(supervisor, kubeconfig)
        supervisor.start(self._child("dashboard", ["-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port),
                                                   "dashboard.asgi:application"], "dashboard"))
        url = f"http://127.0.0.1:{self.port}/"
        supervisor.wait_ready(lambda: _answers(url + "healthz"), f"the dashboard did not answer at {url}")
        self._print_access(url)

    def _kopf_supported(self) -> bool:
        """Whether this venv's kopf can run in-process; if not, the demo says why and goes on without it."""
        from controllers.kopf import inprocess

        try:
            inprocess.check_version()
        except inprocess.KopfVersionError as exc:
            self.stdout.write(self.style.WARNING(f"kopf:      not running the kopf PodSet operator: {exc}"))
            return False
        return True

    def _start_kopf(self, supervisor: Supervisor, kubeconfig: str, cluster_name: list[str]) -> None:
        """The kopf PodSet operator, unmodified, under ``runkopf``: its own worker on the overview,
        supervised (restarted if it dies) like the Python worker."""
        argv = [*MANAGE, "runkopf", "--worker-name", KOPF_WORKER, "--kubeconfig", kubeconfig, *cluster_name,
                "--", "--standalone", "--all-namespaces", KOPF_OPERATOR]
        backoff = os.environ.get("PODSET_KOPF_BACKOFF", KOPF_DEMO_BACKOFF)
        supervisor.start(self._child(f"kopf worker {KOPF_WORKER}", argv, KOPF_WORKER,
                                     pid_file=self.run_dir / f"{KOPF_WORKER}.pid",
                                     env={"PODSET_KOPF_BACKOFF": backoff}))
        self.stdout.write(f"kopf:      worker {KOPF_WORKER} (kopf run {KOPF_OPERATOR}, in-process telemetry; "
                          f"PodSets labelled implementation=kopf; retry backoff {backoff} s); the Python "
                          f"worker shows the same operator in zero-code mode (--kopf {KOPF_RESOURCE})")

    def _start_go(self, supervisor: Supervisor, kubeconfig: str) -> None:
        """The Go samples (client-go informer, controller-runtime reconciler) beside the Python
        worker, each its own worker on the overview. Without Go, or when the build fails, the demo
        goes on without them and says why."""
        if golang.find_go() is None:
            self.stdout.write("go:        no Go toolchain found; the Go sample controllers are not running "
                              "(make demo gets one; --no-go hides this line)")
            return
        try:
            programs = golang.build(self.run_dir / "go-bin", say=self._say)
        except golang.GoUnavailable as exc:
            self.stdout.write(self.style.WARNING(f"go:        not running the Go samples: {exc}"))
            return
        for worker, program, extra in GO_WORKERS:
            argv = [str(programs[program]), "--kubeconfig", kubeconfig, "--worker-name", worker, *extra]
            supervisor.start(Child(f"go worker {worker}", argv, self.env, self.run_dir / "logs" / f"{worker}.log",
                                   cwd=settings.BASE_DIR, pid_file=self.run_dir / f"{worker}.pid"))
        self.stdout.write(f"go:        workers {', '.join(w for w, _, _ in GO_WORKERS)} (client-go and "
                          "controller-runtime, instrumented with ctrlscope's Go module)")

    def _child(self, name: str, args: list[str], log: str, *, pid_file: Path | None = None,
               env: dict[str, str] | None = None) -> Child:
        """A child running this Python with ``args`` (and the demo's environment plus ``env``), logging
        to run/logs/{log}.log."""
        return Child(name, [sys.executable, *args], {**self.env, **(env or {})},
                     self.run_dir / "logs" / f"{log}.log", cwd=settings.BASE_DIR, pid_file=pid_file)

    def _print_access(self, url: str) -> None:
        self.stdout.write(self.style.SUCCESS(f"dashboard: {url}"))
        self.stdout.write("access:    anonymous read-only is ON (CTRLSCOPE_ALLOW_ANONYMOUS=1), bound to loopback only")
        self.stdout.write(f"operator:  log in as 'operator' / '{self.operator_password}' to start scenarios "
                          f"({url}scenarios/) and inject faults ({url}cluster/); a new password every demo start")
        self.stdout.write(f"logs:      {self.run_dir / 'logs'}")
        self.stdout.write("Ctrl-C stops everything the demo started.")
        self.stdout.flush()

    def _create_samples(self, kubeconfig: str) -> None:
        create_samples(kubeconfig, kopf=self.kopf)


def create_samples(kubeconfig: str, *, kopf: bool) -> None:
    """Sample Deployments and PodSets (one per implementation, kopf's if it runs) so there is something
    to watch at once; the PodSet CRD first. Objects already there are left alone (``manage.py samples``
    makes them for a stack the demo did not start)."""
    from controllers.examples import podset
    from controllers.informers.http_client import KubernetesClient
    from controllers.informers.listwatch import ApiError

    client = KubernetesClient.from_kubeconfig(kubeconfig)
    podset.ensure_crd(client)
    samples = [("/apis/apps/v1/namespaces/default/deployments", body) for body in sample_deployments()]
    podsets = {**SAMPLE_PODSETS, **({KOPF_SAMPLE_PODSET: podset.KOPF} if kopf else {})}
    samples += [(f"/apis/{podset.API_VERSION}/namespaces/default/podsets", podset.podset(name, impl, 3))
                for name, impl in podsets.items()]
    for path, body in samples:
        try:
            client.send_json("POST", path, body)
        except ApiError as exc:
            if exc.code != 409:  # already there (a --state file, a second run): fine
                raise CommandError(f"could not create sample {body['metadata']['name']}: {exc}") from exc


def sample_deployments() -> list[dict]:
    out = []
    for name, (image, replicas) in SAMPLE_DEPLOYMENTS.items():
        out.append({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": name, "namespace": "default", "labels": {"app": name}},
                    "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                             "template": {"metadata": {"labels": {"app": name}},
                                          "spec": {"containers": [{"name": name, "image": image}]}}}})
    return out


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def _demo_operator() -> str:
    """An ``operator`` account for this demo run, with a fresh random password (printed, not stored)."""
    import secrets

    from django.contrib.auth.models import Group, User

    from dashboard.access import OPERATORS_GROUP

    password = secrets.token_urlsafe(12)
    user, _ = User.objects.get_or_create(username="operator")
    user.set_password(password)
    user.is_active = True
    user.save()
    user.groups.add(Group.objects.get_or_create(name=OPERATORS_GROUP)[0])
    return password


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
