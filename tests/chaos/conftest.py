"""The chaos tier's stack: every piece a real process, each one killable with SIGKILL and restartable
the same way.

- a private ``redis-server`` on a free port (never the shared 6379 one: it is killed here);
- the simulator (``manage.py simcluster`` on a fixed port, so a restart is the same cluster address);
- a worker (``manage.py runcontrollers``) running the PodSet reconciler, with short watch timeouts;
- daphne serving the dashboard, and one headless Chromium tab on the reconciler's controller page,
  with a recorder (``RECORDER_JS``) noting what the page showed and every stream id it applied;
- a load generator patching the PodSets at a steady rate (metadata only: the informer sees every
  write, the reconciler only the spec changes the test makes).

``ChaosStack`` owns them; the test module drives the matrix and checks, after each victim, what the
page showed, that no frame went missing silently, that the informer caches equal the API's state and
that the reconciler converged.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
import redis

from controllers.examples.podset import API_VERSION, CRD, IMPLEMENTATION_LABEL, podset
from controllers.informers import ApiError
from controllers.informers.http_client import KubernetesClient
from controllers.schema import TopicKind, worker_topic
from controllers.telemetry.redisboot import RedisHandle, free_port, start_private
from controllers.telemetry.streams import Keys
from tests.conftest import ROOT, DashboardServer, LoggedProcess, wait_until

WORKER = "chaos"
CONTROLLER = "podset"
PAGE = f"/c/{WORKER}/{CONTROLLER}/"
NAMESPACE = "default"
PODSETS = 10
LOAD_RATE = 150.0  # PodSet metadata patches per second
WATCH_TIMEOUT = 1  # runcontrollers --watch-timeout: watches of 1 s, taken as stalled after 2 s of silence
INFORMERS = {"podsets": worker_topic(WORKER, TopicKind.INFORMER, f"{API_VERSION}/PodSet"),
             "pods": worker_topic(WORKER, TopicKind.INFORMER, "v1/Pod")}
PODSETS_PATH = f"/apis/{API_VERSION}/namespaces/{NAMESPACE}/podsets"
MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}

# What the tab showed and applied, from the moment it is installed: the client's states and resyncs,
# the badges and markers the page drew (sampled every 50 ms, each change noted once), and per topic
# the segments of stream ids it applied, a segment starting at each snapshot. A segment the page
# left is closed: an informer cache the page drops on a disconnect (it reloads it from a snapshot),
# or ids going back (a reloaded cache replays its history before its snapshot).
RECORDER_JS = """() => {
  const c = window.ctrlscope.client;
  const rec = window.__chaos = { seen: [], segs: {} };
  const note = (...what) => rec.seen.push([Date.now(), ...what]);
  const open = (topic, start) => { (rec.segs[topic] = rec.segs[topic] || []).push({ start: start, ids: [], closed: false }); };
  for (const [topic, t] of c.topics) if (t.cursor) open(topic, t.cursor);
  c.on("state", (s) => {
    note("state", s);
    // The page drops its informer caches when the socket goes (controller_page.js, whose listener runs
    // first) and reloads them over HTTP, history first: what those topics applied so far ends here.
    if (s === "reconnecting") for (const [topic, segs] of Object.entries(rec.segs)) if (!c.topics.has(topic)) segs[segs.length - 1].closed = true;
  });
  c.on("resync", (topic, reason) => note("resync", topic, reason));
  c.on("snapshot", (topic) => { const t = c.topics.get(topic); if (t && t.cursor) open(topic, t.cursor); });
  c.on("records", (topic, records, id) => {
    const segs = rec.segs[topic]; const seg = segs && segs[segs.length - 1];
    if (!seg || seg.closed) return;
    const last = seg.ids.length ? seg.ids[seg.ids.length - 1] : seg.start;
    if (TelemetryClient.cmpId(id, last) <= 0) { seg.closed = true; return; }
    seg.ids.push(id);
  });
  const shown = new Map();
  const sample = (key, value) => { if (shown.get(key) !== value) { shown.set(key, value); note("dom", key, value); } };
  setInterval(() => {
    sample("conn", document.getElementById("conn").textContent);
    sample("redis", (document.getElementById("redis") || {}).textContent || "");
    for (const b of document.querySelectorAll("#components .comp.informer")) {
      sample("informer " + b.querySelector("b").textContent, b.querySelector("[class*=st-]").textContent);
    }
    for (const tr of document.querySelectorAll("#ievents tr.resync-marker")) sample("marker " + tr.textContent, "shown");
    for (const td of document.querySelectorAll("#faults-log td.fault-name")) sample("fault " + td.textContent, "shown");
  }, 50);
}"""


def stream_id_key(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq)


def kill9(proc: Any) -> None:
    """SIGKILL, as a crash or the OOM killer does: no cleanup, no goodbye frame."""
    if proc is not None and proc.poll() is None:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)


class Load:
    """Patches PodSet annotations at ``rate`` per second in all, from ``threads`` threads (one request
    at a time each, so a slow simulator slows the load rather than piling requests up); counts what
    the simulator accepted and refused (it keeps going through every outage)."""

    def __init__(self, url: str, rate: float = LOAD_RATE, threads: int = 3) -> None:
        self.url = url
        self.rate = rate
        self.ok = 0
        self.failed = 0
        self.running = threading.Event()
        self._stop = threading.Event()
        self._ran = 0.0  # seconds spent running (not paused), for the achieved rate
        self._since: float | None = None
        self._threads = [threading.Thread(target=self._run, args=(i, threads), name=f"chaos-load-{i}", daemon=True)
                         for i in range(threads)]

    def start(self) -> Load:
        self.resume()
        for t in self._threads:
            t.start()
        return self

    def pause(self) -> None:
        self.running.clear()
        if self._since is not None:
            self._ran += time.monotonic() - self._since
            self._since = None

    def resume(self) -> None:
        self._since = time.monotonic()
        self.running.set()

    def rate_achieved(self) -> float:
        ran = self._ran + (time.monotonic() - self._since if self._since is not None else 0.0)
        return (self.ok + self.failed) / ran if ran else 0.0

    def stop(self) -> None:
        self._stop.set()
        self.running.set()
        for t in self._threads:
            t.join(70)

    def _run(self, index: int, threads: int) -> None:
        client = KubernetesClient.for_host(self.url)
        n = index
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.running.wait()
            n += threads
            body = {"metadata": {"annotations": {"chaos.ctrlscope.dev/tick": str(n)}}}
            try:
                client.send_json("PATCH", f"{PODSETS_PATH}/ps-{n % PODSETS}", body, timeout=30, headers=MERGE_PATCH)
                self.ok += 1
            except (ApiError, OSError, ValueError):
                self.failed += 1
            next_at = max(next_at + threads / self.rate, time.monotonic() - 0.5)
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)


class ChaosStack:
    """The processes (see the module doc), started once per test module."""

    def __init__(self, tmp: Path, db: Path, browser: Any) -> None:
        self.tmp = tmp
        self.db = db
        self.browser = browser
        self.prefix = f"ctrlscope-chaos-{uuid.uuid4().hex[:8]}:"
        self.keys = Keys(self.prefix)
        self.redis_port = free_port()
        self.sim_port = free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.sim_url = f"http://127.0.0.1:{self.sim_port}"
        self.kubeconfig = tmp / "kubeconfig-sim.yaml"
        self.env = {**os.environ, "REDIS_URL": self.redis_url, "CTRLSCOPE_PREFIX": self.prefix,
                    "CTRLSCOPE_DEMO": "1", "CTRLSCOPE_RUN_DIR": str(tmp), "CTRLSCOPE_DB": str(db),
                    "PYTHONUNBUFFERED": "1"}
        self.redis_handle: RedisHandle | None = None
        self.sim: LoggedProcess | None = None
        self.worker: LoggedProcess | None = None
        self.dashboard: DashboardServer | None = None
        self.page: Any = None
        self.api = KubernetesClient.for_host(self.sim_url)
        self.load: Load | None = None
        self.starts: dict[str, int] = {}
        self.replicas = {f"ps-{i}": 2 for i in range(PODSETS)}

    def _log(self, name: str) -> Path:
        self.starts[name] = self.starts.get(name, 0) + 1
        return self.tmp / f"{name}-{self.starts[name]}.log"

    # -- the processes -------------------------------------------------------------------------
    def start_redis(self) -> None:
        self.redis_handle = start_private(self.tmp, port=self.redis_port)

    def start_sim(self) -> None:
        self.sim = LoggedProcess([sys.executable, "manage.py", "simcluster", "--port", str(self.sim_port),
                                  "--kubeconfig", str(self.kubeconfig), "--start-delay", "0.1"],
                                 self.env, self._log("sim"), cwd=ROOT)
        self.sim.wait_for_output("listening on", timeout=60)

    def start_worker(self) -> None:
        self.worker = LoggedProcess([sys.executable, "manage.py", "runcontrollers", "--controller",
                                     "controllers.examples.podset:setup_reconciler", "--kubeconfig", str(self.kubeconfig),
                                     "--worker-name", WORKER, "--status-every", "0",
                                     "--watch-timeout", str(WATCH_TIMEOUT)],
                                    self.env, self._log("worker"), cwd=ROOT)
        self.worker.wait_for_output("telemetry to", timeout=60)

    def start_dashboard(self) -> None:
        if self.dashboard is None:
            self.dashboard = DashboardServer(self.redis_url, self.prefix, self.db, self.tmp,
                                             CTRLSCOPE_SIM_KUBECONFIG=str(self.kubeconfig))
        self.dashboard.start()  # the same port every time: the tab reconnects to it

    def process(self, name: str) -> Any:
        return {"redis": self.redis_handle.process if self.redis_handle else None,
                "simulator": self.sim.proc if self.sim else None,
                "worker": self.worker.proc if self.worker else None,
                "daphne": self.dashboard.proc if self.dashboard else None}[name]

    def kill(self, name: str) -> None:
        kill9(self.process(name))

    def restart(self, name: str) -> None:
        {"redis": self.start_redis, "simulator": self.start_sim, "worker": self.start_worker,
         "daphne": self.start_dashboard}[name]()

    def start(self) -> ChaosStack:
        self.start_redis()
        self.start_sim()
        self.apply_desired_state()
        self.start_worker()
        self.start_dashboard()
        self.wait_converged(timeout=60)
        self.load = Load(self.sim_url).start()
        self.open_page()
        return self

    def stop(self) -> None:
        if self.load is not None:
            self.load.stop()
        if self.page is not None:
            self.page.close()
        for proc in (self.worker, self.sim):
            if proc is not None:
                proc.stop()
        if self.dashboard is not None:
            self.dashboard.stop()
        if self.redis_handle is not None:
            self.redis_handle.stop()

    # -- the tab -------------------------------------------------------------------------------
    def open_page(self) -> None:
        page = self.browser.new_page()
        page.js_errors = []
        page.on("pageerror", lambda err: page.js_errors.append(str(err)))
        page.goto(self.dashboard.url + PAGE)
        page.wait_for_selector('#conn[data-state="live"]', timeout=20_000)
        page.wait_for_function("(topics) => topics.every((t) => window.ctrlscope.client.topics.get(t)?.cursor)",
                               arg=list(INFORMERS.values()), timeout=20_000)
        page.evaluate(RECORDER_JS)
        self.page = page

    def seen(self, since_ms: float) -> list[list[Any]]:
        """What the tab noted since ``since_ms`` (its wall clock): ``[ms, kind, ...]`` rows."""
        return [row for row in self.page.evaluate("window.__chaos.seen") if row[0] >= since_ms]

    def segments(self) -> dict[str, list[dict[str, Any]]]:
        return self.page.evaluate("window.__chaos.segs")

    def cursors(self) -> dict[str, str]:
        return self.page.evaluate("Object.fromEntries([...window.ctrlscope.client.topics].map(([k, t]) => [k, t.cursor]))")

    # -- the cluster ---------------------------------------------------------------------------
    def apply_desired_state(self) -> None:
        """The CRD and every PodSet at its wanted replicas (created if missing: a restarted simulator
        starts empty, as a cluster whose etcd was lost; whoever owns the desired state applies it again)."""
        try:
            self.api.send_json("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD)
        except ApiError as exc:
            if exc.code != 409:
                raise
        wait_until(lambda: self._served(), timeout=10, what="the PodSet CRD to be served")
        for name, replicas in self.replicas.items():
            self.scale(name, replicas)

    def _served(self) -> bool:
        try:
            self.api.get_json(PODSETS_PATH)
            return True
        except ApiError:
            return False

    def scale(self, name: str, replicas: int) -> None:
        self.replicas[name] = replicas
        try:
            self.api.send_json("PATCH", f"{PODSETS_PATH}/{name}", {"spec": {"replicas": replicas}}, headers=MERGE_PATCH)
        except ApiError as exc:
            if exc.code != 404:
                raise
            obj = podset(name, "reconciler", replicas, namespace=NAMESPACE)
            self.api.send_json("POST", PODSETS_PATH, obj)

    def divergence(self) -> list[str]:
        """What keeps the reconciler from being done: per PodSet, wanted vs live pods vs status."""
        podsets = self.api.get_json(PODSETS_PATH)["items"]
        pods = self.api.get_json(f"/api/v1/namespaces/{NAMESPACE}/pods")["items"]
        live: dict[str, int] = {}
        for pod in pods:
            if pod["metadata"].get("deletionTimestamp"):
                continue
            for ref in pod["metadata"].get("ownerReferences") or []:
                if ref.get("controller"):
                    live[ref["uid"]] = live.get(ref["uid"], 0) + 1
        problems = []
        names = set()
        for ps in podsets:
            meta = ps["metadata"]
            names.add(meta["name"])
            if (meta.get("labels") or {}).get(IMPLEMENTATION_LABEL) != "reconciler":
                continue
            want = ps["spec"]["replicas"]
            have = live.get(meta["uid"], 0)
            status = (ps.get("status") or {}).get("replicas")
            if want != self.replicas.get(meta["name"]) or have != want or status != want:
                problems.append(f"{meta['name']}: want {self.replicas.get(meta['name'])} spec {want} live {have} status {status}")
        problems += [f"{name}: missing" for name in self.replicas if name not in names]
        return problems

    def wait_converged(self, timeout: float = 30) -> None:
        wait_until(lambda: not self._divergence_or_error(), timeout=timeout, interval=0.2,
                   what=f"the reconciler to converge ({self._divergence_or_error()})")

    def _divergence_or_error(self) -> list[str]:
        try:
            return self.divergence()
        except (ApiError, OSError) as exc:
            return [f"API: {exc}"]

    # -- the worker's published caches against the API ----------------------------------------
    def cache_diff(self) -> list[str]:
        """Keys whose resourceVersion differs between an informer topic's state in Redis (the cache the
        worker publishes) and a fresh LIST from the simulator; [] when they are equal."""
        r = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        try:
            diffs = []
            for name, path in (("podsets", f"/apis/{API_VERSION}/podsets"), ("pods", "/api/v1/pods")):
                listed = {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                          for o in self.api.get_json(path)["items"]}
                raw = r.hgetall(self.keys.snapshot(INFORMERS[name]))
                raw.pop(b"__id__", None)
                cached = {k.decode(): orjson.loads(v).get("rv") for k, v in raw.items()}
                for key in sorted(listed.keys() | cached.keys()):
                    if listed.get(key) != cached.get(key):
                        diffs.append(f"{name} {key}: api {listed.get(key)} cache {cached.get(key)}")
            return diffs
        finally:
            r.close()

    def reflector_story(self, last: int = 25) -> str:
        """The last records of each informer's reflector (lists, watches, ends, backoffs, states, with
        their errors) as the worker published them: what a cache that does not converge was doing."""
        r = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        try:
            lines = []
            for name, topic in INFORMERS.items():
                records = [rec for _, f in r.xrevrange(self.keys.stream(topic), count=200)
                           for rec in reversed(orjson.loads(f[b"f"]).get("r", []))
                           if rec.get("k") not in ("watch", "handler", "store")]
                lines.append(f"{name}: " + "; ".join(
                    " ".join(str(v) for k, v in rec.items() if k not in ("seq",) and v is not None)
                    for rec in reversed(records[:last])))
            return "\n".join(lines)
        finally:
            r.close()

    def stream_ids(self, topic: str, after: str, until: str) -> list[str] | None:
        """The ids of ``topic``'s stream in ``(after, until]``, or None when ``after`` is not in the
        stream (another Redis epoch, or trimmed): then nothing can be said about that stretch."""
        r = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        try:
            rows = r.xrange(self.keys.stream(topic), min="-" if after == "0-0" else after, max=until)
        finally:
            r.close()
        ids = [eid.decode() for eid, _ in rows]
        if after == "0-0":  # a snapshot of an empty topic: the stream from its first entry on
            return ids
        if not ids or ids[0] != after:
            return None
        return ids[1:]

    def last_ids(self) -> dict[str, str]:
        r = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        try:
            out = {}
            for topic in self.cursors():
                rows = r.xrevrange(self.keys.stream(topic), count=1)
                if rows:
                    out[topic] = rows[0][0].decode()
            return out
        finally:
            r.close()
