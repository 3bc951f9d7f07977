/*
 * The controller page's Workqueue panel: depth, adds/s and retries/s sparklines, the dedup counter
 * (every add vs the reconciles it caused) and the queue's keys by state (queued, processing, waiting
 * for a backoff), with their ages and countdowns.
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

  function init(api) {
    const { client, topics: T, stateOf, workerNow, schedule } = api;
    const queue = api.queue = {
      depth: new UI.Series(60, "last"), adds: new UI.Series(60), retries: new UI.Series(60),
      addCalls: 0, absorbed: 0, gets: 0, lastDepth: 0, filteredEvents: 0, dirty: true,
    };
    window.ctrlscope.queue = queue;

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
        } else if (r.op === P.QueueOp.ADD_RATE_LIMITED) queue.retries.add(ts);
        else if (r.op === P.QueueOp.GET) queue.gets += 1;
      }
      if (frame && frame.s) queue.dirty = true;
    }

    function queueRow(key, v, kind) {
      const tr = el("tr", { dataset: { key: key } });
      if (key === api.focusKey()) tr.className = "focus";
      const time = el("td", { className: kind === P.QueueItemState.WAITING ? "countdown" : "age" });
      if (kind === P.QueueItemState.WAITING) time.dataset.ready = v.ready_at; else time.dataset.since = v.since || "";
      tr.append(el("td", { className: "key" }, key), time, el("td", { className: "num requeues" }, v.requeues || 0));
      return tr;
    }

    function renderQueue() {
      // The panel's groups (#q-queued, #q-processing, #q-waiting); an idle key is only counted.
      const groups = { [P.QueueItemState.QUEUED]: [], [P.QueueItemState.PROCESSING]: [], [P.QueueItemState.WAITING]: [] };
      let idle = 0;
      for (const [key, v] of stateOf(T.queue)) {
        if (!v) continue;
        if (groups[v.s]) groups[v.s].push([key, v]); else idle += 1;
      }
      groups[P.QueueItemState.QUEUED].sort((a, b) => (a[1].since || 0) - (b[1].since || 0));
      groups[P.QueueItemState.PROCESSING].sort((a, b) => (a[1].since || 0) - (b[1].since || 0));
      groups[P.QueueItemState.WAITING].sort((a, b) => (a[1].ready_at || 0) - (b[1].ready_at || 0));
      for (const kind in groups) {
        const box = $("q-" + kind);
        const list = groups[kind];
        box.querySelector(".count").textContent = list.length;
        const rows = list.slice(0, MAX_QUEUE_ROWS).map(([k, v]) => queueRow(k, v, kind));
        if (list.length > MAX_QUEUE_ROWS) rows.push(el("tr", { className: "more" }, el("td", { colSpan: 3 }, "+" + (list.length - MAX_QUEUE_ROWS) + " more")));
        if (!list.length) rows.push(el("tr", { className: "empty" }, el("td", { colSpan: 3, className: "muted" }, "none")));
        box.querySelector("tbody").replaceChildren(...rows);
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
      if (queue.dirty) renderQueue();
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
