"""Faults on the ``cluster/faults`` topic: a real simulator over HTTP, a real Redis, the real command."""

from __future__ import annotations

import json
import os
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from controllers.sim import SimCluster
from controllers.telemetry.fault_telemetry import MAX_LIST_ITEMS, TOPIC, FaultTelemetry
from controllers.telemetry.redisboot import free_port
from tests.conftest import wait_until
from tests.sim.conftest import FAST, simcluster_command, terminate
from tests.telemetry.test_publisher import read_snapshot, read_stream


def sim_post(url: str, path: str, body: dict[str, Any] | None = None, method: str = "POST",
             actor: str = "") -> dict[str, Any]:
    headers = {"Content-Type": "application/json", **({"X-Ctrlscope-Actor": actor} if actor else {})}
    req = urllib.request.Request(url + path, data=json.dumps(body or {}).encode(), method=method, headers=headers)
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


def records(redis_url: str, prefix: str) -> list[dict[str, Any]]:
    return [r for _, frame in read_stream(redis_url, prefix, TOPIC) for r in frame["r"]]


def test_each_fault_is_a_record_and_the_state_is_the_rules_it_left(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    telemetry = FaultTelemetry(pub)
    with SimCluster(port=0, **FAST) as sim:
        sim.call(lambda: telemetry.attach(sim.faults, url=sim.url))
        sim_post(sim.url, "/_sim/errors", {"verb": "create", "resource": "pods", "rate": 0.5, "code": 503})
        sim_post(sim.url, "/_sim/latency", {"verb": "list", "resource": "*", "ms": 200})
        sim_post(sim.url, "/_sim/kubelet/pause", actor="alice")
        sim_post(sim.url, "/_sim/watches/drop")
        pub.flush()
        got = records(redis_url, prefix)
        assert [r["fault"] for r in got] == ["errors", "latency", "kubelet-pause", "drop-watches"]
        assert [r["by"] for r in got] == ["", "", "alice", ""]
        assert got[0]["params"] == {"verb": "create", "resource": "pods", "rate": 0.5, "code": 503}
        assert got[3]["params"] == {"count": 0} and got[3]["k"] == "fault"
        assert all(r["time"].endswith("Z") and r["rv"] and r["ts"] > 0 for r in got)
        _, state = read_snapshot(redis_url, prefix, TOPIC)
        assert state["simulator"]["url"] == sim.url and state["simulator"]["running"]
        assert state["rules"] == {"errors": [{"verb": "create", "resource": "pods", "rate": 0.5, "code": 503}],
                                  "latency": [{"verb": "list", "resource": "*", "ms": 200.0}], "kubeletPaused": True,
                                  "stalledFor": 0.0}
        sim_post(sim.url, "/_sim/errors", method="DELETE")
        sim_post(sim.url, "/_sim/reset")
        pub.flush()
        assert [r["fault"] for r in records(redis_url, prefix)][-2:] == ["errors-cleared", "reset"]
        assert read_snapshot(redis_url, prefix, TOPIC)[1]["rules"] == {"errors": [], "latency": [], "kubeletPaused": False, "stalledFor": 0.0}
        sim.call(telemetry.detach)
    pub.flush()
    _, state = read_snapshot(redis_url, prefix, TOPIC)
    assert "rules" not in state and not state["simulator"]["running"] and state["simulator"]["stopped"]


def test_a_fault_with_many_victims_is_published_bounded(publisher_factory, redis_url, prefix):
    pub = publisher_factory()
    victims = [f"default/p{i}" for i in range(MAX_LIST_ITEMS + 30)]
    FaultTelemetry(pub)({"type": "fault", "fault": "kill-pods", "params": {"count": 50, "killed": victims},
                         "time": "2026-01-01T00:00:00Z", "resourceVersion": "7"})
    pub.flush()
    (record,) = records(redis_url, prefix)
    assert record["params"]["killed"] == victims[:MAX_LIST_ITEMS] and record["params"]["killedTotal"] == 50


def test_faults_never_wait_for_an_unreachable_redis(publisher_factory):
    pub = publisher_factory(url=f"redis://127.0.0.1:{free_port()}/0").start()
    telemetry = FaultTelemetry(pub)
    with SimCluster(port=0, **FAST) as sim:
        sim.call(lambda: telemetry.attach(sim.faults, url=sim.url))
        t0 = time.monotonic()
        for _ in range(20):
            sim_post(sim.url, "/_sim/history/compact")
        took = time.monotonic() - t0
    assert took < 1.0, f"20 faults took {took:.2f} s with Redis down"
    assert not pub.connected and len(pub._buffer) == 20  # buffered for when Redis is back


def test_simcluster_command_publishes_faults_and_withdraws_the_rules_when_it_stops(tmp_path: Path, redis_url, prefix):
    kubeconfig = tmp_path / "kc.yaml"
    env = {**os.environ, "CTRLSCOPE_DEMO": "1", "PYTHONUNBUFFERED": "1", "REDIS_URL": redis_url,
           "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_RUN_DIR": str(tmp_path)}
    with simcluster_command("--kubeconfig", str(kubeconfig), env=env) as proc:
        assert proc.stdout is not None
        lines = [proc.stdout.readline() for _ in range(3)]
        assert f"faults published to topic {TOPIC}" in lines[2], lines
        url = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
        sim_post(url, "/_sim/errors", {"verb": "*", "resource": "configmaps", "rate": 1.0, "code": 500})
        wait_until(lambda: [r["fault"] for r in records(redis_url, prefix)] == ["errors"], timeout=5,
                   what="the fault record")
        rules = wait_until(lambda: read_snapshot(redis_url, prefix, TOPIC)[1].get("rules", {}).get("errors"), timeout=5)
        assert rules == [{"verb": "*", "resource": "configmaps", "rate": 1.0, "code": 500}]
        _, err = terminate(proc)
    assert proc.returncode == 0, err
    _, state = read_snapshot(redis_url, prefix, TOPIC)
    assert "rules" not in state and state["simulator"]["url"] == url and not state["simulator"]["running"]
