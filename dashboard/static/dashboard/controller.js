/*
 * One controller's page: workqueue, reconcile timeline and the informer events of its worker.
 *
 * Data: TelemetryClient topics w/{worker}/components, …/queue/{ctl}, …/controller/{ctl} and every
 * …/informer/{name} the components list. Records update small models as they arrive; the DOM is
 * touched once per animation frame (requestAnimationFrame), plus a 100 ms tick that keeps ages,
 * countdowns and the timeline's moving time axis current. Every list is capped, so the DOM stays
 * bounded whatever the event rate; what is not drawn is counted and said.
 */
(function () {
  "use strict";
  const UI = window.ctrlscopeUI;
  const { el, fmtDuration, clock } = UI;
  const P = window.ctrlscopeProtocol;
  const page = JSON.parse(document.getElementById("cs-page").textContent);
  const T = page.topics;
  const $ = (id) => document.getElementById(id);

  const MAX_QUEUE_ROWS = 100;   // per group
  const MAX_LANES = 50;
  const MAX_ATTEMPTS = 200;     // per lane
  const MAX_KEYS = 2000;        // lanes remembered (only MAX_LANES drawn)
  const MAX_EVENT_ROWS = 300;   // drawn
  const MAX_EVENT_DATA = 2000;  // kept for re-filtering
  const RESULTS = Object.values(P.ReconcileResult); // an attempt bar's colour: anything else is drawn as an error

  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  // History: 500 frames of context per topic; the metrics topic's frames are one sample a second, and
  // 6 minutes of them draw the 5-minute charts with their 1-minute quantile windows filled.
  const client = new TelemetryClient(proto + "//" + location.host + "/ws/telemetry/",
    { autoSubscribe: false, history: (topic) => (topic === T.metrics ? 360 : 500) });
  // The server refuses topics that do not exist yet ("unknown_topic"): wanted topics are subscribed
  // once they are listed (hello / topics), after the client has resumed the ones it already had.
  const wanted = new Set();
  const subscribed = new Set();
  let known = new Set();
  function want(topic) { wanted.add(topic); if (known.has(topic)) subscribeLater(); }
  let subscribing = false;
  function subscribeLater() {
    if (subscribing) return;
    subscribing = true;
    Promise.resolve().then(() => {
      subscribing = false;
      for (const t of wanted) {
        if (!known.has(t) || subscribed.has(t)) continue;
        subscribed.add(t);
        if (t.startsWith(T.informer_prefix) && !client.topics.has(t)) loadInformer(t); else client.subscribe(t);
      }
    });
  }
  // An informer topic's state is the whole cache: 100,000 objects are ~8 MB, more than one websocket
  // message may carry (daphne caps messages at 1 MiB). Its snapshot (plus recent frames, for context)
  // comes over HTTP; the socket subscription then resumes from the snapshot's stream id.
  let connGen = 0;
  function fetchSnapshot(topic) {
    const marks = (window.ctrlscopeTimings = window.ctrlscopeTimings || {})[topic] = { fetch: performance.now() };
    const url = "/c/" + page.worker + "/informer/" + encodeURIComponent(topic.slice(T.informer_prefix.length)) + "/snapshot.json?history=500";
    return fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); marks.response = performance.now(); return r.json(); })
      .then((snap) => { marks.parsed = performance.now(); return snap; });
  }
  // Informers the server already knew when it rendered the page: start loading their caches now.
  const prefetched = new Map();
  for (const t of page.informers || []) { const p = fetchSnapshot(t); p.catch(() => {}); prefetched.set(t, p); }
  function loadInformer(topic) {
    const gen = connGen;
    const pre = prefetched.get(topic);
    prefetched.delete(topic);
    (pre || fetchSnapshot(topic))
      .then((snap) => {
        if (gen !== connGen || !subscribed.has(topic)) return; // the socket dropped meanwhile: reloaded on reconnect
        const t = { cursor: null, state: new Map() };
        client.topics.set(topic, t);
        if (snap.history.length) client.applyEntries(topic, snap.history);
        t.state = new Map(Object.entries(snap.state));
        t.cursor = snap.id;
        if (snap.epoch && !client.epoch) client.epoch = snap.epoch;
        client.emit("snapshot", topic, t.state);
        window.ctrlscopeTimings[topic].applied = performance.now();
        client.subscribe(topic);
      })
      .catch((err) => {
        console.warn("informer snapshot", topic, err);
        setTimeout(() => { if (gen === connGen) { subscribed.delete(topic); subscribeLater(); } }, 1000);
      });
  }
  client.on("state", (s) => {
    if (s !== "reconnecting") return;
    // Reload informer caches over HTTP after a reconnect: a resume the server refuses would answer
    // with a fresh snapshot over the socket, too big for one message when the cache is large.
    connGen += 1;
    for (const t of [...subscribed]) {
      if (!t.startsWith(T.informer_prefix)) continue;
      subscribed.delete(t); client.topics.delete(t);
      if (informerTopics.has(t)) pushEvent({ marker: "stream", ts: workerNow(), inf: informerTopics.get(t), text: "⟳ reconnected: cache reloaded from a fresh snapshot" });
    }
  });
  client.on("error", (err) => {
    if (err && err.code === "unknown_topic" && err.topic) { subscribed.delete(err.topic); client.topics.delete(err.topic); known.delete(err.topic); }
  });

  // ---- models ---------------------------------------------------------------------------------
  const queue = {
    depth: new UI.Series(60, "last"), adds: new UI.Series(60), retries: new UI.Series(60),
    addCalls: 0, absorbed: 0, gets: 0, lastDepth: 0, dirty: true,
  };
  const lanes = new Map(); // key -> {key, attempts: [], pending: [], running, last, summary, el}
  let attemptSeq = 0;
  const attemptsById = new Map();
  let selected = null; // attempt id
  let timelineDirty = true;
  let filteredEvents = 0;

  const informerTopics = new Map(); // topic -> informer name
  const events = { data: [], paused: false, heldSince: 0, filter: [], rate: new UI.Series(60), fresh: [], rebuild: true, summarised: 0 };
  let componentsDirty = true;

  let windowSec = 60;
  let focusKey = page.key || "";

  // ---- connection badges --------------------------------------------------------------------
  const LABELS = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", resyncing: "resyncing…", unauthorized: "not signed in" };
  client.on("state", (s) => {
    const c = $("conn");
    c.textContent = LABELS[s] || s; c.dataset.state = s; c.className = "badge conn-" + s;
    if (s === "unauthorized") location.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname + location.search);
  });
  client.on("redis", (up) => { const r = $("redis"); r.textContent = up ? "redis up" : "redis down"; r.className = "badge " + (up ? "ok" : "bad"); });
  client.on("topics", (topics) => {
    known = new Set(topics);
    subscribeLater();
    // Informer topics can appear before the components entry that names them.
    for (const t of topics) if (t.startsWith(T.informer_prefix) && !informerTopics.has(t)) { informerTopics.set(t, t.slice(T.informer_prefix.length)); want(t); }
    componentsDirty = true; schedule();
  });

  client.on("snapshot", (topic) => {
    liveTopics.add(topic);
    if (topic === T.components) { syncInformers(); componentsDirty = true; }
    else if (topic === T.queue) queue.dirty = true;
    else if (topic === T.controller) { absorbSummaries(); timelineDirty = true; }
    schedule();
  });

  client.on("resync", (topic, reason) => {
    liveTopics.delete(topic);
    if (topic === T.controller || topic === T.queue) {
      const note = $("tl-resync");
      note.hidden = false;
      note.textContent = "⟳ " + (topic === T.queue ? "queue" : "controller") + " stream resynced (" + reason + ") at " + clock(workerNow()) + ": attempts in between may be missing";
    }
    if (informerTopics.has(topic)) {
      pushEvent({ marker: "stream", ts: workerNow(), inf: informerTopics.get(topic),
        text: "⟳ stream resynced (" + reason + "): cache state reloaded from a fresh snapshot" });
    }
    schedule();
  });

  client.on("records", (topic, records, id, frame) => {
    noteFrame(topic, frame);
    if (topic === T.queue) onQueue(records, frame);
    else if (topic === T.controller) onController(records, frame);
    else if (topic === T.components) { syncInformers(); componentsDirty = true; }
    else if (informerTopics.has(topic)) onInformer(topic, records);
    schedule();
  });

  // Times in the data (ts, since, ready_at) are the worker's wall clock. Estimate how far the
  // browser's clock is from it as the smallest (arrival − frame.ts) over recent live frames: latency
  // only adds to that difference. History and replayed frames (before a topic's snapshot) are old
  // by design and are not sampled. Below 250 ms the offset is noise and is ignored.
  const liveTopics = new Set();
  const skewSamples = [];
  let skew = 0;
  function noteFrame(topic, frame) {
    if (!liveTopics.has(topic) || !frame || typeof frame.ts !== "number") return;
    skewSamples.push(Date.now() - frame.ts);
    if (skewSamples.length > 50) skewSamples.shift();
    const min = Math.min(...skewSamples);
    skew = Math.abs(min) < 250 ? 0 : min;
  }
  function workerNow() { return Date.now() - skew; }

  function stateOf(topic) { const t = client.topics.get(topic); return t ? t.state : new Map(); }

  // ---- components --------------------------------------------------------------------------
  function syncInformers() {
    for (const [k, v] of stateOf(T.components)) {
      if (v && v.kind === P.ComponentKind.INFORMER) {
        const topic = T.informer_prefix + P.topicPart(v.name || k.slice(P.componentKey(P.ComponentKind.INFORMER, "").length));
        if (!informerTopics.has(topic) || informerTopics.get(topic) !== v.name) informerTopics.set(topic, v.name);
        want(topic);
      }
    }
  }

  function renderComponents() {
    const box = $("components");
    const items = [];
    for (const [, v] of [...stateOf(T.components)].sort()) {
      if (!v) continue;
      if (v.kind === P.ComponentKind.INFORMER) {
        const st = window.ctrlscopePipeline.reflectorState(v);
        items.push(el("span", { className: "comp informer", title: "informer " + v.name + " · " + (v.fifo || "") + " · rv " + (v.rv || "?") },
          "informer ", el("b", null, v.name), " ", el("span", { className: "badge st-" + st }, st),
          v.synced ? el("span", { className: "badge ok" }, "synced") : el("span", { className: "badge warn" }, "syncing")));
      } else if (v.kind === P.ComponentKind.CONTROLLER) {
        const seg = P.topicPart(v.name);
        items.push(seg === page.controller ? el("span", { className: "comp controller current" }, "controller ", el("b", null, v.name))
          : el("a", { className: "comp controller", href: "/c/" + page.worker + "/" + seg + "/" }, "controller " + v.name));
      } else if (v.kind === P.ComponentKind.LEASE) {
        items.push(el("span", { className: "comp lease" }, "lease ", el("b", null, v.name || ""), " ",
          el("span", { className: "badge " + (v.leader ? "ok" : "") }, v.leader ? "leader" : "follower (" + (v.holder || "?") + ")")));
      }
    }
    if (!items.length) items.push(el("span", { className: "muted" }, "waiting for the worker's components…"));
    box.replaceChildren(...items);
    const mine = watchedInformers();
    const names = [...new Set(informerTopics.values())];
    const others = names.filter((n) => mine && !mine.has(n));
    if (String(others) !== String([...hiddenInformers])) { hiddenInformers = new Set(others); events.rebuild = true; }
    $("ev-informers").textContent = names.filter((n) => !hiddenInformers.has(n)).join(", ");
  }
  // The worker's informers this controller does not watch, as of the last components update: their
  // rows stay out of the events panel (rows about anything else, e.g. fault markers, always show).
  let hiddenInformers = new Set();

  // This page's controller as the worker's components report it ({} until reported).
  function controllerComponent() {
    for (const v of stateOf(T.components).values()) {
      if (v && v.kind === P.ComponentKind.CONTROLLER && P.topicPart(v.name) === page.controller) return v;
    }
    return {};
  }
  // The informers this controller watches (null: not reported yet, so every informer of the worker
  // counts). The events panel and the pipeline show only these; the cache panel can still browse
  // every informer of the worker.
  function watchedInformers() {
    const w = controllerComponent().watches;
    return Array.isArray(w) ? new Set(w) : null;
  }

  // ---- workqueue ----------------------------------------------------------------------------
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
    if (key === focusKey) tr.className = "focus";
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
      (filteredEvents ? " · " + filteredEvents.toLocaleString() + " events filtered by predicates" : "") +
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

  // ---- reconcile timeline --------------------------------------------------------------------
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
        if (r.filtered_by) { filteredEvents += 1; queue.dirty = true; continue; }
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
      if (l.key === focusKey) l.el.classList.add("focus");
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
        el("button", { type: "button", id: "details-focus", dataset: { key: a.key } }, a.key === focusKey ? "unfocus key (f)" : "focus key (f)"),
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
    else if (e.target.id === "details-focus") { const k = e.target.dataset.key; setFocus(k === focusKey ? "" : k); showDetails(selected); }
  });
  function closeDetails() { $("details").hidden = true; selected = null; timelineDirty = true; schedule(); }

  $("window").addEventListener("click", (e) => {
    const b = e.target.closest("button[data-window]");
    if (!b) return;
    windowSec = Number(b.dataset.window);
    for (const x of $("window").children) x.classList.toggle("on", x === b);
    timelineDirty = true; schedule();
  });

  // ---- informer events ---------------------------------------------------------------------
  function pushEvent(row) {
    row.text = row.text || [row.inf, row.kind, row.type, row.key, row.rv, row.handler, row.outcome, row.error].filter(Boolean).join(" ");
    row.lc = row.text.toLowerCase();
    events.data.push(row);
    if (events.data.length > MAX_EVENT_DATA) events.data.splice(0, events.data.length - MAX_EVENT_DATA);
    if (events.paused) events.heldSince += 1;
    else {
      events.fresh.push(row);
      // A hidden tab gets no animation frames: keep only what one frame could draw, count the rest.
      if (events.fresh.length > 2 * MAX_EVENT_ROWS) { events.summarised += events.fresh.length - MAX_EVENT_ROWS; events.fresh.splice(0, events.fresh.length - MAX_EVENT_ROWS); }
    }
  }

  // Bookmarks arrive every few seconds per informer and only move the resourceVersion: consecutive
  // ones of one informer share a row ("BOOKMARK ×12", first → last rv) instead of flooding the list.
  function pushBookmark(ts, inf, rv) {
    const last = events.data[events.data.length - 1];
    if (last && last.kind === P.RecordKind.BOOKMARK && last.inf === inf) {
      last.count = (last.count || 1) + 1;
      last.ts = ts;
      last.type = P.WatchEventType.BOOKMARK + " ×" + last.count;
      last.rv = last.firstRv + " → " + rv;
      last.text = [inf, P.RecordKind.BOOKMARK, last.type, last.rv].join(" ");
      last.lc = last.text.toLowerCase();
      if (last.tr && last.tr.isConnected) {
        last.tr.cells[0].textContent = clock(ts);
        last.tr.cells[3].textContent = last.type;
        last.tr.cells[5].textContent = last.rv;
      }
      return;
    }
    pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.BOOKMARK, meta: true, type: P.WatchEventType.BOOKMARK, rv: rv, firstRv: rv, count: 1 });
  }

  function onInformer(topic, records) {
    const inf = informerTopics.get(topic);
    let syncs = 0, syncTs = 0;
    for (const r of records) {
      const ts = r.ts || workerNow();
      switch (r.k) {
        case P.RecordKind.WATCH:
          events.rate.add(ts);
          pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.WATCH, type: r.type, key: r.key, rv: r.rv });
          break;
        case P.RecordKind.HANDLER:
          events.rate.add(ts);
          pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.HANDLER, type: r.event, key: r.key, rv: r.rv, handler: r.handler,
            outcome: r.outcome, error: r.error, duration: r.duration });
          break;
        case P.RecordKind.FIFO:
          if (r.delta === P.DeltaType.SYNC && r.op === P.FifoOp.QUEUED) { syncs += 1; syncTs = ts; }
          break;
        case P.RecordKind.LIST:
          pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.LIST, meta: true, type: r.error ? "LIST failed" : "LIST " + r.items + " items", rv: r.rv,
            error: r.error, outcome: r.duration !== undefined ? fmtDuration(r.duration * 1000) : "" });
          break;
        case P.RecordKind.WATCH_START: pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.WATCH_START, meta: true, type: "WATCH from", rv: r.rv }); break;
        case P.RecordKind.WATCH_END: pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.WATCH_END, meta: true, type: "watch ended", key: r.reason }); break;
        case P.RecordKind.BOOKMARK: pushBookmark(ts, inf, r.rv); break;
        case P.RecordKind.BACKOFF: pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.BACKOFF, meta: true, type: "backoff " + fmtDuration((r.delay || 0) * 1000), key: r.reason }); break;
        case P.RecordKind.STATE: pushEvent({ ts: ts, inf: inf, kind: P.RecordKind.STATE, meta: true, type: r.state }); break;
        default: break;
      }
    }
    if (syncs) {
      // Periodic resync: the FIFO re-delivers every cached object as a Sync delta. One marker per burst.
      const lastRow = events.data[events.data.length - 1];
      if (lastRow && lastRow.marker === "resync" && lastRow.inf === inf && syncTs - lastRow.ts < 1000) {
        lastRow.count += syncs;
        lastRow.text = "⟳ informer resync: " + lastRow.count + " cached objects re-delivered (" + P.DeltaType.SYNC + ")";
        lastRow.lc = lastRow.text.toLowerCase();
        if (lastRow.tr) lastRow.tr.firstChild.textContent = clock(lastRow.ts) + "  " + inf + "  " + lastRow.text;
      } else {
        pushEvent({ marker: "resync", ts: syncTs, inf: inf, count: syncs, text: "⟳ informer resync: " + syncs + " cached objects re-delivered (" + P.DeltaType.SYNC + ")" });
      }
    }
  }

  // Filter terms: plain words must all appear in the row; field:value terms match one field
  // (type:added, kind:handler, ns:default, name:web, key:, rv:, handler:, outcome:error, informer:).
  const FIELDS = {
    type: (r) => r.type, kind: (r) => r.kind, key: (r) => r.key, rv: (r) => r.rv, handler: (r) => r.handler,
    outcome: (r) => r.outcome, informer: (r) => r.inf,
    ns: (r) => (r.key && r.key.includes("/") ? r.key.split("/")[0] : ""),
    name: (r) => (r.key ? r.key.split("/").pop() : ""),
  };
  function matches(row) {
    if (hiddenInformers.has(row.inf)) return false; // another controller's informer
    if (row.marker) return true; // markers stay visible whatever the filter: they explain gaps
    for (const term of events.filter) {
      const colon = term.indexOf(":");
      const field = colon > 0 ? FIELDS[term.slice(0, colon)] : null;
      if (field) { if (!String(field(row) || "").toLowerCase().includes(term.slice(colon + 1))) return false; }
      else if (!row.lc.includes(term)) return false;
    }
    return true;
  }

  function eventRow(row) {
    let tr;
    if (row.marker) {
      tr = el("tr", { className: "resync-marker marker-" + row.marker }, el("td", { colSpan: 8 }, clock(row.ts) + "  " + (row.inf || "") + "  " + row.text));
    } else {
      const cls = "ev-" + row.kind + (row.meta ? " meta" : "") + (row.outcome === P.HandlerOutcome.ERROR ? " outcome-error" : "") + (row.key === focusKey && focusKey ? " focus" : "");
      tr = el("tr", { className: cls },
        el("td", null, clock(row.ts)), el("td", null, row.inf || ""), el("td", null, row.kind),
        el("td", { className: "type type-" + String(row.type || "").split(" ")[0] }, row.type || ""), el("td", { className: "key" }, row.key || ""),
        el("td", null, row.rv || ""), el("td", null, row.handler || ""),
        el("td", { className: "outcome", title: row.error || "" }, row.outcome === P.HandlerOutcome.ERROR ? "error: " + (row.error || "") : row.outcome || ""));
    }
    row.tr = tr;
    return tr;
  }

  function renderEvents() {
    const tbody = $("ievents");
    if (events.paused) {
      $("paused-note").textContent = "paused: " + events.heldSince.toLocaleString() + " new events held (p to resume)";
      return;
    }
    if (events.rebuild) {
      events.rebuild = false;
      events.fresh = [];
      const rows = [];
      for (let i = events.data.length - 1; i >= 0 && rows.length < MAX_EVENT_ROWS; i--) if (matches(events.data[i])) rows.push(eventRow(events.data[i]));
      tbody.replaceChildren(...rows);
    } else if (events.fresh.length) {
      const frag = document.createDocumentFragment();
      let n = 0;
      for (let i = events.fresh.length - 1; i >= 0 && n < MAX_EVENT_ROWS; i--) {
        if (matches(events.fresh[i])) { frag.appendChild(eventRow(events.fresh[i])); n += 1; }
      }
      if (events.fresh.length > MAX_EVENT_ROWS) events.summarised += events.fresh.length - MAX_EVENT_ROWS;
      events.fresh = [];
      tbody.insertBefore(frag, tbody.firstChild);
      while (tbody.rows.length > MAX_EVENT_ROWS) tbody.deleteRow(-1);
    }
    $("paused-note").textContent = events.summarised ? "(newest " + MAX_EVENT_ROWS + " shown; " + events.summarised.toLocaleString() + " arrived faster than a frame: counted, not drawn)" : "";
  }

  function setPaused(p) {
    events.paused = p;
    const b = $("pause");
    b.textContent = p ? "resume (p)" : "pause (p)";
    b.setAttribute("aria-pressed", String(p));
    b.classList.toggle("on", p);
    $("events-panel").classList.toggle("paused", p);
    if (!p) { events.heldSince = 0; events.rebuild = true; }
    schedule();
  }
  $("pause").addEventListener("click", () => setPaused(!events.paused));
  const filterBox = $("filter");
  filterBox.addEventListener("input", () => {
    events.filter = filterBox.value.toLowerCase().split(/\s+/).filter(Boolean);
    events.rebuild = true; schedule();
  });
  // Focus one key: its lane and queue row are highlighted, the events are filtered to it and the
  // URL becomes the key's deep link (?key=…), ready to share. An empty key clears the focus.
  function setFocus(key) {
    focusKey = key || "";
    const url = new URL(location.href);
    if (focusKey) url.searchParams.set("key", focusKey); else url.searchParams.delete("key");
    history.replaceState(null, "", url);
    for (const l of lanes.values()) if (l.el) l.el.classList.toggle("focus", l.key === focusKey);
    filterBox.value = focusKey;
    events.filter = focusKey ? [focusKey.toLowerCase()] : [];
    events.rebuild = true; queue.dirty = true; schedule();
  }
  if (focusKey) { filterBox.value = focusKey; events.filter = [focusKey.toLowerCase()]; }

  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const typing = e.target instanceof HTMLElement && e.target.matches("input, textarea, select, [contenteditable]");
    if (typing) { if (e.key === "Escape") e.target.blur(); return; }
    if (e.key === "p") { e.preventDefault(); setPaused(!events.paused); }
    else if (e.key === "/") { e.preventDefault(); filterBox.focus(); filterBox.select(); }
    else if (e.key === "Escape") closeDetails();
    else if (e.key === "f") {
      // Focus the selected attempt's key (again: clear the focus).
      const a = attemptsById.get(selected);
      if (a) setFocus(a.key === focusKey ? "" : a.key); else if (focusKey) setFocus("");
    }
  });

  // ---- frame loop ----------------------------------------------------------------------------
  let scheduled = false;
  let lastSparks = 0;
  function schedule() { if (!scheduled) { scheduled = true; requestAnimationFrame(render); } }

  function render() {
    scheduled = false;
    const now = workerNow();
    if (componentsDirty) { componentsDirty = false; renderComponents(); }
    if (queue.dirty) renderQueue();
    tickQueue(now);
    renderTimeline(now);
    renderEvents();
    $("dedup-adds").textContent = queue.addCalls.toLocaleString();
    $("dedup-reconciles").textContent = queue.gets.toLocaleString();
    if (now - lastSparks >= 250) {
      lastSparks = now;
      const depth = queue.depth.values(now), adds = queue.adds.values(now), retries = queue.retries.values(now), evs = events.rate.values(now);
      UI.sparkline($("spark-depth"), depth, "--accent");
      UI.sparkline($("spark-adds"), adds, "--ok");
      UI.sparkline($("spark-retries"), retries, "--bad");
      UI.sparkline($("spark-events"), evs, "--accent");
      $("v-depth").textContent = queue.lastDepth;
      $("v-adds").textContent = adds[adds.length - 2] || 0; // the last complete second
      $("v-retries").textContent = retries[retries.length - 2] || 0;
      $("v-events").textContent = evs[evs.length - 2] || 0;
    }
  }

  // Countdowns, ages and the timeline's time axis move even when nothing arrives: 10 frames/s.
  setInterval(schedule, 100);
  want(T.components); want(T.queue); want(T.controller);
  window.ctrlscope = { client: client, skew: () => skew, page: page, lanes: lanes, queue: queue, events: events, setPaused: setPaused, showDetails: showDetails };
  // Panels in other scripts (cache.js: pipeline overview and cache table; metrics.js) register before this
  // script runs and are started here, before the socket opens, so they see every message.
  const api = { client: client, page: page, topics: T, informerTopics: informerTopics, workerNow: workerNow,
    stateOf: stateOf, schedule: schedule, events: events, queue: queue, want: want, pushEvent: pushEvent,
    controllerComponent: controllerComponent, watchedInformers: watchedInformers };
  for (const init of window.ctrlscopePanels || []) { try { init(api); } catch (e) { console.error(e); } }
  client.connect();
})();
