"""``python manage.py runcontrollers``: the worker process.

Runs controllers (``--controller MODULE:NAME``, each a callable that receives the ``Manager`` and
registers informers and controllers on it) against a cluster, and/or the synthetic load generator
(``--synthetic RATE``), with every step published to Redis through the TelemetryObserver.

``--kopf RESOURCE`` (repeatable; ``podsets.demo.ctrlscope.dev``, as kubectl names resources) watches a
kopf operator that runs anywhere, without touching it: an informer on the resource reads the progress
kopf stores on each object (zero-code mode, ``controllers.kopf.zerocode``). ``--kopf-storage`` and
``--kopf-prefix`` must match the operator's progress storage settings (kopf's defaults otherwise).

With controllers, an ``Inspector`` thread answers the dashboard's object-inspector requests from the
Manager's informer caches (registered here as a callback, so telemetry never imports the informers)
and from the observer's ``LastUpdates`` (``--inspect-keys`` / ``--inspect-mib`` bound it).

Cluster: ``--kubeconfig``/``--context`` (default: ``$KUBECONFIG`` or ``~/.kube/config``),
``--in-cluster``, or the simulator's kubeconfig that ``make demo`` passes. A controller whose setup
raises is reported (on the console and to the dashboard) and skipped; the others run. Exceptions in
Reconcile or in handlers are the runtime's to report — they never stop the worker.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import signal
import socket
import threading
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from controllers.kopf.progress import DEFAULT_PREFIX, ProgressFormat, Storage
from controllers.observer import FanoutObserver
from controllers.schema import SYNTHETIC_TOPIC, RecordKind
from controllers.telemetry.inspector import Inspector
from controllers.telemetry.last_updates import DEFAULT_MAX_BYTES, DEFAULT_MAX_KEYS, LastUpdates
from controllers.telemetry.metrics_sampler import MetricsSampler
from controllers.telemetry.otel_env import otlp_from_environment, otlp_traces_endpoint
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis
from controllers.telemetry.synthetic import SyntheticLoad
from controllers.telemetry.telemetry_observer import TelemetryObserver

if TYPE_CHECKING:
    from controllers.telemetry.otel import OtelObserver


NAMESPACE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""A namespace's name is a DNS label (RFC 1123), as the API server validates it."""


