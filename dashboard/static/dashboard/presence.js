/*
 * Presence (window.ctrlscopePresence): which publisher runs are alive, and what retention dropped.
 *
 * Every worker, simulator and replay keeps a presence entry in Redis (controllers/telemetry/
 * presence.py); GET /presence.json lists them with `alive` (refreshed within the last alive_ms, not
 * stopped). Pages use it to tell live state from an earlier run's: a worker whose newest run is not
 * alive is shown as stopped *with its run* (started when, on which host, stopped or last heard when),
 * never as current. Polled every POLL_MS while any page part listens; one request for all of them.
 *
 *   ctrlscopePresence.listen(() => render());
 *   const run = ctrlscopePresence.workerRun("demo");  // newest run of worker demo, or null
 *   ctrlscopePresence.stoppedText(run)                // "stopped 14:37:09" / "not heard from since …"
 */
(function (global) {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const POLL_MS = 3000;
  const listeners = new Set();
  let data = null, timer = null, inflight = false;

  const clock = (ms) => new Date(ms).toISOString().slice(11, 19);

  async function poll() {
    if (inflight) return;
    inflight = true;
    try {
      const resp = await fetch(U("/presence.json"), { credentials: "same-origin", cache: "no-store" });
      if (resp.ok) {
        data = await resp.json();
        data.received = Date.now();
        for (const fn of listeners) fn(data);
      }
    } catch (err) {
      // The dashboard or Redis is away: the connection badges say so; keep the last answer.
    } finally {
      inflight = false;
    }
  }

  function listen(fn) {
    listeners.add(fn);
    if (data) fn(data);
    if (!timer) { poll(); timer = setInterval(poll, POLL_MS); }
  }

  const publishers = () => (data ? data.publishers : []);
  // The newest run of a worker (entries come newest first), or null when the worker publishes none
  // (an older or other publisher that keeps no presence entry: pages fall back to frame ages).
  function workerRun(name) { return publishers().find((p) => p.role === "worker" && p.name === name) || null; }
  // The run that last claimed a topic (newest first), or null.
  function topicRun(topic) { return publishers().find((p) => (p.topics || []).includes(topic)) || null; }
  function run(src) { return publishers().find((p) => p.src === src) || null; }

  function runText(p) {
    if (!p) return "";
    return "run started " + clock(p.started) + " UTC on " + (p.host || "?") + " (pid " + (p.pid || "?") + ")";
  }
  function stoppedText(p) {
    if (!p) return "";
    if (p.stopped) return "stopped " + clock(p.stopped) + " UTC";
    return "not heard from since " + clock(p.seen) + " UTC (it stopped without saying so: killed, or its host is gone)";
  }
  // What retention and operators dropped, newest first: [{what, topics, at, reason, by}].
  const expired = () => (data ? data.expired : []);
  const retention = () => (data ? data.retention : null);

  global.ctrlscopePresence = { listen, workerRun, topicRun, run, runText, stoppedText, expired, retention, clock,
    get data() { return data; } };
})(window);
