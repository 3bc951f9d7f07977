"""Shared fixtures: a real Redis (whatever redisboot finds or starts), real daphne processes, real
headless Chromium. Each test gets its own key prefix and deletes only keys under it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import gc
import os
import shutil
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import redis

from controllers.process import stop_process
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.redisboot import RedisHandle, ensure_redis, free_port

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = Path(os.environ.get("CTRLSCOPE_ARTIFACTS", ROOT / "artifacts"))


@pytest.fixture(autouse=True)
def gc_as_it_was():
    """Factories and Managers freeze the GC process-wide by default (gc_freeze.py): thaw after every
    test, so no test inherits another's frozen heap."""
    yield
    if gc.get_freeze_count():
        gc.unfreeze()


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("run")


@pytest.fixture(scope="session")
def redis_handle(run_dir: Path) -> RedisHandle:
    handle = ensure_redis(run_dir)
    yield handle
    handle.stop()


@pytest.fixture(scope="session")
def redis_url(redis_handle: RedisHandle) -> str:
    return redis_handle.url


def delete_prefix(url: str, prefix: str) -> None:
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=prefix + "*", count=1000))
        if keys:
            client.delete(*keys)
    except redis.RedisError:
        pass
    finally:
        client.close()


@pytest.fixture
def prefix(redis_url: str) -> str:
    p = f"ctrlscope-test-{uuid.uuid4().hex[:10]}:"
    yield p
    delete_prefix(redis_url, p)


@pytest.fixture
def publisher_factory(redis_url: str, prefix: str):
    made: list[RedisPublisher] = []

    def make(url: str | None = None, **kw) -> RedisPublisher:
        pub = RedisPublisher(url or redis_url, prefix=prefix, **kw)
        made.append(pub)
        return pub

    yield make
    for pub in made:
        pub.stop()


@pytest.fixture(scope="session")
def django_db(run_dir: Path) -> Path:
    db = run_dir / "dashboard.sqlite3"
    env = {**os.environ, "CTRLSCOPE_DEMO": "1", "CTRLSCOPE_DB": str(db), "CTRLSCOPE_RUN_DIR": str(run_dir)}
    result = subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"migrate failed:\n{result.stdout}\n{result.stderr}"
    return db


class DashboardServer:
    """A real daphne process serving the dashboard on a free loopback port."""

    START_TIMEOUT = 90.0

    def __init__(self, redis_url: str, prefix: str, db: Path, run_dir: Path, **env: str) -> None:
        self.port = free_port()
        self.env = {**os.environ, "REDIS_URL": redis_url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
                    "CTRLSCOPE_DB": str(db), "CTRLSCOPE_RUN_DIR": str(run_dir),
                    "CTRLSCOPE_ALLOW_ANONYMOUS": "1", **env}
        self.run_dir = run_dir
        self.log = run_dir / f"daphne-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws/telemetry/"

    def start(self) -> DashboardServer:
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(self.port), "dashboard.asgi:application"],
                cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)
        # A daphne that exits is reported at once (poll below); the deadline only bounds one that
        # hangs. 20 s was too short on a loaded machine: Django's import and startup alone took
        # longer there while the process was fine (issue 14, the browser loop under load; the chaos
        # tier restarts daphne under load with the same deadline).
        deadline = time.monotonic() + self.START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"daphne exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        # Stopped before raising: the fixture never sees a server whose start failed, and a daphne
        # left running took CPU from every later test (on a loaded machine a cascade of failed starts).
        stop_process(self.proc)
        raise RuntimeError(f"daphne did not answer: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        stop_process(self.proc)

    def rss_bytes(self) -> int:
        import psutil

        return psutil.Process(self.proc.pid).memory_info().rss if self.proc else 0


@pytest.fixture
def dashboard_factory(redis_url: str, prefix: str, django_db: Path, run_dir: Path):
    servers: list[DashboardServer] = []

    def make(url: str | None = None, **env: str) -> DashboardServer:
        server = DashboardServer(url or redis_url, prefix, django_db, run_dir, **env).start()
        servers.append(server)
        return server

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def dashboard(dashboard_factory) -> DashboardServer:
    return dashboard_factory()


CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def browser(tmp_path_factory: pytest.TempPathFactory):
    if not os.path.exists(CHROMIUM):
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing in CI: .ci/run should have installed Debian chromium")
        pytest.skip(f"{CHROMIUM} not installed (apt-get install chromium); .ci/run installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        profile = tmp_path_factory.mktemp("chromium-profile")
        context = pw.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 800})
        # For a test that needs a context of its own (a fake clock is per context and outlives the
        # page: installed on this one it would hold for every later test's pages).
        context.ctrlscope_playwright = pw
        yield context
        context.close()


def need_programs(*names: str, install: str) -> list[str]:
    """The paths of these programs. Without them a test skips on a developer's machine and fails in
    CI, where .ci/run installs them (``install`` says how)."""
    found = [shutil.which(name) for name in names]
    missing = " and ".join(name for name, path in zip(names, found, strict=True) if not path)
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"{missing} missing in CI: .ci/run should have installed it ({install})")
        pytest.skip(f"{missing} not installed ({install})")
    return [path for path in found if path]


