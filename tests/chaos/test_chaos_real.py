"""The chaos matrix on the real control plane: under load, SIGKILL etcd, the kube-apiserver, the
kube-controller-manager, the worker, daphne and Redis in turn and restart each, and stall the API
server's responses past the watch timeout through the fault proxy. After each one the same checks as
the simulator's matrix (tests/chaos/conftest.py ``verify_recovery``): the page showed what happened,
no silent gap, the informer caches equal a fresh LIST (0 diffs), the reconciler converged.

The stack (``RealChaosStack``): a ``RealCluster`` of the module's own (etcd, kube-apiserver,
controller-manager, scheduler, kwok with 2 nodes: the victims cannot be the shared session cluster),
``manage.py faultproxy`` in front of it, and the worker (``runcontrollers --namespace chaos
--allow-writes``, the PodSet reconciler, 1 s watches) reaching the API only through the proxy; the
load and the checks' reads go to the API server directly (a stall holds the worker's view of the
cluster, not the cluster). A component comes back with ``RealCluster.restart``: the same command
line, so the same ports, and etcd the same data directory -- the cluster's objects and revision are
still there, no one re-applies anything.

What each victim does to the worker, and so what its page must show:

- etcd (down 8 s, past several watch timeouts): the API server stays up and hides it. Writes (the
  load's, the reconciler's) wait inside it for etcd to come back and then go through (2 or 3 of the
  load's refused in a run); watches are served from its watch cache, which keeps them open and
  closes them on time, and when etcd is back the cache carries on without ending its clients'
  watches (no 410 reached the worker in any run). So the worker sees only a pause: no reflector error, no relist, no resync. The page must announce nothing
  (an outage the worker cannot see is not one to invent), and afterwards the caches must equal the
  API and the PodSets converge, with the writes held during the outage;
- kube-apiserver: every watch breaks, and every request the worker sends meanwhile gets a 503 from the
  proxy (it cannot reach its upstream) -- an API error, not a refused connection, so each reflector
  backs off and lists again, as client-go's does after a failed watch. The page shows them backing
  off, relisting, then watching;
- kube-controller-manager: nothing the worker talks to (the PodSet reconciler and its pods need only
  the API server, the scheduler and kwok): the page stays live and shows no resync -- the matrix
  checks that nothing was announced that did not happen, and that the caches and the PodSets are
  right after it. Its own reconcilers must converge too: a PodSet deleted (and created again) while
  it is down leaves its pods behind until the restarted garbage collector deletes them;
- the worker, daphne, Redis and the stall: as on the simulator (``SHARED_EXPECTED``).

Shortened timings as the simulator's matrix: 1 s watches, outages of about a second (etcd's 8 s),
plus each restart (etcd's under a second, the API server's 5-8 s on a busy 2-core machine). The
matrix takes about a minute and a half, half of it starting the cluster.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.realcluster import RealCluster
from controllers.sim.faults_client import SimFaults
from tests.chaos.conftest import (
    BACKING_OFF,
    PODSETS,
    SHARED_EXPECTED,
    WATCHING,
    ChaosStack,
    Check,
    dom_of,
    gap_check_is_not_vacuous,
    verify_recovery,
)
from tests.conftest import ROOT, LoggedProcess, wait_until

pytestmark = [pytest.mark.browser, pytest.mark.realcluster]

NAMESPACE = "chaos"
OUTAGE = 1.0  # seconds a killed process stays dead before its restart begins
OUTAGES = {"etcd": 8.0}  # seconds, where not OUTAGE: etcd's outage spans several 1 s watches
STALL = 6.0  # seconds the proxy holds every response and watch stream: past a 1 s watch and its margin, twice
# The API's victims last: the reflectors' backoff climbs through each API outage (reset after 2 quiet
# minutes, as client-go's), and the controller-manager before them as the one that should show nothing.
VICTIMS = ["worker", "daphne", "redis", "stall", "kube-controller-manager", "etcd", "kube-apiserver"]
API_DOWN = {"etcd", "kube-apiserver"}  # no write of the desired state goes through while these are down
CACHE_TIMEOUT = 75.0
REAL_LOAD_RATE = 100.0  # PodSet writes/s: what the loaded 2-core machine sustains beside the control plane

EXPECTED: dict[str, list[Check]] = {
    **SHARED_EXPECTED,
    "etcd": [],
    "kube-apiserver": [BACKING_OFF, dom_of("informer ", "relisting"), WATCHING],
    "kube-controller-manager": [],
}
QUIET = {"kube-controller-manager", "etcd"}  # outages the worker cannot see (module doc): the page announces nothing


class RealChaosStack(ChaosStack):
    """The real control plane and the fault proxy under the shared stack (see the module doc)."""

    namespace = NAMESPACE
    watch_namespace = NAMESPACE
    load_rate = REAL_LOAD_RATE

    def __init__(self, tmp: Path, db: Path, browser: Any, binaries: Any) -> None:
        super().__init__(tmp, db, browser)
        self.cluster = RealCluster(binaries, tmp / "cluster", nodes=2, say=lambda line: None)
        self.admin = tmp / "admin.yaml"
        self.proxy_kubeconfig = tmp / "kubeconfig-faultproxy.yaml"
        self.proxy: LoggedProcess | None = None
        self.restart_seconds: dict[str, float] = {}

    def start_cluster(self) -> None:
        self.cluster.start(self.admin)
        code, body = self.cluster.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                    "metadata": {"name": self.namespace}})
        assert code == 201, body
        # Pods need the namespace's default ServiceAccount, which the controller-manager creates.
        wait_until(lambda: self.cluster.api("GET", f"/api/v1/namespaces/{self.namespace}/serviceaccounts/default")[0] == 200,
                   timeout=30, what=f"the default ServiceAccount in {self.namespace}")
        self.proxy = LoggedProcess([sys.executable, "manage.py", "faultproxy", "--upstream-kubeconfig", str(self.admin),
                                    "--kubeconfig", str(self.proxy_kubeconfig)],
                                   self.env, self._log("faultproxy"), cwd=ROOT)
        self.proxy.wait_for_output("kubeconfig written to", timeout=60)

    def stop_cluster(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        self.cluster.stop()

    def client(self) -> KubernetesClient:
        return KubernetesClient.from_kubeconfig(str(self.admin))

    def faults(self) -> SimFaults:
        return SimFaults(KubernetesClient.from_kubeconfig(str(self.proxy_kubeconfig)))

    def worker_kubeconfig(self) -> Path:
        return self.proxy_kubeconfig

    def worker_args(self) -> list[str]:
        return ["--allow-writes", "--namespace", self.namespace]

    def dashboard_env(self) -> dict[str, str]:
        return {"CTRLSCOPE_SIM_KUBECONFIG": str(self.proxy_kubeconfig)}

    def list_paths(self) -> dict[str, str]:
        return {"podsets": self.podsets_path, "pods": f"/api/v1/namespaces/{self.namespace}/pods"}

    def recreate(self, name: str) -> str:
        """Delete PodSet ``name`` leaving its pods to the garbage collector (background propagation), and
        create it again at once (a new uid, which the reconciler gives pods of its own); the old uid."""
        assert self.api is not None
        old = self.api.get_json(f"{self.podsets_path}/{name}")["metadata"]["uid"]
        self.api.send_json("DELETE", f"{self.podsets_path}/{name}", {"propagationPolicy": "Background"})
        self.scale(name, self.replicas[name])  # a 404 now: created
        return str(old)

    def owned_by(self, uid: str) -> list[str]:
        """The pods (not yet terminating) whose controller is ``uid``."""
        assert self.api is not None
        return [p["metadata"]["name"] for p in self.api.get_json(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
                if not p["metadata"].get("deletionTimestamp")
                and any(r.get("uid") == uid and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]

    def processes(self) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
        def component(name: str) -> tuple[Callable[[], None], Callable[[], None]]:
            def restart() -> None:
                self.restart_seconds[name] = self.cluster.restart(name)
            return (lambda: self.cluster.kill(name)), restart

        return {**super().processes(), **{name: component(name) for name in
                                         ("etcd", "kube-apiserver", "kube-controller-manager")}}


@pytest.fixture(scope="module")
def stack(browser, django_db, tmp_path_factory, realcluster_binaries):
    s = RealChaosStack(tmp_path_factory.mktemp("chaos-real"), django_db, browser, realcluster_binaries)
    try:
        s.start()
        yield s
    finally:
        s.stop()


def announced(rows: list[list[Any]]) -> list[str]:
    """What the tab noted that tells of trouble: a connection state but live, a resync, an informer
    not watching, a resync marker."""
    return [" ".join(map(str, row[1:])) for row in rows
            if (row[1] == "state" and row[2] != "live") or row[1] == "resync"
            or (row[1] == "dom" and (row[2].startswith("informer ") and row[3] != "watching"
                                     or row[2].startswith("marker ")))]


@pytest.mark.parametrize("victim", VICTIMS)
def test_chaos_real(stack: RealChaosStack, victim: str, artifacts) -> None:
    page = stack.page
    load = stack.load
    assert load is not None and stack.api is not None
    ok_before = load.ok
    wait_until(lambda: load.ok > ok_before + 50, timeout=20, what="the load generator to be writing")
    since = page.evaluate("Date.now()")
    round_ = VICTIMS.index(victim)
    # The desired state moves before the outage and (where the API is up) during it.
    stack.scale(f"ps-{round_ % PODSETS}", 3 + round_ % 2)
    revision = stack.cluster.etcd_revision() if victim == "etcd" else 0
    hit = time.monotonic()
    if victim == "stall":
        stack.faults().stall(STALL)
        time.sleep(STALL + 0.5)
    else:
        stack.kill(victim)
        if victim not in API_DOWN:
            stack.scale(f"ps-{(round_ + 5) % PODSETS}", 1 + round_ % 3)
        if victim == "kube-controller-manager":
            # The garbage collector is one of its controllers: a PodSet deleted meanwhile leaves its
            # pods behind until the restarted controller-manager collects them.
            orphaned = stack.recreate(f"ps-{(round_ + 7) % PODSETS}")
        time.sleep(OUTAGES.get(victim, OUTAGE))
        if victim == "kube-controller-manager":
            assert stack.owned_by(orphaned), "the deleted PodSet's pods are collected only once the controller-manager is back"
        stack.restart(victim)
    restarted = time.monotonic()
    if victim == "kube-controller-manager":  # before the caches are compared: with the pods gone
        wait_until(lambda: not stack.owned_by(orphaned), timeout=60, interval=0.2,
                   what="the restarted controller-manager's garbage collector to delete the orphaned pods")
        print(f"{victim}: the garbage collector deleted the deleted PodSet's pods "
              f"{time.monotonic() - restarted:.1f} s after the restart")
    if victim == "etcd":  # the same data directory: the cluster's history goes on, not a new one
        assert stack.cluster.etcd_revision() >= revision

    recovery = verify_recovery(stack, victim, EXPECTED[victim], since, cache_timeout=CACHE_TIMEOUT)
    noted = announced(stack.seen(since))
    print(f"{victim}: the page showed " + (" → ".join(recovery.shown) or "nothing expected") +
          f"; it noted {noted[:12]}")
    if victim in QUIET:
        assert noted == [], f"the {victim} outage does not touch the worker, but the page announced {noted}"
    done = time.monotonic()
    restart = f" (its restart took {stack.restart_seconds[victim]:.1f} s)" if victim in stack.restart_seconds else ""
    print(f"{victim}: hit {restarted - hit:.1f} s{restart}, {recovery.summary(restarted)}, verified "
          f"{done - restarted:.1f} s later; {recovery.checked} frames the tab applied match Redis; load "
          f"{load.rate_achieved():.0f} writes/s ({load.ok} ok, {load.failed} refused)")
    if victim == VICTIMS[-1]:
        page.screenshot(path=str(artifacts / "chaos-real-after-matrix.png"), full_page=True)
        gap_check_is_not_vacuous(stack)
