"""A careless reconciler leaks nothing: a Secret's value that it puts in its error, a status row and
a ConfigMap reaches Redis (streams, snapshots, every key) and the inspector's answers 0 times, raw or
base64, while the masks show where it would have been. The simulator over HTTP, a real Redis, the
runtime's Manager with the telemetry a worker runs."""

from __future__ import annotations

import base64
from collections.abc import Iterator

import pytest
import redis

from controllers.informers.http_client import KubernetesClient
from controllers.reconcile import Manager, Request, Result
from controllers.schema import topic_part
from controllers.telemetry.inspector import Inspector, ask
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.streams import Keys
from controllers.telemetry.telemetry_observer import TelemetryObserver
from tests.conftest import wait_until

sim_server = pytest.importorskip("controllers.sim.server", reason="the simulator is not available")

PASSWORD = "s3cr3t-Passw0rd-for-db"
ENCODED = base64.b64encode(PASSWORD.encode()).decode()
NS = "/api/v1/namespaces/default"


@pytest.fixture
def sim() -> Iterator[object]:
    cluster = sim_server.SimCluster(port=0, control_plane=False).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def every_value(client: redis.Redis, prefix: str) -> bytes:
    """Every byte stored under ``prefix``: stream entries, hashes, strings, lists, sets."""
    out: list[bytes] = []
    for key in client.scan_iter(match=prefix + "*", count=1000):
        kind = client.type(key)
        if kind == b"stream":
            out += [v for _, fields in client.xrange(key) for v in fields.values()]
        elif kind == b"hash":
            out += [k + v for k, v in client.hgetall(key).items()]
        elif kind == b"string":
            out.append(client.get(key) or b"")
        elif kind == b"list":
            out += client.lrange(key, 0, -1)
        elif kind == b"set":
            out += list(client.smembers(key))
    return b"\n".join(out)


def test_a_careless_reconciler_leaks_no_secret_value(sim, redis_url, prefix):
    client = KubernetesClient.for_host(sim.url)
    client.send_json("POST", f"{NS}/secrets", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db"},
                                               "data": {"password": ENCODED}})
    publisher = RedisPublisher(redis_url, prefix=prefix, name="careless-test").start()
    telemetry = TelemetryObserver(publisher, worker="careless")
    manager = Manager(client, observer=telemetry)
    secrets = manager.informer_for("v1", "Secret", "default")
    configmaps = manager.informer_for("v1", "ConfigMap", "default")

    def reconcile(request: Request) -> Result:
        # What real controllers do: read the Secret, copy a value somewhere, and fail loudly with it.
        secret = client.get_json(f"{NS}/secrets/{request.name}")
        password = base64.b64decode(secret["data"]["password"]).decode()
        if configmaps.store.get_by_key("default/copied") is None:
            client.send_json("POST", f"{NS}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                                                          "metadata": {"name": "copied"},
                                                          "data": {"dsn": f"postgres://app:{password}@db/app"}})
        telemetry.on_status("logins", key=f"{request.namespace}/{request.name}", value={"note": f"tried password={password}"})
        raise RuntimeError(f"login refused for password={password} (base64 {secret['data']['password']})")

    manager.new_controller("careless", reconcile).watch(secrets)
    inspector = Inspector(redis_url, prefix=prefix, worker="careless", last_updates=telemetry.last_updates,
                          stores=lambda: {i.name: i.store for i in manager.factory.informers()}).start()
    manager.start()
    r = redis.Redis.from_url(redis_url)
    try:
        topic = telemetry.topic("controller", "careless")
        wait_until(lambda: (publisher.state_value(topic, "default/db") or {}).get("attempts", 0) >= 3,
                   timeout=20, what="three failed reconciles")
        wait_until(lambda: configmaps.store.get_by_key("default/copied") is not None, what="the copied ConfigMap")
        wait_until(lambda: r.get(Keys(prefix).inspect_alive("careless")), what="the inspector's heartbeat")
        answers = [ask(r, Keys(prefix), worker="careless", informer=topic_part(informer.name), key=key, timeout=5)
                   for informer, key in ((configmaps, "default/copied"), (secrets, "default/db"))]
        publisher.flush()
        stored = every_value(r, prefix)
    finally:
        manager.stop()
        inspector.stop()
        publisher.stop()
        r.close()
    assert [a.status for a in answers] == [200, 200], [a.body[:200] for a in answers]
    everything = stored + b"".join(a.body for a in answers)
    for form in (PASSWORD, ENCODED, ENCODED.rstrip("=")):
        assert everything.count(form.encode()) == 0, f"{form!r} reached Redis or the inspector"
    mask = b"<redacted: Secret default/db password>"
    assert stored.count(mask) >= 3, "the error texts and the status row were published, masked"
    assert mask in answers[0].body, "the ConfigMap that copied the value is shown with the mask"
