"""The chaos tier's stack: every piece a real process, each one killable with SIGKILL and restartable
the same way.

- a private ``redis-server`` on a free port (never the shared 6379 one: it is killed here);
- the simulator (``manage.py simcluster`` on a fixed port, so a restart is the same cluster address);
- a worker (``manage.py runcontrollers``) running the PodSet reconciler, with short watch timeouts;
- daphne serving the dashboard, and one headless Chromium tab on the reconciler's controller page,
  with a recorder (``RECORDER_JS``) noting what the page showed and every stream id it applied;
- a load generator patching the PodSets at a steady rate (metadata only: the informer sees every
  write, the reconciler only the spec changes the test makes).

``ChaosStack`` owns what both matrices share (Redis, the worker, daphne, the tab, the load, the
checks' reads of the API and of Redis); ``SimChaosStack`` puts the simulator under it
(``test_chaos_matrix.py``), ``RealChaosStack`` the real control plane behind the fault proxy
(``test_chaos_real.py``). ``hit_and_verify`` is one victim of either matrix: the desired state moves,
the victim is hit, and then what the page showed, that no frame went missing silently (``gaps``,
``caught_up``), that the informer caches equal the API's state and that the reconciler converged.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import redis

from controllers.examples.podset import API_VERSION, IMPLEMENTATION_LABEL, ensure_crd, podset
from controllers.informers import ApiError
from controllers.informers.factory import informer_name
from controllers.informers.http_client import KubernetesClient
from controllers.informers.listwatch import ListOptions
from controllers.schema import TopicKind, worker_topic
from controllers.telemetry.redisboot import RedisHandle, free_port, start_private
from controllers.telemetry.streams import Keys
from tests.conftest import ROOT, DashboardServer, LoggedProcess, wait_until

WORKER = "chaos"
CONTROLLER = "podset"
PAGE = f"/c/{WORKER}/{CONTROLLER}/"
PODSETS = 10
LOAD_RATE = 150.0  # PodSet metadata patches per second
WATCH_TIMEOUT = 1  # runcontrollers --watch-timeout: watches of 1 s, taken as stalled after 2 s of silence


def informer_topics(namespace: str | None) -> dict[str, str]:
    """The worker's informer topics, named as its factory names them (`` ns=..`` when it watches one
    namespace)."""
    return {name: worker_topic(WORKER, TopicKind.INFORMER, informer_name(api_version, kind, namespace, ListOptions(), False))
            for name, api_version, kind in (("podsets", API_VERSION, "PodSet"), ("pods", "v1", "Pod"))}


MERGE_PATCH = {"Content-Type": "application/merge-patch+json"}
WORKER_TOPIC = f"w/{WORKER}/"

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
  c.on("snapshot", (topic) => { const t = c.topics.get(topic); note("snapshot", topic, t && t.cursor); if (t && t.cursor) open(topic, t.cursor); });
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
    at a time each, so a slow API server slows the load rather than piling requests up), each with its
    own client from ``make_client``; counts what the cluster accepted and refused (it keeps going
    through every outage)."""

    def __init__(self, make_client: Callable[[], KubernetesClient], podsets_path: str, rate: float = LOAD_RATE,
                 threads: int = 3) -> None:
        self.make_client = make_client
        self.podsets_path = podsets_path
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
        client = self.make_client()
        n = index
        next_at = time.monotonic()
        while not self._stop.is_set():
            self.running.wait()
            n += threads
            body = {"metadata": {"annotations": {"chaos.ctrlscope.dev/tick": str(n)}}}
            try:
                client.send_json("PATCH", f"{self.podsets_path}/ps-{n % PODSETS}", body, timeout=30, headers=MERGE_PATCH)
                self.ok += 1
            except (ApiError, OSError, ValueError):
                self.failed += 1
            next_at = max(next_at + threads / self.rate, time.monotonic() - 0.5)
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)


