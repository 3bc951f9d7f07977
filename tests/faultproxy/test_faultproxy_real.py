"""The fault proxy in front of the real control plane: every fault kind as ctrlscope's Python informer,
a client-go informer (the source document's Go program) and kubectl see it, and what passes through
unchanged (compressed answers, server-side apply, errors of the real server's own)."""

from __future__ import annotations

import base64
import datetime
import gzip
import json
import os
import re
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from controllers.informers import ApiError
from controllers.informers.http_client import KubernetesClient
from controllers.realcluster.pki import private_pem
from tests.conftest import wait_until
from tests.faultproxy.conftest import Proxied
from tests.faultproxy.sequences import informer_survives_every_fault

pytestmark = pytest.mark.realcluster
KUBECTL = "/usr/bin/kubectl"


def kubectl_argv(kubeconfig: Path, *args: str) -> list[str]:
    # Its discovery cache beside the kubeconfig: each proxy listens on a new port, a new cache entry.
    return [KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(kubeconfig.parent / "kubectl-cache"), *args]


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 60
            ) -> subprocess.CompletedProcess[str]:
    return subprocess.run(kubectl_argv(kubeconfig, *args), capture_output=True, text=True, input=stdin,
                          timeout=timeout)


def timed(fn: Any) -> tuple[Any, float]:
    started = time.monotonic()
    result = fn()
    return result, time.monotonic() - started


def test_the_python_informer_survives_every_fault_through_the_proxy(realcluster, real_namespace, proxy_in_front):
    proxied = proxy_in_front(realcluster.kubeconfig)
    direct = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    published = informer_survives_every_fault(proxied, direct, real_namespace)
    assert published == ["end-watches", "drop-watches", "latency", "drop-watches", "compact", "latency-cleared",
                         "errors", "latency", "drop-watches", "compact", "latency-cleared", "errors-cleared", "stall",
                         "latency", "latency-cleared"]


@pytest.mark.kubectl
def test_kubectl_sees_each_fault_through_the_proxy(realcluster, real_namespace, proxy_in_front):
    if not os.path.exists(KUBECTL):
        pytest.skip("kubectl is not at /usr/bin/kubectl")
    proxied = proxy_in_front(realcluster.kubeconfig)
    kc, ns = proxied.kubeconfig, real_namespace
    faults = proxied.faults().as_actor("kubectl-test")
    assert kubectl(kc, "create", "configmap", "a", "-n", ns, "--from-literal=k=v").returncode == 0
    # Server-side apply (a PATCH of application/apply-patch+yaml) passes through as it is.
    applied = kubectl(kc, "apply", "--server-side", "-n", ns, "-f", "-",
                      stdin=yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"},
                                            "data": {"k": "v"}}))
    assert applied.returncode == 0 and "serverside-applied" in applied.stdout, applied.stderr

    faults.errors(verb="list", resource="configmaps", rate=1.0, code=500)
    failed = kubectl(kc, "get", "configmaps", "-n", ns)
    assert failed.returncode == 1
    assert "Error from server (InternalError): injected fault: list configmaps failed (500)" in failed.stderr
    assert kubectl(kc, "get", "configmap", "a", "-n", ns).returncode == 0  # a get is not a list
    faults.clear_errors()

    faults.latency(verb="list", resource="configmaps", ms=800)
    listed, took = timed(lambda: kubectl(kc, "get", "configmaps", "-n", ns, "--no-headers"))
    assert listed.returncode == 0 and took >= 0.8 and {"a", "b"} <= {ln.split()[0] for ln in listed.stdout.splitlines()}
    faults.clear_latency()

    faults.stall(1.5)
    listed, took = timed(lambda: kubectl(kc, "get", "configmaps", "-n", ns))
    assert listed.returncode == 0 and took >= 1.2, took

    # kubectl get -w ends, as at the server's timeout, whether the watch is ended or dropped.
    for end in (faults.end_watches, faults.drop_watches):
        watch = subprocess.Popen(kubectl_argv(kc, "get", "configmaps", "-n", ns, "-w", "--output-watch-events"),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: proxied.proxy.call(lambda: len(proxied.proxy.watches)) == 1, timeout=15,
                       what="kubectl's watch")
            assert end()["closed"] == 1
            out, _ = watch.communicate(timeout=15)
        finally:
            watch.kill()
        assert watch.returncode == 0 and re.search(r"ADDED\s+a\s", out), out

    # A watch from before the compaction point: the API server's 410, as kubectl prints it raw.
    rv = json.loads(kubectl(kc, "get", "--raw", f"/api/v1/namespaces/{ns}/configmaps").stdout)["metadata"]["resourceVersion"]
    assert kubectl(kc, "create", "configmap", "c", "-n", ns).returncode == 0
    compacted = faults.compact_history()["compactedResourceVersion"]
    raw = kubectl(kc, "get", "--raw", f"/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={rv}",
                  timeout=20)
    event = json.loads(raw.stdout)
    assert event["type"] == "ERROR" and event["object"]["code"] == 410
    assert event["object"]["message"] == f"too old resource version: {rv} ({compacted})"

    # Kill pods: deleted with the upstream's credentials, in the namespace named.
    for name in ("p1", "p2"):
        assert kubectl(kc, "run", name, "-n", ns, "--image=busybox", "--restart=Never").returncode == 0
    killed = faults.kill_pods(2, ns)["killed"]
    assert sorted(killed) == [f"{ns}/p1", f"{ns}/p2"]
    wait_until(lambda: kubectl(kc, "get", "pods", "-n", ns, "--no-headers").stdout.strip() == "", timeout=30,
               what="the pods gone")

    # What only the simulator can do, asked with kubectl: a 501 that says why, nothing recorded.
    refused = kubectl(kc, "create", "--raw", "/_sim/kubelet/pause", "-f", "-", stdin="{}")
    assert refused.returncode == 1 and "only the simulator's kubelet can be paused" in refused.stderr
    assert [e["fault"] for e in faults.status()["events"]] == [
        "errors", "errors-cleared", "latency", "latency-cleared", "stall", "end-watches", "drop-watches", "compact",
        "kill-pods"]
    kubectl_lists = sum(r["count"] for r in faults.requests()["requests"]
                        if r["userAgent"].startswith("kubectl/") and r["verb"] == "list" and r["resource"] == "configmaps")
    assert kubectl_lists >= 4  # counted under kubectl's own user agent, the failed list too


