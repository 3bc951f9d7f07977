/*
 * "⚡ fault: …" marker rows in the controller page's informer events: the cause (a dropped watch, a
 * compacted history) in the same list as its effect (watch ended, 410, relist), like the resync
 * markers. Faults come from the `cluster/faults` topic (faults.js subscribes to it and describes
 * them); only faults that arrive while the page is open are marked, because the events list is in
 * arrival order — the fault log in the Faults panel has the older ones, with their times.
 */
(function () {
  "use strict";
  function init(api) {
    const faults = window.ctrlscopeFaults;
    if (!faults || !api.pushEvent) return;
    let live = false; // records before the topic's first snapshot are history (context), not news
    api.client.on("snapshot", (topic) => { if (topic === faults.TOPIC) live = true; });
    api.client.on("records", (topic, records) => {
      if (topic !== faults.TOPIC || !live) return;
      for (const r of records) {
        if (r.k === window.ctrlscopeProtocol.RecordKind.FAULT) api.pushEvent({ marker: "fault", ts: r.ts, inf: "cluster", text: "⚡ fault: " + faults.describe(r) });
      }
      api.schedule();
    });
  }
  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
