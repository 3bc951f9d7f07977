/*
 * A raw watcher's page (/c/{worker}/watcher/{segment}/; protocol v1.6): a program's own watch loop,
 * with no informer and no cache. From three topics of its worker:
 *
 * - components: the watcher's entry (resource, variant, state and since when, how its last stream
 *   ended) draws its chain (pipeline.js renderWatcher);
 * - metrics: the watchers stage counters of the newest samples give its totals and rates;
 * - w/{worker}/watcher/{segment}: its records, with up to HISTORY frames of history: every watch it
 *   opened (watch_start, from which resourceVersion), every event (watch), every GET it made for one
 *   (read), every stream end (watch_end: closed by the server, 410 expired, broken) and the loop's
 *   state (watching / stopped).
 *
 * The Streams table folds those records into one row per watch: what it delivered, how it ended,
 * and what the loop did then -- watched again (from "" or from where it was, after how long), or
 * nothing at all (the loop returned: its program does not know). The records list shows them as
 * they came, newest first. DOM work happens once per animation frame.
 */
(function () {
  "use strict";
  const P = window.ctrlscopeProtocol;
  const UI = window.ctrlscopeUI;
  const { el, fmtDuration } = UI;
  const Page = window.ctrlscopePage;
  const page = JSON.parse(document.getElementById("cs-page").textContent);
  const T = page.topics;
  const HISTORY = 1000;
  const MAX_ROWS = 500;
  const MAX_STREAMS = 200;
  const MAX_SAMPLES = 10;
  const RATE_WINDOW_MS = 3000;
  const $ = (id) => document.getElementById(id);
  const client = Page.client({ autoSubscribe: false, history: (topic) => (topic === T.watcher ? HISTORY : topic === T.metrics ? MAX_SAMPLES : 1) });
  const wanted = [T.components, T.metrics, T.watcher];
  let name = page.name || "";

  const records = []; // the watcher topic's records, oldest first (at most MAX_ROWS kept for the list)
  const streams = []; // {start, rv, events, reads, end, reason, error, then}
  const samples = [];

  function onRecord(r) {
    records.push(r);
    if (records.length > MAX_ROWS) records.shift();
    const open = streams[streams.length - 1];
    if (r.k === P.RecordKind.WATCH_START) {
      if (open && !open.then && open.end) open.then = { at: r.ts, rv: r.rv };
      streams.push({ start: r.ts, rv: r.rv, events: 0, reads: 0, end: null, reason: null, error: null, then: null });
      if (streams.length > MAX_STREAMS) streams.shift();
    } else if (open && !open.end && r.k === P.RecordKind.WATCH) open.events += 1;
    else if (open && !open.end && r.k === P.RecordKind.READ) open.reads += 1;
    else if (open && !open.end && r.k === P.RecordKind.WATCH_END) Object.assign(open, { end: r.ts, reason: r.reason, error: r.error });
    else if (open && open.end && !open.then && r.k === P.RecordKind.STATE && r.state === P.ReflectorState.STOPPED) open.then = { at: r.ts, stopped: true };
  }

  Page.connectionBadge(client);
  client.on("topics", (topics) => {
    for (const t of wanted) if (topics.includes(t) && !client.topics.has(t)) client.subscribe(t);
  });
  client.on("snapshot", (topic, state) => {
    if (topic === T.metrics) { const latest = state.get("latest"); if (latest) addSample(latest); }
    schedule();
  });
  client.on("records", (topic, recs) => {
    if (topic === T.watcher) for (const r of recs) onRecord(r);
    else if (topic === T.metrics) for (const r of recs) if (r.k === P.RecordKind.METRICS) addSample(r);
    schedule();
  });
  function addSample(rec) {
    const last = samples[samples.length - 1];
    if (last && rec.ts <= last.ts) return;
    samples.push(rec);
    if (samples.length > MAX_SAMPLES) samples.shift();
  }
  const counters = (s) => (((s && s.stages) || {}).watchers || {})[name] || null;
  function rate(field) {
    if (samples.length < 2) return null;
    const cur = samples[samples.length - 1];
    let base = samples[samples.length - 2];
    for (let i = samples.length - 2; i >= 0 && cur.ts - samples[i].ts <= RATE_WINDOW_MS; i--) base = samples[i];
    const a = counters(base), b = counters(cur);
    if (!a || !b || a[field] === undefined || b[field] === undefined) return null;
    return Math.max(0, b[field] - a[field]) / ((cur.ts - base.ts) / 1000);
  }

  function component() {
    const t = client.topics.get(T.components);
    if (!t) return null;
    for (const v of t.state.values()) {
      if (v && v.kind === P.ComponentKind.WATCHER && P.topicPart(v.name) === page.watcher) return v;
    }
    return null;
  }

  const time = (ts) => (ts ? UI.clock(ts) : "");
  const cell = (text, cls) => el("td", cls ? { className: cls } : null, text === null || text === undefined ? "" : String(text));
  function streamRow(s) {
    const how = s.end ? (s.reason || "") + (s.error ? ": " + s.error : "") : "open";
    let then = "";
    if (s.then && s.then.stopped) then = "the loop stopped: nothing watches any more";
    else if (s.then) then = "watched again after " + fmtDuration(Math.max(0, s.then.at - s.end)) + " from " + (s.then.rv ? "rv " + s.then.rv : "\"\" (every object again)");
    else if (s.end) then = "—";
    const tr = el("tr", { dataset: { reason: s.reason || "" } }, cell(time(s.start)), cell(s.rv === "" ? "\"\"" : s.rv), cell(s.events), cell(s.reads),
      cell(s.end ? time(s.end) : ""), cell(how, s.reason === P.WatchEndReason.EXPIRED ? "bad" : ""), cell(then, s.then && s.then.stopped ? "bad" : ""));
    return tr;
  }
  function recordRow(r) {
    let what = r.k, type = "", key = r.key || "", rv = r.rv || "", detail = "";
    if (r.k === P.RecordKind.WATCH) type = r.type;
    else if (r.k === P.RecordKind.READ) { what = "GET"; rv = r.code; detail = r.path + " · " + fmtDuration(r.duration * 1000); }
    else if (r.k === P.RecordKind.WATCH_START) { what = "watch opened"; rv = r.rv === "" ? "\"\"" : r.rv; }
    else if (r.k === P.RecordKind.WATCH_END) { what = "watch ended"; type = r.reason; detail = r.error || ""; }
    else if (r.k === P.RecordKind.STATE) { what = "loop"; type = r.state; }
    else if (r.k === P.RecordKind.WATCHER) { what = "started"; type = r.variant; detail = r.resource + (r.namespace ? " in " + r.namespace : " in every namespace"); }
    return el("tr", { dataset: { k: r.k } }, cell(time(r.ts)), cell(what), cell(type), cell(key), cell(rv), cell(detail));
  }

  function render() {
    const comp = component();
    if (comp) {
      name = comp.name;
      const h = $("h-watcher");
      if (h.textContent !== name) h.textContent = name;
    }
    const latest = counters(samples[samples.length - 1]) || {};
    if (comp) {
      window.ctrlscopePipeline.renderWatcher($("pipeline"), { name: comp.name, resource: comp.resource, variant: comp.variant,
        state: comp.state, since: comp.since, lastEnd: comp.last_end, now: Date.now(), counts: latest,
        rates: { watch: rate("watch"), reads: rate("reads") } });
    }
    $("streams").replaceChildren(...streams.slice().reverse().map(streamRow));
    $("wevents").replaceChildren(...records.slice().reverse().map(recordRow));
  }
  const schedule = Page.scheduler(render);
  setInterval(schedule, 1000); // "not watching since … ago" moves on
  window.ctrlscope = { client: client };
  client.connect();
})();
