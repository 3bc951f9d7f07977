/*
 * The controller page's Reconcile timeline: one lane per key (the most recently active MAX_LANES
 * drawn), each attempt a bar from reconcile_start to its result, coloured by result, the gaps between
 * attempts (backoff) labelled, the running attempt growing and the next scheduled retry marked from the
 * queue's state. Click a bar: the attempt's details, with the events that enqueued it.
 *
 * A framework that runs several named handlers per object (kopf, protocol v1.1) names the handler in
 * each attempt, with its cause, its retry number and what happens next (error_kind, delay): the bar's
 * title and the details say so ("retried in 1 s", "given up"), the lane's label lists the key's
 * handlers, and the details list the log lines the controller wrote during the attempt (logs_panel.js).
 * Without a queue topic the next retry is marked from the last attempt's delay, or from the handlers'
 * next_at in the key's state (a zero-code observer sees only what the objects store).
 *
 * Data: the controller topic (w/{worker}/controller/{ctl}) — its event / reconcile_start / reconcile
 * records, and its state's per-key summaries (attempts, last result, handlers) for keys older than
 * the loaded history. Registered in window.ctrlscopePanels, started by controller_page.js.
 */
(function () {
  "use strict";
  const { el, fmtDuration, clock } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);
  const MAX_LANES = 50;
  const MAX_ATTEMPTS = 200;     // per lane
  const MAX_KEYS = 2000;        // lanes remembered (only MAX_LANES drawn)
  const SUBROW = 12;            // px per handler row in the lane of a key with several handlers
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
        l = { key: key, attempts: [], pending: [], running: null, last: 0, summary: null, el: null, handlers: new Set() };
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
        if (!v) {
          // The key left the state (its stored progress is gone): keep its attempts, drop the summary.
          const gone = lanes.get(key);
          if (gone) gone.summary = null;
          continue;
        }
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
          l.running = { start: ts, worker: r.worker, events: l.pending, handler: r.handler };
          l.pending = [];
          if (r.handler) l.handlers.add(String(r.handler));
          l.last = Math.max(l.last, ts);
        } else if (r.k === P.RecordKind.RECONCILE) {
          const l = lane(r.key);
          const started = l.running;
          const duration = Number(r.duration) || 0;
          const a = {
            id: ++attemptSeq, key: r.key, end: ts, start: ts - duration * 1000, duration: duration,
            result: RESULTS.includes(r.result) ? r.result : P.ReconcileResult.ERROR, rawResult: r.result, error: r.error,
            requeue_after: r.requeue_after, worker: r.worker, events: started ? started.events : l.pending, el: null,
            // v1.1: a framework's named handler, and what the framework does next.
            handler: r.handler ? String(r.handler) : "", cause: r.cause, retry: r.retry, delay: r.delay, error_kind: r.error_kind,
          };
          if (a.handler) l.handlers.add(a.handler);
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
        if (a.handler) a.el.dataset.handler = a.handler;
        const named = a.handler ? [a.handler, a.cause, "retry " + (a.retry || 0)].filter(Boolean) : [];
        a.el.title = [...named, a.rawResult, a.error_kind, fmtDuration(a.duration * 1000), nextStep(a), a.error].filter(Boolean).join(" · ");
      }
      return a.el;
    }

    // What the framework does after a handler's attempt, in words ("" for a plain Reconcile).
    function nextStep(a) {
      if (!a.handler) return "";
      if (a.error_kind === P.ErrorKind.IGNORED) return "error ignored: not retried";
      if (P.RETRIED_ERROR_KINDS.has(a.error_kind)) return typeof a.delay === "number" ? "retried in " + seconds(a.delay) : "retried";
      if (P.FAILED_RESULTS.has(a.rawResult)) return "given up";
      return "";
    }
    const seconds = (s) => (s < 60 ? Number(s.toFixed(1)) + " s" : fmtDuration(s * 1000));

    // The key's handler ids: those its attempts named, then any only its state knows (zero-code).
    function laneHandlers(l) {
      const ids = new Set(l.handlers);
      const hs = l.summary && l.summary.handlers;
      if (hs && typeof hs === "object") for (const id in hs) ids.add(id);
      return [...ids];
    }

    // Without a queue topic, when the framework runs one of the key's handlers again: the earliest of
    // each handler's last attempt's end + delay and, for handlers with no attempt loaded, the state's
    // next_at. Infinity: nothing is due.
    function nextRetryAt(l, now) {
      let at = Infinity;
      const last = new Map();
      for (const a of l.attempts) last.set(a.handler, a);
      for (const a of last.values()) {
        const due = a.end + a.delay * 1000;
        if (a.delay > 0 && P.RETRIED_ERROR_KINDS.has(a.error_kind) && due > now) at = Math.min(at, due);
      }
      const hs = l.summary && l.summary.handlers;
      if (hs && typeof hs === "object") for (const id in hs) {
        const h = hs[id];
        if (h && !last.has(id) && h.state === P.HandlerProgress.RETRYING && h.next_at > now) at = Math.min(at, h.next_at);
      }
      return at;
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
      const hasQueue = client.knownTopics.includes(T.queue);
      let named = false;
      for (const l of sorted) {
        const track = l.el.lastChild;
        const meta = l.el.querySelector(".lane-meta");
        const attempts = l.summary ? Math.max(l.summary.attempts || 0, l.attempts.length) : l.attempts.length;
        const lastResult = l.attempts.length ? l.attempts[l.attempts.length - 1].rawResult : l.summary ? l.summary.result : "";
        const q = queueState.get(l.key);
        const handlers = laneHandlers(l);
        if (handlers.length) named = true;
        const metaText = (attempts ? attempts + "×" + (lastResult ? " · " + lastResult : "") : (q && q.s) || "no attempts yet") +
          (handlers.length ? " · " + handlers.join(", ") : "");
        if (meta.textContent !== metaText) {
          meta.textContent = metaText; meta.title = metaText; meta.className = "lane-meta muted last-" + lastResult;
          meta.dataset.handlers = handlers.join(" ");
        }
        // A key with several handlers gets one row per handler in its lane: handlers of one object run
        // back to back, and their bars would cover each other at any window wider than a few seconds.
        const rows = handlers.length > 1 ? new Map(handlers.map((h, i) => [h, i])) : null;
        l.el.style.height = rows ? rows.size * SUBROW + 4 + "px" : "";
        l.el.classList.toggle("rows", !!rows);
        const place = (node, handler, gap) => {
          const row = rows && rows.has(handler) ? rows.get(handler) : -1;
          node.style.top = row < 0 ? "" : 2 + row * SUBROW + (gap ? SUBROW / 2 - 1 : 0) + "px";
          if (!gap) { node.style.height = row < 0 ? "" : SUBROW - 2 + "px"; node.style.bottom = row < 0 ? "" : "auto"; }
        };
        const want = [];
        const prevOf = new Map(); // handler ("" for a plain Reconcile) -> its previous attempt
        for (const a of l.attempts) {
          const prev = prevOf.get(a.handler);
          prevOf.set(a.handler, a);
          if (a.end < t0) continue;
          const bar = attemptElement(a);
          const left = x(Math.max(a.start, t0));
          bar.style.left = left + "%";
          bar.style.width = Math.max(0, x(a.end) - left) + "%";
          place(bar, a.handler, false);
          bar.classList.toggle("selected", a.id === selected);
          if (prev && a.start - prev.end > span / 40) {
            // The gap between two attempts: a backoff (or simply no event) made visible and labelled.
            if (!a.gapEl) a.gapEl = el("div", { className: "gap" }, el("span", null, "+" + fmtDuration(a.start - prev.end)));
            const gl = x(Math.max(prev.end, t0));
            a.gapEl.style.left = gl + "%";
            a.gapEl.style.width = Math.max(0, x(a.start) - gl) + "%";
            place(a.gapEl, a.handler, true);
            want.push(a.gapEl);
          }
          want.push(bar);
        }
        if (l.running) {
          if (!l.runEl) l.runEl = el("div", { className: "attempt result-running" });
          l.runEl.title = l.running.handler ? "running handler " + l.running.handler + "…" : "reconciling…";
          const left = x(Math.max(l.running.start, t0));
          l.runEl.style.left = left + "%";
          l.runEl.style.width = Math.max(0, x(now) - left) + "%";
          place(l.runEl, l.running.handler ? String(l.running.handler) : "", false);
          want.push(l.runEl);
        }
        const retryAt = hasQueue ? (q && q.ready_at > now && q.s === P.QueueItemState.WAITING ? q.ready_at : Infinity)
          : l.running ? Infinity : nextRetryAt(l, now);
        if (retryAt !== Infinity) {
          if (!l.nextEl) l.nextEl = el("div", { className: "next-retry" });
          l.nextEl.style.left = Math.min(99.5, x(retryAt)) + "%";
          l.nextEl.title = "next retry in " + fmtDuration(retryAt - now) + (hasQueue ? " (requeues " + (q.requeues || 0) + ")" : "");
          want.push(l.nextEl);
        }
        // Replace the track's children only when the set changed; positions were updated in place.
        const kids = track.children;
        let same = kids.length === want.length;
        for (let i = 0; same && i < want.length; i++) same = kids[i] === want[i];
        if (!same) track.replaceChildren(...want);
      }
      $("timeline").classList.toggle("with-handlers", named);
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
      // The previous attempt of the same handler (of the key, for a plain Reconcile): what a retry follows.
      let prev = null;
      for (let i = idx - 1; i >= 0 && !prev; i--) if (l.attempts[i].handler === a.handler) prev = l.attempts[i];
      const rows = [
        ["key", a.key], ["result", a.rawResult], ["started", clock(a.start)], ["duration", fmtDuration(a.duration * 1000)],
        ["worker", a.worker === undefined ? "" : a.worker],
      ];
      if (a.handler) {
        rows.push(["handler", a.handler], ["cause", a.cause || ""], ["retry", (a.retry || 0) + (a.retry ? " (attempt " + (a.retry + 1) + ")" : " (first attempt)")]);
        if (a.error_kind) rows.push(["error kind", a.error_kind]);
        const next = nextStep(a);
        if (next) rows.push(["next", next]);
      } else if (a.rawResult === P.ReconcileResult.TERMINAL) {
        rows.push(["next", "not retried: a terminal error (retrying cannot fix it)"]);
      }
      if (prev) rows.push(["since previous attempt", fmtDuration(a.start - prev.end) + " (previous: " + prev.rawResult + ")"]);
      if (a.requeue_after) rows.push(["requeue_after", a.requeue_after + " s"]);
      const evs = a.events.length
        ? el("ul", { className: "enqueued-by" }, ...a.events.map((e) => el("li", null, clock(e.ts) + "  " + e.event + "  " + e.key)))
        : el("p", { className: "muted enqueued-by" }, a.handler && prev ? "no watch event: the framework's own retry of " + a.handler
          : a.handler && idx > 0 ? "no new watch event: the events before the key's previous attempt (the same pass over the object)"
          : prev ? "no watch event: re-queued by the workqueue (rate-limited retry, requeue or requeue_after)"
          : "no enqueuing event in the loaded history");
      const lines = api.logs ? api.logs.during(a.key, a.handler, a.start, a.end) : [];
      const logs = lines.length
        ? el("ul", { className: "attempt-logs" }, ...lines.map((g) => el("li", { className: "lvl-" + g.level },
          clock(g.ts) + "  " + g.level + "  " + (g.handler ? "[" + g.handler + "]  " : "") + g.message)))
        : el("p", { className: "muted attempt-logs" }, "no log lines during this attempt");
      box.replaceChildren(
        el("div", { className: "details-head" }, el("b", null, a.handler ? "handler " + a.handler + " of " + a.key + ", attempt " + ((a.retry || 0) + 1)
          : "attempt " + (idx + 1) + " of " + a.key), " ",
          el("span", { className: "badge result-badge result-" + a.result }, a.rawResult),
          el("span", { className: "spacer" }),
          el("button", { type: "button", id: "details-focus", dataset: { key: a.key } }, a.key === api.focusKey() ? "unfocus key (f)" : "focus key (f)"),
          el("button", { type: "button", id: "details-close" }, "close (Esc)")),
        el("dl", null, ...rows.flatMap(([k, v]) => [el("dt", null, k), el("dd", null, String(v))])),
        a.error ? el("pre", { className: "error-text" }, a.error) : el("p", { className: "muted" }, "no error"),
        el("h3", null, "enqueued by"), evs, el("h3", null, "logged during the attempt"), logs);
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
