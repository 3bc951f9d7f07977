/*
 * The overview (/): every cluster and controller known to Redis. Workers are grouped by the cluster
 * they talk to (their components' "cluster" entry), and each controller is drawn as its pipeline
 * (pipeline.js, shared with the controller page) with live per-stage rates, state badges and initial
 * sync progress, plus leader/follower. An informer that no controller watches (a plain client-go
 * informer with Add/Update/Delete handlers, the classic program) is a card of its own: its chain,
 * ending at its handlers, linking to its page. Every informer is on some card: a controller's (its
 * components entry's `watches`; one that does not say watches every informer of its worker) or its
 * own. A raw watch loop (protocol v1.6 watcher: a program's own Watch in a loop, no cache) is a card
 * of its own too: Watch → no cache → a GET per event, with its variant, and "not watching since …"
 * once its loop has ended -- which its program never notices.
 *
 * Cheap by design: the page subscribes only to each worker's w/{worker}/components (what runs) and
 * w/{worker}/metrics (once a second: controller-runtime's families and the pipeline's stage counters,
 * see controllers/telemetry/metrics_sampler.py). Rates are counter differences between samples over
 * the last RATE_WINDOW_MS. Whether a worker is live is the one rule of protocol/redis-layout.md
 * ("Liveness", P.workerLiveness through presence.js): its newest run's presence entry decides (an
 * idle worker that sends no frame for minutes is live while its entry is refreshed); a worker that
 * keeps no entry is stale once its last components or metrics frame is FRAME_STALE_MS old, with when
 * it was last seen, instead of being listed as live forever. One stale for more than GONE_MS (a
 * replica from an earlier demo run, a stopped standby) is folded into its cluster's "stopped
 * workers" disclosure, so the live ones stay on top.
 *
 * The developer disclosure (collapsed by default) keeps the transport counters, the raw topic list
 * and the live event list; while it is open the page subscribes to every topic. DOM work happens
 * once per animation frame, whatever the message rate: event rows are queued as they arrive and the
 * newest MAX_ROWS are drawn; beyond that the page says how many it summarised.
 *
 * Which run is live comes from presence (presence.js, /presence.json): a worker whose newest run
 * stopped (cleanly, or silently: killed) is badged "stopped" with that run (when it started, on which
 * host, when it stopped or was last heard), folded after FOLD_MS, and an operator may forget it (its
 * keys are deleted at once); what retention or an operator dropped is listed under the overview.
 * Workers without presence (older or other publishers) are judged by frame ages, as above.
 *
 * A worker that speaks another major version of the telemetry protocol (its components entry
 * worker/{name} or its frames say so) is listed with a notice instead of its data; the runtime label
 * of that entry ("python", "go", "kopf") is shown next to every worker that reports one, and a
 * controller that says how it is observed (v1.1 mode: in-process / zero-code) has it as a badge.
 *
 * Problems (protocol v1.7 findings, findings.js): the open findings every live worker's components
 * entries carry (a controller's `findings`: hot loops, failing, terminal, slow, waiting keys; an
 * informer's: not synced, watch silent, relist storm) are listed above the clusters, worst first,
 * each linking where it happens (a key's page, an informer's page), and counted on their card.
 *
 * At fleet size (a platform team's 20 clusters × 200 controllers; bench/fleet.py generates one) the
 * overview is grouped by cluster with problems first: a controller's state (overview_filters.js:
 * looping, failing, stuck, stale, standby, ok) sorts its card, its worker and its cluster, and flags
 * the cluster with its counts; each cluster is a group that collapses (a user's choice remembered in
 * localStorage; unchosen healthy clusters of a large fleet start collapsed, and draw nothing); a
 * search and filters by cluster, worker and state live in the URL's query. From LARGE controllers on
 * a controller is one row whose cells are updated in place instead of its pipeline. Worker boxes are
 * drawn at most BUDGET_MS of work a frame (drawWorkers: missing and re-filtered ones first, then the
 * refreshes, the longest-waiting first), so a redraw never becomes one long task.
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const UI = window.ctrlscopeUI;
  const { el, fmtDuration } = UI;
  const P = window.ctrlscopeProtocol;
  const F = window.ctrlscopeFindings;
  const OF = window.ctrlscopeOverviewFilters;
  const MAX_ROWS = 300;
  const MAX_PROBLEMS = 100;
  const GONE_MS = 10 * 60 * 1000;
  const FOLD_MS = 60 * 1000; // a run presence says stopped is folded this long after it stopped
  const Presence = window.ctrlscopePresence;
  const operator = document.getElementById("overview").dataset.operator === "1";
  const RATE_WINDOW_MS = 3000;
  const MAX_SAMPLES = 10;
  // The parts of a worker topic of one of these kinds (P.TopicKind), else null.
  function topicOf(topic, ...kinds) { const p = P.parseTopic(topic); return p && kinds.includes(p.kind) ? p : null; }
  const $ = (id) => document.getElementById(id);
  const Page = window.ctrlscopePage;
  const dev = $("dev");
  // History: the last components frame says when a worker last published, a few metric samples give
  // rates at once, and the developer view starts with some context.
  const client = Page.client({ autoSubscribe: false, history: (topic) => (topicOf(topic, P.TopicKind.METRICS) ? MAX_SAMPLES : topicOf(topic, P.TopicKind.COMPONENTS) ? 1 : 50) });

  // ---- subscriptions ------------------------------------------------------------------------
  const wanted = (topic) => dev.open || topicOf(topic, P.TopicKind.COMPONENTS, P.TopicKind.METRICS) !== null;
  let syncing = false;
  // Deferred: "hello" resubscribes the topics the client already has right after its listeners ran.
  function syncSubscriptions() {
    if (syncing) return;
    syncing = true;
    Promise.resolve().then(() => {
      syncing = false;
      for (const t of client.knownTopics) if (wanted(t) && !client.topics.has(t)) client.subscribe(t);
      for (const t of [...client.topics.keys()]) if (!wanted(t)) client.unsubscribe(t);
    });
  }
  dev.addEventListener("toggle", () => { syncSubscriptions(); schedule(); });

  // ---- workers -------------------------------------------------------------------------------
  const workers = new Map(); // name -> {name, samples: [], lastTs, lastArrival}
  const liveTopics = new Set(); // topics whose snapshot arrived: their frames are live, not history
  function worker(name) {
    let w = workers.get(name);
    if (!w) { w = { name: name, samples: [], lastTs: 0, lastArrival: 0 }; workers.set(name, w); }
    return w;
  }
  function seen(topic, ts, live) {
    const m = topicOf(topic, P.TopicKind.COMPONENTS, P.TopicKind.METRICS);
    if (!m || typeof ts !== "number") return;
    const w = worker(m.worker);
    if (ts > w.lastTs) w.lastTs = ts;
    if (live) w.lastArrival = Date.now();
  }
  function addSample(name, rec) {
    if (!rec || rec.k !== P.RecordKind.METRICS) return;
    const w = worker(name);
    const last = w.samples[w.samples.length - 1];
    if (last && rec.ts <= last.ts) return;
    w.samples.push(rec);
    if (w.samples.length > MAX_SAMPLES) w.samples.shift();
  }

  Page.connectionBadge(client);
  client.on("state", (s) => { if (s === "reconnecting") liveTopics.clear(); });
  client.on("protocol", (topic) => { const m = P.parseTopic(topic); if (m) worker(m.worker); overviewDirty = true; schedule(); });
  client.on("topics", (topics) => {
    syncSubscriptions();
    topicControllers.clear();
    topicWorkers.clear();
    for (const t of topics) {
      const p = P.parseTopic(t);
      if (p) topicWorkers.add(p.worker);
      const m = topicOf(t, P.TopicKind.COMPONENTS, P.TopicKind.METRICS, P.TopicKind.CONTROLLER);
      if (!m) continue;
      worker(m.worker);
      if (m.kind === P.TopicKind.CONTROLLER && m.leaderLock === null) {
        if (!topicControllers.has(m.worker)) topicControllers.set(m.worker, []);
        topicControllers.get(m.worker).push(m.name);
      }
    }
    $("topics").replaceChildren(...(topics.length ? topics.map((t) => el("li", null, t))
      : [el("li", { className: "muted" }, "waiting for a worker to publish…")]));
    overviewDirty = true; schedule();
  });
  client.on("snapshot", (topic, state) => {
    liveTopics.add(topic);
    const m = topicOf(topic, P.TopicKind.METRICS);
    if (m) { const latest = state.get("latest"); addSample(m.worker, latest); if (latest) seen(topic, latest.ts, false); }
    const c = topicOf(topic, P.TopicKind.COMPONENTS, P.TopicKind.METRICS);
    if (c) redraw.add(c.worker);
    overviewDirty = true; schedule();
  });
  client.on("records", (topic, records, id, frame) => {
    seen(topic, frame.ts, liveTopics.has(topic));
    const m = topicOf(topic, P.TopicKind.METRICS);
    if (m) for (const r of records) addSample(m.worker, r);
    const c = m || topicOf(topic, P.TopicKind.COMPONENTS);
    if (c) { overviewDirty = true; redraw.add(c.worker); }
    if (dev.open) onEvents(topic, records);
    schedule();
  });
  client.on("resync", (topic, reason) => { if (dev.open) { pending.push([topic, { marker: true, reason: reason }]); schedule(); } });

  // ---- the overview ----------------------------------------------------------------------------
  let overviewDirty = true;

  // Per-second rate of counter `get(sample)` over the last RATE_WINDOW_MS of samples; null if unknown.
  function rate(samples, get) {
    if (samples.length < 2) return null;
    const cur = samples[samples.length - 1];
    let base = samples[samples.length - 2];
    for (let i = samples.length - 2; i >= 0 && cur.ts - samples[i].ts <= RATE_WINDOW_MS; i--) base = samples[i];
    const a = get(base), b = get(cur);
    if (a === undefined || b === undefined) return null;
    return Math.max(0, b - a) / ((cur.ts - base.ts) / 1000);
  }
  const sum = (o) => { let n = 0; for (const k in o || {}) n += o[k]; return n; };
  const histCount = (h) => (h ? sum(h.b) : undefined);

  const informersOf = (comps) => [...comps.values()].filter((v) => v && v.kind === P.ComponentKind.INFORMER);
  const watchersOf = (comps) => [...comps.values()].filter((v) => v && v.kind === P.ComponentKind.WATCHER)
    .sort((a, b) => (a.name < b.name ? -1 : 1));
  const latestStages = (w) => (w.samples[w.samples.length - 1] || {}).stages || { informers: {}, controllers: {}, watchers: {} };

  // Informer components (sorted by name) as pipeline.js draws them, from the newest sample's stages.
  function informerModels(w, informers, stale) {
    const samples = stale ? [] : w.samples;
    const stages = latestStages(w);
    const inf = (s, name) => ((s.stages || {}).informers || {})[name] || {};
    return informers.sort((a, b) => (a.name < b.name ? -1 : 1)).map((v) => {
      const st = (stages.informers || {})[v.name] || {};
      const r = (field) => rate(samples, (s) => inf(s, v.name)[field]);
      return { name: v.name, state: v.state, synced: v.synced, fifo: v.fifo, rv: v.rv, size: st.size, listed: v.listed,
        fifoDepth: st.fifo_depth, handlerCalls: st.handlers, handlerErrors: st.handler_errors, scope: v,
        rates: { watch: r("watch"), fifo: r("fifo"), cache: r("cache"), handlers: r("handlers") } };
    });
  }

  function model(w, comps, ctl, stale) {
    const samples = stale ? [] : w.samples;
    const latest = w.samples[w.samples.length - 1] || {};
    const stages = latestStages(w);
    const informers = informersOf(comps);
    const watched = ctl.watches ? informers.filter((v) => ctl.watches.includes(v.name)) : informers;
    const fam = (s) => (s.families || {})[ctl.name] || {};
    const cs = (stages.controllers || {})[ctl.name] || {};
    const f = fam(latest);
    return {
      informers: informerModels(w, watched, stale),
      controller: {
        depth: f.workqueue_depth, busy: f.controller_runtime_active_workers, workers: ctl.workers || f.controller_runtime_max_concurrent_reconciles,
        lastResult: cs.last_result, writes: cs.writes, writeErrors: cs.write_errors,
        writeConflicts: cs.write_conflicts, writesRefused: cs.writes_refused,
        rates: {
          adds: rate(samples, (s) => fam(s).workqueue_adds_total),
          gets: rate(samples, (s) => histCount(fam(s).workqueue_queue_duration_seconds)),
          reconciles: rate(samples, (s) => (fam(s).controller_runtime_reconcile_total ? sum(fam(s).controller_runtime_reconcile_total) : undefined)),
          errors: rate(samples, (s) => fam(s).controller_runtime_reconcile_errors_total),
          writes: rate(samples, (s) => (((s.stages || {}).controllers || {})[ctl.name] || {}).writes),
        },
      },
    };
  }

  // Controllers by the worker that has a topic for them (from the topic list, once per change of it:
  // scanning every topic for every worker on every redraw is quadratic in the fleet's size).
  const topicControllers = new Map();
  const topicWorkers = new Set(); // the workers with any topic left in Redis
  function controllersOf(name, comps) {
    const ctls = new Map();
    for (const seg of topicControllers.get(name) || []) ctls.set(seg, { name: seg });
    for (const v of comps.values()) if (v && v.kind === P.ComponentKind.CONTROLLER) ctls.set(P.topicPart(v.name), v);
    return ctls;
  }

  // The worker's informers that no controller watches, by name. None while a controller does not
  // say what it watches: it watches them all.
  function plainInformers(comps, ctls) {
    const watched = new Set();
    for (const ctl of ctls.values()) {
      if (!Array.isArray(ctl.watches)) return [];
      for (const name of ctl.watches) watched.add(name);
    }
    return informersOf(comps).filter((v) => !watched.has(v.name));
  }

  // The overview is redrawn every second (rates, ages), but its elements are kept and updated in
  // place, never rebuilt: a link replaced between mousedown and mouseup would swallow the click.
  const views = new Map(); // "cluster|key" / "worker|name" / "card|worker|segment" -> elements
  let used = new Set();
  function view(key, make) {
    used.add(key);
    let v = views.get(key);
    if (!v) { v = make(); views.set(key, v); }
    return v;
  }
  // Make parent's children these nodes, moving only what is out of place: a box drawn in a later
  // frame is inserted, the others stay attached (re-attaching them all restyles the whole group).
  function syncChildren(parent, nodes) {
    const kids = parent.children;
    for (let i = 0; i < nodes.length; i++) if (kids[i] !== nodes[i]) parent.insertBefore(nodes[i], kids[i] || null);
    while (kids.length > nodes.length) kids[kids.length - 1].remove();
  }

  // Redraw a part only when what it shows changed: at 200 controllers, rebuilding every pipeline every
  // second is what makes a page's frames long.
  function changed(v, field, sig) {
    if (v[field] === sig) return false;
    v[field] = sig;
    return true;
  }
  const badgeSig = (nodes) => nodes.map((b) => b.className + "\u0001" + b.textContent + "\u0001" + b.title).join("\u0002");

  function controllerCard(w, seg, ctl, comps, lease, stale, state) {
    const v = view("card|" + w.name + "|" + seg, () => {
      const link = el("a", { href: U("/c/" + encodeURIComponent(w.name) + "/" + encodeURIComponent(seg) + "/"), className: "controller-link" });
      const badges = el("span", { className: "ctl-badges" });
      const box = el("div", { className: "pipeline compact" });
      return { link: link, badges: badges, box: box,
        root: el("div", { className: "ctl-card", dataset: { controller: seg } }, el("div", { className: "ctl-card-head" }, link, badges), box) };
    });
    if (v.link.textContent !== ctl.name) v.link.textContent = ctl.name;
    const badges = [];
    // A stale or stopped worker's last word is not the present: "was running", not "running".
    if (ctl.started === true) badges.push(el("span", { className: "badge " + (stale ? "" : "ok") }, stale ? "was running" : "running"));
    else if (ctl.started === false) badges.push(el("span", { className: "badge warn" }, lease && !lease.leader ? "standby" : "waiting for caches"));
    if (lease) badges.push(el("span", { className: "badge " + (lease.leader ? "ok" : ""), title: "lease " + (lease.name || "") },
      lease.leader ? "leader" : "follower" + (lease.holder ? " (leader: " + lease.holder + ")" : "")));
    // v1.1: how a framework's controller is observed (in-process / zero-code), and what that cannot see.
    if (typeof ctl.mode === "string" && ctl.mode) {
      const unseen = Array.isArray(ctl.unseen) && ctl.unseen.length ? " · cannot see: " + ctl.unseen.join("; ") : "";
      badges.push(el("span", { className: "badge mode-badge", dataset: { mode: ctl.mode }, title: "observed " + ctl.mode + unseen }, ctl.mode));
    }
    badges.push(...findingsBadges(ctl));
    if (changed(v, "badgeSig", badgeSig(badges))) v.badges.replaceChildren(...badges);
    v.root.dataset.health = state;
    v.root.classList.toggle("problem", OF.isProblem(state));
    const m = model(w, comps, ctl, stale);
    if (changed(v, "sig", JSON.stringify(m))) window.ctrlscopePipeline.render(v.box, m);
    return v.root;
  }

  // At fleet size (LARGE controllers or more) a controller is one row, not its pipeline: its state and
  // findings, then its queue and reconcile numbers in cells that are kept and only have their text
  // changed, so that an update costs a few text nodes instead of a rebuilt pipeline (its page has the
  // pipeline). A fleet's overview is about which of 200 controllers needs a look.
  const fmtRate = (r) => window.ctrlscopePipeline.fmtRate(r);
  const CELLS = [["depth", "keys waiting in its workqueue"], ["busy", "workers busy / workers"], ["adds", "keys added to its queue per second"],
    ["reconciles", "reconciles per second"], ["errors", "failed reconciles per second"], ["writes", "API writes per second"],
    ["result", "its last reconcile's result"]];
  function setText(node, text) { if (node.textContent !== text) node.textContent = text; }
  function controllerRow(w, seg, ctl, comps, lease, stale, state) {
    const v = view("row|" + w.name + "|" + seg, () => {
      const link = el("a", { href: U("/c/" + encodeURIComponent(w.name) + "/" + encodeURIComponent(seg) + "/"), className: "controller-link" });
      const badges = el("span", { className: "ctl-badges" });
      const cells = {};
      const root = el("div", { className: "ctl-card ctl-row", role: "listitem", dataset: { controller: seg } }, link, badges,
        ...CELLS.map(([name, title]) => (cells[name] = el("span", { className: "cell", dataset: { cell: name }, title: title }))));
      return { link: link, badges: badges, cells: cells, root: root };
    });
    setText(v.link, ctl.name);
    const badges = [];
    // Its state in the filter's words, unless a finding's badge already says it ("failing").
    if (state !== OF.State.OK && state !== OF.State.FAILING) badges.push(el("span", { className: "badge health health-" + state, dataset: { health: state } }, OF.LABELS[state]));
    if (ctl.started === false) badges.push(el("span", { className: "badge warn" }, lease && !lease.leader ? "standby" : "waiting for caches"));
    badges.push(...findingsBadges(ctl));
    if (changed(v, "badgeSig", badgeSig(badges))) v.badges.replaceChildren(...badges);
    v.root.dataset.health = state;
    v.root.classList.toggle("problem", OF.isProblem(state));
    const c = model(w, comps, ctl, stale).controller, r = c.rates;
    setText(v.cells.depth, "depth " + (c.depth || 0));
    setText(v.cells.busy, "busy " + (c.busy || 0) + (c.workers ? "/" + c.workers : ""));
    setText(v.cells.adds, "adds " + fmtRate(r.adds));
    setText(v.cells.reconciles, "reconciles " + fmtRate(r.reconciles));
    setText(v.cells.errors, r.errors ? "failing " + fmtRate(r.errors) : "");
    setText(v.cells.writes, "writes " + fmtRate(r.writes));
    setText(v.cells.result, c.lastResult ? "last: " + c.lastResult : "");
    return v.root;
  }

  // A card's open findings, one badge per kind ("hot loop ×2": two keys), the worst first.
  function findingsBadges(comp) {
    const byKind = new Map();
    for (const f of F.open(comp)) byKind.set(f.finding, (byKind.get(f.finding) || 0) + 1);
    return [...byKind].map(([kind, n]) => el("span", { className: "badge finding finding-" + kind, dataset: { finding: String(kind) },
      title: n + " open " + F.name(kind) + " finding" + (n === 1 ? "" : "s") + ": listed under Problems" }, F.name(kind) + (n > 1 ? " ×" + n : "")));
  }

  // The open findings of the workers drawn (not the folded ones), worst first, each linking where it
  // happens: a key's page, an informer's page.
  const problemRows = new Map(); // "{worker}|{kind}|{component}|{finding}|{subject}" -> its row
  function renderProblems(live) {
    const all = [];
    // The filters narrow the problems too (all but the state one: these are the problems).
    const narrow = Object.assign({}, filters, { state: "" });
    for (const [name, { comps, cluster }] of live) {
      if ((narrow.cluster && cluster !== narrow.cluster) || (narrow.worker && name !== narrow.worker)) continue;
      for (const comp of comps.values()) {
        if (!comp || (comp.kind !== P.ComponentKind.CONTROLLER && comp.kind !== P.ComponentKind.INFORMER)) continue;
        for (const f of F.open(comp)) {
          const text = (name + " " + cluster + " " + comp.name + " " + f.subject + " " + F.name(f.finding)).toLowerCase();
          if (OF.keeps(narrow, { cluster: cluster, worker: name, state: "", text: text })) all.push({ worker: name, comp: comp, f: f });
        }
      }
    }
    all.sort((a, b) => F.worstFirst(a.f, b.f));
    const now = Date.now();
    // One row per finding, kept across redraws and updated in place (its count, message and age
    // move every second; rebuilding the list would re-lay out everything below it).
    const rows = all.slice(0, MAX_PROBLEMS).map(({ worker, comp, f }) => {
      const id = worker + "|" + comp.kind + "|" + comp.name + "|" + f.finding + "|" + f.subject;
      let v = problemRows.get(id);
      if (!v) {
        const seg = P.topicPart(comp.name);
        const keyed = comp.kind === P.ComponentKind.CONTROLLER && F.isKeyFinding(f);
        const where = keyed ? el("a", { href: U.key(worker, seg, f.subject), title: "the key's page: its story, attempts, triggers and versions" }, f.subject)
          : comp.kind === P.ComponentKind.INFORMER ? el("a", { href: U.informer(worker, seg) }, "informer " + comp.name)
            : el("a", { href: U.controller(worker, seg) }, String(f.subject));
        const severe = [P.FindingKind.HOT_LOOP, P.FindingKind.FAILING, P.FindingKind.TERMINAL, P.FindingKind.WATCH_SILENT, P.FindingKind.RELIST_STORM].includes(f.finding);
        v = { badge: el("span"), message: el("span", { className: "message" }), since: el("span", { className: "since muted" }) };
        v.root = el("li", { className: severe ? "" : "warn", dataset: { finding: String(f.finding), subject: String(f.subject), worker: worker } },
          v.badge, el("span", { className: "where" }, worker + " › " + (comp.kind === P.ComponentKind.CONTROLLER ? comp.name + " › " : ""), where),
          v.message, v.since);
        problemRows.set(id, v);
      }
      v.seen = now;
      const badge = F.badge(f);
      if (changed(v, "badgeSig", badgeSig([badge]))) { v.root.replaceChild(badge, v.badge); v.badge = badge; }
      setText(v.message, f.message || "");
      setText(v.since, typeof f.since === "number" ? "since " + fmtDuration(Math.max(0, now - f.since)) + " ago" : "");
      return v.root;
    });
    for (const [id, v] of problemRows) if (v.seen !== now) problemRows.delete(id);
    if (all.length > MAX_PROBLEMS) {
      setText(moreProblems, (all.length - MAX_PROBLEMS) + " more not listed");
      rows.push(moreProblems);
    }
    $("problems-panel").hidden = !rows.length;
    syncChildren($("problems"), rows);
  }
  const moreProblems = el("li", { className: "muted warn" });

  // An informer no controller watches: its card is its chain, ending at its handlers, and links to
  // its page (events, handlers, cache).
  function informerCard(w, inf, stale, state) {
    const seg = P.topicPart(inf.name);
    const v = view("informer|" + w.name + "|" + inf.name, () => {
      const link = el("a", { href: U.informer(w.name, seg), className: "informer-link" });
      const box = el("div", { className: "pipeline compact" });
      return { link: link, box: box,
        root: el("div", { className: "ctl-card informer-card", dataset: { informer: inf.name } },
          el("div", { className: "ctl-card-head" }, link, el("span", { className: "ctl-badges" },
            el("span", { className: "badge kind-badge", title: "an informer no controller watches: its handlers are where its events end" }, "informer"))), box) };
    });
    if (v.link.textContent !== inf.name) v.link.textContent = inf.name;
    const head = v.root.firstChild.lastChild;
    const badges = findingsBadges(inf);
    if (changed(v, "badgeSig", badgeSig(badges))) syncChildren(head, [head.firstChild, ...badges]);
    v.root.dataset.health = state;
    v.root.classList.toggle("problem", OF.isProblem(state));
    const m = { informers: informerModels(w, [inf], stale), controller: null };
    if (changed(v, "sig", JSON.stringify(m))) window.ctrlscopePipeline.render(v.box, m);
    return v.root;
  }

  // v1.6: a raw watch loop: its chain (Watch → no cache → GETs), linking to its page.
  function watcherCard(w, comp, stale, state) {
    const seg = P.topicPart(comp.name);
    const v = view("watcher|" + w.name + "|" + comp.name, () => {
      const link = el("a", { href: U.watcher(w.name, seg), className: "watcher-link" });
      const box = el("div", { className: "pipeline compact" });
      return { link: link, box: box,
        root: el("div", { className: "ctl-card watcher-card", dataset: { watcher: comp.name } },
          el("div", { className: "ctl-card-head" }, link, el("span", { className: "ctl-badges" },
            el("span", { className: "badge kind-badge", title: "a raw watch loop: the program's own Watch call in a loop, no informer, no cache" }, "raw watcher"))), box) };
    });
    if (v.link.textContent !== comp.name) v.link.textContent = comp.name;
    v.root.dataset.state = comp.state || "";
    v.root.dataset.health = state;
    v.root.classList.toggle("problem", OF.isProblem(state));
    const samples = stale ? [] : w.samples;
    const of = (s) => (((s.stages || {}).watchers || {})[comp.name]) || {};
    window.ctrlscopePipeline.renderWatcher(v.box, { name: comp.name, resource: comp.resource, variant: comp.variant,
      state: comp.state, since: comp.since, lastEnd: comp.last_end, now: Date.now(), counts: of(w.samples[w.samples.length - 1] || {}),
      rates: { watch: rate(samples, (s) => of(s).watch), reads: rate(samples, (s) => of(s).reads) } });
    return v.root;
  }

  // When the worker was last heard from (0: never), what both "stale" and "stopped" are measured from.
  const lastSeen = (w) => w.lastArrival || w.lastTs;

  // Everything a worker's box may show, one entry per card: its controllers, its informers no
  // controller watches and its raw watchers, each with its state (OF.stateOf) and the words a search
  // finds it by; sorted problems first, then controllers before informers before watchers, by name.
  const TYPE_ORDER = { [P.TopicKind.CONTROLLER]: 0, [P.TopicKind.INFORMER]: 1, [P.TopicKind.WATCHER]: 2 };
  function entriesOf(name, comps, stale, clusterName) {
    const ctls = controllersOf(name, comps);
    const informers = informersOf(comps);
    const base = (name + " " + clusterName).toLowerCase();
    const entry = (type, seg, comp, findings, started, extra) => ({ type: type, seg: seg, comp: comp, worker: name, cluster: clusterName,
      state: OF.stateOf(findings, { stale: stale, started: started }),
      text: base + " " + [comp.name, ...extra, ...findings.map((f) => String(f.subject))].join(" ").toLowerCase() });
    const out = [];
    for (const [seg, ctl] of ctls) {
      const watched = Array.isArray(ctl.watches) ? informers.filter((v) => ctl.watches.includes(v.name)) : informers;
      const findings = F.open(ctl).concat(...watched.map((v) => F.open(v)));
      out.push(entry(P.TopicKind.CONTROLLER, seg, ctl, findings, ctl.started, watched.map((v) => v.name)));
    }
    for (const inf of plainInformers(comps, ctls)) out.push(entry(P.TopicKind.INFORMER, inf.name, inf, F.open(inf), undefined, []));
    for (const c of watchersOf(comps)) out.push(entry(P.TopicKind.WATCHER, c.name, c, F.open(c), undefined, [String(c.resource || "")]));
    return out.sort((a, b) => OF.sortRank(a.state) - OF.sortRank(b.state) || TYPE_ORDER[a.type] - TYPE_ORDER[b.type] ||
      (a.seg < b.seg ? -1 : a.seg > b.seg ? 1 : 0));
  }

  function workerBox(w, comps, now, unsupported, entries) {
    const known = lastSeen(w);
    const since = now - known;
    const run = Presence.workerRun(w.name);
    const liveness = Presence.liveness(w.name, w.lastTs);
    const stopped = liveness === P.Liveness.STOPPED;
    const stale = liveness !== P.Liveness.LIVE;
    const me = Page.workerEntry(comps);
    const lease = [...comps.values()].find((v) => v && v.kind === P.ComponentKind.LEASE);
    const asRow = fleetSize >= LARGE;
    const cards = entries.map((e) => (e.type === P.TopicKind.CONTROLLER ? (asRow ? controllerRow : controllerCard)(w, e.seg, e.comp, comps, lease, stale, e.state)
      : e.type === P.TopicKind.INFORMER ? informerCard(w, e.comp, stale, e.state) : watcherCard(w, e.comp, stale, e.state)));
    const v = view("worker|" + w.name, () => {
      const badge = el("span", { className: "badge" }), seen = el("span", { className: "muted last-seen" });
      const runtime = el("span", { className: "badge runtime", title: "the runtime that publishes this worker's telemetry" });
      const writes = el("span", { className: "badge writes", hidden: true });
      const cardsBox = el("div", { className: "ctl-cards" });
      const forget = el("button", { type: "button", className: "forget", hidden: true, dataset: { forget: w.name },
        title: "delete this worker's telemetry from Redis now (it is stopped; retention would drop it later)" }, "forget");
      return { badge: badge, seen: seen, runtime: runtime, writes: writes, cards: cardsBox, forget: forget, empty: el("p", { className: "muted" }, "no controllers, informers or watchers (yet)"),
        notice: el("p", { className: "notice protocol-notice", role: "status" }),
        root: el("div", { className: "worker", dataset: { worker: w.name } },
          el("div", { className: "worker-head" }, "worker ", el("b", null, w.name), " ", runtime, " ", writes, " ", badge, seen, " ", forget), cardsBox) };
    });
    v.cards.classList.toggle("rows", asRow);
    if (asRow) v.cards.setAttribute("role", "list"); else v.cards.removeAttribute("role");
    const runtime = me && me.runtime ? String(me.runtime) : "";
    v.runtime.hidden = !runtime;
    if (v.runtime.textContent !== runtime) v.runtime.textContent = runtime;
    v.root.dataset.runtime = runtime;
    const wb = Page.writesBadge(Page.clusterEntry(comps));
    v.writes.hidden = !wb;
    v.root.dataset.writes = wb ? wb.text : "";
    if (wb && v.writes.textContent !== wb.text) {
      v.writes.textContent = wb.text;
      v.writes.className = "badge writes " + (wb.readOnly ? "readonly" : "acting");
    }
    if (wb) v.writes.title = wb.title;
    v.root.dataset.protocol = unsupported || "";
    if (unsupported) {
      // Nothing of this worker's is interpreted: say so rather than draw stale or misread data.
      v.root.classList.remove("stale");
      v.badge.className = "badge bad";
      v.badge.textContent = "protocol v" + (P.major(unsupported) === null ? unsupported : P.major(unsupported));
      v.badge.title = "telemetry protocol " + unsupported + "; this dashboard speaks " + P.VERSION;
      v.seen.textContent = "";
      v.notice.textContent = Page.protocolNotice(w.name, unsupported);
      syncChildren(v.cards, [v.notice]);
      return v.root;
    }
    v.root.classList.toggle("stale", stale);
    v.root.dataset.stale = String(stale);
    v.root.dataset.liveness = liveness;
    v.root.dataset.run = run ? run.src : "";
    v.root.dataset.stopped = String(stopped);
    v.forget.hidden = !(operator && (stopped || (!run && known && stale)));
    v.badge.className = "badge " + (stale ? "bad" : "ok");
    if (stopped) {
      // Everything drawn for this worker is that run's last state: say which run, and that it ended.
      v.badge.textContent = "stopped";
      v.badge.title = "this worker's newest run is not running: what is shown is its last state";
      v.seen.textContent = Presence.stoppedText(run) + " · " + Presence.runText(run);
    } else {
      v.badge.textContent = stale ? "stale" : "live";
      v.badge.title = stale ? "no presence entry and no frame for " + P.FRAME_STALE_MS / 1000 + " s: the worker stopped publishing"
        : run ? "running: its presence entry was refreshed within " + P.ALIVE_MS / 1000 + " s" : "publishing";
      v.seen.textContent = (known ? "last seen " + (since < 1500 ? "just now" : fmtDuration(since) + " ago") + " (" + UI.clock(w.lastTs) + " UTC)" : "not seen yet")
        + (run ? " · " + Presence.runText(run) : "");
    }
    syncChildren(v.cards, cards.length ? cards : [v.empty]);
    return v.root;
  }

  // A cluster's group: its head (a toggle button with the cluster's name, its problems flagged and
  // its counts) and, unless collapsed, its workers' boxes and the disclosure of its stopped ones.
  let clusterIds = 0;
  function clusterSection(c, collapsed, filtering, workerRoots, goneRoots) {
    const key = c.key, info = c.info;
    const v = view("cluster|" + key, () => {
      const id = "cluster-" + ++clusterIds;
      const title = el("span", { className: "cluster-title" });
      const toggle = el("button", { type: "button", className: "cluster-toggle", dataset: { toggle: key }, "aria-controls": id },
        el("span", { className: "chevron", "aria-hidden": "true" }), title);
      const flags = el("span", { className: "cluster-flags" }), counts = el("span", { className: "cluster-counts muted" });
      const head = el("h3", { className: "cluster-head" }, toggle, " ", flags, " ", counts);
      return { head: head, title: title, toggle: toggle, flags: flags, counts: counts,
        root: el("section", { className: "cluster", id: id, dataset: { cluster: info ? info.name : "" } }, head) };
    });
    const text = info ? [info.server !== info.name ? info.server : "", info.version ? "Kubernetes " + info.version : ""].filter(Boolean).join(" · ") : "";
    if (changed(v, "titleSig", info ? info.name + "\n" + text : "")) {
      v.title.replaceChildren("cluster ", ...(info ? [el("b", null, info.name), " ", el("span", { className: "muted" }, text)]
        : [el("span", { className: "muted" }, "not reported by its workers")]));
    }
    const problems = OF.ORDER.filter((s) => OF.isProblem(s) && c.states.get(s)).map((s) => [s, c.states.get(s)]);
    const nProblems = problems.reduce((n, [, k]) => n + k, 0);
    if (changed(v, "flagSig", problems.join("|"))) {
      v.flags.replaceChildren(...problems.map(([s, n]) => el("span", { className: "badge health-" + s, dataset: { health: s },
        title: n + " controller" + (n === 1 ? "" : "s") + " " + OF.LABELS[s] + " in this cluster" }, n + " " + OF.LABELS[s])));
    }
    const counts = c.total + " controller" + (c.total === 1 ? "" : "s") + " · " + c.workerCount + " worker" + (c.workerCount === 1 ? "" : "s") +
      (filtering ? " · " + c.shown + " shown" : "") + (collapsed ? " · collapsed" : "");
    if (v.counts.textContent !== counts) v.counts.textContent = counts;
    v.toggle.setAttribute("aria-expanded", String(!collapsed));
    v.toggle.title = (collapsed ? "show" : "hide") + " this cluster's workers and controllers";
    Object.assign(v.root.dataset, { controllers: String(c.total), problems: String(nProblems), collapsed: String(collapsed), shown: String(c.shown) });
    v.root.classList.toggle("has-problems", nProblems > 0);
    v.root.classList.toggle("collapsed", collapsed);
    const nodes = [v.head];
    if (!collapsed) nodes.push(...workerRoots);
    if (!collapsed && goneRoots.length) {
      const g = view("gone|" + key, () => {
        const summary = el("summary", { className: "muted" });
        const box = el("div");
        return { summary: summary, box: box, root: el("details", { className: "gone-workers" }, summary, box) };
      });
      const n = goneRoots.length;
      const text = n + " stopped worker" + (n === 1 ? "" : "s") + " (stopped over " + FOLD_MS / 60000 + " min ago, or nothing published for over " + GONE_MS / 60000 + " min)";
      if (g.summary.textContent !== text) g.summary.textContent = text;
      syncChildren(g.box, goneRoots);
      nodes.push(g.root);
    }
    syncChildren(v.root, nodes);
    return v.root;
  }

  // ---- the fleet: filters, collapsed groups, problems first, drawn a slice per frame ------------
  const BUDGET_MS = 8; // worker boxes drawn per frame until this much time went; the rest next frame
  const LARGE = 50; // from this many controllers, a cluster no one chose for and without problems starts collapsed
  const redraw = new Set(); // workers whose data (or age) changed since their box was drawn
  let overviewMore = false; // some boxes wait for the next frame
  let userPending = false;
  const mustDraw = new Set(); // workers whose box must show other cards (the filters changed): drawn first
  let behind = false; // a box is missing or shows other cards than asked for: the overview is not complete // a filter, a toggle: drawn at the next frame, not after the redraw interval
  let filters = OF.parse(location.search);
  const filteredCollapse = new Map(); // cluster key -> collapsed, chosen while the current filters are on
  const groups = OF.collapsedStore((() => { try { return window.localStorage; } catch (err) { return null; } })());
  const stats = { clusters: 0, controllers: 0, shown: 0, problems: 0, drawn: 0, passes: 0 };
  let clusterKeys = [];
  let fleetSize = 0; // controllers on the overview: from LARGE on, each is a row (controllerRow)

  // This frame's worker boxes: first those missing or showing other cards than the filters now ask
  // for (a user waits for those), then the refreshes, the longest-waiting first, while the frame's
  // budget lasts; every other box stays as last drawn. Refreshes come every second for every box, so
  // without this order a slow machine would spend every frame on the first boxes and never reach
  // the last ones. Returns the roots by worker and whether anything urgent is left for later.
  function drawWorkers(visible, t0, now, keep) {
    const box = (x) => views.get("worker|" + x.name);
    const urgent = visible.filter((x) => !box(x) || mustDraw.has(x.name));
    const refresh = visible.filter((x) => box(x) && !mustDraw.has(x.name) && redraw.has(x.name))
      .sort((a, b) => box(a).drawnAt - box(b).drawnAt);
    const roots = new Map();
    for (const x of urgent.concat(refresh)) {
      if (stats.drawn && performance.now() - t0 >= BUDGET_MS) { overviewMore = true; break; }
      roots.set(x.name, workerBox(x.w, x.comps, now, x.unsupported, x.entries));
      box(x).drawnAt = performance.now();
      redraw.delete(x.name);
      mustDraw.delete(x.name);
      stats.drawn++;
    }
    for (const x of visible) {
      if (roots.has(x.name) || !box(x)) continue;
      keep.add(x.name); // drawn before: its views stay
      roots.set(x.name, box(x).root);
    }
    return { roots: roots, behind: urgent.some((x) => !roots.has(x.name) || mustDraw.has(x.name)) };
  }

  const placeholder = el("p", { className: "muted" }, "no worker has published its components yet…");
  function renderOverview() {
    const t0 = performance.now();
    overviewDirty = false;
    overviewMore = false;
    userPending = false;
    used = new Set();
    stats.drawn = 0;
    stats.passes++;
    const now = Date.now();
    const filtering = OF.active(filters);
    const clusters = new Map(); // key -> {info, workers, gone, counts}
    const live = new Map(); // worker -> {comps, cluster}, for the problems
    const workerClusters = new Map(); // worker -> its cluster's name, for the worker filter's options
    for (const name of [...workers.keys()].sort()) {
      // Forgotten, or dropped by retention: none of its topics is left in Redis.
      if (topicWorkers.size && !topicWorkers.has(name)) { workers.delete(name); continue; }
      const t = client.topics.get(P.workerTopic(name, P.TopicKind.COMPONENTS));
      const comps = t ? t.state : new Map();
      const unsupported = Page.unsupportedVersion(client, name, comps);
      if (!unsupported && !comps.size && !workers.get(name).samples.length && !controllersOf(name, comps).size) continue;
      const info = unsupported ? null : [...comps.values()].find((v) => v && v.kind === P.ComponentKind.CLUSTER) || null;
      const key = info ? info.server || info.name : "";
      const clusterName = info ? info.name : "";
      if (!clusters.has(key)) clusters.set(key, { key: key, info: info, workers: [], gone: [], total: 0, shown: 0, workerCount: 0, states: new Map(), rank: OF.ORDER.length });
      const c = clusters.get(key);
      const w = workers.get(name), seenAt = lastSeen(w), run = Presence.workerRun(name);
      // A worker with presence is folded only once its newest run stopped FOLD_MS ago (an idle live
      // worker stays on top however old its last frame); one without presence by its frame age.
      const folded = run ? !Presence.runAlive(run) && now - (run.stopped || run.seen) > FOLD_MS : seenAt && now - seenAt > GONE_MS;
      const stale = Presence.liveness(name, w.lastTs) !== P.Liveness.LIVE;
      const all = unsupported ? [] : entriesOf(name, comps, stale, clusterName);
      const kept = filtering ? all.filter((e) => OF.keeps(filters, e)) : all;
      workerClusters.set(name, clusterName);
      c.workerCount++;
      let rank = OF.ORDER.length;
      for (const e of all) {
        if (e.type === P.TopicKind.CONTROLLER) { c.total++; c.states.set(e.state, (c.states.get(e.state) || 0) + 1); }
        rank = Math.min(rank, OF.sortRank(e.state));
      }
      c.rank = Math.min(c.rank, folded ? OF.ORDER.length : rank);
      c.shown += kept.filter((e) => e.type === P.TopicKind.CONTROLLER).length;
      // Listed: every worker while no filter is on; with one, those with a card that passes it.
      if (!filtering || kept.length) c[folded ? "gone" : "workers"].push({ name: name, w: w, comps: comps, unsupported: unsupported, entries: kept, rank: rank });
      if (!folded && !unsupported) live.set(name, { comps: comps, cluster: clusterName });
    }
    const problemsOf = (c) => { let n = 0; for (const [s, k] of c.states) if (OF.isProblem(s)) n += k; return n; };
    // Clusters in trouble first (the worst state, then how many), then by name; the unnamed last.
    const ordered = [...clusters.values()].sort((a, b) => a.rank - b.rank || problemsOf(b) - problemsOf(a) ||
      (a.key === "" ? 1 : b.key === "" ? -1 : a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    clusterKeys = ordered.map((c) => c.key);
    fleetSize = ordered.reduce((n, c) => n + c.total, 0);
    const keep = new Set();
    const shown = [], visible = [];
    const byRank = (a, b) => a.rank - b.rank || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    for (const c of ordered) {
      if (filtering && !c.workers.length && !c.gone.length) continue;
      const collapsed = filtering ? filteredCollapse.get(c.key) === true
        : groups.isCollapsed(c.key, fleetSize >= LARGE && problemsOf(c) === 0);
      if (!collapsed) visible.push(...c.workers.sort(byRank), ...c.gone.sort(byRank));
      shown.push([c, collapsed]);
    }
    const drawn = drawWorkers(visible, t0, now, keep);
    behind = drawn.behind;
    const rootsOf = (list) => list.map((x) => drawn.roots.get(x.name)).filter(Boolean);
    const sections = shown.map(([c, collapsed]) => clusterSection(c, collapsed, filtering, collapsed ? [] : rootsOf(c.workers), collapsed ? [] : rootsOf(c.gone)));
    syncChildren($("overview"), sections.length ? sections : [filtering && clusters.size ? noMatch : placeholder]);
    // Views nobody used this pass are gone (controllers, workers, collapsed groups), except those of
    // the workers kept as they were drawn.
    for (const key of views.keys()) {
      if (used.has(key)) continue;
      const part = key.split("|");
      if (part[0] !== "cluster" && part[0] !== "gone" && keep.has(part[1])) continue;
      views.delete(key);
    }
    Object.assign(stats, { clusters: ordered.length, controllers: fleetSize,
      shown: ordered.reduce((n, c) => n + c.shown, 0), problems: ordered.reduce((n, c) => n + problemsOf(c), 0) });
    renderFilterControls(ordered, workerClusters, filtering);
    renderProblems(live);
    renderDropped();
  }
  const noMatch = el("p", { className: "muted no-match" }, "nothing matches these filters");

  // The toolbar: its options (the clusters and workers there are), and what it found.
  function syncOptions(select, values, labels) {
    const current = select.value || filters[select.name] || "";
    const want = values.includes(current) || !current ? values : values.concat([current]);
    const sig = want.join("\n");
    if (select.dataset.sig === sig) return;
    select.dataset.sig = sig;
    select.replaceChildren(el("option", { value: "" }, "all"), ...want.map((v) => el("option", { value: v }, labels ? labels(v) : v || "(not reported)")));
    select.value = current;
  }
  function renderFilterControls(ordered, workerClusters, filtering) {
    syncOptions($("f-cluster"), [...new Set(ordered.map((c) => (c.info ? c.info.name : "")))].sort());
    syncOptions($("f-worker"), [...workerClusters].filter(([, c]) => !filters.cluster || c === filters.cluster).map(([n]) => n).sort());
    const n = (k, what) => k + " " + what + (k === 1 ? "" : "s");
    const text = filtering ? stats.shown + " of " + n(stats.controllers, "controller") + " match"
      : n(stats.controllers, "controller") + " in " + n(stats.clusters, "cluster") + " · " + n(stats.problems, "problem");
    const count = $("f-count");
    if (count.textContent !== text) count.textContent = text;
  }

  function applyFilters(next) {
    filters = next;
    const query = OF.search(filters, location.search);
    history.replaceState(history.state, "", location.pathname + query + location.hash);
    filteredCollapse.clear();
    for (const name of workers.keys()) mustDraw.add(name);
    overviewDirty = true;
    userPending = true; // what a user asked for is drawn at the next frame
    schedule();
  }
  const inputs = { q: $("f-q"), cluster: $("f-cluster"), worker: $("f-worker"), state: $("f-state") };
  const readFilters = () => ({ q: inputs.q.value.trim(), cluster: inputs.cluster.value, worker: inputs.worker.value, state: inputs.state.value });
  function showFilters() {
    for (const k in inputs) {
      if (inputs[k].tagName === "SELECT" && filters[k] && ![...inputs[k].options].some((o) => o.value === filters[k])) {
        inputs[k].append(el("option", { value: filters[k] }, filters[k]));
      }
      inputs[k].value = filters[k];
    }
  }
  showFilters();
  let searchTimer = null;
  $("overview-filters").addEventListener("submit", (e) => e.preventDefault());
  inputs.q.addEventListener("input", () => { clearTimeout(searchTimer); searchTimer = setTimeout(() => applyFilters(readFilters()), 150); });
  for (const k of ["cluster", "worker", "state"]) inputs[k].addEventListener("change", () => applyFilters(readFilters()));
  $("f-clear").addEventListener("click", () => { filters = OF.parse(""); showFilters(); applyFilters(readFilters()); });
  function collapseAll(value) {
    if (OF.active(filters)) for (const k of clusterKeys) filteredCollapse.set(k, value);
    else groups.setAll(value);
    overviewDirty = true;
    userPending = true; // what a user asked for is drawn at the next frame
    schedule();
  }
  $("f-collapse").addEventListener("click", () => collapseAll(true));
  $("f-expand").addEventListener("click", () => collapseAll(false));

  // ---- what retention and operators dropped (presence) ---------------------------------------
  function renderDropped() {
    const box = $("dropped"), items = Presence.expired();
    box.hidden = !items.length;
    if (!items.length) return;
    const sig = items.map((e) => e.at + e.what).join("|");
    if (box.dataset.sig === sig) return;
    box.dataset.sig = sig;
    const n = items.length, ret = Presence.retention();
    box.querySelector("summary").textContent = "dropped from Redis: " + n + (n === 20 ? "+" : "") + " (newest: " + items[0].what + " at " +
      Presence.clock(items[0].at) + " UTC; retention " + (ret ? fmtDuration(ret * 1000) : "?") + ")";
    box.querySelector("ul").replaceChildren(...items.map((e) => el("li", null, Presence.clock(e.at) + " UTC · " + e.what +
      (e.topics ? " · " + e.topics + " topic" + (e.topics === 1 ? "" : "s") : "") + " · " + e.reason)));
  }

  // ---- forget a stopped worker (operators; the server checks) ----------------------------------
  $("overview").addEventListener("click", (e) => {
    const t = e.target instanceof Element && e.target.closest("button[data-toggle]");
    if (!t) return;
    const key = t.dataset.toggle, collapsed = t.getAttribute("aria-expanded") === "true";
    if (OF.active(filters)) filteredCollapse.set(key, collapsed); else groups.set(key, collapsed);
    overviewDirty = true;
    userPending = true; // what a user asked for is drawn at the next frame
    schedule();
  });
  $("overview").addEventListener("click", async (e) => {
    const b = e.target instanceof Element && e.target.closest("button[data-forget]");
    if (!b) return;
    const name = b.dataset.forget, result = $("forget-result");
    if (!window.confirm("Forget worker " + name + "? Its telemetry is deleted from Redis for everyone, now.")) return;
    const token = document.querySelector("#forget-form input[name=csrfmiddlewaretoken]");
    b.disabled = true;
    try {
      const resp = await fetch(U("/workers/" + encodeURIComponent(name) + "/forget"), { method: "POST", credentials: "same-origin",
        headers: { "X-CSRFToken": token ? token.value : "" } });
      const body = await resp.json().catch(() => ({}));
      result.className = "forget-result " + (resp.ok ? "ok" : "bad");
      result.textContent = resp.ok ? "✓ forgot worker " + name + " (" + body.topics + " topics deleted)" : "✗ " + resp.status + ": " + (body.error || resp.statusText);
    } catch (err) {
      result.className = "forget-result bad";
      result.textContent = "✗ the dashboard did not answer: " + err;
    } finally {
      b.disabled = false;
    }
  });
  Presence.listen(() => { overviewDirty = true; schedule(); });

  // ---- developer view: counters and the live event list -------------------------------------
  const pending = []; // rows waiting for the next animation frame
  let skipped = 0;
  const counter = { last: performance.now(), records: 0, value: 0 };
  function onEvents(topic, records) {
    counter.records += records.length;
    for (const r of records) pending.push([topic, r]);
    if (pending.length > MAX_ROWS) { skipped += pending.length - MAX_ROWS; pending.splice(0, pending.length - MAX_ROWS); }
  }
  function cell(text) { const td = document.createElement("td"); td.textContent = text === undefined || text === null ? "" : String(text); return td; }
  function renderEvents() {
    const tbody = $("events");
    const frag = document.createDocumentFragment();
    for (let i = pending.length - 1; i >= 0; i--) {
      const [topic, r] = pending[i];
      const tr = document.createElement("tr");
      if (r.marker) {
        tr.className = "resync-marker";
        const td = cell("⟳ resynced " + topic + " (" + r.reason + "): state reloaded from a fresh snapshot");
        td.colSpan = 6;
        tr.appendChild(td);
      } else {
        const when = r.ts ? new Date(r.ts).toISOString().slice(11, 23) : "";
        tr.append(cell(when), cell(topic), cell(r.k), cell(r.type || r.op || r.result || r.event || r.state || r.reason), cell(r.key), cell(r.rv));
      }
      frag.appendChild(tr);
    }
    pending.length = 0;
    tbody.insertBefore(frag, tbody.firstChild);
    while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(-1);
    const now = performance.now();
    if (now - counter.last >= 1000) { counter.value = Math.round((counter.records * 1000) / (now - counter.last)); counter.records = 0; counter.last = now; }
    $("c-records").textContent = client.stats.records.toLocaleString();
    $("c-frames").textContent = client.stats.frames.toLocaleString();
    $("c-rate").textContent = counter.value.toLocaleString();
    $("c-resyncs").textContent = client.stats.resyncs.toLocaleString();
    $("c-dropped").textContent = client.stats.dropped.toLocaleString();
    let keys = 0; for (const t of client.topics.values()) keys += t.state.size;
    $("c-keys").textContent = keys.toLocaleString();
    $("summary").textContent = skipped ? "(newest " + MAX_ROWS + " rows shown; " + skipped.toLocaleString() + " arrived faster than a frame could draw them: counted, not drawn)" : "";
  }

  // ---- frame loop ------------------------------------------------------------------------------
  let lastOverview = 0;
  const schedule = Page.scheduler(render);
  function render() {
    const now = performance.now();
    // At most 4 redraws a second: samples come once a second, badges and ages move by the second.
    if (overviewMore || userPending) { renderOverview(); } // the boxes the last frame had no time for; a user's request
    else if (now - lastOverview >= 1000 || (overviewDirty && now - lastOverview >= 250)) { lastOverview = now; renderOverview(); }
    else if (overviewDirty) setTimeout(schedule, 250);
    if (overviewMore) schedule();
    if (dev.open) renderEvents();
  }

  setInterval(() => { for (const name of workers.keys()) redraw.add(name); overviewDirty = true; schedule(); }, 1000); // last seen, stale and rates move on
  // The bench (bench/overview.py) and tests read how far the overview got: idle once every box is
  // drawn as the filters and groups ask (refreshes with new data keep coming: not waited for).
  window.ctrlscope = { client: client, workers: workers, overview: { stats: stats, get idle() { return !behind && !userPending; } } };
  client.connect();
})();
