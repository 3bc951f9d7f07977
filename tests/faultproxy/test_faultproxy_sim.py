"""The fault proxy with the simulator as its upstream: forwarding, its own credentials, every fault as
the informer sees it, request counts, malformed fault requests, and what only the simulator can do."""

from __future__ import annotations

import base64
import json
import ssl
import stat
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from controllers.faults.vocabulary import ACTOR_HEADER
from controllers.informers import ApiError
from controllers.informers.http_client import KubernetesClient
from controllers.sim import SimCluster
from tests.conftest import wait_until
from tests.faultproxy.conftest import Proxied
from tests.faultproxy.sequences import configmap, informer_survives_every_fault, requests_of
from tests.sim.conftest import make_namespace


def raw(proxied: Proxied, path: str, *, method: str = "GET", body: bytes | None = None,
        headers: dict[str, str] | None = None, token: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One HTTPS request to the proxy, trusting its CA, with ``token`` (default: the proxy's own)."""
    config = yaml.safe_load(proxied.kubeconfig.read_text())
    ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
    context = ssl.create_default_context(cadata=ca)
    token = config["users"][0]["user"]["token"] if token is None else token
    all_headers = {**({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    req = urllib.request.Request(proxied.proxy.url + path, data=body, method=method, headers=all_headers)
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def test_only_the_proxys_own_token_is_served_and_its_kubeconfig_is_private(sim_upstream, proxy_in_front):
    sim, sim_kubeconfig = sim_upstream
    proxied = proxy_in_front(sim_kubeconfig)
    config = yaml.safe_load(proxied.kubeconfig.read_text())
    assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    token = config["users"][0]["user"]["token"]
    assert token != yaml.safe_load(sim_kubeconfig.read_text())["users"][0]["user"]["token"]
    assert stat.S_IMODE(proxied.kubeconfig.stat().st_mode) == 0o600
    for wrong in ("", "ctrlscope-sim", token[:-1]):
        code, _, body = raw(proxied, "/api/v1/namespaces", token=wrong)
        assert code == 401 and json.loads(body)["reason"] == "Unauthorized", body
        code, _, _ = raw(proxied, "/_sim/faults", token=wrong)
        assert code == 401
    assert raw(proxied, "/api/v1/namespaces")[0] == 200
    code, _, body = raw(proxied, "/api/v1/namespaces/default/pods/x/exec?command=sh",
                        headers={"Connection": "Upgrade", "Upgrade": "websocket"})
    assert code == 501 and "does not forward connection upgrades" in json.loads(body)["message"]


def test_requests_and_answers_pass_through_unchanged(sim_upstream, proxy_in_front):
    sim, sim_kubeconfig = sim_upstream
    proxied = proxy_in_front(sim_kubeconfig)
    direct = KubernetesClient.for_host(sim.url)
    ns = make_namespace(sim)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    created = proxied.client().send_json("POST", path, {**configmap("a"), "metadata": {"name": "a", "labels": {"x": "1"}}})
    assert direct.get_json(f"{path}/a")["metadata"]["uid"] == created["metadata"]["uid"]
    # A query as the client encoded it, and protobuf answers, byte for byte.
    query = "?labelSelector=x%20in%20%281%2C2%29%2Cx%21%3D3"
    for accept in ("application/json", "application/vnd.kubernetes.protobuf"):
        code, headers, body = raw(proxied, path + query, headers={"Accept": accept})
        with urllib.request.urlopen(urllib.request.Request(sim.url + path + query, headers={"Accept": accept}),
                                    timeout=10) as resp:
            assert (code, headers["Content-Type"], body) == (resp.status, resp.headers["Content-Type"], resp.read())
    assert json.loads(raw(proxied, path + query)[2])["items"][0]["metadata"]["name"] == "a"
    # An error of the upstream's is the upstream's, status and body.
    code, _, body = raw(proxied, f"{path}/missing")
    assert code == 404 and json.loads(body)["message"] == 'configmaps "missing" not found'


def test_every_fault_reaches_the_informer_through_the_proxy_as_from_the_simulator(sim_upstream, proxy_in_front):
    sim, sim_kubeconfig = sim_upstream
    proxied = proxy_in_front(sim_kubeconfig)
    published = informer_survives_every_fault(proxied, KubernetesClient.for_host(sim.url), make_namespace(sim))
    assert published == ["end-watches", "drop-watches", "latency", "drop-watches", "compact", "latency-cleared",
                         "errors", "latency", "drop-watches", "compact", "latency-cleared", "errors-cleared", "stall",
                         "latency", "latency-cleared"]
    # The simulator itself saw none of them: its own fault log is empty.
    assert sim.call(lambda: list(sim.faults.events)) == []
    assert all(e["by"] == "test" and e["time"].endswith("Z") for e in proxied.published)


def test_requests_are_counted_by_user_agent_verb_and_resource(sim_upstream, proxy_in_front):
    sim, sim_kubeconfig = sim_upstream
    proxied = proxy_in_front(sim_kubeconfig)
    faults = proxied.faults()
    faults.reset_requests()
    path = "/api/v1/namespaces/default/configmaps"
    for agent, n in (("watch-loop/1.0", 3), ("informer/1.0", 1)):
        for _ in range(n):
            raw(proxied, path, headers={"User-Agent": agent})
    raw(proxied, path + "/nope", headers={"User-Agent": "watch-loop/1.0"})
    raw(proxied, "/version", headers={"User-Agent": "watch-loop/1.0"})  # not a resource request
    counts = faults.requests()
    assert requests_of(counts, "watch-loop/1.0", "list", "configmaps") == 3
    assert requests_of(counts, "watch-loop/1.0", "get", "configmaps") == 1
    assert requests_of(counts, "informer/1.0", "list", "configmaps") == 1
    assert counts["total"] == 5 and counts["sinceMs"] > 0
    faults.reset_requests()
    assert faults.requests()["total"] == 0
    # The simulator counts the same way: it served the proxy's forwarded requests, under their agents.
    sim_counts = KubernetesClient.for_host(sim.url).get_json("/_sim/requests")
    assert requests_of(sim_counts, "watch-loop/1.0", "list", "configmaps") == 3


def test_what_only_the_simulator_can_do_is_refused_with_the_reason_and_kill_pods_needs_a_namespace(
        sim_upstream, proxy_in_front):
    sim, sim_kubeconfig = sim_upstream
    proxied = proxy_in_front(sim_kubeconfig)
    faults = proxied.faults()
    status = faults.status()
    assert status["backend"] == "fault proxy" and set(status["unsupported"]) == {"kubelet", "reset"}
    for call in (faults.pause_kubelet, faults.resume_kubelet, faults.reset):
        with pytest.raises(ApiError) as refused:
            call()
        assert refused.value.code == 501 and "only the simulator" in refused.value.message
    with pytest.raises(ApiError) as refused:
        faults.kill_pods(1)
    assert refused.value.code == 400 and "one namespace only" in refused.value.message
    ns = make_namespace(sim)
    direct = KubernetesClient.for_host(sim.url)
    for name in ("p1", "p2"):
        direct.send_json("POST", f"/api/v1/namespaces/{ns}/pods",
                         {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    killed = faults.kill_pods(1, ns)["killed"]
    assert len(killed) == 1 and killed[0] in (f"{ns}/p1", f"{ns}/p2")
    left = {p["metadata"]["name"] for p in direct.get_json(f"/api/v1/namespaces/{ns}/pods")["items"]}
    assert left == {"p1", "p2"} - {killed[0].split("/")[1]}
    assert [e["fault"] for e in faults.status()["events"]] == ["kill-pods"]
    # The simulator's own answer names it and lacks nothing.
    sim_status = KubernetesClient.for_host(sim.url).get_json("/_sim/faults")
    assert sim_status["backend"] == "simulator" and sim_status["unsupported"] == {}


BAD_REQUESTS: list[tuple[str, str, Any, str]] = [
    ("POST", "/_sim/errors", b"{not json", "invalid JSON"),
    ("POST", "/_sim/errors", [1, 2], "body must be a JSON object"),
    ("POST", "/_sim/errors", {"verb": "destroy", "rate": 1}, "unknown verb 'destroy'"),
    ("POST", "/_sim/errors", {"verb": "get", "resource": "Pods!", "rate": 1}, "resource must be a lowercase plural"),
    ("POST", "/_sim/errors", {"verb": "get", "rate": 2}, "rate must be between 0 and 1"),
    ("POST", "/_sim/errors", {"verb": "get", "rate": 1, "code": 200}, "code must be an HTTP error status"),
    ("POST", "/_sim/errors", {"verb": "get", "rate": "often"}, "invalid parameter"),
    ("POST", "/_sim/latency", {"verb": "list", "ms": -5}, "ms must be between 0 and"),
    ("POST", "/_sim/latency", {"verb": "list", "ms": "NaN"}, "ms must be between 0 and"),
    ("POST", "/_sim/stall", {"seconds": 99999}, "seconds must be between 0 and 3600"),
    ("POST", "/_sim/pods/kill", {"count": -1, "namespace": "default"}, "count must not be negative"),
    ("POST", "/_sim/pods/kill", {"count": 1, "namespace": ["default"]}, "namespace must be a namespace name"),
]


@pytest.mark.parametrize("upstream_is_proxied", [True, False], ids=["fault-proxy", "simulator"])
def test_a_malformed_fault_request_is_a_400_that_changes_nothing(sim_upstream, proxy_in_front, upstream_is_proxied):
    sim, sim_kubeconfig = sim_upstream
    proxied = proxy_in_front(sim_kubeconfig)
    faults = proxied.faults() if upstream_is_proxied else None

    def send(method: str, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **(headers or {})}
        if upstream_is_proxied:
            code, _, answer = raw(proxied, path, method=method, body=data, headers=headers)
            return code, answer
        try:
            with urllib.request.urlopen(urllib.request.Request(sim.url + path, data=data, method=method,
                                                               headers=headers), timeout=10) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as err:
            return err.code, err.read()

    def state() -> Any:
        status = faults.status() if faults else KubernetesClient.for_host(sim.url).get_json("/_sim/faults")
        return {k: v for k, v in status.items() if k != "resourceVersion"}

    before = state()
    cases = [*BAD_REQUESTS, ("POST", "/_sim/stall", {"seconds": 1}, f"{ACTOR_HEADER} must be at most")]
    for method, path, body, message in cases:
        headers = {ACTOR_HEADER: "x" * 129} if message.startswith(ACTOR_HEADER) else None
        code, answer = send(method, path, body, headers)
        status = json.loads(answer)
        assert code == 400 and status["kind"] == "Status" and status["code"] == 400, (path, body, answer)
        assert message in status["message"], (path, body, status["message"])
    assert state() == before
    assert proxied.published == []
    code, answer = send("POST", "/_sim/nothing-here", {})
    assert code == 404 and "no fault endpoint POST /_sim/nothing-here" in json.loads(answer)["message"]


def test_a_watch_from_before_the_compaction_point_gets_the_410_error_event_as_the_api_server_sends_it(
        sim_upstream, proxy_in_front):
    sim, sim_kubeconfig = sim_upstream
    proxied = proxy_in_front(sim_kubeconfig)
    ns = make_namespace(sim)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    direct = KubernetesClient.for_host(sim.url)
    rv = direct.get_json(path)["metadata"]["resourceVersion"]
    direct.send_json("POST", path, configmap("after"))
    compacted = proxied.faults().compact_history()["compactedResourceVersion"]
    assert int(compacted) > int(rv)
    code, headers, body = raw(proxied, f"{path}?watch=1&resourceVersion={rv}&timeoutSeconds=5")
    assert code == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == {"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f"too old resource version: {rv} ({compacted})", "reason": "Expired", "code": 410}}
    # From the compaction point on, and from "now" (""/0), watches are forwarded.
    code, _, body = raw(proxied, f"{path}?watch=1&resourceVersion={compacted}&timeoutSeconds=1")
    assert code == 200 and b"ERROR" not in body


def test_the_proxy_stops_cleanly_and_ends_its_watches(tmp_path: Path, proxy_in_front):
    with SimCluster(port=0) as sim:
        proxied = proxy_in_front(sim.write_kubeconfig(tmp_path / "sim.yaml"))
        stream = proxied.client().list_watch("v1", "ConfigMap", "default").watch(resource_version="", timeout_seconds=60)
        wait_until(lambda: proxied.proxy.call(lambda: len(proxied.proxy.watches)) == 1, what="the watch")
        proxied.proxy.stop()
        # The events it had, then a clean end (iterating a broken stream raises).
        assert {e.type for e in stream} <= {"ADDED", "BOOKMARK"}
