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
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const UI = window.ctrlscopeUI;
  const { el, fmtDuration } = UI;
  const P = window.ctrlscopeProtocol;
  const F = window.ctrlscopeFindings;
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
    for (const t of topics) { const m = topicOf(t, P.TopicKind.COMPONENTS, P.TopicKind.METRICS, P.TopicKind.CONTROLLER); if (m) worker(m.worker); }
    $("topics").replaceChildren(...(topics.length ? topics.map((t) => el("li", null, t))
      : [el("li", { className: "muted" }, "waiting for a worker to publish…")]));
    overviewDirty = true; schedule();
  });
  client.on("snapshot", (topic, state) => {
    liveTopics.add(topic);
    const m = topicOf(topic, P.TopicKind.METRICS);
    if (m) { const latest = state.get("latest"); addSample(m.worker, latest); if (latest) seen(topic, latest.ts, false); }
    overviewDirty = true; schedule();
  });
  client.on("records", (topic, records, id, frame) => {
    seen(topic, frame.ts, liveTopics.has(topic));
    const m = topicOf(topic, P.TopicKind.METRICS);
    if (m) for (const r of records) addSample(m.worker, r);
    if (m || topicOf(topic, P.TopicKind.COMPONENTS)) overviewDirty = true;
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

  function controllersOf(name, comps) {
    const ctls = new Map();
    for (const topic of client.knownTopics) {
      const m = topicOf(topic, P.TopicKind.CONTROLLER);
      if (m && m.worker === name && m.leaderLock === null) ctls.set(m.name, { name: m.name });
    }
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
  function syncChildren(parent, nodes) {
    const kids = parent.children;
    if (kids.length === nodes.length && nodes.every((n, i) => kids[i] === n)) return;
    parent.replaceChildren(...nodes);
  }

  function controllerCard(w, seg, ctl, comps, lease, stale) {
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
    v.badges.replaceChildren(...badges);
    window.ctrlscopePipeline.render(v.box, model(w, comps, ctl, stale));
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
  function renderProblems(live) {
    const all = [];
    for (const [name, comps] of live) {
      for (const c of comps.values()) {
        if (!c || (c.kind !== P.ComponentKind.CONTROLLER && c.kind !== P.ComponentKind.INFORMER)) continue;
        for (const f of F.open(c)) all.push({ worker: name, comp: c, f: f });
      }
    }
    all.sort((a, b) => F.worstFirst(a.f, b.f));
    const now = Date.now();
    const rows = all.slice(0, MAX_PROBLEMS).map(({ worker, comp, f }) => {
      const seg = P.topicPart(comp.name);
      const keyed = comp.kind === P.ComponentKind.CONTROLLER && F.isKeyFinding(f);
      const where = keyed ? el("a", { href: U.key(worker, seg, f.subject), title: "the key's page: its story, attempts, triggers and versions" }, f.subject)
        : comp.kind === P.ComponentKind.INFORMER ? el("a", { href: U.informer(worker, seg) }, "informer " + comp.name)
          : el("a", { href: U.controller(worker, seg) }, String(f.subject));
      const severe = [P.FindingKind.HOT_LOOP, P.FindingKind.FAILING, P.FindingKind.TERMINAL, P.FindingKind.WATCH_SILENT, P.FindingKind.RELIST_STORM].includes(f.finding);
      return el("li", { className: severe ? "" : "warn", dataset: { finding: String(f.finding), subject: String(f.subject), worker: worker } },
        F.badge(f), el("span", { className: "where" }, worker + " › " + (comp.kind === P.ComponentKind.CONTROLLER ? comp.name + " › " : ""), where),
        el("span", { className: "message" }, f.message || ""),
        el("span", { className: "since muted" }, typeof f.since === "number" ? "since " + fmtDuration(Math.max(0, now - f.since)) + " ago" : ""));
    });
    if (all.length > MAX_PROBLEMS) rows.push(el("li", { className: "muted warn" }, (all.length - MAX_PROBLEMS) + " more not listed"));
    $("problems-panel").hidden = !rows.length;
    $("problems").replaceChildren(...rows);
  }

  // An informer no controller watches: its card is its chain, ending at its handlers, and links to
  // its page (events, handlers, cache).
  function informerCard(w, inf, stale) {
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
    syncChildren(head, [head.firstChild, ...findingsBadges(inf)]);
    window.ctrlscopePipeline.render(v.box, { informers: informerModels(w, [inf], stale), controller: null });
    return v.root;
  }

  // v1.6: a raw watch loop: its chain (Watch → no cache → GETs), linking to its page.
  function watcherCard(w, comp, stale) {
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
    const samples = stale ? [] : w.samples;
    const of = (s) => (((s.stages || {}).watchers || {})[comp.name]) || {};
    window.ctrlscopePipeline.renderWatcher(v.box, { name: comp.name, resource: comp.resource, variant: comp.variant,
      state: comp.state, since: comp.since, lastEnd: comp.last_end, now: Date.now(), counts: of(w.samples[w.samples.length - 1] || {}),
      rates: { watch: rate(samples, (s) => of(s).watch), reads: rate(samples, (s) => of(s).reads) } });
    return v.root;
  }

  // When the worker was last heard from (0: never), what both "stale" and "stopped" are measured from.
  const lastSeen = (w) => w.lastArrival || w.lastTs;

  function workerBox(w, comps, now, unsupported) {
    const known = lastSeen(w);
    const since = now - known;
    const run = Presence.workerRun(w.name);
    const liveness = Presence.liveness(w.name, w.lastTs);
    const stopped = liveness === P.Liveness.STOPPED;
    const stale = liveness !== P.Liveness.LIVE;
    const me = Page.workerEntry(comps);
    const lease = [...comps.values()].find((v) => v && v.kind === P.ComponentKind.LEASE);
    const ctls = controllersOf(w.name, comps);
    const cards = [...ctls].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([seg, ctl]) => controllerCard(w, seg, ctl, comps, lease, stale))
      .concat(plainInformers(comps, ctls).map((inf) => informerCard(w, inf, stale)))
      .concat(watchersOf(comps).map((c) => watcherCard(w, c, stale)));
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

  function clusterSection(key, info, workerRoots, goneRoots) {
    const v = view("cluster|" + key, () => {
      const head = el("h3", { className: "cluster-head" });
      return { head: head, root: el("section", { className: "cluster", dataset: { cluster: info ? info.name : "" } }, head) };
    });
    const text = info ? [info.server !== info.name ? info.server : "", info.version ? "Kubernetes " + info.version : ""].filter(Boolean).join(" · ") : "";
    const sig = info ? info.name + "\n" + text : "";
    if (v.head.dataset.sig !== sig) {
      v.head.dataset.sig = sig;
      v.head.replaceChildren("cluster ", ...(info ? [el("b", null, info.name), " ", el("span", { className: "muted" }, text)]
        : [el("span", { className: "muted" }, "not reported by its workers")]));
    }
    const nodes = [v.head, ...workerRoots];
    if (goneRoots.length) {
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

  const placeholder = el("p", { className: "muted" }, "no worker has published its components yet…");
  function renderOverview() {
    overviewDirty = false;
    used = new Set();
    const now = Date.now();
    const clusters = new Map(); // key -> {info, workers: [root]}
    const live = new Map(); // worker -> its components, for the problems
    const known = client.knownTopics || [];
    for (const name of [...workers.keys()].sort()) {
      // Forgotten, or dropped by retention: none of its topics is left in Redis.
      if (known.length && !known.some((t) => { const p = P.parseTopic(t); return p && p.worker === name; })) { workers.delete(name); continue; }
      const t = client.topics.get(P.workerTopic(name, P.TopicKind.COMPONENTS));
      const comps = t ? t.state : new Map();
      const unsupported = Page.unsupportedVersion(client, name, comps);
      if (!unsupported && !comps.size && !workers.get(name).samples.length && !controllersOf(name, comps).size) continue;
      const info = unsupported ? null : [...comps.values()].find((v) => v && v.kind === P.ComponentKind.CLUSTER) || null;
      const key = info ? info.server || info.name : "";
      if (!clusters.has(key)) clusters.set(key, { info: info, workers: [], gone: [] });
      const w = workers.get(name), seenAt = lastSeen(w), run = Presence.workerRun(name);
      // A worker with presence is folded only once its newest run stopped FOLD_MS ago (an idle live
      // worker stays on top however old its last frame); one without presence by its frame age.
      const folded = run ? !Presence.runAlive(run) && now - (run.stopped || run.seen) > FOLD_MS : seenAt && now - seenAt > GONE_MS;
      clusters.get(key)[folded ? "gone" : "workers"].push(workerBox(w, comps, now, unsupported));
      if (!folded && !unsupported) live.set(name, comps);
    }
    const sections = [...clusters].sort((a, b) => (a[0] === "" ? 1 : b[0] === "" ? -1 : a[0] < b[0] ? -1 : 1))
      .map(([key, c]) => clusterSection(key, c.info, c.workers, c.gone));
    syncChildren($("overview"), sections.length ? sections : [placeholder]);
    for (const key of views.keys()) if (!used.has(key)) views.delete(key); // controllers and workers gone
    renderProblems(live);
    renderDropped();
  }

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
    if (now - lastOverview >= 1000 || (overviewDirty && now - lastOverview >= 250)) { lastOverview = now; renderOverview(); }
    else if (overviewDirty) setTimeout(schedule, 250);
    if (dev.open) renderEvents();
  }

  setInterval(() => { overviewDirty = true; schedule(); }, 1000); // last seen, stale and rates move on
  window.ctrlscope = { client: client, workers: workers };
  client.connect();
})();
