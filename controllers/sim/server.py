"""``SimCluster``: the simulated Kubernetes cluster as one object you can start and stop.

It wires the parts together — ``Registry`` (what is served), ``Store`` (objects, RVs, history,
watchers), ``GarbageCollector``, ``ControlPlane`` (deployment/replica set controllers), ``Kubelet``,
``EventRecorder``, ``FaultInjector`` (over its ``SimFaultBackend``, served by ``FaultEndpoints``) and
the aiohttp ``KubeAPI`` — and runs them on one asyncio
event loop (uvloop when installed), which is also what makes the store's order total without locks.

Two ways to run it:

* in-process on a background thread (tests, the demo): ``sim = SimCluster(port=0); sim.start()``,
  then ``sim.url`` / ``sim.write_kubeconfig(path)``; ``sim.call(fn)`` runs ``fn`` on the loop thread
  to inspect or seed the store; ``sim.stop()`` saves state (if configured) and shuts down;
* in the foreground (``python manage.py simcluster``): ``run_server(...)`` blocks until SIGINT/SIGTERM.

Nothing here imports Django; the management command is a thin wrapper.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml
from aiohttp import web

from controllers.clock import Clock, RealClock
from controllers.faults.endpoints import FaultEndpoints
from controllers.faults.injector import FaultHook, FaultInjector
from controllers.faults.request_counts import RequestCounter
from controllers.loop_thread import LoopThread
from controllers.schema import WatchEventType
from controllers.sim.api import Access, KubeAPI
from controllers.sim.codec import MAX_BODY
from controllers.sim.controlplane import ControlPlane
from controllers.sim.discovery import Discovery
from controllers.sim.events import EventRecorder
from controllers.sim.faults import SimFaultBackend
from controllers.sim.gc import GarbageCollector
from controllers.sim.gctuning import GcFreezer
from controllers.sim.kubelet import Kubelet
from controllers.sim.nodes import LEASE_RENEW_INTERVAL
from controllers.sim.resources import Registry
from controllers.sim.rootca import RootCAPublisher
from controllers.sim.store import Store, copy_obj
from controllers.sim.watch import CloseReason


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop when installed (about twice the requests per second for aiohttp), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()
DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
KUBERNETES_SERVICE: dict[str, Any] = {
    "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
    "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "protocol": "TCP",
                                                   "targetPort": 6443}]},
}


class SimCluster(LoopThread):
    """A simulated Kubernetes API server plus control plane, served over real HTTP."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, clock: Clock | None = None,
                 state_file: str | os.PathLike[str] | None = None, schedule_delay: float = 0.2,
                 start_delay: float = 1.0, log_interval: float = 1.0, bookmark_interval: float = 60.0,
                 history_limit: int = 50_000, seed: int = 0, on_fault: FaultHook | None = None,
                 control_plane: bool = True, git_version: str = "v1.32.0", watch_flush_delay: float = 0.002,
                 gc_freeze: bool = False, nodes: int = 3, lease_interval: float = LEASE_RENEW_INTERVAL,
                 first_resource_version: int = 1, record_access: bool = False, publish_root_ca: bool = True,
                 protobuf_responses: bool = True) -> None:
        self.host = host
        self.port = port
        self.clock = clock or RealClock()
        self.state_file = Path(state_file) if state_file else None
        self.registry = Registry.with_builtins()
        self.store = Store(self.registry, clock=self.clock, history_limit=history_limit)
        # A cluster started afresh may begin its resourceVersions higher, with everything below
        # compacted: clients of an earlier run of it then get 410 and relist (etcd's snapshot restore
        # with --bump-revision --mark-compacted), instead of resuming watches against RVs reissued
        # for other objects.
        self.store.rv = self.store.compacted_rv = max(1, first_resource_version)
        self.gc = GarbageCollector(self.store)
        self.store.listeners.append(self._on_crd_event)
        self.events = EventRecorder(self.store)
        self.kubelet = Kubelet(self.store, clock=self.clock, schedule_delay=schedule_delay, start_delay=start_delay,
                               log_interval=log_interval, events=self.events, nodes=nodes,
                               kubelet_version=git_version, lease_interval=lease_interval)
        self.control_plane = ControlPlane(self.store, events=self.events) if control_plane else None
        # kube-root-ca.crt in every namespace, as a real controller-manager publishes it (see rootca.py).
        self.root_ca = RootCAPublisher(self.store) if control_plane and publish_root_ca else None
        self.faults = FaultInjector(SimFaultBackend(self.store, self.kubelet, reset=self._reset), seed=seed,
                                    on_fault=on_fault)
        # Resource requests served, by user agent (GET /_sim/requests): the load each client makes.
        self.requests = RequestCounter(clock=self.clock)
        self.fault_api = FaultEndpoints(self.faults, requests=self.requests)
        self.discovery = Discovery(self.registry, git_version=git_version)
        self.api = KubeAPI(store=self.store, discovery=self.discovery, faults=self.faults, kubelet=self.kubelet,
                           requests=self.requests,
                           bookmark_interval=bookmark_interval, server_address=lambda: f"{self.host}:{self.port}",
                           flush_delay=watch_flush_delay, protobuf=protobuf_responses)
        if record_access:
            self.api.accesses = set()
        # Process-wide GC tuning: only for a process that runs nothing but the simulator.
        self.gc_freezer = GcFreezer() if gc_freeze else None
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._bootstrap()

    # ---- state -------------------------------------------------------------------------------

    def _bootstrap(self) -> None:
        loaded = False
        if self.state_file is not None and self.state_file.exists():
            self.store.load(orjson.loads(self.state_file.read_bytes()))
            loaded = True
        self._seed()
        # The API server's watch cache starts at the revision it first listed: a watch from any
        # older resourceVersion (1, say) is "too old" at once, not a replay of the bootstrap.
        self.store.compact()
        if loaded:
            self.kubelet.adopt()

    def _seed(self) -> None:
        """What every cluster starts with: the default namespaces, the ``kubernetes`` service and the
        nodes the kubelet registers."""
        rt = self.registry.storage_type(("", "namespaces"))
        assert rt is not None
        for ns in DEFAULT_NAMESPACES:
            if self.store.find(rt.key, "", ns) is None:
                self.store.create(rt, None, {"metadata": {"name": ns}}, manager="sim-bootstrap")
        services = self.registry.storage_type(("", "services"))
        assert services is not None
        if self.store.find(services.key, "default", "kubernetes") is None:
            # kube-apiserver's bootstrap controller keeps this service for in-cluster clients; it is the
            # first row of `kubectl get svc` on every real cluster (the allocator starts above .1).
            self.store.create(services, "default", copy_obj(KUBERNETES_SERVICE), manager="kube-apiserver")
        self.kubelet.register_nodes()

    def _on_crd_event(self, ev: Any) -> None:
        """Serve a CRD's kinds the moment it is written; drop them (and their objects) when it goes."""
        if ev.key != ("apiextensions.k8s.io", "customresourcedefinitions"):
            return
        if ev.type is WatchEventType.DELETED:
            name = ev.obj["metadata"]["name"]
            self.store.defer(lambda: self._remove_crd(name))
        else:
            self.registry.register_crd(ev.obj)

    def _remove_crd(self, name: str) -> None:
        """Delete every custom resource of a deleted CRD (watchers see DELETED), then stop serving it."""
        key = next((k for k, v in self.registry.crd_owner.items() if v == name), None)
        rt = self.registry.storage_type(key) if key is not None else None
        if key is None or rt is None:
            return
        for ns, obj_name in list(self.store.bucket(key).objects):
            obj = self.store.find(key, ns, obj_name)
            if obj is None:
                continue
            if obj["metadata"].get("finalizers"):
                cleared = copy_obj(obj)
                cleared["metadata"]["finalizers"] = []
                self.store.update(rt, ns or None, obj_name, cleared, manager="apiextensions-controller")
            if self.store.find(key, ns, obj_name) is not None:
                self.store.delete(rt, ns or None, obj_name)
        self.registry.unregister_crd(name)
        self.store.buckets.pop(key, None)

    def _reset(self) -> None:
        for name in list(self.registry.crd_owner.values()):
            self.registry.unregister_crd(name)
        self.store.buckets.clear()
        self.store.dependents.clear()
        self.kubelet.forget_all()
        self._seed()
        # Compacted after the seed, so every watch from before the reset gets 410 and relists: the
        # deleted objects never had DELETED events, and a watch resumed from an older RV would
        # silently keep them in its cache.
        self.store.compact()

    def save_state(self) -> None:
        if self.state_file is None:
            return
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(self.state_file.suffix + ".tmp")
        tmp.write_bytes(orjson.dumps(self.store.dump()))
        tmp.replace(self.state_file)

    # ---- lifecycle (async) -------------------------------------------------------------------

    def make_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/_sim/{tail:.*}", self.fault_api.handle)
        app.router.add_route("*", "/{tail:.*}", self.api.handle)
        return app

    async def start_async(self) -> None:
        self._runner = web.AppRunner(self.make_app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = site._server
        sockets: list[socket.socket] = list(getattr(server, "sockets", None) or [])
        if sockets:
            self.port = sockets[0].getsockname()[1]
        self.kubelet.start()
        if self.control_plane is not None:
            self.control_plane.start()
            self.control_plane.resync()
        if self.root_ca is not None:
            self.root_ca.start()
            self.root_ca.resync()
        if self.gc_freezer is not None:
            self.gc_freezer.start()

    async def stop_async(self) -> None:
        for w in self.store.all_watchers():
            w.close(CloseReason.CLEAN)
        await asyncio.sleep(0)
        await self.kubelet.stop()
        if self.control_plane is not None:
            await self.control_plane.stop()
        if self.root_ca is not None:
            await self.root_ca.stop()
        if self.gc_freezer is not None:
            await self.gc_freezer.stop()
        self.save_state()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    # ---- lifecycle (background thread): LoopThread's start/stop/call over start_async/stop_async ----
    thread_name = "simcluster"

    def new_loop(self) -> asyncio.AbstractEventLoop:
        return new_event_loop()

    # ---- kubeconfig --------------------------------------------------------------------------

    def accesses(self) -> set[Access]:
        """The distinct resource requests served so far, as RBAC would authorize them (a cluster
        made with ``record_access=True``; tests derive least-privilege rules from it)."""
        recorded = self.api.accesses
        if recorded is None:
            raise RuntimeError("this SimCluster does not record accesses: create it with record_access=True")
        return self.call(lambda: set(recorded))

    def kubeconfig(self, context: str = "ctrlscope-sim") -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "ctrlscope-sim"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                       "namespace": "default"}}],
            "current-context": context,
            "preferences": {},
        }

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(self.kubeconfig(), sort_keys=False))
        return target


