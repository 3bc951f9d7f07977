"""The Go samples against the simulator, as a user runs them: a client-go informer program (the
source document's, instrumented) and a controller-runtime reconciler, both publishing protocol v1.

kubectl changes show up in the informer's watch events, handler calls and cache; the reconciler's
queue, reconcile attempts and API writes are published per key; killing a Go worker leaves what it
published consistent, like a Python worker's.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from controllers.schema import PROTOCOL_VERSION
from controllers.telemetry.presence import read_publishers
from tests.conftest import wait_until
from tests.golang.telemetry import Published
from tests.sim.conftest import Kubectl

INFORMER = "w/go-informer/informer/apps_v1_Deployment"


def kubectl(kubeconfig: Path, home: Path, *args: str) -> str:
    return Kubectl.for_kubeconfig(kubeconfig, home).run(*args, timeout=30).stdout


@pytest.fixture
def published(redis_url: str, prefix: str):
    p = Published(redis_url, prefix)
    yield p
    p.close()


def test_the_informer_sample_shows_kubectl_changes_as_watch_events_handler_calls_and_cache(
        go_process, sim_kubeconfig, published, tmp_path):
    proc = go_process("deployment-informer", "--kubeconfig", str(sim_kubeconfig), "--worker-name", "go-informer")
    components = "w/go-informer/components"
    wait_until(lambda: published.state(components).get("informer/apps/v1/Deployment", {}).get("synced"),
               timeout=30, what="the Go informer to sync")
    worker = published.state(components)["worker/go-informer"]
    assert worker["runtime"] == "go" and worker["protocol"] == PROTOCOL_VERSION
    # Its presence entry (protocol/redis-layout.md, "Presence and retention"): alive, and this run's.
    # The entry is rewritten every 2 s, so the informer's topic may join its list a moment later.
    def run() -> dict:
        [entry] = [p for p in read_publishers(published.client, published.keys) if p["src"] == worker["publisher"]]
        return entry
    wait_until(lambda: INFORMER in run()["topics"], timeout=10, what="the Go worker's presence entry to list its informer")
    entry = run()
    assert entry["alive"] and entry["role"] == "worker" and entry["name"] == "go-informer", entry
    assert components in entry["topics"] and entry["stopped"] is None, entry

    kubectl(sim_kubeconfig, tmp_path, "create", "deployment", "web", "--image=nginx:1.27")
    wait_until(lambda: "default/web" in published.state(INFORMER), timeout=15, what="web in the Go informer's cache")
    kubectl(sim_kubeconfig, tmp_path, "scale", "deployment", "web", "--replicas=3")
    wait_until(lambda: any(r["type"] == "MODIFIED" and r["key"] == "default/web"
                           for r in published.records(INFORMER, "watch")), timeout=15, what="the scale as a watch event")
    kubectl(sim_kubeconfig, tmp_path, "delete", "deployment", "web")
    wait_until(lambda: "default/web" not in published.state(INFORMER), timeout=15, what="web to leave the cache")

    watch = [(r["type"], r["key"]) for r in published.records(INFORMER, "watch") if r["key"] == "default/web"]
    assert watch[0] == ("ADDED", "default/web") and watch[-1] == ("DELETED", "default/web"), watch
    handlers = [(r["event"], r["outcome"]) for r in published.records(INFORMER, "handler") if r["key"] == "default/web"]
    assert ("add", "ok") in handlers and ("update", "ok") in handlers and ("delete", "ok") in handlers, handlers
    # The handlers print, as in the source document.
    out = proc.output()
    assert "web" in out, out[-2000:]


def test_killing_a_go_worker_leaves_its_published_state_consistent(go_process, sim_kubeconfig, published, tmp_path):
    proc = go_process("deployment-informer", "--kubeconfig", str(sim_kubeconfig), "--worker-name", "go-informer")
    kubectl(sim_kubeconfig, tmp_path, "create", "deployment", "kept", "--image=nginx:1.27")
    wait_until(lambda: "default/kept" in published.state(INFORMER), timeout=30, what="kept in the cache")
    proc.proc.send_signal(signal.SIGKILL)
    proc.proc.wait(10)
    # No flush on the way out: the snapshot is still exact as of its last frame (frame.lua writes
    # both at once), and the worker stays listed with its last state until the page marks it stale.
    raw = published.client.hgetall(published.keys.snapshot(INFORMER))
    last = published.client.xrevrange(published.keys.stream(INFORMER), count=1)
    assert raw[b"__id__"] == last[0][0]
    assert "default/kept" in published.state(INFORMER)
    # A new run of the same worker rewrites its topics with reset frames (a new publisher id).
    go_process("deployment-informer", "--kubeconfig", str(sim_kubeconfig), "--worker-name", "go-informer")
    wait_until(lambda: _resets(published) >= 2, timeout=30, what="the restarted worker's reset frame")
    # Its reset frame may go out before its informer listed (then with an empty cache): the list
    # follows in the next frames.
    wait_until(lambda: "default/kept" in published.state(INFORMER), timeout=15, what="kept in the restarted cache")


def _resets(published: Published) -> int:
    rows = published.client.xrange(published.keys.stream(INFORMER))
    return sum(1 for _id, f in rows if f[b"f"].startswith(b'{"reset":true'))
