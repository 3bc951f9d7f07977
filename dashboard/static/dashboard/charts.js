/*
 * PromQL's rate() and histogram_quantile() over a worker's metric samples, and a small canvas
 * time-series chart. No dependencies; colours come from the page's CSS custom properties.
 *
 * The worker samples its Prometheus registry once a second (controllers/telemetry/metrics_sampler.py);
 * the maths here is what Prometheus does with scraped samples, so the charts read like a Grafana
 * panel on the same series:
 *   - rate(counter[w]) at a sample = the counter's increase since the oldest sample inside the last w,
 *     per second of the time between the two. A decrease is a counter reset (the worker restarted) and
 *     counts the new value as the increase, as Prometheus does. Prometheus also extrapolates to the
 *     window's edges; with a sample every second the difference is negligible and we do not.
 *   - histogram_quantile(q, rate(h_bucket[w])) = the buckets' increases over w, then Prometheus'
 *     interpolation: find the bucket holding rank q·total and interpolate linearly inside it; a rank
 *     in the +Inf bucket gives the highest finite bound; no observations gives no value (a gap).
 */
(function (global) {
  "use strict";

  // ---- maths ------------------------------------------------------------------------------------
  // Prometheus' bucketQuantile: `bounds` are the finite upper bounds (ascending), `counts` the
  // observations per bucket (not cumulative; the one after the last bound is +Inf; missing = 0).
  function histogramQuantile(q, bounds, counts) {
    if (q < 0) return -Infinity;
    if (q > 1) return Infinity;
    const n = bounds.length + 1;
    const cum = new Array(n);
    let total = 0;
    for (let i = 0; i < n; i++) { total += counts[i] || 0; cum[i] = total; }
    if (!(total > 0) || bounds.length < 1) return NaN;
    const rank = q * total;
    let b = 0;
    while (b < n - 1 && cum[b] < rank) b++;
    if (b === n - 1) return bounds[bounds.length - 1];
    if (b === 0 && bounds[0] <= 0) return bounds[0];
    const start = b ? bounds[b - 1] : 0, below = b ? cum[b - 1] : 0, inBucket = cum[b] - below;
    if (!(inBucket > 0)) return start;
    return start + (bounds[b] - start) * ((rank - below) / inBucket);
  }

  // For each sample i: the index of the oldest sample no older than windowMs before it.
  function windowStarts(ts, windowMs) {
    const out = new Array(ts.length);
    let j = 0;
    for (let i = 0; i < ts.length; i++) {
      while (ts[j] < ts[i] - windowMs) j++;
      out[i] = j;
    }
    return out;
  }

  // rate(values[windowMs]) at every sample; null where the window holds no earlier sample.
  function rate(ts, values, windowMs) {
    const prefix = new Array(values.length);
    let sum = 0;
    for (let i = 0; i < values.length; i++) {
      const v = values[i] || 0, prev = i ? values[i - 1] || 0 : v;
      sum += v >= prev ? v - prev : v; // a drop is a reset: the counter restarted from zero
      prefix[i] = sum;
    }
    const starts = windowStarts(ts, windowMs);
    return values.map((_, i) => {
      const j = starts[i];
      return j < i ? (prefix[i] - prefix[j]) / ((ts[i] - ts[j]) / 1000) : null;
    });
  }

  // histogram_quantile(q, rate(h_bucket[windowMs])) at every sample; `hists` are {b: counts} (or
  // undefined before the series existed). The rate's divisor cancels out: increases are enough.
  function quantile(q, ts, hists, bounds, windowMs) {
    const starts = windowStarts(ts, windowMs);
    return hists.map((h, i) => {
      const j = starts[i], old = hists[j];
      if (!h || j === i || !bounds) return null;
      const now = h.b || [], before = (old && old.b) || [];
      const total = (a) => a.reduce((x, y) => x + y, 0);
      const reset = total(now) < total(before);
      const inc = now.map((c, k) => (reset ? c : c - (before[k] || 0)));
      const v = histogramQuantile(q, bounds, inc);
      return Number.isNaN(v) ? null : v;
    });
  }

  // ---- drawing ---------------------------------------------------------------------------------
  const cssVar = (name, fallback) => global.ctrlscopeUI.themeColor(name, fallback);
  const PAD = { left: 46, right: 8, top: 8, bottom: 16 };

  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v))), m = v / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 2.5 ? 2.5 : m <= 5 ? 5 : 10) * p;
  }

  // opts: { ts: [ms], t0, t1, series: [{ color: "--css-var", values: [number|null] }], stacked,
  //         fmt: (v) => label, gapMs, minMax }. Lines break where a value is null or samples are
  //         more than gapMs apart (the worker was not publishing).
  function drawChart(canvas, opts) {
    const dpr = global.devicePixelRatio || 1;
    const { w, h } = global.ctrlscopeUI.elementSize(canvas);
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const { ts, t0, t1 } = opts;
    const gapMs = opts.gapMs || 5000;
    // Stacked: each series is drawn on top of the ones before it.
    const tops = opts.series.map((s) => s.values.slice());
    if (opts.stacked) {
      for (let k = 1; k < tops.length; k++) {
        for (let i = 0; i < ts.length; i++) {
          const below = tops[k - 1][i], v = tops[k][i];
          tops[k][i] = v === null && below === null ? null : (v || 0) + (below || 0);
        }
      }
    }
    let max = opts.minMax || 0;
    for (const vals of tops) for (const v of vals) if (v !== null && v > max) max = v;
    const ymax = niceMax(max);
    const x = (t) => PAD.left + ((t - t0) / (t1 - t0)) * (w - PAD.left - PAD.right);
    const y = (v) => h - PAD.bottom - (v / ymax) * (h - PAD.top - PAD.bottom);

    const muted = cssVar("--muted", "#6b7480"), line = cssVar("--line", "#dde1e6");
    ctx.font = "10px system-ui, sans-serif";
    ctx.lineWidth = 1;
    ctx.fillStyle = muted;
    ctx.textAlign = "right"; ctx.textBaseline = "middle";
    for (const f of [0, 0.5, 1]) {
      const yy = Math.round(y(ymax * f)) + 0.5;
      ctx.strokeStyle = line; ctx.beginPath(); ctx.moveTo(PAD.left, yy); ctx.lineTo(w - PAD.right, yy); ctx.stroke();
      ctx.fillText(opts.fmt(ymax * f), PAD.left - 4, yy);
    }
    ctx.textAlign = "center"; ctx.textBaseline = "alphabetic";
    const span = t1 - t0, stepMs = span > 120000 ? 60000 : span > 30000 ? 15000 : 5000;
    for (let t = t1; t >= t0 - 1; t -= stepMs) {
      const ago = Math.round((t1 - t) / 1000);
      ctx.fillText(ago ? "-" + (ago >= 60 ? ago / 60 + "m" : ago + "s") : "now", Math.min(x(t), w - PAD.right - 10), h - 3);
    }

    const segments = (vals, visit) => {
      let open = false;
      for (let i = 0; i < ts.length; i++) {
        const v = vals[i];
        if (v === null || ts[i] < t0 - gapMs) { open = false; continue; }
        if (open && ts[i] - ts[i - 1] > gapMs) open = false;
        visit(i, v, open);
        open = true;
      }
    };
    for (let k = tops.length - 1; k >= 0; k--) {
      const color = cssVar(opts.series[k].color, "#2f6fde");
      ctx.save();
      ctx.beginPath(); ctx.rect(PAD.left, 0, w - PAD.left - PAD.right, h); ctx.clip();
      if (opts.stacked) {
        // One filled band per run of points, from this series' top down to the one below.
        const below = k ? tops[k - 1] : null;
        let run = [];
        const flush = () => {
          if (run.length) {
            ctx.beginPath();
            run.forEach((i, n) => (n ? ctx.lineTo(x(ts[i]), y(tops[k][i])) : ctx.moveTo(x(ts[i]), y(tops[k][i]))));
            for (let n = run.length - 1; n >= 0; n--) ctx.lineTo(x(ts[run[n]]), y(below ? below[run[n]] || 0 : 0));
            ctx.closePath();
            ctx.globalAlpha = 0.55; ctx.fillStyle = color; ctx.fill(); ctx.globalAlpha = 1;
          }
          run = [];
        };
        segments(tops[k], (i, v, open) => { if (!open) flush(); run.push(i); });
        flush();
      }
      ctx.beginPath();
      segments(tops[k], (i, v, open) => (open ? ctx.lineTo(x(ts[i]), y(v)) : ctx.moveTo(x(ts[i]), y(v))));
      ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.stroke();
      ctx.restore();
    }
  }

  global.ctrlscopeCharts = { histogramQuantile, rate, quantile, drawChart };
})(window);
