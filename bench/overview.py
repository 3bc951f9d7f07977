"""Browser benchmark: the overview (/) with a generated fleet of 20 clusters × 200 controllers.

A fleet process (bench/fleet.py: the real runtime's publishers, 40 workers, findings opened by the
real detectors) publishes into one Redis and keeps a steady low rate of updates (``--rate``
controller updates/s, a metrics sample per worker a second). Two dashboards serve that same Redis
prefix at the same time: this checkout's, and the peer, the overview as it was before the fleet work
(``--peer-rev``, extracted with ``git archive`` into ``run/``). Each page is opened in the same
headless Chromium, one after the other, while the fleet runs, and measured by the page itself:

- **complete**: ms from navigation start until the overview holds the whole fleet — every cluster
  known (each worker's components snapshot arrived: until then a worker has no cluster), every
  controller counted and every box it draws drawn (ctrlscope: ``window.ctrlscope.overview`` is idle
  and counts them all; the peer: every cluster's section and every controller card is in the DOM) —
  polled every animation frame.
- **FCP**: the browser's first contentful paint (the page's frame, before any data).
- **long tasks** (``PerformanceObserver('longtask')``, main-thread tasks over 50 ms): during the load
  (until complete) and during ``--duration`` s of updates after it: count, total ms, longest ms.
- **input delay**: a real key press every 0.25 s during the updates (as bench/ui.py), from the
  browser receiving it to its first listener.

Contenders: ``ctrlscope`` (this checkout, as a user first sees it: the healthy clusters collapsed,
the ones with problems open), ``ctrlscope expanded`` (every group opened, as remembered in
localStorage: all 200 pipelines drawn, the same content as the peer) and ``peer``.

Usage: ``python bench/overview.py [--duration 30] [--rate 50] [--peer-rev c30f186] [--screenshots DIR]``
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

from bench.fleet import Fleet, cluster_names  # noqa: E402
from bench.transport import _delete_prefix, _pct, start_daphne  # noqa: E402
from bench.ui import CHROMIUM, CHROMIUM_ARGS, prepare_browser_bench, press_keys  # noqa: E402

PEER_REV = "c30f18661835bb6c9a5023a9ba9fe1ff28d445bd"  # main just before the fleet overview (80a88b4)
STORAGE_KEY = "ctrlscope.overview.collapsed"

# Installed before any page script: long tasks with their start, key-press input delay.
MEASURE_JS = """
(() => {
  const m = window.__bench = { longtasks: [], input: [], measuring: false };
  document.addEventListener("keydown", (e) => { if (m.measuring) m.input.push(performance.now() - e.timeStamp); }, true);
  new PerformanceObserver((list) => { for (const e of list.getEntries()) m.longtasks.push([e.startTime, e.duration]); })
    .observe({ type: "longtask", buffered: true });
})();
"""

# The overview holds the whole fleet: polled every frame; the first time it holds, when is kept.
READY_JS = {
    "ctrlscope": """(n) => { const o = window.ctrlscope && window.ctrlscope.overview;
        const ok = o && o.idle && o.stats.controllers >= n.controllers && o.stats.clusters >= n.clusters; if (ok && !window.__ready) window.__ready = performance.now(); return ok; }""",
    "expanded": """(n) => { const o = window.ctrlscope && window.ctrlscope.overview;
        const ok = o && o.idle && o.stats.controllers >= n.controllers && o.stats.clusters >= n.clusters
          && document.querySelectorAll('#overview .ctl-card[data-controller]').length >= n.controllers;
        if (ok && !window.__ready) window.__ready = performance.now(); return ok; }""",
    "peer": """(n) => { const ok = document.querySelectorAll('#overview .ctl-card[data-controller]').length >= n.controllers
          && document.querySelectorAll('#overview .cluster:not([data-cluster=""])').length >= n.clusters;
        if (ok && !window.__ready) window.__ready = performance.now(); return ok; }""",
}


def run_fleet(redis_url: str, prefix: str, clusters: int, controllers: int, workers: int, rate: float,
              ready: Any, stop: Any, out: Any) -> None:
    """The fleet process: publish, say so, then updates until told to stop."""
    fleet = Fleet(redis_url, prefix, clusters=clusters, controllers=controllers, workers=workers)
    fleet.publish_initial()
    ready.set()
    try:
        out.put(fleet.run(float("inf"), rate, stop=stop.is_set))
    finally:
        fleet.stop()


def peer_tree(rev: str, run_dir: Path) -> Path:
    """The peer's source tree (``git archive`` of ``rev``), extracted once into run/."""
    where = run_dir / f"peer-overview-{rev[:12]}"
    if not (where / "dashboard").exists():
        where.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    return where


def start_dashboard(tree: Path, redis_url: str, prefix: str, run_dir: Path) -> tuple[subprocess.Popen, int]:
    """daphne serving the dashboard of source tree ``tree`` (this checkout or the peer's), given 60 s
    to answer: the fleet's workers already load the machine while it starts."""
    return start_daphne("dashboard.asgi:application", redis_url, prefix, run_dir, tree=tree, timeout=60)


