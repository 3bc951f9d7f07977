/*
 * Informer caches over HTTP (snapshot.json), asked for by the page's first requests.
 *
 * An informer topic's state is the whole cache: 100,000 objects are ~8 MB, more than one websocket
 * message may carry (daphne caps messages at 1 MiB), so controller_page.js loads it from
 * snapshot.json and then resumes the topic's stream on the socket from the snapshot's id.
 *
 * Why from the head: the page has ~25 scripts and stylesheets, and the browser opens at most six
 * connections to one server. A fetch() made by a script, even the first one in the head, is queued
 * behind every request the HTML's preload scanner has found by then, and the body's scripts are
 * fetched and run before controller_page.js would ask: ~400 ms of a 100k-object first paint on an
 * idle machine, over a second on a loaded one. So the page's HTML lists the informers the server
 * knew when it rendered it as <link rel="preload" as="fetch" crossorigin="anonymous" data-topic>
 * at the top of its head (the browser's first requests after the page), and this file fetches the
 * same URLs in the same mode (cors, same-origin credentials), which takes the preloaded answers
 * over. The server streams the body while the browser loads the scripts
 * (dashboard/snapshot_body.py).
 *
 * The state comes as columns (?form=columns: "keys" and "values", the same pairs in key order): V8
 * parses two arrays about twice as fast as one object of 100,000 properties, and the Map is filled
 * from them without an [key, value] array per entry.
 *
 * window.ctrlscopeSnapshots.take(topic): the load started for the topic here, once (null if none);
 * load(worker, prefix, topic): a new one. Each is a promise of the snapshot {topic, id, epoch, size,
 * history, state: Map key → value}; the times it went through (ms since navigation start) are in
 * window.ctrlscopeTimings[topic].
 */
(function () {
  "use strict";
  const timings = (window.ctrlscopeTimings = window.ctrlscopeTimings || {});

  function fetchSnapshot(topic, url) {
    const marks = (timings[topic] = { fetch: performance.now() });
    // No cache option: the preload was made without one, and the answer says no-store itself.
    return fetch(url, { credentials: "same-origin" })
      .then((r) => { if (!r.ok) throw new Error("HTTP " + r.status); marks.response = performance.now(); return r.json(); })
      .then((snap) => {
        marks.parsed = performance.now();
        const state = new Map();
        for (let i = 0; i < snap.keys.length; i++) state.set(snap.keys[i], snap.values[i]);
        return { topic: snap.topic, id: snap.id, epoch: snap.epoch, size: snap.size, history: snap.history, state };
      });
  }

  function load(worker, prefix, topic) {
    // urls.js loads after this file; it is there by the time a page asks.
    return fetchSnapshot(topic, window.ctrlscopeUrl.informer(worker, topic.slice(prefix.length)) + "snapshot.json?history=500&form=columns");
  }

  const started = new Map();
  for (const link of document.querySelectorAll('link[rel="preload"][data-topic]')) {
    const p = fetchSnapshot(link.dataset.topic, link.href);
    p.catch(() => {}); // taken and handled by the page; an untaken failure is no page error
    started.set(link.dataset.topic, p);
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
