"""Informers on a real kube-apiserver's watch stream: bench/informer.py's "real API server" section.

The canned stream of bench/informer.py measures what each informer can take; this section measures
what it gets from a real kube-apiserver v1.37.2 with etcd (``bench/realpeer.py`` starts one from
``controllers/realcluster``): HTTPS with a bearer token, the server's own framing, and the server and
its clients sharing the machine's CPUs, as on a developer's kind cluster. The contenders, each in its
own process with its CPU measured inside it:

* ctrlscope ``SharedInformer`` as the Manager builds it (``freeze_gc_after_sync``) whose handler adds a
  ``Request`` to a ``RateLimitingQueue`` (JSON: ctrlscope's informer has no protobuf codec);
* client-go's ``SharedIndexInformer`` whose handler adds the key to a client-go workqueue
  (go/bench/informer with ``-kubeconfig``, built by bench/go.py's helpers), in JSON and in protobuf
  (``rest.Config.ContentType``);
* ``kubernetes.informer.SharedInformer`` (kubernetes 37, model objects), handler counts (JSON: the
  official client has no protobuf codec -- ``ApiClient.select_header_accept`` picks the JSON media
  type and ``deserialize`` refuses any other).

and, for the replay only, a floor: the same HTTPS watch read and decoded with orjson, kept nowhere (what
the server can send; when an informer comes near it, the server is its limit).

The events: P Pods created in one namespace through the API, then each one patched once (2P events).
The Pods are bench/informer.py's canned Pod as a client creates it; the server's defaults and
``managedFields`` make them ~5 KB of JSON (~3.5 KB of protobuf). They name a scheduler nobody runs
(``realpeer.UNSCHEDULED``), so nothing else writes to them.

1. **Replay** (a real server's stream as fast as it can send it): the informer's LIST is answered with the
   namespace as it was before the first create (empty; taken with a LIST just before it), so its
   WATCH starts from that resourceVersion and kube-apiserver replays the 2P events from its watch
   cache as fast as the contender reads them. events/s from start to the last handler call, the
   contender's CPU per event, and kube-apiserver's + etcd's. Every replay runs before any other write,
   so the watch cache still holds the events.
2. **Live, full speed**: the informer LISTs and WATCHes normally; once synced, the driver patches P
   Pods once each with 32 connections as fast as the server takes them. Each patch carries the run's
   tag (annotation ``bench/phase``); the handler counts the run's events and notes each one's Pod
   and time. The writer notes when it sent each patch and when the server answered (one machine,
   one clock): write -> handler is the latency a controller sees; response -> handler leaves out
   the server committing the write (to etcd), so it is the watch path alone -- the watch cache's
   fan-out, the wire and the contender (it can be negative: the event may beat the response).
   Delivered events/s is counted from the first write sent to the last handler call; the lag is the
   time from the last write's response to its handler call: under a second, the contender kept up.
3. **Live, paced**: the same at a fixed rate the server sustains, for the latency a contender adds
   when nothing is saturated.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.realpeer import UNSCHEDULED, Target, ensure_namespaces, real_cluster  # noqa: E402

NS = "informer-bench"
CONCURRENCY = 32
KEPT_UP_LAG = 1.0  # seconds from the last write's response to its handler call
PROTOBUF = "application/vnd.kubernetes.protobuf"


def real_pod(i: int) -> dict[str, Any]:
    """bench/informer.py's canned Pod as a client creates it: no status, node, owner or volumes (the
    API server adds the service-account volume itself), and a scheduler nobody runs."""
    from bench.informer import make_pod

    pod = make_pod(i, 1)
    meta = pod["metadata"]
    spec = {k: v for k, v in pod["spec"].items() if k not in ("nodeName", "volumes")}
    for container in spec["containers"]:
        container.pop("volumeMounts", None)
    spec["schedulerName"] = UNSCHEDULED
    return {"apiVersion": "v1", "kind": "Pod", "spec": spec,
            "metadata": {"name": meta["name"], "labels": meta["labels"], "annotations": meta["annotations"]}}


# -- writes ---------------------------------------------------------------------------------------------
async def _send(target: Target, count: int, request: Callable[[int], tuple[str, str, bytes, str]], *,
                rate: float | None = None) -> dict[str, Any]:
    """``count`` requests (``request(i)`` -> method, path, body, content type; called when the request
    is sent), CONCURRENCY at a time, optionally paced to ``rate``/s; the first send and last response
    times (Unix seconds), the successes, and when each request was sent and answered (by ``i``)."""
    import aiohttp

    todo = iter(range(count))
    interval = CONCURRENCY / rate if rate else 0.0
    out: dict[str, Any] = {"t_first": 0.0, "t_last": 0.0, "ok": 0, "sent": {}, "answered": {}}

    async def worker(session: aiohttp.ClientSession, wid: int) -> None:
        next_at = time.monotonic() + interval * wid / CONCURRENCY
        for i in todo:
            if rate:
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
                next_at += interval
            method, path, body, ctype = request(i)
            sent = time.time()
            out["t_first"] = out["t_first"] or sent
            async with session.request(method, target.url + path, data=body,
                                       headers={"Content-Type": ctype}) as resp:
                text = await resp.read()
                assert resp.status in (200, 201), (resp.status, text[:300])
                out["ok"] += 1
            out["t_last"] = time.time()
            out["sent"][i], out["answered"][i] = sent, out["t_last"]

    connector = aiohttp.TCPConnector(limit=CONCURRENCY, ssl=target.ssl() or False)
    async with aiohttp.ClientSession(connector=connector, headers=target.headers()) as session:
        await asyncio.gather(*(worker(session, w) for w in range(CONCURRENCY)))
    return out


def pod_name(i: int) -> str:
    return f"web-{i:06d}"  # make_pod's


def _patch(annotations: Callable[[], dict[str, str]]) -> Callable[[int], tuple[str, str, bytes, str]]:
    def request(i: int) -> tuple[str, str, bytes, str]:
        return ("PATCH", f"/api/v1/namespaces/{NS}/pods/{pod_name(i)}",
                orjson.dumps({"metadata": {"annotations": annotations()}}), "application/merge-patch+json")
    return request


def seed(target: Target, pods: int) -> tuple[str, float]:
    """Create the namespace, take its (empty) resourceVersion, create ``pods`` Pods and patch each one
    once; (that resourceVersion, seconds the 2 x pods writes took)."""
    import aiohttp

    async def namespace() -> None:
        connector = aiohttp.TCPConnector(ssl=target.ssl() or False)
        async with aiohttp.ClientSession(connector=connector, headers=target.headers()) as session:
            await ensure_namespaces(session, target, [NS])

    asyncio.run(namespace())
    rv = orjson.loads(target.get(f"/api/v1/namespaces/{NS}/pods?limit=1"))["metadata"]["resourceVersion"]
    start = time.perf_counter()
    asyncio.run(_send(target, pods, lambda i: ("POST", f"/api/v1/namespaces/{NS}/pods",
                                               orjson.dumps(real_pod(i)), "application/json")))
    asyncio.run(_send(target, pods, _patch(lambda: {"bench/seed": "patched"})))
    return rv, time.perf_counter() - start


def replay_available(target: Target, rv: str) -> str:
    """"" if the server still replays from ``rv`` (its first event is one of ours), else why not."""
    request_path = f"/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}&timeoutSeconds=5"
    import urllib.request

    req = urllib.request.Request(target.url + request_path, headers=target.headers())
    with urllib.request.urlopen(req, timeout=30, context=target.ssl()) as resp:
        first = orjson.loads(resp.readline())
    if first.get("type") == "ADDED":
        return ""
    return f"the watch cache no longer replays from {rv}: {first.get('object', {}).get('message', first)}"


# -- contenders -----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Contender:
    """One informer in one wire format; ``unsupported``: why it cannot read that format at all."""

    name: str
    wire: str  # "JSON" or "protobuf"
    kind: str  # "ctrlscope", "client-go" or "official"
    unsupported: str = ""


FLOOR = "floor"

OURS = Contender("ctrlscope SharedInformer -> queue (Manager default)", "JSON", "ctrlscope")

CONTENDERS = [
    Contender("HTTPS + orjson decode only (floor; replay only)", "JSON", FLOOR),
    OURS,
    Contender("ctrlscope SharedInformer -> queue (Manager default)", "protobuf", "ctrlscope",
              "n/a: JSON only (ctrlscope's informer decodes JSON with orjson; no protobuf codec)"),
    Contender("client-go informer -> workqueue (Go)", "JSON", "client-go"),
    Contender("client-go informer -> workqueue (Go)", "protobuf", "client-go"),
    Contender("kubernetes 37 SharedInformer (models)", "JSON", "official"),
    Contender("kubernetes 37 SharedInformer (models)", "protobuf", "official",
              "n/a: JSON only (the official Python client has no protobuf codec)"),
]


class _Recorder:
    """In a Python contender: counts the run's handler calls (all of them in a replay; those tagged
    ``phase`` in a live run, noting each one's Pod and time), and the time and process CPU of the
    last one."""

    def __init__(self, n: int, phase: str) -> None:
        import threading

        self.n, self.phase, self.count = n, phase, 0
        self.seen_names: list[str] = []
        self.seen_at: list[float] = []
        self.done = threading.Event()
        self.t_last = self.cpu_last = 0.0

    def hit(self, name: str, annotations: dict[str, str] | None) -> None:
        if self.phase:
            if not annotations or annotations.get("bench/phase") != self.phase:
                return
            self.seen_names.append(name)
            self.seen_at.append(time.time())
        self.count += 1
        if self.count == self.n:
            self.t_last, self.cpu_last = time.time(), time.process_time()
            self.done.set()


class _ReplayListWatch:
    """A ctrlscope ``ListWatch`` whose LIST answers the namespace as it was at ``rv`` (empty), so the
    reflector WATCHes from ``rv``; the WATCH is the real one."""

    def __init__(self, inner: Any, rv: str) -> None:
        self.inner, self.rv = inner, rv
        self.namespace = inner.namespace

    def describe(self) -> str:
        return self.inner.describe()

    def list(self, *, resource_version: str, limit: int = 0, continue_token: str = "") -> Any:
        from controllers.informers.listwatch import ListResult

        return ListResult([], self.rv, "")

    def watch(self, **kw: Any) -> Any:
        return self.inner.watch(**kw)


def _python_contender(kind: str, kubeconfig: str, n: int, cached: int, replay_from: str, phase: str,
                      conn: Any) -> None:
    """A contender's process: builds the informer, says "synced" (live runs), and sends its result."""
    recorder = _Recorder(n, phase)
    if kind == FLOOR:  # what the server sends, read and decoded, kept nowhere
        from controllers.informers.http_client import KubernetesClient

        lw = KubernetesClient.from_kubeconfig(kubeconfig).list_watch("v1", "Pod", NS)
        cpu0, start = time.process_time(), time.time()
        for event in lw.watch(resource_version=replay_from, timeout_seconds=600):
            recorder.hit(event.obj["metadata"]["name"], event.obj["metadata"].get("annotations"))
            if recorder.done.is_set():
                break
    elif kind == "ctrlscope":
        from controllers.informers import SharedInformer
        from controllers.informers.http_client import KubernetesClient
        from controllers.reconcile import Request
        from controllers.workqueue import RateLimitingQueue

        lw: Any = KubernetesClient.from_kubeconfig(kubeconfig).list_watch("v1", "Pod", NS)
        informer = SharedInformer(_ReplayListWatch(lw, replay_from) if replay_from else lw,
                                  freeze_gc_after_sync=True)
        queue = RateLimitingQueue("bench")

        def enqueue(obj: Any, new: Any = None) -> None:
            obj = new if new is not None else obj
            queue.add(Request.for_object(obj))
            recorder.hit(obj["metadata"]["name"], obj["metadata"].get("annotations"))

        informer.add_event_handler(on_add=enqueue, on_update=enqueue)
        cpu0, start = time.process_time(), time.time()
        informer.start()
        if phase:
            assert informer.wait_for_sync(300), "ctrlscope informer did not sync"
    else:
        import functools
        import threading

        from kubernetes import client, config
        from kubernetes.informer import ADDED, MODIFIED
        from kubernetes.informer import SharedInformer as OfficialInformer

        api = client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))
        list_func = api.list_namespaced_pod
        if replay_from:
            real_list = list_func

            @functools.wraps(real_list)
            def list_func(*args: Any, **kwargs: Any) -> Any:  # the LIST answered at replay_from (empty)
                if kwargs.get("watch"):
                    return real_list(*args, **kwargs)
                return client.V1PodList(items=[], metadata=client.V1ListMeta(resource_version=replay_from))

        official = OfficialInformer(list_func, namespace=NS)
        listed = [0]
        synced = threading.Event()

        def on_event(pod: Any) -> None:
            if not synced.is_set():  # the initial list's ADDED calls (live runs)
                listed[0] += 1
                if listed[0] >= cached:
                    synced.set()
                return
            recorder.hit(pod.metadata.name, pod.metadata.annotations)

        if not phase:
            synced.set()
        official.add_event_handler(ADDED, on_event)
        official.add_event_handler(MODIFIED, on_event)
        cpu0, start = time.process_time(), time.time()
        official.start()
        if phase:
            assert synced.wait(300), "official informer did not sync"
    if phase:
        cpu0, start = time.process_time(), time.time()
        conn.send("synced")
    if not recorder.done.wait(600):
        conn.send({"error": f"timeout: {recorder.count} of {n} handler calls"})
    else:
        conn.send({"events": n, "elapsed_s": recorder.t_last - start, "cpu_s": recorder.cpu_last - cpu0,
                   "t_last": recorder.t_last, "seen_names": recorder.seen_names, "seen_at": recorder.seen_at})
    conn.close()
    os._exit(0)  # informer threads blocked on an open watch need not be joined


