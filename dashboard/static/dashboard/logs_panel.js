/*
 * The controller page's Logs: the lines the controller logged about its objects (v1.1 `log` records
 * of w/{worker}/controller/{ctl}: key, level, message, and the handler it came from when known),
 * newest first. The panel stays hidden until the first line arrives: most controllers publish none.
 *
 * Bounded: the newest MAX_LOGS lines are kept (and drawn); older ones are counted, not kept. With a
 * focused key only its lines are drawn. api.logs.during(key, handler, start, end) gives the timeline's
 * attempt details the lines of one attempt. Registered in window.ctrlscopePanels, started by
 * controller_page.js.
 */
(function () {
  "use strict";
  const { el, clock } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);
  const MAX_LOGS = 500;
  const SLACK_MS = 100; // an attempt's start is its end minus its duration: the clocks round

  function init(api) {
    const { client, topics: T, schedule } = api;
    const logs = []; // oldest first, at most MAX_LOGS
    let fresh = [];  // arrived since the last render, oldest first
    let forgotten = 0;
    let rebuild = false;
    let seq = 0;

    client.on("records", (topic, records) => {
      if (topic !== T.controller) return;
      let any = false;
      for (const r of records) {
        if (r.k !== P.RecordKind.LOG) continue;
        const line = { id: ++seq, ts: r.ts || api.workerNow(), key: String(r.key || ""), level: String(r.level || ""),
          handler: r.handler ? String(r.handler) : "", message: String(r.message === undefined ? "" : r.message) };
        logs.push(line);
        fresh.push(line);
        any = true;
      }
      if (!any) return;
      if (logs.length > MAX_LOGS) { forgotten += logs.length - MAX_LOGS; logs.splice(0, logs.length - MAX_LOGS); }
      if (fresh.length > MAX_LOGS) fresh.splice(0, fresh.length - MAX_LOGS);
      schedule();
    });
    api.onFocus(() => { rebuild = true; });
    api.logs = { during: during };
    window.ctrlscope.logs = logs;

    // The lines about `key` logged while one attempt ran (by `handler`, when both name one).
    function during(key, handler, start, end) {
      return logs.filter((l) => l.key === key && l.ts >= start - SLACK_MS && l.ts <= end + SLACK_MS &&
        !(handler && l.handler && l.handler !== handler));
    }

    function row(l) {
      return el("tr", { className: "log lvl-" + l.level, dataset: { key: l.key, level: l.level } },
        el("td", { className: "time" }, clock(l.ts)),
        el("td", { className: "key" }, l.key ? el("a", { className: "key-link", href: window.ctrlscopeUrl.key(api.page.worker, api.page.controller, l.key) }, l.key) : ""),
        el("td", null, el("span", { className: "badge level lvl-" + l.level }, l.level)),
        el("td", { className: "handler" }, l.handler), el("td", { className: "message", title: l.message }, l.message));
    }

    const body = $("logs");
    api.onRender(() => {
      if (!fresh.length && !rebuild) return;
      $("logs-panel").hidden = !logs.length;
      const focus = api.focusKey();
      const shown = (l) => !focus || l.key === focus;
      if (rebuild) {
        body.replaceChildren(...logs.filter(shown).reverse().map(row));
      } else {
        const rows = fresh.filter(shown).reverse().map(row);
        body.prepend(...rows);
        while (body.children.length > MAX_LOGS) body.lastChild.remove();
      }
      fresh = [];
      rebuild = false;
      const drawn = body.children.length;
      $("logs-note").textContent = (focus ? drawn + " of " + logs.length + " lines (key " + focus + ")" : logs.length + " lines") +
        (forgotten ? " · " + forgotten.toLocaleString() + " older lines not kept" : "");
    });
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
