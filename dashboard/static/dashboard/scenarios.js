/*
 * The scenarios page: the `scenarios` topic's state holds, per scenario, whether it runs, its
 * claims and its measurements (the scoreboard); its records are the live narration lines.
 */
(function () {
  "use strict";
  const TOPIC = "scenarios";
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const client = new TelemetryClient(proto + "//" + location.host + "/ws/telemetry/", { autoSubscribe: false, history: 200 });
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
    const m = st.measurements || {};
    s.querySelector(".scoreboard tbody").replaceChildren(...Object.keys(m).map((k) =>
      row([k.replace(/_/g, " "), m[k] === null ? "—" : String(typeof m[k] === "number" ? Math.round(m[k] * 100) / 100 : m[k])])));
  }

  client.on("state", (s) => { const el = document.getElementById("conn"); el.textContent = s; el.dataset.state = s; el.className = "badge conn-" + s; });
  client.on("topics", (topics) => { if (topics.includes(TOPIC) && !client.topics.has(TOPIC)) client.subscribe(TOPIC); });
  client.on("snapshot", (topic, state) => { if (topic === TOPIC) for (const [name, st] of state) show(name, st); });
  client.on("records", (topic, records, id, frame) => {
    if (topic !== TOPIC) return;
    for (const r of records) {
      const s = sections.get(r.scenario);
      if (!s || r.k !== "narration") continue;
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
      const resp = await fetch("/scenarios/" + encodeURIComponent(button.dataset.name) + "/start", {
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
