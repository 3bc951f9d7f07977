/*
 * The cluster page: owns the tab's TelemetryClient (one websocket per tab) and starts the panels
 * registered in window.ctrlscopePanels (faults.js) before the socket opens, as controller.js does.
 */
(function () {
  "use strict";
  const LABELS = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", resyncing: "resyncing…", unauthorized: "not signed in" };
  const proto = location.protocol === "https:" ? "wss:" : "ws:";
  const client = new TelemetryClient(proto + "//" + location.host + "/ws/telemetry/", { autoSubscribe: false, history: 200 });
  client.on("state", (s) => {
    const c = document.getElementById("conn");
    c.textContent = LABELS[s] || s; c.dataset.state = s; c.className = "badge conn-" + s;
    if (s === "unauthorized") location.href = "/accounts/login/?next=" + encodeURIComponent(location.pathname);
  });
  window.ctrlscope = { client: client };
  for (const init of window.ctrlscopePanels || []) { try { init({ client: client }); } catch (e) { console.error(e); } }
  client.connect();
})();
