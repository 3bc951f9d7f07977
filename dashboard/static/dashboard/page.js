/*
 * What every live page does the same way, once: open the tab's one TelemetryClient, keep the header's
 * connection badges current, batch DOM work per animation frame, and say when a worker speaks a
 * telemetry protocol this dashboard does not (window.ctrlscopePage).
 *
 *   const client = ctrlscopePage.client({ autoSubscribe: false, history: 50 });
 *   ctrlscopePage.connectionBadge(client);
 *   const schedule = ctrlscopePage.scheduler(render); // schedule() → render() once, next frame
 *
 * Loaded after telemetry.js (and protocol.js, which base.html loads first).
 */
(function (global) {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const P = global.ctrlscopeProtocol;
  const LABELS = { connecting: "connecting…", live: "live", reconnecting: "reconnecting…", resyncing: "resyncing…", unauthorized: "not signed in" };

  // The tab's TelemetryClient on this server's websocket (not connected yet: panels register first).
  function client(opts) {
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    return new global.TelemetryClient(proto + "//" + location.host + U("/ws/telemetry/"), opts);
  }

  // #conn follows the client's state (a signed-out tab goes to the login page, back here after) and
  // #redis, where the page has one, the server's view of Redis. #conn's tooltip also counts the records
  // of kinds this page does not know (a newer publisher's additions), ignored by the client.
  function connectionBadge(c) {
    const conn = document.getElementById("conn"), redis = document.getElementById("redis");
    c.on("state", (s) => {
      conn.textContent = LABELS[s] || s; conn.dataset.state = s; conn.className = "badge conn-" + s;
      if (s === "unauthorized") location.href = U("/accounts/login/?next=") + encodeURIComponent(location.pathname + location.search);
    });
    if (redis) c.on("redis", (up) => { redis.textContent = up ? "redis up" : "redis down"; redis.className = "badge " + (up ? "ok" : "bad"); });
    const title = conn.title;
    let shown = 0;
    setInterval(() => {
      const n = c.stats.unknown;
      if (n === shown) return;
      shown = n;
      const kinds = [...c.stats.unknownKinds].map(([k, count]) => k + " ×" + count).join(", ");
      conn.dataset.unknown = String(n);
      conn.title = title + " · " + n.toLocaleString() + " record" + (n === 1 ? "" : "s") + " of unknown kinds ignored (" + kinds + ")";
    }, 1000);
  }

  // One requestAnimationFrame per burst of changes: schedule() as often as data arrives, render() runs
  // at most once a frame (a hidden tab gets no frames, and renders once when shown again).
  function scheduler(render) {
    let scheduled = false;
    const run = () => { scheduled = false; render(); };
    return function schedule() { if (!scheduled) { scheduled = true; requestAnimationFrame(run); } };
  }

  // The version a worker's data is in when this page cannot read it, else null: a major other than
  // the page's in the worker's components entry (worker/{name}: runtime and protocol) or in the frames
  // of any of its topics (client.unsupported).
  function unsupportedVersion(c, worker, components) {
    for (const [topic, version] of c.unsupported) { const p = P.parseTopic(topic); if (p && p.worker === worker) return version; }
    const me = workerEntry(components);
    return me && me.protocol && !P.speaks(me.protocol) ? String(me.protocol) : null;
  }
  // The worker's own entry of its components state ({kind: "worker", name, runtime, protocol}), or null.
  function workerEntry(components) {
    for (const v of (components || new Map()).values()) if (v && v.kind === P.ComponentKind.WORKER) return v;
    return null;
  }
  // The worker's cluster entry ({kind: "cluster", name, server, version, simulated, writes}), or null.
  function clusterEntry(components) {
    for (const v of (components || new Map()).values()) if (v && v.kind === P.ComponentKind.CLUSTER) return v;
    return null;
  }
  // v1.2: what a worker's cluster entry says about writes, for a badge ({text, title}), or null
  // when it does not say (an older worker, or one that does not write through ctrlscope's client).
  function writesBadge(cluster) {
    if (!cluster || !cluster.writes) return null;
    const where = cluster.server || cluster.name || "its cluster";
    if (cluster.writes === P.WriteMode.READ_ONLY) {
      return { text: "read-only", readOnly: true, title: "this worker only observes " + where + ": every write its controllers make " +
        "is refused before it is sent (" + (cluster.simulated === false ? "not the simulated cluster" : "not known to be the simulated cluster") +
        "; start it with --allow-writes to let it act)" };
    }
    return { text: "acting", readOnly: false, title: "this worker's controllers write to " + where +
      (cluster.simulated ? " (the simulated cluster)" : " (started with --allow-writes)") };
  }
  function protocolNotice(worker, version) {
    const major = P.major(version);
    return "worker " + worker + " speaks telemetry protocol v" + (major === null ? version : major) + "; this dashboard speaks v" +
      P.MAJOR + " — its data is not shown";
  }

  global.ctrlscopePage = { client, connectionBadge, scheduler, unsupportedVersion, workerEntry, clusterEntry, writesBadge, protocolNotice };
})(window);
