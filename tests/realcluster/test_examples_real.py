"""Every example controller on the real control plane (kube-apiserver v1.37 with etcd,
controller-manager, scheduler and kwok nodes), run as a user runs it, with writes allowed (the
cluster is local and disposable), each test in its own namespace:

- the PodSet Reconciler (``podset:setup_reconciler``) and the handler-only PodSet, no controller but
  a handler on a plain informer (``podset:setup_handlers``): pods Running on the kwok nodes, the
  Reconciler repairing a deleted pod, the handlers not;
- the deployment-summary reconciler in Python (``deployments:setup``) and in Go
  (``go/cmd/deployment-summary``, controller-runtime): the summary ConfigMap says what the real
  Deployment wants, follows a scale and comes back when deleted;
- the kopf PodSet operator (``kopf_podsets.py``) in process (``runkopf``) and as a plain ``kopf run``
  seen in zero-code mode (``runcontrollers --kopf``): the namespace's ResourceQuota makes the real
  quota admission refuse its first pods (403), kopf retries after its backoff, and it converges
  once the quota is gone.

Each controller's page (the handler-only PodSet's: its informer's page) in headless Chromium then
lists its keys. One dashboard (daphne) serves the
module: every worker publishes under one prefix, under its own worker name.
"""

from __future__ import annotations

import copy
import uuid
from pathlib import Path
from typing import Any

import pytest

from controllers.examples.podset import API_VERSION, KIND, KOPF, ensure_crd, podset
from controllers.informers import ApiError
from controllers.informers.http_client import KubernetesClient
from controllers.kopf import controller_name
from controllers.realcluster.cluster import NODE_ANNOTATION
from controllers.schema import HandlerProgress, ReconcileResult, topic_part
from tests.conftest import DashboardServer, delete_prefix, wait_until
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page
from tests.examples.test_kopf_podsets import BACKOFF_ENV, OPERATOR
from tests.examples.test_read_only_browser import open_page
from tests.golang.conftest import go_process, go_programs  # noqa: F401  (fixtures)
from tests.kopf.conftest import kopf_operator  # noqa: F401  (a fixture)
from tests.kopf.test_zerocode import RESOURCE as KOPF_RESOURCE
from tests.kopf.test_zerocode import Worker

pytestmark = [pytest.mark.realcluster, pytest.mark.browser]

