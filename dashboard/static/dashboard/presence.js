/*
 * Presence (window.ctrlscopePresence): which publisher runs are alive, and what retention dropped.
 *
 * Every worker, simulator and replay keeps a presence entry in Redis (controllers/telemetry/
 * presence.py); GET /presence.json lists them with `alive` (refreshed within the last alive_ms, not
 * stopped). Pages use it to tell live state from an earlier run's: a worker whose newest run is not
 * alive is shown as stopped *with its run* (started when, on which host, stopped or last heard when),
 * never as current. Polled every POLL_MS while any page part listens; one request for all of them.
 *
 * Whether a worker is live is the one rule of protocol/redis-layout.md ("Liveness"; P.workerLiveness,
 * the same as the server's schema.worker_liveness, which /presence.json applies too): its newest run's
 * entry decides, frame ages only for a worker that keeps none. The page applies it every time it draws,
 * on the server's clock (the answer's `now`, moved on by the time since it arrived), so a run whose
 * entry stops being refreshed turns stopped ALIVE_MS after its last `seen`, not a poll later.
 *
 *   ctrlscopePresence.listen(() => render());
 *   const run = ctrlscopePresence.workerRun("demo");  // newest run of worker demo, or null
 *   ctrlscopePresence.liveness("demo", lastFrameAt)   // P.Liveness: live / stopped / stale
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

  const P = window.ctrlscopeProtocol;
  const publishers = () => (data ? data.publishers : []);
  // The newest run of a worker, or null when the worker keeps no presence entry (an older or other
  // publisher: then its frame ages decide).
  function workerRun(name) { return P.workerRun(publishers(), name); }
  // The server's clock now (Redis' TIME, which /presence.json's `now` is), from the browser's.
  const offset = () => (data ? data.now - data.received : 0);
  const serverNow = () => Date.now() + offset();
  // Whether a run is alive now (its `alive` is as of the last poll).
  const runAlive = (run) => P.runAlive(run, serverNow());
  // A worker's P.Liveness now. lastFrameTs: the `ts` of the newest frame of the worker's components
  // or metrics this page has (the publisher's clock, as the entries' `seen`; 0/null: none); the
  // newest the server saw counts too.
  function liveness(name, lastFrameTs) {
    const server = (data && data.workers && data.workers[name] && data.workers[name].last_frame) || 0;
    const last = Math.max(server, lastFrameTs || 0);
    return P.workerLiveness(publishers(), name, serverNow(), last || null);
  }
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

  global.ctrlscopePresence = { listen, workerRun, runAlive, liveness, topicRun, run, runText, stoppedText, expired, retention, clock,
    get data() { return data; } };
})(window);
