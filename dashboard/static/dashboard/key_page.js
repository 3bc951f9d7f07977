/*
 * One key's page (/c/{worker}/{controller}/k/{namespace}/{name}; /k/{name} cluster-scoped): the key's
 * story from the oldest record the streams retain to now, live, and its object.
 *
 * Load: story.json?key= (dashboard/key_story.py) scans the retained streams of the controller's topic,
 * its queue's and its informers' once and returns every record naming the key, each topic's state
 * changes of the key (an informer's: the object's successive cache summaries), what each snapshot
 * says of it now, and where each scan ended. The page then subscribes to those topics *from* there
 * (a cursor, as the controller page does after an informer's snapshot.json), so the story goes on
 * live with no gap and no record twice, and to the worker's components (the controller's findings).
 * Live records pass the same rule the server applied to the history (key_story.py's module docstring:
 * a record's key, an event's requests, a finding's subject, a write's path or the key's attempt
 * running alone), so a row reads the same whether it was loaded or arrived.
 *
 * The story is one table in time order (the topics merged by each record's ts, ties by pipeline
 * order: watch → handler → event → queue add → get → attempt → writes → result → backoff → done), a
 * row per record: events in (which handler mapped them, rv, the changed fields, whether the
 * controller's own write caused them), queue operations (dedup, defer, the backoff steps with the
 * delay and which part of the rate limiter chose it), attempts with their triggers (provenance.js)
 * and results, writes and the event each caused, findings (findings.js). Checkboxes hide the
 * informer's and the queue's rows. At most MAX_ROWS rows are drawn, the newest; new rows are appended
 * while they come in order (a rebuild otherwise). The Object panel lists the versions the informer's
 * stream carried (rv, generation, phase, and the fields its update event changed) beside the object
 * itself as the worker's cache holds it now (inspect.js: YAML, and the diff of the last update).
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl;
  const P = window.ctrlscopeProtocol;
  const UI = window.ctrlscopeUI;
  const { el, fmtDuration, fmtPrecise, clock } = UI;
  const Page = window.ctrlscopePage;
  const Prov = window.ctrlscopeProvenance;
  const F = window.ctrlscopeFindings;
  const page = JSON.parse(document.getElementById("cs-page").textContent);
  const T = page.topics;
  const KEY = page.key;
  const $ = (id) => document.getElementById(id);
  const MAX_ROWS = 2000;
  const R = P.RecordKind, Q = P.QueueOp;
  const CONTROLLER = P.TopicKind.CONTROLLER, QUEUE = P.TopicKind.QUEUE, INFORMER = P.TopicKind.INFORMER;

  // Ties in ts (records of one worker share its clock, to the µs): the pipeline's order.
  const QUEUE_RANK = { [Q.ADD]: 4, [Q.DEDUP]: 4, [Q.DEFER]: 4, [Q.REQUEUE]: 4, [Q.GET]: 5, [Q.ADD_RATE_LIMITED]: 9,
    [Q.ADD_AFTER]: 9, [Q.FORGET]: 9, [Q.DONE]: 10 };
  const KIND_RANK = { [R.WATCH]: 0, [R.FIFO]: 1, [R.HANDLER]: 2, [R.EVENT]: 3, [R.RECONCILE_START]: 6, [R.WRITE]: 7,
    [R.LOG]: 7, [R.PROGRESS]: 7, [R.RECONCILE]: 8, [R.FINDING]: 11 };
  const rank = (row) => (row.state ? 1.5 : row.r.k === R.QUEUE ? QUEUE_RANK[row.r.op] || 4 : KIND_RANK[row.r.k] ?? 7);
  const before = (a, b) => a.ts - b.ts || rank(a) - rank(b) || a.seq - b.seq;

  // ---- the model ------------------------------------------------------------------------------
  const topics = new Map(); // topic -> {kind, name}: the ones the story covers
  const rows = [];          // {ts, seq, topic, kind, r | state, via}, in story order
  let seq = 0;
  let component = {};       // the controller's components entry (findings, rate_limiter)
  const now = { queue: null, controller: null, cache: new Map() }; // the key now, per topic
  const findingRecords = new Map(); // "{finding}/{subject}" -> its newest record (detail)
  const running = new Map(); // key -> attempts running, from the live controller records
  let scanNote = "";
  // appendFrom: the first row added since the table was drawn, when every one since came in order
  // (they are appended); rebuild: a row came out of order, or the filter changed.
  let storyDirty = true, versionsDirty = true, appendFrom = -1, rebuild = true;

  function add(row) {
    row.seq = ++seq;
    if (!rows.length || before(rows[rows.length - 1], row) <= 0) {
      if (appendFrom < 0) appendFrom = rows.length;
      rows.push(row);
    } else {
      let lo = 0, hi = rows.length;
      while (lo < hi) { const mid = (lo + hi) >>> 1; if (before(rows[mid], row) <= 0) lo = mid + 1; else hi = mid; }
      rows.splice(lo, 0, row);
      rebuild = true;
    }
    if (row.r && row.r.k === R.FINDING) findingRecords.set(row.r.finding + "/" + row.r.subject, row.r);
    if (row.state || (row.r && row.r.k === R.EVENT)) versionsDirty = true;
    storyDirty = true;
  }

  // ---- which records are the key's (key_story.py applies the same rule to the history) ---------
  function pathKey(path) {
    const parts = String(path).split("?")[0].replace(/^\/+|\/+$/g, "").split("/");
    if (parts.length < 2 || (parts[0] !== "api" && parts[0] !== "apis")) return null;
    let rest = parts.slice(parts[0] === "api" ? 2 : 3), ns = "";
    if (rest.length >= 2 && rest[0] === "namespaces") { ns = rest[1]; rest = rest.slice(2); if (!rest.length) return ns; }
    if (rest.length < 2 || !rest[1]) return null;
    return ns ? ns + "/" + rest[1] : rest[1];
  }
  function controllerRecord(r) {
    if (r.k === R.RECONCILE_START) running.set(r.key, (running.get(r.key) || 0) + 1);
    else if (r.k === R.RECONCILE) { const n = (running.get(r.key) || 0) - 1; if (n > 0) running.set(r.key, n); else running.delete(r.key); }
    if (r.k === R.EVENT) return r.key === KEY || (Array.isArray(r.requests) && r.requests.includes(KEY)) ? {} : null;
    if (r.k === R.WRITE) {
      if (pathKey(r.path) === KEY) return { via: "path" };
      return running.size === 1 && running.has(KEY) ? { via: "attempt" } : null;
    }
    if (r.k === R.FINDING) return r.subject === KEY ? {} : null;
    return r.key === KEY ? {} : null;
  }

  function onRecords(topic, records, frame) {
    const info = topics.get(topic);
    if (!info) return;
    let last = frame.ts; // a state change comes with the frame's last record of the key (key_story.py)
    for (const r of records) {
      let mine = null;
      if (info.kind === CONTROLLER) mine = controllerRecord(r);
      else if (r.key === KEY && (info.kind === QUEUE ? r.k === R.QUEUE : r.k === R.WATCH || r.k === R.FIFO || r.k === R.HANDLER)) mine = {};
      if (!mine) continue;
      last = r.ts || frame.ts || 0;
      add({ ts: last, topic: topic, kind: info.kind, r: r, via: mine.via });
    }
    if (frame && frame.s && KEY in frame.s) setNow(topic, info, frame.s[KEY], last, true);
  }

  function setNow(topic, info, value, ts, story) {
    if (info.kind === QUEUE) now.queue = value;
    else if (info.kind === CONTROLLER) now.controller = value;
    else {
      now.cache.set(topic, value);
      if (story) add({ ts: ts || 0, topic: topic, kind: info.kind, state: true, v: value });
    }
  }

  // ---- load the story, then go live from where it ended ---------------------------------------
  const client = Page.client({ autoSubscribe: false, history: 0 });
  Page.connectionBadge(client);
  const cursors = new Map(); // topic -> where the story's scan of it ended
  const subscribed = new Set();
  let loaded = false;
  // Deferred past the "hello" that lists the topics: that one resumes, from their cursors, the
  // topics the client already has (after a reconnect); this subscribes the ones it has not yet.
  let subscribing = false;
  function subscribeKnown() {
    if (subscribing) return;
    subscribing = true;
    Promise.resolve().then(() => {
      subscribing = false;
      for (const t of [T.components, ...cursors.keys()]) {
        if (!client.knownTopics.includes(t) || subscribed.has(t) || client.topics.has(t)) continue;
        subscribed.add(t);
        if (cursors.has(t)) client.topics.set(t, { cursor: cursors.get(t), state: new Map() });
        client.subscribe(t);
      }
    });
  }
  client.on("topics", subscribeKnown);
  client.on("error", (err) => { if (err && err.code === "unknown_topic") subscribed.delete(err.topic); });
  client.on("snapshot", (topic, state) => {
    if (topic === T.components) { componentFrom(state); return; }
    // A topic the server could not resume from the story's cursor (retention, a Redis restart) comes
    // as a fresh snapshot: the key's value in it is what it is now.
    const info = topics.get(topic);
    if (info && state.has(KEY)) setNow(topic, info, state.get(KEY), Date.now(), false);
  });
  client.on("resync", (topic, reason) => {
    const info = topics.get(topic);
    if (info) add({ ts: Date.now(), topic: topic, kind: info.kind, marker: "⟳ the " + topicLabel(info) + " stream resynced (" + reason + "): records in between may be missing" });
    schedule();
  });
  client.on("records", (topic, records, id, frame) => {
    if (topic === T.components) { componentFrom(client.topics.get(topic).state); return; }
    onRecords(topic, records, frame);
    schedule();
  });
  function componentFrom(state) {
    for (const v of state.values()) {
      if (v && v.kind === P.ComponentKind.CONTROLLER && P.topicPart(v.name) === page.controller) component = v;
    }
    schedule();
  }

  const topicLabel = (info) => (info.kind === INFORMER ? "informer " + info.name : info.kind);

  fetch(U("/c/" + encodeURIComponent(page.worker) + "/" + encodeURIComponent(page.controller) + "/story.json?key=" + encodeURIComponent(KEY)),
    { credentials: "same-origin", cache: "no-store" })
    .then((resp) => resp.json().then((body) => ({ resp, body })))
    .then(({ resp, body }) => {
      if (!resp.ok) throw new Error((body && body.error) || "HTTP " + resp.status);
      component = body.component || {};
      const covered = [];
      for (const t of body.topics) {
        const info = { kind: t.kind, name: t.name };
        topics.set(t.topic, info);
        if (t.now !== null && t.now !== undefined) setNow(t.topic, info, t.now, 0, false);
        for (const x of t.records) {
          if (t.kind === CONTROLLER) controllerRecord(x.r); // the running attempts, for live writes
          add({ ts: x.r.ts || 0, topic: t.topic, kind: t.kind, r: x.r, via: x.via });
        }
        if (t.kind === INFORMER) for (const s of t.states) add({ ts: s.ts || 0, topic: t.topic, kind: t.kind, state: true, v: s.v });
        covered.push(topicLabel(info) + ": " + (t.complete ? "all " + t.scanned.toLocaleString() + " retained frames"
          : "the last " + t.scanned.toLocaleString() + " frames, since " + clock(t.first_ts)));
        cursors.set(t.topic, t.cursor);
      }
      scanNote = "read from " + covered.join(" · ");
      if (body.epoch) client.epoch = body.epoch;
      loaded = true;
      if (client.knownTopics.length) subscribeKnown();
      loadObject(body);
      schedule();
    })
    .catch((err) => {
      $("key-now").replaceChildren(el("span", { className: "obj-error", role: "alert" }, "the story could not be read: " + err.message));
    });

  // ---- rows in words ----------------------------------------------------------------------------
  const seconds = (s) => fmtPrecise(Number(s) * 1000);
  const code = (text) => el("code", null, text);
  const own = (title) => el("span", { className: "badge self-badge", title: title }, "own write");
  const writesByRv = new Map(); // rv -> the write row's detail cell (an event that came back links to it)
  const attemptNo = new Map();  // a reconcile_start / reconcile row -> its attempt's number in the story

  function describe(row, prevStart) {
    if (row.marker) return { what: "resync", cls: "marker", detail: [row.marker] };
    const info = topics.get(row.topic) || { kind: row.kind, name: "" };
    if (row.state) {
      const v = row.v;
      return { what: "cache", cls: "inf", detail: v ? ["rv ", code(v.rv || "?"), v.gen !== undefined && v.gen !== null ? " · gen " + v.gen : "",
        v.phase ? " · " + v.phase : "", v.deleting ? " · deleting" : "", " in informer " + info.name]
        : ["deleted from informer " + info.name + "'s cache"] };
    }
    const r = row.r;
    if (row.kind === INFORMER) {
      if (r.k === R.WATCH) return { what: "watch " + r.type, cls: "inf type-" + r.type, detail: ["rv ", code(r.rv || "?"), " reached informer " + info.name] };
      if (r.k === R.FIFO) return { what: "fifo " + r.op, cls: "inf fifo", detail: [r.delta + " delta, FIFO depth " + r.depth] };
      return { what: "handler", cls: "inf outcome-" + r.outcome, detail: [code(r.handler), " " + r.event + " → " + r.outcome + " in " + seconds(r.duration || 0),
        r.rv ? " · rv " + (r.old_rv ? r.old_rv + " → " : "") + r.rv : "", r.error ? el("span", { className: "error" }, " · " + r.error) : ""] };
    }
    if (row.kind === QUEUE) return queueRow(r);
    if (r.k === R.EVENT) {
      const d = [];
      if (r.key !== KEY) d.push("of ", code(r.key), " ");
      if (r.filtered_by) d.push("dropped by predicate ", code(r.filtered_by));
      else d.push("→ queued this key");
      if (r.source) d.push(" · via ", code(r.source));
      if (r.rv) d.push(" · rv " + (r.old_rv && r.old_rv !== r.rv ? r.old_rv + " → " : "") + r.rv);
      if (Array.isArray(r.diff) && r.diff.length) d.push(" · changed ", el("span", { className: "tr-diff" }, r.diff.join(", ") + (r.diff_more ? " (+" + r.diff_more + " more)" : "")));
      if (r.self) {
        d.push(" ", own("caused by this controller's own write (the resourceVersion its write returned)"));
        const w = writesByRv.get(r.rv);
        if (w) d.push(" of " + clock(w.ts));
      }
      return { what: r.event + " event", cls: "ev" + (r.filtered_by ? " filtered" : "") + (r.self ? " self" : ""), detail: d };
    }
    if (r.k === R.RECONCILE_START) {
      const n = attemptNo.get(row);
      const d = ["worker " + r.worker + (r.handler ? " · handler " + r.handler + (r.cause ? " (" + r.cause + ")" : "") : "")];
      if (r.self_triggered) d.push(" ", Prov.selfBadge());
      if (Prov.known(r)) d.push(Prov.details(r.triggers, r.trigger_count));
      return { what: "attempt " + n + " starts", cls: "att" + (r.self_triggered ? " self" : ""), detail: d };
    }
    if (r.k === R.RECONCILE) {
      const n = prevStart ? attemptNo.get(prevStart) : null;
      const d = [el("span", { className: "badge result-badge result-" + r.result }, r.result), " in " + seconds(r.duration || 0)];
      if (r.requeue_after) d.push(" · requeue after " + r.requeue_after + " s");
      if (r.error_kind) d.push(" · " + r.error_kind + (typeof r.delay === "number" ? ", retried in " + r.delay + " s" : ""));
      if (r.error) d.push(el("div", { className: "error-text" }, r.error));
      return { what: (n ? "attempt " + n + " " : "") + "ends", cls: "att result-row-" + r.result, detail: d };
    }
    if (r.k === R.WRITE) {
      const d = [code(r.method + " " + r.path), " → " + (r.refused ? "refused: " + r.refused : r.code || "no response")];
      if (r.rv) d.push(" · rv " + r.rv);
      if (row.via === "attempt") d.push(el("span", { className: "muted", title: "a write names no key: this one was made while this key's attempt was the only one running" }, " · during this key's attempt"));
      return { what: "write", cls: "write" + (r.code >= 400 || r.code === 0 ? " failed" : ""), detail: d };
    }
    if (r.k === R.FINDING) {
      const d = [F.badge(r), " " + (r.open ? "" : "closed: ") + (r.message || "")];
      const text = r.open ? F.detailText(r) : "";
      if (text) d.push(el("div", { className: "finding-detail" }, text));
      return { what: "finding " + (!r.open ? "closed" : row.again ? "updated" : "open"), cls: "finding" + (r.open ? " open" : ""), detail: d };
    }
    if (r.k === R.LOG) return { what: "log " + r.level, cls: "log lvl-" + r.level, detail: [r.handler ? "[" + r.handler + "] " : "", r.message] };
    if (r.k === R.PROGRESS) return { what: "progress", cls: "log", detail: ["handler " + r.handler + ": " + (r.state || "no longer stored") + (r.retries ? " · " + r.retries + " retries" : "")] };
    return { what: r.k, cls: "", detail: [] };
  }

  function queueRow(r) {
    const depth = typeof r.depth === "number" ? " (queue depth " + r.depth + ")" : "";
    switch (r.op) {
      case Q.ADD: return { what: "queued", cls: "q", detail: ["added" + depth] };
      case Q.DEDUP: return { what: "dedup", cls: "q merged", detail: ["already queued: this add merged into the waiting one" + depth] };
      case Q.DEFER: return { what: "defer", cls: "q merged", detail: ["being processed: marked dirty, queued again when its attempt is done"] };
      case Q.GET: return { what: "taken", cls: "q", detail: ["a worker took it" + (typeof r.duration === "number" ? " after " + seconds(r.duration) + " in the queue" : "")] };
      case Q.DONE: return { what: "done", cls: "q", detail: ["its worker is done with it" + (typeof r.duration === "number" ? " after " + seconds(r.duration) : "")] };
      case Q.REQUEUE: return { what: "queued again", cls: "q", detail: ["added while it was processed: back in the queue"] };
      case Q.ADD_RATE_LIMITED: return { what: "backoff", cls: "q backoff", detail: ["retry " + (r.requeues || "?") + " in ", el("b", null, seconds(r.delay || 0)), chosenBy(r)] };
      case Q.ADD_AFTER: return { what: "requeue after", cls: "q backoff", detail: ["queued again in ", el("b", null, seconds(r.delay || 0)), " (AddAfter: a delay asked for)"] };
      case Q.FORGET: return { what: "forget", cls: "q", detail: ["the rate limiter forgot it: its next failure starts from the first delay again"] };
      default: return { what: String(r.op), cls: "q", detail: [] };
    }
  }
  // Which part of the rate limiter chose a backoff's delay (protocol v1.5; the timeline says the same).
  function chosenBy(r) {
    const spec = component.rate_limiter;
    const leaf = spec && r.requeues ? P.limiterStep(spec, r.requeues, r.delay) : null;
    if (!leaf) return "";
    if (leaf.type === P.RateLimiterType.EXPONENTIAL) return " · exponential: " + seconds(leaf.base) + " × 2^" + (r.requeues - 1) + ", at most " + seconds(leaf.max);
    if (leaf.type === P.RateLimiterType.FAST_SLOW) return " · " + (r.requeues <= leaf.fast_attempts ? "fast" : "slow") + " retry";
    if (leaf.type === P.RateLimiterType.BUCKET) return " · token bucket " + leaf.qps + "/s";
    return "";
  }

  // ---- drawing ---------------------------------------------------------------------------------
  const show = { inf: true, q: true };
  $("show-informer").addEventListener("change", (e) => { show.inf = e.target.checked; rebuild = true; storyDirty = true; schedule(); });
  $("show-queue").addEventListener("change", (e) => { show.q = e.target.checked; rebuild = true; storyDirty = true; schedule(); });
  const visible = (row) => (row.kind === INFORMER ? show.inf : row.kind === QUEUE ? show.q : true);

  // What a row needs of the rows before it, drawn or not: its attempt's number, the time since the
  // row before, the write an event came back from.
  let lastNoted = null, lastStart = null, attempts = 0;
  const openSeen = new Set(); // "{finding}/{subject}" open as of the row being drawn: a later record updates it
  function note(row) {
    if (row.r && row.r.k === R.FINDING) {
      const id = row.r.finding + "/" + row.r.subject;
      row.again = !!row.r.open && openSeen.has(id);
      if (row.r.open) openSeen.add(id); else openSeen.delete(id);
    }
    if (row.r && row.r.k === R.RECONCILE_START) { attempts += 1; attemptNo.set(row, attempts); lastStart = row; }
    if (row.r && row.r.k === R.WRITE && row.r.rv) writesByRv.set(row.r.rv, { ts: row.ts, cell: null });
    const since = lastNoted ? "+" + fmtPrecise(row.ts - lastNoted.ts) : "";
    lastNoted = row;
    return since;
  }
  function drawRow(row) {
    const since = note(row);
    const { what, cls, detail } = describe(row, lastStart);
    const cell = el("td", { className: "detail" }, ...detail);
    if (row.r && row.r.k === R.WRITE && row.r.rv) writesByRv.get(row.r.rv).cell = cell;
    if (row.r && row.r.k === R.EVENT && row.r.self && writesByRv.has(row.r.rv)) {
      const w = writesByRv.get(row.r.rv);
      if (w.cell && !w.back) { w.back = true; w.cell.append(" → came back as an update event at " + clock(row.ts)); }
    }
    return el("tr", { className: "story-row " + cls, dataset: { kind: row.r ? row.r.k : row.state ? "cache" : "marker", topic: row.kind } },
      el("td", { className: "when" }, clock(row.ts)), el("td", { className: "num since" }, since), el("td", { className: "what" }, what), cell);
  }

  function renderStory() {
    const tbody = $("story");
    const scroller = $("story-scroll");
    const atBottom = scroller.scrollTop + scroller.clientHeight >= scroller.scrollHeight - 8;
    let list;
    if (!rebuild && appendFrom >= 0) {
      list = rows.slice(appendFrom).filter(visible);
      tbody.append(...list.map(drawRow));
      while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(0);
    } else {
      lastNoted = null; lastStart = null; attempts = 0; attemptNo.clear(); writesByRv.clear(); openSeen.clear();
      list = rows.filter(visible);
      const skipped = Math.max(0, list.length - MAX_ROWS);
      for (const row of list.slice(0, skipped)) note(row);
      const drawn = list.slice(skipped).map(drawRow);
      tbody.replaceChildren(...(drawn.length ? drawn : [el("tr", null, el("td", { colSpan: 4, className: "muted" }, loaded ? "nothing in the retained streams names this key" : "loading…"))]));
      $("story-more").hidden = !skipped;
      $("story-more").textContent = skipped ? skipped.toLocaleString() + " older rows are not drawn (the newest " + MAX_ROWS.toLocaleString() + " are)" : "";
    }
    appendFrom = -1; rebuild = false;
    $("story-scan").textContent = scanNote;
    if (atBottom) scroller.scrollTop = scroller.scrollHeight;
    storyDirty = false;
  }

  function renderHead(wall) {
    const parts = [];
    const q = now.queue;
    if (!loaded) return;
    if (!q) parts.push(el("span", { className: "badge" }, "not in the queue"));
    else {
      let text = q.s;
      if (q.s === P.QueueItemState.WAITING && q.ready_at) text = "waiting: back in the queue in " + fmtDuration(q.ready_at - wall);
      else if (q.since) text = q.s + " for " + fmtDuration(wall - q.since);
      parts.push(el("span", { className: "badge q-" + q.s, dataset: { state: q.s } }, text));
      if (q.requeues) parts.push(el("span", { className: "muted" }, q.requeues + " requeues since its last forget"));
    }
    const c = now.controller;
    if (c) {
      parts.push(el("span", { className: "key-attempts" }, c.attempts + " attempt" + (c.attempts === 1 ? "" : "s") + " since the worker started · last ",
        el("span", { className: "badge result-badge result-" + c.result }, c.result), c.at ? " " + fmtDuration(wall - c.at) + " ago" : ""));
    }
    const cached = [...now.cache].find(([, v]) => v);
    parts.push(el("span", { className: "muted" }, cached ? "cached at rv " + cached[1].rv + " by informer " + topics.get(cached[0]).name
      : "not in the cache of the informers it watches"));
    $("key-now").replaceChildren(...parts.flatMap((p) => [p, " "]));
    const open = F.forKey(component, KEY);
    $("key-findings").replaceChildren(...open.map((f) => {
      const rec = findingRecords.get(f.finding + "/" + f.subject);
      const text = rec && rec.open ? F.detailText(rec) : "";
      return el("div", { className: "key-finding", dataset: { finding: String(f.finding) } }, F.badge(f), " ", f.message || "",
        text ? el("div", { className: "finding-detail" }, text) : "");
    }));
  }

  // The versions of the object its informer's stream carried: each cache summary, what changed from
  // the one before (and, from the update event that brought it, which fields, and whether this
  // controller's own write made it).
  function renderVersions() {
    const eventsByRv = new Map();
    for (const row of rows) if (row.r && row.r.k === R.EVENT && row.r.rv && row.r.key === KEY) eventsByRv.set(row.r.rv, row.r);
    const out = [];
    let prev = null;
    for (const row of rows) {
      if (!row.state) continue;
      const v = row.v;
      const changes = [];
      if (!v) changes.push("deleted");
      else if (!prev) changes.push("first seen");
      else {
        if (prev.gen !== v.gen) changes.push("generation " + prev.gen + " → " + v.gen);
        if (prev.phase !== v.phase) changes.push("phase " + (prev.phase || "–") + " → " + (v.phase || "–"));
        if (!!prev.deleting !== !!v.deleting) changes.push("deletion started");
      }
      const ev = v ? eventsByRv.get(v.rv) : null;
      const cell = el("td", { className: "changed" }, changes.join(" · "));
      if (ev && Array.isArray(ev.diff)) cell.append(changes.length ? " · " : "", "fields ", el("span", { className: "tr-diff" }, ev.diff.join(", ") + (ev.diff_more ? " (+" + ev.diff_more + " more)" : "")));
      if (ev && ev.self) cell.append(" ", own("this controller's own write made this version"));
      out.push(el("tr", { dataset: { rv: v ? String(v.rv) : "" } }, el("td", { className: "when" }, clock(row.ts)), el("td", null, v ? String(v.rv) : "–"),
        el("td", { className: "num" }, v && v.gen !== null && v.gen !== undefined ? String(v.gen) : ""), el("td", null, v && v.phase ? v.phase : ""), cell));
      prev = v;
    }
    $("versions").replaceChildren(...(out.length ? out : [el("tr", null, el("td", { colSpan: 5, className: "muted" }, "no version of it in the retained informer streams"))]));
    versionsDirty = false;
  }

  // The object now, from the worker's cache (the informer whose cache holds it, else the first one
  // the controller watches): YAML, and the diff of the last update its handlers received.
  function loadObject(body) {
    const withIt = body.topics.find((t) => t.kind === INFORMER && t.now);
    const first = withIt || body.topics.find((t) => t.kind === INFORMER);
    if (!first) { $("object").replaceChildren(el("p", { className: "muted" }, "the controller watches no informer this worker announced")); return; }
    $("object-where").textContent = "as informer " + first.name + " of worker " + page.worker + " caches it · ";
    $("object-where").append(el("a", { href: U.informer(page.worker, P.topicPart(first.name)) + "?obj=" + encodeURIComponent(KEY) }, "its row in the cache"));
    window.ctrlscopeInspect.create($("object"), { worker: page.worker }).load(P.topicPart(first.name), KEY);
  }

  const schedule = Page.scheduler(() => {
    const wall = Date.now();
    if (storyDirty) renderStory();
    if (versionsDirty) renderVersions();
    renderHead(wall);
  });
  setInterval(schedule, 250); // countdowns and ages
  window.ctrlscope = { client: client, rows: rows, page: page };
  client.connect();
})();
