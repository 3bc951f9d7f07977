"""deploy/: every overlay (and each opt-in component, composed as an overlay would) renders with the
real kubectl's kustomize; every rendered object passes the Kubernetes JSON schemas
(kubernetes-validate, offline) and ``kubectl apply --dry-run=server`` against the simulator; the pods
run locked down; and each in-cluster worker's RBAC is exactly what that worker requests.

The RBAC check runs the worker with the very arguments its Deployment renders, against a simulated
API server that records every resource request as an authorizer sees it (verb, group, resource,
namespace, name), then fails on any permission it did not use, on a ClusterRole where a Role would
do, on a rule that resourceNames could narrow, on any wildcard, and on any request no rule allows.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from controllers.sim import SimCluster
from controllers.sim.api import Access
from controllers.sim.errors import StatusError
from tests.conftest import ROOT, LoggedProcess, wait_until
from tests.sim.conftest import FAST, Kubectl

pytestmark = pytest.mark.kubectl

DEPLOY = ROOT / "deploy"
KUBECTL = "/usr/bin/kubectl"
# The Kubernetes version the schemas are for: the simulator's (git_version v1.32.0) and kubectl's.
K8S_VERSION = "1.32.0"
NAMESPACE = "ctrlscope"  # every overlay's
IMAGE = "ctrlscope:latest"
# The overlays this repository ships (a user's own, e.g. deploy/overlays/mine from the README, are theirs).
OVERLAYS = ["demo", "external-redis", "observe", "sentinel"]
# The opt-in components, composed as an overlay would include them (no overlay does by default).
OBSERVE = ["redis", "cluster-worker"]
OPT_IN = {"observe+summary-writer": [*OBSERVE, "summary-writer"],
          "observe+read-secrets": [*OBSERVE, "read-secrets"]}
RENDERS = [*OVERLAYS, *OPT_IN]
WORKLOADS = ("Deployment", "StatefulSet", "Job")
RBAC = ("Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
# Environment names the manifests set that the app does not read: Kubernetes plumbing, Python's own.
ENV_NOT_READ_BY_THE_APP = {"POD_NAMESPACE", "PYTHONDONTWRITEBYTECODE"}


def require_kubectl() -> None:
    if not (os.path.exists(KUBECTL) and shutil.which(KUBECTL)):
        if os.environ.get("CI"):
            pytest.fail(f"{KUBECTL} is missing in CI: .ci/run installs kubectl (Debian's kubernetes-client)")
        pytest.skip(f"{KUBECTL} is not installed (apt-get install kubernetes-client): deploy/ renders with it")


@functools.cache
def render(name: str) -> tuple[dict[str, Any], ...]:
    """The objects ``kubectl kustomize`` renders for an overlay or an opt-in composition."""
    require_kubectl()
    with tempfile.TemporaryDirectory() as tmp:
        if name in OPT_IN:
            # kustomize takes no absolute paths; a relative one from the temporary directory works.
            rel = os.path.relpath(DEPLOY, tmp)
            Path(tmp, "kustomization.yaml").write_text(yaml.safe_dump({
                "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization", "namespace": NAMESPACE,
                "resources": [f"{rel}/base"], "components": [f"{rel}/components/{c}" for c in OPT_IN[name]]}))
            path = tmp
        else:
            path = str(DEPLOY / "overlays" / name)
        run = subprocess.run([KUBECTL, "kustomize", path], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"kubectl kustomize {name}: {run.stderr}"
    return tuple(obj for obj in yaml.safe_load_all(run.stdout) if obj)


def of_kind(objs, *kinds: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] in kinds]


def named(objs, kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def pod_spec(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]


def containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*spec.get("initContainers", []), *spec["containers"]]


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """matchLabels only: the manifests use nothing else (asserted)."""
    assert set(selector) <= {"matchLabels"}, selector
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def ctrlscope_containers(objs) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(workload, container) for every container running the ctrlscope image."""
    return [(w, c) for w in of_kind(objs, *WORKLOADS) for c in containers(pod_spec(w)) if c["image"] == IMAGE]


# ---- rendering, schemas, dry run ------------------------------------------------------------------


def test_the_overlays_are_the_ones_the_readme_names() -> None:
    readme = (ROOT / "README.md").read_text()
    for name in OVERLAYS:
        assert (DEPLOY / "overlays" / name / "kustomization.yaml").exists() and f"deploy/overlays/{name}" in readme


