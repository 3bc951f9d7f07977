"""Whole conversations of real clients, played against both servers: kubectl, the official Python
client, lightkube, kopf and client-go. Each records what its user would see -- a command's exit code
and output, a call's result or its ApiException's status and Status -- so a difference means the
client behaves differently on the simulator than on a real cluster.

The cases register into ``cases.CASES`` like the raw-HTTP ones (importing this module is enough).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.differential.cases import CRD_GROUP, case, cm, deployment
from tests.differential.harness import Session, status_gist

KUBECTL = "/usr/bin/kubectl"
AGE = re.compile(r"(?<=\s)(\d+(ms|s|m|h|d))(?=\s|$)")


# -- kubectl -----------------------------------------------------------------------------------
def kubectl(s: Session, label: str, *args: str, input: str | None = None, timeout: float = 30,
            json_output: bool = False) -> subprocess.CompletedProcess[str]:
    """Run the real kubectl against the session's server in its namespace; record exit code, output
    (ages as ``<age>``; JSON parsed) and the first line of stderr that is not a version-skew note."""
    home = s.workdir / f"kubectl-{s.target.name}"
    home.mkdir(exist_ok=True)
    env = {"HOME": str(home), "KUBECONFIG": str(s.target.kubeconfig), "PATH": os.environ.get("PATH", ""),
           "KUBECTL_KUBERC": "false"}
    result = subprocess.run([KUBECTL, "--cache-dir", str(home / "cache"), "-n", s.ns, *args], input=input, env=env,
                            capture_output=True, text=True, timeout=timeout)
    errors = [line for line in result.stderr.splitlines() if line and "version difference" not in line
              and not line.startswith("WARNING: version")]
    out: Any = result.stdout
    if json_output and result.returncode == 0:
        out = json.loads(result.stdout)
    elif isinstance(out, str):
        out = AGE.sub("<age>", out).splitlines()
    s.record(label, {"rc": result.returncode, "out": out, "err": errors[:1]})
    return result


def manifest(*objects: dict[str, Any]) -> str:
    return "\n---\n".join(json.dumps(o) for o in objects)


@case
def client_kubectl_apply(s: Session) -> None:
    doc = manifest(cm("app", k="v"), deployment("web"))
    kubectl(s, "apply", "apply", "-f", "-", input=doc)
    kubectl(s, "apply-unchanged", "apply", "-f", "-", input=doc)
    kubectl(s, "apply-changed", "apply", "-f", "-", input=manifest(cm("app", k="w")))
    kubectl(s, "diff-none", "diff", "-f", "-", input=manifest(cm("app", k="w")))
    kubectl(s, "apply-server-side", "apply", "--server-side", "-f", "-", input=manifest(cm("ssa", k="v")))
    kubectl(s, "apply-server-side-conflict", "apply", "--server-side", "--field-manager", "other", "-f", "-",
            input=manifest(cm("ssa", k="x")))
    kubectl(s, "apply-server-side-force", "apply", "--server-side", "--field-manager", "other",
            "--force-conflicts", "-f", "-", input=manifest(cm("ssa", k="x")))
    kubectl(s, "apply-invalid", "apply", "-f", "-", input=manifest(dict(cm("bad"), extra=1)))
    kubectl(s, "apply-invalid-lenient", "apply", "--validate=false", "-f", "-",
            input=manifest(dict(cm("lenient"), extra=1)))
    kubectl(s, "get-json", "get", "configmap", "app", "-o", "json", json_output=True)


@case
def client_kubectl_get(s: Session) -> None:
    for i in range(3):
        s.request("POST", "/api/v1/namespaces/{ns}/configmaps", dict(cm(f"c{i}", k="v"),
                                                                      metadata={"name": f"c{i}", "labels": {"i": str(i)}}))
    s.request("POST", "/apis/apps/v1/namespaces/{ns}/deployments", deployment("web", replicas=0))
    kubectl(s, "get-table", "get", "configmaps", "-l", "i")
    kubectl(s, "get-selector", "get", "configmaps", "-l", "i in (1,2)", "-o", "name")
    kubectl(s, "get-wide", "get", "deployment", "web", "-o", "wide")
    kubectl(s, "get-jsonpath", "get", "configmaps", "-l", "i", "-o", "jsonpath={.items[*].metadata.name}")
    kubectl(s, "get-custom-columns", "get", "configmaps", "-l", "i", "-o",
            "custom-columns=NAME:.metadata.name,K:.data.k")
    kubectl(s, "get-missing", "get", "configmap", "nope")
    kubectl(s, "get-unknown-type", "get", "nothings")
    kubectl(s, "get-chunked", "get", "configmaps", "-l", "i", "--chunk-size", "1", "-o", "name")
    kubectl(s, "get-crd-short-name", "get", "wg")
    kubectl(s, "describe", "describe", "configmap", "c1")


@case
def client_kubectl_edit_verbs(s: Session) -> None:
    s.request("POST", "/apis/apps/v1/namespaces/{ns}/deployments", deployment("web", replicas=0))
    s.request("POST", "/api/v1/namespaces/{ns}/configmaps", cm("app", k="v"))
    kubectl(s, "scale", "scale", "deployment", "web", "--replicas", "0")
    kubectl(s, "scale-precondition", "scale", "deployment", "web", "--replicas", "0", "--current-replicas", "5")
    kubectl(s, "label", "label", "configmap", "app", "tier=web")
    kubectl(s, "label-exists", "label", "configmap", "app", "tier=db")
    kubectl(s, "annotate", "annotate", "configmap", "app", "note=x")
    kubectl(s, "patch-merge", "patch", "configmap", "app", "--type", "merge", "-p", '{"data":{"k":"w"}}')
    kubectl(s, "patch-json", "patch", "configmap", "app", "--type", "json", "-p",
            '[{"op":"replace","path":"/data/k","value":"z"}]')
    kubectl(s, "patch-strategic", "patch", "deployment", "web", "-p",
            '{"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.28"}]}}}}')
    kubectl(s, "patch-no-change", "patch", "configmap", "app", "--type", "merge", "-p", '{"data":{"k":"z"}}')
    kubectl(s, "set-image", "set", "image", "deployment/web", "web=nginx:1.29")
    kubectl(s, "create-dry-run-server", "create", "configmap", "dry", "--from-literal", "a=b",
            "--dry-run=server", "-o", "json", json_output=True)
    kubectl(s, "create-generic", "create", "configmap", "made", "--from-literal", "a=b")
    kubectl(s, "create-exists", "create", "configmap", "made", "--from-literal", "a=b")
    kubectl(s, "delete", "delete", "configmap", "app", "made")
    kubectl(s, "delete-missing", "delete", "configmap", "app")
    kubectl(s, "delete-ignore-missing", "delete", "configmap", "app", "--ignore-not-found")


@case
def client_kubectl_watch_and_wait(s: Session) -> None:
    s.request("POST", "/api/v1/namespaces/{ns}/configmaps",
              dict(cm("f"), metadata={"name": "f", "finalizers": ["diff.ctrlscope.dev/hold"]}))

    def release() -> None:
        time.sleep(1.5)
        s.request("PATCH", "/api/v1/namespaces/{ns}/configmaps/f", {"metadata": {"finalizers": None}},
                  content_type="application/merge-patch+json")
    threading.Thread(target=release, daemon=True).start()
    kubectl(s, "delete-waits-for-finalizer", "delete", "configmap", "f", "--timeout", "20s")
    s.request("POST", "/api/v1/namespaces/{ns}/configmaps", cm("w"))

    # Discovery first (a cold cache costs kubectl seconds against a real server), so that the change
    # lands while the watch is open.
    kubectl(s, "get-before-watch", "get", "configmap", "w", "-o", "name")

    def change() -> None:
        time.sleep(1.5)
        s.request("PATCH", "/api/v1/namespaces/{ns}/configmaps/w", {"data": {"a": "1"}},
                  content_type="application/merge-patch+json")
    threading.Thread(target=change, daemon=True).start()
    kubectl(s, "get-watch", "get", "configmap", "w", "--watch", "--request-timeout", "5s",
            "-o", "custom-columns=NAME:.metadata.name,A:.data.a")
    kubectl(s, "wait-jsonpath", "wait", "configmap/w", "--for", "jsonpath={.data.a}=1", "--timeout", "10s")


@case
def client_kubectl_discovery(s: Session) -> None:
    kubectl(s, "api-resources-apps", "api-resources", "--api-group", "apps", "--no-headers")
    kubectl(s, "api-resources-crd", "api-resources", "--api-group", CRD_GROUP)
    kubectl(s, "api-versions-has-apps", "api-versions")
    s.records["api-versions-has-apps"]["out"] = [v for v in s.records["api-versions-has-apps"]["out"]
                                                 if v in ("apps/v1", "v1", f"{CRD_GROUP}/v1")]
    kubectl(s, "explain", "explain", "configmap.data")
    kubectl(s, "explain-crd", "explain", "widgets.spec.size")
    kubectl(s, "auth-can-i", "auth", "can-i", "create", "configmaps")


# -- the official Python client ----------------------------------------------------------------
def _python_client(s: Session) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(s.target.kubeconfig))


def attempt(s: Session, label: str, fn: Callable[[], Any], api: Any) -> Any:
    """Record a client call's result (serialized as the client serializes it) or its error."""
    from kubernetes.client.exceptions import ApiException

    try:
        result = fn()
    except ApiException as exc:
        body = json.loads(exc.body) if exc.body and exc.body.startswith("{") else exc.body
        s.record(label, {"error": exc.status, "reason": exc.reason,
                         "body": status_gist(body) if isinstance(body, dict) else body})
        return None
    s.record(label, {"ok": api.sanitize_for_serialization(result)})
    return result


