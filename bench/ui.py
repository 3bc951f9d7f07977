"""Browser benchmark: publish → DOM-update latency and main-thread long tasks in headless Chromium.

For each rate (watch events/s), a worker process publishes informer records for ``--duration``
seconds while a real Chromium page shows them, and the page itself measures:

- **latency**: for every events-panel row inserted into the DOM, ``Date.now()`` in a
  ``MutationObserver`` callback (it runs right after the DOM change) minus the moment the worker
  published the record. The publish time rides in the record's resourceVersion (µs), so the
  measurement needs no hook in the app: the bench reads what the page draws.
- **long tasks**: ``PerformanceObserver('longtask')`` (main-thread tasks over 50 ms): how many, the
  total and the longest — a frozen page shows up here even when rows still arrive.

Contenders, same machine, same run, same browser:

- ``ctrlscope``: the controller page (``/c/bench/bench/``) — frames over Redis Streams, one
  multiplexed socket, rows drawn once per animation frame (at most the newest 50 new rows a frame;
  the rest counted): the table shows the events received next to the rows drawn.
- peer ``channels tutorial``: the pattern of the Channels tutorial chat — channels_redis
  ``group_send`` per event to a plain ``AsyncWebsocketConsumer``, and a page that inserts one table
  row per websocket message (keeping the newest 300, as ctrlscope does).

First paint with 100,000 cached objects: ctrlscope's virtualized cache panel (time from navigation
start until the table's first rows are drawn, as the page records it) versus the peer, a page that
fetches the same snapshot and renders every row into one ``<table>`` (no virtualization).
``--paint-runs N`` repeats it, the contenders taking turns, and prints each run's marks from the
page's own timing entries (ms since navigation start): its HTML in, snapshot.json asked for, its
first and last byte, the paint (``--rates ""`` measures first paint alone).

- **input delay**: a real key press every 0.25 s while the load runs (CDP input, as a user's): the
  time from the browser receiving it (``event.timeStamp``) to its first listener running.

Targets: p99 ≤ 100 ms at 1,000 events/s; first paint ≤ 1 s with 100,000 objects (issue 5); at
5,000 events/s p99 ≤ 100 ms and no long task over 50 ms, at 10,000/s p99 ≤ 250 ms, and input delay
≤ 100 ms throughout (issue 16). ``--profile DIR`` saves a DevTools CPU profile of each ctrlscope run
and prints its hottest functions; ``--trace DIR`` saves a performance trace and prints where the main
thread's time went (script, style, layout, paint, GC).

Usage: ``python bench/ui.py [--duration 8] [--rates 1000,5000,10000] [--objects 100000] [--paint-runs 1] [--profile DIR]
[--trace DIR]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.transport import _delete_prefix, _pct, paced, publish_peer, start_daphne  # noqa: E402
from controllers.telemetry.publisher import RedisPublisher  # noqa: E402
from controllers.telemetry.redisboot import RedisHandle, ensure_redis  # noqa: E402
from controllers.telemetry.telemetry_observer import TelemetryObserver  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
INFORMER = "v1/Pod"
KEYS = 1000
WARMUP = 1.5
INPUT_EVERY = 0.25  # seconds between key presses while a run is measured
# events/s -> (p99 publish->DOM ms, longest main-thread task ms or None, worst input delay ms): issue 5's
# 1,000/s target and issue 16's 5,000/s and 10,000/s ones ("input stays responsive": under 100 ms,
# the threshold of an interaction that feels instant).
GOALS: dict[int, tuple[float, float | None, float]] = {1000: (100, None, 100), 5000: (100, 50, 100),
                                                       10000: (250, None, 100)}

# Installed before any page script runs: collects what the page drew and when, and long tasks.
MEASURE_JS = """
(() => {
  const m = window.__bench = { lat: [], longtasks: [], input: [], measuring: false };
  // Input delay: from the moment the browser received a key press (the event's timeStamp) to the
  // moment its first listener runs -- how long a busy main thread keeps a user waiting.
  document.addEventListener("keydown", (e) => { if (m.measuring) m.input.push(performance.now() - e.timeStamp); }, true);
  new PerformanceObserver((list) => {
    if (!m.measuring) return;
    for (const e of list.getEntries()) m.longtasks.push(e.duration);
  }).observe({ type: "longtask", buffered: false });
  window.__benchWatch = (tbodySelector, rvColumn) => {
    const tbody = document.querySelector(tbodySelector);
    new MutationObserver((mutations) => {
      if (!m.measuring) return;
      const now = Date.now();
      for (const mu of mutations) for (const node of mu.addedNodes) {
        if (node.nodeType === 1) record(node, now);
        if (node.nodeType === 11) for (const tr of node.children) record(tr, now);
      }
    }).observe(tbody, { childList: true });
    function record(tr, now) {
      const cell = tr.cells && tr.cells[rvColumn];
      const us = cell ? Number(cell.textContent) : NaN;
      if (us > 1e15) m.lat.push(now - us / 1000);
    }
  };
})();
"""

# Events the page received while measured: the records its client applied (one watch record per
# event), or the peer's websocket messages (one per event). Next to "rows drawn": what was summarised.
RECEIVED_JS = {"ctrlscope": "() => window.ctrlscope.client.stats.records", "peer": "() => window.__peerMsgs"}

# The peer: one DOM row per websocket message, newest first, 300 kept (the Channels tutorial way).
PEER_PAGE = """<!doctype html><meta charset="utf-8"><title>peer</title><script>MEASURE_JS</script>
<table><thead><tr><th>time</th><th>type</th><th>key</th><th>rv</th></tr></thead><tbody id="rows"></tbody></table>
<script>
  const tbody = document.getElementById("rows");
  window.__benchWatch("#rows", 3);
  const ws = new WebSocket("WS_URL");
  window.__peerMsgs = 0;
  ws.onmessage = (e) => {
    window.__peerMsgs += 1;
    const r = JSON.parse(e.data);
    const tr = document.createElement("tr");
    tr.innerHTML = "<td>" + new Date(r.ts).toISOString().slice(11, 23) + "</td><td>" + r.type + "</td><td>" + r.key + "</td><td>" + r.rv + "</td>";
    tbody.insertBefore(tr, tbody.firstChild);
    if (tbody.rows.length > 300) tbody.deleteRow(-1);
  };
  ws.onopen = () => { window.__peerOpen = true; };
