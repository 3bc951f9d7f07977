/*
 * A controller drawn as its pipeline — Reflector → FIFO → Cache → Handlers (one chain per informer it
 * watches) → WorkQueue → Workers → Reconcile → API writes — with a live rate per stage, the state
 * badges (listing / watching / backing off / relisting; synced) and, until an informer has synced,
 * the initial sync as progress (objects cached / items listed).
 *
 * Shared by the controller page (cache.js feeds it rates measured from every record) and the overview
 * (app.js feeds it rates from the worker's once-a-second stage counters). Both hand render() the same
 * model:
 *   { informers: [{ name, state, synced, fifo, rv, size, listed, fifoDepth, handlerCalls, handlerErrors,
 *                   scope, rates: { watch, fifo, cache, handlers } }],
 *     controller: { depth, busy, workers, lastResult, writes, writeErrors, writeConflicts, writesRefused,
 *                   writesForbidden, lastForbidden, rates: { adds, gets, reconciles, errors, writes } } }
 * renderWatcher(box, model) draws a raw watch loop (protocol v1.6 watcher) the same way: Watch → no
 * cache → a GET per event (its model is described above the function).
 * `controller` is null for an informer no controller watches (a plain informer with handlers, on the
 * overview's card of its own and on its page): its chain ends at the Handlers stage.
 * `writes` are the writes sent to the API server and `writeErrors` those that failed there;
 * `writesRefused` (protocol v1.4) are writes the worker refused itself (it is read-only) and never
 * sent: shown apart, as "refused: read-only", never as failed. `writesForbidden` (of the failed, those
 * the server answered 403) and `lastForbidden` (the last one's { method, path }) come from the write
 * records, so only the controller page has them: a permission error says what was forbidden.
 * A rate that is not known (no samples yet) is null and shows as "–". `scope` is the informer's
 * component (or any object with its v1.3 InformerScope fields): what narrows it shows as badges on
 * the Reflector ("selector app=web", "metadata only") and the Cache ("transform: strip managedFields").
 */