class ChaosStack:
    """The processes both matrices share (see the module doc), started once per test module; a subclass
    brings the cluster (``start_cluster``, ``client``), the worker's kubeconfig and its own victims."""

    namespace = "default"  # the PodSets' and their pods'
    watch_namespace: str | None = None  # the worker's --namespace (None: it watches every namespace)
    load_rate = LOAD_RATE

    def __init__(self, tmp: Path, db: Path, browser: Any) -> None:
        self.tmp = tmp
        self.db = db
        self.browser = browser
        self.prefix = f"ctrlscope-chaos-{uuid.uuid4().hex[:8]}:"
        self.keys = Keys(self.prefix)
        self.redis_port = free_port()
        self.redis_url = f"redis://127.0.0.1:{self.redis_port}/0"
        self.env = {**os.environ, "REDIS_URL": self.redis_url, "CTRLSCOPE_PREFIX": self.prefix,
                    "CTRLSCOPE_DEMO": "1", "CTRLSCOPE_RUN_DIR": str(tmp), "CTRLSCOPE_DB": str(db),
                    "PYTHONUNBUFFERED": "1"}
        self.redis_handle: RedisHandle | None = None
        self.worker: LoggedProcess | None = None
        self.dashboard: DashboardServer | None = None
        self.page: Any = None
        self.api: KubernetesClient | None = None
        self.load: Load | None = None
        self.starts: dict[str, int] = {}
        self.replicas = {f"ps-{i}": 2 for i in range(PODSETS)}

    @property
    def informers(self) -> dict[str, str]:
        return informer_topics(self.watch_namespace)

    @property
    def podsets_path(self) -> str:
        return f"/apis/{API_VERSION}/namespaces/{self.namespace}/podsets"

    # -- what a cluster brings -----------------------------------------------------------------
    def start_cluster(self) -> None:
        raise NotImplementedError

    def client(self) -> KubernetesClient:
        """A new client of the API (not through any fault): the test's reads and writes, the load."""
        raise NotImplementedError

    def worker_kubeconfig(self) -> Path:
        raise NotImplementedError

    def worker_args(self) -> list[str]:
        return []

    def dashboard_env(self) -> dict[str, str]:
        return {}

    def list_paths(self) -> dict[str, str]:
        """Per informer, the LIST whose keys and resourceVersions its cache must equal."""
        raise NotImplementedError

    def stop_cluster(self) -> None:
        raise NotImplementedError

    def processes(self) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
        """Victim name → (kill, restart)."""
        return {"redis": (lambda: kill9(self.redis_handle.process if self.redis_handle else None), self.start_redis),
                "worker": (lambda: kill9(self.worker.proc if self.worker else None), self.start_worker),
                "daphne": (lambda: kill9(self.dashboard.proc if self.dashboard else None), self.start_dashboard)}

    def _log(self, name: str) -> Path:
        self.starts[name] = self.starts.get(name, 0) + 1
        return self.tmp / f"{name}-{self.starts[name]}.log"

    # -- the processes -------------------------------------------------------------------------
    def start_redis(self) -> None:
        self.redis_handle = start_private(self.tmp, port=self.redis_port)

    def start_worker(self) -> None:
        self.worker = LoggedProcess([sys.executable, "manage.py", "runcontrollers", "--controller",
                                     "controllers.examples.podset:setup_reconciler",
                                     "--kubeconfig", str(self.worker_kubeconfig()),
                                     "--worker-name", WORKER, "--status-every", "0",
                                     "--watch-timeout", str(WATCH_TIMEOUT), *self.worker_args()],
                                    self.env, self._log("worker"), cwd=ROOT)
        self.worker.wait_for_output("telemetry to", timeout=60)

    def start_dashboard(self) -> None:
        if self.dashboard is None:
            self.dashboard = DashboardServer(self.redis_url, self.prefix, self.db, self.tmp, **self.dashboard_env())
        self.dashboard.start()  # the same port every time: the tab reconnects to it

    def kill(self, name: str) -> None:
        self.processes()[name][0]()

    def restart(self, name: str) -> None:
        self.processes()[name][1]()

    def start(self) -> ChaosStack:
        self.start_redis()
        self.start_cluster()
        self.api = self.client()
        self.apply_desired_state()
        self.start_worker()
        self.start_dashboard()
        self.wait_converged(timeout=60)
        self.load = Load(self.client, self.podsets_path, rate=self.load_rate).start()
        self.open_page()
        return self

    def stop(self) -> None:
        if self.load is not None:
            self.load.stop()
        if self.page is not None:
            self.page.close()
        if self.worker is not None:
            self.worker.stop()
        self.stop_cluster()
        if self.dashboard is not None:
            self.dashboard.stop()
        if self.redis_handle is not None:
            self.redis_handle.stop()

    # -- the tab -------------------------------------------------------------------------------
    def open_page(self) -> None:
        page = self.browser.new_page()
        page.js_errors = []
        page.on("pageerror", lambda err: page.js_errors.append(str(err)))
        assert self.dashboard is not None
        page.goto(self.dashboard.url + PAGE)
        page.wait_for_selector('#conn[data-state="live"]', timeout=20_000)
        page.wait_for_function("(topics) => topics.every((t) => window.ctrlscope.client.topics.get(t)?.cursor)",
                               arg=list(self.informers.values()), timeout=20_000)
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
        assert self.api is not None
        ensure_crd(self.api)
        wait_until(lambda: self._served(), timeout=10, what="the PodSet CRD to be served")
        for name, replicas in self.replicas.items():
            self.scale(name, replicas)

    def _served(self) -> bool:
        assert self.api is not None
        try:
            self.api.get_json(self.podsets_path)
            return True
        except ApiError:
            return False

    def scale(self, name: str, replicas: int) -> None:
        assert self.api is not None
        self.replicas[name] = replicas
        try:
            self.api.send_json("PATCH", f"{self.podsets_path}/{name}", {"spec": {"replicas": replicas}},
                               headers=MERGE_PATCH)
        except ApiError as exc:
            if exc.code != 404:
                raise
            obj = podset(name, "reconciler", replicas, namespace=self.namespace)
            self.api.send_json("POST", self.podsets_path, obj)

    def divergence(self) -> list[str]:
        """What keeps the reconciler from being done: per PodSet, wanted vs live pods vs status."""
        assert self.api is not None
        podsets = self.api.get_json(self.podsets_path)["items"]
        pods = self.api.get_json(f"/api/v1/namespaces/{self.namespace}/pods")["items"]
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
        worker publishes) and a fresh LIST from the API; [] when they are equal."""
        assert self.api is not None
        r = redis.Redis.from_url(self.redis_url, socket_timeout=5)
        try:
            diffs = []
            for name, path in self.list_paths().items():
                listed = {f"{o['metadata'].get('namespace', '')}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                          for o in self.api.get_json(path)["items"]}
                raw = r.hgetall(self.keys.snapshot(self.informers[name]))
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
            for name, topic in self.informers.items():
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


class SimChaosStack(ChaosStack):
    """The simulator (``manage.py simcluster`` on a fixed port, so a restart is the same cluster
    address) under the stack; the worker watches every namespace of it."""

    def __init__(self, tmp: Path, db: Path, browser: Any) -> None:
        super().__init__(tmp, db, browser)
        self.sim_port = free_port()
        self.sim_url = f"http://127.0.0.1:{self.sim_port}"
        self.kubeconfig = tmp / "kubeconfig-sim.yaml"
        self.sim: LoggedProcess | None = None

    def start_cluster(self) -> None:
        self.sim = LoggedProcess([sys.executable, "manage.py", "simcluster", "--port", str(self.sim_port),
                                  "--kubeconfig", str(self.kubeconfig), "--start-delay", "0.1"],
                                 self.env, self._log("sim"), cwd=ROOT)
        self.sim.wait_for_output("listening on", timeout=60)

    def stop_cluster(self) -> None:
        if self.sim is not None:
            self.sim.stop()

    def client(self) -> KubernetesClient:
        return KubernetesClient.for_host(self.sim_url)

    def worker_kubeconfig(self) -> Path:
        return self.kubeconfig

    def dashboard_env(self) -> dict[str, str]:
        return {"CTRLSCOPE_SIM_KUBECONFIG": str(self.kubeconfig)}

    def list_paths(self) -> dict[str, str]:
        return {"podsets": f"/apis/{API_VERSION}/podsets", "pods": "/api/v1/pods"}

    def processes(self) -> dict[str, tuple[Callable[[], None], Callable[[], None]]]:
        return {**super().processes(),
                "simulator": (lambda: kill9(self.sim.proc if self.sim else None), self.start_cluster)}


# -- the checks both matrices make after each victim ------------------------------------------------
Check = Callable[[str, list[Any]], "str | bool"]


def resync_of(reasons: set[str], prefix: str = "") -> Check:
    return lambda kind, rest: kind == "resync" and rest[0].startswith(prefix) and rest[1] in reasons and \
        f"resync of {rest[0]}: {rest[1]}"


def state_of(state: str) -> Check:
    return lambda kind, rest: kind == "state" and rest[0] == state and f"connection {state}"


def dom_of(key_part: str, value: str) -> Check:
    return lambda kind, rest: kind == "dom" and key_part in rest[0] and rest[1] == value and f"{rest[0]}: {value}"


BACKING_OFF = dom_of("informer ", "backing-off")
WATCHING = dom_of("informer ", "watching")
# What the page must show, in this order, for the victims both matrices share: the outage, then the
# way back.
SHARED_EXPECTED: dict[str, list[Check]] = {
    "worker": [resync_of({"worker-reset"}, WORKER_TOPIC), dom_of("stream resynced (worker-reset)", "shown")],
    "daphne": [state_of("reconnecting"), dom_of("reconnected: cache reloaded", "shown"), state_of("live")],
    "redis": [dom_of("redis", "redis down"), resync_of({"redis-reconnected", "epoch-changed", "worker-reset"})],
    "stall": [dom_of("fault stall", "shown"), BACKING_OFF, WATCHING],
}


def showed(rows: list[list[Any]], expected: list[Check]) -> list[str] | None:
    """What in ``rows`` (the tab's notes since the victim was hit) matched ``expected`` in order, or
    None while something is missing."""
    found: list[str] = []
    want = iter(expected)
    check = next(want)
    for row in rows:
        what = check(row[1], row[2:])
        if what:
            found.append(str(what))
            check = next(want, None)
            if check is None:
                return found
    return None


def gaps(stack: ChaosStack, segments: dict[str, list[dict]] | None = None) -> tuple[list[str], int]:
    """Stretches where Redis holds a frame the tab did not apply and no snapshot replaced, and how
    many applied frames were checked against Redis."""
    problems = []
    checked = 0
    segments = stack.segments() if segments is None else segments
    for topic, segs in segments.items():
        for n, seg in enumerate(segs):
            if not seg["ids"]:
                continue
            held = stack.stream_ids(topic, seg["start"], seg["ids"][-1])
            if held is None:
                # Another Redis epoch (its data went with the killed server) or trimmed: only ever
                # an earlier segment; the latest one must be checkable.
                if n == len(segs) - 1:
                    problems.append(f"{topic}: the latest segment (from {seg['start']}) is not in Redis")
                continue
            checked += len(seg["ids"])
            if held != seg["ids"]:
                missing = sorted(set(held) - set(seg["ids"]))
                problems.append(f"{topic} from {seg['start']}: {len(missing)} frame(s) never reached the tab, "
                                f"e.g. {missing[:3]}; {len(set(seg['ids']) - set(held))} unknown to Redis")
    return problems, checked


def caught_up(stack: ChaosStack) -> list[str]:
    """Topics whose newest frame in Redis the tab has not applied yet, and topics it applied before
    that it has not taken back yet: an informer cache the page dropped on a disconnect or a Redis
    outage is out of the client's topics until its fresh snapshot comes (a CI run checked the gaps
    in that window, and found the latest segment of such a topic in a Redis that no longer had it)."""
    ends = stack.last_ids()
    cursors = stack.cursors()
    behind = [f"{t}: tab at {cursors.get(t)}, Redis at {end}" for t, end in ends.items()
              if cursors.get(t) is None or stream_id_key(cursors[t]) < stream_id_key(end)]
    return behind + [f"{t}: dropped by the page, no snapshot since" for t in stack.segments() if t not in cursors]


@dataclass
class Recovery:
    """What ``verify_recovery`` found: what the page showed, how many frames the tab applied were
    checked against Redis, and when (``time.monotonic()``) the page had shown it all, the caches first
    equalled the API and the reconciler had converged."""

    shown: list[str]
    checked: int
    shown_at: float
    caches_at: float
    converged_at: float

    def summary(self, since: float) -> str:
        return (f"page showed it {self.shown_at - since:.1f} s, caches equal {self.caches_at - since:.1f} s, "
                f"converged {self.converged_at - since:.1f} s after the restart")


def verify_recovery(stack: ChaosStack, victim: str, expected: list[Check], since: float, *,
                    cache_timeout: float, converge_timeout: float = 40.0) -> Recovery:
    """After ``victim`` was hit (the tab's clock ``since``): the page showed ``expected`` in order, the
    informer caches equal the API, the reconciler converged, the tab reached every stream's end with
    no silent gap, and the page is live with no script error. The load is paused meanwhile (a cache
    under 150 writes/s is never equal to a LIST taken a moment later)."""
    page = stack.page
    assert stack.load is not None
    stack.load.pause()
    try:
        if expected:
            try:
                shown = wait_until(lambda: showed(stack.seen(since), expected), timeout=cache_timeout, interval=0.2,
                                   what=f"the page to show the {victim} outage and the way back")
            except AssertionError as exc:
                rows = [" ".join(map(str, row[1:]))[:120] for row in stack.seen(since)]
                raise AssertionError(f"{exc}; the page noted:\n" + "\n".join(rows[:80])) from None
        else:
            shown = []
        shown_at = time.monotonic()
        try:
            wait_until(lambda: stack.cache_diff() == [], timeout=cache_timeout, interval=0.2,
                       what=f"the informer caches to equal the API after the {victim} outage")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: {stack.cache_diff()[:5]}\nthe reflectors' last records:\n"
                                 f"{stack.reflector_story()}") from None
        caches_at = time.monotonic()
        stack.wait_converged(timeout=converge_timeout)
        converged_at = time.monotonic()
        wait_until(lambda: not caught_up(stack), timeout=15, interval=0.2,
                   what=f"the tab to reach every stream's end: {caught_up(stack)[:3]}")

        # After a Redis restart only frames since the resync are checkable: wait for some (the
        # worker's metrics come once a second).
        def checkable() -> tuple[list[str], int] | None:
            problems, checked = gaps(stack)
            return (problems, checked) if problems or checked else None

        problems, checked = wait_until(checkable, timeout=15, interval=0.5,
                                       what="frames the tab applied to check against Redis")
        if problems:  # what the page did around it: its states, resyncs and each topic's segments
            segs = stack.segments()
            story = [" ".join(map(str, row))[:160] for row in stack.seen(since - 5000) if row[1] in ("state", "resync", "snapshot")]
            where = {t: [(s["start"], len(s["ids"]), s["ids"][:1], s["ids"][-1:], s["closed"]) for s in segs[t][-4:]]
                     for t in segs if any(t in p for p in problems)}
            raise AssertionError(f"{problems}\nthe page's states, resyncs and snapshots from 5 s before the outage:\n  " + "\n  ".join(story[:60])
                                 + f"\nsegments (start, frames, first, last, closed): {where}")
        assert page.evaluate("window.ctrlscope.client.state") == "live"
        assert page.inner_text("#conn") == "live" and page.inner_text("#redis") == "redis up"
        assert page.js_errors == []
        return Recovery(shown, checked, shown_at, caches_at, converged_at)
    finally:
        stack.load.resume()


def gap_check_is_not_vacuous(stack: ChaosStack) -> None:
    """One frame taken out of what the tab applied is reported as one missing frame."""
    segments = stack.segments()
    assert set(stack.informers.values()) <= set(segments)
    topic = max(segments, key=lambda t: len(segments[t][-1]["ids"]))  # a latest segment: in Redis
    seg = segments[topic][-1]
    assert len(seg["ids"]) >= 3
    del seg["ids"][len(seg["ids"]) // 2]
    problems, _ = gaps(stack, {topic: [seg]})
    assert len(problems) == 1 and "1 frame(s) never reached the tab" in problems[0], problems