</script>"""

# The peer for first paint: the same snapshot, every object as one table row.
PEER_TABLE_PAGE = """<!doctype html><meta charset="utf-8"><title>peer table</title>
<table><thead><tr><th>key</th><th>rv</th><th>phase</th></tr></thead><tbody id="rows"></tbody></table>
<script>
  fetch("SNAPSHOT_URL").then((r) => r.json()).then((snap) => {
    const html = [];
    for (const [key, v] of Object.entries(snap.state)) html.push("<tr><td>" + key + "</td><td>" + v.rv + "</td><td>" + (v.phase || "") + "</td></tr>");
    document.getElementById("rows").innerHTML = html.join("");
    requestAnimationFrame(() => setTimeout(() => { window.__firstPaint = performance.now(); }, 0));
  });
</script>"""


def _observer(redis_url: str, prefix: str) -> tuple[RedisPublisher, TelemetryObserver]:
    pub = RedisPublisher(redis_url, prefix=prefix)
    obs = TelemetryObserver(pub, worker="bench")
    obs.on_informer(INFORMER, fifo="DeltaFIFO", resync_period=0.0)
    obs.on_list(INFORMER, resource_version="1", items=0, duration=0.01)
    obs.on_reflector_state(INFORMER, state="watching")
    obs.on_reflector_state(INFORMER, state="synced")
    obs.on_reconcile_start("bench", key="default/seed", worker=0)
    obs.on_reconcile_end("bench", key="default/seed", worker=0, duration=0.001, result="success")
    return pub, obs


def publish_ctrlscope(redis_url: str, prefix: str, rate: int, duration: float) -> int:
    """Worker process: ``rate`` watch events/s through a real TelemetryObserver and publisher."""
    pub, obs = _observer(redis_url, prefix)
    pub.start()

    def emit(seq: int, ts_ms: float) -> None:
        key = f"default/pod-{seq % KEYS:05d}"
        rv = str(int(ts_ms * 1000))
        obs.on_watch_event(INFORMER, event_type="MODIFIED", key=key, resource_version=rv)
        obs.on_store(INFORMER, op="upsert", key=key, obj={"metadata": {"resourceVersion": rv}})

    try:
        return paced(rate, duration, emit)
    finally:
        pub.stop()


def _peer_message(seq: int, ts: float) -> dict[str, Any]:
    return {"ts": ts, "type": "MODIFIED", "key": f"default/pod-{seq % KEYS:05d}", "rv": str(int(ts * 1000))}


def _worker(kind: str, redis_url: str, prefix: str, rate: int, duration: float, out: Any) -> None:
    if kind == "ctrlscope":
        out.put(publish_ctrlscope(redis_url, prefix, rate, duration))
    else:  # the peer's worker: one channels_redis group_send per event
        out.put(publish_peer(redis_url, prefix, rate, duration, _peer_message))


def _summary(page: Any) -> dict[str, Any]:
    data = page.evaluate("({lat: window.__bench.lat, longtasks: window.__bench.longtasks, input: window.__bench.input})")
    lat = sorted(data["lat"])
    tasks = data["longtasks"]
    delays = sorted(data["input"])
    return {"rows": len(lat), "p50": _pct(lat, 50), "p99": _pct(lat, 99), "max": lat[-1] if lat else float("nan"),
            "longtasks": len(tasks), "longtask_ms": sum(tasks), "longest": max(tasks, default=0.0),
            "inputs": len(delays), "input_p50": _pct(delays, 50), "input_max": delays[-1] if delays else float("nan")}


def press_keys(page: Any, duration: float, every: float = INPUT_EVERY) -> None:
    """For ``duration`` seconds, a real key press (Shift: changes nothing) every ``every`` seconds."""
    end = time.monotonic() + duration
    while time.monotonic() < end:
        page.keyboard.press("Shift")
        time.sleep(min(every, max(0.0, end - time.monotonic())))


def start_cpu_profile(cdp: Any) -> None:
    """Start a DevTools CPU profile on a page's CDP session, sampling every 0.5 ms."""
    cdp.send("Profiler.enable")
    cdp.send("Profiler.setSamplingInterval", {"interval": 500})
    cdp.send("Profiler.start")


