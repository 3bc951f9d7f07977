/*
 * The controller page's pipeline overview and cache panel. Registered in window.ctrlscopePanels and
 * started by controller_page.js (which owns the TelemetryClient) before the socket opens.
 *
 * Pipeline (drawn by pipeline.js): Reflector → FIFO → Cache → Handlers (per informer the controller
 * watches) → WorkQueue → Workers → Reconcile → API writes (this controller), each stage with a live
 * rate measured here from every record (records/s over the last 3 s of worker time) and the badges
 * the components topic gives (reflector state, synced, FIFO model); until an informer has synced its
 * stage shows the initial sync as progress (cache size / items listed).
 *
 * Cache: the informer topic's snapshot state (key → {rv, gen, uid, phase?, deleting?}) as a
 * virtualized table: a tall spacer, absolute-positioned rows, and only the visible rows (plus a
 * little overscan) in the DOM, re-rendered on scroll in a requestAnimationFrame. Keys are kept
 * sorted; frame state changes insert/remove by binary search, or trigger one re-sort when a frame
 * changes many keys. Changed rows flash. Click a row: the object inspector (inspect.js) fetches that one
 * object from its worker (YAML, and a diff of the last update a handler saw), plus its summary and
 * the watch/handler history this page has seen.
 *
 * Cost (the "cost" button, cache_cost.js): what the chosen informer's cache holds -- its bytes as JSON,
 * the shares of managedFields and of big annotations, the objects per namespace, and what a transform
 * or a metadata-only informer would save -- measured on a sample of its objects fetched through the
 * object inspector, scaled by the snapshot's count (exact for a small cache).
 *
 * Responsiveness: above SUMMARISE_RATE records/s (page-wide) the page says it is summarising; the
 * cache table stops flashing rows and re-sorts at most once a second.
 */
