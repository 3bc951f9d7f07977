"""A silent watch on the real control plane (issue 31): the Python runtime watches ConfigMaps of its
namespace on a real kube-apiserver through ``manage.py faultproxy``, while the test changes one every
0.2 s straight on the API server. Events flow, so no watch is silent; then the proxy stalls (every
response and watch stream held, nothing closed: a network that silently stopped delivering) and the
informer is flagged ``watch_silent`` within the threshold (``CTRLSCOPE_DETECT_SILENT_AFTER``) plus a
flush; when the stall ends the held events arrive and close it. The simulator's version is
tests/telemetry/test_detections_runtime.py; the real server sends bookmarks only about once a
minute, so here the changes keep the watch busy instead.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.reconcile import Manager
from controllers.schema import FindingKind, TopicKind
from controllers.sim.faults_client import SimFaults
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.conftest import wait_until
from tests.dashboard.test_faults_proxy_browser import proxy_kubeconfig  # noqa: F401  (manage.py faultproxy)
from tests.golang.telemetry import Published

pytestmark = pytest.mark.realcluster

SILENT_AFTER = 2.0
STALL = 6.0


def test_a_stalled_watch_through_the_fault_proxy_is_flagged_silent_and_closes_when_it_flows_again(
        realcluster, real_namespace: str, proxy_kubeconfig: Path, publisher_factory,  # noqa: F811
        redis_url: str, prefix: str, monkeypatch) -> None:
    monkeypatch.setenv("CTRLSCOPE_DETECT_SILENT_AFTER", str(SILENT_AFTER))
    direct = KubernetesClient.from_kubeconfig(str(realcluster.kubeconfig))
    path = f"/api/v1/namespaces/{real_namespace}/configmaps"
    direct.send_json("POST", path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "tick"}})
    telemetry = TelemetryObserver(publisher_factory().start(), worker="detect-real")
    manager = Manager(KubernetesClient.from_kubeconfig(str(proxy_kubeconfig)), observer=telemetry,
                      freeze_gc_after_sync=False, namespace=real_namespace)
    informer = manager.informer_for("v1", "ConfigMap")
    manager.new_controller("quiet", lambda request: None).watch(informer)
    published = Published(redis_url, prefix)
    topic = telemetry.topic(TopicKind.INFORMER, informer.name)
    stop = threading.Event()

    def tick() -> None:  # a change every 0.2 s, made on the API server itself, not through the proxy
        n = 0
        while not stop.wait(0.2):
            n += 1
            direct.send_json("PATCH", f"{path}/tick", {"data": {"n": str(n)}},
                             headers={"Content-Type": "application/merge-patch+json"})

    def silent() -> list[dict[str, Any]]:
        return [r for r in published.records(topic, "finding") if r["finding"] == FindingKind.WATCH_SILENT]

    ticker = threading.Thread(target=tick, daemon=True)
    try:
        manager.start()
        ticker.start()
        wait_until(lambda: len(published.records(topic, "watch")) >= 10, timeout=30, what="watch events through the proxy")
        time.sleep(SILENT_AFTER + 1)
        assert silent() == [], "a watch that delivers an event every 0.2 s is not silent"
        asked = time.time() * 1000
        SimFaults(KubernetesClient.from_kubeconfig(str(proxy_kubeconfig))).stall(STALL)
        stalled = time.time() * 1000
        opened = wait_until(lambda: [r for r in silent() if r["open"]], timeout=SILENT_AFTER + 4,
                            interval=0.1, what="watch_silent")[0]
        closed = wait_until(lambda: [r for r in silent() if not r["open"]], timeout=STALL + 15, interval=0.2,
                            what="watch_silent to close when the stall ends")[0]
        events_after = len(published.records(topic, "watch"))
    finally:
        stop.set()
        ticker.join(5)
        manager.stop()
        published.close()

    assert opened["subject"] == informer.name and opened["count"] == 1
    # Silent since the last event before the stall took effect, flagged SILENT_AFTER later (+ a flush).
    assert asked - 1000 <= opened["since"] <= stalled
    assert opened["since"] + SILENT_AFTER * 1000 <= opened["ts"] <= stalled + (SILENT_AFTER + 2) * 1000
    assert f"{SILENT_AFTER:g} s" in opened["message"]
    # The stall ends: the held events arrive (none lost: the informer went on from where it was) and close it.
    assert closed["ts"] >= asked + (STALL - 0.5) * 1000 and closed["since"] == opened["since"]
    assert events_after > 10
