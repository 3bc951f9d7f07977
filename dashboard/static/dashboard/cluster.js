/*
 * The cluster page: owns the tab's TelemetryClient (one websocket per tab) and starts the panels
 * registered in window.ctrlscopePanels (faults.js) before the socket opens, as controller_page.js does.
 */
(function () {
  "use strict";
  const client = window.ctrlscopePage.client({ autoSubscribe: false, history: 200 });
  window.ctrlscopePage.connectionBadge(client);
  window.ctrlscope = { client: client };
  for (const init of window.ctrlscopePanels || []) { try { init({ client: client }); } catch (e) { console.error(e); } }
  client.connect();
})();