def measure(browser: Any, kind: str, port: int, fleet: dict[str, int], duration: float, shots: Path | None) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        page.add_init_script(MEASURE_JS)
        if kind == "expanded":  # every group opened, as a user who expanded them all is remembered
            groups = {f"https://{c}.k8s.example:6443": False for c in cluster_names(40)}
            page.add_init_script(f"localStorage.setItem({json.dumps(STORAGE_KEY)}, {json.dumps(json.dumps(groups))})")
        page.goto(f"http://127.0.0.1:{port}/")
        page.wait_for_function(READY_JS[kind], arg=fleet, polling="raf", timeout=120_000)
        ready = page.evaluate("window.__ready")
        fcp = page.evaluate("(performance.getEntriesByName('first-contentful-paint')[0] || {}).startTime || null")
        if shots is not None:
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / f"overview-{kind}.png"))
        time.sleep(1.0)  # settle: what is measured is the page under updates, not the load's tail
        start = page.evaluate("performance.now()")
        page.evaluate("window.__bench.measuring = true")
        press_keys(page, duration)
        page.evaluate("window.__bench.measuring = false")
        end = page.evaluate("performance.now()")
        data = page.evaluate("({longtasks: window.__bench.longtasks, input: window.__bench.input})")
        cards = page.evaluate("document.querySelectorAll('#overview .ctl-card[data-controller]').length")
        nodes = page.evaluate("document.getElementsByTagName('*').length")
    finally:
        context.close()
    load = [d for t, d in data["longtasks"] if t < ready]
    steady = [d for t, d in data["longtasks"] if start <= t < end]
    delays = sorted(data["input"])
    return {"kind": kind, "ready": ready, "fcp": fcp, "cards": cards, "nodes": nodes,
            "load_tasks": len(load), "load_ms": sum(load), "load_longest": max(load, default=0.0),
            "tasks": len(steady), "task_ms": sum(steady), "longest": max(steady, default=0.0),
            "input_p50": _pct(delays, 50), "input_max": delays[-1] if delays else float("nan"), "inputs": len(delays)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=30.0, help="measured seconds of updates per page")
    parser.add_argument("--rate", type=float, default=50.0, help="controller updates/s over the fleet")
    parser.add_argument("--clusters", type=int, default=20)
    parser.add_argument("--controllers", type=int, default=200)
    parser.add_argument("--workers", type=int, default=40)
    parser.add_argument("--peer-rev", default=PEER_REV)
    parser.add_argument("--contenders", default="ctrlscope,expanded,peer")
    parser.add_argument("--screenshots", type=Path, default=None)
    args = parser.parse_args()
    run_dir, handle = prepare_browser_bench()
    from playwright.sync_api import sync_playwright

    prefix = f"benchov-{uuid.uuid4().hex[:8]}:"
    ctx = mp.get_context("spawn")
    ready, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    fleet = ctx.Process(target=run_fleet, args=(handle.url, prefix, args.clusters, args.controllers, args.workers, args.rate,
                                                ready, stop, out))
    servers: dict[str, tuple[subprocess.Popen, int]] = {}
    rows: list[dict[str, Any]] = []
    print(f"redis {handle.url} ({handle.source}); {os.cpu_count()} CPUs; fleet {args.clusters} clusters × {args.controllers} "
          f"controllers on {args.workers} workers, {args.rate:g} updates/s; {args.duration:g} s measured per page", flush=True)
    try:
        fleet.start()
        if not ready.wait(120):
            raise RuntimeError("the fleet did not publish")
        servers["ctrlscope"] = start_dashboard(ROOT, handle.url, prefix, run_dir)
        servers["peer"] = start_dashboard(peer_tree(args.peer_rev, run_dir), handle.url, prefix, run_dir)
        time.sleep(3.0)  # the stuck controllers' findings open (the fleet's thresholds are 2 s)
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
            for kind in args.contenders.split(","):
                port = servers["peer" if kind == "peer" else "ctrlscope"][1]
                rows.append(measure(browser, kind, port, {"controllers": args.controllers, "clusters": args.clusters}, args.duration,
                                    args.screenshots))
                print(f"  done: {kind}", flush=True)
            browser.close()
    finally:
        stop.set()
        fleet.join(30)
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(10)
        _delete_prefix(handle.url, prefix)
        handle.stop()
    names = {"ctrlscope": "ctrlscope overview (healthy clusters collapsed)", "expanded": "ctrlscope overview, every group expanded",
             "peer": f"peer: the overview before ({args.peer_rev[:7]})"}
    print()
    print(f"| page | FCP ms | complete ms | long tasks during load (n / total / longest ms) | cards drawn | DOM nodes "
          f"| long tasks in {args.duration:g} s of updates (n / total / longest ms) | input delay p50 / max ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {names[r['kind']]} | {r['fcp'] or float('nan'):.0f} | {r['ready']:,.0f} | {r['load_tasks']} / {r['load_ms']:,.0f} / "
              f"{r['load_longest']:.0f} | {r['cards']} | {r['nodes']:,} | {r['tasks']} / {r['task_ms']:,.0f} / {r['longest']:.0f} | "
              f"{r['input_p50']:.1f} / {r['input_max']:.1f} |")


if __name__ == "__main__":
    main()
