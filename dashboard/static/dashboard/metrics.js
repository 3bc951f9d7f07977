/*
 * The controller page's Metrics panel: controller-runtime's metric families for this controller and
 * its workqueue as live charts over the last 5 minutes, each labelled with the PromQL a Grafana user
 * would write for it.
 *
 * Data: the worker's w/{worker}/metrics topic — one sample set per second (records) and the latest as
 * state (see controllers/telemetry/metrics_sampler.py). The page subscribes with history, so a fresh
 * page draws the minutes the stream still holds at once; rates and quantiles are computed here from
 * consecutive samples (charts.js). Registered in window.ctrlscopePanels and started by controller_page.js.
 * Charts are redrawn at most twice a second (once a second when nothing arrives: the time axis
 * moves on), and at once when the theme changes.
 */
(function () {
  "use strict";
  const UI = window.ctrlscopeUI;
  const { el } = UI;
  const C = window.ctrlscopeCharts;

  const SPAN_MS = 5 * 60 * 1000;
  const MAX_SAMPLES = 600;     // 10 minutes at one a second: what the worker retains
  const RATE_WINDOW = 10000;   // rate(...[10s])
  const QUANTILE_WINDOW = 60000; // histogram_quantile(..., rate(..._bucket[1m]))
  const P = window.ctrlscopeProtocol;
  // controller_runtime_reconcile_total's result labels (terminal and panic are counted as errors there).
  const RESULTS = [P.ReconcileResult.SUCCESS, P.ReconcileResult.ERROR, P.ReconcileResult.REQUEUE, P.ReconcileResult.REQUEUE_AFTER];

  // Three significant digits at most, no trailing zeros: 12.5, 0.5, 1,234.
  const fmtNum = (v) => (v >= 100 ? Math.round(v).toLocaleString() : String(Number(v.toFixed(v >= 10 ? 1 : 2))));
  const fmtRate = (v) => fmtNum(v) + "/s";
  function fmtSeconds(v) {
    if (!v) return "0";
    if (v < 0.001) return fmtNum(v * 1e6) + " µs";
    if (v < 1) return fmtNum(v * 1000) + " ms";
    return fmtNum(v) + " s";
  }

  function init(api) {
    const { client, page } = api;
    const topic = page.topics.metrics;
    const box = document.getElementById("metrics-charts");
    const note = document.getElementById("metrics-note");
    if (!box) return;
    const samples = []; // {ts, f: this controller's families}, oldest first
    let buckets = null, dirty = true, lastDraw = 0, seen = false;

    function mine(rec) {
      const fams = rec.families || {};
      if (fams[page.controller]) return fams[page.controller];
      // The controller's name may differ from its URL segment (names are made topic-safe).
      for (const name in fams) if (P.topicPart(name) === page.controller) return fams[name];
      return null;
    }
    function add(rec) {
      if (!rec || rec.k !== P.RecordKind.METRICS || typeof rec.ts !== "number") return;
      seen = true;
      const f = mine(rec);
      if (!f) return;
      const last = samples.length ? samples[samples.length - 1].ts : -Infinity;
      if (rec.ts <= last) return; // the snapshot's latest repeats the last record
      samples.push({ ts: rec.ts, f: f });
      if (samples.length > MAX_SAMPLES) samples.splice(0, samples.length - MAX_SAMPLES);
      dirty = true;
    }
    client.on("records", (t, records, id, frame) => {
      if (t !== topic) return;
      if (frame.s && frame.s.buckets) buckets = frame.s.buckets;
      for (const r of records) add(r);
      schedule();
    });
    client.on("snapshot", (t, state) => {
      if (t !== topic) return;
      buckets = state.get("buckets") || buckets;
      add(state.get("latest"));
      dirty = true; schedule();
    });
    api.want(topic);

    // ---- the charts: what each one plots, by real metric name --------------------------------
    const sel = '{controller="' + page.controller + '"}';
    const qsel = '{name="' + page.controller + '"}';
    const val = (name) => samples.map((s) => (typeof s.f[name] === "number" ? s.f[name] : null));
    const counter = (name) => samples.map((s) => s.f[name] || 0);
    const ts = () => samples.map((s) => s.ts);
    const p = (q, name) => C.quantile(q, ts(), samples.map((s) => s.f[name]), buckets && buckets[name], QUANTILE_WINDOW);
    const CHARTS = [
      { id: "reconciles", title: "reconciles/s by result", stacked: true, fmt: fmtRate,
        expr: "sum by (result) (rate(controller_runtime_reconcile_total" + sel + "[10s]))",
        series: () => RESULTS.map((r) => ({ label: r, color: "--r-" + r,
          values: C.rate(ts(), samples.map((s) => (s.f.controller_runtime_reconcile_total || {})[r] || 0), RATE_WINDOW) })) },
      { id: "reconcile-time", title: "reconcile time p50 / p99 (histogram_quantile of bucket deltas)", fmt: fmtSeconds,
        expr: "histogram_quantile(0.99, rate(controller_runtime_reconcile_time_seconds_bucket" + sel + "[1m]))",
        series: () => [{ label: "p50", color: "--accent", values: p(0.5, "controller_runtime_reconcile_time_seconds") },
          { label: "p99", color: "--r-requeue", values: p(0.99, "controller_runtime_reconcile_time_seconds") }] },
      { id: "errors", title: "reconcile errors/s", fmt: fmtRate,
        expr: ["controller_runtime_reconcile_errors_total", "controller_runtime_terminal_reconcile_errors_total",
          "controller_runtime_reconcile_panics_total"].map((m) => "rate(" + m + sel + "[10s])").join(" · "),
        series: () => [
          { label: "errors", color: "--r-error", values: C.rate(ts(), counter("controller_runtime_reconcile_errors_total"), RATE_WINDOW) },
          { label: "terminal", color: "--r-terminal", values: C.rate(ts(), counter("controller_runtime_terminal_reconcile_errors_total"), RATE_WINDOW) },
          { label: "panics", color: "--r-panic", values: C.rate(ts(), counter("controller_runtime_reconcile_panics_total"), RATE_WINDOW) }] },
      { id: "depth", title: "workqueue depth", fmt: fmtNum, expr: "workqueue_depth" + qsel,
        series: () => [{ label: "depth", color: "--accent", values: val("workqueue_depth") }] },
      { id: "adds", title: "workqueue adds/s", fmt: fmtRate, expr: "rate(workqueue_adds_total" + qsel + "[10s])",
        series: () => [{ label: "adds", color: "--ok", values: C.rate(ts(), counter("workqueue_adds_total"), RATE_WINDOW) }] },
      { id: "retries", title: "workqueue retries/s", fmt: fmtRate, expr: "rate(workqueue_retries_total" + qsel + "[10s])",
        series: () => [{ label: "retries", color: "--bad", values: C.rate(ts(), counter("workqueue_retries_total"), RATE_WINDOW) }] },
      { id: "queue-duration", title: "time in queue p99 (histogram_quantile of bucket deltas)", fmt: fmtSeconds,
        expr: "histogram_quantile(0.99, rate(workqueue_queue_duration_seconds_bucket" + qsel + "[1m]))",
        series: () => [{ label: "p99", color: "--accent", values: p(0.99, "workqueue_queue_duration_seconds") }] },
      { id: "work-duration", title: "work duration p99 (histogram_quantile of bucket deltas)", fmt: fmtSeconds,
        expr: "histogram_quantile(0.99, rate(workqueue_work_duration_seconds_bucket" + qsel + "[1m]))",
        series: () => [{ label: "p99", color: "--accent", values: p(0.99, "workqueue_work_duration_seconds") }] },
      { id: "workers", title: "active workers vs max", fmt: fmtNum, minMax: 1,
        expr: "controller_runtime_active_workers" + sel + " · controller_runtime_max_concurrent_reconciles" + sel,
        series: () => [{ label: "active", color: "--ok", values: val("controller_runtime_active_workers") },
          { label: "max", color: "--muted", values: val("controller_runtime_max_concurrent_reconciles") }] },
      { id: "in-progress", title: "work in progress", fmt: fmtSeconds,
        expr: "workqueue_unfinished_work_seconds" + qsel + " · workqueue_longest_running_processor_seconds" + qsel,
        series: () => [{ label: "unfinished work", color: "--r-requeue", values: val("workqueue_unfinished_work_seconds") },
          { label: "longest running", color: "--accent", values: val("workqueue_longest_running_processor_seconds") }] },
    ];

    const figures = new Map();
    for (const c of CHARTS) {
      const canvas = el("canvas", { className: "metric-canvas", width: 320, height: 110 });
      const legend = el("div", { className: "metric-legend" });
      const fig = el("figure", { className: "metric", dataset: { chart: c.id } },
        el("figcaption", null, el("div", { className: "metric-title" }, c.title), el("code", { className: "metric-expr" }, c.expr)),
        canvas, legend);
      box.appendChild(fig);
      figures.set(c.id, { canvas: canvas, legend: legend, data: [] });
    }

    function draw() {
      dirty = false;
      box.hidden = !samples.length; // no empty charts for a worker that publishes no samples
      if (box.hidden) { note.textContent = seen ? "the worker's samples do not include this controller yet" : "waiting for the worker's metric samples (runcontrollers publishes them once a second)…"; return; }
      // The time axis ends at the worker's now: when its samples stop, the charts show the gap grow.
      const t = ts(), t1 = Math.max(api.workerNow(), t.length ? t[t.length - 1] : 0), t0 = t1 - SPAN_MS;
      for (const c of CHARTS) {
        const f = figures.get(c.id);
        const series = c.series();
        f.data = series;
        C.drawChart(f.canvas, { ts: t, t0: t0, t1: t1, series: series, stacked: c.stacked, fmt: c.fmt, minMax: c.minMax });
        f.legend.replaceChildren(...series.map((s) => {
          let last = null;
          for (let i = s.values.length - 1; i >= 0 && last === null; i--) last = s.values[i];
          return el("span", { className: "metric-key" }, el("span", { className: "swatch", style: "background: var(" + s.color + ")" }),
            s.label + " ", el("b", null, last === null ? "–" : c.fmt(last)));
        }));
      }
      note.textContent = samples.length + " samples, one a second from the worker's registry (the same series /metrics serves)";
    }

    const schedule = window.ctrlscopePage.scheduler(render);
    function render() {
      const now = performance.now();
      if (!dirty) return;
      if (now - lastDraw >= 500) { lastDraw = now; draw(); } else setTimeout(schedule, 500 - (now - lastDraw));
    }
    setInterval(() => { dirty = true; schedule(); }, 1000); // the time axis moves on
    // Canvas colours are read from the CSS variables when drawing: redraw when the theme changes
    // (the OS preference in "auto", or the toggle's data-theme on <html>).
    const redraw = () => { dirty = true; lastDraw = 0; schedule(); };
    window.matchMedia("(prefers-color-scheme: dark)").addEventListener("change", redraw);
    new MutationObserver(redraw).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
    window.ctrlscopeMetrics = { samples: samples, charts: () => [...figures].map(([id, f]) => ({ id: id, series: f.data })) };
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
