/*
 * The controller page's Reconcile timeline: one lane per key (the most recently active MAX_LANES
 * drawn), each attempt a bar from reconcile_start to its result, coloured by result, the gaps between
 * attempts (backoff) labelled, the running attempt growing and the next scheduled retry marked from the
 * queue's state. Click a bar: the attempt's details, with the events that enqueued it.
 *
 * Retries at controller-runtime's speed (5, 10, 20 ms apart) are far closer than a pixel at any
 * window: attempts of one key (one handler row) whose bars would touch at the window's scale are drawn
 * as one mark instead, coloured by its worst result, ended by a cap in its last result's colour, and
 * labelled with what it holds ("3 errors → success in 36 ms"). Click it: the attempts in order on a
 * strip zoomed to the mark's span, and a table of each attempt's result, start, duration, the wait
 * before it and which part of the rate limiter chose that wait (the queue topic's add_rate_limited /
 * add_after records, and the controller component's rate_limiter, protocol v1.5), and its error. The
 * lane's label says how many of its attempts failed, not only the last result; keys are shortened in
 * the middle (full on hover and in the details).
 *
 * A framework that runs several named handlers per object (kopf, protocol v1.1) names the handler in
 * each attempt, with its cause, its retry number and what happens next (error_kind, delay): the bar's
 * title and the details say so ("retried in 1 s", "given up"), the lane's label lists the key's
 * handlers, and the details list the log lines the controller wrote during the attempt (logs_panel.js).
 * Without a queue topic the next retry is marked from the last attempt's delay, or from the handlers'
 * next_at in the key's state (a zero-code observer sees only what the objects store).
 *
 * Provenance (protocol v1.7, provenance.js): an attempt's details list the triggers it absorbed (the
 * events, resyncs and retries the workqueue merged into it: "40 triggers merged: 38 update events,
 * 2 retries", expandable to one row each), and an attempt every trigger of which was an event of its
 * own controller's write is self-triggered: a ring around its bar, a badge in its details. The open
 * findings about a key (findings.js: hot loop, failing, terminal, slow, waiting; the controller's
 * components entry) are badges by its lane's label, and the key's own page (its whole story) is a
 * link from the label and the details.
 *
 * Data: the controller topic (w/{worker}/controller/{ctl}) — its event / reconcile_start / reconcile
 * records, and its state's per-key summaries (attempts, last result, handlers) for keys older than
 * the loaded history; the queue topic's delayed adds (the waits between attempts). Registered in
 * window.ctrlscopePanels, started by controller_page.js.
 */