@pytest.mark.parametrize("name", RENDERS)
def test_renders_namespaced_objects_and_no_secret(name: str) -> None:
    objs = render(name)
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys)), "duplicate objects"
    cluster_scoped = {"ClusterRole", "ClusterRoleBinding"}
    for kind, ns, obj_name in keys:
        assert (ns is None) == (kind in cluster_scoped), f"{kind} {obj_name}: namespace {ns!r}"
        assert ns in (None, NAMESPACE)
    # Secrets are created by the user (README: "Deploy for a team"), never rendered from the repository.
    assert not of_kind(objs, "Secret") and not of_kind(objs, "Namespace")
    assert {c["image"] for w in of_kind(objs, *WORKLOADS) for c in containers(pod_spec(w))} <= \
        {IMAGE, "redis:7.4-alpine"}


@pytest.mark.parametrize("name", RENDERS)
def test_every_object_matches_the_kubernetes_schema(name: str) -> None:
    errors = []
    for obj in render(name):
        try:
            # strict: a misspelt or misplaced field (additionalProperties) fails too.
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except Exception as exc:  # ValidationError, SchemaNotFoundError: both mean "not valid here"
            errors.append(f"{obj['kind']} {obj['metadata']['name']}: {getattr(exc, 'message', exc)}")
    assert not errors, "\n".join(errors)


@pytest.fixture(scope="module")
def dry_run_kubectl(tmp_path_factory: pytest.TempPathFactory):
    require_kubectl()
    cluster = SimCluster(port=0, **FAST).start()
    kubectl = Kubectl(cluster, tmp_path_factory.mktemp("kubectl"))
    kubectl.run("create", "namespace", NAMESPACE)
    yield kubectl
    cluster.stop()


@pytest.mark.parametrize("name", RENDERS)
def test_server_dry_run_against_the_simulator(name: str, dry_run_kubectl: Kubectl) -> None:
    objs = render(name)
    out = dry_run_kubectl.run("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(objs),
                              timeout=60).stdout
    applied = [line for line in out.splitlines() if line.endswith("(server dry run)")]
    assert len(applied) == len(objs), out
    # A dry run stores nothing.
    left = dry_run_kubectl.run("get", "deployments,jobs,roles,configmaps", "-n", NAMESPACE, "-o", "name").stdout
    assert "ctrlscope" not in left, left


# ---- what the pods may do -------------------------------------------------------------------------


@pytest.mark.parametrize("name", RENDERS)
def test_pods_run_non_root_read_only_without_privileges_and_with_resources(name: str) -> None:
    objs = render(name)
    for w in of_kind(objs, *WORKLOADS):
        spec, where = pod_spec(w), f"{w['kind']} {w['metadata']['name']}"
        pod_sc = spec.get("securityContext") or {}
        assert pod_sc.get("runAsNonRoot") is True and pod_sc.get("runAsUser", 0) > 0, where
        assert pod_sc.get("seccompProfile") == {"type": "RuntimeDefault"}, where
        mounted = {v["name"] for v in spec.get("volumes", [])}
        for c in containers(spec):
            sc = c.get("securityContext") or {}
            assert sc.get("allowPrivilegeEscalation") is False, f"{where}/{c['name']}"
            assert sc.get("readOnlyRootFilesystem") is True, f"{where}/{c['name']}"
            assert sc.get("capabilities") == {"drop": ["ALL"]}, f"{where}/{c['name']}"
            for part in ("requests", "limits"):
                assert set(c.get("resources", {}).get(part, {})) >= {"cpu", "memory"}, f"{where}/{c['name']} {part}"
            assert {m["name"] for m in c.get("volumeMounts", [])} <= mounted
            if c["image"] == IMAGE:
                # The app's writable paths on a read-only root: its run/ dir and /tmp, as emptyDirs.
                paths = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                empty = {v["name"] for v in spec["volumes"] if "emptyDir" in v}
                assert paths.get("/app/run") in empty and paths.get("/tmp") in empty, f"{where}/{c['name']}"


