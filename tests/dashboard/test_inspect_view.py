"""GET /c/<worker>/informer/<informer>/object?key=: the object inspector over HTTP, against real
daphne, a real Redis and an Inspector thread answering from a real Store."""

from __future__ import annotations

import threading
import time

import orjson
import pytest
import redis
import requests

from controllers.informers.store import Store
from controllers.telemetry.inspector import Inspector
from controllers.telemetry.last_updates import LastUpdates
from controllers.telemetry.redisboot import free_port
from controllers.telemetry.streams import Keys
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.conftest import wait_until


def cm(rv: int, value: str) -> dict:
    return {"kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default", "resourceVersion": str(rv)},
            "data": {"k": value}}


@pytest.fixture
def worker(redis_url, prefix, publisher_factory):
    """Worker ``w1``: a TelemetryObserver (its components topic published) and a running Inspector."""
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker="w1", last_updates=LastUpdates())
    obs.on_informer("v1/ConfigMap", fifo="DeltaFIFO", resync_period=0.0)
    pub.flush()
    store = Store("v1/ConfigMap")
    inspector = Inspector(redis_url, prefix=prefix, worker="w1", last_updates=obs.last_updates,
                          stores=lambda: {"v1/ConfigMap": store}).start()
    client = redis.Redis.from_url(redis_url)
    wait_until(lambda: client.exists(Keys(prefix).inspect_alive("w1")), what="the inspector's heartbeat")
    client.close()
    yield obs, store, inspector
    inspector.stop()


def get(dashboard, key: str | None = "default/cfg", informer: str = "v1_ConfigMap", worker: str = "w1"):
    params = {} if key is None else {"key": key}
    resp = requests.get(f"{dashboard.url}/c/{worker}/informer/{informer}/object", params=params, timeout=10)
    return resp.status_code, resp.json()


def test_answers_the_object_and_the_pair_its_update_handler_received(dashboard, worker):
    obs, store, _ = worker
    store.add(cm(4, "old"))
    status, body = get(dashboard)
    assert status == 200 and body["current"]["data"] == {"k": "old"} and body["previous"] is None
    assert "no update seen since the worker started" in body["note"]
    store.add(cm(5, "new"))
    obs.on_handler("v1/ConfigMap", handler="controller/cfg", event="update", key="default/cfg", outcome="ok",
                   duration=0.001, old=cm(4, "old"), new=cm(5, "new"))
    status, body = get(dashboard)
    assert status == 200
    assert (body["current_rv"], body["previous_rv"]) == ("5", "4")
    assert body["current"]["data"] == {"k": "new"} and body["previous"]["data"] == {"k": "old"}
    assert body["update"]["handler"] == "controller/cfg" and body["update"]["at"] > 0 and body["update"]["new"] is None


@pytest.mark.parametrize(("informer", "key", "status", "says"), [
    ("v1_ConfigMap", "default/missing", 404, "is not in the v1/ConfigMap cache"),
    ("v1_Pod", "default/cfg", 404, "worker w1 has no informer v1_Pod (it has: v1/ConfigMap)"),
    ("bad name", "default/cfg", 404, "no such informer"),
    ("v1_ConfigMap", None, 400, "?key= must be namespace/name"),
    ("v1_ConfigMap", "default/a b", 400, "?key= must be namespace/name"),
])
def test_unknown_and_bad_requests_get_a_clear_error(dashboard, worker, informer, key, status, says):
    answered, body = get(dashboard, key, informer)
    assert answered == status and body["status"] == status and says in body["error"]


def test_a_stopped_worker_is_503_and_an_unknown_one_404(dashboard, worker):
    _, _, inspector = worker
    inspector.stop()
    status, body = get(dashboard)
    assert status == 503 and "worker w1 is not running" in body["error"]
    status, body = get(dashboard, worker="nobody")
    assert status == 404 and "no worker named nobody" in body["error"]


def test_a_silent_worker_is_504_after_at_most_two_seconds_and_blocks_no_other_request(dashboard, redis_url, prefix):
    client = redis.Redis.from_url(redis_url)
    client.set(Keys(prefix).inspect_alive("hung"), orjson.dumps({"informers": {"v1_ConfigMap": "v1/ConfigMap"}}),
               px=10_000)
    client.close()
    result: dict = {}

    def ask() -> None:
        started = time.monotonic()
        result["answer"] = get(dashboard, worker="hung")
        result["seconds"] = time.monotonic() - started

    asking = threading.Thread(target=ask)
    asking.start()
    time.sleep(0.3)  # the inspect request is waiting now
    started = time.monotonic()
    snapshot = requests.get(f"{dashboard.url}/c/hung/informer/v1_ConfigMap/snapshot.json", timeout=10)
    assert snapshot.status_code == 200 and time.monotonic() - started < 1.0, "other requests are not held up"
    asking.join(10)
    status, body = result["answer"]
    assert status == 504 and "worker hung did not answer within 2 s" in body["error"]
    assert 1.9 <= result["seconds"] < 3.5, result["seconds"]


def test_redis_down_is_503_and_the_view_needs_viewer_access(dashboard_factory):
    down = dashboard_factory(url=f"redis://127.0.0.1:{free_port()}")
    status, body = get(down)
    assert status == 503 and "Redis is unreachable" in body["error"]
    closed = dashboard_factory(CTRLSCOPE_ALLOW_ANONYMOUS="0")
    assert get(closed)[0] == 403
