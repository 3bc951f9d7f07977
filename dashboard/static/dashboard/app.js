/*
 * The dashboard shell: connection state, counters, topics and a live event list.
 * DOM work happens once per animation frame, whatever the message rate: records are queued as they
 * arrive and the newest MAX_ROWS are rendered; beyond that the page says how many it summarised.
 */
(function () {
  "use strict";
  const MAX_ROWS = 300;
  const $ = (id) => document.getElementById(id);
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const client = new TelemetryClient(proto + "//" + location.host + "/ws/telemetry/");
  const pending = []; // rows waiting for the next animation frame
  let scheduled = false;
  let skipped = 0;
  const rate = { last: performance.now(), records: 0, value: 0 };
  const LABELS = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", resyncing: "resyncing…", unauthorized: "not signed in" };

  function schedule() { if (!scheduled) { scheduled = true; requestAnimationFrame(render); } }

  client.on("state", (s) => {
    const el = $("conn");
    el.textContent = LABELS[s] || s;
    el.dataset.state = s;
    el.className = "badge conn-" + s;
    if (s === "unauthorized") location.href = "/accounts/login/?next=/";
  });
  client.on("redis", (up) => { const el = $("redis"); el.textContent = up ? "redis up" : "redis down"; el.className = "badge " + (up ? "ok" : "bad"); });
  client.on("topics", (topics) => {
    workersDirty = true;
    const ul = $("topics");
    ul.replaceChildren(...(topics.length ? topics.map((t) => { const li = document.createElement("li"); li.textContent = t; return li; })
      : [Object.assign(document.createElement("li"), { className: "muted", textContent: "waiting for a worker to publish…" })]));
  });
  client.on("records", (topic, records) => {
    rate.records += records.length;
    for (const r of records) pending.push([topic, r]);
    if (pending.length > MAX_ROWS) { skipped += pending.length - MAX_ROWS; pending.splice(0, pending.length - MAX_ROWS); }
    schedule();
  });
  client.on("resync", (topic, reason) => { pending.push([topic, { marker: true, reason: reason }]); schedule(); });
  client.on("snapshot", (topic) => { if (COMPONENTS.test(topic)) workersDirty = true; schedule(); });
  client.on("records", (topic, records, id, frame) => { if (frame.s && COMPONENTS.test(topic)) { workersDirty = true; schedule(); } });

  // Workers and their controllers, from the w/{worker}/components topics (and controller topics
  // that appear before their worker's first reconcile registers the component).
  const COMPONENTS = /^w\/([^/]+)\/components$/;
  const CONTROLLER_TOPIC = /^w\/([^/]+)\/controller\/([^/]+)$/;
  let workersDirty = false;
  function renderWorkers() {
    workersDirty = false;
    const workers = new Map();
    const worker = (w) => { if (!workers.has(w)) workers.set(w, { controllers: new Map(), informers: [], leases: [] }); return workers.get(w); };
    for (const topic of client.knownTopics) {
      const m = CONTROLLER_TOPIC.exec(topic);
      if (m && !m[2].startsWith("leader-")) worker(m[1]).controllers.set(m[2], m[2]);
    }
    for (const [topic, t] of client.topics) {
      const m = COMPONENTS.exec(topic);
      if (!m) continue;
      const w = worker(m[1]);
      for (const v of t.state.values()) {
        if (!v) continue;
        if (v.kind === "controller") w.controllers.set(window.ctrlscopeUI.topicPart(v.name), v.name);
        else if (v.kind === "informer") w.informers.push(v);
        else if (v.kind === "lease") w.leases.push(v);
      }
    }
    const box = $("workers");
    if (!workers.size) { box.replaceChildren(Object.assign(document.createElement("p"), { className: "muted", textContent: "no worker has published its components yet…" })); return; }
    const el = window.ctrlscopeUI.el;
    box.replaceChildren(...[...workers.keys()].sort().map((name) => {
      const w = workers.get(name);
      const ctls = [...w.controllers].sort().map(([seg, label]) => el("li", null, el("a", { href: "/c/" + encodeURIComponent(name) + "/" + encodeURIComponent(seg) + "/", className: "controller-link" }, label)));
      const infs = w.informers.map((v) => el("span", { className: "badge " + (v.synced ? "ok" : ""), title: "rv " + (v.rv || "?") }, v.name + (v.synced ? " ✓" : " …")));
      const leases = w.leases.map((v) => el("span", { className: "badge " + (v.leader ? "ok" : "") }, (v.name || "lease") + ": " + (v.leader ? "leader" : "follower")));
      return el("div", { className: "worker", dataset: { worker: name } },
        el("h3", null, "worker ", el("b", null, name)),
        ctls.length ? el("ul", { className: "controllers" }, ...ctls) : el("p", { className: "muted" }, "no controllers yet"),
        (infs.length || leases.length) ? el("div", { className: "informers" }, el("span", { className: "muted" }, "informers "), ...infs, ...leases) : null);
    }));
  }

  function cell(text) { const td = document.createElement("td"); td.textContent = text === undefined || text === null ? "" : String(text); return td; }

  function render() {
    scheduled = false;
    if (workersDirty) renderWorkers();
    const tbody = $("events");
    const frag = document.createDocumentFragment();
    for (let i = pending.length - 1; i >= 0; i--) {
      const [topic, r] = pending[i];
      const tr = document.createElement("tr");
      if (r.marker) {
        tr.className = "resync-marker";
        const td = cell("⟳ resynced " + topic + " (" + r.reason + "): state reloaded from a fresh snapshot");
        td.colSpan = 6;
        tr.appendChild(td);
      } else {
        const when = r.ts ? new Date(r.ts).toISOString().slice(11, 23) : "";
        tr.append(cell(when), cell(topic), cell(r.k), cell(r.type || r.op || r.result || r.event || r.state || r.reason), cell(r.key), cell(r.rv));
      }
      frag.appendChild(tr);
    }
    pending.length = 0;
    tbody.insertBefore(frag, tbody.firstChild);
    while (tbody.rows.length > MAX_ROWS) tbody.deleteRow(-1);
    const now = performance.now();
    if (now - rate.last >= 1000) { rate.value = Math.round((rate.records * 1000) / (now - rate.last)); rate.records = 0; rate.last = now; }
    $("c-records").textContent = client.stats.records.toLocaleString();
    $("c-frames").textContent = client.stats.frames.toLocaleString();
    $("c-rate").textContent = rate.value.toLocaleString();
    $("c-resyncs").textContent = client.stats.resyncs.toLocaleString();
    $("c-dropped").textContent = client.stats.dropped.toLocaleString();
    let keys = 0; for (const t of client.topics.values()) keys += t.state.size;
    $("c-keys").textContent = keys.toLocaleString();
    $("summary").textContent = skipped ? "(newest " + MAX_ROWS + " rows shown; " + skipped.toLocaleString() + " arrived faster than a frame could draw them: counted, not drawn)" : "";
  }

  setInterval(schedule, 1000); // keeps the rate counter honest when nothing arrives
  window.ctrlscope = { client: client };
  client.connect();
})();