@pytest.mark.parametrize("name", RENDERS)
def test_dashboard_is_replicated_probed_and_covered_by_a_disruption_budget(name: str) -> None:
    objs = render(name)
    dashboard = named(objs, "Deployment", "ctrlscope-dashboard")
    labels = dashboard["spec"]["template"]["metadata"]["labels"]
    assert dashboard["spec"]["replicas"] >= 2
    (web,) = pod_spec(dashboard)["containers"]
    assert web["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert web["readinessProbe"]["httpGet"]["path"] == "/readyz"  # 503 while Redis does not answer
    pdbs = [p for p in of_kind(objs, "PodDisruptionBudget") if selects(p["spec"]["selector"], labels)]
    assert len(pdbs) == 1 and pdbs[0]["spec"]["minAvailable"] == 1
    service = named(objs, "Service", "ctrlscope-dashboard")
    assert selects({"matchLabels": service["spec"]["selector"]}, labels)
    assert service["spec"]["ports"][0]["targetPort"] == "http" == web["ports"][0]["name"]
    policies = [p for p in of_kind(objs, "NetworkPolicy") if p["spec"]["podSelector"]
                and selects(p["spec"]["podSelector"], labels)]
    assert [r["ports"] for p in policies for r in p["spec"]["ingress"]] == [[{"protocol": "TCP", "port": 8000}]]


@pytest.mark.parametrize("name", RENDERS)
def test_redis_is_reachable_only_from_the_dashboard_and_the_workers(name: str) -> None:
    objs = render(name)
    deny = named(objs, "NetworkPolicy", "ctrlscope-default-deny-ingress")["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    pods = {w["metadata"]["name"]: w["spec"]["template"]["metadata"]["labels"] for w in of_kind(objs, *WORKLOADS)}
    redis_pods = [n for n, labels in pods.items() if labels.get("app.kubernetes.io/name") == "redis"]
    if not redis_pods:
        assert name == "external-redis"
        return
    (policy,) = [p for p in of_kind(objs, "NetworkPolicy")
                 if p["spec"]["podSelector"] and selects(p["spec"]["podSelector"], pods[redis_pods[0]])]
    allowed = set()
    for rule in policy["spec"]["ingress"]:
        for peer in rule["from"]:
            assert set(peer) == {"podSelector"}, f"only pods of this namespace may reach Redis: {peer}"
            allowed |= {n for n, labels in pods.items() if selects(peer["podSelector"], labels)}
    # The simulator (demo) publishes its faults; Redis pods may talk to each other (Sentinel).
    clients = {n for n in pods if n.startswith(("ctrlscope-dashboard", "ctrlscope-worker", "ctrlscope-demo-worker",
                                                "ctrlscope-simcluster"))}
    assert {"ctrlscope-dashboard"} < clients <= allowed <= clients | set(redis_pods), allowed


@pytest.mark.parametrize("name", RENDERS)
def test_settings_are_environment_variables_the_app_reads_and_secrets_are_referenced(name: str) -> None:
    objs = render(name)
    sources = "\n".join(p.read_text() for p in [ROOT / "dashboard" / "settings.py", *(ROOT / "controllers").rglob("*.py")])
    configmaps = {c["metadata"]["name"]: c.get("data", {}) for c in of_kind(objs, "ConfigMap")}
    for workload, c in ctrlscope_containers(objs):
        names = {e["name"] for e in c.get("env", [])}
        for ref in c.get("envFrom", []):
            names |= set(configmaps[ref["configMapRef"]["name"]])
        unread = {n for n in names - ENV_NOT_READ_BY_THE_APP if f'"{n}"' not in sources}
        assert not unread, f"{workload['metadata']['name']}: the app reads no {sorted(unread)}"
        assert "CTRLSCOPE_SECRET_KEY" in names  # every Django process needs it
        if workload["kind"] == "Deployment":  # the migrations Job needs no Redis
            # One Redis server, or the Sentinels that name the current master.
            assert "REDIS_URL" in names or {"REDIS_SENTINELS", "REDIS_MASTER_NAME"} <= names, \
                workload["metadata"]["name"]
        for e in c.get("env", []):
            ref = (e.get("valueFrom") or {}).get("secretKeyRef")
            if ref:
                assert (ref["name"], ref["key"]) in {("ctrlscope", "secret-key"), ("ctrlscope", "database-url"),
                                                     ("ctrlscope-redis", "url")}
                assert ref.get("optional", False) == (ref["key"] == "database-url")  # SQLite without it
    readme = (ROOT / "README.md").read_text()
    assert "kubectl -n ctrlscope create secret generic ctrlscope --from-literal=secret-key=" in readme


def test_the_image_is_a_placeholder_kustomize_can_set(tmp_path: Path) -> None:
    require_kubectl()
    rel = os.path.relpath(DEPLOY / "overlays" / "observe", tmp_path)
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [rel], "images": [{"name": "ctrlscope", "newName": "registry.example/ctrlscope",
                                        "newTag": "1.2.3"}]}))
    run = subprocess.run([KUBECTL, "kustomize", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert IMAGE not in run.stdout and run.stdout.count("image: registry.example/ctrlscope:1.2.3") == 3


# ---- least privilege ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Grant:
    """One (verb, group, resource) a bound rule allows, where (``namespace`` None: everywhere)."""

    verb: str
    group: str
    resource: str  # "pods" or "pods/status"
    namespace: str | None
    names: frozenset[str]
    origin: str

    def allows(self, a: Access) -> bool:
        resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        return ((self.verb, self.group, self.resource) == (a.verb, a.group, resource)
                and (self.namespace is None or self.namespace == a.namespace)
                and (not self.names or a.name in self.names))


def grants_for(objs, service_account: str, namespace: str) -> tuple[list[Grant], list[str]]:
    """What the RBAC objects in ``objs`` grant the ServiceAccount, and every wildcard or
    non-resource rule among them (always too broad for a worker)."""
    roles = {(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]): o.get("rules") or []
             for o in of_kind(objs, "Role", "ClusterRole")}
    grants, problems = [], []
    for binding in of_kind(objs, "RoleBinding", "ClusterRoleBinding"):
        if not any(s.get("kind") == "ServiceAccount" and s["name"] == service_account
                   and s.get("namespace") == namespace for s in binding.get("subjects") or []):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" else None
        rules = roles.get((ref["kind"], scope if ref["kind"] == "Role" else None, ref["name"]))
        assert rules is not None, f"{binding['kind']} {binding['metadata']['name']} binds a missing {ref}"
        origin = f"{ref['kind']} {ref['name']}"
        for rule in rules:
            if rule.get("nonResourceURLs"):
                problems.append(f"{origin}: nonResourceURLs {rule['nonResourceURLs']}")
            fields = [rule.get(k) or [] for k in ("verbs", "apiGroups", "resources", "resourceNames")]
            if any("*" in value for field in fields for value in field):
                problems.append(f"{origin}: wildcard in {rule}")
                continue
            for verb in rule.get("verbs") or []:
                for group in rule.get("apiGroups") or []:
                    for resource in rule.get("resources") or []:
                        grants.append(Grant(verb, group, resource, scope, frozenset(rule.get("resourceNames") or []),
                                            origin))
    return grants, problems


NAMEABLE = {"get", "update", "patch", "delete"}  # the verbs RBAC's resourceNames can restrict


def compare(accesses: set[Access], grants: list[Grant], namespace: str) -> tuple[list[Access], list[str]]:
    """(requests no grant allows, grants broader than the requests need)."""
    missing = sorted((a for a in accesses if not any(g.allows(a) for g in grants)), key=str)
    broader = []
    for g in grants:
        used = [a for a in accesses if g.allows(a)]
        where = f"{g.origin}: {g.verb} {g.group or 'core'}/{g.resource}"
        if not used:
            broader.append(f"{where} is never requested")
        elif g.namespace is None and all(a.namespace == namespace for a in used):
            broader.append(f"{where} is only requested in {namespace}: a Role there, not cluster-wide")
        elif not g.names and g.verb in NAMEABLE and len({a.name for a in used}) == 1 and used[0].name:
            broader.append(f"{where} is only requested for {used[0].name!r}: resourceNames can say so")
    return missing, broader


def in_cluster_workers(objs) -> list[dict[str, Any]]:
    return [w for w in of_kind(objs, "Deployment") for c in pod_spec(w)["containers"]
            if "--in-cluster" in c.get("args", [])]


def worker_argv(workload: dict[str, Any], kubeconfig: Path) -> list[str]:
    """The worker's command line as its pod runs it, with the simulator's kubeconfig for --in-cluster
    and $(VAR) expanded as the kubelet does (fieldRef metadata.namespace: the overlay's namespace)."""
    (c,) = pod_spec(workload)["containers"]
    assert c["command"] == ["python", "manage.py", "runcontrollers"]
    env = {e["name"]: workload["metadata"]["namespace"] for e in c.get("env", [])
           if (e.get("valueFrom") or {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace"}
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in c["args"]]
    args = [f"--kubeconfig={kubeconfig}" if a == "--in-cluster" else a for a in args]
    return [sys.executable, "manage.py", "runcontrollers", *args]


def _get(sim: SimCluster, group: str, plural: str, ns: str, name: str) -> dict[str, Any] | None:
    rt = sim.registry.lookup(group, "v1", plural)
    try:
        return sim.call(lambda: sim.store.get(rt, ns, name))
    except StatusError:
        return None


def _deployment(name: str, replicas: int) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}}}}