KOPF_CONTROLLER = controller_name("demo.ctrlscope.dev", "podsets")
DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"app": "web"}},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
             "template": {"metadata": {"labels": {"app": "web"}},
                          "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


# -- one dashboard for the module; every worker publishes where it reads ----------------------------
@pytest.fixture(scope="module")
def shared_prefix(redis_url: str):
    p = f"ctrlscope-test-{uuid.uuid4().hex[:10]}:"
    yield p
    delete_prefix(redis_url, p)


@pytest.fixture
def prefix(shared_prefix: str) -> str:
    """Overrides conftest's: the Go and kopf fixtures publish under the module's dashboard prefix."""
    return shared_prefix


@pytest.fixture(scope="module")
def site(redis_url: str, shared_prefix: str, django_db: Path, run_dir: Path):
    server = DashboardServer(redis_url, shared_prefix, django_db, run_dir).start()
    yield server
    server.stop()


@pytest.fixture
def kube(realcluster) -> KubernetesClient:
    """An admin client of the real cluster, with the PodSet CRD installed and served."""
    client = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    ensure_crd(client)
    return client


@pytest.fixture
def python_worker(realcluster, redis_url: str, prefix: str, tmp_path: Path):
    """``start(name, *runcontrollers args)``: ``manage.py runcontrollers --allow-writes`` on the real cluster."""
    started: list[Worker] = []

    def start(name: str, *args: str) -> Worker:
        worker = Worker([*args, "--allow-writes"], name=name, kubeconfig=realcluster.kubeconfig, redis_url=redis_url,
                        prefix=prefix, log=tmp_path / f"{name}.log")
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


# -- the cluster --------------------------------------------------------------------------------------
def kwok_nodes(kube: KubernetesClient) -> set[str]:
    return {n["metadata"]["name"] for n in kube.get_json("/api/v1/nodes")["items"]
            if (n["metadata"].get("annotations") or {}).get(NODE_ANNOTATION) == "fake"}


def owned_pods(kube: KubernetesClient, namespace: str, owner: dict[str, Any]) -> list[dict[str, Any]]:
    """The live pods ``owner`` controls (by ownerReference), whatever their phase."""
    uid = owner["metadata"]["uid"]
    return [p for p in kube.get_json(f"/api/v1/namespaces/{namespace}/pods")["items"]
            if not p["metadata"].get("deletionTimestamp")
            and any(r.get("uid") == uid and r.get("controller") for r in p["metadata"].get("ownerReferences") or [])]


def get_podset(kube: KubernetesClient, namespace: str, name: str) -> dict[str, Any]:
    return kube.get_json(f"/apis/{API_VERSION}/namespaces/{namespace}/podsets/{name}")


def running_on_kwok(kube: KubernetesClient, namespace: str, name: str, replicas: int) -> list[str] | None:
    """The names of PodSet ``name``'s pods once exactly ``replicas`` of them exist, all Running on kwok nodes."""
    pods = owned_pods(kube, namespace, get_podset(kube, namespace, name))
    nodes = kwok_nodes(kube)
    if len(pods) == replicas and all(p.get("status", {}).get("phase") == "Running" and p["spec"].get("nodeName") in nodes
                                     for p in pods):
        return sorted(p["metadata"]["name"] for p in pods)
    return None


def create_podset(kube: KubernetesClient, namespace: str, name: str, implementation: str, replicas: int) -> None:
    kube.send_json("POST", f"/apis/{API_VERSION}/namespaces/{namespace}/podsets",
                   podset(name, implementation, replicas, namespace=namespace))


def scale_podset(kube: KubernetesClient, namespace: str, name: str, replicas: int) -> None:
    # Through the scale subresource the CRD declares, as `kubectl scale ps` does.
    kube.send_json("PATCH", f"/apis/{API_VERSION}/namespaces/{namespace}/podsets/{name}/scale",
                   {"spec": {"replicas": replicas}}, headers={"Content-Type": "application/merge-patch+json"})


def status_replicas(kube: KubernetesClient, namespace: str, name: str) -> int | None:
    return (get_podset(kube, namespace, name).get("status") or {}).get("replicas")


# -- the page -----------------------------------------------------------------------------------------
def controller_page(browser, site: DashboardServer, worker: str, controller: str):
    return open_page(browser, f"{site.url}/c/{worker}/{topic_part(controller)}/")


def wait_for_lane(page, key: str, result: str = ReconcileResult.SUCCESS) -> str:
    """The key's lane on the reconcile timeline, once its latest attempt ended with ``result``."""
    lane = f'#lanes .lane[data-key="{key}"]'
    page.wait_for_selector(f'{lane} .lane-meta:has-text("{result}")', timeout=30_000)
    return page.inner_text(lane)


# -- PodSet: the Reconciler and the handler-only implementation ----------------------------------------
def test_the_podset_reconciler_converges_on_kwok_nodes_repairs_a_deleted_pod_and_its_page_lists_the_key(
        realcluster, real_namespace, kube, python_worker, browser, site, artifacts) -> None:
    ns, worker = real_namespace, "podset-reconciler"
    python_worker(worker, "--controller", "controllers.examples.podset:setup_reconciler")
    create_podset(kube, ns, "web", "reconciler", 3)
    pods = wait_until(lambda: running_on_kwok(kube, ns, "web", 3), timeout=60, interval=0.5,
                      what="3 pods of PodSet web Running on the kwok nodes")
    wait_until(lambda: status_replicas(kube, ns, "web") == 3, timeout=30, what="status.replicas 3")
    kube.send_json("DELETE", f"/api/v1/namespaces/{ns}/pods/{pods[0]}")
    repaired = wait_until(lambda: (got := running_on_kwok(kube, ns, "web", 3)) and pods[0] not in got and got,
                          timeout=60, interval=0.5, what="the Reconciler to replace the deleted pod")
    assert len(set(repaired) & set(pods)) == 2
    scale_podset(kube, ns, "web", 5)
    wait_until(lambda: running_on_kwok(kube, ns, "web", 5), timeout=60, interval=0.5, what="5 pods after the scale")
    wait_until(lambda: status_replicas(kube, ns, "web") == 5, timeout=30, what="status.replicas 5")

    page = controller_page(browser, site, worker, "podset")
    lane = wait_for_lane(page, f"{ns}/web")
    assert "× · success" in lane, lane
    save_screenshot(page, artifacts, "real-podset-reconciler.png", full_page=True)
    close_page(page)


def test_the_handler_only_podset_converges_drifts_after_a_pod_dies_and_its_page_lists_the_key(
        realcluster, real_namespace, kube, python_worker, browser, site, artifacts) -> None:
    ns, worker = real_namespace, "podset-handlers"
    python_worker(worker, "--controller", "controllers.examples.podset:setup_handlers")
    create_podset(kube, ns, "web", "handlers", 3)
    pods = wait_until(lambda: running_on_kwok(kube, ns, "web", 3), timeout=60, interval=0.5,
                      what="3 pods of PodSet web Running on the kwok nodes")
    scale_podset(kube, ns, "web", 5)  # on_update creates the difference
    pods = wait_until(lambda: running_on_kwok(kube, ns, "web", 5), timeout=60, interval=0.5,
                      what="5 pods after the scale")
    kube.send_json("DELETE", f"/api/v1/namespaces/{ns}/pods/{pods[0]}")
    wait_until(lambda: running_on_kwok(kube, ns, "web", 4), timeout=30, interval=0.5, what="the pod to go")
    # Nothing watches the pods: the loss stays (a Reconcile would have repaired it within a second).
    with pytest.raises(AssertionError):
        wait_until(lambda: running_on_kwok(kube, ns, "web", 5), timeout=3, interval=0.5)

    # No controller: the PodSet informer is a plain informer with a handler, and its page is its
    # home -- no workqueue, no Reconcile, but every handler call on the PodSet, by key.
    page = open_page(browser, f"{site.url}/c/{worker}/informer/{topic_part(f'{API_VERSION}/{KIND}')}/")
    key = f"{ns}/web"
    calls = page.wait_for_function(
        """([key, handler]) => {
             const rows = [...document.querySelectorAll('#ievents tr')].map(tr => [...tr.cells].map(c => c.textContent));
             const mine = rows.filter(c => c[2] === 'handler' && c[4] === key && c[6] === handler).map(c => c[3]);
             return mine.includes('add') && mine.includes('update') ? mine : null;
           }""", arg=[key, "podset-handlers"], timeout=30_000).json_value()
    assert "delete" not in calls, calls
    # Only its own events: the worker's Pod informer (the scoreboard's) has a page of its own.
    informers = page.eval_on_selector_all("#ievents tr:not(.resync-marker)", "trs => trs.map(tr => tr.cells[1].textContent)")
    assert set(informers) == {f"{API_VERSION}/{KIND}"}, set(informers)
    page.wait_for_selector('#handler-calls tr[data-handler="podset-handlers"]', timeout=10_000)
    save_screenshot(page, artifacts, "real-podset-handlers.png", full_page=True)
    close_page(page)


# -- deployment-summary, Python and Go ---------------------------------------------------------------
def summary_data(kube: KubernetesClient, namespace: str, name: str) -> dict[str, str] | None:
    try:
        return kube.get_json(f"/api/v1/namespaces/{namespace}/configmaps/{name}").get("data")
    except ApiError as exc:
        if exc.is_not_found:
            return None
        raise


@pytest.mark.parametrize("runtime", ["python", "go"])
def test_deployment_summary_keeps_the_real_deployments_summary_and_its_page_lists_the_key(
        runtime, realcluster, real_namespace, kube, python_worker, go_process, browser, site, artifacts) -> None:  # noqa: F811
    ns, worker = real_namespace, f"summary-{runtime}"
    if runtime == "python":
        python_worker(worker, "--controller", "controllers.examples.deployments:setup")
    else:
        go_process("deployment-summary", "--kubeconfig", str(realcluster.kubeconfig), "--worker-name", worker,
                   "--allow-writes")
    body = copy.deepcopy(DEPLOYMENT)
    deployment = kube.send_json("POST", f"/apis/apps/v1/namespaces/{ns}/deployments", body)
    want = {"replicas": "2", "images": "nginx:1.27", "generation": "1"}
    wait_until(lambda: summary_data(kube, ns, "web-summary") == want, timeout=60, interval=0.5,
               what=f"web-summary to say {want}")
    summary = kube.get_json(f"/api/v1/namespaces/{ns}/configmaps/web-summary")
    (owner,) = summary["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["uid"], owner.get("controller")) == ("Deployment", deployment["metadata"]["uid"], True)

    kube.send_json("PATCH", f"/apis/apps/v1/namespaces/{ns}/deployments/web/scale", {"spec": {"replicas": 4}},
                   headers={"Content-Type": "application/merge-patch+json"})
    want = {"replicas": "4", "images": "nginx:1.27", "generation": "2"}
    wait_until(lambda: summary_data(kube, ns, "web-summary") == want, timeout=60, interval=0.5,
               what="the summary to follow the scale")
    kube.send_json("DELETE", f"/api/v1/namespaces/{ns}/configmaps/web-summary")
    wait_until(lambda: summary_data(kube, ns, "web-summary") == want, timeout=60, interval=0.5,
               what="the deleted summary to come back")
    # The real ReplicaSet controller and scheduler behind it: the Deployment's own pods run on kwok.
    wait_until(lambda: (kube.get_json(f"/apis/apps/v1/namespaces/{ns}/deployments/web").get("status") or {})
               .get("availableReplicas") == 4, timeout=90, interval=0.5, what="Deployment web 4/4 available")

    page = controller_page(browser, site, worker, "deployment-summary")
    wait_for_lane(page, f"{ns}/web")
    save_screenshot(page, artifacts, f"real-deployment-summary-{runtime}.png", full_page=True)
    close_page(page)


# -- the kopf operator, in process and zero-code ------------------------------------------------------
def pods_quota(kube: KubernetesClient, namespace: str) -> str:
    """A ResourceQuota of no pods at all: the real quota admission refuses every pod create (403)."""
    kube.send_json("POST", f"/api/v1/namespaces/{namespace}/resourcequotas",
                   {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "no-pods"},
                    "spec": {"hard": {"pods": "0"}}})
    return f"/api/v1/namespaces/{namespace}/resourcequotas/no-pods"


def handler_rows(page) -> list[dict[str, str]]:
    return page.eval_on_selector_all("#handlers tr[data-handler]", """trs => trs.map(tr => ({key: tr.dataset.key,
        handler: tr.dataset.handler, state: tr.dataset.state}))""")


@pytest.mark.parametrize("mode", ["inprocess", "zero-code"])
def test_the_kopf_operator_retries_a_quota_refusal_converges_and_its_page_lists_the_key(
        mode, realcluster, real_namespace, kube, kopf_operator, python_worker, browser, site, artifacts) -> None:  # noqa: F811
    ns = real_namespace
    key = f"{ns}/web"
    quota = pods_quota(kube, ns)
    if mode == "inprocess":
        worker = "kopf-inprocess"
        op = kopf_operator(OPERATOR, ns, mode="inprocess", worker=worker, kubeconfig=realcluster.kubeconfig,
                           allow_writes=True, env={BACKOFF_ENV: "2"})
    else:
        worker = "kopf-zero-code"
        python_worker(worker, "--kopf", KOPF_RESOURCE).wait_until_watching()
        op = kopf_operator(OPERATOR, ns, mode="plain", kubeconfig=realcluster.kubeconfig, env={BACKOFF_ENV: "2"})
    op.wait_for_output("Activity 'configure' succeeded", timeout=60)
    create_podset(kube, ns, "web", KOPF, 2)
    op.wait_for_output("exceeded quota", timeout=30)

    page = controller_page(browser, site, worker, KOPF_CONTROLLER)
    # The refused attempt, seen live: an error on the key's lane, the handler retrying.
    wait_for_lane(page, key, ReconcileResult.ERROR)
    page.wait_for_selector(f'#handlers tr[data-key="{key}"][data-handler="converge"][data-state="{HandlerProgress.RETRYING}"]',
                           timeout=30_000)
    save_screenshot(page, artifacts, f"real-kopf-{mode}-retrying.png", full_page=True)

    kube.send_json("DELETE", quota)
    wait_until(lambda: running_on_kwok(kube, ns, "web", 2), timeout=60, interval=0.5,
               what="2 pods of PodSet web Running once the quota is gone")
    wait_until(lambda: status_replicas(kube, ns, "web") == 2, timeout=30, what="status.replicas 2")
    wait_for_lane(page, key)
    page.wait_for_selector(f'#handlers tr[data-key="{key}"][data-handler="converge"][data-state="{HandlerProgress.SUCCEEDED}"]',
                           timeout=30_000)
    assert [r for r in handler_rows(page) if r["key"] == key] == [
        {"key": key, "handler": "converge", "state": HandlerProgress.SUCCEEDED}]
    save_screenshot(page, artifacts, f"real-kopf-{mode}-converged.png", full_page=True)
    close_page(page)
