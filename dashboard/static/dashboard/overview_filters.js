/*
 * The overview at fleet size (window.ctrlscopeOverviewFilters): what a controller's state is, which
 * ones a search and the filters keep, and which cluster groups are collapsed.
 *
 * A platform team's overview holds 20 clusters and 200 controllers; app.js draws it grouped by cluster
 * and uses this module to decide, per controller (or plain informer, or raw watcher):
 *
 *   - its state, from the open findings its worker states about it and about the informers it
 *     watches (protocol v1.7, findings.js) and from its worker's liveness, worst first:
 *     looping (hot_loop) · failing (failing, terminal) · stuck (slow reconcile, waiting; not synced,
 *     watch silent, relist storm) · stale (its worker is stale or stopped: what is shown is its last
 *     state) · standby (not started: waiting for its lease or caches) · ok. The first three are
 *     problems: they sort a card, its worker and its cluster to the top and flag them.
 *   - whether the filters keep it: a search (every word must occur in its name, its worker's, its
 *     cluster's, its informers' or the keys of its findings, so a namespace finds the controllers
 *     with trouble there) and one cluster, one worker, one state ("problem": any of the three).
 *     The filters live in the URL's query (?q=&cluster=&worker=&state=), so a filtered view can be
 *     shared and survives a reload; parse() reads it, search() writes it.
 *   - whether a cluster group is collapsed: what a user chose is remembered per browser
 *     (localStorage, by cluster); a cluster nobody chose for is collapsed when the overview is large
 *     and it has no problem, so the first screen is the clusters in trouble.
 *
 *   const F = ctrlscopeOverviewFilters;
 *   const filters = F.parse(location.search);        // {q, cluster, worker, state}
 *   F.stateOf(findings, {stale, started})           // F.State.*
 *   F.keeps(filters, {cluster, worker, state, text}) // true / false
 *   const groups = F.collapsedStore(window.localStorage);
 *   groups.isCollapsed(key, fallback); groups.set(key, true); groups.setAll(false);
 */
(function (global) {
  "use strict";
  const P = global.ctrlscopeProtocol;
  const FK = P.FindingKind;
  const State = Object.freeze({ LOOPING: "looping", FAILING: "failing", STUCK: "stuck", STALE: "stale", STANDBY: "standby", OK: "ok" });
  const ORDER = [State.LOOPING, State.FAILING, State.STUCK, State.STALE, State.STANDBY, State.OK];
  const PROBLEMS = new Set([State.LOOPING, State.FAILING, State.STUCK]);
  const LABELS = { [State.LOOPING]: "looping", [State.FAILING]: "failing", [State.STUCK]: "stuck", [State.STALE]: "stale / stopped",
    [State.STANDBY]: "standby", [State.OK]: "healthy" };
  const PROBLEM = "problem"; // the state filter's "any problem"
  const FILTERS = ["q", "cluster", "worker", "state"];
  const STORAGE_KEY = "ctrlscope.overview.collapsed";
  const ALL = "*"; // the choice of "collapse all" / "expand all", for every group not chosen since

  const rank = (state) => { const i = ORDER.indexOf(state); return i < 0 ? ORDER.length : i; };
  const isProblem = (state) => PROBLEMS.has(state);
  // The order cards, workers and clusters are sorted in: problems by how bad, everything else alike
  // (then by name), so a stale or standby worker does not jump over a healthy one.
  const sortRank = (state) => (isProblem(state) ? rank(state) : PROBLEMS.size);

  function findingState(f) {
    if (f.finding === FK.HOT_LOOP) return State.LOOPING;
    if (f.finding === FK.FAILING || f.finding === FK.TERMINAL) return State.FAILING;
    return State.STUCK;
  }

  // A component's state from its open findings (and those of the informers it watches) and its
  // worker's liveness; `started` is a controller's (false: standby), undefined for the others.
  function stateOf(findings, opts) {
    if (opts && opts.stale) return State.STALE;
    let worst = null;
    for (const f of findings || []) {
      const s = findingState(f);
      if (worst === null || rank(s) < rank(worst)) worst = s;
    }
    if (worst !== null) return worst;
    return opts && opts.started === false ? State.STANDBY : State.OK;
  }

  // The filters in a query string; unknown states are dropped (a stale link shows everything).
  function parse(search) {
    const q = new URLSearchParams(search || "");
    const f = {};
    for (const name of FILTERS) f[name] = (q.get(name) || "").trim();
    if (f.state && f.state !== PROBLEM && !ORDER.includes(f.state)) f.state = "";
    return f;
  }
  // The query string for these filters ("" when none), other parameters of `search` kept.
  function search(filters, current) {
    const q = new URLSearchParams(current || "");
    for (const name of FILTERS) { if (filters[name]) q.set(name, filters[name]); else q.delete(name); }
    const s = q.toString();
    return s ? "?" + s : "";
  }
  const active = (f) => FILTERS.some((name) => !!f[name]);
  const words = (q) => (q || "").toLowerCase().split(/\s+/).filter(Boolean);

  // Whether the filters keep an item {cluster, worker, state, text} (text: lower case, its searchable words).
  function keeps(f, item) {
    if (f.cluster && item.cluster !== f.cluster) return false;
    if (f.worker && item.worker !== f.worker) return false;
    if (f.state && (f.state === PROBLEM ? !isProblem(item.state) : item.state !== f.state)) return false;
    for (const w of words(f.q)) if (!item.text.includes(w)) return false;
    return true;
  }

  // Collapsed groups by cluster key, remembered in `storage` (localStorage); a storage that throws
  // (disabled, full, private mode) only makes the choice last until the page is left.
  function collapsedStore(storage) {
    let chosen = {};
    try { chosen = JSON.parse((storage && storage.getItem(STORAGE_KEY)) || "{}") || {}; } catch (err) { chosen = {}; }
    if (typeof chosen !== "object" || Array.isArray(chosen)) chosen = {};
    const save = () => { try { if (storage) storage.setItem(STORAGE_KEY, JSON.stringify(chosen)); } catch (err) { /* kept in memory */ } };
    return {
      isCollapsed: (key, fallback) => (typeof chosen[key] === "boolean" ? chosen[key] : typeof chosen[ALL] === "boolean" ? chosen[ALL] : fallback),
      chose: (key) => typeof chosen[key] === "boolean",
      set(key, value) { chosen[key] = !!value; save(); },
      // "collapse all" / "expand all": every group, including those that appear later.
      setAll(value) { chosen = { [ALL]: !!value }; save(); },
    };
  }

  global.ctrlscopeOverviewFilters = { State, ORDER, LABELS, PROBLEM, FILTERS, STORAGE_KEY, rank, sortRank, isProblem, stateOf, parse,
    search, active, words, keeps, collapsedStore };
})(window);