def load_setup(spec: str) -> Callable[[Any], Any]:
    """``"pkg.module:name"`` → the callable; a clear CommandError for anything else."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CommandError(f"--controller {spec!r}: expected MODULE:NAME, e.g. controllers.examples.deployments:setup")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CommandError(f"--controller {spec!r}: cannot import {module_name}: {exc}") from exc
    target = getattr(module, attr, None)
    if not callable(target):
        raise CommandError(f"--controller {spec!r}: {module_name} has no callable {attr!r}")
    return target


PREFIX_PATTERN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def kopf_progress_format(opts: dict[str, Any]) -> ProgressFormat:
    """``--kopf-storage`` / ``--kopf-prefix`` as a ProgressFormat; a CommandError for bad values."""
    if not opts["kopf"] and (opts["kopf_storage"] or opts["kopf_prefix"]):
        raise CommandError("--kopf-storage and --kopf-prefix only apply with --kopf RESOURCE")
    prefix = opts["kopf_prefix"] if opts["kopf_prefix"] is not None else DEFAULT_PREFIX
    # An annotation key's prefix is a DNS subdomain; kopf needs one (its storages refuse an empty prefix).
    if not PREFIX_PATTERN.fullmatch(prefix) or len(prefix) > 253:
        raise CommandError(f"--kopf-prefix {prefix!r}: expected a DNS subdomain such as {DEFAULT_PREFIX}")
    return ProgressFormat(prefix=prefix, storage=Storage(opts["kopf_storage"] or Storage.BOTH))


class Command(BaseCommand):
    help = "Run the worker: controllers and/or synthetic telemetry, published to Redis."

    def add_arguments(self, parser):
        parser.add_argument("--controller", action="append", default=[], metavar="MODULE:NAME",
                            help="a callable receiving the Manager; repeatable")
        parser.add_argument("--kopf", action="append", default=[], metavar="RESOURCE",
                            help="zero-code: show a kopf operator's handlers on RESOURCE (e.g. "
                                 "podsets.demo.ctrlscope.dev) from what it stores on the objects; repeatable")
        parser.add_argument("--kopf-storage", choices=[s.value for s in Storage],
                            help="where the operator stores its progress (default: both, as kopf reads it)")
        parser.add_argument("--kopf-prefix",
                            help=f"the operator's annotation prefix (default: kopf's, {DEFAULT_PREFIX})")
        parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
        parser.add_argument("--context", help="kubeconfig context (default: current-context)")
        parser.add_argument("--in-cluster", action="store_true", help="use the pod's service account")
        parser.add_argument("--cluster-name", default="",
                            help="how the dashboard names the cluster (default: the kubeconfig context)")
        parser.add_argument("--worker-name", default=os.environ.get("CTRLSCOPE_WORKER", socket.gethostname()),
                            help="names this worker's telemetry topics (default: hostname)")
        parser.add_argument("--metrics-port", type=int, help="serve /metrics on 127.0.0.1:PORT")
        parser.add_argument("--allow-writes", action="store_true",
                            help="let the controllers write to a real cluster (default: read-only anywhere but "
                                 "the simulated cluster; see README 'Read-only by default')")
        parser.add_argument("--leader-elect", action="store_true", help="campaign on a Lease before reconciling")
        parser.add_argument("--lease", default="default/ctrlscope-worker", help="NAMESPACE/NAME of the Lease")
        parser.add_argument("--lease-duration", type=float, default=15.0, help="seconds (client-go default 15)")
        parser.add_argument("--renew-deadline", type=float, default=10.0, help="seconds (client-go default 10)")
        parser.add_argument("--retry-period", type=float, default=2.0, help="seconds (client-go default 2)")
        parser.add_argument("--watch-timeout", type=float, default=300.0,
                            help="seconds a watch asks the server to run, randomised up to twice that "
                                 "(client-go's minWatchTimeout, 300); a watch silent past it is taken as stalled")
        parser.add_argument("--resync", type=float, default=0.0, help="informer resync period in seconds (0: off)")
        parser.add_argument("--namespace", default="",
                            help="watch and cache only this namespace (controller-runtime's cache DefaultNamespaces; "
                                 "default: all namespaces)")
        parser.add_argument("--inspect-keys", type=int, default=DEFAULT_MAX_KEYS,
                            help=f"keys whose last update the object inspector keeps ({DEFAULT_MAX_KEYS:,})")
        parser.add_argument("--inspect-mib", type=float, default=DEFAULT_MAX_BYTES / 2**20,
                            help=f"MiB those updates may take ({DEFAULT_MAX_BYTES / 2**20:g})")
        parser.add_argument("--synthetic", type=float, metavar="RATE",
                            help="also publish RATE synthetic observations per second (load generator)")
        parser.add_argument("--objects", type=int, default=200, help="synthetic object count (200)")
        parser.add_argument("--topic", default=SYNTHETIC_TOPIC, help=f"synthetic topic name ({SYNTHETIC_TOPIC})")
        parser.add_argument("--duration", type=float, help="stop after this many seconds")
        parser.add_argument("--status-every", type=float, default=10.0,
                            help="print a status line every N seconds (0: never)")

    def handle(self, *args, **opts):
        if opts["synthetic"] is None and not opts["controller"] and not opts["kopf"]:
            raise CommandError("nothing to run: pass --controller MODULE:NAME, --kopf RESOURCE and/or --synthetic RATE")
        if opts["synthetic"] is not None and (opts["synthetic"] <= 0 or opts["objects"] <= 0):
            raise CommandError("--synthetic and --objects must be positive")
        if opts["namespace"] and not NAMESPACE_NAME.fullmatch(opts["namespace"]):
            raise CommandError(f"--namespace {opts['namespace']!r} is not a namespace name (a DNS label: lower-case "
                               "letters, digits and '-', at most 63 characters)")
        if opts["watch_timeout"] < 1:
            raise CommandError("--watch-timeout must be at least 1 second")
        if opts["inspect_keys"] < 1 or opts["inspect_mib"] <= 0:
            raise CommandError("--inspect-keys and --inspect-mib must be positive")
        setups = [(spec, load_setup(spec)) for spec in opts["controller"]]
        kopf_format = kopf_progress_format(opts)
        try:
            otlp_traces_endpoint()  # a bad OTLP variable stops the worker before anything starts
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        try:
            redis_handle = ensure_redis(settings.RUN_DIR)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        publisher = RedisPublisher(redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX).start()
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        threads: list[threading.Thread] = []
        manager = inspector = sampler = None
        self.otel: OtelObserver | None = None
        try:
            if setups or opts["kopf"]:
                from controllers.metrics import FAMILIES  # prometheus families: not for a synthetic-only worker

                manager, observer = self._start_manager(setups, publisher, opts, kopf_format)
                threads.append(threading.Thread(target=manager.run, name="manager", daemon=True))
                factory = manager.factory
                inspector = Inspector(redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX, worker=observer.worker,
                                      last_updates=observer.last_updates,
                                      stores=lambda: {i.name: i.store for i in factory.informers()}).start()
                # controller-runtime's metric families, once a second, for the dashboard's metrics charts.
                sampler = MetricsSampler(manager.metrics.registry, publisher, topic=observer.metrics_topic,
                                         families=FAMILIES, stages=observer.stages).start()
            if opts["synthetic"] is not None:
                load = SyntheticLoad(publisher, opts["synthetic"], topic=opts["topic"], objects=opts["objects"])
                threads.append(threading.Thread(target=load.run, args=(stop, opts["duration"]),
                                                name="synthetic", daemon=True))
                self.stdout.write(f"worker: publishing {opts['synthetic']:g} synthetic observations/s "
                                  f"to topic {opts['topic']!r}")
            for t in threads:
                t.start()
            self.stdout.write(f"worker {opts['worker_name']!r}: telemetry to {redis_handle.url} (Ctrl-C stops)")
            self.stdout.flush()
            self._wait(threads, stop, publisher, opts)
        finally:
            stop.set()
            if sampler is not None:
                sampler.stop()
            if inspector is not None:
                inspector.stop()
            if manager is not None:
                manager.stop()
            if self.otel is not None:
                self.otel.shutdown()  # ends open spans and flushes the batch to the collector
            for t in threads:
                t.join(5)
            publisher.stop()
            redis_handle.stop()

    def _start_manager(self, setups, publisher: RedisPublisher, opts: dict[str, Any], kopf_format: ProgressFormat
                       ) -> tuple[Any, TelemetryObserver]:
        # Imported here: the synthetic-only worker must not need a cluster or the runtime.
        from controllers.informers.http_client import KubernetesClient
        from controllers.informers.listwatch import ApiError
        from controllers.informers.write_guard import WriteGuard, ask_server
        from controllers.kopf import zerocode
        from controllers.reconcile.leader_election import KubernetesLeaseLock
        from controllers.reconcile.manager import Manager

        try:
            if opts["in_cluster"]:
                client = KubernetesClient.in_cluster()
            else:
                client = KubernetesClient.from_kubeconfig(opts["kubeconfig"], opts["context"])
        except Exception as exc:  # kubeconfig errors come in many types; all mean "cannot connect"
            raise CommandError(f"cannot load cluster configuration: {exc}") from exc
        last_updates = LastUpdates(max_keys=opts["inspect_keys"], max_bytes=int(opts["inspect_mib"] * 2**20))
        observer = TelemetryObserver(publisher, worker=opts["worker_name"], last_updates=last_updates)
        cluster_name = opts["cluster_name"] or client.context or client.server
        version = ""  # shown when known; the informers report an unreachable server themselves

        def probe() -> bool | None:
            nonlocal version
            simulated, answered = ask_server(client)
            if simulated is not None:
                version = answered
            return simulated

        def describe(guard: WriteGuard) -> None:
            observer.describe_cluster(name=cluster_name, server=client.server, version=version,
                                      simulated=guard.simulated, writes=guard.mode)

        lease_paths: list[str] = []
        if opts["leader_elect"]:
            namespace, _, name = opts["lease"].partition("/")
            if not name:
                raise CommandError("--lease must be NAMESPACE/NAME")
            lease_paths = KubernetesLeaseLock.paths(namespace, name)
        guard = WriteGuard(server=client.server, allow_writes=opts["allow_writes"], simulated=probe(), probe=probe,
                           exempt=lease_paths, on_change=describe)
        client.write_guard = guard
        describe(guard)
        if not guard.writes_allowed:
            self.stdout.write(f"worker: read-only against {client.server} "
                              + ("(not the simulated cluster)" if guard.simulated is False else
                                 "(could not tell yet whether it is the simulated cluster)")
                              + ": every write fails before it is sent; --allow-writes lets the controllers write")
        # A mistyped resource stops the worker at once, as kubectl does: there is nothing to watch.
        for spec in opts["kopf"]:
            try:
                resource = zerocode.resolve_resource(client, spec)
            except zerocode.UnknownResource as exc:
                raise CommandError(f"--kopf {spec}: {exc}") from exc
            except (OSError, ValueError, ApiError) as exc:
                raise CommandError(f"--kopf {spec}: cannot look the resource up on {client.server}: {exc}") from exc
            setups.append((f"--kopf {spec} (zero-code: {resource.controller})",
                           functools.partial(zerocode.setup, spec=resource, fmt=kopf_format)))
        lock = None
        if opts["leader_elect"]:
            namespace, _, name = opts["lease"].partition("/")
            lock = KubernetesLeaseLock(client, namespace, name)
        if lock is not None and not (opts["lease_duration"] > opts["renew_deadline"] > 1.2 * opts["retry_period"] > 0):
            raise CommandError("leader election needs lease-duration > renew-deadline > 1.2 x retry-period > 0")
        # OpenTelemetry spans beside the records when an OTLP endpoint is configured (README "OpenTelemetry").
        try:
            self.otel = otlp_from_environment(worker=opts["worker_name"])
        except ValueError as exc:  # the endpoint was checked at start; the SDK's OTEL_BSP_* are checked here
            raise CommandError(f"OpenTelemetry: {exc}") from exc
        # The identity ends in the pid, so an operator (or the leader-failover scenario) can find the leader.
        manager = Manager(client, resync_period=opts["resync"],
                          observer=observer if self.otel is None else FanoutObserver(observer, self.otel),
                          metrics_port=opts["metrics_port"], leader_election_lock=lock,
                          identity=f"{opts['worker_name']}-{os.getpid()}" if lock else "",
                          lease_duration=opts["lease_duration"], renew_deadline=opts["renew_deadline"],
                          retry_period=opts["retry_period"], min_watch_timeout=opts["watch_timeout"],
                          namespace=opts["namespace"] or None)
        started = 0
        for spec, setup in setups:
            try:
                setup(manager)
                started += 1
                self.stdout.write(f"controller: {spec} set up")
            except Exception as exc:  # user code: show it, keep the others running
                text = "".join(traceback.format_exception(exc))
                self.stderr.write(f"controller {spec} failed to set up and is skipped:\n{text}")
                publisher.publish(observer.errors_topic, {"k": RecordKind.SETUP_ERROR, "controller": spec,
                                                                   "error": text, "ts": time.time() * 1000})
        if not started:
            raise CommandError("no controller could be set up (see the errors above)")
        if manager.metrics_port is not None:
            self.stdout.write(f"metrics: http://127.0.0.1:{manager.metrics_port}/metrics")
        return manager, observer

    def _wait(self, threads: list[threading.Thread], stop: threading.Event, publisher: RedisPublisher,
              opts: dict[str, Any]) -> None:
        last = time.monotonic()
        while not stop.is_set() and any(t.is_alive() for t in threads):
            stop.wait(0.2)
            every = opts["status_every"]
            if every and time.monotonic() - last >= every:
                last = time.monotonic()
                self.stdout.write(f"worker: {publisher.records_published} records in "
                                  f"{publisher.frames_published} frames, {publisher.records_dropped} dropped, "
                                  f"redis {'up' if publisher.connected else 'DOWN'}")
                self.stdout.flush()