@case
def client_python(s: Session) -> None:
    from kubernetes import client, dynamic, watch

    api = _python_client(s)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    ns = s.ns
    created = attempt(s, "create", lambda: core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"), data={"k": "v"})), api)
    attempt(s, "read", lambda: core.read_namespaced_config_map("a", ns), api)
    attempt(s, "create-again", lambda: core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="a"))), api)
    attempt(s, "patch-strategic", lambda: core.patch_namespaced_config_map("a", ns, {"data": {"k": "w"}}), api)
    attempt(s, "patch-json", lambda: core.patch_namespaced_config_map(
        "a", ns, [{"op": "add", "path": "/data/j", "value": "1"}]), api)
    created.data = {"k": "stale"}
    attempt(s, "replace-stale", lambda: core.replace_namespaced_config_map("a", ns, created), api)
    for name in ("b", "c"):
        core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name)))
    first = attempt(s, "list-limit", lambda: core.list_namespaced_config_map(ns, limit=2), api)
    if first is not None:
        attempt(s, "list-continue", lambda: core.list_namespaced_config_map(
            ns, limit=2, _continue=first.metadata._continue), api)
    attempt(s, "read-missing", lambda: core.read_namespaced_config_map("nope", ns), api)
    attempt(s, "delete", lambda: core.delete_namespaced_config_map("c", ns), api)
    rv = core.list_namespaced_config_map(ns).metadata.resource_version

    def churn() -> None:
        time.sleep(0.5)
        core.patch_namespaced_config_map("b", ns, {"data": {"n": "1"}})
        core.delete_namespaced_config_map("b", ns)
    threading.Thread(target=churn, daemon=True).start()
    events = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=3)]
    s.record("watch", events)
    apps.create_namespaced_deployment(ns, deployment("web", replicas=0))
    attempt(s, "scale", lambda: apps.patch_namespaced_deployment_scale("web", ns, {"spec": {"replicas": 0}}), api)
    attempt(s, "read-scale", lambda: apps.read_namespaced_deployment_scale("web", ns), api)
    dyn = dynamic.DynamicClient(api)
    widgets = dyn.resources.get(api_version=f"{CRD_GROUP}/v1", kind="Widget")
    attempt(s, "dynamic-create", lambda: widgets.create(body={"apiVersion": f"{CRD_GROUP}/v1", "kind": "Widget",
                                                              "metadata": {"name": "w"}, "spec": {"size": 1}},
                                                        namespace=ns).to_dict(), api)
    attempt(s, "dynamic-apply", lambda: widgets.server_side_apply(
        body={"apiVersion": f"{CRD_GROUP}/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 2}},
        name="w", namespace=ns, field_manager="diff").to_dict(), api)
    attempt(s, "dynamic-invalid", lambda: widgets.create(
        body={"apiVersion": f"{CRD_GROUP}/v1", "kind": "Widget", "metadata": {"name": "bad"}, "spec": {"size": 0}},
        namespace=ns).to_dict(), api)


# -- lightkube ---------------------------------------------------------------------------------
# lightkube sets its model classes up lazily on first use (DataclassDictMixIn._setup), and not
# thread-safely: with the simulator's and the real server's conversations on two threads, one thread
# read a class's _valid_params while the other was still filling it ("argument of type 'NoneType' is
# not iterable" in KubeConfig.from_dict, in loaded CI runs). Its conversations take turns.
_LIGHTKUBE = threading.Lock()


@case
def client_lightkube(s: Session) -> None:
    with _LIGHTKUBE:
        _lightkube_conversation(s)


def _lightkube_conversation(s: Session) -> None:
    from lightkube import ApiError, Client, KubeConfig
    from lightkube.generic_resource import create_namespaced_resource
    from lightkube.models.meta_v1 import ObjectMeta
    from lightkube.resources.apps_v1 import Deployment
    from lightkube.resources.core_v1 import ConfigMap
    from lightkube.types import PatchType

    kc = Client(config=KubeConfig.from_file(str(s.target.kubeconfig)), namespace=s.ns, field_manager="diff")

    def step(label: str, fn: Callable[[], Any]) -> Any:
        try:
            result = fn()
        except ApiError as exc:
            s.record(label, {"error": exc.status.code, "reason": exc.status.reason,
                             "causes": [c.field for c in (exc.status.details.causes or [])] if exc.status.details
                             else None})
            return None
        s.record(label, {"ok": result.to_dict() if hasattr(result, "to_dict") else result})
        return result

    step("create", lambda: kc.create(ConfigMap(metadata=ObjectMeta(name="a"), data={"k": "v"})))
    step("get", lambda: kc.get(ConfigMap, "a"))
    step("create-again", lambda: kc.create(ConfigMap(metadata=ObjectMeta(name="a"))))
    step("patch-merge", lambda: kc.patch(ConfigMap, "a", {"data": {"k": "w"}}, patch_type=PatchType.MERGE))
    step("patch-json", lambda: kc.patch(ConfigMap, "a", [{"op": "add", "path": "/data/j", "value": "1"}],
                                        patch_type=PatchType.JSON))
    step("apply", lambda: kc.apply(ConfigMap(metadata=ObjectMeta(name="b"), data={"x": "1"})))
    step("apply-conflict", lambda: kc.apply(ConfigMap(metadata=ObjectMeta(name="b"), data={"x": "2"}),
                                            field_manager="other"))
    step("apply-force", lambda: kc.apply(ConfigMap(metadata=ObjectMeta(name="b"), data={"x": "2"}),
                                         field_manager="other", force=True))
    step("list-chunked", lambda: sorted(c.metadata.name for c in kc.list(ConfigMap, chunk_size=1)))
    step("get-missing", lambda: kc.get(ConfigMap, "nope"))
    kc.create(Deployment.from_dict(dict(deployment("web", replicas=0), metadata={"name": "web"})))

    def scale() -> Any:
        # Unconditional (no resourceVersion): the deployment controller writes status meanwhile.
        current = kc.get(Deployment.Scale, "web")
        current.metadata.resourceVersion = None
        return kc.replace(current, "web")
    step("scale", scale)
    widgets = create_namespaced_resource(CRD_GROUP, "v1", "Widget", "widgets")
    step("generic-create", lambda: kc.create(widgets(metadata=ObjectMeta(name="w"), spec={"size": 3})))
    step("generic-invalid", lambda: kc.create(widgets(metadata=ObjectMeta(name="bad"), spec={"size": 99})))
    events: list[tuple[str, str]] = []
    rv = kc.get(ConfigMap, "a").metadata.resourceVersion

    def churn() -> None:
        time.sleep(0.5)
        kc.patch(ConfigMap, "a", {"data": {"n": "1"}}, patch_type=PatchType.MERGE)
        kc.delete(ConfigMap, "a")

    def watch() -> None:
        with contextlib.suppress(Exception):
            for op, obj in kc.watch(ConfigMap, resource_version=rv):
                events.append((op, obj.metadata.name))
                if op == "DELETED":
                    return
    threading.Thread(target=churn, daemon=True).start()
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    watcher.join(8)
    s.record("watch", events)



# -- kopf ----------------------------------------------------------------------------------------
KOPF_OPERATOR = '''
import kopf

@kopf.on.startup()
def configure(settings, **_):
    settings.persistence.finalizer = "diff.ctrlscope.dev/kopf"
    settings.watching.server_timeout = 10
    settings.posting.enabled = False

@kopf.on.create("configmaps", labels={"kopf": "yes"})
def created(name, body, patch, logger, **_):
    patch.metadata.annotations["diff/seen"] = name
    return {"created": name}

@kopf.on.update("configmaps", labels={"kopf": "yes"}, field="data")
def updated(name, old, new, patch, **_):
    patch.metadata.annotations["diff/update"] = str(sorted((new or {}).keys()))

@kopf.on.delete("configmaps", labels={"kopf": "yes"})
def deleted(name, **_):
    print(f"DELETED-HANDLER {name}", flush=True)
'''


@contextlib.contextmanager
def kopf_run(s: Session) -> Iterator[subprocess.Popen[str]]:
    script = s.workdir / f"kopf-operator-{s.target.name}.py"
    script.write_text(KOPF_OPERATOR)
    log = s.workdir / f"kopf-{s.target.name}.log"
    env = {**os.environ, "KUBECONFIG": str(s.target.kubeconfig)}
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", s.ns,
                                 str(script)], env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
        try:
            yield proc
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _poll(fn: Callable[[], Any], seconds: float = 30) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(0.25)
    return None