class Running:
    """A contender started in its own process: ``synced()`` (live runs) then ``result()``."""

    def __init__(self, contender: Contender, kubeconfig: Path, n: int, cached: int, *, replay_from: str = "",
                 phase: str = "", go_binary: Path | None = None) -> None:
        self.contender = contender
        if contender.kind == "client-go":
            assert go_binary is not None
            args = [str(go_binary), "-kubeconfig", str(kubeconfig), "-namespace", NS, "-n", str(n),
                    "-content-type", contender.wire.lower()]
            args += ["-replay-from", replay_from] if replay_from else ["-phase", phase]
            self.proc: Any = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        else:
            import multiprocessing

            ctx = multiprocessing.get_context("spawn")
            self.conn, child = ctx.Pipe()
            self.proc = ctx.Process(target=_python_contender, daemon=True,
                                    args=(contender.kind, str(kubeconfig), n, cached, replay_from, phase, child))
            self.proc.start()
            child.close()

    def synced(self, timeout: float = 300) -> None:
        if isinstance(self.proc, subprocess.Popen):
            line = self.proc.stdout.readline().strip()
            if line != "synced":
                raise RuntimeError(f"{self.contender.name}: {line or self.proc.stderr.read()[-500:]}")
        elif not self.conn.poll(timeout) or self.conn.recv() != "synced":
            raise RuntimeError(f"{self.contender.name} did not sync")

    def result(self, timeout: float = 900) -> dict[str, Any]:
        if isinstance(self.proc, subprocess.Popen):
            out, err = self.proc.communicate(timeout=timeout)
            line = next((x for x in reversed(out.splitlines()) if x.startswith("{")), "")
            return json.loads(line) if line else {"error": (err.strip().splitlines() or ["no result"])[-1]}
        result = self.conn.recv() if self.conn.poll(timeout) else {"error": f"no result in {timeout:.0f} s"}
        self.proc.join(10)
        return result


