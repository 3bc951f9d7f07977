/*
 * Findings (protocol v1.7): what a publisher states is stuck or sick, as badges and lines
 * (window.ctrlscopeFindings). The publisher's observer layer decides -- a key looping on its own
 * writes (hot_loop), failing attempt after attempt, ended by a terminal error, reconciling too long,
 * waiting too long for a worker; an informer not synced, its watch silent, relisting too often -- and
 * says so twice: a `finding` record on the controller's (or informer's) topic when it opens, changes
 * and closes, with a `detail` object, and the open ones in its component entry's `findings`
 * ({"{finding}/{subject}": {finding, subject, since, count, message}}), which the overview reads
 * without subscribing to any topic. Pages only show them.
 *
 *   F.open(component)          // the component's open findings, worst first
 *   F.forKey(component, key)   // a controller's open findings about one key
 *   F.badge(f)                 // "hot loop ×12" (its message on hover)
 *   F.detailText(f)            // a finding record's detail in words: rate, changing fields, advice, …
 *   F.fold(map, record)        // keep a topic's open findings by "{finding}/{subject}" from its records
 */
(function (global) {
  "use strict";
  const P = global.ctrlscopeProtocol;
  const { el, fmtDuration } = global.ctrlscopeUI;
  const FK = P.FindingKind;
  // Worst first: a loop burns the API server, a failing key never converges, a terminal one gave up;
  // then what is slow or stuck, then the informers' troubles.
  const ORDER = [FK.HOT_LOOP, FK.FAILING, FK.TERMINAL, FK.SLOW_RECONCILE, FK.WAITING, FK.NOT_SYNCED, FK.WATCH_SILENT, FK.RELIST_STORM];
  const NAMES = {
    [FK.HOT_LOOP]: "hot loop", [FK.FAILING]: "failing", [FK.TERMINAL]: "terminal error", [FK.SLOW_RECONCILE]: "slow reconcile",
    [FK.WAITING]: "waiting", [FK.NOT_SYNCED]: "not synced", [FK.WATCH_SILENT]: "watch silent", [FK.RELIST_STORM]: "relist storm",
  };
  const name = (kind) => NAMES[kind] || String(kind);
  const rank = (f) => { const i = ORDER.indexOf(f.finding); return i < 0 ? ORDER.length : i; };
  const worstFirst = (a, b) => rank(a) - rank(b) || (a.since || 0) - (b.since || 0);

  function open(component) {
    const map = component && component.findings;
    if (!map || typeof map !== "object") return [];
    return Object.values(map).filter((f) => f && typeof f === "object").sort(worstFirst);
  }
  const isKeyFinding = (f) => P.KEY_FINDINGS.has(f.finding);
  const forKey = (component, key) => open(component).filter((f) => isKeyFinding(f) && f.subject === key);

  // Counted findings say how many: consecutive self-triggered or failed attempts, relists in the window.
  const COUNTED = new Set([FK.HOT_LOOP, FK.FAILING, FK.RELIST_STORM]);
  function badge(f) {
    const text = name(f.finding) + (COUNTED.has(f.finding) && f.count > 1 ? " ×" + f.count : "");
    return el("span", { className: "badge finding finding-" + f.finding, title: f.message || text, dataset: { finding: String(f.finding), subject: String(f.subject) } }, text);
  }

  const seconds = (s) => fmtDuration(Number(s) * 1000);
  // A finding record's detail in words, one part per field the rule gives it.
  function detailText(f) {
    const d = (f && f.detail) || {};
    const parts = [];
    if (f.finding === FK.HOT_LOOP) {
      if (typeof d.rate === "number") parts.push(d.rate.toFixed(d.rate < 10 ? 1 : 0) + " attempts/s");
      if (Array.isArray(d.fields) && d.fields.length) parts.push("changing: " + d.fields.join(", ") + (d.status_only ? " (status only)" : ""));
      if (d.advice) parts.push(d.advice);
    } else if (f.finding === FK.FAILING) {
      if (typeof d.since_first_failure_s === "number") parts.push("failing for " + seconds(d.since_first_failure_s));
      if (typeof d.next_delay === "number") parts.push("next retry in " + seconds(d.next_delay));
      if (typeof d.max_delay === "number") parts.push("the rate limiter's cap: " + seconds(d.max_delay));
      if (d.last_error) parts.push("last error: " + d.last_error);
    } else {
      for (const k in d) if (d[k] !== null && typeof d[k] !== "object") parts.push(k.replace(/_/g, " ") + ": " + d[k]);
    }
    return parts.join(" · ");
  }

  // A topic's findings by "{finding}/{subject}" as its records open, update and close them.
  function fold(map, r) {
    if (!r || r.k !== P.RecordKind.FINDING) return false;
    const id = r.finding + "/" + r.subject;
    if (r.open) map.set(id, r); else map.delete(id);
    return true;
  }

  global.ctrlscopeFindings = { open, forKey, isKeyFinding, badge, detailText, fold, name, worstFirst };
})(window);