def wait_until(predicate, timeout: float = 10.0, what: str = "condition", interval: float = 0.02):
    """Poll ``predicate`` until it returns something truthy (returned) or fail after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last value: {last!r})")
        time.sleep(interval)


class LoggedProcess:
    """A program run as a user runs it (argv, environment), its output going to a log file the test
    can read and wait on."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, *, cwd: Path | None = None) -> None:
        self.log = log
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for_output(self, text: str, timeout: float = 30.0) -> None:
        wait_until(lambda: text in self.output() or self.proc.poll() is not None, timeout=timeout,
                   what=f"{text!r} in {self.log.name}")
        assert text in self.output(), f"{self.log.name} exited ({self.proc.returncode}):\n{self.output()[-4000:]}"

    def stop(self) -> str:
        stop_process(self.proc)
        return self.output()


def run_async(coro, timeout: float = 120.0):
    """Run a coroutine to completion on its own thread and loop.

    Playwright's sync API keeps an event loop running on the main thread for the whole session once
    a browser test has run, so ``asyncio.run`` there would fail.
    """
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result(timeout=timeout)


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


# -- the real control plane -------------------------------------------------------------------------
# Tests marked ``realcluster`` run against a real kube-apiserver (with etcd, controller-manager,
# scheduler and kwok nodes) built from upstream by controllers/realcluster. The build (~11 min cold on
# 2 cores, cached outside the clone by version) happens once, before any test runs, in the main
# pytest process (not under a test's timeout); each xdist worker that needs a cluster starts its own.

def _realcluster_unavailable() -> str | None:
    from controllers import golang

    if golang.skipped():
        return "CTRLSCOPE_SKIP_GO=1: the real control plane builds with Go"
    if golang.find_go() is None:
        return "no Go toolchain to build the real control plane (make test gets one)"
    return None


def pytest_collection_finish(session: pytest.Session) -> None:
    """Builds what the collected tests need and the cache lacks (the real control plane, the
    OpenTelemetry Collector) once, in the main process, before any test runs: minutes cold, not under
    a test's timeout. ``make test`` builds both before pytest starts."""
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller process built it before handing out tests

    from controllers import golang

    def say(line: str) -> None:
        print(line, flush=True)

    if any(item.get_closest_marker("realcluster") for item in session.items) and not _realcluster_unavailable():
        from controllers.realcluster import ensure_built

        ensure_built(say=say)
    if golang.find_go() is not None and any("otelcol_binary" in getattr(item, "fixturenames", ())
                                            for item in session.items):
        from controllers.realcluster.otelcol import ensure_built as ensure_otelcol

        ensure_otelcol(say=say)


@pytest.fixture(scope="session")
def otelcol_binary() -> Path:
    """The OpenTelemetry Collector built from the Go module proxy (``controllers.realcluster.otelcol``):
    skipped without a Go toolchain on a developer's machine, failed in CI (which always has one unless
    ``CTRLSCOPE_SKIP_GO``); a collector that fails to build fails everywhere."""
    from controllers import golang

    if golang.find_go() is None:
        if os.environ.get("CI") and not golang.skipped():
            pytest.fail("no Go toolchain in CI: make test should have provided one (scripts/go-toolchain)")
        pytest.skip("no Go toolchain to build the OpenTelemetry Collector with")
    from controllers.realcluster.otelcol import ensure_built

    return ensure_built(say=lambda line: None)


@pytest.fixture
def otel_collector(otelcol_binary: Path, tmp_path: Path):
    """A running collector for one test (``controllers.realcluster.otelcol.Collector``): OTLP/HTTP on
    ``.endpoint``, what it received in ``.spans()``."""
    from controllers.realcluster.otelcol import Collector

    with Collector(otelcol_binary, tmp_path / "otelcol") as collector:
        yield collector


@pytest.fixture(scope="session")
def realcluster_binaries():
    """The built control plane (``controllers.realcluster.Binaries``); skips or fails as ``realcluster`` does."""
    why = _realcluster_unavailable()
    if why:
        if os.environ.get("CI") and not os.environ.get("CTRLSCOPE_SKIP_GO"):
            pytest.fail(f"the real control plane is needed in CI: {why}")
        pytest.skip(why)
    from controllers.realcluster import ensure_built

    return ensure_built(say=lambda line: None)


@pytest.fixture(scope="session")
def realcluster(realcluster_binaries, tmp_path_factory: pytest.TempPathFactory):
    """A running real control plane for this worker's tests (a ``RealCluster``; its admin kubeconfig
    is ``realcluster.kubeconfig``). Tests share it: each works in its own namespace."""
    from controllers.realcluster import RealCluster

    base = tmp_path_factory.mktemp("realcluster")
    cluster = RealCluster(realcluster_binaries, base / "run", nodes=2, say=lambda line: None)
    cluster.start(base / "kubeconfig.yaml")
    yield cluster
    cluster.stop()


@pytest.fixture
def real_namespace(realcluster, request: pytest.FixtureRequest):
    """A fresh namespace on the real cluster for one test, deleted afterwards (without waiting)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    code, body = realcluster.api("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                               "metadata": {"name": name}})
    assert code == 201, body
    # Pods need the namespace's default ServiceAccount, which the controller-manager creates.
    wait_until(lambda: realcluster.api("GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] == 200,
               timeout=30, what=f"the default ServiceAccount in {name}")
    yield name
    realcluster.api("DELETE", f"/api/v1/namespaces/{name}")
