/*
 * The controller page's Reconcile timeline: one lane per key (the most recently active MAX_LANES
 * drawn), each attempt a bar from reconcile_start to its result, coloured by result, the gaps between
 * attempts (backoff) labelled, the running attempt growing and the next scheduled retry marked from the
 * queue's state. Click a bar: the attempt's details, with the events that enqueued it.
 *
 * Data: the controller topic (w/{worker}/controller/{ctl}) — its event / reconcile_start / reconcile
 * records, and its state's per-key summaries (attempts, last result) for keys older than the loaded
 * history. Registered in window.ctrlscopePanels, started by controller_page.js.
 */
(function () {
  "use strict";
  const { el, fmtDuration, clock } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);
  const MAX_LANES = 50;
  const MAX_ATTEMPTS = 200;     // per lane
  const MAX_KEYS = 2000;        // lanes remembered (only MAX_LANES drawn)
  const RESULTS = Object.values(P.ReconcileResult); // an attempt bar's colour: anything else is drawn as an error

  function init(api) {
    const { client, topics: T, stateOf, workerNow, schedule } = api;
    const lanes = new Map(); // key -> {key, attempts: [], pending: [], running, last, summary, el}
    let attemptSeq = 0;
    const attemptsById = new Map();
    let selected = null; // attempt id
    let timelineDirty = true;
    let windowSec = 60;

    client.on("snapshot", (topic) => { if (topic === T.controller) { absorbSummaries(); timelineDirty = true; } });
    client.on("resync", (topic, reason) => {
      if (topic !== T.controller && topic !== T.queue) return;
      const note = $("tl-resync");
      note.hidden = false;
      note.textContent = "⟳ " + (topic === T.queue ? "queue" : "controller") + " stream resynced (" + reason + ") at " + clock(workerNow()) + ": attempts in between may be missing";
    });
    client.on("records", (topic, records, id, frame) => { if (topic === T.controller) onController(records, frame); });
    api.onFocus((key) => { for (const l of lanes.values()) if (l.el) l.el.classList.toggle("focus", l.key === key); });
    api.onKey("Escape", () => closeDetails());
    api.onKey("f", () => {
      // Focus the selected attempt's key (again: clear the focus).
      const a = attemptsById.get(selected);
      if (a) api.setFocus(a.key === api.focusKey() ? "" : a.key); else if (api.focusKey()) api.setFocus("");
    });
    api.onRender((now) => renderTimeline(now));
    Object.assign(window.ctrlscope, { lanes: lanes, showDetails: showDetails });
    function lane(key) {
      let l = lanes.get(key);
      if (!l) {
        l = { key: key, attempts: [], pending: [], running: null, last: 0, summary: null, el: null };
        lanes.set(key, l);
        if (lanes.size > MAX_KEYS * 1.25) {
          // Forget the least recently active keys in one batch (amortised: a relist of 100k objects
          // must not scan every lane per new key).
          const victims = [...lanes.values()].sort((a, b) => a.last - b.last).slice(0, lanes.size - MAX_KEYS);
          for (const v of victims) {
            if (v === l) continue;
            lanes.delete(v.key);
            for (const a of v.attempts) attemptsById.delete(a.id);
          }
        }
      }
      return l;
    }

    // Per-key summaries (attempts, last result) from the controller topic's state. A snapshot can
    // hold every key ever reconciled: only the MAX_KEYS most recent become lanes. A frame brings only
    // the keys it changed.
    function absorbSummaries(changed) {
      let entries;
      if (changed) entries = Object.keys(changed).map((k) => [k, changed[k]]);
      else {
        entries = [...stateOf(T.controller)];
        if (entries.length > MAX_KEYS) entries = entries.sort((a, b) => ((b[1] && b[1].at) || 0) - ((a[1] && a[1].at) || 0)).slice(0, MAX_KEYS);
      }
      for (const [key, v] of entries) {
        if (!v) continue;
        const l = lane(key);
        l.summary = v;
        if (v.at && v.at > l.last) l.last = v.at;
      }
    }

    function onController(records, frame) {
      for (const r of records) {
        const ts = r.ts || workerNow();
        if (r.k === P.RecordKind.EVENT) {
          if (r.filtered_by) { api.queue.filteredEvents += 1; api.queue.dirty = true; continue; }
          for (const req of r.requests || []) {
            const l = lane(req);
            l.pending.push({ ts: ts, event: r.event, key: r.key });
            if (l.pending.length > 20) l.pending.shift();
          }
        } else if (r.k === P.RecordKind.RECONCILE_START) {
          const l = lane(r.key);
          l.running = { start: ts, worker: r.worker, events: l.pending };
          l.pending = [];
          l.last = Math.max(l.last, ts);
        } else if (r.k === P.RecordKind.RECONCILE) {
          const l = lane(r.key);
          const started = l.running;
          const duration = Number(r.duration) || 0;
          const a = {
            id: ++attemptSeq, key: r.key, end: ts, start: ts - duration * 1000, duration: duration,
            result: RESULTS.includes(r.result) ? r.result : P.ReconcileResult.ERROR, rawResult: r.result, error: r.error,
            requeue_after: r.requeue_after, worker: r.worker, events: started ? started.events : l.pending, el: null,
          };
          if (!started) l.pending = [];
          l.running = null;
          l.attempts.push(a);
          attemptsById.set(a.id, a);
          if (l.attempts.length > MAX_ATTEMPTS) attemptsById.delete(l.attempts.shift().id);
          l.last = Math.max(l.last, ts);
        }
      }
      if (frame && frame.s) absorbSummaries(frame.s);
      timelineDirty = true;
    }

    const lanesBox = $("lanes");
    let laneOrder = "";

    function laneElement(l) {
      if (!l.el) {
        const label = el("div", { className: "lane-label" }, el("a", { className: "lane-key", title: "link to " + l.key + " (focus this key)", href: "?key=" + encodeURIComponent(l.key) }, l.key), el("span", { className: "lane-meta muted" }));
        const track = el("div", { className: "lane-track" });
        l.el = el("div", { className: "lane", dataset: { key: l.key } }, label, track);
        if (l.key === api.focusKey()) l.el.classList.add("focus");
      }
      return l.el;
    }

    function attemptElement(a) {
      if (!a.el) {
        a.el = el("div", { className: "attempt result-" + a.result, dataset: { id: String(a.id), result: a.rawResult } });
        a.el.title = a.rawResult + " · " + fmtDuration(a.duration * 1000) + (a.error ? " · " + a.error : "");
      }
      return a.el;
    }

    function renderTimeline(now) {
      const span = windowSec * 1000;
      const t0 = now - span;
      const tEnd = now + span * 0.12; // room on the right for scheduled retries
      const total = tEnd - t0;
      const x = (t) => ((t - t0) / total) * 100;

      // Axis: "now" line and ticks.
      const axis = $("tl-axis");
      if (timelineDirty || axis.dataset.window !== String(windowSec)) {
        axis.dataset.window = String(windowSec);
        const ticks = [];
        const step = windowSec <= 10 ? 2 : windowSec <= 60 ? 10 : windowSec <= 300 ? 60 : 180;
        for (let s = 0; s <= windowSec; s += step) ticks.push(el("span", { className: "tick", style: "left:" + x(now - s * 1000) + "%" }, s ? "-" + (s >= 60 ? s / 60 + "m" : s + "s") : "now"));
        axis.replaceChildren(...ticks);
      }

      const sorted = [...lanes.values()].sort((a, b) => b.last - a.last).slice(0, MAX_LANES);
      const order = sorted.map((l) => l.key).join("\n");
      if (order !== laneOrder) {
        laneOrder = order;
        lanesBox.replaceChildren(...(sorted.length ? sorted.map(laneElement) : [el("div", { className: "muted tl-empty" }, "no reconciles yet")]));
      }
      const queueState = stateOf(T.queue);
      for (const l of sorted) {
        const track = l.el.lastChild;
        const meta = l.el.querySelector(".lane-meta");
        const attempts = l.summary ? Math.max(l.summary.attempts || 0, l.attempts.length) : l.attempts.length;
        const lastResult = l.attempts.length ? l.attempts[l.attempts.length - 1].rawResult : l.summary ? l.summary.result : "";
        const q = queueState.get(l.key);
        const metaText = attempts ? attempts + "×" + (lastResult ? " · " + lastResult : "") : (q && q.s) || "no attempts yet";
        if (meta.textContent !== metaText) { meta.textContent = metaText; meta.className = "lane-meta muted last-" + lastResult; }
        const want = [];
        let prev = null;
        for (const a of l.attempts) {
          if (a.end < t0) { prev = a; continue; }
          const bar = attemptElement(a);
          const left = x(Math.max(a.start, t0));
          bar.style.left = left + "%";
          bar.style.width = Math.max(0, x(a.end) - left) + "%";
          bar.classList.toggle("selected", a.id === selected);
          if (prev && a.start - prev.end > span / 40) {
            // The gap between two attempts: a backoff (or simply no event) made visible and labelled.
            if (!a.gapEl) a.gapEl = el("div", { className: "gap" }, el("span", null, "+" + fmtDuration(a.start - prev.end)));
            const gl = x(Math.max(prev.end, t0));
            a.gapEl.style.left = gl + "%";
            a.gapEl.style.width = Math.max(0, x(a.start) - gl) + "%";
            want.push(a.gapEl);
          }
          want.push(bar);
          prev = a;
        }
        if (l.running) {
          if (!l.runEl) l.runEl = el("div", { className: "attempt result-running", title: "reconciling…" });
          const left = x(Math.max(l.running.start, t0));
          l.runEl.style.left = left + "%";
          l.runEl.style.width = Math.max(0, x(now) - left) + "%";
          want.push(l.runEl);
        }
        if (q && q.ready_at && q.ready_at > now && q.s === P.QueueItemState.WAITING) {
          if (!l.nextEl) l.nextEl = el("div", { className: "next-retry" });
          l.nextEl.style.left = Math.min(99.5, x(q.ready_at)) + "%";
          l.nextEl.title = "next retry in " + fmtDuration(q.ready_at - now) + " (requeues " + (q.requeues || 0) + ")";
          want.push(l.nextEl);
        }
        // Replace the track's children only when the set changed; positions were updated in place.
        const kids = track.children;
        let same = kids.length === want.length;
        for (let i = 0; same && i < want.length; i++) same = kids[i] === want[i];
        if (!same) track.replaceChildren(...want);
      }
      const nowLine = $("tl-now") || lanesBox.parentNode.appendChild(el("div", { id: "tl-now", className: "now-line" }));
      nowLine.style.left = "calc(var(--label-w) + (100% - var(--label-w)) * " + x(now) / 100 + ")";
      timelineDirty = false;
    }

    function showDetails(id) {
      const a = attemptsById.get(id);
      const box = $("details");
      if (!a) { box.hidden = true; selected = null; return; }
      selected = id;
      const l = lanes.get(a.key);
      const idx = l ? l.attempts.indexOf(a) : -1;
      const prev = idx > 0 ? l.attempts[idx - 1] : null;
      const rows = [
        ["key", a.key], ["result", a.rawResult], ["started", clock(a.start)], ["duration", fmtDuration(a.duration * 1000)],
        ["worker", a.worker === undefined ? "" : a.worker],
      ];
      if (prev) rows.push(["since previous attempt", fmtDuration(a.start - prev.end) + " (previous: " + prev.rawResult + ")"]);
      if (a.requeue_after) rows.push(["requeue_after", a.requeue_after + " s"]);
      const evs = a.events.length
        ? el("ul", { className: "enqueued-by" }, ...a.events.map((e) => el("li", null, clock(e.ts) + "  " + e.event + "  " + e.key)))
        : el("p", { className: "muted enqueued-by" }, prev ? "no watch event: re-queued by the workqueue (rate-limited retry, requeue or requeue_after)" : "no enqueuing event in the loaded history");
      box.replaceChildren(
        el("div", { className: "details-head" }, el("b", null, "attempt " + (idx + 1) + " of " + a.key), " ",
          el("span", { className: "badge result-badge result-" + a.result }, a.rawResult),
          el("span", { className: "spacer" }),
          el("button", { type: "button", id: "details-focus", dataset: { key: a.key } }, a.key === api.focusKey() ? "unfocus key (f)" : "focus key (f)"),
          el("button", { type: "button", id: "details-close" }, "close (Esc)")),
        el("dl", null, ...rows.flatMap(([k, v]) => [el("dt", null, k), el("dd", null, String(v))])),
        a.error ? el("pre", { className: "error-text" }, a.error) : el("p", { className: "muted" }, "no error"),
        el("h3", null, "enqueued by"), evs);
      box.hidden = false;
      timelineDirty = true;
      schedule();
    }

    lanesBox.addEventListener("click", (e) => {
      const bar = e.target.closest(".attempt[data-id]");
      if (bar) showDetails(Number(bar.dataset.id));
    });
    $("details").addEventListener("click", (e) => {
      if (e.target.id === "details-close") closeDetails();
      else if (e.target.id === "details-focus") { const k = e.target.dataset.key; api.setFocus(k === api.focusKey() ? "" : k); showDetails(selected); }
    });
    function closeDetails() { $("details").hidden = true; selected = null; timelineDirty = true; schedule(); }

    $("window").addEventListener("click", (e) => {
      const b = e.target.closest("button[data-window]");
      if (!b) return;
      windowSec = Number(b.dataset.window);
      for (const x of $("window").children) x.classList.toggle("on", x === b);
      timelineDirty = true; schedule();
    });
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
