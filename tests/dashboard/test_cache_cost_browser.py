"""What an informer's cache costs (issue 31, item 5), measured in real headless Chromium: the cache
panel's "cost" button fetches a sample of the cached objects through a real object inspector (a
worker's Inspector answering from a real Store, over Redis and daphne) and computes their bytes as
JSON, the shares of managedFields and of annotations over 1 KiB, the objects per namespace from the
snapshot, and what a transform or a metadata-only informer would save.

A small cache is measured whole: the page's numbers are compared with the objects' compact JSON sizes
computed here. A cache larger than the sample is estimated from objects spread over it: within 10 %
of the truth for objects of similar size, its namespace counts exact.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from controllers.informers.store import Store
from controllers.telemetry.inspector import Inspector
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.dashboard.test_key_page_browser import screenshots
from tests.dashboard.test_panels_browser import close_page, open_controller_page

pytestmark = pytest.mark.browser

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def pod(ns: str, name: str, i: int) -> dict[str, Any]:
    manifest = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
                           "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.2.3",
                                                    "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(30)]}]}})
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": ns, "uid": f"uid-{ns}-{name}", "resourceVersion": str(1000 + i),
            "labels": {"app": "web"},
            # Every third object was made with kubectl apply: its whole manifest in an annotation.
            "annotations": {"team": "a", **({LAST_APPLIED: manifest} if i % 3 == 0 else {})},
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
                               "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": {"f:labels": {"f:app": {}}},
                                                                       "f:spec": {"f:containers": {'k:{"name":"app"}': {"f:image": {}}}}}}],
        },
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.2.3"}], "nodeName": f"node-{i % 4}"},
        "status": {"phase": "Running"},
    }


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def field(name: str, value: Any) -> int:
    return size(name) + 1 + size(value) + 1


@pytest.fixture
def worker(publisher_factory, redis_url, prefix):
    """Worker w1: controller podset watching informers pods (10 objects) and big (60), both in real
    Stores its Inspector answers from, their summaries published by a real TelemetryObserver."""
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1")
    stores = {"pods": Store("pods"), "big": Store("big")}
    objects: dict[str, list[dict[str, Any]]] = {"pods": [], "big": []}
    for informer, layout in (("pods", {"default": 7, "team-b": 3}), ("big", {"default": 30, "team-b": 20, "team-c": 10})):
        obs.on_informer(informer, fifo="DeltaFIFO", resync_period=0.0)
        i = 0
        for ns, n in layout.items():
            for _ in range(n):
                obj = pod(ns, f"web-{i:03d}", i)
                stores[informer].add(obj)
                obs.on_store(informer, op="upsert", key=f"{ns}/{obj['metadata']['name']}", obj=obj)
                objects[informer].append(obj)
                i += 1
        obs.on_list(informer, resource_version="2000", items=i, duration=0.01)
        obs.on_reflector_state(informer, state="synced")
    obs.on_controller("podset", watches=["pods", "big"], workers=1, started=True)
    pub.flush()
    inspector = Inspector(redis_url, prefix=prefix, worker="w1", last_updates=obs.last_updates, stores=lambda: stores).start()
    yield objects
    inspector.stop()


def measure(page, informer: str) -> dict[str, str]:
    page.select_option("#cache-informer", f"w/w1/informer/{informer}")
    page.wait_for_function(f"() => document.getElementById('cache-count').textContent === '{ {'pods': 10, 'big': 60}[informer] }'",
                           timeout=10_000)
    page.click("#cache-cost-btn")
    page.wait_for_selector('#cache-cost[data-state="done"]', timeout=30_000)
    return page.eval_on_selector("#cache-cost", "el => ({...el.dataset, text: el.innerText})")


def test_the_cache_cost_of_a_small_cache_is_measured_whole(browser, dashboard, worker, artifacts):
    objects = worker["pods"]
    page = open_controller_page(browser, dashboard)
    got = measure(page, "pods")
    total = sum(size(o) for o in objects)
    managed = sum(field("managedFields", o["metadata"]["managedFields"]) for o in objects)
    big = sum(field(LAST_APPLIED, o["metadata"]["annotations"][LAST_APPLIED]) for o in objects
              if LAST_APPLIED in o["metadata"]["annotations"])
    metadata_only = sum(size({"apiVersion": o["apiVersion"], "kind": o["kind"], "metadata": o["metadata"]}) for o in objects)
    assert (got["sampled"], got["count"]) == ("10", "10")
    assert int(got["bytes"]) == total and int(got["managed"]) == managed and int(got["bigAnnotations"]) == big
    assert int(got["metadataOnlySaves"]) == total - metadata_only
    assert "every object measured" in got["text"] and LAST_APPLIED in got["text"]
    assert "drop managedFields" in got["text"] and "metadata-only informer" in got["text"]
    assert page.eval_on_selector_all("#cache-cost .cost-ns li", "lis => lis.map(li => li.innerText)") == ["default 7", "team-b 3"]
    page.locator("#cache-panel").scroll_into_view_if_needed()
    screenshots(page, artifacts, "31-cache-cost", full_page=True)
    # A cached object's details link to its key's page under the controller.
    page.click("#cache-scroll .cache-row >> nth=0")
    href = page.get_attribute("#cache-details a.details-story", "href")
    assert href.endswith("/c/w1/podset/k/default/web-000"), href
    close_page(page)


def test_the_cache_cost_of_a_large_cache_is_estimated_from_a_sample(browser, dashboard, worker):
    objects = worker["big"]
    page = open_controller_page(browser, dashboard)
    got = measure(page, "big")
    total = sum(size(o) for o in objects)
    assert (got["sampled"], got["count"]) == ("24", "60")
    assert abs(int(got["bytes"]) - total) / total < 0.10, (got["bytes"], total)
    assert "measured on 24 objects" in got["text"] and "≈" in got["text"]
    namespaces = Counter(o["metadata"]["namespace"] for o in objects)
    shown = page.eval_on_selector_all("#cache-cost .cost-ns li", "lis => lis.map(li => li.innerText)")
    assert shown == [f"{ns} {n}" for ns, n in namespaces.most_common()]
    # Another informer, or closing it, puts the measurement away.
    page.click("#cache-cost .cost-close")
    assert page.is_hidden("#cache-cost")
    close_page(page)
