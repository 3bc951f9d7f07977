"""The simulated control plane: deployments roll out through replica sets to pods a kubelet runs,
with pod phases driven by an injected FakeClock (no sleeping on kubelet delays)."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client

from controllers.clock import FakeClock
from controllers.sim import SimCluster
from tests.sim.conftest import api_client_for, eventually


def _deployment(image: str, replicas: int = 2) -> dict:
    return {"metadata": {"name": "web"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def test_pod_phases_follow_the_injected_clock(tmp_path: Path) -> None:
    clock = FakeClock()
    with SimCluster(port=0, clock=clock, schedule_delay=1.0, start_delay=5.0) as sim, \
            api_client_for(sim, tmp_path) as api:
        v1 = client.CoreV1Api(api)
        v1.create_namespaced_pod("default", {"metadata": {"name": "p"},
                                             "spec": {"containers": [{"name": "c", "image": "i"}]}})
        assert v1.read_namespaced_pod("p", "default").status.phase == "Pending"
        clock.step(1.0)
        waiting = eventually(lambda: v1.read_namespaced_pod("p", "default").status.container_statuses)
        assert waiting[0].state.waiting.reason == "ContainerCreating"
        assert v1.read_namespaced_pod("p", "default").spec.node_name == "sim-node-1"
        clock.step(4.9)
        assert v1.read_namespaced_pod("p", "default").status.phase == "Pending"
        clock.step(0.2)
        pod = eventually(lambda: (p := v1.read_namespaced_pod("p", "default")).status.phase == "Running" and p)
        assert pod.status.container_statuses[0].ready and pod.status.pod_ip
        assert any(c.type == "Ready" and c.status == "True" for c in pod.status.conditions)


def test_deployment_rollout_replaces_replica_set_and_pods(sim: SimCluster, api: client.ApiClient, ns: str) -> None:
    v1, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    apps.create_namespaced_deployment(ns, _deployment("app:1"))
    eventually(lambda: (apps.read_namespaced_deployment("web", ns).status.ready_replicas or 0) == 2)
    first_rs = [rs.metadata.name for rs in apps.list_namespaced_replica_set(ns).items]
    apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "image": "app:2"}]}}}})

    def rolled() -> bool:
        d = apps.read_namespaced_deployment("web", ns)
        pods = v1.list_namespaced_pod(ns).items
        return (d.status.observed_generation == 2 and d.status.updated_replicas == 2
                and (d.status.ready_replicas or 0) == 2 and len(pods) == 2
                and all(p.spec.containers[0].image == "app:2" for p in pods))

    eventually(rolled)
    sets = {rs.metadata.name: rs.spec.replicas for rs in apps.list_namespaced_replica_set(ns).items}
    assert sets[first_rs[0]] == 0 and len(sets) == 2
    pod = v1.list_namespaced_pod(ns).items[0]
    owner = pod.metadata.owner_references[0]
    assert owner.kind == "ReplicaSet" and owner.controller and owner.name != first_rs[0]


def test_state_file_survives_restart_and_old_watches_get_410(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    with SimCluster(port=0, state_file=state, start_delay=0.05, schedule_delay=0.02) as sim, \
            api_client_for(sim, tmp_path) as api:
        v1 = client.CoreV1Api(api)
        v1.create_namespaced_config_map("default", {"metadata": {"name": "kept"}, "data": {"a": "1"}})
        from tests.sim.test_sim_crd import CRD

        client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)
        client.CustomObjectsApi(api).create_namespaced_custom_object("demo.io", "v1", "default", "crons", {
            "apiVersion": "demo.io/v1", "kind": "Cron", "metadata": {"name": "saved"}, "spec": {"replicas": 1}})
        old_rv = v1.list_namespaced_config_map("default").metadata.resource_version
    assert state.exists()
    with SimCluster(port=0, state_file=state) as sim, api_client_for(sim, tmp_path) as api:
        v1 = client.CoreV1Api(api)
        listed = v1.list_namespaced_config_map("default")
        assert [c.metadata.name for c in listed.items] == ["kept", "kube-root-ca.crt"]  # published, as on a real cluster
        crons = client.CustomObjectsApi(api).list_namespaced_custom_object("demo.io", "v1", "default", "crons")
        assert [c["metadata"]["name"] for c in crons["items"]] == ["saved"]
        assert int(listed.metadata.resource_version) >= int(old_rv)
        import urllib.request

        body = urllib.request.urlopen(
            f"{sim.url}/api/v1/namespaces/default/configmaps?watch=true&resourceVersion={int(old_rv) - 1}"
            "&timeoutSeconds=1", timeout=5).read()
        assert b'"code":410' in body


def test_deleted_pod_terminates_gracefully_then_disappears(tmp_path: Path) -> None:
    clock = FakeClock()
    with SimCluster(port=0, clock=clock, schedule_delay=0.0, start_delay=1.0) as sim, \
            api_client_for(sim, tmp_path) as api:
        v1 = client.CoreV1Api(api)
        for name in ("graceful", "forced"):
            v1.create_namespaced_pod("default", {"metadata": {"name": name},
                                                 "spec": {"containers": [{"name": "c", "image": "i"}]}})
        clock.step(0.1)
        eventually(lambda: all(v1.read_namespaced_pod(n, "default").spec.node_name for n in ("graceful", "forced")))
        clock.step(1.0)
        eventually(lambda: v1.read_namespaced_pod("graceful", "default").status.phase == "Running")
        deleted = v1.delete_namespaced_pod("graceful", "default")
        assert deleted.metadata.deletion_timestamp is not None and deleted.metadata.deletion_grace_period_seconds == 30
        assert v1.read_namespaced_pod("graceful", "default").metadata.deletion_timestamp is not None
        v1.delete_namespaced_pod("forced", "default", grace_period_seconds=0)
        names = {p.metadata.name for p in v1.list_namespaced_pod("default").items}
        assert names == {"graceful"}, "grace period 0 removes at once"
        clock.step(1.0)
        eventually(lambda: not v1.list_namespaced_pod("default").items)
        reasons = [e.reason for e in v1.list_namespaced_event("default").items
                   if e.involved_object.name == "graceful"]
        assert reasons[:1] == ["Scheduled"] and "Killing" in reasons
