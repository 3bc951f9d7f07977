/*
 * The Faults panel (templates/dashboard/_faults.html), on the cluster page and, folded, on every
 * controller page.
 *
 * What it shows comes from the `cluster/faults` topic the simulator (or a fault proxy in front of a
 * real cluster) publishes (FaultTelemetry): the state's `rules` (active error and latency rules, a
 * paused kubelet) and `simulator` (its URL, whether it runs, its `backend`), and one record per
 * fault, kept as the fault log (the newest MAX_LOG). What it does goes through
 * POST /cluster/faults/<action> (operators only; the server checks, the page only disables the
 * controls for others). GET /cluster/faults/status says first whether the configured cluster is a
 * simulator or a fault proxy at all -- when it is neither, the panel says so and offers no buttons
 * -- and which actions it cannot do (`disabled`), which stay disabled with the reason on hover.
 *
 * Registered in window.ctrlscopePanels: the page's script (controller_page.js, cluster.js) owns the
 * TelemetryClient and starts the panels before the socket opens, so no message is missed.
 * window.ctrlscopeFaults.describe(record) is the one sentence per fault that the log and the
 * informer events' markers (fault_markers.js) both use.
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const P = window.ctrlscopeProtocol;
  const TOPIC = P.FAULTS_TOPIC;
  const MAX_LOG = 200;
  const { el, clock } = window.ctrlscopeUI;

  const plural = (n, one, many) => n + " " + (n === 1 ? one : many || one + "s");
  const pct = (rate) => Math.round(rate * 1000) / 10 + "%";
  const target = (p) => (p.verb === "*" ? "every verb" : p.verb) + " on " + (p.resource === "*" ? "every resource" : p.resource);

  function describe(r) {
    return what(r) + (r.by ? " (by " + r.by + ")" : "");
  }

  function what(r) {
    const p = r.params || {};
    switch (r.fault) {
      case "stall": return p.seconds ? "network stall: every API response and watch silent for " + p.seconds + " s" : "network stall ended";
      case "drop-watches": return "watches dropped: " + plural(p.count, "connection") + " aborted";
      case "end-watches": return "watches ended: " + plural(p.count, "watch", "watches") + " closed cleanly";
      case "compact": return "history compacted at rv " + p.compactedResourceVersion + ": older watches get 410 Gone";
      case "errors": return p.rate ? "errors: " + pct(p.rate) + " of " + target(p) + " fail with " + p.code : "error rule removed: " + target(p);
      case "errors-cleared": return "every error rule cleared";
      case "latency": return p.ms ? "latency: +" + p.ms + " ms on " + target(p) : "latency rule removed: " + target(p);
      case "latency-cleared": return "every latency rule cleared";
      case "kubelet-pause": return "kubelet paused: pods stop progressing";
      case "kubelet-resume": return "kubelet resumed";
      case "kill-pods": {
        const names = p.killed || [];
        const total = p.killedTotal || names.length;
        return plural(total, "pod") + " killed" + (p.namespace ? " in " + p.namespace : "") +
          (names.length ? ": " + names.join(", ") + (total > names.length ? ", …" : "") : "");
      }
      case "reset": return "cluster reset: every fault cleared, every object deleted, every watch ended";
      default: return String(r.fault) + " " + JSON.stringify(p);
    }
  }
  window.ctrlscopeFaults = { TOPIC: TOPIC, describe: describe };

  function init(api) {
    const panel = document.getElementById("faults-panel");
    if (!panel) return;
    const client = api.client;
    const $ = (sel) => panel.querySelector(sel);
    const operator = panel.dataset.operator === "1";
    const maxRows = Number(panel.dataset.logRows) || MAX_LOG;
    const log = []; // newest last
    let simulatorKey = "";
    let presenceHooked = false;

    // ---- is there a simulator? ------------------------------------------------------------------
    function showProbe(st) {
      const badge = $("#faults-sim");
      const ok = st.state === "ok";
      badge.textContent = ok ? (st.backend || "simulator") + " " + st.url.replace(/^https?:\/\//, "") : { off: "no simulator", "not-simulator": "not a simulator", unreachable: "simulator unreachable" }[st.state] || "simulator error";
      badge.className = "badge " + (ok ? "ok" : "bad");
      badge.title = st.message || st.url || "";
      badge.dataset.state = st.state;
      badge.dataset.backend = ok ? st.backend || "simulator" : "";
      const actions = $("#faults-actions"); // not rendered at all when fault injection is off
      if (actions) actions.hidden = !ok;
      if (actions) disableUnsupported(actions, (ok && st.disabled) || {});
      const off = $("#faults-off");
      off.hidden = ok;
      off.textContent = ok ? "" : st.message || "fault injection needs the simulated cluster";
    }
    // What this backend cannot do (a fault proxy cannot pause a real kubelet): disabled, the reason on hover.
    function disableUnsupported(actions, disabled) {
      for (const ctl of actions.querySelectorAll("[data-action]")) {
        const why = disabled[ctl.dataset.action];
        for (const c of ctl.tagName === "FORM" ? ctl.querySelectorAll("button, input, select") : [ctl]) {
          if (!("title0" in c.dataset)) c.dataset.title0 = c.title;
          c.disabled = Boolean(why);
          c.title = why ? "not possible here: " + why : c.dataset.title0;
          if (why) c.dataset.unsupported = "1"; else delete c.dataset.unsupported;
        }
      }
    }
    function probe() {
      fetch(U("/cluster/faults/status"), { credentials: "same-origin", cache: "no-store" })
        .then((r) => r.json())
        .then(showProbe)
        .catch((err) => showProbe({ state: "error", message: "could not ask the dashboard: " + err }));
    }

    // ---- active rules (topic state) -------------------------------------------------------------
    function chip(text, cls, action, params, title) {
      const c = el("span", { className: "fault-chip " + cls, title: title || "" }, text);
      if (operator && action) {
        c.append(el("button", { type: "button", className: "chip-x", title: "remove this rule", dataset: { action: action, params: JSON.stringify(params) } }, "×"));
      }
      return c;
    }
    function renderRules() {
      const t = client.topics.get(TOPIC);
      const rules = t && t.state.get("rules");
      const sim = t && t.state.get("simulator");
      const chips = [];
      // Which run wrote this state (presence): a simulator that was killed never said it stopped, and
      // an earlier run's "stopped" must not sit next to a running simulator as if it were current.
      const P = window.ctrlscopePresence, run = sim && sim.run ? P.run(sim.run) : null;
      if (sim && !sim.running) {
        chips.push(el("span", { className: "fault-chip stopped", title: run ? P.runText(run) : "" },
          (sim.backend || "simulator") + " stopped " + clock(sim.stopped).slice(0, 8) + (run ? " (" + P.runText(run) + ")" : "")));
      } else if (sim && run && !run.alive) {
        chips.push(el("span", { className: "fault-chip stopped", title: P.runText(run) }, (sim.backend || "simulator") + " " + P.stoppedText(run)));
      }
      if (rules) {
        for (const r of rules.errors || []) {
          chips.push(chip("errors " + pct(r.rate) + " " + r.verb + " " + r.resource + " → " + r.code, "errors", "errors",
            { verb: r.verb, resource: r.resource, rate: 0, code: r.code }, pct(r.rate) + " of " + target(r) + " fail with " + r.code));
        }
        for (const r of rules.latency || []) {
          chips.push(chip("+" + r.ms + " ms " + r.verb + " " + r.resource, "latency", "latency",
            { verb: r.verb, resource: r.resource, ms: 0 }, "every " + target(r) + " waits " + r.ms + " ms"));
        }
        if (rules.kubeletPaused) chips.push(chip("kubelet paused", "kubelet", "resume-kubelet", {}, "pods stay where they are until the kubelet resumes"));
      }
      if (!chips.length) chips.push(el("span", { className: "muted" }, t ? "no active faults" : "no fault telemetry yet (manage.py simcluster or faultproxy publishes it)"));
      if (!presenceHooked) { presenceHooked = true; window.ctrlscopePresence.listen(() => renderRules()); }
      $("#faults-rules").replaceChildren(...chips);
      // A simulator that (re)started or stopped: ask again whether faults can be injected.
      const key = sim ? sim.url + "|" + sim.running : "";
      if (key !== simulatorKey) { if (simulatorKey) probe(); simulatorKey = key; }
    }

    // ---- the fault log (topic records) ----------------------------------------------------------
    function renderLog() {
      const rows = log.slice(-maxRows).reverse().map((r) => el("tr", { className: "fault-" + r.fault },
        el("td", null, clock(r.ts)), el("td", { className: "fault-name" }, r.fault), el("td", { className: "fault-text" }, describe(r)),
        el("td", null, r.rv || "")));
      if (!rows.length) rows.push(el("tr", { className: "empty" }, el("td", { colSpan: 4, className: "muted" }, "no fault injected yet")));
      $("#faults-log").replaceChildren(...rows);
      const last = log[log.length - 1];
      const lastBox = $("#faults-last");
      if (lastBox) lastBox.textContent = last ? "last: " + describe(last) + " · " + clock(last.ts).slice(0, 8) : "";
    }

    client.on("topics", (topics) => { if (topics.includes(TOPIC) && !client.topics.has(TOPIC)) client.subscribe(TOPIC); });
    client.on("snapshot", (topic) => { if (topic === TOPIC) { renderRules(); renderLog(); } });
    client.on("records", (topic, records, id, frame) => {
      if (topic !== TOPIC) return;
      for (const r of records) if (r.k === P.RecordKind.FAULT) log.push(r);
      if (log.length > MAX_LOG) log.splice(0, log.length - MAX_LOG);
      if (frame.s) renderRules();
      if (records.length) renderLog();
    });

    // ---- actions --------------------------------------------------------------------------------
    const result = $("#faults-result");
    function say(ok, text) { result.textContent = (ok ? "✓ " : "✗ ") + text; result.className = "fault-result " + (ok ? "ok" : "bad"); }
    function outcome(body) {
      const r = body.result || {};
      if (typeof r.closed === "number") return body.label + ": " + plural(r.closed, "watch", "watches") + " closed";
      if (Array.isArray(r.killed)) return body.label + ": " + (r.killed.length ? r.killed.join(", ") : "no pod to kill");
      return body.label + ": done";
    }
    async function send(action, params) {
      const token = $("input[name=csrfmiddlewaretoken]");
      let resp, body;
      try {
        resp = await fetch(U("/cluster/faults/" + action), {
          method: "POST", credentials: "same-origin", body: new URLSearchParams(params),
          headers: { "X-CSRFToken": token ? token.value : "" },
        });
        body = await resp.json().catch(() => ({})); // a CSRF refusal is an HTML page
      } catch (err) {
        say(false, "the dashboard did not answer: " + err);
        return;
      }
      if (resp.ok) say(true, outcome(body));
      else say(false, resp.status + ": " + (body.error || resp.statusText));
    }
    panel.addEventListener("submit", (e) => {
      e.preventDefault();
      const form = e.target;
      send(form.dataset.action, new FormData(form));
    });
    panel.addEventListener("click", (e) => {
      const b = e.target instanceof Element && e.target.closest("button[data-action]");
      if (!b || b.type === "submit" || b.disabled) return;
      e.preventDefault(); // a chip's × sits inside the folded panel's <summary>: do not toggle it
      if (b.dataset.action === "reset" && !window.confirm("Reset the simulated cluster? Every fault is cleared and every object deleted (the sample Deployments too); every watch ends.")) return;
      send(b.dataset.action, b.dataset.action === "reset" ? { confirm: "reset" } : JSON.parse(b.dataset.params || "{}"));
    });
    if (panel.tagName === "DETAILS") {
      // Folded or open is remembered, per browser: a presenter opens it once.
      const KEY = "ctrlscope-faults-open";
      try { if (localStorage.getItem(KEY) === "1") panel.open = true; } catch (e) { /* private mode */ }
      panel.addEventListener("toggle", () => { try { localStorage.setItem(KEY, panel.open ? "1" : "0"); } catch (e) { /* private mode */ } });
    }

    renderRules();
    renderLog();
    if (panel.dataset.enabled === "1") probe(); else showProbe({ state: "off", message: $("#faults-off").textContent });
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