def stop_cpu_profile(cdp: Any, path: Path, n: int = 15) -> list[tuple[str, float]]:
    """Stop the profile ``start_cpu_profile`` began, save it to ``path`` (it opens in DevTools'
    Performance panel) and return its ``n`` hottest functions by self time."""
    profile = cdp.send("Profiler.stop")["profile"]
    cdp.send("Profiler.disable")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(profile))
    return top_functions(profile, n)


def top_functions(profile: dict[str, Any], n: int = 15) -> list[tuple[str, float]]:
    """The ``n`` functions with the most self time in a DevTools CPU profile: (name, ms)."""
    by_id = {node["id"]: node for node in profile["nodes"]}
    self_us: dict[str, float] = {}
    for node_id, delta in zip(profile.get("samples", []), profile.get("timeDeltas", []), strict=False):
        frame = by_id[node_id]["callFrame"]
        url = frame.get("url", "").rsplit("/", 1)[-1]
        name = f"{frame.get('functionName') or '(anonymous)'} {url}:{frame.get('lineNumber', 0) + 1}" if url \
            else frame.get("functionName") or "(program)"
        self_us[name] = self_us.get(name, 0.0) + delta
    return [(name, us / 1000) for name, us in sorted(self_us.items(), key=lambda kv: -kv[1])[:n]]


TRACE_CATEGORIES = ["devtools.timeline", "disabled-by-default-devtools.timeline", "v8"]
MAIN_THREAD_WORK = ("FunctionCall", "EvaluateScript", "TimerFire", "FireAnimationFrame", "EventDispatch",
                    "UpdateLayoutTree", "Layout", "PrePaint", "Paint", "Layerize", "UpdateLayer", "Commit",
                    "HitTest", "ParseHTML", "MinorGC", "MajorGC", "V8.GC_SCAVENGER", "V8.GC_MARK_COMPACTOR")


def main_thread_time(trace: dict[str, Any]) -> list[tuple[str, float, int]]:
    """Per trace event name on the renderer's main thread: (name, total ms, count), largest first.
    Events nest (a FunctionCall contains the Layout it forced), so totals overlap: read each as
    "time spent inside this kind of work"."""
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    main = {(e.get("pid"), e.get("tid")) for e in events
            if e.get("ph") == "M" and e.get("name") == "thread_name" and e.get("args", {}).get("name") == "CrRendererMain"}
    totals: dict[str, list[float]] = {}
    for e in events:
        if e.get("ph") == "X" and (e.get("pid"), e.get("tid")) in main and e.get("name") in MAIN_THREAD_WORK:
            t = totals.setdefault(e["name"], [0.0, 0])
            t[0] += e.get("dur", 0) / 1000
            t[1] += 1
    return sorted(((n, ms, int(c)) for n, (ms, c) in totals.items()), key=lambda x: -x[1])


