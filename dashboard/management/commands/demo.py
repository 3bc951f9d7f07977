"""``python manage.py demo`` (what ``make demo`` runs): everything needed to watch controllers, on loopback.

Starts, in order: Redis (redisboot's rule), the database schema, the cluster, a few sample Deployments
and PodSets, the worker running the example controllers, the kopf PodSet operator (``runkopf``), the
Go samples (when there is a Go toolchain), and the dashboard under daphne; then prints the URL and
how to point kubectl at the cluster.

The cluster is one of three:

- the simulated cluster (default): a child ``simcluster``; writes allowed (the simulator says it is
  one), fault injection and every scenario available;
- ``--real``: a real Kubernetes control plane (etcd, kube-apiserver, controller-manager, scheduler,
  kwok nodes) as a child ``realcluster``, built from the Go module proxy on first use (minutes: its
  progress lines are relayed while the demo waits). It is local and disposable, so the workers get
  ``--allow-writes``. A child ``faultproxy`` stands in front of it: the workers, the kopf operator,
  the Go samples, the Faults panel and the scenarios all go through the proxy, so faults and every
  scenario work as on the simulator (but pausing a kubelet or resetting the cluster, which only the
  simulator can do); kubectl with the control plane's own kubeconfig goes around it;
- ``--kubeconfig``: your own cluster, never changed unless you say so. The workers only observe
  (read-only: every write is refused before it is sent and shows as "refused: read-only"), no
  samples are created and the kopf operator does not run; ``--allow-writes`` lets the example
  controllers write there (``<deployment>-summary`` ConfigMaps).

 Ctrl-C (or SIGTERM) stops everything it started, in reverse order. The children run under
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
from controllers.ports import free_port, port_is_free
from controllers.process import Child, SupervisionError, Supervisor, stop_process
from controllers.scenarios import SCENARIOS
from controllers.scenarios.base import DEMO_STATE, KOPF_WORKER, STANDBY_WANT, STANDBY_WORKER
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis

DEMO_LEASE = "default/ctrlscope-demo"
# Shorter than client-go's 15/10/2 s so a demo failover takes seconds, same ratios rules
# (lease duration > renew deadline > 1.2 x retry period).
DEMO_LEASE_TIMINGS = ["--lease-duration", "6", "--renew-deadline", "4", "--retry-period", "1"]
# How the demo starts a management command in a child: ``python -m dashboard`` is ``manage.py``, in a
# checkout and in an installed package alike.
MANAGE = ["-m", "dashboard"]
DEFAULT_CONTROLLERS = ["controllers.examples.deployments:setup", "controllers.examples.podset:setup"]
# The Go samples: (worker name, program in go/cmd, extra flags, whether it writes). The Go reconciler
# writes its own ConfigMaps (<name>-go-summary), so it never fights the Python one over <name>-summary;
# the informer sample only reads (it has no --allow-writes: its guard is always read-only).
GO_WORKERS = [("go-informer", "deployment-informer", [], False),
              ("go-summary", "deployment-summary", ["--summary-suffix", "-go-summary"], True)]
SAMPLE_DEPLOYMENTS = {"web": ("nginx:1.27", 3), "api": ("ghcr.io/example/api:2.1", 2)}
SAMPLE_PODSETS = {"by-handlers": "handlers", "by-reconciler": "reconciler"}
KOPF_SAMPLE_PODSET = "web-kopf"  # created when the kopf operator runs
KOPF_OPERATOR = "controllers/examples/kopf_podsets.py"
KOPF_RESOURCE = "podsets.demo.ctrlscope.dev"  # what the demo worker watches in zero-code mode
# kopf retries a failed handler after 60 s by default; the demo's operator after 10 s, so the
# kopf-vs-reconciler scenario does not keep its audience waiting a minute (its narration says so).
KOPF_DEMO_BACKOFF = "10"
REAL_CLUSTER_NAME = "realcluster"  # what the page calls --real's cluster (workers' --cluster-name)
# How long --real waits for its control plane's kubeconfig: a cold build of the pinned binaries took
# ~15 min of CPU on 2 cores (DESIGN.md), and a shared machine may be slower; a cached start is ~30 s.
REAL_CLUSTER_TIMEOUT = 3600.0


class Command(BaseCommand):
    help = "Start Redis (if needed), the worker and the dashboard on loopback; Ctrl-C stops them all."
    kopf = False  # whether the kopf operator runs: handle() decides (the samples include its PodSet then)

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("CTRLSCOPE_PORT", "8000")),
                            help="dashboard port on 127.0.0.1 (default 8000; a free one if taken)")
        parser.add_argument("--rate", type=float, default=0.0,
                            help="also publish synthetic observations per second (default 0: off)")
        parser.add_argument("--kubeconfig", default=os.environ.get("CTRLSCOPE_KUBECONFIG"),
                            help="watch your own cluster instead of the simulator, read-only unless --allow-writes "
                                 "(default: the simulator; CTRLSCOPE_KUBECONFIG)")
        parser.add_argument("--context", help="kubeconfig context for --kubeconfig")
        parser.add_argument("--allow-writes", action="store_true",
                            help="let the workers' controllers write to the --kubeconfig cluster (default: they only "
                                 "observe it; the simulator and --real allow writes anyway)")
        parser.add_argument("--real", action="store_true",
                            help="run on a real Kubernetes control plane started for the demo (manage.py realcluster; "
                                 "the first run builds it, ~10-15 min) instead of the simulator; writes allowed")
        parser.add_argument("--replicas", type=int, default=1,
                            help="worker replicas; more than 1 turns on leader election (default 1)")
        parser.add_argument("--controller", action="append",
                            help=f"controllers to run (default: {DEFAULT_CONTROLLERS[0]})")
        parser.add_argument("--kopf", action=argparse.BooleanOptionalAction, default=None,
                            help=f"run the kopf PodSet operator ({KOPF_OPERATOR}) as worker {KOPF_WORKER} "
                                 "(default: on the simulator and --real yes, on your --kubeconfig cluster no: it "
                                 "creates and deletes pods there, so it also needs --allow-writes)")
        parser.add_argument("--no-go", action="store_true", default=golang.skipped(),
                            help="do not build and run the Go sample controllers (default: run them when a "
                                 "Go toolchain is found; CTRLSCOPE_SKIP_GO=1 also skips them)")

    def handle(self, *args, **opts):
        check_options(opts)
        run_dir = Path(settings.RUN_DIR)
        (run_dir / "logs").mkdir(parents=True, exist_ok=True)
        try:
            redis_handle = ensure_redis(run_dir)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"redis:     {redis_handle.url} ({redis_handle.source})")
        call_command("migrate", verbosity=0, interactive=False)
        self.operator_password = _demo_operator()
        self.port = opts["port"] if port_is_free(opts["port"]) else free_port()
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
        """Start the cluster (unless it is yours), the workers and the dashboard, in order."""
        run_dir, opts = self.run_dir, self.opts
        kubeconfig = opts["kubeconfig"]
        real = opts["real"]
        # Writes: the simulator allows them itself (the workers ask its /version); --real's cluster is
        # local and disposable, so the workers are told; your cluster only with --allow-writes.
        self.allow_writes = real or bool(kubeconfig and opts["allow_writes"])
        self.kopf = opts["kopf"] if opts["kopf"] is not None else not kubeconfig
        if self.kopf and not self._kopf_supported():
            self.kopf = False
        cluster_name: list[str] = []  # your cluster is named by its kubeconfig context
        if kubeconfig:
            if self.allow_writes:
                self.stdout.write(f"cluster:   {kubeconfig} (your cluster; --allow-writes: the example controllers "
                                  "write to it, e.g. a <deployment>-summary ConfigMap per Deployment)")
            else:
                self.stdout.write(f"cluster:   {kubeconfig} (your cluster, read-only: the workers only observe it; "
                                  "every write their controllers try is refused before it is sent and shows as "
                                  "\"refused: read-only\"; --allow-writes lets them write)")
        elif real:
            upstream = str(run_dir / "kubeconfig-real.yaml")
            self._start_real_cluster(supervisor, upstream)
            self._create_samples(upstream)
            self.stdout.write(f"cluster:   real ({REAL_CLUSTER_NAME}); try: KUBECONFIG={upstream} "
                              "kubectl get nodes,deployments,podsets,pods")
            kubeconfig = self._start_fault_proxy(supervisor, upstream)
            self.env["CTRLSCOPE_SIM_KUBECONFIG"] = kubeconfig
            self.stdout.write(f"faults:    through a fault proxy in front of it (manage.py faultproxy; its kubeconfig "
                              f"{kubeconfig}): the workers and the scenarios go through it; pausing a kubelet and "
                              "resetting the cluster are the simulator's only")
            self.stdout.write("writes:    allowed (--allow-writes): this control plane is local and disposable, "
                              "so the example controllers write to it")
            cluster_name = ["--cluster-name", REAL_CLUSTER_NAME]
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
        if opts["kubeconfig"]:
            # No simulator, no proxy: the dashboard's Faults panel says so, and never loads these credentials.
            self.env["CTRLSCOPE_SIM_KUBECONFIG"] = ""
            self.stdout.write(f"faults:    unavailable: the Faults panel and the scenarios that inject faults "
                              f"({', '.join(fault_scenarios())}) need the simulated cluster or --real (README: "
                              "faults on your own cluster)")
        allow_writes = ["--allow-writes"] if self.allow_writes else []
        replicas = opts["replicas"]
        # On a cluster of the demo's own the workers always campaign for a Lease (so a standby can be
        # added for the leader-failover scenario); on yours only when replicated, because leader
        # election writes a Lease there.
        leader_election = replicas > 1 or not opts["kubeconfig"]

        def worker(name: str, suffix: str, *, synthetic: bool = False) -> Child:
            argv = [*MANAGE, "runcontrollers", "--kubeconfig", kubeconfig, "--worker-name", name, *cluster_name,
                    *allow_writes]
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
        # The scenarios read this: the workers, and the cluster they may drive (not yours: scenarios
        # create, scale and delete PodSets and pods).
        (run_dir / DEMO_STATE).write_text(json.dumps({
            "replicas": replicas, "leader_election": leader_election, "lease": DEMO_LEASE if leader_election else None,
            "kubeconfig": None if opts["kubeconfig"] else kubeconfig,
            "simulated": not opts["kubeconfig"] and not real}))
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

    def _start_real_cluster(self, supervisor: Supervisor, kubeconfig: str) -> None:
        """``manage.py realcluster`` as an unsupervised child (if it dies, the demo ends and shows its
        log), waited for until it writes ``kubeconfig``: its progress lines (a cold build takes
        minutes) are relayed meanwhile, so the wait is never silent."""
        log = self.run_dir / "logs" / "realcluster.log"
        self.stdout.write(f"cluster:   starting a real Kubernetes control plane (manage.py realcluster, log {log}); "
                          "the first run builds it from the Go module proxy (~10-15 min on 2 cores), later runs "
                          "start in under a minute")
        self.stdout.flush()
        Path(kubeconfig).unlink(missing_ok=True)
        relay = LogRelay(log, lambda line: self._say(f"cluster:   {line}"))
        supervisor.start(_SlowToStopChild("real cluster", [sys.executable, *MANAGE, "realcluster",
                                                           "--kubeconfig", kubeconfig], self.env, log,
                                          cwd=settings.BASE_DIR))
        # Relayed until the kubeconfig appears (not after: the child's own hints then, "Ctrl-C stops
        # it", are not the demo's); the demo says what is ready itself, and if the child dies first,
        # SupervisionError shows the end of its log.
        supervisor.wait_ready(lambda: Path(kubeconfig).exists() or relay(),
                              f"the real control plane did not write {kubeconfig}", timeout=REAL_CLUSTER_TIMEOUT)

    def _start_fault_proxy(self, supervisor: Supervisor, upstream: str) -> str:
        """``manage.py faultproxy`` in front of ``upstream`` as an unsupervised child (if it dies, the demo
        ends: every worker reads through it); returns the kubeconfig it writes for its clients."""
        kubeconfig = str(self.run_dir / "kubeconfig-faultproxy.yaml")
        Path(kubeconfig).unlink(missing_ok=True)
        supervisor.start(self._child("fault proxy", [*MANAGE, "faultproxy", "--upstream-kubeconfig", upstream,
                                                     "--kubeconfig", kubeconfig], "faultproxy"))
        supervisor.wait_ready(Path(kubeconfig).exists, f"the fault proxy did not write {kubeconfig}")
        return kubeconfig

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
                *(["--allow-writes"] if self.allow_writes else []),
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
        for worker, program, extra, writes in GO_WORKERS:
            argv = [str(programs[program]), "--kubeconfig", kubeconfig, "--worker-name", worker, *extra,
                    *(["--allow-writes"] if writes and self.allow_writes else [])]
            supervisor.start(Child(f"go worker {worker}", argv, self.env, self.run_dir / "logs" / f"{worker}.log",
                                   cwd=settings.BASE_DIR, pid_file=self.run_dir / f"{worker}.pid"))
        self.stdout.write(f"go:        workers {', '.join(w for w, _, _, _ in GO_WORKERS)} (client-go and "
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


def fault_scenarios() -> list[str]:
    """The scenarios that inject faults: they need the simulator or a fault proxy."""
    return [s.name for s in SCENARIOS.values() if s.needs_faults]


def check_options(opts: dict) -> None:
    """Refuse contradictory or useless options before anything starts, each in one sentence."""
    if opts["replicas"] < 1:
        raise CommandError("--replicas must be at least 1")
    if opts["real"] and opts["kubeconfig"]:
        from_env = " (here from CTRLSCOPE_KUBECONFIG)" if opts["kubeconfig"] == os.environ.get("CTRLSCOPE_KUBECONFIG") else ""
        raise CommandError(f"--real and --kubeconfig{from_env} are mutually exclusive: --real starts a control plane "
                           "of its own, --kubeconfig watches yours")
    if opts["context"] and not opts["kubeconfig"]:
        raise CommandError("--context chooses a context of --kubeconfig's file: give --kubeconfig too")
    if opts["kubeconfig"] and opts["kopf"] and not opts["allow_writes"]:
        raise CommandError("--kopf on your own cluster needs --allow-writes: the kopf operator writes there (its "
                           "progress on each PodSet, and the pods it creates and deletes)")


class LogRelay:
    """Says each complete line a child appended to its log since the last call (a child's progress,
    relayed while the demo waits for it). Returns False, so it can lead an ``or`` in a readiness check."""

    def __init__(self, path: Path, say) -> None:
        self.path = path
        self.say = say
        self.offset = 0
        self.partial = b""

    def __call__(self) -> bool:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return False  # not created yet
        self.offset += len(chunk)
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for line in lines:
            text = line.decode(errors="replace").rstrip()
            if text:
                self.say(text.removeprefix("realcluster: "))
        return False


class _SlowToStopChild(Child):
    """A child that stops a tree of its own (the control plane's components, one after another):
    it gets a minute after SIGTERM, not ``stop_process``'s default 10 s, before it is killed."""

    def stop(self) -> None:
        stop_process(self.proc, grace=60.0)


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
