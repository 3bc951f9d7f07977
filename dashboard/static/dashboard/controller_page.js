/*
 * One controller's page (/c/{worker}/{controller}/), or one informer's (/c/{worker}/informer/{name}/:
 * an informer no controller watches has only this home): the bootstrap every panel of it shares.
 * Loaded last; the panels' scripts register in window.ctrlscopePanels before it runs (queue_panel.js,
 * timeline_panel.js, handlers_panel.js, logs_panel.js, mode_banner.js, events_panel.js, cache.js,
 * metrics.js, faults.js, fault_markers.js; an informer's page: handler_calls_panel.js, events_panel.js,
 * cache.js, faults.js, fault_markers.js) and are started here, before the socket opens, so they see
 * every message.
 *
 * Owns what the panels share: the cs-page JSON (worker, controller, its topics), the tab's
 * TelemetryClient and which topics it subscribes to (informer caches load over HTTP first), the
 * worker-clock estimate (workerNow), the header (components, with their open findings as badges;
 * connection badges, the protocol notice), the focused key, the keyboard, and one frame loop: records update the panels' small models as they
 * arrive; the DOM is touched once per animation frame, plus a 100 ms tick that keeps ages, countdowns
 * and the timeline's moving time axis current. Every list is capped, so the DOM stays bounded whatever
 * the event rate; what is not drawn is counted and said.
 *
 * Names: topics and URLs carry topic segments ("v1_Pod"), people read names ("v1/Pod"). Every
 * informer name a panel shows comes from informerName(topic): the name the worker's components entry
 * gives the topic's informer (the server resolves the ones it knows when it renders the page, so
 * that rows loaded with the page are named like live ones); panels keep topics in their rows and name
 * them when they draw, and redraw when a name arrives (onComponents).
 *
 * The api a panel's init(api) gets: client, page, topics, informerTopics, informerName, workerNow,
 * stateOf, schedule, want, controllerComponent, watchedTopics, focusKey, setFocus, onFocus, onKey,
 * onRender, onComponents, and what the panels add for each other (queue, events, pushEvent, logs).
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const { el } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const F = window.ctrlscopeFindings; // findings.js: the open findings of a components entry, as badges
  const Page = window.ctrlscopePage;
  const page = JSON.parse(document.getElementById("cs-page").textContent);
  const T = page.topics;
  // An informer's page shows that informer alone; a controller's, every informer of the worker
  // (the cache panel browses them all), its watched ones in its pipeline and events.
  const informerPage = page.kind === P.ComponentKind.INFORMER;
  const mineTopic = (t) => (informerPage ? t === T.informer : t.startsWith(T.informer_prefix));
  const $ = (id) => document.getElementById(id);

  // History: 500 frames of context per topic; the metrics topic's frames are one sample a second, and
  // 6 minutes of them draw the 5-minute charts with their 1-minute quantile windows filled.
  const client = Page.client({ autoSubscribe: false, history: (topic) => (topic === T.metrics ? 360 : 500) });
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
  // comes over HTTP (informer_snapshots.js; the informers the server knew when it rendered the page
  // were asked for from the head); the socket subscription then resumes from the snapshot's stream id.
  let connGen = 0;
  const Snapshots = window.ctrlscopeSnapshots;
  function loadInformer(topic) {
    const gen = connGen;
    (Snapshots.take(topic) || Snapshots.load(page.worker, T.informer_prefix, topic))
      .then((snap) => {
        if (gen !== connGen || !subscribed.has(topic)) return; // the socket dropped meanwhile: reloaded on reconnect
        const t = { cursor: null, state: new Map() };
        client.topics.set(topic, t);
        if (snap.history.length) client.applyEntries(topic, snap.history);
        t.state = client.unsupported.has(topic) ? new Map() : snap.state; // a Map (informer_snapshots.js)
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
      if (informerTopics.has(t) && api.pushEvent) api.pushEvent({ marker: "stream", ts: workerNow(), topic: t, text: "⟳ reconnected: cache reloaded from a fresh snapshot" });
    }
  });
  client.on("error", (err) => {
    if (err && err.code === "unknown_topic" && err.topic) { subscribed.delete(err.topic); client.topics.delete(err.topic); known.delete(err.topic); }
  });

  // Informer topic -> its informer's name, "" while no components entry has named it.
  const informerTopics = new Map();
  for (const t in page.names || {}) if (mineTopic(t)) informerTopics.set(t, page.names[t]);
  let componentsDirty = true;
  // The informer's name for people; only for a topic no components entry has named (a publisher
  // that never announced its informer) the topic segment stands in for it.
  function informerName(topic) { return informerTopics.get(topic) || topic.slice(T.informer_prefix.length); }

  Page.connectionBadge(client);
  client.on("topics", (topics) => {
    known = new Set(topics);
    subscribeLater();
    // Informer topics can appear before the components entry that names them.
    for (const t of topics) if (mineTopic(t) && !informerTopics.has(t)) { informerTopics.set(t, ""); want(t); }
    componentsDirty = true; schedule();
  });
  client.on("snapshot", (topic) => {
    liveTopics.add(topic);
    if (topic === T.components) { syncInformers(); componentsDirty = true; }
    schedule();
  });
  client.on("resync", (topic) => { liveTopics.delete(topic); schedule(); });
  client.on("records", (topic, records, id, frame) => {
    noteFrame(topic, frame);
    if ((topic === T.components || topic === T.metrics) && frame && typeof frame.ts === "number") lastFrameTs = Math.max(lastFrameTs, frame.ts);
    if (topic === T.components) { syncInformers(); componentsDirty = true; }
    schedule();
  });
  client.on("protocol", () => { componentsDirty = true; schedule(); });

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

  // ---- components (the page header) --------------------------------------------------------
  function syncInformers() {
    for (const [k, v] of stateOf(T.components)) {
      if (v && v.kind === P.ComponentKind.INFORMER) {
        const name = v.name || k.slice(P.componentKey(P.ComponentKind.INFORMER, "").length);
        const topic = informerTopic(name);
        if (!mineTopic(topic)) continue;
        if (informerTopics.get(topic) !== name) informerTopics.set(topic, name);
        want(topic);
      }
    }
  }
  const informerTopic = (name) => T.informer_prefix + P.topicPart(name);
  // An informer's page, for a link.
  const informerUrl = (name) => U.informer(page.worker, P.topicPart(name));

  function renderComponents() {
    const box = $("components");
    const items = [];
    const comps = [...stateOf(T.components)].sort();
    for (const [, v] of comps) {
      if (!v) continue;
      if (v.kind === P.ComponentKind.INFORMER) {
        const current = informerPage && informerTopic(v.name) === T.informer;
        if (informerPage && !current) continue;
        if (current && v.name && $("h-informer").textContent !== v.name) $("h-informer").textContent = v.name;
        const st = window.ctrlscopePipeline.reflectorState(v);
        items.push(el(current ? "span" : "a", { className: "comp informer" + (current ? " current" : ""), href: current ? undefined : informerUrl(v.name),
          title: "informer " + v.name + " · " + (v.fifo || "") + " · rv " + (v.rv || "?") + (current ? "" : " · its page: events, handlers, cache") },
        "informer ", el("b", null, v.name), " ", el("span", { className: "badge st-" + st }, st),
        v.synced ? el("span", { className: "badge ok" }, "synced") : el("span", { className: "badge warn" }, "syncing"),
        // v1.7: what the worker states about this informer (not synced, watch silent, relist storm)
        ...F.open(v).flatMap((f) => [" ", F.badge(f)])));
      } else if (v.kind === P.ComponentKind.CONTROLLER && informerPage) {
        // Here only the controllers that watch this informer: its other consumers.
        const name = informerTopics.get(T.informer);
        if (!Array.isArray(v.watches) || !v.watches.includes(name)) continue;
        items.push(el("a", { className: "comp controller", href: U("/c/" + page.worker + "/" + P.topicPart(v.name) + "/") }, "watched by controller " + v.name));
      } else if (v.kind === P.ComponentKind.CONTROLLER) {
        const seg = P.topicPart(v.name);
        // The URL and the breadcrumb carry the topic segment ("/" made "_"): the head shows the
        // controller's own name once the worker has reported it.
        if (seg === page.controller && v.name && $("h-controller").textContent !== v.name) $("h-controller").textContent = v.name;
        items.push(seg === page.controller ? el("span", { className: "comp controller current" }, "controller ", el("b", null, v.name))
          : el("a", { className: "comp controller", href: U("/c/" + page.worker + "/" + seg + "/") }, "controller " + v.name));
      } else if (v.kind === P.ComponentKind.LEASE) {
        items.push(el("span", { className: "comp lease" }, "lease ", el("b", null, v.name || ""), " ",
          el("span", { className: "badge " + (v.leader ? "ok" : "") }, v.leader ? "leader" : "follower (" + (v.holder || "?") + ")")));
      }
    }
    if (informerPage && items.length === 1) {
      // No controller watches it (a plain client-go informer and its handlers): the handlers are
      // where its events end, and nothing retries what they fail to do.
      items.push(el("span", { className: "muted comp", title: "an informer's handlers are called once per event and never retried; " +
        "a controller's Reconcile is retried until it succeeds" }, "no controller watches it: its handlers are where its events end"));
    }
    if (!items.length) items.push(el("span", { className: "muted" }, "waiting for the worker's components…"));
    box.replaceChildren(...items);
    renderProtocolNotice();
    renderWritesNotice();
  }

  // A notice above the components (id: its element, made on first use), hidden when text is "".
  function notice(id, text) {
    let note = $(id);
    if (!note && !text) return;
    if (!note) {
      note = el("div", { id: id, className: "notice " + id, role: "status" });
      $("components").before(note);
    }
    note.hidden = !text;
    if (note.textContent !== text) note.textContent = text;
  }

  // A read-only worker (v1.2 cluster entry): its writes are refused in the worker, and the page
  // says so above everything, so that a failing Reconcile is not mistaken for an API server's 403.
  function renderWritesNotice() {
    const badge = Page.writesBadge(Page.clusterEntry(stateOf(T.components)));
    notice("writes-notice", badge && badge.readOnly ? "read-only: worker " + page.worker + " " + badge.title.replace(/^this worker /, "") : "");
  }

  // A worker of another protocol major: nothing on this page is its data, and the page says so.
  function renderProtocolNotice() {
    const version = Page.unsupportedVersion(client, page.worker, stateOf(T.components));
    notice("protocol-notice", version ? Page.protocolNotice(page.worker, version) : "");
    // Its components and pipeline would only ever say "waiting…": the notice stands in for them.
    $("components").hidden = !!version;
    $("pipeline").hidden = !!version;
  }

  // Whether the worker is live, by the one rule (protocol/redis-layout.md, "Liveness"; presence.js),
  // as a badge by its name, drawn with every frame of the page (a run turns stopped ALIVE_MS after
  // its entry was last refreshed, whether or not anything arrives). A worker whose newest run is
  // not running: everything below is that run's last state, and the page says so above it instead
  // of passing it for live.
  const Presence = window.ctrlscopePresence;
  let lastFrameTs = 0; // the newest frame's ts of the worker's components or metrics
  function renderLiveness() {
    const liveness = Presence.liveness(page.worker, lastFrameTs), run = Presence.workerRun(page.worker);
    let badge = $("h-liveness");
    if (!badge) { badge = el("span", { id: "h-liveness", className: "badge" }); $("h-worker").after(" ", badge); }
    if (badge.dataset.liveness !== liveness) {
      badge.dataset.liveness = liveness;
      badge.textContent = liveness;
      badge.className = "badge " + (liveness === P.Liveness.LIVE ? "ok" : "bad");
      badge.title = liveness === P.Liveness.LIVE ? (run ? "running: its presence entry was refreshed within " + P.ALIVE_MS / 1000 + " s" : "publishing")
        : liveness === P.Liveness.STOPPED ? "this worker's newest run is not running: what is shown is its last state"
          : "no presence entry and no frame for " + P.FRAME_STALE_MS / 1000 + " s: the worker stopped publishing";
    }
    notice("run-notice", liveness === P.Liveness.STOPPED ? "worker " + page.worker + " is not running: " + Presence.stoppedText(run) +
      " (" + Presence.runText(run) + "). What this page shows is that run's last state." : "");
  }
  Presence.listen(() => schedule());

  // This page's controller as the worker's components report it ({} until reported, and on an
  // informer's page).
  function controllerComponent() {
    if (informerPage) return {};
    for (const v of stateOf(T.components).values()) {
      if (v && v.kind === P.ComponentKind.CONTROLLER && P.topicPart(v.name) === page.controller) return v;
    }
    return {};
  }
  // The topics of the informers this page is about: the informer of an informer's page; those this
  // controller watches (null: not reported yet, so every informer of the worker counts). The events
  // panel and the pipeline show only these; the cache panel can still browse every informer of the
  // worker. By topic, not by name: a row knows its topic from the moment it arrives.
  function watchedTopics() {
    if (informerPage) return new Set([T.informer]);
    const w = controllerComponent().watches;
    return Array.isArray(w) ? new Set(w.map(informerTopic)) : null;
  }

  // ---- the focused key -----------------------------------------------------------------------
  // Focus one key: its lane and queue row are highlighted, the events are filtered to it and the
  // URL becomes the key's deep link (?key=…), ready to share. An empty key clears the focus.
  let focusKey = page.key || "";
  const focusListeners = [];
  function setFocus(key) {
    focusKey = key || "";
    const url = new URL(location.href);
    if (focusKey) url.searchParams.set("key", focusKey); else url.searchParams.delete("key");
    history.replaceState(null, "", url);
    for (const fn of focusListeners) fn(focusKey);
    schedule();
  }

  // ---- keyboard --------------------------------------------------------------------------------
  const keys = new Map(); // key -> handler(event)
  document.addEventListener("keydown", (e) => {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    const typing = e.target instanceof HTMLElement && e.target.matches("input, textarea, select, [contenteditable]");
    if (typing) { if (e.key === "Escape") e.target.blur(); return; }
    const fn = keys.get(e.key);
    if (fn) fn(e);
  });

  // ---- frame loop ------------------------------------------------------------------------------
  const renderers = [];
  const componentListeners = [];
  const schedule = Page.scheduler(() => {
    const now = workerNow();
    if (componentsDirty) {
      componentsDirty = false;
      renderComponents();
      for (const fn of componentListeners) fn();
    }
    renderLiveness();
    for (const fn of renderers) fn(now);
  });

  // Countdowns, ages and the timeline's time axis move even when nothing arrives: 10 frames/s.
  setInterval(schedule, 100);
  want(T.components);
  if (!informerPage) { want(T.queue); want(T.controller); }
  window.ctrlscope = { client: client, skew: () => skew, page: page };
  const api = { client: client, page: page, topics: T, informerTopics: informerTopics, informerName: informerName, workerNow: workerNow,
    stateOf: stateOf, schedule: schedule, want: want, controllerComponent: controllerComponent, watchedTopics: watchedTopics,
    focusKey: () => focusKey, setFocus: setFocus, onFocus: (fn) => focusListeners.push(fn),
    onKey: (key, fn) => keys.set(key, fn), onRender: (fn) => renderers.push(fn), onComponents: (fn) => componentListeners.push(fn) };
  for (const init of window.ctrlscopePanels || []) { try { init(api); } catch (e) { console.error(e); } }
  client.connect();
})();
