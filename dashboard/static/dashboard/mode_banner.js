/*
 * The controller page's mode banner: how this controller is observed, when its component says
 * (w/{worker}/components, key controller/{name}: v1.1 `mode` (ObservationMode) and `unseen`, the
 * sentences saying what that mode cannot see). In-process, the operator itself publishes every
 * handler call, log line and queue step; zero-code, ctrlscope rebuilds the handlers' progress from
 * what the operator stores on its objects, and the page says what is missing from that picture.
 * Hidden for a controller that reports no mode (ctrlscope's runtime, client-go, controller-runtime).
 * Registered in window.ctrlscopePanels, started by controller_page.js.
 */
(function () {
  "use strict";
  const { el } = window.ctrlscopeUI;
  const P = window.ctrlscopeProtocol;
  const SAYS = {
    [P.ObservationMode.IN_PROCESS]: "published from inside the operator",
    [P.ObservationMode.ZERO_CODE]: "reconstructed from the objects' stored progress",
  };

  function init(api) {
    const box = document.getElementById("mode");
    let shown = "";
    api.onComponents(() => {
      const ctl = api.controllerComponent();
      const mode = typeof ctl.mode === "string" ? ctl.mode : "";
      const unseen = Array.isArray(ctl.unseen) ? ctl.unseen.map(String) : [];
      const sig = JSON.stringify([mode, unseen]);
      if (sig === shown) return;
      shown = sig;
      box.hidden = !mode;
      box.dataset.mode = mode;
      if (!mode) { box.replaceChildren(); return; }
      const parts = [el("span", { className: "badge mode-badge" }, mode), " ",
        el("span", { className: "mode-says" }, SAYS[mode] || "observed in a way this dashboard does not know")];
      if (unseen.length) {
        parts.push(el("div", { className: "mode-unseen" }, el("span", { className: "muted" }, "cannot see:"),
          el("ul", null, ...unseen.map((s) => el("li", null, s)))));
      }
      box.replaceChildren(...parts);
    });
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
