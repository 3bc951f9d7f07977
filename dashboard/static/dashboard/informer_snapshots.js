/*
 * Informer caches over HTTP (snapshot.json), asked for from the page's <head>.
 *
 * An informer topic's state is the whole cache: 100,000 objects are ~8 MB, more than one websocket
 * message may carry (daphne caps messages at 1 MiB), so controller_page.js loads it from
 * snapshot.json and then resumes the topic's stream on the socket from the snapshot's id. The
 * informers the server knew when it rendered the page (cs-page's "informers") are asked for here, as
 * soon as the head is parsed: before the page's ~20 panel scripts are fetched and run, which took
 * ~400 ms of a 100k-object first paint when the request waited for controller_page.js. The server
 * answers while the browser loads the scripts (it streams the body off the thread that serves them:
 * dashboard/snapshot_body.py).
 *
 * window.ctrlscopeSnapshots.take(topic): the load started for the topic here, once (null if none);
 * load(worker, prefix, topic): a new one. Each is a promise of the parsed snapshot; the times it
 * went through (ms since navigation start) are in window.ctrlscopeTimings[topic].
 */
(function () {
  "use strict";
  const U = window.ctrlscopeUrl;
  const timings = (window.ctrlscopeTimings = window.ctrlscopeTimings || {});

  function load(worker, prefix, topic) {
    const marks = (timings[topic] = { fetch: performance.now() });
    const url = U.informer(worker, topic.slice(prefix.length)) + "snapshot.json?history=500";
    return fetch(url, { credentials: "same-origin", cache: "no-store" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); marks.response = performance.now(); return r.json(); })
      .then((snap) => { marks.parsed = performance.now(); return snap; });
  }

  const started = new Map();
  const el = document.getElementById("cs-page");
  if (el) {
    const page = JSON.parse(el.textContent);
    for (const t of page.informers || []) {
      const p = load(page.worker, page.topics.informer_prefix, t);
      p.catch(() => {}); // taken and handled by the page; an untaken failure is no page error
      started.set(t, p);
    }
  }

  window.ctrlscopeSnapshots = {
    load,
    take(topic) {
      const p = started.get(topic) || null;
      started.delete(topic);
      return p;
    },
  };
})();