def exercise(sim: SimCluster, worker: LoggedProcess, argv: list[str], namespace: str) -> None:
    """Make the worker do everything its controllers do: hold its Lease through renewals, and for the
    summary reconciler create, update and re-create summaries. The test's own changes go to the
    store directly, so only the worker's requests are recorded."""
    deployments = sim.registry.lookup("apps", "v1", "deployments")
    for name, replicas in (("web", 2), ("api", 1)):
        sim.call(lambda n=name, r=replicas: sim.store.create(deployments, namespace, _deployment(n, r)))
    lease = [a.split("=", 1)[1] for a in argv if a.startswith("--lease=")][0].split("/")
    wait_until(lambda: worker.proc.poll() is not None or (
        (held := _get(sim, "coordination.k8s.io", "leases", *lease))
        and held["spec"].get("renewTime") != held["spec"].get("acquireTime")), timeout=90, interval=0.2,
        what="the worker to take and renew its Lease")
    assert worker.proc.poll() is None, worker.output()[-3000:]
    if "--controller=controllers.examples.deployments:setup" in argv:
        configmaps = sim.registry.lookup("", "v1", "configmaps")
        wait_until(lambda: all(_get(sim, "", "configmaps", namespace, f"{n}-summary") for n in ("web", "api")),
                   timeout=60, interval=0.2, what="both summaries")
        for name in ("web", "api"):  # both: an update of one name only would look narrowable to one name
            changed = copy.deepcopy(_get(sim, "apps", "deployments", namespace, name))
            changed["spec"]["replicas"] = 5
            changed["metadata"].pop("resourceVersion")  # unconditional: the control plane writes its status
            sim.call(lambda n=name, c=changed: sim.store.update(deployments, namespace, n, c))
            wait_until(lambda n=name: (_get(sim, "", "configmaps", namespace, f"{n}-summary") or {}).get("data", {})
                       .get("replicas") == "5", timeout=30, interval=0.2, what=f"{name}-summary to follow (PUT)")
        sim.call(lambda: sim.store.delete(configmaps, namespace, "api-summary"))
        wait_until(lambda: _get(sim, "", "configmaps", namespace, "api-summary"), timeout=30, interval=0.2,
                   what="the deleted summary to come back (POST)")


