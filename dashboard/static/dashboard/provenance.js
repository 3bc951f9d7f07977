/*
 * Why an attempt ran (protocol v1.7 provenance), in words: window.ctrlscopeProvenance.
 *
 * A workqueue merges the adds of a key while it waits (dedup) or while it is processed (the dirty
 * re-add), so one Reconcile may answer many causes. The publisher's observer layer records them: each
 * reconcile_start carries the triggers pending since the key's previous attempt (the last
 * 20 of them, controllers/schema.py TRIGGERS_MAX, oldest first) in `triggers`, how many there were in all in `trigger_count`,
 * and `self_triggered` when every one was an event its own controller's write caused. A trigger is
 * {kind (P.TriggerKind), ts, ...}: an event or resync also has key, type (P.ControllerEvent), source
 * (the handler that mapped it), rv, diff (the changed paths of an update, diff_more beyond them) and
 * self; a retry the result that asked for it; a requeue_after its delay.
 *
 *   Prov.known(start)            // false for an attempt from a publisher older than 1.7
 *   Prov.summary(triggers, count) // "40 triggers merged: 38 update events, 2 retries"; beyond the
 *                                 // listed ones: "25 triggers merged: 20 update events, and 5 earlier not listed"
 *   Prov.details(triggers, count) // <details>: that line, expandable to one row per trigger
 *   Prov.selfBadge()              // the "self-triggered" badge an attempt's bar and details carry
 *
 * Shared by the controller page's attempt details (timeline_panel.js) and the key page (key_page.js).
 */
(function (global) {
  "use strict";
  const P = global.ctrlscopeProtocol;
  const { el, clock } = global.ctrlscopeUI;
  const K = P.TriggerKind;
  // How a trigger reads, one and many ("update event" / "update events").
  const NOUNS = { [K.RESYNC]: ["resync", "resyncs"], [K.RETRY]: ["retry", "retries"], [K.REQUEUE_AFTER]: ["RequeueAfter", "RequeueAfters"] };
  function noun(t, n) {
    if (t.kind === K.EVENT) return (t.type || "watch") + (n === 1 ? " event" : " events");
    const w = NOUNS[t.kind] || [String(t.kind), String(t.kind)];
    return w[n === 1 ? 0 : 1];
  }
  const label = (t) => (t.kind === K.EVENT ? t.kind + ":" + (t.type || "") : String(t.kind));

  const known = (start) => !!start && Array.isArray(start.triggers);
  // An attempt's trigger_count; the listed ones when a publisher left it out.
  const countOf = (triggers, count) => (typeof count === "number" ? count : (triggers || []).length);

  function summary(triggers, count) {
    const list = Array.isArray(triggers) ? triggers : [];
    const n = countOf(list, count);
    if (!n) return "no trigger recorded: added from outside the controller's watches, or before its worker saw an event";
    const groups = new Map(); // label -> [a trigger, count], in order of first appearance
    let self = 0;
    for (const t of list) {
      const g = groups.get(label(t));
      if (g) g[1] += 1; else groups.set(label(t), [t, 1]);
      if (t.self) self += 1;
    }
    const parts = [...groups.values()].map(([t, c]) => c + " " + noun(t, c));
    // A record lists the last 20 (TRIGGERS_MAX): the earlier ones are counted, not described.
    if (n > list.length) parts.push((list.length ? "and " : "") + (n - list.length) + " earlier not listed");
    const head = n === 1 ? "1 trigger" : n + " triggers merged";
    const own = self ? " · " + (self === list.length ? (self === 1 ? "caused by" : "all caused by") : self + " caused by") + " its own writes" : "";
    return head + (parts.length ? ": " + parts.join(", ") : "") + own;
  }

  // One trigger as a row: when, what, of which object, at which resourceVersion, mapped by which
  // handler, which fields changed, and whether this controller's own write caused it.
  function row(t) {
    const bits = [el("span", { className: "tr-when" }, clock(t.ts)), el("b", { className: "tr-kind" }, noun(t, 1))];
    if (t.kind === K.EVENT || t.kind === K.RESYNC) {
      if (t.key) bits.push(el("span", { className: "tr-key" }, t.key));
      if (t.rv) bits.push(el("span", { className: "tr-rv" }, "rv " + t.rv));
      if (t.source) bits.push(el("span", { className: "tr-source muted", title: "the handler that mapped the event to this key" }, "via " + t.source));
      if (Array.isArray(t.diff) && t.diff.length) {
        bits.push(el("span", { className: "tr-diff", title: "the fields the update changed" },
          "changed " + t.diff.join(", ") + (t.diff_more ? " (+" + t.diff_more + " more)" : "")));
      }
    } else if (t.kind === K.RETRY) {
      bits.push(el("span", { className: "tr-result" }, "after " + (t.result || "a failure")));
    } else if (t.kind === K.REQUEUE_AFTER) {
      bits.push(el("span", { className: "tr-delay" }, "asked for " + t.delay + " s"));
    }
    if (t.self) bits.push(el("span", { className: "badge self-badge", title: "the event of this controller's own write (matched by the resourceVersion the API returned)" }, "own write"));
    return el("li", { className: "trigger" + (t.self ? " self" : ""), dataset: { kind: String(t.kind) } }, ...bits.flatMap((b) => [b, " "]));
  }

  function details(triggers, count) {
    const list = Array.isArray(triggers) ? triggers : [];
    const box = el("details", { className: "triggers" }, el("summary", { className: "triggers-summary" }, summary(list, count)));
    if (list.length) box.append(el("ul", { className: "trigger-list" }, ...list.map(row)));
    return box;
  }

  function selfBadge() {
    return el("span", { className: "badge self-badge", title: "every trigger of this attempt was an event caused by its own controller's write: it may be looping" }, "self-triggered");
  }

  global.ctrlscopeProvenance = { known, summary, details, row, selfBadge, countOf };
})(window);
