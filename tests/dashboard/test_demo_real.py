"""`manage.py demo --real`: the whole demo on a real Kubernetes control plane, as a user runs it.

The demo starts `manage.py realcluster` as a child (the build is cached by the time this runs: the
session builds it once for every `realcluster` test, tests/conftest.py), relays its progress while it
waits, and runs the Python worker, the Go samples and the kopf operator against it with writes
allowed, all through a fault proxy (`manage.py faultproxy`) in front of it. The test checks what the
demo says, the flags each worker got, that the cluster really converged (summary ConfigMaps from
Python and Go, PodSets' pods Running on kwok nodes, a Deployment's ReplicaSet available), the page's
"realcluster" group in Chromium, and that Ctrl-C leaves nothing.
"""

from __future__ import annotations

import json
import signal

import orjson
import psutil
import pytest
import redis

from controllers import golang
from controllers.examples.podset import API_VERSION
from controllers.informers.http_client import KubernetesClient
from controllers.scenarios.base import KOPF_WORKER
from controllers.telemetry.streams import Keys
from dashboard.management.commands.demo import KOPF_SAMPLE_PODSET, REAL_CLUSTER_NAME, SAMPLE_PODSETS
from tests.conftest import wait_until
from tests.dashboard.test_demo import start_demo

pytestmark = [pytest.mark.realcluster, pytest.mark.browser]


def _owned_running(client: KubernetesClient, owner: dict) -> int:
    uid = owner["metadata"]["uid"]
    pods = client.get_json("/api/v1/namespaces/default/pods").get("items") or []
    return sum(1 for p in pods if (p.get("status") or {}).get("phase") == "Running"
               and any(ref.get("uid") == uid for ref in p["metadata"].get("ownerReferences") or []))


def test_demo_real_runs_the_whole_demo_on_a_real_control_plane(tmp_path, redis_url, prefix, browser):
    pytest.importorskip("controllers.realcluster", reason="the real control plane (controllers/realcluster) is not "
                                                          "in this checkout yet")
    if golang.find_go() is None:
        pytest.skip("no Go toolchain: the real control plane and the Go samples build with Go")
    # A cached control plane starts in ~30 s; the limit covers a cold build on a busy machine.
    demo = start_demo(tmp_path, redis_url, prefix, go=True, args=("--real",), timeout=3600)
    kubeconfig = tmp_path / "kubeconfig-real.yaml"
    children = psutil.Process(demo.proc.pid).children(recursive=True)
    try:
        out = "".join(demo.lines)
        lines = [line.rstrip("\n") for line in demo.lines]
        start = next(i for i, line in enumerate(lines) if line.startswith("cluster:   starting a real Kubernetes"))
        ready = next(i for i, line in enumerate(lines) if line.startswith(f"cluster:   real ({REAL_CLUSTER_NAME})"))
        relayed = [line for line in lines[start + 1:ready] if line.startswith("cluster:   ")]
        assert relayed, "the control plane's progress lines were not relayed:\n" + out
        assert "writes:    allowed (--allow-writes): this control plane is local and disposable" in out, out
        proxied = tmp_path / "kubeconfig-faultproxy.yaml"
        assert f"faults:    through a fault proxy in front of it (manage.py faultproxy; its kubeconfig {proxied})" \
            in out, out
        assert "simulated" not in lines[ready], out

        cmdlines = [" ".join(c.cmdline()) for c in children]
        assert any("realcluster --kubeconfig " + str(kubeconfig) in c for c in cmdlines), cmdlines
        assert any(f"faultproxy --upstream-kubeconfig {kubeconfig} --kubeconfig {proxied}" in c
                   for c in cmdlines), cmdlines
        assert not any("simcluster" in c for c in cmdlines), cmdlines
        for program in ("runcontrollers", "runkopf", "deployment-summary"):
            mine = [c for c in cmdlines if program in c]
            assert mine and all("--allow-writes" in c for c in mine), (program, mine)
            # Every runtime reads the cluster through the fault proxy, so the faults reach it.
            assert all(f"--kubeconfig {proxied}" in c for c in mine), (program, mine)
        for program in ("runcontrollers", "runkopf"):
            assert all(f"--cluster-name {REAL_CLUSTER_NAME}" in c for c in cmdlines if program in c), cmdlines
        assert json.loads((tmp_path / "demo.json").read_text())["kubeconfig"] == str(proxied)

        # The real cluster converges under all three runtimes.
        client = KubernetesClient.from_kubeconfig(str(kubeconfig))
        for name in ("web-summary", "web-go-summary"):
            wait_until(lambda name=name: _exists(client, f"/api/v1/namespaces/default/configmaps/{name}"),
                       timeout=120, what=f"ConfigMap {name}, written by a summary reconciler")
        for name in (*SAMPLE_PODSETS, KOPF_SAMPLE_PODSET):
            path = f"/apis/{API_VERSION}/namespaces/default/podsets/{name}"
            wait_until(lambda path=path: _owned_running(client, client.get_json(path)) >= 3, timeout=180,
                       what=f"PodSet {name}'s 3 pods Running on the kwok nodes")
        wait_until(lambda: (client.get_json("/apis/apps/v1/namespaces/default/deployments/web").get("status") or {})
                   .get("availableReplicas") == 3, timeout=180, what="Deployment web 3/3 available (a real ReplicaSet)")

        r = redis.Redis.from_url(redis_url)
        try:
            for worker in ("demo", KOPF_WORKER):
                def entry(worker=worker):
                    raw = r.hget(Keys(prefix).snapshot(f"w/{worker}/components"), f"cluster/{REAL_CLUSTER_NAME}")
                    return orjson.loads(raw) if raw else None
                got = wait_until(entry, timeout=30, what=f"{worker}'s cluster entry")
                assert got.get("writes", "allowed") == "allowed" and got.get("simulated") is not True, got
        finally:
            r.close()

        page = browser.new_page()
        try:
            page.goto(demo.url + "/")
            group = f'#overview .cluster[data-cluster="{REAL_CLUSTER_NAME}"]'
            page.wait_for_selector(f'{group} .worker[data-worker="demo"] .ctl-card[data-controller="deployment-summary"]',
                                   timeout=30_000)
            assert page.inner_text(f'{group} .worker[data-worker="demo"] .badge.writes') == "acting"
        finally:
            page.close()
    finally:
        demo.proc.send_signal(signal.SIGINT)
        rest, _ = demo.proc.communicate(timeout=180)
    assert demo.proc.returncode == 0, "".join(demo.lines) + rest
    assert "demo stopped." in rest
    _, alive = psutil.wait_procs(children, timeout=30)
    assert not alive, [" ".join(p.cmdline()) for p in alive]
    assert not kubeconfig.exists(), "the control plane's kubeconfig outlived it"
    assert not (tmp_path / "kubeconfig-faultproxy.yaml").exists(), "the fault proxy's kubeconfig outlived it"
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert not leftovers, [" ".join(p.info["cmdline"]) for p in leftovers]


def _exists(client: KubernetesClient, path: str) -> bool:
    from controllers.informers import ApiError

    try:
        client.get_json(path)
    except ApiError as exc:
        if exc.code == 404:
            return False
        raise
    return True