def run_rate(browser: Any, kind: str, rate: int, duration: float, redis_url: str, run_dir: Path,
             profile_dir: Path | None = None, trace_dir: Path | None = None) -> dict[str, Any]:
    prefix = f"benchui-{uuid.uuid4().hex[:8]}:"
    app = "dashboard.asgi:application" if kind == "ctrlscope" else "bench.peer_asgi:application"
    os.environ["CTRLSCOPE_PREFIX"] = prefix
    proc, port = start_daphne(app, redis_url, prefix, run_dir)
    page = browser.new_page()
    try:
        page.add_init_script(MEASURE_JS)
        if kind == "ctrlscope":
            pub, _ = _observer(redis_url, prefix)  # the worker's topics exist before the page opens
            pub.flush()
            pub.stop()
            page.goto(f"http://127.0.0.1:{port}/c/bench/bench/")
            page.wait_for_selector('#conn[data-state="live"]', timeout=20_000)
            page.wait_for_function("() => window.ctrlscope.client.topics.get('w/bench/informer/v1_Pod')?.cursor",
                                   timeout=20_000)
            page.evaluate("window.__benchWatch('#ievents', 5)")
            # The measured panel on screen, as for a user watching it (panels off screen cost less).
            page.evaluate("document.getElementById('events-panel').scrollIntoView({block: 'start'})")
        else:
            page.goto(f"http://127.0.0.1:{port}/healthz")
            page.set_content(PEER_PAGE.replace("MEASURE_JS", MEASURE_JS)
                             .replace("WS_URL", f"ws://127.0.0.1:{port}/ws/peer/"))
            page.wait_for_function("() => window.__peerOpen === true", timeout=20_000)
            time.sleep(0.3)  # group_add settles
        out: Any = mp.get_context("spawn").Queue()
        worker = mp.get_context("spawn").Process(target=_worker, args=(kind, redis_url, prefix, rate, duration + WARMUP, out))
        worker.start()
        time.sleep(WARMUP)
        cdp = None
        if profile_dir is not None and kind == "ctrlscope":
            cdp = page.context.new_cdp_session(page)
            start_cpu_profile(cdp)
        tracing = trace_dir is not None and kind == "ctrlscope"
        if tracing:
            page.context.browser.start_tracing(page=page, categories=TRACE_CATEGORIES)
        received = RECEIVED_JS[kind]
        received_before = page.evaluate(received)
        page.evaluate("window.__bench.measuring = true")
        press_keys(page, duration)
        page.evaluate("window.__bench.measuring = false")
        received_during = page.evaluate(received) - received_before
        hot: list[tuple[str, float]] = []
        work: list[tuple[str, float, int]] = []
        if tracing and trace_dir is not None:
            raw = page.context.browser.stop_tracing()
            trace_dir.mkdir(parents=True, exist_ok=True)
            (trace_dir / f"ui-{kind}-{rate}.trace.json").write_bytes(raw)
            work = main_thread_time(json.loads(raw))
        if cdp is not None and profile_dir is not None:
            hot = stop_cpu_profile(cdp, profile_dir / f"ui-{kind}-{rate}.cpuprofile")
        published = out.get(timeout=120)
        worker.join(30)
        result = _summary(page)
        if kind == "ctrlscope":
            result["summarising"] = page.evaluate("!document.getElementById('summarising').hidden")
        result.update(kind=kind, rate=rate, published=published, hot=hot, work=work, received=received_during)
        return result
    finally:
        page.close()
        proc.terminate()
        proc.wait(10)
        _delete_prefix(redis_url, prefix)


# Where one first paint's time went, from the page's Resource Timing entry of its snapshot.json
# (ms since navigation start): the request sent, the first byte of the answer, the last byte.
SNAPSHOT_TIMING_JS = """() => {
  const e = performance.getEntriesByType("resource").find((r) => r.name.includes("/snapshot.json"));
  const nav = performance.getEntriesByType("navigation")[0];
  return Object.assign({ html: nav.responseEnd },
    e ? { request: e.requestStart, first_byte: e.responseStart, last_byte: e.responseEnd } : {});
}"""


