"""CRDs: a new kind is served at once, with status/scale subresources and several versions;
leases for leader election (optimistic concurrency on PUT)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from controllers.sim import SimCluster

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "crons.demo.io"},
    "spec": {
        "group": "demo.io", "scope": "Namespaced",
        "names": {"plural": "crons", "singular": "cron", "kind": "Cron", "shortNames": ["cr"]},
        "versions": [
            {"name": "v1", "served": True, "storage": True,
             "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas",
                                                     "statusReplicasPath": ".status.replicas",
                                                     "labelSelectorPath": ".status.selector"}},
             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
            {"name": "v2", "served": True, "storage": False,
             "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}},
        ],
    },
}


@pytest.fixture(scope="module")
def crd_sim() -> Iterator[SimCluster]:
    cluster = SimCluster(port=0).start()
    yield cluster
    cluster.stop()


def test_crd_kind_is_served_with_status_scale_and_versions(crd_sim: SimCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.sim.conftest import api_client_for

    with api_client_for(crd_sim, tmp_path) as api:
        client.ApiextensionsV1Api(api).create_custom_resource_definition(CRD)
        names = [r.name for r in client.CustomObjectsApi(api).get_api_resources("demo.io", "v1").resources]
        assert names == ["crons", "crons/status", "crons/scale"]
        crons = client.CustomObjectsApi(api)
        created = crons.create_namespaced_custom_object("demo.io", "v1", "default", "crons", {
            "apiVersion": "demo.io/v1", "kind": "Cron", "metadata": {"name": "c"},
            "spec": {"replicas": 1}, "status": {"ignored": True}})
        assert "status" not in created and created["metadata"]["generation"] == 1
        crons.patch_namespaced_custom_object_status("demo.io", "v1", "default", "crons", "c",
                                                    {"status": {"replicas": 1, "selector": "app=c"}})
        scale = crons.patch_namespaced_custom_object_scale("demo.io", "v1", "default", "crons", "c",
                                                           {"spec": {"replicas": 4}})
        assert scale["spec"]["replicas"] == 4 and scale["status"] == {"replicas": 1, "selector": "app=c"}
        v2 = crons.get_namespaced_custom_object("demo.io", "v2", "default", "crons", "c")
        assert v2["apiVersion"] == "demo.io/v2" and v2["spec"]["replicas"] == 4
        assert v2["metadata"]["generation"] == 2
        rv = crons.list_namespaced_custom_object("demo.io", "v1", "default", "crons")["metadata"]["resourceVersion"]
        client.ApiextensionsV1Api(api).delete_custom_resource_definition("crons.demo.io")
        deleted = [e for e in crd_sim.call(lambda: list(crd_sim.store.history))
                   if e.key == ("demo.io", "crons") and e.rv > int(rv)]
        assert [(e.type, e.obj["metadata"]["name"]) for e in deleted] == [("DELETED", "c")]
        with pytest.raises(client.ApiException) as err:
            crons.list_namespaced_custom_object("demo.io", "v1", "default", "crons")
        assert err.value.status == 404


def test_lease_update_with_stale_resource_version_conflicts(crd_sim: SimCluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.sim.conftest import api_client_for

    with api_client_for(crd_sim, tmp_path) as api:
        leases = client.CoordinationV1Api(api)
        lease = leases.create_namespaced_lease("default", {"metadata": {"name": "leader"},
                                                           "spec": {"holderIdentity": "a",
                                                                    "leaseDurationSeconds": 15}})
        lease.spec.holder_identity = "b"
        won = leases.replace_namespaced_lease("leader", "default", lease)
        assert won.spec.holder_identity == "b"
        lease.spec.holder_identity = "c"  # still carries the RV "b" replaced
        with pytest.raises(client.ApiException) as err:
            leases.replace_namespaced_lease("leader", "default", lease)
        assert err.value.status == 409
