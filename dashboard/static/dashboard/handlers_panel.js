/*
 * The controller page's Handlers: for a framework that runs several named handlers per object and
 * retries each on its own schedule (kopf), one row per (key, handler) — its cause, where it is
 * (HandlerProgress, as a badge), how often it failed, when the framework runs it again and its last
 * error. Failed and retrying handlers first: they are why an object has not converged.
 *
 * Data: the controller topic's state only (w/{worker}/controller/{ctl}: key → {..., handlers: {id →
 * {state, retries, at, next_at, cause, error}}}, folded by the publisher as controllers/schema.py
 * fold_handler_record says, from its reconcile and progress records). Hidden while no key has
 * handlers. The countdown runs against the page's estimate of the worker's clock (workerNow), like
 * the workqueue's "ready in". With a focused key only its handlers are listed. Registered in
 * window.ctrlscopePanels, started by controller_page.js.
 */
(function () {
  "use strict";
  const { el, fmtDuration } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);
  const MAX_ROWS = 200;
  const ORDER = {
    [P.HandlerProgress.FAILED]: 0, [P.HandlerProgress.RETRYING]: 1, [P.HandlerProgress.RUNNING]: 2,
    [P.HandlerProgress.PENDING]: 3, [P.HandlerProgress.SUCCEEDED]: 4,
  };
  const rank = (state) => (state in ORDER ? ORDER[state] : 2.5); // a state this page does not know: mid-list

  function init(api) {
    const { client, topics: T, stateOf } = api;
    let dirty = true;
    client.on("snapshot", (topic) => { if (topic === T.controller) dirty = true; });
    client.on("records", (topic, records, id, frame) => { if (topic === T.controller && frame && frame.s) dirty = true; });
    api.onFocus(() => { dirty = true; });

    function rows() {
      const out = [];
      for (const [key, v] of stateOf(T.controller)) {
        const hs = v && v.handlers;
        if (!hs || typeof hs !== "object") continue;
        for (const id in hs) if (hs[id]) out.push({ key: key, handler: id, h: hs[id] });
      }
      out.sort((a, b) => rank(a.h.state) - rank(b.h.state) || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0) ||
        (a.handler < b.handler ? -1 : a.handler > b.handler ? 1 : 0));
      return out;
    }

    function row(r) {
      const h = r.h;
      const state = String(h.state || "");
      const next = el("td", { className: "countdown" });
      if (state === P.HandlerProgress.RETRYING && typeof h.next_at === "number") next.dataset.next = String(h.next_at);
      const tr = el("tr", { dataset: { key: r.key, handler: r.handler, state: state } },
        el("td", { className: "key" }, el("a", { className: "key-link", href: window.ctrlscopeUrl.key(api.page.worker, api.page.controller, r.key) }, r.key)),
        el("td", { className: "handler" }, r.handler),
        el("td", { className: "cause" }, h.cause || ""),
        el("td", null, el("span", { className: "badge progress progress-" + state }, state || "?")),
        el("td", { className: "num retries" }, h.retries || 0), next,
        el("td", { className: "error", title: h.error || "" }, h.error || ""));
      if (r.key === api.focusKey()) tr.classList.add("focus");
      return tr;
    }

    function render() {
      const all = rows();
      $("handlers-panel").hidden = !all.length;
      const focus = api.focusKey();
      const list = focus ? all.filter((r) => r.key === focus) : all;
      const trs = list.slice(0, MAX_ROWS).map(row);
      if (list.length > MAX_ROWS) trs.push(el("tr", { className: "more" }, el("td", { colSpan: 7 }, "+" + (list.length - MAX_ROWS) + " more")));
      if (!list.length) trs.push(el("tr", { className: "empty" }, el("td", { colSpan: 7, className: "muted" }, "no handlers for key " + focus)));
      $("handlers").replaceChildren(...trs);
      const waiting = all.filter((r) => r.h.state === P.HandlerProgress.FAILED || r.h.state === P.HandlerProgress.RETRYING).length;
      $("handlers-note").textContent = "· " + all.length + " handler" + (all.length === 1 ? "" : "s") +
        (waiting ? ", " + waiting + " failed or retrying" : "") + (focus ? " · showing key " + focus : "");
      dirty = false;
    }

    function tick(now) {
      for (const td of document.querySelectorAll("#handlers td.countdown[data-next]")) {
        const left = Number(td.dataset.next) - now;
        td.textContent = left > 0 ? fmtDuration(left) : "due";
        td.classList.toggle("due", left <= 0);
      }
    }

    api.onRender((now) => { if (dirty) render(); tick(now); });
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
