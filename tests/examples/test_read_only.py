"""Read-only by default against real clusters, end to end: the example worker command, real kubectl,
Redis, and an API server that is not the simulator.

The "real cluster" is the simulator behind a recording reverse proxy that answers ``/version`` as a
real API server does (a commit hash, not ``ctrlscope-sim``) and logs every request it forwards. So
the worker sees a cluster it must not change, and the log shows what reached it: with no flag, no
write does (the reconciler's ConfigMap is never created, its Reconcile ends terminal -- once, not
retried -- with the read-only error, the refused write is published as refused, the worker's
cluster entry says read-only); with ``--allow-writes`` the same worker acts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import aiohttp
import orjson
import pytest
import redis
import yaml
from aiohttp import web

from controllers.process import stop_process
from controllers.sim import SimCluster
from controllers.telemetry.streams import Keys
from tests.conftest import ROOT, wait_until
from tests.examples.test_deployments_end_to_end import DEPLOYMENT
from tests.sim.conftest import FAST, KUBECTL, Kubectl

pytestmark = pytest.mark.kubectl

REAL_COMMIT = "5a0f4a7e63b8b2f9c4d1c0e9f4b7a6d5c3e2f1a0"
HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length", "content-encoding", "host"}


class RecordingProxy:
    """A reverse proxy on loopback that streams every request to ``upstream`` (watches included)
    and records ``(method, path)``; its ``/version`` says it is not the simulator, and it has no
    ``/_sim/`` fault API (404, as a real API server answers)."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.requests: list[tuple[str, str]] = []
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recording-proxy", daemon=True)

    def start(self) -> RecordingProxy:
        self._thread.start()
        assert self._ready.wait(10), "the recording proxy did not start"
        return self

    def writes(self) -> list[tuple[str, str]]:
        return [r for r in list(self.requests) if r[0] not in ("GET", "HEAD", "OPTIONS")]

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._loop.run_forever()

    async def _serve(self) -> None:
        self._session = aiohttp.ClientSession(auto_decompress=False, timeout=aiohttp.ClientTimeout(total=None))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        # A forwarded watch whose client has gone only notices when the simulator next sends something,
        # which on a quiet cluster may be a bookmark a minute later: stopping cancels it after 1 s.
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{site._server.sockets[0].getsockname()[1]}"
        self._ready.set()

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        if request.path.startswith("/_sim/"):  # a real API server has no fault API
            return web.json_response({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": "the server could not find the requested resource",
                                      "reason": "NotFound", "code": 404}, status=404)
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        body = await request.read()
        async with self._session.request(request.method, self.upstream + request.path_qs, headers=headers,
                                         data=body or None) as up:
            if request.path == "/version":
                info = await up.json()
                return web.json_response({**info, "gitCommit": REAL_COMMIT}, status=up.status)
            out = web.StreamResponse(status=up.status, headers={k: v for k, v in up.headers.items()
                                                                 if k.lower() not in HOP_HEADERS})
            await out.prepare(request)
            try:
                async for chunk in up.content.iter_any():
                    await out.write(chunk)
            except (ConnectionResetError, aiohttp.ClientError):
                pass  # either side hung up (a watch the worker closed)
            return out

    def stop(self) -> None:
        async def close() -> None:
            await self._runner.cleanup()
            await self._session.close()
        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


@contextlib.contextmanager
def simulator_behind_a_proxy(kubeconfig: Path):
    """(the simulator, a ``RecordingProxy`` in front of it that says it is a real API server), with
    ``kubeconfig`` written to reach the proxy; both stopped on exit."""
    sim = SimCluster(port=0, **FAST).start()
    proxy = RecordingProxy(sim.url).start()
    config = sim.kubeconfig()
    config["clusters"][0]["cluster"]["server"] = proxy.url
    kubeconfig.write_text(yaml.safe_dump(config))
    try:
        yield sim, proxy
    finally:
        proxy.stop()
        sim.stop()


@pytest.fixture
def cluster():
    sim = SimCluster(port=0, **FAST).start()
    yield sim
    sim.stop()


def start_worker(kubeconfig: Path, name: str, log_path: Path, redis_url: str, prefix: str, *flags: str):
    env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
    log = open(log_path, "wb")  # noqa: SIM115 -- the worker writes it until stop_process
    return subprocess.Popen(
        [sys.executable, "manage.py", "runcontrollers", "--controller", "controllers.examples.deployments:setup",
         "--kubeconfig", str(kubeconfig), "--worker-name", name, "--status-every", "0", *flags],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)


