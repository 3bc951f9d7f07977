"""One script of faults, played through a fault proxy against ctrlscope's Python informer.

The same script runs with the simulator and with the real control plane as the upstream: the
informer reads through the proxy, the test writes straight to the upstream (``direct``), so only the
informer's side of the connection is broken, as when a network or an API server fails one client.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from controllers.informers import ApiError, Backoff, DeletedFinalStateUnknown, SharedInformer
from controllers.informers.http_client import USER_AGENT, KubernetesClient
from tests.conftest import wait_until
from tests.faultproxy.conftest import Proxied


def configmap(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"k": name}}


def requests_of(counts: dict[str, Any], user_agent: str, verb: str, resource: str) -> int:
    return sum(r["count"] for r in counts["requests"]
               if r["userAgent"] == user_agent and r["verb"] == verb and r["resource"] == resource)


def informer_survives_every_fault(proxied: Proxied, direct: KubernetesClient, namespace: str) -> list[str]:
    """End, drop, 410 after a compaction, errors, a stall and latency, each as the informer sees it;
    returns the faults the proxy published, in order."""
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    faults = proxied.faults().as_actor("test")
    client = proxied.client()
    informer = SharedInformer(client.list_watch("v1", "ConfigMap", namespace))
    informer.reflector.backoff = Backoff(initial=0.05, cap=0.2, jitter=0.0)
    deleted: list[Any] = []
    informer.add_event_handler(on_delete=deleted.append)
    keys = informer.store.list_keys

    def api_keys() -> set[str]:
        return {f"{namespace}/{o['metadata']['name']}" for o in direct.get_json(path)["items"]}

    def lists() -> int:
        return requests_of(faults.requests(), USER_AGENT, "list", "configmaps")

    direct.send_json("POST", path, configmap("a"))
    informer.start()
    try:
        assert informer.wait_for_sync(30)
        assert f"{namespace}/a" in keys()

        # End: the watch closes cleanly and resumes from its last resourceVersion, no relist. (A
        # watch that ended within a second with no event would be relisted, as client-go does.)
        direct.send_json("POST", path, configmap("b"))
        wait_until(lambda: f"{namespace}/b" in keys(), timeout=15, what="b")
        assert faults.end_watches()["closed"] >= 1
        direct.send_json("POST", path, configmap("c"))
        wait_until(lambda: f"{namespace}/c" in keys(), timeout=15, what="c after the watch ended")
        # Drop: a broken connection, a new watch from the last resourceVersion, no relist either.
        assert faults.drop_watches()["closed"] >= 1
        direct.send_json("POST", path, configmap("d"))
        wait_until(lambda: f"{namespace}/d" in keys(), timeout=15, what="d after the watch dropped")
        assert informer.reflector.lists == 1

        # 410: the re-watch is held back, a delete and a compaction happen in the gap; the watch from
        # the old resourceVersion expires, the informer relists and learns of the delete by a tombstone.
        faults.latency(verb="watch", resource="configmaps", ms=1500)
        faults.drop_watches()
        direct.send_json("DELETE", f"{path}/a")
        compacted = faults.compact_history()["compactedResourceVersion"]
        assert int(compacted) > 0
        faults.clear_latency()
        wait_until(lambda: deleted, timeout=20, what="the tombstone of a")
        assert isinstance(deleted[0], DeletedFinalStateUnknown) and deleted[0].key == f"{namespace}/a"
        assert informer.reflector.lists == 2

        # Errors: every list fails, so the relist after the next 410 keeps failing until the rule goes.
        faults.errors(verb="list", resource="configmaps", rate=1.0, code=500)
        with pytest.raises(ApiError) as refused:
            client.get_json(path)
        assert refused.value.code == 500 and "injected fault: list configmaps failed (500)" in str(refused.value)
        before = lists()
        faults.latency(verb="watch", resource="configmaps", ms=1500)
        faults.drop_watches()
        direct.send_json("POST", path, configmap("e"))
        faults.compact_history()
        faults.clear_latency()
        wait_until(lambda: lists() >= before + 3, timeout=20, what="failing relists")
        assert f"{namespace}/e" not in keys()
        faults.clear_errors()
        wait_until(lambda: keys() and set(keys()) == api_keys(), timeout=20, what="the cache to equal the API")

        # Stall: the watch stays open and silent; its event arrives once the stall is over.
        watches = requests_of(faults.requests(), USER_AGENT, "watch", "configmaps")
        faults.stall(1.5)
        started = time.monotonic()
        direct.send_json("POST", path, configmap("f"))
        wait_until(lambda: f"{namespace}/f" in keys(), timeout=15, what="f after the stall")
        assert time.monotonic() - started >= 1.2
        assert requests_of(faults.requests(), USER_AGENT, "watch", "configmaps") == watches, "the stall closed the watch"

        # Latency: the matching requests wait, others do not.
        faults.latency(verb="get", resource="configmaps", ms=400)
        started = time.monotonic()
        client.get_json(f"{path}/b")
        assert time.monotonic() - started >= 0.4
        started = time.monotonic()
        client.get_json(path)
        assert time.monotonic() - started < 0.4
        faults.clear_latency()
        assert set(keys()) == api_keys()
    finally:
        informer.stop()
    return [e["fault"] for e in proxied.published]
