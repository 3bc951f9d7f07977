"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok's fake nodes, as child processes of this one.

This is the second cluster tier beside the simulator (``controllers/sim``), the way envtest is
controller-runtime's -- but with the controller-manager, the scheduler and nodes, so a Deployment
really becomes a ReplicaSet and Running Pods, the garbage collector deletes dependents and
namespaces finish terminating. Every request ctrlscope, kubectl or a Go controller sends to it is
answered by the real API server code.

Start-up, in order (each step waits for the one before): credentials (``pki``) in the run
directory; etcd (``--unsafe-no-fsync``: the data is disposable, and fsync dominates write latency
on a shared disk); kube-apiserver (static tokens, Node+RBAC authorization, service-account keys,
no endpoint reconciler: its address is loopback, which an EndpointSlice may not hold), until
``/readyz`` answers; the controller-manager and the scheduler; kwok, then ``nodes`` fake Nodes it
manages; then the ``default`` ServiceAccount (the controller-manager makes it; pods cannot be
created before it exists). Only then is the kubeconfig written -- atomically, so whoever waits for
the file finds a cluster that takes pods.

Every component is a ``controllers.process.Child``: its own session and log file
(``<run_dir>/logs/<component>.log``), and Linux's parent-death signal, so a killed parent leaves no
process behind. ``stop`` stops them in reverse order. A component that exits during start-up fails
the start with the end of its log.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controllers.clock import Clock, RealClock
from controllers.ports import free_port, port_is_free
from controllers.process import Child
from controllers.realcluster import pki
from controllers.realcluster.build import Binaries

NODE_ANNOTATION = "kwok.x-k8s.io/node"
START_TIMEOUT = 180.0
"""Seconds the whole start-up may take (a loaded 2-core machine needs ~20-40 s)."""
CLUSTER_NAME = "realcluster"


class ClusterError(Exception):
    """The control plane could not start or answer; the message says why, for a person to read."""


