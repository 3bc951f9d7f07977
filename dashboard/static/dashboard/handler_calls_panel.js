/*
 * An informer's page: its Handlers, one row per event handler registered on it (a client-go
 * program's "print", a controller's "controller/podset (For)", ...): how often it was called for
 * adds, updates and deletes, how many calls failed (informer handlers are never retried: a failed
 * call's effect is lost), its mean and longest call, when it was last called and its last error.
 * The handler that failed most recently comes first, then the most called.
 *
 * Data: the informer topic's handler records, from the history the page loads with the snapshot
 * (snapshot.json?history=) and live. The counts are of what the page has seen, and the note says
 * since when; the informer's total (the stages sample) is the Handlers stage of its pipeline.
 * Registered in window.ctrlscopePanels, started by controller_page.js.
 */
(function () {
  "use strict";
  const { el, fmtDuration, clock } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);
  // A handler call is often microseconds: "0 ms" would say nothing.
  const callTime = (seconds) => (seconds < 0.001 ? Math.round(seconds * 1e6) + " µs" : fmtDuration(seconds * 1000));

  function init(api) {
    const { client, topics: T } = api;
    const handlers = new Map(); // handler name -> its counts
    let since = 0; // ts of the first handler record seen
    let dirty = false;

    client.on("records", (topic, records) => {
      if (topic !== T.informer) return;
      for (const r of records) {
        if (r.k !== P.RecordKind.HANDLER) continue;
        let h = handlers.get(r.handler);
        if (!h) {
          h = { name: String(r.handler), calls: 0, errors: 0, seconds: 0, max: 0, last: 0, lastErrorAt: 0, lastError: "",
            byEvent: { [P.HandlerEvent.ADD]: 0, [P.HandlerEvent.UPDATE]: 0, [P.HandlerEvent.DELETE]: 0 } };
          handlers.set(r.handler, h);
        }
        h.calls += 1;
        if (r.event in h.byEvent) h.byEvent[r.event] += 1;
        const d = typeof r.duration === "number" ? r.duration : 0;
        h.seconds += d;
        h.max = Math.max(h.max, d);
        h.last = Math.max(h.last, r.ts || 0);
        if (!since || (r.ts && r.ts < since)) since = r.ts || since;
        if (r.outcome === P.HandlerOutcome.ERROR) {
          h.errors += 1;
          h.lastErrorAt = r.ts || 0;
          h.lastError = (r.key ? r.key + ": " : "") + (r.error || "");
        }
        dirty = true;
      }
    });

    function row(h) {
      return el("tr", { dataset: { handler: h.name } },
        el("td", { className: "handler" }, h.name),
        el("td", { className: "num", dataset: { event: P.HandlerEvent.ADD } }, h.byEvent[P.HandlerEvent.ADD].toLocaleString()),
        el("td", { className: "num", dataset: { event: P.HandlerEvent.UPDATE } }, h.byEvent[P.HandlerEvent.UPDATE].toLocaleString()),
        el("td", { className: "num", dataset: { event: P.HandlerEvent.DELETE } }, h.byEvent[P.HandlerEvent.DELETE].toLocaleString()),
        el("td", { className: "num errors" + (h.errors ? " bad" : "") }, h.errors.toLocaleString()),
        el("td", { className: "num" }, callTime(h.seconds / h.calls)),
        el("td", { className: "num" }, callTime(h.max)),
        el("td", null, h.last ? clock(h.last) : ""),
        el("td", { className: "error", title: h.lastError }, h.lastError));
    }

    api.onRender(() => {
      if (!dirty) return;
      dirty = false;
      const list = [...handlers.values()].sort((a, b) => b.lastErrorAt - a.lastErrorAt || b.calls - a.calls || (a.name < b.name ? -1 : 1));
      $("handler-calls").replaceChildren(...list.map(row));
      const calls = list.reduce((n, h) => n + h.calls, 0);
      $("handler-calls-note").textContent = calls.toLocaleString() + " call" + (calls === 1 ? "" : "s") + " of " + list.length +
        " handler" + (list.length === 1 ? "" : "s") + " seen since " + clock(since) + " UTC";
    });
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
