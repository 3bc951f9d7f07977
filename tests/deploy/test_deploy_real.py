"""The deploy manifests on the real control plane: real validation, real RBAC, a real ServiceAccount.

The ``observe`` overlay is applied server-side to a real kube-apiserver (every object validated and
admitted for real). Its worker then runs as a pod would run it: ``--in-cluster``, with
``KUBERNETES_SERVICE_HOST``/``PORT`` and a token from the TokenRequest API and the cluster's CA in
``/var/run/secrets/kubernetes.io/serviceaccount`` (a private mount namespace with its own tmpfs on
/run, so nothing on the machine changes). With exactly the rendered read-only ClusterRole it lists,
watches and holds its Lease; with ``--allow-writes``, the summary reconciler and ConfigMaps readable
too (the summary-writer component's read half: still no write allowed), its writes reach the real
authorizer and come back 403 Forbidden, which the worker survives and the controller page shows as a
permission error. (The observe role alone does not let the reconciler's ConfigMap informer list: its
controller then waits for a cache that never syncs and writes nothing.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import redis
import yaml

from tests.conftest import ROOT, LoggedProcess, wait_until
from tests.dashboard.test_cache_panel_browser import save_screenshot
from tests.dashboard.test_panels_browser import close_page
from tests.deploy.test_manifests import NAMESPACE, in_cluster_workers, pod_spec, render
from tests.examples.test_read_only_browser import open_page

pytestmark = [pytest.mark.realcluster, pytest.mark.kubectl]
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def _can_mount() -> str | None:
    if not shutil.which("unshare") or os.geteuid() != 0:
        return "needs root and unshare to give the worker a private /var/run/secrets"
    if subprocess.run(["unshare", "-m", "true"], capture_output=True).returncode != 0:
        return "unshare -m is not permitted here"
    return None


@pytest.fixture(scope="module")
def observe_applied(realcluster, tmp_path_factory):
    objs = render("observe")
    kubeconfig = realcluster.kubeconfig
    run = subprocess.run(["/usr/bin/kubectl", "--kubeconfig", str(kubeconfig), "create", "namespace", NAMESPACE],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 or "AlreadyExists" in run.stderr, run.stderr
    _kubectl(kubeconfig, objs, "serverside-applied", "apply", "--server-side", "--field-manager=ctrlscope-test")
    return objs


def _kubectl(kubeconfig: Path, objs, done_word: str, *args: str) -> None:
    """``kubectl ARGS -f -`` with ``objs``; each object's line must say ``done_word``."""
    done = subprocess.run(["/usr/bin/kubectl", "--kubeconfig", str(kubeconfig), *args, "-f", "-"],
                          input=yaml.safe_dump_all(objs), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(done_word) == len(objs), done.stdout


@pytest.fixture
def configmaps_readable(realcluster, observe_applied):
    """The summary-writer component's read half on top of the observe overlay: the worker may also
    list and watch ConfigMaps (the summary reconciler's cache), and still write nothing. Removed
    after the test, so the other tests see exactly the observe overlay's role."""
    read = [o for o in render("observe+summary-writer") if o["kind"] in ("ClusterRole", "ClusterRoleBinding")
            and o["metadata"]["name"] == "ctrlscope-summary-writer-read"]
    (role,) = [o for o in read if o["kind"] == "ClusterRole"]
    assert len(read) == 2 and all(set(rule["verbs"]) <= {"get", "list", "watch"} for rule in role["rules"]), read
    _kubectl(realcluster.kubeconfig, read, "serverside-applied", "apply", "--server-side",
             "--field-manager=ctrlscope-test")
    yield read
    _kubectl(realcluster.kubeconfig, read, "deleted", "delete")


def _worker_argv(objs, *extra: str) -> list[str]:
    (worker,) = in_cluster_workers(objs)
    (c,) = pod_spec(worker)["containers"]
    args = [a.replace("$(POD_NAMESPACE)", NAMESPACE) for a in c["args"]]
    assert "--in-cluster" in args
    return [sys.executable, "manage.py", "runcontrollers", *args, *extra]


def _run_in_pod(realcluster, argv: list[str], tmp: Path, redis_url: str, prefix: str, *,
                worker: str | None = None) -> LoggedProcess:
    """``argv`` as the worker's pod runs it: its ServiceAccount's token (TokenRequest) and the CA at the
    in-cluster paths, the Service environment pointing at the real API server; named ``worker`` on the
    dashboard (default: a fresh name)."""
    code, body = realcluster.api("POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/ctrlscope-worker/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"expirationSeconds": 3600}})
    assert code == 201, body
    secrets = tmp / "sa"
    secrets.mkdir()
    (secrets / "token").write_text(body["status"]["token"])
    shutil.copy(realcluster.ca_file, secrets / "ca.crt")
    (secrets / "namespace").write_text(NAMESPACE)
    script = (f"mount -t tmpfs tmpfs /run && mkdir -p {SA_DIR} && cp {secrets}/token {secrets}/ca.crt "
              f"{secrets}/namespace {SA_DIR}/ && exec \"$@\"")
    env = {**os.environ, "KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(realcluster.port),
           "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1", "CTRLSCOPE_RUN_DIR": str(tmp),
           "CTRLSCOPE_WORKER": worker or f"deploy-real-{uuid.uuid4().hex[:6]}", "PYTHONUNBUFFERED": "1"}
    return LoggedProcess(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *argv], env,
                         tmp / "worker.log", cwd=ROOT)


def _published(redis_url: str, prefix: str) -> bytes:
    """Every stream entry the worker published under ``prefix``, as raw bytes (frames are JSON)."""
    client = redis.Redis.from_url(redis_url)
    try:
        out = []
        for key in client.scan_iter(f"{prefix}*"):
            if client.type(key) == b"stream":
                out += [v for _id, fields in client.xrange(key) for v in fields.values()]
        return b"\n".join(out)
    finally:
        client.close()


def _lease_renewed(realcluster) -> bool:
    code, lease = realcluster.api("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/ctrlscope-worker")
    return code == 200 and lease["spec"].get("renewTime") != lease["spec"].get("acquireTime")


def _deployment(name: str) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def test_the_observe_worker_runs_in_cluster_with_exactly_the_rendered_read_only_role(
        realcluster, observe_applied, tmp_path: Path, redis_url: str, prefix: str) -> None:
    why = _can_mount()
    if why:
        pytest.skip(why)
    worker = _run_in_pod(realcluster, _worker_argv(observe_applied), tmp_path, redis_url, prefix)
    try:
        wait_until(lambda: worker.proc.poll() is not None or _lease_renewed(realcluster), timeout=90, interval=0.5,
                   what="the worker to take and renew its Lease as its ServiceAccount")
        assert worker.proc.poll() is None, worker.output()[-3000:]
        code, _ = realcluster.api("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", _deployment("seen"))
        assert code == 201
        wait_until(lambda: b"ctrlscope/seen" in _published(redis_url, prefix), timeout=60, interval=0.5,
                   what="the worker's informer to publish the new Deployment")
        out = worker.output()
        assert "Forbidden" not in out and " 403" not in out, out[-3000:]
    finally:
        worker.stop()


@pytest.mark.browser
def test_a_write_allowed_by_the_worker_is_refused_by_the_real_authorizer_and_shown_not_crashed(
        realcluster, observe_applied, configmaps_readable, tmp_path: Path, redis_url: str, prefix: str, browser,
        dashboard, artifacts) -> None:
    """Read-only RBAC (the observe role, and ConfigMaps readable so the summary reconciler's caches
    sync and it gets as far as writing), ``--allow-writes``: every summary create reaches the real
    authorizer and is refused 403; the worker stays up and the controller page says what was forbidden."""
    why = _can_mount()
    if why:
        pytest.skip(why)
    argv = [a for a in _worker_argv(observe_applied, "--allow-writes") if not a.startswith("--controller=")]
    argv.append("--controller=controllers.examples.deployments:setup")  # the summary reconciler writes
    code, _ = realcluster.api("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments", _deployment("wants-summary"))
    assert code in (201, 409)
    name = f"deploy-real-{uuid.uuid4().hex[:6]}"
    worker = _run_in_pod(realcluster, argv, tmp_path, redis_url, prefix, worker=name)
    try:
        wait_until(lambda: worker.proc.poll() is not None or "403" in worker.output(), timeout=90, interval=0.5,
                   what="the summary write to come back 403 from the real API server")
        assert worker.proc.poll() is None, "a 403 must not end the worker:\n" + worker.output()[-3000:]
        assert realcluster.api("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/wants-summary-summary")[0] == 404
        wait_until(lambda: b"403" in _published(redis_url, prefix), timeout=30, interval=0.5,
                   what="the 403 in the worker's published write records")

        # On the controller page the 403 is a permission error, with what was forbidden, not a crash.
        page = open_page(browser, f"{dashboard.url}/c/{name}/deployment-summary/")
        forbidden = page.wait_for_selector('#pipeline .stage[data-stage="writes"] .stage-forbidden', timeout=30_000)
        assert forbidden.inner_text().endswith(f"× 403 forbidden: create configmaps in namespace {NAMESPACE}")
        assert "authorizer (RBAC)" in forbidden.get_attribute("title")
        # The retries' bars overlap at this zoom: open the latest one's details as a click on it would.
        page.locator(f'#lanes .lane[data-key="{NAMESPACE}/wants-summary"] .attempt[data-result="error"]').last \
            .dispatch_event("click")
        details = page.wait_for_selector("#details:not([hidden])").inner_text()
        account = f"system:serviceaccount:{NAMESPACE}:ctrlscope-worker"
        assert "403 Forbidden" in details and f'User "{account}" cannot create resource "configmaps"' in details, details
        save_screenshot(page, artifacts, "real-forbidden-write.png", full_page=True)
        close_page(page)
        assert worker.proc.poll() is None, "the worker is still up after its 403s:\n" + worker.output()[-3000:]
    finally:
        worker.stop()
