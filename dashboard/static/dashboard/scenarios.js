/*
 * The scenarios page: the `scenarios` topic's state holds, per scenario, whether it runs, its
 * claims and its measurements (the scoreboard); its records are the live narration lines. A scenario
 * that compares sides (watcher-vs-informer) also has a results table ({columns, rows: [{label, cells,
 * claim}]}): drawn claim by claim, each claim's held mark and text above the rows that measure it.
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const P = window.ctrlscopeProtocol;
  const TOPIC = P.SCENARIOS_TOPIC;
  const client = window.ctrlscopePage.client({ autoSubscribe: false, history: 200 });
  const sections = new Map([...document.querySelectorAll("section.scenario")].map((s) => [s.dataset.name, s]));

  function row(cells, cls) {
    const tr = document.createElement("tr");
    if (cls) tr.className = cls;
    for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
    return tr;
  }

  function show(name, st) {
    const s = sections.get(name);
    if (!s || !st) return;
    const badge = s.querySelector(".state");
    const state = st.running ? "running" : (st.claims ? (st.claims.every((c) => c.held) ? "held" : "failed") : "idle");
    badge.dataset.state = state;
    badge.textContent = { running: "running…", held: "claims held", failed: "a claim did not hold", idle: "idle" }[state];
    badge.className = "badge state " + (state === "held" ? "ok" : state === "failed" ? "bad" : "");
    s.querySelector(".claims tbody").replaceChildren(...(st.claims || []).map((c) =>
      row([c.held ? "✓ held" : "✗ did not hold", c.text, c.detail], c.held ? "held" : "failed")));
    const results = s.querySelector(".results");
    results.hidden = !st.table;
    if (st.table) renderResults(results, st.table, st.claims || []);
    const m = st.table ? {} : st.measurements || {};
    s.querySelector(".scoreboard tbody").replaceChildren(...Object.keys(m).map((k) =>
      row([k.replace(/_/g, " "), m[k] === null ? "—" : String(typeof m[k] === "number" ? Math.round(m[k] * 100) / 100 : m[k])])));
  }

  // A side-by-side results table, claim by claim (rows without a claim last).
  function renderResults(table, t, claims) {
    const head = document.createElement("tr");
    for (const c of t.columns) { const th = document.createElement("th"); th.textContent = c; head.appendChild(th); }
    const order = [...claims.keys(), null];
    const body = [];
    for (const i of order) {
      const rows = t.rows.filter((r) => (r.claim === undefined ? null : r.claim) === i);
      if (!rows.length) continue;
      if (i !== null && claims[i]) {
        const c = claims[i];
        const tr = document.createElement("tr");
        tr.className = "claim-head " + (c.held ? "held" : "failed");
        const td = document.createElement("td");
        td.colSpan = t.columns.length;
        td.textContent = (c.held ? "✓ " : "✗ ") + "claim " + (i + 1) + ": " + c.text;
        tr.appendChild(td);
        body.push(tr);
      }
      for (const r of rows) body.push(row([r.label, ...r.cells]));
    }
    table.querySelector("thead").replaceChildren(head);
    table.querySelector("tbody").replaceChildren(...body);
  }

  // ---- live scoreboard: w/<worker>/status/podset-scoreboard, one row per implementation ----------
  const boards = new Map(); // topic -> table element
  const fmtS = (v) => (v === null || v === undefined ? "—" : v < 1 ? Math.round(v * 1000) + " ms" : v.toFixed(1) + " s");
  // One column per implementation the worker reports (kopf's only once a kopf PodSet exists). The
  // kopf operator runs in its own worker: its handler attempts and API calls are on that worker's
  // page, so the Python worker's row leaves them null.
  const COLUMNS = [["handlers", "handler-only"], ["reconciler", "Reconciler"], ["kopf", "kopf operator"]];
  const onKopfPage = "on the kopf worker's page";
  const ROWS = [
    ["mechanism", (v, impl) => ({ handlers: "event-driven: on_add / on_update / on_delete, once each",
      reconciler: "state-driven: Reconcile(request) from a workqueue",
      kopf: "per-object handlers; a failed one retried after kopf's fixed backoff" })[impl]],
    ["PodSets matching their spec", (v) => v.converged + " / " + v.podsets, (v) => v.converged === v.podsets],
    ["pods wanted → running", (v) => v.desired + " → " + v.actual, (v) => v.desired === v.actual],
    ["diverged for (oldest open gap)", (v) => fmtS(v.converging_s), (v) => v.converging_s === null || v.converging_s === undefined],
    ["last convergence took", (v) => fmtS(v.last_converge_s)],
    ["handler calls / reconciles", (v, impl) => impl === "reconciler" ? v.reconciles + " reconciles"
      : v.handler_calls === null || v.handler_calls === undefined ? onKopfPage : v.handler_calls + " handler calls"],
    ["API calls made", (v) => v.api_calls === null || v.api_calls === undefined ? onKopfPage : String(v.api_calls)],
    ["failures", (v, impl) => impl === "handlers" ? v.lost_side_effects + " lost, never retried"
      : impl === "reconciler" ? v.retried_errors + " raised, retried with backoff" : "raised, retried after the backoff",
    (v, impl) => impl !== "handlers" || !v.lost_side_effects],
  ];
  // A worker reports its scoreboard once a second while it leads; one that stopped (a standby
  // that was removed, a replaced worker) leaves its last rows in Redis: those are hidden.
  const STALE_MS = 15000;
  function renderBoard(topic) {
    const t = client.topics.get(topic);
    const m = P.scoreboardTopic(topic);
    if (!t || !m) return;
    const present = COLUMNS.filter(([impl]) => t.state.get(impl) || impl !== "kopf");
    const values = present.map(([impl]) => t.state.get(impl));
    const latest = values.find(Boolean) || {};
    const fresh = Date.now() - (latest.at || 0) < STALE_MS;
    const existing = boards.get(topic);
    if (existing) existing.hidden = !fresh;
    if (!fresh) { noteStale(); return; }
    let box = boards.get(topic);
    if (!box) {
      box = document.createElement("div");
      box.className = "board";
      boards.set(topic, box);
      const root = document.getElementById("scoreboards");
      if (boards.size === 1) root.replaceChildren();
      root.appendChild(box);
    }
    const head = document.createElement("tr");
    for (const c of ["worker " + m.worker, ...present.map(([, title]) => title)]) { const th = document.createElement("th"); th.textContent = c; head.appendChild(th); }
    const body = ROWS.map(([label, cell, good]) => {
      const tr = row([label, ...present.map(([impl], i) => values[i] ? cell(values[i], impl) : "—")]);
      if (good) values.forEach((v, i) => { if (v) tr.cells[i + 1].classList.add(good(v, present[i][0]) ? "good" : "off"); });
      return tr;
    });
    const table = document.createElement("table");
    table.className = "scoreboard-live";
    const thead = document.createElement("thead"); thead.appendChild(head);
    const tbody = document.createElement("tbody"); tbody.replaceChildren(...body);
    table.append(thead, tbody);
    const at = latest.at;
    const note = document.createElement("p");
    note.className = "muted";
    note.textContent = "updated " + (at ? new Date(at).toLocaleTimeString() : "—") +
      " · source material: handlers have no retry and can lose events (they see a subsequence of states); Reconcile retries and converges";
    box.replaceChildren(table, note);
    noteStale();
  }
  function noteStale() {
    const shown = [...boards.values()].filter((b) => !b.hidden).length;
    let empty = document.getElementById("scoreboards-empty");
    if (!empty) {
      empty = document.createElement("p");
      empty.id = "scoreboards-empty";
      empty.className = "muted";
      document.getElementById("scoreboards").appendChild(empty);
    }
    empty.textContent = "no worker is reporting a PodSet scoreboard right now (the PodSet example reports it while it leads)";
    empty.hidden = shown > 0 || boards.size === 0;
  }
  setInterval(() => { for (const topic of client.topics.keys()) if (P.scoreboardTopic(topic)) renderBoard(topic); }, 2000);
  client.on("topics", (topics) => { for (const t of topics) if (P.scoreboardTopic(t) && !client.topics.has(t)) client.subscribe(t); });
  client.on("snapshot", (topic) => renderBoard(topic));
  client.on("records", (topic, records, id, frame) => { if (frame.s && P.scoreboardTopic(topic)) renderBoard(topic); });

  window.ctrlscopePage.connectionBadge(client);
  client.on("topics", (topics) => { if (topics.includes(TOPIC) && !client.topics.has(TOPIC)) client.subscribe(TOPIC); });
  client.on("snapshot", (topic, state) => { if (topic === TOPIC) for (const [name, st] of state) show(name, st); });
  client.on("records", (topic, records, id, frame) => {
    if (topic !== TOPIC) return;
    for (const r of records) {
      const s = sections.get(r.scenario);
      if (!s || r.k !== P.RecordKind.NARRATION) continue;
      const li = document.createElement("li");
      li.textContent = r.text;
      const list = s.querySelector(".live");
      list.appendChild(li);
      while (list.children.length > 20) list.removeChild(list.firstChild);
    }
    if (frame.s) for (const name in frame.s) show(name, frame.s[name]);
  });

  function csrf() {
    const input = document.querySelector("input[name=csrfmiddlewaretoken]");
    return input ? input.value : "";
  }
  for (const button of document.querySelectorAll("button.start")) {
    button.addEventListener("click", async () => {
      const speed = button.parentElement.querySelector(".speed").value;
      const resp = await fetch(U("/scenarios/" + encodeURIComponent(button.dataset.name) + "/start"), {
        method: "POST", headers: { "X-CSRFToken": csrf(), "Content-Type": "application/x-www-form-urlencoded" },
        body: "speed=" + encodeURIComponent(speed), credentials: "same-origin",
      });
      const body = await resp.json().catch(() => ({}));
      button.title = resp.ok ? "started" : (body.error || resp.statusText);
      if (!resp.ok) alert(body.error || resp.statusText);
    });
  }
  window.ctrlscope = { client: client };
  client.connect();
})();