# -- the runs -------------------------------------------------------------------------------------------
def _cpu(pids: list[int]) -> float:
    import psutil

    return sum(t.user + t.system for t in (psutil.Process(p).cpu_times() for p in pids))


def replay(contender: Contender, target: Target, kubeconfig: Path, rv: str, pods: int,
           go_binary: Path | None) -> dict[str, Any]:
    server0 = _cpu(target.pids)
    running = Running(contender, kubeconfig, 2 * pods, pods, replay_from=rv, go_binary=go_binary)
    result = running.result()
    if "error" not in result:
        result["events_per_s"] = result["events"] / result["elapsed_s"]
        result["server_us"] = (_cpu(target.pids) - server0) / result["events"] * 1e6
    return result


def live(contender: Contender, target: Target, kubeconfig: Path, count: int, pods: int, tag: str,
         rate: float | None, go_binary: Path | None) -> dict[str, Any]:
    running = Running(contender, kubeconfig, count, pods, phase=tag, go_binary=go_binary)
    running.synced()
    time.sleep(0.5)  # the watch opened after the LIST: let it connect before the first write
    writes = asyncio.run(_send(target, count, _patch(lambda: {"bench/phase": tag}), rate=rate))
    result = running.result()
    if "error" in result:
        return result
    index = [int(name.rpartition("-")[2]) for name in result["seen_names"]]
    write = sorted(at - writes["sent"][i] for i, at in zip(index, result["seen_at"], strict=True))
    after = sorted(at - writes["answered"][i] for i, at in zip(index, result["seen_at"], strict=True))
    return {"writes_per_s": writes["ok"] / (writes["t_last"] - writes["t_first"]),
            "delivered_per_s": result["events"] / (result["t_last"] - writes["t_first"]),
            "lag_s": result["t_last"] - writes["t_last"], "cpu_us": result["cpu_s"] / result["events"] * 1e6,
            "cpu_share": result["cpu_s"] / result["elapsed_s"],
            "p50_ms": _pct(write, 0.5), "p99_ms": _pct(write, 0.99), "after_p50_ms": _pct(after, 0.5),
            "after_p99_ms": _pct(after, 0.99), "events": result["events"]}


