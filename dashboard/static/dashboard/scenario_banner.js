/*
 * The scenario banner: while a guided scenario runs, every page (except /scenarios/, which shows
 * it in full) carries a strip under the header with its title, the latest narration line, how long
 * it has run and the live pod counts of both PodSet implementations -- so a presenter can start a
 * scenario and then watch the controller page with the narration in view. When it ends the strip
 * says whether its claims held, until dismissed or for a minute.
 *
 * It rides on the page's own telemetry client (one websocket per tab): it subscribes to the
 * `scenarios` topic and to the scoreboard topics (w/<worker>/status/podset-scoreboard).
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const P = window.ctrlscopeProtocol;
  const TOPIC = P.SCENARIOS_TOPIC;
  const STALE_MS = 15 * 60 * 1000; // a "running" state older than this is a scenario that died
  const SHOW_RESULT_MS = 60 * 1000;
  if (document.body.dataset.page === "scenarios") return;
  const page = window.ctrlscope;
  if (!page || !page.client) return;
  const client = page.client;
  const el = window.ctrlscopeUI.el; // every page with a telemetry client loads spark.js
  const bar = document.getElementById("scenario-banner");
  let current = null; // {name, title, started, running, claims, finished}
  let narration = "";
  let dismissed = "";
  let counts = "";


  function pick(state) {
    // The running scenario, else the one that finished last (if recent).
    let best = null;
    for (const [name, st] of state) {
      if (!st) continue;
      const when = st.running ? st.started || 0 : st.finished || 0;
      if (st.running && Date.now() - when > STALE_MS) continue;
      if (!st.running && Date.now() - when > SHOW_RESULT_MS) continue;
      const rank = (st.running ? 2e15 : 0) + when;
      if (!best || rank > best.rank) best = { rank: rank, name: name, st: st };
    }
    if (!best) { current = null; return; }
    if (!current || current.name !== best.name || current.started !== best.st.started) narration = "";
    // The state's latest line: what a page opened mid-scenario shows before the next line arrives.
    if (best.st.line) narration = best.st.line;
    current = Object.assign({ name: best.name }, best.st);
  }

  function render() {
    if (!current || dismissed === current.name + ":" + (current.finished || current.started)) { bar.hidden = true; return; }
    const parts = [];
    if (current.running) {
      const secs = Math.max(0, Math.round((Date.now() - (current.started || Date.now())) / 1000));
      parts.push(el("span", { className: "sb-state running" }, "▶ scenario running"), el("b", null, current.title || current.name),
        el("span", { className: "muted" }, secs + " s"));
      if (narration) parts.push(el("span", { className: "sb-line" }, narration));
    } else {
      const claims = current.claims || [];
      const held = claims.filter((c) => c.held).length;
      const ok = held === claims.length;
      parts.push(el("span", { className: "sb-state " + (ok ? "held" : "failed") }, ok ? "✓ finished" : "✗ finished"),
        el("b", null, current.title || current.name),
        el("span", { className: "sb-line" }, held + " / " + claims.length + " claims held"));
    }
    if (counts) parts.push(el("span", { className: "sb-counts muted" }, counts));
    const link = el("a", null, "narration and claims");
    link.href = U("/scenarios/#") + encodeURIComponent(current.name);
    const close = el("button", { className: "sb-close", type: "button", title: "dismiss" }, "×");
    parts.push(link, close);
    bar.replaceChildren(...parts);
    bar.hidden = false;
  }

  // Delegated: the strip is redrawn every second, so a listener on the button itself could be lost.
  bar.addEventListener("click", (e) => {
    if (!(e.target instanceof Element) || !e.target.closest(".sb-close") || !current) return;
    dismissed = current.name + ":" + (current.finished || current.started);
    render();
  });

  // The freshest scoreboard (the leading worker's; a stopped worker's rows stay behind in Redis).
  let countsAt = 0;
  function scoreboard(topic) {
    const t = client.topics.get(topic);
    if (!t) return;
    const h = t.state.get("handlers"), r = t.state.get("reconciler"), k = t.state.get("kopf");
    const at = (h || r || k || {}).at || 0;
    if (at < countsAt) return;
    countsAt = at;
    const fmt = (label, v) => (v ? label + " " + v.actual + " pods for " + v.desired + " wanted" : "");
    counts = [fmt("handler-only", h), fmt("Reconciler", r), fmt("kopf", k)].filter(Boolean).join(" · ");
  }

  client.on("topics", (topics) => {
    for (const t of topics) if ((t === TOPIC || P.scoreboardTopic(t)) && !client.topics.has(t)) client.subscribe(t);
  });
  client.on("snapshot", (topic, state) => {
    if (topic === TOPIC) { pick(state); render(); } else if (P.scoreboardTopic(topic)) { scoreboard(topic); render(); }
  });
  client.on("records", (topic, records, id, frame) => {
    if (topic === TOPIC) {
      if (frame.s) pick(client.topics.get(TOPIC).state);
      for (const r of records) if (r.k === P.RecordKind.NARRATION && (!current || r.scenario === current.name)) narration = r.text;
      render();
    } else if (P.scoreboardTopic(topic) && frame.s) { scoreboard(topic); render(); }
  });
  setInterval(() => { if (current) { if (client.topics.has(TOPIC)) pick(client.topics.get(TOPIC).state); render(); } }, 1000);
})();