@case
def client_kopf(s: Session) -> None:
    path = "/api/v1/namespaces/{ns}/configmaps"
    labelled = {"name": "k", "labels": {"kopf": "yes"}}
    with kopf_run(s) as proc:
        s.request("POST", path, dict(cm("k", a="1"), metadata=labelled))

        def annotated(key: str) -> Any:
            annotations = (s.request("GET", f"{path}/k").json or {}).get("metadata", {}).get("annotations") or {}
            return annotations if key in annotations else None
        seen = _poll(lambda: annotated("diff/seen"))
        s.record("after-create", {k: v for k, v in (seen or {}).items() if not k.startswith("kopf.zalando.org")}
                 if seen else "handler never ran")
        got = s.request("GET", f"{path}/k").json or {}
        s.record("finalizers", got.get("metadata", {}).get("finalizers"))
        s.request("PATCH", f"{path}/k", {"data": {"b": "2"}}, content_type="application/merge-patch+json")
        updated = _poll(lambda: annotated("diff/update"))
        s.record("after-update", (updated or {}).get("diff/update", "handler never ran"))
        s.request("DELETE", f"{path}/k")
        s.record("deleted", bool(_poll(lambda: s.request("GET", f"{path}/k").status == 404)))
        s.record("operator-alive", proc.poll() is None)
    log = (s.workdir / f"kopf-{s.target.name}.log").read_text()
    s.record("delete-handler-ran", "DELETED-HANDLER k" in log)
    s.record("log-errors", sorted({m.group(1) for m in re.finditer(r"\[ERROR\s*\] (\w[\w ]{0,40})", log)}))


# -- client-go ---------------------------------------------------------------------------------
_GO_BUILD = threading.Lock()


def _go_program(workdir: Path) -> Path:
    """go/cmd/differential, built once per run (both servers' sessions share the workdir)."""
    from controllers import golang

    with _GO_BUILD:
        binary = workdir / "go-bin" / "differential"
        if not binary.exists():
            golang.build(workdir / "go-bin", programs=("differential",))
        return binary


@case
def client_go(s: Session) -> None:
    """go/cmd/differential: a client-go conversation (typed clientset, dynamic client, apply
    configurations, pager, informer); every step prints one JSON line the case records."""
    binary = _go_program(s.workdir)
    result = subprocess.run([str(binary), "--kubeconfig", str(s.target.kubeconfig), "--namespace", s.ns,
                             "--crd-group", CRD_GROUP], capture_output=True, text=True, timeout=120)
    steps = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    for step in steps:
        s.record(step.pop("step"), step)
    s.record("exit", {"rc": result.returncode, "stderr": result.stderr.strip().splitlines()[-1:]
                      if result.returncode else []})