def _pct(ordered: list[float], q: float) -> float:
    """The q-quantile of ``ordered`` seconds, in ms."""
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))] * 1000


def _go_binary() -> tuple[Path | None, str]:
    from bench.go import build
    from controllers.golang import find_go

    go = find_go()
    if go is None:
        return None, "skipped: no Go toolchain"
    binary, why = build(go, "informer", instrumented=False)
    return binary, "" if binary else f"skipped: go build failed: {why}"


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_section(*, pods: int, runs: int, paced_rate: float, paced_seconds: float) -> None:
    """Start the real control plane, measure every contender, print the two tables."""
    all_cpus = set(range(os.cpu_count() or 1))
    os.sched_setaffinity(0, all_cpus)  # the canned section pinned us; the cluster and contenders float
    go_binary, go_why = _go_binary()
    paced_count = min(pods, int(paced_rate * paced_seconds))
    print(f"\nreal API server: starting kube-apiserver + etcd (controllers/realcluster); {uptime()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-informer-real-") as tmp, \
            real_cluster(Path(tmp), say=lambda line: print(line, flush=True)) as (cluster, target):
        kubeconfig = cluster.kubeconfig
        rv, seed_s = seed(target, pods)
        sizes = {wire: len(target.get(f"/api/v1/namespaces/{NS}/pods/{pod_name(0)}",
                                      accept=accept))
                 for wire, accept in (("JSON", "application/json"), ("protobuf", PROTOBUF))}
        why_not = replay_available(target, rv)
        measured = [c for c in CONTENDERS if not c.unsupported and (c.kind != "client-go" or go_binary)]
        replays: dict[Contender, dict[str, Any]] = {}
        for c in measured:  # every replay before any other write: the watch cache still holds the events
            if why_not:
                replays[c] = {"error": why_not}
                continue
            results = [replay(c, target, kubeconfig, rv, pods, go_binary) for _ in range(1 if c.kind == "official"
                                                                                       else runs)]
            ok = [r for r in results if "error" not in r]
            replays[c] = max(ok, key=lambda r: r["events_per_s"]) if ok else results[0]
        lives: dict[Contender, tuple[dict[str, Any], dict[str, Any]]] = {}
        for k, c in enumerate(c for c in measured if c.kind != FLOOR):
            full = live(c, target, kubeconfig, pods, pods, f"full-{k}", None, go_binary)
            paced = live(c, target, kubeconfig, paced_count, pods, f"paced-{k}", paced_rate, go_binary)
            lives[c] = (full, paced)
        end_load = uptime()
    skip = {c: (c.unsupported or go_why) for c in CONTENDERS if c not in replays}
    print_tables(pods=pods, runs=runs, rv=rv, seed_s=seed_s, sizes=sizes, replays=replays, lives=lives, skip=skip,
                 paced_rate=paced_rate, paced_count=paced_count, end_load=end_load)


