/*
 * The controller page's Workqueue panel: depth, adds/s and retries/s sparklines, the dedup counter
 * (every add vs the reconciles it caused) and the queue's keys by state (queued, processing, waiting
 * for a backoff), with their ages and countdowns, each key's requeue count since its last forget and
 * the delay the rate limiter will choose if it fails again (the controller component's rate_limiter,
 * protocol v1.5: ctrlscopeProtocol.limiterDelay).
 *
 * A wait of controller-runtime's first retries (5, 10, 20 ms) is over before a frame draws it: the
 * key is never "waiting" in any state the page sees. So every delayed add (add_rate_limited /
 * add_after record) is remembered, and for WAITED_MS after its wait ended the key shows in the
 * waiting group as "waited 10 ms, retry 2", below the live countdowns of the keys still waiting.
 *
 * The key groups are the queue topic's state (w/{worker}/queue/{ctl}: key → {s, since, ready_at,
 * requeues}, folded by the publisher as controllers/schema.py fold_queue_op says); the rates come from
 * its queue records. Registered in window.ctrlscopePanels, started by controller_page.js; api.queue is
 * this panel's model, which the timeline panel also counts into (events filtered by predicates).
 */
(function () {
  "use strict";
  const UI = window.ctrlscopeUI;
  const { el, fmtDuration } = UI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);
  const MAX_QUEUE_ROWS = 100; // per group
  const WAITED_MS = 4000;     // how long a key that waited stays in the waiting group after its wait
  const COLS = 4;

  function init(api) {
    const { client, topics: T, stateOf, workerNow, schedule } = api;
    const queue = api.queue = {
      depth: new UI.Series(60, "last"), adds: new UI.Series(60), retries: new UI.Series(60),
      addCalls: 0, absorbed: 0, gets: 0, lastDepth: 0, filteredEvents: 0, dirty: true,
    };
    window.ctrlscope.queue = queue;
    // key -> the key's latest delayed add: {until (wall ms its wait ends), delay (s), requeues, op}
    const lastWait = new Map();
    let waitedUntil = Infinity; // the earliest time a "waited" row is due to go

    client.on("snapshot", (topic) => { if (topic === T.queue) queue.dirty = true; });
    client.on("records", (topic, records, id, frame) => { if (topic === T.queue) onQueue(records, frame); });
    api.onFocus(() => { queue.dirty = true; });

    function onQueue(records, frame) {
      for (const r of records) {
        if (r.k !== P.RecordKind.QUEUE) continue;
        const ts = r.ts || workerNow();
        queue.depth.add(ts, r.depth || 0);
        queue.lastDepth = r.depth || 0;
        if (r.op === P.QueueOp.ADD || r.op === P.QueueOp.DEDUP || r.op === P.QueueOp.DEFER) {
          queue.adds.add(ts); queue.addCalls += 1;
          if (r.op !== P.QueueOp.ADD) queue.absorbed += 1;
        } else if (r.op === P.QueueOp.GET) queue.gets += 1;
        if (r.op === P.QueueOp.ADD_RATE_LIMITED) queue.retries.add(ts);
        if ((r.op === P.QueueOp.ADD_RATE_LIMITED || r.op === P.QueueOp.ADD_AFTER) && r.delay > 0) {
          lastWait.delete(r.key); // re-inserted: the Map stays ordered oldest wait first
          lastWait.set(r.key, { until: ts + r.delay * 1000, delay: r.delay, requeues: r.requeues, op: r.op });
          if (lastWait.size > 4 * MAX_QUEUE_ROWS) lastWait.delete(lastWait.keys().next().value);
          queue.dirty = true;
        }
      }
      if (frame && frame.s) queue.dirty = true;
    }

    // The delay the key's next failure will wait: its requeues + 1-th retry ("" when the worker does
    // not describe its rate limiter).
    function nextDelay(requeues) {
      const d = P.limiterDelay(api.controllerComponent().rate_limiter, (requeues || 0) + 1);
      return d === null ? "–" : UI.fmtPrecise(d * 1000);
    }
    // The key links to its own page (its story: attempts, triggers, writes, versions).
    const keyCell = (key) => el("td", { className: "key", title: key },
      el("a", { className: "key-link", href: window.ctrlscopeUrl.key(api.page.worker, api.page.controller, key) }, UI.shortName(key, 24)));

    function queueRow(key, v, kind) {
      const tr = el("tr", { dataset: { key: key } });
      if (key === api.focusKey()) tr.className = "focus";
      const time = el("td", { className: kind === P.QueueItemState.WAITING ? "countdown" : "age" });
      if (kind === P.QueueItemState.WAITING) time.dataset.ready = v.ready_at; else time.dataset.since = v.since || "";
      tr.append(keyCell(key), time, el("td", { className: "num next" }, nextDelay(v.requeues)), el("td", { className: "num requeues" }, v.requeues || 0));
      return tr;
    }

    // A key whose wait ended less than WAITED_MS ago: what it waited, for which retry.
    function waitedRow(key, w, v) {
      const requeues = v ? v.requeues || 0 : 0; // gone from the state: done, and forgotten
      const tr = el("tr", { className: "waited" + (key === api.focusKey() ? " focus" : ""), dataset: { key: key } });
      const what = "waited " + UI.fmtPrecise(w.delay * 1000) + (w.op === P.QueueOp.ADD_RATE_LIMITED && w.requeues ? ", retry " + w.requeues : " (requeue_after)");
      tr.append(keyCell(key), el("td", { className: "waited-for", title: what + "; now " + (v ? v.s : "done") }, what),
        el("td", { className: "num next" }, nextDelay(requeues)), el("td", { className: "num requeues" }, requeues));
      return tr;
    }

    function renderQueue(now) {
      // The panel's groups (#q-queued, #q-processing, #q-waiting); an idle key is only counted.
      const groups = { [P.QueueItemState.QUEUED]: [], [P.QueueItemState.PROCESSING]: [], [P.QueueItemState.WAITING]: [] };
      let idle = 0;
      const state = stateOf(T.queue);
      for (const [key, v] of state) {
        if (!v) continue;
        if (groups[v.s]) groups[v.s].push([key, v]); else idle += 1;
      }
      // Keys whose wait is over (and that do not wait again), newest first.
      const waited = [];
      waitedUntil = Infinity;
      for (const [key, w] of lastWait) {
        const v = state.get(key);
        if (w.until > now) { waitedUntil = Math.min(waitedUntil, w.until); continue; } // not over yet: drawn when it is
        if (now - w.until >= WAITED_MS || (v && v.s === P.QueueItemState.WAITING)) continue;
        waited.push([key, w, v]);
        waitedUntil = Math.min(waitedUntil, w.until + WAITED_MS);
      }
      waited.reverse();
      groups[P.QueueItemState.QUEUED].sort((a, b) => (a[1].since || 0) - (b[1].since || 0));
      groups[P.QueueItemState.PROCESSING].sort((a, b) => (a[1].since || 0) - (b[1].since || 0));
      groups[P.QueueItemState.WAITING].sort((a, b) => (a[1].ready_at || 0) - (b[1].ready_at || 0));
      for (const kind in groups) {
        const box = $("q-" + kind);
        const list = groups[kind];
        box.querySelector(".count").textContent = list.length;
        const rows = list.slice(0, MAX_QUEUE_ROWS).map(([k, v]) => queueRow(k, v, kind));
        if (list.length > MAX_QUEUE_ROWS) rows.push(el("tr", { className: "more" }, el("td", { colSpan: COLS }, "+" + (list.length - MAX_QUEUE_ROWS) + " more")));
        const extra = kind === P.QueueItemState.WAITING ? waited.slice(0, MAX_QUEUE_ROWS).map(([k, w, v]) => waitedRow(k, w, v)) : [];
        if (!list.length && !extra.length) rows.push(el("tr", { className: "empty" }, el("td", { colSpan: COLS, className: "muted" }, "none")));
        box.querySelector("tbody").replaceChildren(...rows, ...extra);
        if (kind === P.QueueItemState.WAITING) box.querySelector(".recent").textContent = waited.length ? "· " + waited.length + " just waited" : "";
      }
      $("dedup-note").textContent = "dedup: " + queue.absorbed.toLocaleString() + " adds absorbed" +
        (queue.filteredEvents ? " · " + queue.filteredEvents.toLocaleString() + " events filtered by predicates" : "") +
        (idle ? " · " + idle + " idle keys keep a requeue count" : "");
      queue.dirty = false;
    }

    function tickQueue(now) {
      for (const td of document.querySelectorAll("#queue-panel td.countdown")) {
        const left = Number(td.dataset.ready) - now;
        td.textContent = left > 0 ? fmtDuration(left) : "due";
        td.classList.toggle("due", left <= 0);
      }
      for (const td of document.querySelectorAll("#queue-panel td.age")) {
        const since = Number(td.dataset.since);
        td.textContent = since ? fmtDuration(now - since) : "";
      }
    }

    let lastSparks = 0;
    api.onRender((now) => {
      if (queue.dirty || now >= waitedUntil) renderQueue(now);
      tickQueue(now);
      $("dedup-adds").textContent = queue.addCalls.toLocaleString();
      $("dedup-reconciles").textContent = queue.gets.toLocaleString();
      if (now - lastSparks >= 250) {
        lastSparks = now;
        const depth = queue.depth.values(now), adds = queue.adds.values(now), retries = queue.retries.values(now);
        UI.sparkline($("spark-depth"), depth, "--accent");
        UI.sparkline($("spark-adds"), adds, "--ok");
        UI.sparkline($("spark-retries"), retries, "--bad");
        $("v-depth").textContent = queue.lastDepth;
        $("v-adds").textContent = adds[adds.length - 2] || 0; // the last complete second
        $("v-retries").textContent = retries[retries.length - 2] || 0;
      }
    });
    schedule();
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