_REQUESTED: dict[tuple[Any, ...], set[Access]] = {}


def requested(workload: dict[str, Any], redis_url: str, prefix: str, run_dir: Path) -> set[Access]:
    """What a worker Deployment's process requests from a fresh recording simulator; once per
    distinct worker (the overlays share theirs)."""
    (c,) = pod_spec(workload)["containers"]
    namespace = workload["metadata"]["namespace"]
    key = (namespace, tuple(c["args"]))
    if key in _REQUESTED:
        return _REQUESTED[key]
    sim = SimCluster(port=0, record_access=True, **FAST).start()
    try:
        namespaces = sim.registry.lookup("", "v1", "namespaces")
        sim.call(lambda: sim.store.create(namespaces, None, {"metadata": {"name": namespace}}))
        argv = worker_argv(workload, sim.write_kubeconfig(run_dir / f"kubeconfig-{sim.port}"))
        env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
               "CTRLSCOPE_RUN_DIR": str(run_dir), "CTRLSCOPE_WORKER": f"deploy-test-{uuid.uuid4().hex[:6]}"}
        worker = LoggedProcess(argv, env, run_dir / f"worker-{sim.port}.log", cwd=ROOT)
        try:
            exercise(sim, worker, argv, namespace)
        finally:
            worker.stop()
        _REQUESTED[key] = sim.accesses()
        return _REQUESTED[key]
    finally:
        sim.stop()