def first_paint(browser: Any, kind: str, objects: int, redis_url: str, run_dir: Path) -> dict[str, float]:
    """ms from navigation start until ``objects`` cached objects are on screen (``paint``), and when
    the page asked for its snapshot.json, got its first byte and its last (``request``, ``first_byte``,
    ``last_byte``; the peer's from its own start)."""
    prefix = f"benchui-{uuid.uuid4().hex[:8]}:"
    os.environ["CTRLSCOPE_PREFIX"] = prefix
    proc, port = start_daphne("dashboard.asgi:application", redis_url, prefix, run_dir)
    pub, obs = _observer(redis_url, prefix)
    obs.on_store(INFORMER, op="replace", key="", obj=[
        (f"default/pod-{i:06d}", {"metadata": {"resourceVersion": str(1000 + i), "uid": f"uid-{i:06d}", "generation": 1},
                                  "status": {"phase": "Running"}}) for i in range(objects)])
    pub.flush()
    pub.stop()
    page = browser.new_page()
    try:
        base = f"http://127.0.0.1:{port}"
        if kind == "ctrlscope":
            page.goto(f"{base}/c/bench/bench/")
            page.wait_for_function(f"() => window.ctrlscopeCache && window.ctrlscopeCache.cache.firstPaint && "
                                   f"document.getElementById('cache-count').textContent === '{objects:,}'",
                                   timeout=60_000)
            return {"paint": page.evaluate("window.ctrlscopeCache.cache.firstPaint"), **page.evaluate(SNAPSHOT_TIMING_JS)}
        page.goto(f"{base}/healthz")
        snapshot = f"{base}/c/bench/informer/v1_Pod/snapshot.json"
        page.evaluate("(html) => { document.open(); document.write(html); document.close(); }",
                      PEER_TABLE_PAGE.replace("SNAPSHOT_URL", snapshot))
        start = page.evaluate("performance.now()")
        page.wait_for_function("() => window.__firstPaint !== undefined", timeout=120_000)
        timing = {k: v - start for k, v in page.evaluate(SNAPSHOT_TIMING_JS).items() if k != "html"}  # its own page
        return {"paint": page.evaluate("window.__firstPaint") - start, **timing}
    finally:
        page.close()
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:  # a loaded machine: a run's result is not lost to a slow exit
            proc.kill()
            proc.wait(10)
        _delete_prefix(redis_url, prefix)