def _table(header: list[str], rows: list[list[str]]) -> None:
    full = [header, *(r for r in rows if len(r) == len(header))]
    width = [max(len(r[i]) for r in full) for i in range(len(header))]
    print(" | ".join(h.ljust(w) for h, w in zip(header, width, strict=True)))
    print("-|-".join("-" * w for w in width))
    for r in rows:
        if len(r) < len(header):  # a row that is one explanation
            print(" | ".join(c.ljust(w) for c, w in zip(r[:-1], width, strict=False)) + " | " + r[-1])
        else:
            print(" | ".join(c.ljust(w) for c, w in zip(r, width, strict=True)))


def print_tables(*, pods: int, runs: int, rv: str, seed_s: float, sizes: dict[str, int],
                 replays: dict[Contender, dict[str, Any]], lives: dict[Contender, tuple[dict[str, Any], dict[str, Any]]],
                 skip: dict[Contender, str], paced_rate: float, paced_count: int, end_load: str) -> None:
    ours = replays.get(OURS, {})
    print(f"\ninformer on a real kube-apiserver v1.37.2 + etcd (controllers/realcluster, HTTPS + token), "
          f"{os.cpu_count()} CPUs shared by server, etcd, writer and contender; {pods:,} Pods "
          f"({sizes['JSON']:,} B JSON / {sizes['protobuf']:,} B protobuf each) created and patched once "
          f"through the API in {seed_s:.1f} s ({2 * pods / seed_s:,.0f} writes/s)")
    print(f"replay: the LIST answered empty at RV {rv}, the WATCH replays {2 * pods:,} events from the watch "
          f"cache; best of {runs} (the official informer: 1 run); CPU per event measured in each process\n")
    header = ["contender", "wire", "events/s", "contender CPU µs/event", "apiserver+etcd CPU µs/event",
              "ctrlscope is (events/s)"]
    rows: list[list[str]] = []
    for c in CONTENDERS:
        r = replays.get(c)
        if r is None:
            rows.append([c.name, c.wire, skip.get(c, "not measured")])
        elif "error" in r:
            rows.append([c.name, c.wire, f"failed: {r['error']}"])
        else:
            vs = f"{ours['events_per_s'] / r['events_per_s']:.1f}x" if "events_per_s" in ours else "-"
            rows.append([c.name, c.wire, f"{r['events_per_s']:,.0f}", f"{r['cpu_s'] / r['events'] * 1e6:,.1f}",
                         f"{r['server_us']:,.1f}", vs])
    _table(header, rows)
    print(f"\nlive: once the informer synced ({pods:,} Pods listed), {pods:,} patches with {CONCURRENCY} connections "
          f"as fast as the server takes them, then {paced_count:,} at {paced_rate:,.0f}/s; write->handler = patch "
          f"sent -> its handler call, response->handler = the server's answer -> the handler call (the watch path "
          f"alone); kept up = handler saw the last patch < {KEPT_UP_LAG:.0f} s after its response\n")
    header = ["contender", "wire", "full speed: writes/s", "delivered events/s", "write->handler p50 / p99",
              "CPU µs/event", f"paced {paced_rate:,.0f}/s: achieved", "write->handler p50 / p99",
              "response->handler p50 / p99", "CPU, % of a core"]
    rows = []

    def latency(r: dict[str, Any], key: str = "") -> str:
        if r["lag_s"] > KEPT_UP_LAG:
            return f"behind: {r['lag_s']:.1f} s at the end (p99 {r['p99_ms']:,.0f} ms)"
        return f"{r[key + 'p50_ms']:,.1f} / {r[key + 'p99_ms']:,.1f} ms"

    for c in CONTENDERS:
        if c.kind == FLOOR:
            continue
        if c not in lives:
            rows.append([c.name, c.wire, skip.get(c, "not measured")])
            continue
        full, paced = lives[c]
        cells = [c.name, c.wire]
        if "error" in full:
            cells += [f"failed: {full['error']}", "", "", ""]
        else:
            cells += [f"{full['writes_per_s']:,.0f}", f"{full['delivered_per_s']:,.0f}", latency(full),
                      f"{full['cpu_us']:,.1f}"]
        if "error" in paced:
            cells += [f"failed: {paced['error']}", "", "", ""]
        else:
            cells += [f"{paced['writes_per_s']:,.0f}/s", latency(paced), latency(paced, "after_"),
                      f"{paced['cpu_share'] * 100:.0f} %"]
        rows.append(cells)
    _table(header, rows)
    cpu = {c: r["cpu_s"] / r["events"] * 1e6 for c, r in replays.items() if "error" not in r}
    if OURS in cpu:
        peers = [f"{c.name.split(' (')[0]} {c.wire} {cpu[c] / cpu[OURS]:.1f}x" for c in cpu if c is not OURS]
        print(f"\nCPU per replayed event relative to ctrlscope's: {', '.join(peers)}")
    print(f"load: {end_load}")
