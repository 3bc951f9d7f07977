/*
 * Tiny helpers shared by the dashboard pages: a per-second bucket series and a canvas sparkline.
 * No dependencies; colours come from the page's CSS custom properties (light/dark follow the theme).
 */
(function (global) {
  "use strict";

  // Values per whole second (by record timestamp, ms), the last `size` seconds kept.
  class Series {
    constructor(size, mode) { this.size = size || 60; this.mode = mode || "sum"; this.buckets = new Map(); }
    add(tsMs, value) {
      const sec = Math.floor(tsMs / 1000);
      const old = this.buckets.get(sec);
      if (this.mode === "max") this.buckets.set(sec, old === undefined ? value : Math.max(old, value));
      else if (this.mode === "last") this.buckets.set(sec, value);
      else this.buckets.set(sec, (old || 0) + (value === undefined ? 1 : value));
      if (this.buckets.size > this.size * 2) this.trim(sec);
    }
    trim(nowSec) { for (const k of this.buckets.keys()) if (k <= nowSec - this.size) this.buckets.delete(k); }
    // The last `size` seconds ending at nowMs; "max"/"last" series carry the previous value forward.
    values(nowMs) {
      const now = Math.floor(nowMs / 1000);
      this.trim(now);
      const out = new Array(this.size);
      let carry = 0;
      if (this.mode !== "sum") {
        let best = -Infinity;
        for (const [k, v] of this.buckets) if (k <= now - this.size && k > best) { best = k; carry = v; }
      }
      for (let i = 0; i < this.size; i++) {
        const v = this.buckets.get(now - this.size + 1 + i);
        if (v === undefined) out[i] = this.mode === "sum" ? 0 : carry;
        else { out[i] = v; carry = v; }
      }
      return out;
    }
  }

  function cssVar(name, fallback) {
    const v = getComputedStyle(document.documentElement).getPropertyValue(name).trim();
    return v || fallback;
  }

  // Drawing must not read layout or computed style: right after a panel has inserted rows, either
  // read forces a synchronous style and layout pass of the whole page (bench/ui.py --profile: most
  // of a 5,000 events/s page's main thread). So colours are read once per theme and canvas sizes
  // come from a ResizeObserver.
  const colors = new Map();
  function themeColor(name, fallback) {
    let c = colors.get(name);
    if (c === undefined) { c = cssVar(name, fallback); colors.set(name, c); }
    return c;
  }
  new MutationObserver(() => colors.clear()).observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme", "class"] });
  if (window.matchMedia) {
    const dark = window.matchMedia("(prefers-color-scheme: dark)");
    if (dark.addEventListener) dark.addEventListener("change", () => colors.clear());
  }
  // An element's size in CSS px, read from the layout once and then kept by a ResizeObserver: reading
  // clientWidth on every draw forces a synchronous layout of the whole page after the DOM writes of
  // the frame (a soak tab's profile had its charts and timeline spending most of their time there).
  // A canvas not laid out yet (0 wide) falls back to its own width and height.
  const sizes = new WeakMap(); // element -> {w, h} in CSS px
  const resized = typeof ResizeObserver === "function" ? new ResizeObserver((entries) => {
    for (const e of entries) sizes.set(e.target, { w: e.contentRect.width, h: e.contentRect.height });
  }) : null;
  function elementSize(node) {
    let size = sizes.get(node);
    if (!size) {
      size = { w: node.clientWidth || node.width || 0, h: node.clientHeight || node.height || 0 }; // once
      if (resized) { sizes.set(node, size); resized.observe(node); }
    }
    return size;
  }

  // Draw `values` as a filled line on `canvas` (device-pixel aware).
  function sparkline(canvas, values, colorVar) {
    if (!canvas) return;
    const dpr = window.devicePixelRatio || 1;
    const { w, h } = elementSize(canvas);
    if (!w || !h) return; // not laid out (a hidden panel): nothing to see
    if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    const color = themeColor(colorVar || "--accent", "#2f6fde");
    let max = 1;
    for (const v of values) if (v > max) max = v;
    const step = values.length > 1 ? w / (values.length - 1) : w;
    const y = (v) => h - 2 - (v / max) * (h - 4);
    ctx.beginPath();
    values.forEach((v, i) => (i ? ctx.lineTo(i * step, y(v)) : ctx.moveTo(0, y(v))));
    ctx.strokeStyle = color; ctx.lineWidth = 1.5; ctx.stroke();
    ctx.lineTo(w, h); ctx.lineTo(0, h); ctx.closePath();
    ctx.globalAlpha = 0.15; ctx.fillStyle = color; ctx.fill(); ctx.globalAlpha = 1;
  }

  function fmtDuration(ms) {
    if (ms < 0) ms = 0;
    if (ms < 1000) return Math.round(ms) + " ms";
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    const m = Math.floor(ms / 60000);
    return m + "m " + Math.floor((ms % 60000) / 1000) + "s";
  }

  // A duration to a tenth of a millisecond below 10 ms ("0.3 ms", "5 ms"): retries of a fast
  // rate limiter (5 ms, 10 ms, ...) and the sub-millisecond reconciles between them.
  function fmtPrecise(ms) {
    if (ms < 0.05) return ms > 0 ? "<0.1 ms" : "0 ms";
    if (ms < 10) return Number(ms.toFixed(1)) + " ms";
    return fmtDuration(ms);
  }

  // A long name shortened in the middle to at most max characters ("default/heldo…t-ok"): both ends
  // stay, so keys that share a prefix (a namespace, a name stem) stay distinguishable.
  function shortName(name, max) {
    name = String(name);
    if (name.length <= max) return name;
    const head = Math.ceil((max - 1) * 0.6);
    return name.slice(0, head) + "…" + name.slice(name.length - (max - 1 - head));
  }

  function clock(ts) { return ts ? new Date(ts).toISOString().slice(11, 23) : ""; }

  // props.style (a string) is assigned to node.style, i.e. CSSOM cssText: the Content-Security-Policy's
  // style-src 'self' allows that, while a style attribute (setAttribute, or markup) would be blocked.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) for (const k in props) {
      if (k === "dataset") Object.assign(node.dataset, props[k]);
      else if (k in node) node[k] = props[k]; else node.setAttribute(k, props[k]);
    }
    for (const c of children) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
    return node;
  }

  global.ctrlscopeUI = { Series, sparkline, fmtDuration, fmtPrecise, shortName, clock, el, cssVar, themeColor, elementSize };
})(window);