def prepare_browser_bench() -> tuple[Path, RedisHandle]:
    """What a browser bench does before its first page (this one and bench/overview.py): it stops at
    once without Chromium; it makes run/, finds a Redis (``ensure_redis``) and puts it, demo mode and
    the bench's database into this process's environment, which the daphnes it starts inherit; it
    migrates that database. Returns run/ and the Redis."""
    if not os.path.exists(CHROMIUM):
        raise SystemExit(f"{CHROMIUM} is missing (apt-get install chromium)")
    run_dir = ROOT / "run"
    run_dir.mkdir(exist_ok=True)
    handle = ensure_redis(run_dir)
    os.environ.update(REDIS_URL=handle.url, CTRLSCOPE_DEMO="1", CTRLSCOPE_DB=str(run_dir / "bench.sqlite3"))
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, check=True)
    return run_dir, handle


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=8.0, help="measured seconds per run")
    parser.add_argument("--rates", default="1000,5000,10000")
    parser.add_argument("--profile", type=Path, default=None,
                        help="write a DevTools CPU profile of each ctrlscope run here and print its hottest functions")
    parser.add_argument("--trace", type=Path, default=None,
                        help="write a DevTools performance trace of each ctrlscope run here and print where the "
                             "main thread's time went (script, style, layout, paint, GC)")
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--contenders", default="ctrlscope,peer")
    parser.add_argument("--paint-runs", type=int, default=1,
                        help="first paints per contender, taking turns (the table shows each run and the median)")
    args = parser.parse_args()
    run_dir, handle = prepare_browser_bench()
    from playwright.sync_api import sync_playwright

    contenders = args.contenders.split(",")
    rows: list[dict[str, Any]] = []
    paints: dict[str, list[dict[str, float]]] = {kind: [] for kind in contenders}
    print(f"redis {handle.url} ({handle.source}); {os.cpu_count()} CPUs; {args.duration:g} s measured per run", flush=True)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            viewport = {"width": 1400, "height": 900}
            # The peer pages are inline scripts put into a page that our server answers with its
            # Content-Security-Policy (script-src 'self'), which blocks them; the Channels tutorial
            # they stand for has no such policy. ctrlscope's pages keep theirs.
            contexts = {"ctrlscope": browser.new_context(viewport=viewport),
                        "peer": browser.new_context(viewport=viewport, bypass_csp=True)}
            for rate in [int(x) for x in args.rates.split(",") if x]:
                for kind in contenders:
                    rows.append(run_rate(contexts[kind], kind, rate, args.duration, handle.url, run_dir, args.profile,
                                         args.trace))
                    print(f"  done: {kind} {rate:,}/s", flush=True)
            for run in range(args.paint_runs):
                for kind in contenders:  # taking turns: a load on the shared machine hits both alike
                    paints[kind].append(first_paint(contexts[kind], kind, args.objects, handle.url, run_dir))
                    marks = ", ".join(f"{k} {v:,.0f}" for k, v in paints[kind][-1].items())
                    print(f"  done: first paint {kind} ({run + 1}/{args.paint_runs}): {marks} (ms)", flush=True)
            browser.close()
    finally:
        handle.stop()
    names = {"ctrlscope": "ctrlscope controller page", "peer": "peer: channels tutorial (group_send, 1 row/msg)"}
    print()
    print("| page | events/s | events received | rows drawn | p50 ms | p99 ms | max ms | long tasks | long-task ms "
          "| longest ms | key presses | input delay p50 / max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        note = " (summarising)" if r.get("summarising") else ""
        print(f"| {names[r['kind']]}{note} | {r['rate']:,} | {r['received']:,} | {r['rows']:,} | {r['p50']:.1f} | {r['p99']:.1f} | "
              f"{r['max']:.1f} | {r['longtasks']} | {r['longtask_ms']:.0f} | {r['longest']:.0f} | {r['inputs']} | "
              f"{r['input_p50']:.1f} / {r['input_max']:.1f} |")
    for r in rows:
        if r.get("hot"):
            print(f"\nhottest functions, ctrlscope page at {r['rate']:,}/s (self ms in {args.duration:g} s):")
            for name, ms in r["hot"]:
                print(f"  {ms:8.1f}  {name}")
        if r.get("work"):
            print(f"\nmain thread, ctrlscope page at {r['rate']:,}/s (ms inside each kind of work in {args.duration:g} s; "
                  "nested, so they overlap):")
            for name, ms, count in r["work"]:
                print(f"  {ms:8.1f}  {name} ({count:,})")
    print()
    print(f"| page | first paint, {args.objects:,} cached objects: median (runs) | page's HTML in | snapshot.json "
          "asked | first byte | last byte |")
    print("|---|---:|---:|---:|---:|---:|")
    labels = {"ctrlscope": "ctrlscope cache panel (virtualized)", "peer": "peer: every row in one <table>"}
    for kind, runs in paints.items():
        if not runs:
            continue
        mid = sorted(runs, key=lambda r: r["paint"])[len(runs) // 2]
        each = ", ".join(f"{r['paint']:,.0f}" for r in runs)
        parts = " | ".join(f"{mid[k]:,.0f} ms" if k in mid else "–" for k in ("html", "request", "first_byte", "last_byte"))
        print(f"| {labels[kind]} | {mid['paint']:,.0f} ms ({each}) | {parts} |")
    print()
    for r in (r for r in rows if r["kind"] == "ctrlscope"):
        goal = GOALS.get(r["rate"])
        if goal is None:
            continue
        p99, longest, inputs = goal
        met = r["p99"] <= p99 and (longest is None or r["longest"] <= longest) and r["input_max"] <= inputs
        print(f"target at {r['rate']:,} events/s: p99 <= {p99} ms"
              + (f", no long task over {longest} ms" if longest is not None else "")
              + f", input delay <= {inputs} ms: {'MET' if met else 'NOT MET'} (p99 {r['p99']:.1f} ms, longest task "
              f"{r['longest']:.0f} ms, input delay max {r['input_max']:.1f} ms)")
    if paints.get("ctrlscope"):
        median = sorted(r["paint"] for r in paints["ctrlscope"])[len(paints["ctrlscope"]) // 2]
        print(f"target first paint <= 1 s with {args.objects:,} objects: {'MET' if median <= 1000 else 'NOT MET'} "
              f"(median {median:,.0f} ms)")


if __name__ == "__main__":
    main()