(function (global) {
  "use strict";
  const { el } = global.ctrlscopeUI;
  const P = global.ctrlscopeProtocol;
  const STATE_LABEL = { [P.ReflectorState.BACKING_OFF]: "backing off" };
  // One number format for every count: toLocaleString() sets a formatter up on each call, which the
  // overview's 200 pipelines made one of its costliest lines.
  const num = ((nf) => (n) => nf.format(n))(new Intl.NumberFormat());
  // An informer component's reflector state; "starting" (not a protocol state) until it reports one.
  const reflectorState = (inf) => inf.state || (inf.synced ? P.ReflectorState.WATCHING : "starting");

  function fmtRate(r) {
    if (r === null || r === undefined || Number.isNaN(r)) return "–";
    if (r >= 10000) return Math.round(r / 1000) + "k/s";
    if (r >= 100) return num(Math.round(r)) + "/s";
    if (r >= 10) return r.toFixed(0) + "/s";
    return r ? r.toFixed(1) + "/s" : "0/s";
  }

  // v1.3 InformerScope: each field that narrows an informer, as the badge text people read.
  const SCOPE_TEXT = {
    namespace: (v) => "namespace " + v,
    label_selector: (v) => "selector " + v,
    field_selector: (v) => "fields " + v,
    metadata_only: () => "metadata only",
    transform: (v) => "transform: " + v,
  };
  const SCOPE_HELP = {
    namespace: "lists and watches this namespace only",
    label_selector: "the server sends only objects whose labels match: one that stops matching leaves as DELETED",
    field_selector: "the server sends only objects whose fields match",
    metadata_only: "the cache holds PartialObjectMetadata: names, labels, owners, finalizers; no spec, status or data",
    transform: "applied to every object before it is cached: handlers never see what it removes",
  };
  function scopeBadges(scope, fields) {
    return fields.filter((f) => scope && scope[f] !== undefined && scope[f] !== null && scope[f] !== false && scope[f] !== "")
      .map((f) => el("span", { className: "badge scope", dataset: { scope: f }, title: SCOPE_HELP[f] }, SCOPE_TEXT[f](scope[f])));
  }
  const READ_SCOPE = P.INFORMER_SCOPE_FIELDS.filter((f) => f !== "transform");

  function stage(name, label, value, rate, title, ...extra) {
    return el("div", { className: "stage", dataset: { stage: name }, title: title || "" },
      el("div", { className: "stage-name" }, label),
      el("div", { className: "stage-value" }, value),
      el("div", { className: "rate" }, fmtRate(rate)), ...extra);
  }
  const arrow = () => el("span", { className: "arrow", "aria-hidden": "true" }, "→");
  const count = (n, word) => num(n || 0) + " " + word + (n === 1 ? "" : "s");
  const errors = (n, what) => (n ? el("div", { className: "stage-err" }, num(n) + " " + what) : null);
  const CONFLICT_HELP = "409 Conflict: the write carried an old resourceVersion, because the object changed " +
    "after the informer cache that the Reconcile read from was updated (optimistic concurrency). The " +
    "Reconcile returns the error and its key is retried with backoff, by then against a fresher cache. " +
    "This is normal for controllers that read from an informer.";
  function writeErrors(c) {
    if (!c.writeErrors) return null;
    const conflicts = c.writeConflicts || 0;
    return el("div", { className: "stage-err", title: conflicts ? CONFLICT_HELP : "" },
      num(c.writeErrors) + " failed" + (conflicts ? " (" + num(conflicts) + " × 409 conflict)" : ""));
  }

  // What a write asked the server for, in RBAC's terms: the verb, the resource (group and
  // subresource included, as a Role names them) and the namespace, from the write record's method and path.
  const VERBS = { POST: "create", PUT: "update", PATCH: "patch", DELETE: "delete" };
  function writeRequest(method, path) {
    const parts = String(path || "").split("?")[0].split("/").filter(Boolean);
    const group = parts[0] === "apis" ? parts[1] : "";
    let rest = parts.slice(parts[0] === "apis" ? 3 : 2);
    let namespace = "";
    if (rest[0] === "namespaces" && rest.length > 2) { namespace = rest[1]; rest = rest.slice(2); }
    const resource = (rest[0] || "?") + (group ? "." + group : "") + (rest[2] ? "/" + rest[2] : "");
    const verb = method === "DELETE" && rest.length === 1 ? "deletecollection" : VERBS[method] || String(method).toLowerCase();
    return verb + " " + resource + (namespace ? " in namespace " + namespace : "");
  }
  const FORBIDDEN_HELP = "403 Forbidden: the API server refused these writes. Either its authorizer (RBAC) has " +
    "no rule letting the worker's identity do this -- grant the verb on the resource in the Role or ClusterRole " +
    "bound to it, or run the worker read-only -- or an admission plugin refused it (a ResourceQuota, a policy). " +
    "The Reconcile's error (click its attempt on the timeline) has the server's message, which says which.";
  function writesForbidden(c) {
    if (!c.writesForbidden) return null;
    const what = c.lastForbidden ? ": " + writeRequest(c.lastForbidden.method, c.lastForbidden.path) : "";
    return el("div", { className: "stage-err stage-forbidden", title: FORBIDDEN_HELP },
      num(c.writesForbidden) + " × 403 forbidden" + what);
  }

  const REFUSED_HELP = "Writes this worker refused itself, before sending them: it only observes this cluster " +
    "(read-only). They never reached the API server, so they are neither API writes nor failed ones; the " +
    "Reconcile that made one ends terminal (retrying cannot make the worker writable). Start the worker " +
    "with --allow-writes to let its controllers write.";
  function writesRefused(c) {
    if (!c.writesRefused) return null;
    return el("div", { className: "stage-refused", title: REFUSED_HELP },
      num(c.writesRefused) + " refused: " + P.WriteRefusal.READ_ONLY);
  }

  function informerChain(inf) {
    const st = reflectorState(inf);
    const badges = [el("span", { className: "badge st-" + st }, STATE_LABEL[st] || st),
      ...scopeBadges(inf.scope, READ_SCOPE)];
    let progress = null;
    if (inf.synced) badges.push(el("span", { className: "badge ok" }, "synced"));
    else {
      const total = inf.listed, size = Math.min(inf.size || 0, total || Infinity);
      progress = el("div", { className: "sync-progress" },
        el("progress", total ? { max: total, value: size } : {}),
        el("span", { className: "muted" }, total ? "initial sync " + num(size) + " / " + num(total) : "initial sync…"));
    }
    const r = inf.rates || {};
    return el("div", { className: "chain informer-chain", dataset: { informer: inf.name } },
      stage("reflector", "Reflector", inf.name, r.watch, "watch events/s · rv " + (inf.rv || "?"), el("div", { className: "badges" }, ...badges), progress),
      arrow(),
      stage("fifo", "FIFO", inf.fifo || "?", r.fifo, "deltas queued/s · depth " + (inf.fifoDepth || 0), el("div", { className: "muted stage-sub" }, "depth " + (inf.fifoDepth || 0))),
      arrow(),
      stage("cache", "Cache", count(inf.size, "object"), r.cache, "cache writes/s",
        ...scopeBadges(inf.scope, ["transform"])),
      arrow(),
      stage("handlers", "Handlers", count(inf.handlerCalls, "call"), r.handlers, "handler calls/s",
        errors(inf.handlerErrors, "errors")));
  }

  // Replaces box's children with the pipeline of `model` (see the top of this file).
  function render(box, model) {
    const chains = model.informers.map(informerChain);
    if (!chains.length) chains.push(el("span", { className: "muted" }, "no informers reported yet"));
    if (!model.controller) {
      box.replaceChildren(el("div", { className: "chains" }, ...chains));
      return;
    }
    const c = model.controller, r = c.rates || {};
    const failing = r.errors ? el("div", { className: "stage-err" }, fmtRate(r.errors) + " failing") : null;
    const tail = el("div", { className: "chain controller-chain" },
      arrow(),
      stage("workqueue", "WorkQueue", "depth " + (c.depth || 0), r.adds, "adds/s (incl. deduplicated and rate-limited)"),
      arrow(),
      stage("workers", "Workers", (c.busy || 0) + (c.workers ? " / " + c.workers : "") + " busy", r.gets, "keys taken by workers/s"),
      arrow(),
      stage("reconcile", "Reconcile", c.lastResult || "—", r.reconciles, "reconciles/s", failing),
      arrow(),
      stage("writes", "API writes", count(c.writes, "write"), r.writes,
        "POST/PUT/PATCH/DELETE requests made from Reconcile and sent, per second", writeErrors(c), writesForbidden(c),
        writesRefused(c)));
    box.replaceChildren(el("div", { className: "chains" }, ...chains), tail);
  }

  // v1.6: a raw watch loop (a program's own Watch in a loop): Watch → no cache → a GET per event.
  // model: { name, variant, state, since, lastEnd, counts: {watch, watch_starts, watch_ends, expired,
  // reads, read_errors}, rates: {watch, reads}, now } (now: wall ms, for "stopped 12 s ago").
  const VARIANT_HELP = {
    [P.WatcherVariant.STOPS_ON_END]: "its loop returns when the server ends the watch (every watch ends: the server's timeout); the program runs on and watches nothing",
    [P.WatcherVariant.RESTART_FROM_EMPTY]: "watches again from resourceVersion \"\": every object arrives as ADDED again, deletes made meanwhile are never seen",
    [P.WatcherVariant.RESTART_FROM_LAST]: "watches again from the last resourceVersion it saw; 410 Expired is retried like any error, forever",
  };
  function watcherChain(w) {
    const c = w.counts || {}, r = w.rates || {};
    const stopped = w.state === P.ReflectorState.STOPPED;
    const state = w.state || "starting";
    const badges = [el("span", { className: "badge st-" + state + (stopped ? " bad" : "") }, state)];
    if (w.variant) badges.push(el("span", { className: "badge variant", dataset: { variant: w.variant }, title: VARIANT_HELP[w.variant] || "" }, w.variant));
    let note = null;
    if (stopped) {
      const ago = w.since && w.now ? " " + global.ctrlscopeUI.fmtDuration(Math.max(0, w.now - w.since)) + " ago" : "";
      note = el("div", { className: "stage-err watcher-stopped", title: "the loop returned or raised: nothing watches any more. " +
        "Its program does not know: only the dashboard, which saw the loop end, says so" },
        "not watching since" + ago + (w.lastEnd ? " (last stream: " + w.lastEnd + ")" : ""));
    }
    const ends = (c.watch_ends || 0) ? el("div", { className: "muted stage-sub" }, count(c.watch_starts, "watch") + " opened, " +
      num(c.watch_ends || 0) + " ended" + (c.expired ? " (" + num(c.expired) + " × 410)" : "")) : null;
    return el("div", { className: "chain watcher-chain", dataset: { watcher: w.name } },
      stage("watch", "Watch", w.resource || w.name, r.watch, "watch events/s", el("div", { className: "badges" }, ...badges), ends, note),
      arrow(),
      stage("nocache", "Cache", "none", null, "a raw watch loop keeps nothing: to act on an object it asks the API server again",
        el("div", { className: "muted stage-sub" }, count(c.watch, "event") + ", none kept")),
      arrow(),
      stage("reads", "API reads", count(c.reads, "GET"), r.reads, "GETs to the API server per second: one per event, what an informer's handler reads from its cache",
        errors(c.read_errors, "failed")));
  }
  function renderWatcher(box, model) {
    box.replaceChildren(el("div", { className: "chains" }, watcherChain(model)));
  }

  global.ctrlscopePipeline = { render, renderWatcher, reflectorState, writeRequest, fmtRate, num };
})(window);