(function () {
  "use strict";
  const UI = window.ctrlscopeUI;
  const U = window.ctrlscopeUrl;
  const { el, fmtDuration, clock } = UI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);

  const ROW_H = 22;           // px, must match .cache-scroll .cache-row height
  const OVERSCAN = 8;         // rows drawn above and below the viewport
  const MAX_TABLE_H = 440;    // px: the table scrolls within this (.cache-scroll's CSS height)
  const MIN_TABLE_H = 5 * ROW_H;
  const FLASH_MS = 1200;
  const MAX_FLASH_PER_FRAME = 5000; // a bigger change (relist) is counted, not flashed row by row
  const HISTORY_PER_KEY = 20;
  const HISTORY_KEYS = 5000;
  const SUMMARISE_RATE = 2000;      // records/s
  const RATE_WINDOW_MS = 3000;

  // Events per 100 ms bucket (by the record's worker timestamp); rate() = events/s over the last 3 s.
  class RateMeter {
    constructor() { this.buckets = new Map(); }
    add(ts, n) {
      const b = Math.floor(ts / 100);
      this.buckets.set(b, (this.buckets.get(b) || 0) + (n === undefined ? 1 : n));
      if (this.buckets.size > 120) this.trim(b);
    }
    trim(nowB) { for (const k of this.buckets.keys()) if (k <= nowB - 60) this.buckets.delete(k); }
    rate(now) {
      const nowB = Math.floor(now / 100), from = nowB - RATE_WINDOW_MS / 100;
      this.trim(nowB);
      let sum = 0;
      for (const [k, v] of this.buckets) if (k > from && k <= nowB) sum += v;
      return sum / (RATE_WINDOW_MS / 1000);
    }
  }

  function lowerBound(arr, key) {
    let lo = 0, hi = arr.length;
    while (lo < hi) { const mid = (lo + hi) >>> 1; if (arr[mid] < key) lo = mid + 1; else hi = mid; }
    return lo;
  }

  function init(api) {
    const { client, page, topics: T, informerTopics, informerName, workerNow, stateOf } = api;

    // ---- per-informer and per-controller stage meters -----------------------------------
    const infStats = new Map(); // informer topic -> {watch, fifo, cache, handlers, handlerErrors, listItems, fifoDepth}
    function stats(topic) {
      let s = infStats.get(topic);
      if (!s) {
        s = { watch: new RateMeter(), fifo: new RateMeter(), cache: new RateMeter(), handlers: new RateMeter(),
          handlerCalls: 0, handlerErrors: 0, listItems: null, fifoDepth: 0 };
        infStats.set(topic, s);
      }
      return s;
    }
    const ctl = { adds: new RateMeter(), gets: new RateMeter(), reconciles: new RateMeter(), errors: new RateMeter(),
      writes: new RateMeter(), writeCount: 0, writeErrors: 0, writeConflicts: 0, writesRefused: 0, writesForbidden: 0, lastForbidden: null, depth: 0,
      lastResult: "" };
    const pageRate = { last: performance.now(), records: 0, value: 0, summarising: false };

    // ---- cache model (the selected informer) --------------------------------------------
    const cache = {
      topic: "", keys: [], known: new Set(), view: null, filter: [], rebuild: true, viewDirty: true,
      flash: new Map(), bigChanges: 0, lastRebuild: 0, selected: page.obj || "", history: new Map(),
      rowsDirty: true, ready: false, scrollTo: page.obj || "",
    };
    const scroller = $("cache-scroll"), spacer = $("cache-spacer"), select = $("cache-informer");
    const pool = []; // row elements, reused
    // The scroller's offset and height as last seen by its own events, so that rendering never
    // reads layout (a read right after another panel's DOM writes forces a full synchronous layout).
    const viewport = { top: 0, h: 0 };
    if (typeof ResizeObserver === "function") {
      new ResizeObserver((entries) => {
        for (const e of entries) { const h = e.target.clientHeight; if (h !== viewport.h) { viewport.h = h; cache.rowsDirty = true; schedule(); } }
      }).observe(scroller);
    }
    function setScrollTop(top) { scroller.scrollTop = top; viewport.top = scroller.scrollTop; }
    function setText(node, text) { if (node.textContent !== text) node.textContent = text; }

    // ---- what the cache costs (cache_cost.js) ------------------------------------------------
    const CC = window.ctrlscopeCacheCost;
    let costRun = null;
    const fmtBytes = (b) => (b >= 1048576 ? (b / 1048576).toFixed(1) + " MiB" : b >= 1024 ? (b / 1024).toFixed(1) + " KiB" : Math.round(b) + " B");
    const pct = (x) => (x * 100).toFixed(x < 0.1 ? 1 : 0) + " %";
    function stopCost() {
      if (costRun) costRun.abort();
      costRun = null;
      $("cache-cost").hidden = true;
      $("cache-cost").replaceChildren();
    }
    function runCost() {
      if (costRun) costRun.abort();
      const run = costRun = new AbortController();
      const box = $("cache-cost");
      const topic = cache.topic, parsed = P.parseTopic(topic);
      if (!parsed) return;
      const keys = cache.keys.slice();
      const sample = CC.sampleKeys(keys, CC.SAMPLE);
      const name = informerName(topic);
      box.hidden = false;
      box.dataset.state = "measuring";
      const progress = el("span", { className: "muted" }, "measuring " + sample.length + " objects…");
      box.replaceChildren(el("b", null, "cost of informer " + name), " ", progress);
      if (!keys.length) { box.dataset.state = "empty"; progress.textContent = "its cache is empty"; return; }
      const url = (key) => U.informer(page.worker, parsed.name) + "object?key=" + encodeURIComponent(key);
      CC.fetchSample(url, sample, (done, total) => { progress.textContent = "measuring: " + done + " of " + total + " objects fetched…"; }, run.signal)
        .then((objects) => {
          if (run !== costRun) return;
          if (!objects.length) throw new Error("no object could be fetched");
          renderCost(box, name, CC.estimate(objects.map(CC.measure), keys.length), CC.perNamespace(keys));
        })
        .catch((err) => {
          if (run !== costRun) return;
          box.dataset.state = "error";
          box.replaceChildren(el("b", null, "cost of informer " + name), " ", el("span", { className: "obj-error" }, "could not measure: " + err.message));
        });
    }
    function renderCost(box, name, e, namespaces) {
      const of = (b) => fmtBytes(b) + " (" + pct(e.bytes ? b / e.bytes : 0) + ")";
      const head = el("div", { className: "cost-head" }, el("b", null, "cost of informer " + name), " ",
        el("span", { className: "cost-total" }, (e.exact ? "" : "≈ ") + fmtBytes(e.bytes)), " as JSON for " + e.count.toLocaleString() + " objects, " +
        fmtBytes(e.perObject) + " each · " + (e.exact ? "every object measured" : "measured on " + e.sampled + " objects spread over them, scaled by the count"),
        el("button", { type: "button", className: "cost-close", title: "close" }, "×"));
      const rows = [
        ["metadata.managedFields", of(e.managed), "server-side apply's field ownership: no controller reads it"],
        ["annotations over " + CC.BIG_ANNOTATION / 1024 + " KiB", of(e.bigAnnotations),
          e.bigAnnotationNames.length ? e.bigAnnotationNames.join(", ") : "none in the measured objects"],
      ];
      const saves = [
        ["drop managedFields (a transform: SetTransform / cache.TransformStripManagedFields)", of(e.saveStripManaged)],
        ["a metadata-only informer (PartialObjectMetadata: apiVersion, kind, metadata)", of(e.saveMetadataOnly)],
        ["metadata-only, managedFields dropped too", of(e.saveMetadataOnlyStripped)],
      ];
      const TOP = 8;
      const nsItems = namespaces.slice(0, TOP).map(([ns, n]) => el("li", { dataset: { namespace: ns } }, el("span", { className: "ns" }, ns || "(cluster-scoped)"), " ", el("b", null, n.toLocaleString())));
      if (namespaces.length > TOP) {
        const rest = namespaces.slice(TOP).reduce((s, [, n]) => s + n, 0);
        nsItems.push(el("li", { className: "muted" }, (namespaces.length - TOP) + " more namespaces: " + rest.toLocaleString()));
      }
      box.dataset.state = "done";
      // The numbers as measured, for whoever reads them without the words (tests, a developer).
      Object.assign(box.dataset, { bytes: String(Math.round(e.bytes)), managed: String(Math.round(e.managed)),
        bigAnnotations: String(Math.round(e.bigAnnotations)), metadataOnlySaves: String(Math.round(e.saveMetadataOnly)),
        sampled: String(e.sampled), count: String(e.count) });
      box.replaceChildren(head,
        el("table", { className: "events cost-table" },
          el("tbody", null, ...rows.map(([what, b, note]) => el("tr", { dataset: { part: what } }, el("td", null, what), el("td", { className: "num" }, b), el("td", { className: "muted" }, note))),
            ...saves.map(([what, b]) => el("tr", { className: "save" }, el("td", null, what), el("td", { className: "num" }, "saves " + b), el("td"))))),
        el("div", { className: "cost-ns" }, el("span", { className: "muted" }, "objects per namespace (" + namespaces.length + "):"), el("ul", null, ...nsItems)));
    }
    $("cache-cost-btn").addEventListener("click", runCost);
    $("cache-cost").addEventListener("click", (ev) => { if (ev.target.closest(".cost-close")) stopCost(); });

    let userChose = false; // the user picked an informer in the select: keep it
    function chooseInformer() {
      const list = [...informerTopics.keys()].sort();
      const names = list.map(informerName);
      if (select.options.length !== list.length || [...select.options].some((o, i) => o.value !== list[i])) {
        select.replaceChildren(...list.map((t, i) => el("option", { value: t }, names[i])));
      } else {
        // A name that arrived after the option was made (the components entry came later).
        [...select.options].forEach((o, i) => { if (o.textContent !== names[i]) o.textContent = names[i]; });
      }
      // Unless the URL or the user chose one: this controller's first watched informer (its For()),
      // once the controller said what it watches -- not the worker's alphabetically first one.
      const watched = api.watchedTopics();
      const automatic = !page.cache && !userChose;
      const foreign = automatic && watched && cache.topic && !watched.has(cache.topic);
      if (!cache.topic || !informerTopics.has(cache.topic) || foreign) {
        const wanted = page.cache ? list.find((t) => informerName(t) === page.cache || t.endsWith("/" + page.cache)) : null;
        const own = watched ? [...watched].find((t) => informerTopics.has(t)) : null;
        const topic = wanted || own || list[0] || "";
        if (topic && topic !== cache.topic) setInformer(topic);
      }
      if (cache.topic) select.value = cache.topic;
      nameHead();
    }
    // The panel's head names the informer (its topic in the tooltip, for developers).
    function nameHead() {
      const head = $("cache-topic");
      setText(head, cache.topic ? informerName(cache.topic) : "");
      head.title = cache.topic ? "topic " + cache.topic : "";
    }

    function setInformer(topic) {
      stopCost();
      cache.topic = topic;
      cache.rebuild = true; cache.ready = false; cache.flash.clear(); cache.history.clear();
      nameHead();
      closeDetails(false);
      schedule();
    }
    select.addEventListener("change", () => { userChose = true; setInformer(select.value); updateUrl(); });

    function rebuildKeys() {
      const state = stateOf(cache.topic);
      cache.keys = [...state.keys()].sort();
      cache.known = new Set(cache.keys);
      cache.rebuild = false; cache.viewDirty = true; cache.rowsDirty = true;
      cache.lastRebuild = performance.now();
    }

    // A frame's state changes: keep the sorted key list current and remember what to flash.
    function applyChanges(changed, now) {
      const ks = Object.keys(changed);
      if (!ks.length) return;
      stats(cache.topic);
      const flashOk = cache.ready && !pageRate.summarising && ks.length <= MAX_FLASH_PER_FRAME;
      if (!flashOk && cache.ready) cache.bigChanges += ks.length;
      let structural = 0;
      for (const k of ks) if ((changed[k] === null) === cache.known.has(k)) structural += 1;
      if (cache.rebuild || structural > 1000 || (pageRate.summarising && structural)) {
        cache.rebuild = true; // one sort at the next (throttled) render instead of many splices
      } else if (structural) {
        for (const k of ks) {
          const gone = changed[k] === null;
          if (gone && cache.known.has(k)) { cache.known.delete(k); const i = lowerBound(cache.keys, k); if (cache.keys[i] === k) cache.keys.splice(i, 1); }
          else if (!gone && !cache.known.has(k)) { cache.known.add(k); cache.keys.splice(lowerBound(cache.keys, k), 0, k); }
        }
        cache.viewDirty = true;
      }
      if (flashOk) for (const k of ks) if (changed[k] !== null) cache.flash.set(k, now + FLASH_MS);
      if (cache.filter.length) cache.viewDirty = true;
      cache.rowsDirty = true;
    }

    function remember(key, item) {
      let h = cache.history.get(key);
      if (!h) {
        h = [];
        if (cache.history.size >= HISTORY_KEYS) cache.history.delete(cache.history.keys().next().value); // oldest key
      } else cache.history.delete(key); // re-insert: most recently active keys live longest
      cache.history.set(key, h);
      h.push(item);
      if (h.length > HISTORY_PER_KEY) h.shift();
    }

    // ---- listeners ------------------------------------------------------------------------
    client.on("snapshot", (topic) => {
      if (topic === cache.topic) { cache.rebuild = true; cache.flash.clear(); }
      if (topic === T.components) chooseInformer();
      schedule();
    });
    client.on("topics", () => { chooseInformer(); schedule(); });
    client.on("resync", (topic) => { if (topic === cache.topic) cache.ready = false; });

    client.on("records", (topic, records, id, frame) => {
      pageRate.records += records.length;
      const now = workerNow();
      if (topic === T.components) { chooseInformer(); overviewDirty = true; }
      else if (topic === T.queue) {
        for (const r of records) {
          if (r.k !== P.RecordKind.QUEUE) continue;
          const ts = r.ts || now;
          if (P.QUEUE_ADDS.has(r.op)) ctl.adds.add(ts);
          else if (r.op === P.QueueOp.GET) ctl.gets.add(ts);
          ctl.depth = r.depth || 0;
        }
      } else if (topic === T.controller) {
        for (const r of records) {
          if (r.k === P.RecordKind.WRITE) {
            // v1.4: a write the worker refused itself was never sent: not a write, not a failure.
            if (r.refused) { ctl.writesRefused += 1; continue; }
            ctl.writes.add(r.ts || now);
            ctl.writeCount += 1;
            if (!r.code || r.code >= 400) ctl.writeErrors += 1;
            if (r.code === 409) ctl.writeConflicts += 1;
            if (r.code === 403) { ctl.writesForbidden += 1; ctl.lastForbidden = { method: r.method, path: r.path }; }
            continue;
          }
          if (r.k !== P.RecordKind.RECONCILE) continue;
          ctl.reconciles.add(r.ts || now);
          if (P.FAILED_RESULTS.has(r.result)) ctl.errors.add(r.ts || now);
          ctl.lastResult = r.result;
        }
      } else if (topic.startsWith(T.informer_prefix)) {
        const s = stats(topic);
        const mine = topic === cache.topic;
        for (const r of records) {
          const ts = r.ts || now;
          switch (r.k) {
            case P.RecordKind.WATCH:
              s.watch.add(ts);
              if (mine && r.key) remember(r.key, { ts: ts, kind: P.RecordKind.WATCH, text: r.type + " rv " + (r.rv || "?") });
              break;
            case P.RecordKind.HANDLER:
              s.handlers.add(ts);
              s.handlerCalls += 1;
              if (r.outcome === P.HandlerOutcome.ERROR) s.handlerErrors += 1;
              if (mine && r.key) remember(r.key, { ts: ts, kind: P.RecordKind.HANDLER, error: r.outcome === P.HandlerOutcome.ERROR,
                text: r.event + " → " + r.handler + " " + r.outcome + (r.old_rv ? " rv " + r.old_rv + "→" + (r.rv || "?") : r.rv ? " rv " + r.rv : "") +
                  (r.duration !== undefined && r.duration !== null ? " (" + fmtDuration(r.duration * 1000) + ")" : "") + (r.error ? ": " + r.error : "") });
              break;
            case P.RecordKind.FIFO:
              if (r.op === P.FifoOp.QUEUED) s.fifo.add(ts);
              s.fifoDepth = r.depth || 0;
              if (mine && r.key && r.delta === P.DeltaType.SYNC) remember(r.key, { ts: ts, kind: P.RecordKind.FIFO, text: "resync (" + P.DeltaType.SYNC + " delta)" });
              break;
            case P.RecordKind.LIST:
              if (!r.error) s.listItems = r.items;
              break;
            default: break;
          }
        }
        if (frame && frame.s) {
          const n = Object.keys(frame.s).length;
          if (n) s.cache.add(frame.ts || now, n);
          if (mine) applyChanges(frame.s, performance.now());
        }
      }
      schedule();
    });

    // ---- cache table rendering -------------------------------------------------------------
    const FIELDS = {
      ns: (k) => (k.includes("/") ? k.slice(0, k.indexOf("/")) : ""),
      name: (k) => k.slice(k.indexOf("/") + 1),
      key: (k) => k, rv: (k, v) => v.rv, gen: (k, v) => v.gen, phase: (k, v) => v.phase, uid: (k, v) => v.uid,
    };
    function matches(key, v) {
      for (const term of cache.filter) {
        const colon = term.indexOf(":");
        const field = colon > 0 ? FIELDS[term.slice(0, colon)] : null;
        if (field) { if (!String(field(key, v) || "").toLowerCase().includes(term.slice(colon + 1))) return false; }
        else if (term === "deleting") { if (!v.deleting) return false; }
        else if (!key.toLowerCase().includes(term) && !String(v.phase || "").toLowerCase().includes(term) && String(v.rv || "") !== term) return false;
      }
      return true;
    }

    function currentView() {
      if (!cache.filter.length) return cache.keys;
      if (cache.viewDirty || !cache.view) {
        const state = stateOf(cache.topic);
        cache.view = cache.keys.filter((k) => matches(k, state.get(k) || {}));
      }
      return cache.view;
    }

    function rowEl(i) {
      let r = pool[i];
      if (!r) {
        r = el("div", { className: "cache-row", role: "row" });
        for (let c = 0; c < 7; c++) r.appendChild(el("span"));
        pool[i] = r;
      }
      return r;
    }

    function renderCache(nowPerf) {
      if (!cache.topic) return;
      const summarising = pageRate.summarising;
      if (cache.rebuild && (!summarising || nowPerf - cache.lastRebuild > 1000)) rebuildKeys();
      if (!cache.ready && !cache.rebuild && client.topics.get(cache.topic) && client.topics.get(cache.topic).cursor) cache.ready = true;
      const view = currentView();
      cache.viewDirty = false;
      const total = cache.keys.length, shown = view.length;
      setText($("cache-count"), shown.toLocaleString());
      setText($("cache-count-label"), cache.filter.length ? "of " + total.toLocaleString() + " objects match" : "objects");
      if (spacer.style.height !== shown * ROW_H + "px") spacer.style.height = shown * ROW_H + "px";
      // A small cache gets a short table (a few rows of slack); a big one scrolls within 440 px.
      const fit = Math.min(MAX_TABLE_H, Math.max(MIN_TABLE_H, (shown + 2) * ROW_H));
      if (scroller.style.height !== fit + "px") scroller.style.height = fit + "px";
      if (cache.scrollTo) {
        const i = view.indexOf(cache.scrollTo);
        if (i >= 0) { setScrollTop(Math.max(0, i * ROW_H - scroller.clientHeight / 2)); showDetails(cache.scrollTo); cache.scrollTo = ""; }
      }
      const top = viewport.top, h = viewport.h || 400;
      const first = Math.max(0, Math.floor(top / ROW_H) - OVERSCAN);
      const last = Math.min(shown, Math.ceil((top + h) / ROW_H) + OVERSCAN);
      const state = stateOf(cache.topic);
      const want = [];
      for (let i = first; i < last; i++) {
        const key = view[i];
        const v = state.get(key) || {};
        const r = rowEl(i - first);
        const slash = key.indexOf("/");
        const cells = r.children;
        const vals = [key, slash >= 0 ? key.slice(0, slash) : "", key.slice(slash + 1), v.rv == null ? "" : v.rv, v.gen == null ? "" : v.gen, v.phase || "", v.deleting ? "deleting" : ""];
        for (let c = 0; c < 7; c++) if (cells[c].textContent !== String(vals[c])) cells[c].textContent = vals[c];
        if (r.dataset.key !== key) r.dataset.key = key;
        r.style.transform = "translateY(" + i * ROW_H + "px)";
        const until = cache.flash.get(key);
        const flashing = until !== undefined && until > nowPerf;
        if (r.classList.contains("flash") !== flashing) r.classList.toggle("flash", flashing);
        r.classList.toggle("selected", key === cache.selected);
        r.classList.toggle("deleting", !!v.deleting);
        want.push(r);
      }
      const kids = spacer.children;
      let same = kids.length === want.length;
      for (let i = 0; same && i < want.length; i++) same = kids[i] === want[i];
      if (!same) spacer.replaceChildren(...want);
      // First paint of a filled cache (ms since navigation start): what bench/ui.py and the tests report.
      if (!cache.firstPaint && want.length && cache.ready) cache.firstPaint = performance.now();
      // Forget flashes that are over (bounded work: at most one sweep every 500 ms).
      if (cache.flash.size && nowPerf - (cache.lastSweep || 0) > 500) {
        cache.lastSweep = nowPerf;
        for (const [k, until] of cache.flash) if (until <= nowPerf) cache.flash.delete(k);
      }
      const notes = [];
      if (summarising) notes.push("summarising: " + Math.round(pageRate.value).toLocaleString() + " records/s — rows do not flash, the table refreshes once a second");
      if (cache.bigChanges) notes.push(cache.bigChanges.toLocaleString() + " changes arrived in bursts (counted, not flashed)");
      setText($("cache-note"), notes.join(" · "));
      cache.rowsDirty = false;
      if (cache.selected && detailsOpen) refreshDetails();
    }

    scroller.addEventListener("scroll", () => { viewport.top = scroller.scrollTop; cache.rowsDirty = true; schedule(); }, { passive: true });
    const filterBox = $("cache-filter");
    filterBox.addEventListener("input", () => {
      cache.filter = filterBox.value.toLowerCase().split(/\s+/).filter(Boolean);
      cache.viewDirty = true; cache.view = null; setScrollTop(0); schedule();
    });

    // ---- details: the object inspector (inspect.js) plus the summary and this page's history ---
    let detailsOpen = false, detailsSig = "";
    const details = $("cache-details");
    const detailsHead = el("div", { className: "details-head" });
    const objectBox = el("div", { className: "obj", id: "cache-object" });
    const detailsInfo = el("div", { className: "details-info" });
    details.replaceChildren(detailsHead, objectBox, detailsInfo);
    const inspector = window.ctrlscopeInspect.create(objectBox, { worker: page.worker });
    function showDetails(key) {
      cache.selected = key; detailsOpen = true; detailsSig = "";
      inspector.load(cache.topic.slice(T.informer_prefix.length), key); // the only fetch: on click or deep link
      refreshDetails();
      cache.rowsDirty = true; schedule();
    }
    function refreshDetails() {
      const key = cache.selected;
      const v = stateOf(cache.topic).get(key);
      const hist = cache.history.get(key) || [];
      inspector.noteCacheRv(v === undefined ? null : v.rv);
      const sig = JSON.stringify(v) + "|" + hist.length + "|" + (hist.length ? hist[hist.length - 1].ts : 0);
      if (sig === detailsSig) return;
      detailsSig = sig;
      const badge = v === undefined ? el("span", { className: "badge bad" }, "not in the cache (deleted)")
        : v.deleting ? el("span", { className: "badge warn" }, "deleting") : "";
      // On a controller's page the object's key page under it: its story (an informer's page has no controller).
      const story = page.kind === P.ComponentKind.CONTROLLER
        ? el("a", { className: "details-story", href: U.key(page.worker, page.controller, key), title: "the key's page under this controller: its story, attempts and versions" }, "key page ↗") : "";
      detailsHead.replaceChildren(el("b", { className: "cache-details-key" }, key), " ", badge,
        el("span", { className: "spacer" }), story, el("button", { type: "button", id: "cache-details-close" }, "close"));
      detailsInfo.replaceChildren(
        el("h3", null, "cache summary"),
        el("pre", { className: "summary-json" }, v === undefined ? "—" : JSON.stringify(v, null, 2)),
        el("h3", null, "recent watch / handler history (this page's session)"),
        hist.length ? el("ul", { className: "cache-history" }, ...hist.slice().reverse().map((h) =>
          el("li", { className: "h-" + h.kind + (h.error ? " h-error" : "") }, clock(h.ts) + "  " + h.kind.padEnd(7) + " " + h.text)))
          : el("p", { className: "muted cache-history" }, "no watch events or handler calls for this key since the page opened"));
      details.hidden = false;
      // A class, not a :has() rule: :has() made the browser re-check .cache-body on every row change.
      details.parentElement.classList.add("with-details");
    }
    function closeDetails(update) {
      detailsOpen = false; cache.selected = ""; details.hidden = true; cache.rowsDirty = true;
      details.parentElement.classList.remove("with-details");
      inspector.clear();
      if (update !== false) { updateUrl(); schedule(); }
    }
    details.addEventListener("click", (e) => { if (e.target.id === "cache-details-close") closeDetails(); });
    document.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && detailsOpen && !(e.target instanceof HTMLElement && e.target.matches("input, textarea, select"))) closeDetails();
    });
    spacer.addEventListener("click", (e) => {
      const row = e.target.closest(".cache-row[data-key]");
      if (!row) return;
      showDetails(row.dataset.key);
      updateUrl();
    });
    function updateUrl() {
      const url = new URL(location.href);
      if (cache.selected) { url.searchParams.set("obj", cache.selected); url.searchParams.set("cache", informerName(cache.topic)); }
      else { url.searchParams.delete("obj"); }
      history.replaceState(null, "", url);
    }

    // ---- pipeline overview ------------------------------------------------------------------
    let overviewDirty = true, lastOverview = 0;
    function renderOverview(now) {
      const comps = stateOf(T.components);
      const me = api.controllerComponent();
      // The worker's other informers belong to other controllers; all of them until this one has said.
      const watched = api.watchedTopics();
      const informers = [];
      for (const topic of [...informerTopics.keys()].sort()) {
        const name = informerName(topic);
        if (watched && !watched.has(topic)) continue;
        const comp = comps.get(P.componentKey(P.ComponentKind.INFORMER, name)) || {};
        const s = stats(topic);
        informers.push({ name: name, state: comp.state, synced: comp.synced, fifo: comp.fifo, rv: comp.rv,
          size: stateOf(topic).size, listed: s.listItems !== null ? s.listItems : comp.listed, fifoDepth: s.fifoDepth, handlerCalls: s.handlerCalls,
          handlerErrors: s.handlerErrors, scope: comp,
          rates: { watch: s.watch.rate(now), fifo: s.fifo.rate(now), cache: s.cache.rate(now), handlers: s.handlers.rate(now) } });
      }
      if (page.kind === P.ComponentKind.INFORMER) {
        // An informer's page: its chain ends at its handlers.
        window.ctrlscopePipeline.render($("pipeline"), { informers: informers, controller: null });
        overviewDirty = false;
        return;
      }
      let busy = 0;
      for (const v of stateOf(T.queue).values()) if (v && v.s === P.QueueItemState.PROCESSING) busy += 1;
      window.ctrlscopePipeline.render($("pipeline"), { informers: informers, controller: {
        depth: ctl.depth, busy: busy, workers: me.workers, lastResult: ctl.lastResult, writes: ctl.writeCount, writeErrors: ctl.writeErrors,
        writeConflicts: ctl.writeConflicts, writesRefused: ctl.writesRefused, writesForbidden: ctl.writesForbidden,
        lastForbidden: ctl.lastForbidden,
        rates: { adds: ctl.adds.rate(now), gets: ctl.gets.rate(now), reconciles: ctl.reconciles.rate(now), errors: ctl.errors.rate(now), writes: ctl.writes.rate(now) } } });
      overviewDirty = false;
    }

    // ---- frame loop --------------------------------------------------------------------------
    const schedule = window.ctrlscopePage.scheduler(render);
    function render() {
      const nowPerf = performance.now();
      // Page-wide records/s, once a second: above SUMMARISE_RATE the page summarises and says so.
      if (nowPerf - pageRate.last >= 1000) {
        pageRate.value = pageRate.records * 1000 / (nowPerf - pageRate.last);
        pageRate.records = 0; pageRate.last = nowPerf;
        const was = pageRate.summarising;
        pageRate.summarising = pageRate.value > SUMMARISE_RATE;
        const badge = $("summarising");
        badge.hidden = !pageRate.summarising;
        badge.textContent = "summarising · " + Math.round(pageRate.value).toLocaleString() + " records/s";
        if (was !== pageRate.summarising) cache.rowsDirty = true;
      }
      renderCache(nowPerf);
      const now = workerNow();
      if (overviewDirty || now - lastOverview >= 250) { lastOverview = now; renderOverview(now); }
    }
    setInterval(schedule, 250);
    chooseInformer();
    window.ctrlscopeCache = { cache: cache, pageRate: pageRate, rowHeight: ROW_H, showDetails: showDetails, stats: infStats, ctl: ctl };
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