def test_compressed_answers_and_the_real_servers_errors_pass_through(realcluster, proxy_in_front):
    proxied = proxy_in_front(realcluster.kubeconfig)
    config = yaml.safe_load(proxied.kubeconfig.read_text())
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    headers = {"Authorization": f"Bearer {config['users'][0]['user']['token']}", "Accept-Encoding": "gzip"}
    request = urllib.request.Request(proxied.proxy.url + "/openapi/v2", headers=headers)
    with urllib.request.urlopen(request, timeout=30, context=ssl.create_default_context(cadata=ca)) as resp:
        assert resp.headers["Content-Encoding"] == "gzip"
        through = json.loads(gzip.decompress(resp.read()))
    direct = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig)).get_json("/openapi/v2")
    assert through == direct
    # The API server gzips watch streams too; through the proxy a watch comes uncompressed, event by
    # event, so that each can be held, ended or dropped whole (a gzip stream hid them until it ended).
    watch = urllib.request.Request(proxied.proxy.url + "/api/v1/namespaces/default/configmaps?watch=1&"
                                   "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&"
                                   "allowWatchBookmarks=true&timeoutSeconds=60", headers=headers)
    started = time.monotonic()
    with urllib.request.urlopen(watch, timeout=30, context=ssl.create_default_context(cadata=ca)) as resp:
        assert "Content-Encoding" not in resp.headers
        first = json.loads(resp.readline())
    assert first["type"] in ("ADDED", "BOOKMARK") and time.monotonic() - started < 10
    with pytest.raises(ApiError) as refused:
        proxied.client().send_json("POST", "/api/v1/namespaces/default/configmaps",
                                   {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Not_Valid"}})
    assert refused.value.code == 422 and "Not_Valid" in refused.value.message


def go_requests(proxied: Proxied, verb: str = "*") -> int:
    """Requests the Go program made for deployments (of ``verb``; ``*``: all), by its user agent."""
    return sum(r["count"] for r in proxied.faults().requests()["requests"]
               if r["userAgent"].startswith("deployment-informer/") and verb in ("*", r["verb"])
               and r["resource"] == "deployments")


def deployment(name: str) -> dict[str, Any]:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}


def test_a_client_go_informer_sees_the_faults_through_the_proxy(realcluster, real_namespace, proxy_in_front,
                                                                 go_process):
    """The source document's program (a SharedInformerFactory and a Deployment informer that prints)."""
    proxied = proxy_in_front(realcluster.kubeconfig)
    faults = proxied.faults().as_actor("go-test")
    direct = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    path = f"/apis/apps/v1/namespaces/{real_namespace}/deployments"
    program = go_process("deployment-informer", "--kubeconfig", str(proxied.kubeconfig), "--namespace",
                         real_namespace, "--worker-name", "fp-go")
    added = "새로운 Deployment 생성됨: "  # the program's Add handler prints this
    deleted = "Deployment 삭제됨: "

    def create_and_see(name: str, timeout: float = 30) -> None:
        direct.send_json("POST", path, deployment(name))
        program.wait_for_output(added + name, timeout=timeout)

    wait_until(lambda: go_requests(proxied, "watch") >= 1, timeout=60, what="the Go informer's watch")
    create_and_see("a")
    assert faults.end_watches()["closed"] >= 1
    create_and_see("b")
    assert faults.drop_watches()["closed"] >= 1
    create_and_see("c")

    # 410: the Go reflector relists (a LIST, or a WatchList: client-go 0.37 streams its list phase),
    # and its Delete handler gets the tombstone of what it missed.
    faults.latency(verb="watch", resource="deployments", ms=1500)
    faults.drop_watches()
    direct.send_json("DELETE", f"{path}/a")
    faults.compact_history()
    faults.clear_latency()
    program.wait_for_output(deleted + "a", timeout=30)

    # Errors: every request for deployments fails, so its relists fail (and back off) until the rule
    # goes; then it catches up.
    faults.errors(verb="*", resource="deployments", rate=1.0, code=500)
    before = go_requests(proxied)
    faults.latency(verb="watch", resource="deployments", ms=1500)
    faults.drop_watches()
    direct.send_json("POST", path, deployment("d"))
    faults.compact_history()
    faults.clear_latency()
    wait_until(lambda: go_requests(proxied) >= before + 3, timeout=30, what="failing relists")
    assert added + "d" not in program.output()
    faults.clear_errors()
    program.wait_for_output(added + "d", timeout=60)

    # Stall: the open watch goes silent; the event arrives when the stall ends, on the same watch.
    watches = go_requests(proxied, "watch")
    faults.stall(2.0)
    started = time.monotonic()
    create_and_see("e")
    assert time.monotonic() - started >= 1.5
    assert go_requests(proxied, "watch") == watches
    assert program.proc.poll() is None, program.output()[-2000:]


def test_the_upstream_is_reached_with_client_certificates_and_acts_as_their_user(realcluster, tmp_path: Path,
                                                                                 proxy_in_front):
    """A kubeconfig with a client certificate instead of a token (kind's, kubeadm's): the proxy presents
    it, and the upstream sees that user -- not the proxy's token, which never leaves the proxy."""
    pki = Path(realcluster.run_dir) / "pki"
    ca_cert = x509.load_pem_x509_certificate((pki / "ca.crt").read_bytes())
    ca_key = serialization.load_pem_private_key((pki / "ca.key").read_bytes(), password=None)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fault-proxy-tester"),
                                     x509.NameAttribute(NameOID.ORGANIZATION_NAME, "system:masters")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(hours=1))
            .sign(ca_key, hashes.SHA256()))
    admin = yaml.safe_load(Path(realcluster.kubeconfig).read_text())
    b64 = lambda data: base64.b64encode(data).decode()  # noqa: E731
    upstream = tmp_path / "certs.yaml"
    upstream.write_text(yaml.safe_dump({**admin, "users": [{"name": admin["users"][0]["name"], "user": {
        "client-certificate-data": b64(cert.public_bytes(serialization.Encoding.PEM)),
        "client-key-data": b64(private_pem(key))}}]}))
    proxied = proxy_in_front(upstream)
    review = proxied.client().send_json("POST", "/apis/authentication.k8s.io/v1/selfsubjectreviews",
                                        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    user = review["status"]["userInfo"]
    assert user["username"] == "fault-proxy-tester" and "system:masters" in user["groups"]