def cluster_entry(r: redis.Redis, keys: Keys, worker: str) -> dict | None:
    for k, v in r.hgetall(keys.snapshot(f"w/{worker}/components")).items():
        if k.startswith(b"cluster/"):
            return orjson.loads(v)
    return None


def test_a_worker_against_a_real_cluster_writes_nothing_unless_allowed(cluster, tmp_path: Path, redis_url, prefix):
    if not os.path.exists(KUBECTL):
        pytest.skip(f"{KUBECTL} not installed")
    kubectl = Kubectl(cluster, tmp_path)  # kubectl talks to the simulator directly: that is "someone else"
    proxy = RecordingProxy(cluster.url).start()
    config = yaml.safe_load(Path(kubectl.kubeconfig).read_text())
    config["clusters"][0]["cluster"]["server"] = proxy.url
    proxied = tmp_path / "real-cluster.kubeconfig"
    proxied.write_text(yaml.safe_dump(config))
    r, keys = redis.Redis.from_url(redis_url), Keys(prefix)
    log_path = tmp_path / "read-only.log"
    worker = start_worker(proxied, "observer", log_path, redis_url, prefix)
    try:
        kubectl.run("apply", "-f", "-", input=DEPLOYMENT)
        entry = wait_until(lambda: cluster_entry(r, keys, "observer"), what="the worker's cluster entry")
        assert (entry["simulated"], entry["writes"], entry["server"]) == (False, "read-only", proxy.url)

        def failed_reconcile():
            raw = r.hget(keys.snapshot("w/observer/controller/deployment-summary"), "default/web")
            row = orjson.loads(raw) if raw else {}
            return row if row.get("result") == "terminal" else None

        row = wait_until(failed_reconcile, what="a Reconcile that failed on the read-only guard")
        assert row["error"].startswith("read-only: POST /api/v1/namespaces/default/configmaps was not sent")
        assert "--allow-writes" in row["error"]
        time.sleep(1.5)  # a retried key (5 ms backoff, doubling) would have run again by now
        row = orjson.loads(r.hget(keys.snapshot("w/observer/controller/deployment-summary"), "default/web"))
        assert (row["attempts"], row["result"]) == (1, "terminal"), "a refused write is not retried"
        frames = [orjson.loads(f[b"f"]) for _, f in r.xrange(keys.stream("w/observer/controller/deployment-summary"))]
        refused = [rec for f in frames for rec in f["r"] if rec.get("k") == "write"]
        assert [(w["method"], w["code"], w.get("refused")) for w in refused] == [("POST", 0, "read-only")]
        assert "read-only against " + proxy.url in log_path.read_text(errors="replace")
        assert proxy.writes() == [], "a read-only worker sent a write"
        assert any(m == "GET" and "watch" not in p for m, p in proxy.requests)  # it did observe through the proxy
        assert kubectl.run("get", "configmap", "web-summary", check=False).returncode != 0
    finally:
        stop_process(worker)

    # The same worker, told it may act: its writes go through the proxy and the summary appears.
    before = len(proxy.requests)
    worker = start_worker(proxied, "actor", tmp_path / "actor.log", redis_url, prefix, "--allow-writes")
    try:
        entry = wait_until(lambda: cluster_entry(r, keys, "actor"), what="the acting worker's cluster entry")
        assert (entry["simulated"], entry["writes"]) == (False, "allowed")
        wait_until(lambda: kubectl.run("get", "configmap", "web-summary", check=False).returncode == 0,
                   what="the summary ConfigMap, written through the proxy")
        assert ("POST", "/api/v1/namespaces/default/configmaps") in proxy.requests[before:]
    finally:
        stop_process(worker)
        proxy.stop()
        r.close()


def test_runkopf_refuses_to_start_against_a_real_cluster_without_allow_writes(cluster, tmp_path: Path, redis_url,
                                                                              prefix):
    proxy = RecordingProxy(cluster.url).start()
    try:
        config = cluster.kubeconfig()
        config["clusters"][0]["cluster"]["server"] = proxy.url
        proxied = tmp_path / "real-cluster.kubeconfig"
        proxied.write_text(yaml.safe_dump(config))
        env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1"}
        done = subprocess.run([sys.executable, "manage.py", "runkopf", "--kubeconfig", str(proxied), "--",
                               "--standalone", "-n", "default", str(ROOT / "tests/kopf/operators/leaky.py")],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode != 0
        assert f"{proxy.url} is not the simulated cluster" in done.stderr and "--allow-writes" in done.stderr
        assert "Nothing was started" in done.stderr
        assert proxy.requests == [("GET", "/version")]
    finally:
        proxy.stop()