RBAC_RENDERS = [n for n in RENDERS if n != "demo"]


@pytest.mark.parametrize("name", RBAC_RENDERS)
def test_worker_rbac_is_exactly_what_the_worker_requests(name: str, redis_url: str, prefix: str,
                                                         run_dir: Path) -> None:
    objs = render(name)
    (worker,) = in_cluster_workers(objs)
    account, namespace = pod_spec(worker)["serviceAccountName"], worker["metadata"]["namespace"]
    grants, problems = grants_for(objs, account, namespace)
    assert not problems, problems
    accesses = requested(worker, redis_url, prefix, run_dir)
    assert accesses, "the worker requested nothing"
    missing, broader = compare(accesses, grants, namespace)
    assert not missing, f"requests no rule allows: {missing}"
    if name == "observe+read-secrets":
        # No example controller reads Secrets: the opt-in grant is exactly get/list/watch on them,
        # and the check sees it as unused, as it must (it is for controllers you add).
        assert broader == [f"ClusterRole ctrlscope-read-secrets: {v} core/secrets is never requested"
                           for v in ("get", "list", "watch")]
    else:
        assert not broader, broader


def test_only_the_opt_in_component_grants_secrets_and_no_rule_has_a_wildcard() -> None:
    for name in RENDERS:
        rules = [r for o in of_kind(render(name), "Role", "ClusterRole") for r in o.get("rules") or []]
        assert all("*" not in v for r in rules for k in ("verbs", "apiGroups", "resources") for v in r.get(k, []))
        secrets = [r for r in rules if "secrets" in r.get("resources", [])]
        assert (secrets == [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}]) == \
            (name == "observe+read-secrets"), (name, secrets)
    readme = (DEPLOY / "components" / "read-secrets" / "kustomization.yaml").read_text()
    assert 'README, "Security"' in readme


def test_demo_workers_have_no_credentials_for_the_real_cluster() -> None:
    objs = render("demo")
    assert not of_kind(objs, *RBAC) and not in_cluster_workers(objs)
    for w in of_kind(objs, *WORKLOADS):
        assert pod_spec(w).get("automountServiceAccountToken") is False, w["metadata"]["name"]


def test_the_rbac_check_fails_on_broader_and_missing_rules() -> None:
    ns = NAMESPACE
    watch_all = Access("watch", "apps", "deployments", "", "", "")
    renew = Access("update", "coordination.k8s.io", "leases", "", ns, "me")

    def grant(verb, group, resource, namespace=None, names=()):
        return Grant(verb, group, resource, namespace, frozenset(names), "Role r")

    exact = [grant("watch", "apps", "deployments"), grant("update", "coordination.k8s.io", "leases", ns, ["me"])]
    assert compare({watch_all, renew}, exact, ns) == ([], [])
    assert compare({watch_all, renew}, exact[:1], ns)[0] == [renew]  # missing
    assert compare({watch_all, renew}, [*exact, grant("delete", "apps", "deployments")], ns)[1] == \
        ["Role r: delete apps/deployments is never requested"]  # an extra verb
    assert compare({renew}, [grant("update", "coordination.k8s.io", "leases")], ns)[1] == \
        [f"Role r: update coordination.k8s.io/leases is only requested in {ns}: a Role there, not cluster-wide"]
    assert compare({renew}, [grant("update", "coordination.k8s.io", "leases", ns)], ns)[1] == \
        ["Role r: update coordination.k8s.io/leases is only requested for 'me': resourceNames can say so"]
    wildcard = [{"kind": "ClusterRole", "metadata": {"name": "all"},
                 "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]},
                {"kind": "ClusterRoleBinding", "metadata": {"name": "all"},
                 "roleRef": {"kind": "ClusterRole", "name": "all"},
                 "subjects": [{"kind": "ServiceAccount", "name": "w", "namespace": ns}]}]
    assert grants_for(wildcard, "w", ns)[1] == [
        "ClusterRole all: wildcard in {'apiGroups': ['*'], 'resources': ['*'], 'verbs': ['*']}"]