def run_server(*, host: str = "127.0.0.1", port: int = 6443, kubeconfig: str | os.PathLike[str] | None = None,
               state_file: str | os.PathLike[str] | None = None, announce: Callable[[str], None] = print,
               on_start: Callable[[SimCluster], None] | None = None, **options: Any) -> None:
    """Serve in the foreground until SIGINT/SIGTERM; saves state on the way out.

    ``on_start(sim)`` runs on the loop once the port listens, before the first request is served
    (``manage.py simcluster`` attaches its fault telemetry there)."""

    async def main() -> None:
        options.setdefault("gc_freeze", True)  # this process serves nothing else
        sim = SimCluster(host=host, port=port, state_file=state_file, **options)
        await sim.start_async()
        # Handlers first: a SIGTERM during the start-up below must stop cleanly (state saved, the
        # fault telemetry saying it stopped), not kill the process with the default action.
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        announce(f"simulated cluster listening on {sim.url}")
        if kubeconfig:
            path = sim.write_kubeconfig(kubeconfig)
            announce(f"kubeconfig written to {path} (export KUBECONFIG={path})")
        if on_start is not None:
            on_start(sim)  # no await since start_async: no request was served before it
        # Build the OpenAPI documents now (~250 ms), not inside the first kubectl request, where the
        # event loop would stall every watch meanwhile. Only here: test clusters rarely need them.
        sim.discovery.openapi_index()
        await stop.wait()
        announce("stopping simulated cluster")
        await sim.stop_async()

    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        runner.run(main())