class RealCluster:
    """One local control plane. ``start()`` brings it up and writes ``kubeconfig``; ``stop()`` takes it
    down. ``port`` is the API server's (0: a free one); ``say`` reports each step in one line."""

    def __init__(self, binaries: Binaries, run_dir: Path, *, port: int = 0, nodes: int = 2,
                 say: Callable[[str], None] = print, clock: Clock | None = None) -> None:
        if nodes < 0:
            raise ClusterError("--nodes must be 0 or more")
        self.binaries = binaries
        self.run_dir = run_dir
        self.nodes = nodes
        self.say = say
        self.clock: Clock = clock or RealClock()
        if port and not port_is_free(port):
            raise ClusterError(f"port {port} on 127.0.0.1 is taken (another API server or simulator?): "
                               "choose another with --port, or 0 for a free one")
        self.port = port or free_port()
        self.etcd_port = free_port()
        self.children: list[Child] = []
        self.extra_apiservers: list[Child] = []
        self.creds: pki.Credentials | None = None
        self.kubeconfig: Path | None = None

    # -- addresses and credentials -------------------------------------------------------------------
    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def token(self) -> str:
        assert self.creds is not None, "start() first"
        return self.creds.tokens["admin"]

    @property
    def ca_file(self) -> Path:
        assert self.creds is not None, "start() first"
        return self.creds.ca_cert

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self, kubeconfig: Path, *, timeout: float = START_TIMEOUT) -> None:
        """Start every component and write ``kubeconfig`` once the cluster takes pods."""
        deadline = self.clock.now() + timeout
        shutil.rmtree(self.run_dir, ignore_errors=True)
        (self.run_dir / "logs").mkdir(parents=True)
        self.creds = pki.generate(self.run_dir / "pki")
        try:
            self._start_etcd(deadline)
            self.children.append(self._apiserver(self.port, "kube-apiserver"))
            self.say(f"realcluster: kube-apiserver {self.binaries.kubernetes_version} starting on {self.server}")
            self._wait(lambda: self._ready(self.server), deadline, "the API server's /readyz")
            for identity, command in (("controller-manager", "kube-controller-manager"),
                                      ("scheduler", "kube-scheduler")):
                path = self._component_kubeconfig(identity)
                self.children.append(self._child(command, self._component_args(command, path)))
            self.children.append(self._child("kwok", [
                "--kubeconfig", str(self._component_kubeconfig("kwok")), "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={NODE_ANNOTATION}=fake", "--config",
                str(self.binaries.stages), "--server-address", f"127.0.0.1:{free_port()}",
                "--node-lease-duration-seconds", "40"]))
            for i in range(self.nodes):
                self._create_node(f"kwok-node-{i}")
            self._wait(self._nodes_ready, deadline, f"{self.nodes} kwok node(s) to turn Ready")
            self._wait(lambda: self._exists("/api/v1/namespaces/default/serviceaccounts/default"), deadline,
                       "the controller-manager to create the default ServiceAccount")
        except BaseException:
            self.stop()
            raise
        self.kubeconfig = kubeconfig
        write_kubeconfig(kubeconfig, server=self.server, ca_file=self.ca_file, token=self.token)
        self.say(f"realcluster: ready ({self.nodes} kwok nodes); kubeconfig {kubeconfig}")

    def stop(self) -> None:
        """Stop every component, last started first (etcd last)."""
        for child in [*reversed(self.extra_apiservers), *reversed(self.children)]:
            child.stop()
        self.extra_apiservers.clear()
        self.children.clear()

    def __enter__(self) -> RealCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check(self) -> None:
        """Raise ``ClusterError`` if a component has exited (with the end of its log)."""
        for child in self.children:
            if not child.alive():
                raise ClusterError(f"{child.name} exited ({child.proc.returncode}); the end of {child.log}:\n"
                                   f"{child.tail()}")

    # -- what tests need beyond a running cluster ------------------------------------------------------
    def component(self, name: str) -> Child:
        """The running component called ``name`` (``etcd``, ``kube-apiserver``, ``kube-controller-manager``,
        ``kube-scheduler``, ``kwok``)."""
        for child in self.children:
            if child.name == name:
                return child
        raise ClusterError(f"no component {name!r} (there are: {', '.join(c.name for c in self.children)})")

    def kill(self, name: str) -> None:
        """SIGKILL one component, as a crash or the OOM killer does: no shutdown, no goodbye to its
        clients (the API server's watches break mid-stream, etcd leaves its data as it was)."""
        child = self.component(name)
        if child.alive():
            child.proc.kill()
            child.proc.wait(10)

    def restart(self, name: str, *, timeout: float = 90.0) -> float:
        """Start a killed component again with the same command line -- the same ports, and for etcd the
        same data directory, so the cluster's state and revision go on where they were -- and wait until
        it serves (etcd's ``/health``, the API server's ``/readyz``; the others: still running a moment
        later). Returns the seconds that took."""
        child = self.component(name)
        started = self.clock.now()
        child.relaunch()
        self.say(f"realcluster: {name} restarted (pid {child.proc.pid})")

        def ready() -> bool:
            if name == "etcd":
                return _get_ok(f"{self.etcd_url}/health")
            if name == "kube-apiserver":
                return self._ready(self.server)
            return self.clock.now() >= started + 1.0

        self._wait(ready, started + timeout, f"{name} to serve again after its restart", children=[child])
        return self.clock.now() - started

    def start_second_apiserver(self, *, timeout: float = 90.0) -> str:
        """Another kube-apiserver on the same etcd, with a fresh watch cache; its URL. A watch from a
        resourceVersion that etcd has compacted gets a real 410 there (the first server's watch cache
        keeps serving old versions it still holds)."""
        port = free_port()
        child = self._apiserver(port, f"kube-apiserver-{len(self.extra_apiservers) + 2}")
        self.extra_apiservers.append(child)
        url = f"https://127.0.0.1:{port}"
        self._wait(lambda: self._ready(url), self.clock.now() + timeout, f"{child.name}'s /readyz", children=[child])
        return url

    def etcd_revision(self) -> int:
        """etcd's current revision (the newest resourceVersion), through its HTTP gateway."""
        answer = self._etcd("/v3/kv/range", {"key": base64.b64encode(b"\0").decode()})
        return int(answer["header"]["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd's history up to ``revision`` (default: the current one); returns it."""
        revision = revision or self.etcd_revision()
        self._etcd("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def api(self, method: str, path: str, body: Any = None, *, server: str | None = None,
            token: str | None = None, timeout: float = 10.0) -> tuple[int, Any]:
        """One JSON request as the admin (or ``token``); returns (status, body): decoded JSON, or the
        text of a body that is not JSON (``/readyz`` answers ``ok``)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request((server or self.server) + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token or self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=self._tls()) as response:
                return response.status, _decoded(response.read())
        except urllib.error.HTTPError as exc:
            return exc.code, _decoded(exc.read())

    # -- internals ---------------------------------------------------------------------------------
    def _child(self, command: str, args: list[str], *, name: str | None = None) -> Child:
        name = name or command
        return Child(name, [str(self.binaries.path(command)), *args], {**os.environ},
                     self.run_dir / "logs" / f"{name}.log", cwd=self.run_dir)

    def _start_etcd(self, deadline: float) -> None:
        peer = free_port()
        self.children.append(self._child("etcd", [
            "--name", "ctrlscope", "--data-dir", str(self.run_dir / "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
            f"http://127.0.0.1:{peer}", "--initial-cluster", f"ctrlscope=http://127.0.0.1:{peer}",
            "--listen-metrics-urls", f"http://127.0.0.1:{free_port()}",
            "--unsafe-no-fsync", "--log-level", "warn"]))
        self._wait(lambda: _get_ok(f"{self.etcd_url}/health"), deadline, "etcd's /health")

    def _apiserver(self, port: int, name: str) -> Child:
        creds = self.creds
        assert creds is not None
        return self._child("kube-apiserver", [
            "--etcd-servers", self.etcd_url, "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(port), "--tls-cert-file", str(creds.serving_cert),
            "--tls-private-key-file", str(creds.serving_key), "--client-ca-file", str(creds.ca_cert),
            "--token-auth-file", str(creds.token_file), "--authorization-mode", "Node,RBAC",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(creds.service_account_pub),
            "--service-account-signing-key-file", str(creds.service_account_key),
            "--api-audiences", "https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range", pki.SERVICE_CLUSTER_IP_RANGE, "--endpoint-reconciler-type", "none",
            "--allow-privileged=true", "--profiling=false", "--enable-priority-and-fairness=false",
            "--v=1"], name=name)

    def _component_args(self, command: str, kubeconfig: Path) -> list[str]:
        common = ["--kubeconfig", str(kubeconfig), "--authentication-kubeconfig", str(kubeconfig),
                  "--authorization-kubeconfig", str(kubeconfig), "--leader-elect=false",
                  "--bind-address", "127.0.0.1", "--secure-port", str(free_port()), "--v=1"]
        if command == "kube-scheduler":
            return common
        creds = self.creds
        assert creds is not None
        # node-ipam needs a cluster CIDR to carve; fake nodes need no pod CIDRs.
        return [*common, "--controllers", "*,-node-ipam-controller", "--use-service-account-credentials=true",
                "--service-account-private-key-file", str(creds.service_account_key),
                "--root-ca-file", str(creds.ca_cert), "--cluster-name", CLUSTER_NAME]

    def _component_kubeconfig(self, identity: str) -> Path:
        assert self.creds is not None
        path = self.run_dir / "pki" / f"{identity}.kubeconfig"
        write_kubeconfig(path, server=self.server, ca_file=self.ca_file, token=self.creds.tokens[identity],
                         user=identity, secret=True)
        return path

    def _create_node(self, name: str) -> None:
        node = {"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "annotations": {NODE_ANNOTATION: "fake"},
                             "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                        "kubernetes.io/arch": "amd64", "type": "kwok"}},
                "status": {"allocatable": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                           "capacity": {"cpu": "32", "memory": "256Gi", "pods": "110"},
                           "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                        "kubeletVersion": "fake", "kubeProxyVersion": "fake"}}}
        code, body = self.api("POST", "/api/v1/nodes", node)
        if code not in (201, 409):
            raise ClusterError(f"could not create node {name}: {code} {body}")

    def _nodes_ready(self) -> bool:
        code, body = self.api("GET", "/api/v1/nodes")
        if code != 200:
            return False
        ready = [n for n in body["items"] if any(c.get("type") == "Ready" and c.get("status") == "True"
                                                 for c in n.get("status", {}).get("conditions", []))]
        return len(ready) >= self.nodes

    def _exists(self, path: str) -> bool:
        return self.api("GET", path)[0] == 200

    def _ready(self, server: str) -> bool:
        try:
            code, _ = self.api("GET", "/readyz", server=server, timeout=3)
        except OSError:
            return False
        return code == 200

    def _etcd(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(self.etcd_url + path, data=json.dumps(body).encode(), method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise ClusterError(f"etcd {path}: {exc.code} {exc.read()[:300]!r}") from exc

    def _tls(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def _wait(self, condition: Callable[[], bool], deadline: float, what: str,
              children: list[Child] | None = None) -> None:
        while True:
            for child in children if children is not None else self.children:
                if not child.alive():
                    raise ClusterError(f"{child.name} exited ({child.proc.returncode}) while waiting for {what}; "
                                       f"the end of {child.log}:\n{child.tail(25)}")
            try:
                if condition():
                    return
            except OSError:
                pass
            if self.clock.now() > deadline:
                raise ClusterError(f"timed out waiting for {what}; the logs are in {self.run_dir / 'logs'}")
            self.clock.sleep(0.25)


def write_kubeconfig(path: Path, *, server: str, ca_file: Path, token: str, user: str = "admin",
                     secret: bool = True) -> None:
    """A kubeconfig for ``server`` with the CA inline and a bearer token, written atomically."""
    config = {"apiVersion": "v1", "kind": "Config", "current-context": CLUSTER_NAME,
              "clusters": [{"name": CLUSTER_NAME, "cluster": {
                  "server": server, "certificate-authority-data": base64.b64encode(ca_file.read_bytes()).decode()}}],
              "users": [{"name": user, "user": {"token": token}}],
              "contexts": [{"name": CLUSTER_NAME, "context": {"cluster": CLUSTER_NAME, "user": user,
                                                              "namespace": "default"}}]}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    if secret:
        tmp.chmod(0o600)
    tmp.replace(path)


def _decoded(raw: bytes) -> Any:
    try:
        return json.loads(raw or b"null")
    except ValueError:
        return raw.decode(errors="replace")


def _get_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except (OSError, urllib.error.HTTPError):
        return False