(function () {
  "use strict";
  const { el, fmtDuration, fmtPrecise, shortName, clock, elementSize } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const U = window.ctrlscopeUrl;
  const Prov = window.ctrlscopeProvenance;
  const F = window.ctrlscopeFindings;
  const $ = (id) => document.getElementById(id);
  const MAX_LANES = 50;
  const MAX_ATTEMPTS = 200;     // per lane
  const MAX_KEYS = 2000;        // lanes remembered (only MAX_LANES drawn)
  // Attempts kept over every lane: 200 for each of 100 busy keys, fewer for the quiet keys of a
  // controller with thousands (2,000 lanes of 200 would be 400,000 attempts with their triggers).
  const MAX_TOTAL_ATTEMPTS = 20000;
  // Attempts whose triggers and enqueuing events are kept, the newest over every lane; older ones keep
  // the one-line summary of their triggers (the key's page has every one). An attempt of a busy key
  // absorbs up to 20 triggers with their changed fields (2026-12-07's real-control-plane soak: 16
  // each, ~8 KB of JS heap per attempt), so the attempt budget alone let a tab's heap grow by ~2 MiB a
  // minute for an hour towards 160 MiB.
  const MAX_DETAILED_ATTEMPTS = 2000;
  const COUNT_EVERY = 1000;     // attempts added between two counts of the total (amortised)
  const SUBROW = 12;            // px per handler row in the lane of a key with several handlers
  const RESULTS = Object.values(P.ReconcileResult); // an attempt bar's colour: anything else is drawn as an error
  const KEY_CHARS = 24;         // a lane label's key, shortened in the middle beyond this
  const MIN_BAR_PX = 4;         // an attempt bar's least width (.attempt min-width)
  const APART_PX = 4;           // bars closer than this are one mark: too close to tell apart
  const LABEL_CHAR_PX = 6.6;    // a mark label's character (11px monospace), to fit it beside the mark
  // The timeline is the page's costliest drawing: every drawn bar is positioned again as the window
  // moves (at 100 keys reconciling twice a second, thousands of them; a soak tab spent a quarter of a
  // core in renderTimeline alone). So it is drawn when what it shows changed or the window moved by
  // a pixel, and, unless the user asked for something (a click, a window, a snapshot), no more often
  // than keeps it under this share of the main thread: a draw that took 20 ms waits 60 ms for the
  // next, and a busy page spends its frames applying records instead of moving bars by less than a
  // pixel. (The page's 10-per-second tick comes back for a draw put off.)
  const TIMELINE_SHARE = 0.25;
  const RIGHT_ROOM = 0.12;      // of the window, right of "now": room for the scheduled retries
  // How bad a result is: a mark of several attempts takes the colour of its worst.
  const R = P.ReconcileResult;
  const SEVERITY = [R.SUCCESS, R.REQUEUE_AFTER, R.REQUEUE, R.ERROR, R.TERMINAL, R.PANIC];
  // A result counted in a mark's label: "error" → "3 errors" (one: the result itself).
  const PLURAL = { [R.SUCCESS]: "successes", [R.ERROR]: "errors", [R.REQUEUE]: "requeues", [R.PANIC]: "panics" };
  const counted = (n, result) => (n === 1 ? result : PLURAL[result] ? n + " " + PLURAL[result] : n + "× " + result);
  const SUPERSCRIPT = "⁰¹²³⁴⁵⁶⁷⁸⁹";
  const power = (n) => String(n).split("").map((d) => SUPERSCRIPT[Number(d)]).join("");

  function init(api) {
    const { client, topics: T, stateOf, workerNow, schedule } = api;
    const lanes = new Map(); // key -> {key, attempts: [], pending: [], running, last, summary, el}
    let attemptSeq = 0;
    const attemptsById = new Map();
    const detailed = []; // attempts still holding their triggers and events, oldest first (MAX_DETAILED_ATTEMPTS)
    let selected = null; // attempt id
    let selectedMark = null; // the mark whose attempts the details list: {key, ids}
    let backMark = null; // the mark the shown attempt's details were opened from
    // Per key, the queue's delayed adds (add_rate_limited / add_after): the waits between attempts.
    const waits = new Map(); // key -> [{ts, op, delay, requeues}]
    let timelineDirty = true; // drawn at the next frame: the user asked for something, or a snapshot came
    let changed = true;       // attempts or summaries arrived since the last draw
    let windowSec = 60;
    let drawnAt = -Infinity, drawnNow = -Infinity, drawCost = 0, trackWidth = 800;

    client.on("snapshot", (topic) => { if (topic === T.controller) { absorbSummaries(); timelineDirty = true; } });
    client.on("resync", (topic, reason) => {
      if (topic !== T.controller && topic !== T.queue) return;
      const note = $("tl-resync");
      note.hidden = false;
      note.textContent = "⟳ " + (topic === T.queue ? "queue" : "controller") + " stream resynced (" + reason + ") at " + clock(workerNow()) + ": attempts in between may be missing";
    });
    client.on("records", (topic, records, id, frame) => {
      if (topic === T.controller) onController(records, frame);
      else if (topic === T.queue) onQueue(records);
    });
    api.onFocus((key) => { for (const l of lanes.values()) if (l.el) l.el.classList.toggle("focus", l.key === key); });
    api.onKey("Escape", () => closeDetails());
    api.onKey("f", () => {
      // Focus the selected attempt's (or mark's) key (again: clear the focus).
      const a = attemptsById.get(selected);
      const key = a ? a.key : selectedMark ? selectedMark.key : null;
      if (key !== null) api.setFocus(key === api.focusKey() ? "" : key); else if (api.focusKey()) api.setFocus("");
    });
    api.onRender((now) => {
      const t = performance.now();
      if (!timelineDirty) {
        const pixelMs = (windowSec * 1000 * (1 + RIGHT_ROOM)) / trackWidth; // ms per pixel of the track
        if (!changed && Math.abs(now - drawnNow) < pixelMs) return;
        if (t - drawnAt < drawCost / TIMELINE_SHARE) return;
      }
      renderTimeline(now);
      drawnAt = t;
      drawnNow = now;
      drawCost = performance.now() - t;
      changed = false;
    });
    Object.assign(window.ctrlscope, { lanes: lanes, showDetails: showDetails, showMark: showMark });
    let addedSinceCount = 0;
    function keepTotalAttempts() {
      // Over the budget: the least recently active lanes give up their oldest attempts first (each
      // keeps its last one), down to the budget in one batch.
      addedSinceCount = 0;
      let excess = -MAX_TOTAL_ATTEMPTS;
      for (const v of lanes.values()) excess += v.attempts.length;
      if (excess <= 0) return;
      for (const v of [...lanes.values()].sort((p, q) => p.last - q.last)) {
        const n = Math.min(excess, v.attempts.length - 1);
        if (n <= 0) continue;
        for (const old of v.attempts.splice(0, n)) attemptsById.delete(old.id);
        excess -= n;
        if (excess <= 0) break;
      }
    }
    // An older attempt gives up its trigger list and enqueuing events for the line that sums them up.
    function forgetDetails(a) {
      if (a.prov && a.prov.triggers) a.prov = { summary: Prov.summary(a.prov.triggers, a.prov.count), count: a.prov.count, self: a.prov.self, triggers: null };
      a.eventCount = a.events.length;
      a.events = [];
    }

    // "Why it ran" in an attempt's details: its triggers (v1.7), else the events that enqueued it;
    // for an attempt past MAX_DETAILED_ATTEMPTS, the line that sums them up and where the rest is.
    function whyItRan(a, none) {
      const forgotten = a.prov ? a.prov.triggers === null : a.eventCount > 0;
      if (forgotten) {
        const what = a.prov ? a.prov.summary : a.eventCount + (a.eventCount === 1 ? " enqueuing event" : " enqueuing events");
        return el("p", { className: "muted enqueued-by forgotten" }, what + " (this page keeps the details of the newest " +
          MAX_DETAILED_ATTEMPTS.toLocaleString() + " attempts: ", el("a", { href: keyPage(a.key) }, "the key's page"), " has every one)");
      }
      if (a.prov) return Prov.details(a.prov.triggers, a.prov.count);
      if (a.events.length) return el("ul", { className: "enqueued-by" }, ...a.events.map((e) => el("li", null, clock(e.ts) + "  " + e.event + "  " + e.key)));
      return el("p", { className: "muted enqueued-by" }, none);
    }

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

    function onQueue(records) {
      for (const r of records) {
        if (r.k !== P.RecordKind.QUEUE || (r.op !== P.QueueOp.ADD_RATE_LIMITED && r.op !== P.QueueOp.ADD_AFTER)) continue;
        let list = waits.get(r.key);
        if (!list) {
          waits.set(r.key, (list = []));
          // Forget the keys that waited longest ago (Map order is insertion order), in one batch.
          if (waits.size > MAX_KEYS * 1.25) for (const k of [...waits.keys()].slice(0, waits.size - MAX_KEYS)) waits.delete(k);
        }
        list.push({ ts: r.ts || workerNow(), op: r.op, delay: Number(r.delay) || 0, requeues: r.requeues });
        if (list.length > MAX_ATTEMPTS) list.shift();
      }
    }

    // The delayed add that put attempt a back in the queue after prev (the same key's attempt
    // before it): the last add_rate_limited / add_after made after prev started whose wait was over
    // when a started. null: none loaded (an event re-queued the key, or the record is older than the
    // loaded history). The records' times come from the worker's wall clock and an attempt's start
    // from its end minus its duration (a monotonic clock): they may disagree by a fraction of a ms.
    const SKEW_MS = 1;
    function waitBefore(a, prev) {
      const list = waits.get(a.key);
      if (!list || !prev) return null;
      let found = null;
      for (const w of list) if (w.ts >= prev.start - SKEW_MS && w.ts + w.delay * 1000 <= a.start + SKEW_MS) found = w;
      return found;
    }

    // Which part of the controller's rate limiter chose wait w (v1.5: its component's rate_limiter),
    // in words: "exponential 5 ms × 2²", "token bucket 10/s, burst 100"; "" when not known.
    function chosenBy(w) {
      if (!w) return "";
      if (w.op === P.QueueOp.ADD_AFTER) return "AddAfter: a delay asked for (requeue_after, or a framework's retry delay), not the rate limiter";
      const spec = api.controllerComponent().rate_limiter;
      const n = Number(w.requeues) || 0;
      const leaf = spec && n ? P.limiterStep(spec, n, w.delay) : null;
      const retry = n ? "retry " + n : "a retry";
      if (!leaf) return spec ? "the rate limiter (" + retry + ")" : "the rate limiter (" + retry + "; the worker does not describe it)";
      if (leaf.type === P.RateLimiterType.EXPONENTIAL) return "exponential " + fmtPrecise(leaf.base * 1000) + " × 2" + power(n - 1) + " (" + retry + ")";
      if (leaf.type === P.RateLimiterType.FAST_SLOW) return (n <= leaf.fast_attempts ? "fast, " + retry + " of " + leaf.fast_attempts : "slow, after " + leaf.fast_attempts + " fast retries");
      if (leaf.type === P.RateLimiterType.BUCKET) return "token bucket " + leaf.qps + "/s, burst " + leaf.burst + (w.delay > 0 ? " (the queue retried faster than that)" : "");
      return "limiter " + (leaf.name || "of its own") + " (" + retry + ")";
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
          l.running = { start: ts, worker: r.worker, events: l.pending, handler: r.handler,
            // v1.7: the triggers the attempt absorbed (null from an older publisher)
            prov: Prov.known(r) ? { triggers: r.triggers, count: r.trigger_count, self: r.self_triggered === true } : null };
          l.pending = [];
          if (r.handler) l.handlers.add(String(r.handler));
          l.last = Math.max(l.last, ts);
        } else if (r.k === P.RecordKind.RECONCILE) {
          const l = lane(r.key);
          const started = l.running;
          const duration = Number(r.duration) || 0;
          // The start is the reconcile_start record's time when the page has it: the end record is
          // written after the queue's add_rate_limited and its observer, whose wait (a lock, a busy
          // machine) would otherwise move the derived start past that add, and the wait before the
          // next attempt would not be found.
          const start = started ? started.start : ts - duration * 1000;
          const a = {
            id: ++attemptSeq, key: r.key, end: started ? Math.max(start, Math.min(ts, start + duration * 1000)) : ts,
            start: start, duration: duration,
            result: RESULTS.includes(r.result) ? r.result : P.ReconcileResult.ERROR, rawResult: r.result, error: r.error,
            requeue_after: r.requeue_after, worker: r.worker, events: started ? started.events : l.pending, el: null,
            // v1.1: a framework's named handler, and what the framework does next.
            handler: r.handler ? String(r.handler) : "", cause: r.cause, retry: r.retry, delay: r.delay, error_kind: r.error_kind,
            prov: started ? started.prov : null,
          };
          if (a.handler) l.handlers.add(a.handler);
          if (!started) l.pending = [];
          l.running = null;
          l.attempts.push(a);
          attemptsById.set(a.id, a);
          detailed.push(a);
          if (detailed.length > MAX_DETAILED_ATTEMPTS * 1.25) for (const old of detailed.splice(0, detailed.length - MAX_DETAILED_ATTEMPTS)) forgetDetails(old);
          if (l.attempts.length > MAX_ATTEMPTS) attemptsById.delete(l.attempts.shift().id);
          l.last = Math.max(l.last, ts);
          if (++addedSinceCount >= COUNT_EVERY) keepTotalAttempts();
        }
      }
      if (frame && frame.s) absorbSummaries(frame.s);
      changed = true;
    }

    const lanesBox = $("lanes");
    let laneOrder = "";

    const keyPage = (key) => U.key(api.page.worker, api.page.controller, key);
    function laneElement(l) {
      if (!l.el) {
        const label = el("div", { className: "lane-label" }, el("a", { className: "lane-key", title: l.key + " (link: focus this key)", href: "?key=" + encodeURIComponent(l.key) }, shortName(l.key, KEY_CHARS)),
          el("a", { className: "lane-story", href: keyPage(l.key), title: "the key's page: its whole story, its object and its versions" }, "↗"),
          el("span", { className: "lane-findings" }), el("span", { className: "lane-meta muted" }));
        const track = el("div", { className: "lane-track" });
        l.el = el("div", { className: "lane", dataset: { key: l.key } }, label, track);
        if (l.key === api.focusKey()) l.el.classList.add("focus");
      }
      return l.el;
    }

    function attemptElement(a) {
      if (!a.el) {
        const self = !!(a.prov && a.prov.self);
        a.el = el("div", { className: "attempt result-" + a.result + (self ? " self-triggered" : ""), dataset: { id: String(a.id), result: a.rawResult } });
        if (a.handler) a.el.dataset.handler = a.handler;
        const named = a.handler ? [a.handler, a.cause, "retry " + (a.retry || 0)].filter(Boolean) : [];
        a.el.title = [...named, a.rawResult, a.error_kind, fmtPrecise(a.duration * 1000), nextStep(a), self ? "self-triggered" : "",
          a.prov ? (a.prov.triggers ? Prov.summary(a.prov.triggers, a.prov.count) : a.prov.summary) : "", a.error].filter(Boolean).join(" · ");
      }
      return a.el;
    }

    // What a mark of several attempts holds, in order: runs of one result ("3 errors → success"), or
    // counts by result when it holds more than three runs; and the time from first start to last end.
    function markText(list) {
      const runs = [];
      for (const a of list) {
        const run = runs[runs.length - 1];
        if (run && run[0] === a.rawResult) run[1] += 1; else runs.push([a.rawResult, 1]);
      }
      let what;
      if (runs.length <= 3) what = runs.map(([r, n]) => counted(n, r)).join(" → ");
      else {
        const totals = new Map();
        for (const a of list) totals.set(a.rawResult, (totals.get(a.rawResult) || 0) + 1);
        what = list.length + " attempts: " + [...totals].sort((x, y) => SEVERITY.indexOf(y[0]) - SEVERITY.indexOf(x[0]))
          .map(([r, n]) => counted(n, r)).join(", ") + ", last " + list[list.length - 1].rawResult;
      }
      return what + " in " + fmtPrecise(list[list.length - 1].end - list[0].start);
    }
    const worstOf = (list) => list.reduce((w, a) => (SEVERITY.indexOf(a.result) > SEVERITY.indexOf(w) ? a.result : w), R.SUCCESS);

    // The element of a mark of several attempts (kept per first attempt across frames): coloured by
    // its worst result, a cap in its last result's colour, its label beside it.
    function markElement(l, m, handler) {
      const first = m.attempts[0], last = m.attempts[m.attempts.length - 1];
      let node = l.marks && l.marks.get(first.id);
      const sig = m.attempts.length + ":" + last.id;
      if (!node) {
        node = el("div", { className: "attempt mark" }, el("span", { className: "mark-end" }), el("span", { className: "mark-label" }));
        node.dataset.mark = String(first.id);
        if (handler) node.dataset.handler = handler;
      }
      if (node.dataset.sig !== sig) {
        const worst = worstOf(m.attempts);
        const text = markText(m.attempts);
        node.dataset.sig = sig;
        node.dataset.ids = m.attempts.map((a) => a.id).join(" ");
        node.dataset.result = worst;
        node.dataset.count = String(m.attempts.length);
        node.className = "attempt mark result-" + worst + (m.attempts.some((a) => a.prov && a.prov.self) ? " self-triggered" : "");
        node.firstChild.className = "mark-end result-" + last.result;
        node.lastChild.textContent = text;
        node.title = (handler ? handler + ": " : "") + text + " — too close to tell apart at this scale: click for each attempt";
      }
      // Selected: its list is shown, or one of its attempts' details.
      node.classList.toggle("selected", selectedMark ? selectedMark.ids[0] === first.id : m.attempts.some((a) => a.id === selected));
      return node;
    }

    // A mark's label goes where it fits: right of the mark, else left, else the wider side, cut short.
    function placeLabel(node, roomLeft, roomRight) {
      const label = node.lastChild;
      const need = label.textContent.length * LABEL_CHAR_PX + 8;
      const right = roomRight >= need || roomRight >= roomLeft;
      const room = Math.max(0, right ? roomRight : roomLeft);
      label.className = "mark-label " + (right ? "on-right" : "on-left");
      label.style.maxWidth = Math.floor(room) + "px";
      label.hidden = room < 3 * LABEL_CHAR_PX;
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
      const tEnd = now + span * RIGHT_ROOM;
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
      // The track's width in px (every lane's is the same): marks are grouped at this scale.
      // (the axis spans exactly the lanes' tracks, and is one element: measured once, then observed)
      const trackPx = trackWidth = elementSize($("tl-axis")).w || 800;
      const component = api.controllerComponent();
      const px = (t) => ((t - t0) / total) * trackPx;
      for (const l of sorted) {
        const track = l.el.lastChild;
        const meta = l.el.querySelector(".lane-meta");
        const attempts = l.summary ? Math.max(l.summary.attempts || 0, l.attempts.length) : l.attempts.length;
        const lastResult = l.attempts.length ? l.attempts[l.attempts.length - 1].rawResult : l.summary ? l.summary.result : "";
        const q = queueState.get(l.key);
        const handlers = laneHandlers(l);
        if (handlers.length) named = true;
        // How many attempts failed, not only how the last one ended ("5× · 3 failed → success"); of
        // the loaded ones ("≥3") when the state counts attempts older than the loaded history.
        const failed = l.attempts.filter((a) => P.FAILED_RESULTS.has(a.result)).length;
        const parts = attempts ? [attempts + "×"] : [(q && q.s) || "no attempts yet"];
        if (failed) parts.push((attempts > l.attempts.length ? "≥" : "") + failed + " failed");
        const lastFailed = P.FAILED_RESULTS.has(lastResult) || (lastResult && !RESULTS.includes(lastResult));
        const tail = attempts && lastResult ? (failed && !lastFailed ? " → " : " · ") + (failed && lastFailed ? "last " : "") + lastResult : "";
        const metaText = parts.join(" · ") + tail + (handlers.length ? " · " + handlers.join(", ") : "");
        if (meta.textContent !== metaText) {
          meta.replaceChildren(parts[0], failed ? el("span", { className: "failed" }, " · " + parts[1]) : "",
            tail ? el("span", { className: "last-result last-" + lastResult }, tail) : "", handlers.length ? " · " + handlers.join(", ") : "");
          meta.title = metaText; meta.className = "lane-meta muted last-" + lastResult;
          meta.dataset.handlers = handlers.join(" ");
        }
        // The key's open findings, by its label (redrawn when they change).
        const open = F.forKey(component, l.key);
        const sig = open.map((f) => f.finding + ":" + f.count + ":" + f.message).join("|");
        if (l.findingsSig !== sig) {
          l.findingsSig = sig;
          l.el.querySelector(".lane-findings").replaceChildren(...open.map(F.badge));
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
        // Marks per row (handler; "" for a plain Reconcile): runs of attempts whose bars would touch.
        const byRow = new Map();
        for (const a of l.attempts) { let list = byRow.get(a.handler); if (!list) byRow.set(a.handler, (list = [])); list.push(a); }
        const drawn = []; // [start, gap or null, mark]: the track's children in time order, whatever the row
        const marksEls = new Map();
        for (const [handler, list] of byRow) {
          const marks = [];
          let before = null; // the attempt before the window, whose gap to the first mark is labelled
          for (const a of list) {
            if (a.end < t0) {
              // Out of the window: its bar and gap are drawn again only if the window grows back,
              // so they are let go (kept, 20,000 attempts' elements held ~65,000 detached nodes).
              before = a; a.el = null; a.gapEl = null;
              continue;
            }
            const cur = marks[marks.length - 1];
            if (cur && px(a.start) - cur.right < APART_PX) cur.attempts.push(a);
            else marks.push({ attempts: [a], prev: cur ? cur.attempts[cur.attempts.length - 1] : before });
            const m = marks[marks.length - 1];
            m.left = px(Math.max(m.attempts[0].start, t0));
            m.right = Math.max(px(a.end), m.left + MIN_BAR_PX, m.right || 0);
          }
          marks.forEach((m, i) => {
            const first = m.attempts[0];
            let gap = null;
            if (m.prev && first.start - m.prev.end > span / 40) {
              // The gap between two marks: a backoff (or simply no event) made visible and labelled.
              // (its text follows the window: which attempt comes before a mark depends on the scale)
              if (!first.gapEl) first.gapEl = el("div", { className: "gap" }, el("span"));
              const text = "+" + fmtDuration(first.start - m.prev.end);
              if (first.gapEl.firstChild.textContent !== text) first.gapEl.firstChild.textContent = text;
              const gl = x(Math.max(m.prev.end, t0));
              first.gapEl.style.left = gl + "%";
              first.gapEl.style.width = Math.max(0, x(first.start) - gl) + "%";
              place(first.gapEl, handler, true);
              gap = first.gapEl;
            }
            let node;
            if (m.attempts.length === 1) {
              node = attemptElement(first);
              node.classList.toggle("selected", first.id === selected);
            } else {
              node = markElement(l, m, handler);
              marksEls.set(first.id, node);
              const roomLeft = m.left - (i > 0 ? marks[i - 1].right : 0) - 4;
              const roomRight = (i + 1 < marks.length ? marks[i + 1].left : trackPx) - m.right - 4;
              placeLabel(node, roomLeft, roomRight);
            }
            node.style.left = x(Math.max(first.start, t0)) + "%";
            node.style.width = Math.max(0, x(m.attempts[m.attempts.length - 1].end) - x(Math.max(first.start, t0))) + "%";
            place(node, handler, false);
            drawn.push([first.start, gap, node]);
          });
        }
        l.marks = marksEls;
        const want = [];
        for (const [, gap, node] of drawn.sort((p, q) => p[0] - q[0])) { if (gap) want.push(gap); want.push(node); }
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

    // back: the mark whose list this attempt was opened from (its details offer the way back).
    function showDetails(id, back) {
      const a = attemptsById.get(id);
      const box = $("details");
      selectedMark = null;
      backMark = back || null;
      if (!a) { box.hidden = true; selected = null; return; }
      selected = id;
      const l = lanes.get(a.key);
      const idx = l ? l.attempts.indexOf(a) : -1;
      // The previous attempt of the same handler (of the key, for a plain Reconcile): what a retry follows.
      let prev = null;
      for (let i = idx - 1; i >= 0 && !prev; i--) if (l.attempts[i].handler === a.handler) prev = l.attempts[i];
      const rows = [
        ["key", a.key], ["result", a.rawResult], ["started", clock(a.start)], ["duration", fmtPrecise(a.duration * 1000)],
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
      if (prev) rows.push(["since previous attempt", fmtPrecise(a.start - prev.end) + " (previous: " + prev.rawResult + ")"]);
      const w = waitBefore(a, prev);
      if (w) rows.push(["waited before", waitText(w) + ranAfter(a, prev, w)], ["chosen by", chosenBy(w)]);
      if (a.requeue_after) rows.push(["requeue_after", a.requeue_after + " s"]);
      const evs = whyItRan(a, a.handler && prev ? "no watch event: the framework's own retry of " + a.handler
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
          a.prov && a.prov.self ? " " : "", a.prov && a.prov.self ? Prov.selfBadge() : "",
          el("span", { className: "spacer" }),
          el("a", { className: "details-story", href: keyPage(a.key), title: "the key's page: every attempt, trigger, write and version" }, "key page ↗"),
          backMark ? el("button", { type: "button", id: "details-back" }, "← all " + backMark.ids.length + " attempts") : null,
          el("button", { type: "button", id: "details-focus", dataset: { key: a.key } }, a.key === api.focusKey() ? "unfocus key (f)" : "focus key (f)"),
          el("button", { type: "button", id: "details-close" }, "close (Esc)")),
        el("dl", null, ...rows.flatMap(([k, v]) => [el("dt", null, k), el("dd", null, String(v))])),
        a.error ? el("pre", { className: "error-text" }, a.error) : el("p", { className: "muted" }, "no error"),
        el("h3", null, a.prov ? "why it ran" : "enqueued by"), evs, el("h3", null, "logged during the attempt"), logs);
      box.hidden = false;
      timelineDirty = true;
      schedule();
    }

    const waitText = (w) => fmtPrecise(w.delay * 1000) + (w.op === P.QueueOp.ADD_RATE_LIMITED && w.requeues ? ", retry " + w.requeues : "");
    // The time from the previous attempt's end to this one's start, when it is well beyond the wait
    // (a busy worker pool, a slow delaying queue): " · ran after 61 ms".
    const ranAfter = (a, prev, w) => {
      const gap = a.start - prev.end;
      return gap > w.delay * 1000 * 1.5 + 5 ? " · ran after " + fmtPrecise(gap) : "";
    };

    // The attempts of one mark, zoomed so that each is visible: a strip spanning the mark's time
    // (bars, and the waits between them with their delays), and one row per attempt.
    function showMark(key, ids) {
      const l = lanes.get(key);
      const list = l ? ids.map((id) => attemptsById.get(id)).filter(Boolean) : [];
      if (!list.length) { closeDetails(); return; }
      selected = null;
      backMark = null;
      selectedMark = { key: key, ids: ids };
      const first = list[0], last = list[list.length - 1];
      const spanMs = Math.max(last.end - first.start, 1e-3);
      const zx = (t) => ((t - first.start) / spanMs) * 100;
      const prevOf = (a) => {
        for (let i = l.attempts.indexOf(a) - 1; i >= 0; i--) if (l.attempts[i].handler === a.handler) return l.attempts[i];
        return null;
      };
      const strip = [];
      const rows = list.map((a, i) => {
        const prev = prevOf(a);
        const w = waitBefore(a, prev);
        if (i > 0) {
          const gl = zx(prev.end);
          strip.push(el("div", { className: "zoom-gap", style: "left:" + gl + "%;width:" + Math.max(0, zx(a.start) - gl) + "%" },
            el("span", null, w ? fmtPrecise(w.delay * 1000) : "+" + fmtPrecise(a.start - prev.end))));
        }
        strip.push(el("div", { className: "zoom-bar attempt-link result-" + a.result, title: "attempt " + (i + 1) + ": " + a.rawResult + " (click: its details)",
          style: "left:" + zx(a.start) + "%;width:" + Math.max(0, zx(a.end) - zx(a.start)) + "%", dataset: { id: String(a.id) } },
          el("span", { className: "zoom-n" }, String(i + 1))));
        return el("tr", { className: "mark-attempt", dataset: { id: String(a.id), result: a.rawResult } },
          el("td", { className: "num" }, String(i + 1)),
          el("td", null, el("span", { className: "badge result-badge result-" + a.result }, a.rawResult),
            a.prov && a.prov.self ? " " : "", a.prov && a.prov.self ? Prov.selfBadge() : ""),
          el("td", { className: "when" }, clock(a.start) + (i ? "  +" + fmtPrecise(a.start - first.start) : "")),
          el("td", { className: "num took" }, fmtPrecise(a.duration * 1000)),
          el("td", { className: "num waited" }, w ? waitText(w) + ranAfter(a, prev, w) : prev ? "+" + fmtPrecise(a.start - prev.end) + " (no delayed add)" : "–"),
          el("td", { className: "chosen" }, w ? chosenBy(w) : prev ? "" : "first attempt"),
          el("td", { className: "error" }, a.error || ""));
      });
      const box = $("details");
      box.replaceChildren(
        el("div", { className: "details-head" }, el("b", null, list.length + " attempts of " + key + (first.handler ? " (handler " + first.handler + ")" : "")),
          " ", el("span", { className: "badge result-badge result-" + worstOf(list) }, markText(list)),
          el("span", { className: "spacer" }),
          el("button", { type: "button", id: "details-focus", dataset: { key: key } }, key === api.focusKey() ? "unfocus key (f)" : "focus key (f)"),
          el("button", { type: "button", id: "details-close" }, "close (Esc)")),
        el("div", { className: "zoom", "aria-label": "the attempts, zoomed to " + fmtPrecise(spanMs) }, ...strip),
        el("div", { className: "zoom-axis muted" }, el("span", null, clock(first.start)), el("span", null, "+" + fmtPrecise(spanMs))),
        el("table", { className: "events mark-table" },
          el("thead", null, el("tr", null, ...["#", "result", "started", "took", "waited before", "chosen by", "error"].map((h) => el("th", null, h)))),
          el("tbody", null, ...rows)),
        el("h3", null, first.prov ? "why the first ran" : "enqueued by"),
        whyItRan(first, "no enqueuing event in the loaded history"));
      box.hidden = false;
      timelineDirty = true;
      schedule();
    }

    lanesBox.addEventListener("click", (e) => {
      const mark = e.target.closest(".attempt.mark");
      if (mark) { showMark(mark.closest(".lane").dataset.key, mark.dataset.ids.split(" ").map(Number)); return; }
      const bar = e.target.closest(".attempt[data-id]");
      if (bar) showDetails(Number(bar.dataset.id));
    });
    $("details").addEventListener("click", (e) => {
      const link = e.target.closest(".attempt-link, tr.mark-attempt");
      if (e.target.id === "details-close") closeDetails();
      else if (e.target.id === "details-back" && backMark) showMark(backMark.key, backMark.ids);
      else if (e.target.id === "details-focus") {
        const k = e.target.dataset.key;
        api.setFocus(k === api.focusKey() ? "" : k);
        if (selectedMark) showMark(selectedMark.key, selectedMark.ids); else showDetails(selected, backMark);
      } else if (link && selectedMark) showDetails(Number(link.dataset.id), selectedMark);
    });
    function closeDetails() { $("details").hidden = true; selected = null; selectedMark = null; timelineDirty = true; schedule(); }

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
