/*
 * The controller page's Informer events: the watch events and handler calls of the informers this
 * controller watches, newest first, with the reflector's own story (LIST, WATCH from, watch ended,
 * backoff, state changes) as muted rows, consecutive bookmarks folded into one row, periodic resyncs
 * and stream resyncs as marker rows (fault_markers.js adds the injected faults). Filter (/), pause (p).
 *
 * Data: every informer topic of the worker (w/{worker}/informer/{name}); an informer's page, its own.
 * A row keeps its informer's topic, and the informer is named (api.informerName) when the row is
 * drawn: rows that arrived before the worker's components named the informer (the history loaded
 * with the page) read like the live ones, and rows are kept or hidden by topic, whichever arrived
 * first. At most MAX_EVENT_ROWS rows
 * are drawn (BUSY_EVENT_ROWS while the table is busy) and MAX_EVENT_DATA kept for re-filtering. A frame
 * adds at most MAX_ROWS_PER_FRAME rows, the newest; what it skips is counted and marked by one row,
 * and pausing redraws every kept row.
 * Registered in window.ctrlscopePanels, started by controller_page.js; api.pushEvent(row) adds a row.
 */
(function () {
  "use strict";
  const UI = window.ctrlscopeUI;
  const { el, fmtDuration, clock } = UI;
  const P = window.ctrlscopeProtocol;
  const $ = (id) => document.getElementById(id);
  const MAX_EVENT_ROWS = 300;   // drawn
  const MAX_EVENT_DATA = 2000;  // kept for re-filtering
  // Trimmed in steps of this many: dropping the oldest row on every push moved 2,000 array slots
  // per event (0.4 s of main thread per 3 s at 5,000 events/s, bench/ui.py --profile).
  const DATA_SLACK = 500;
  // Rows added per animation frame, at most: more than a screenful, fewer than anyone reads. At
  // 5,000 events/s a slow frame had 300+ new rows and rebuilt the whole table, which made the next
  // frame slower still; past this the newest rows are drawn and the rest counted (pause shows all).
  const MAX_ROWS_PER_FRAME = 50;
  // Rows drawn while the table is busy -- BUSY_RATE rows a second or more, or a frame with more new
  // rows than it draws: each frame's new rows go on top and push every drawn row down, so the browser
  // re-records the paint of all of them (bench/ui.py --trace at 5,000 events/s: the scroller's 4,450 px
  // of 300 rows, ~9 ms every frame). At those rates 300 rows are under 3 s of events, no scrollback
  // anyone reads; pausing draws every kept row again, and a calmer table grows back to MAX_EVENT_ROWS.
  // Marker rows are kept through the trim (they are few, and the rows a reader looks for).
  const BUSY_EVENT_ROWS = 60;
  const BUSY_RATE = 100;

  function init(api) {
    const { client, informerTopics, informerName, workerNow, schedule } = api;
    const events = api.events = { data: [], paused: false, heldSince: 0, filter: [], rate: new UI.Series(60), fresh: [], rebuild: true, summarised: 0, busy: false };
    // The topics of the worker's informers this controller does not watch, as of the last components
    // update: their rows stay out of the events panel (rows about anything else, e.g. fault markers,
    // always show).
    let hiddenTopics = new Set();
    let names = ""; // the informers' names as last drawn: rows are redrawn when one changes
    const rowInformer = (row) => (row.topic ? informerName(row.topic) : row.inf || "");
    api.pushEvent = pushEvent;
    Object.assign(window.ctrlscope, { events: events, setPaused: setPaused });

    client.on("resync", (topic, reason) => {
      if (!informerTopics.has(topic)) return;
      pushEvent({ marker: "stream", ts: workerNow(), topic: topic,
        text: "⟳ stream resynced (" + reason + "): cache state reloaded from a fresh snapshot" });
    });
    client.on("records", (topic, records) => { if (informerTopics.has(topic)) onInformer(topic, records); });
    api.onComponents(() => {
      const mine = api.watchedTopics();
      const topics = [...informerTopics.keys()].sort();
      const others = topics.filter((t) => mine && !mine.has(t));
      if (String(others) !== String([...hiddenTopics])) { hiddenTopics = new Set(others); events.rebuild = true; }
      const shown = topics.filter((t) => !hiddenTopics.has(t)).map(informerName).join(", ");
      if (shown !== names) {
        // A name arrived: the rows drawn so far say it too, and filter by it.
        names = shown;
        for (const row of events.data) row.lc = undefined;
        events.rebuild = true;
      }
      $("ev-informers").textContent = shown;
    });
    api.onFocus((key) => {
      filterBox.value = key;
      events.filter = key ? [key.toLowerCase()] : [];
      events.rebuild = true;
    });
    api.onKey("p", (e) => { e.preventDefault(); setPaused(!events.paused); });
    api.onKey("/", (e) => { e.preventDefault(); filterBox.focus(); filterBox.select(); });
    let lastSpark = 0;
    api.onRender((now) => {
      renderEvents();
      if (now - lastSpark >= 250) {
        lastSpark = now;
        const evs = events.rate.values(now);
        events.busy = Math.max(evs[evs.length - 2] || 0, evs[evs.length - 1] || 0) >= BUSY_RATE;
        UI.sparkline($("spark-events"), evs, "--accent");
        $("v-events").textContent = evs[evs.length - 2] || 0; // the last complete second
      }
    });
    // A row's searchable text, built the first time a filter needs it (most rows are never filtered).
    function searchText(row) {
      if (row.lc === undefined) {
        row.lc = (row.marker ? rowInformer(row) + " " + row.text
          : [rowInformer(row), row.kind, row.type, row.key, row.rv, row.handler, row.outcome, row.error].filter(Boolean).join(" ")).toLowerCase();
      }
      return row.lc;
    }
    function pushEvent(row) {
      events.data.push(row);
      if (events.data.length > MAX_EVENT_DATA + DATA_SLACK) events.data.splice(0, events.data.length - MAX_EVENT_DATA);
      if (events.paused) events.heldSince += 1;
      else {
        events.fresh.push(row);
        // A hidden tab gets no animation frames: keep only what one frame could draw, count the rest.
        if (events.fresh.length > 2 * MAX_EVENT_ROWS) { events.summarised += events.fresh.length - MAX_EVENT_ROWS; events.fresh.splice(0, events.fresh.length - MAX_EVENT_ROWS); }
      }
    }

    // Bookmarks arrive every few seconds per informer and only move the resourceVersion: consecutive
    // ones of one informer share a row ("BOOKMARK ×12", first → last rv) instead of flooding the list.
    function pushBookmark(ts, topic, rv) {
      const last = events.data[events.data.length - 1];
      if (last && last.kind === P.RecordKind.BOOKMARK && last.topic === topic) {
        last.count = (last.count || 1) + 1;
        last.ts = ts;
        last.type = P.WatchEventType.BOOKMARK + " ×" + last.count;
        last.rv = last.firstRv + " → " + rv;
        last.lc = undefined; // rebuilt when a filter asks
        if (last.tr && last.tr.isConnected) {
          last.tr.cells[0].textContent = clock(ts);
          last.tr.cells[3].textContent = last.type;
          last.tr.cells[5].textContent = last.rv;
        }
        return;
      }
      pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.BOOKMARK, meta: true, type: P.WatchEventType.BOOKMARK, rv: rv, firstRv: rv, count: 1 });
    }

    function onInformer(topic, records) {
      let syncs = 0, syncTs = 0;
      for (const r of records) {
        const ts = r.ts || workerNow();
        switch (r.k) {
          case P.RecordKind.WATCH:
            events.rate.add(ts);
            pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.WATCH, type: r.type, key: r.key, rv: r.rv });
            break;
          case P.RecordKind.HANDLER:
            events.rate.add(ts);
            pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.HANDLER, type: r.event, key: r.key, rv: r.rv, handler: r.handler,
              outcome: r.outcome, error: r.error, duration: r.duration });
            break;
          case P.RecordKind.FIFO:
            if (r.delta === P.DeltaType.SYNC && r.op === P.FifoOp.QUEUED) { syncs += 1; syncTs = ts; }
            break;
          case P.RecordKind.LIST:
            pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.LIST, meta: true, type: r.error ? "LIST failed" : "LIST " + r.items + " items", rv: r.rv,
              error: r.error, outcome: r.duration !== undefined ? fmtDuration(r.duration * 1000) : "" });
            break;
          case P.RecordKind.WATCH_START: pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.WATCH_START, meta: true, type: "WATCH from", rv: r.rv }); break;
          case P.RecordKind.WATCH_END: pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.WATCH_END, meta: true, type: "watch ended", key: r.error ? r.reason + ": " + r.error : r.reason }); break;
          case P.RecordKind.BOOKMARK: pushBookmark(ts, topic, r.rv); break;
          case P.RecordKind.BACKOFF: pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.BACKOFF, meta: true, type: "backoff " + fmtDuration((r.delay || 0) * 1000), key: r.reason }); break;
          case P.RecordKind.STATE: pushEvent({ ts: ts, topic: topic, kind: P.RecordKind.STATE, meta: true, type: r.state }); break;
          default: break;
        }
      }
      if (syncs) {
        // Periodic resync: the FIFO re-delivers every cached object as a Sync delta. One marker per burst.
        const lastRow = events.data[events.data.length - 1];
        if (lastRow && lastRow.marker === "resync" && lastRow.topic === topic && syncTs - lastRow.ts < 1000) {
          lastRow.count += syncs;
          lastRow.text = "⟳ informer resync: " + lastRow.count + " cached objects re-delivered (" + P.DeltaType.SYNC + ")";
          lastRow.lc = undefined;
          if (lastRow.tr) lastRow.tr.firstChild.textContent = clock(lastRow.ts) + "  " + rowInformer(lastRow) + "  " + lastRow.text;
        } else {
          pushEvent({ marker: "resync", ts: syncTs, topic: topic, count: syncs, text: "⟳ informer resync: " + syncs + " cached objects re-delivered (" + P.DeltaType.SYNC + ")" });
        }
      }
    }

    // Filter terms: plain words must all appear in the row; field:value terms match one field
    // (type:added, kind:handler, ns:default, name:web, key:, rv:, handler:, outcome:error, informer:).
    const FIELDS = {
      type: (r) => r.type, kind: (r) => r.kind, key: (r) => r.key, rv: (r) => r.rv, handler: (r) => r.handler,
      outcome: (r) => r.outcome, informer: rowInformer,
      ns: (r) => (r.key && r.key.includes("/") ? r.key.split("/")[0] : ""),
      name: (r) => (r.key ? r.key.split("/").pop() : ""),
    };
    function matches(row) {
      if (row.topic && hiddenTopics.has(row.topic)) return false; // another controller's informer
      if (row.marker) return true; // markers stay visible whatever the filter: they explain gaps
      for (const term of events.filter) {
        const colon = term.indexOf(":");
        const field = colon > 0 ? FIELDS[term.slice(0, colon)] : null;
        if (field) { if (!String(field(row) || "").toLowerCase().includes(term.slice(colon + 1))) return false; }
        else if (!searchText(row).includes(term)) return false;
      }
      return true;
    }

    // Rows are clones of one template (eight cells, fixed classes) filled with textContent: a
    // fifth of the cost of building each cell with el() at thousands of rows a second.
    const SKIPPED_TEMPLATE = el("tr", { className: "ev-skipped" }, el("td", { colSpan: 8 }));
    // On a controller's page an object's key links to its page under the controller (its story);
    // an informer's page has no controller to tell it.
    const keyPages = api.page.kind === P.ComponentKind.CONTROLLER;
    const ROW_TEMPLATE = el("tr", null, el("td"), el("td"), el("td"), el("td", { className: "type" }),
      el("td", { className: "key" }), el("td"), el("td"), el("td", { className: "outcome" }));
    function eventRow(row) {
      let tr;
      if (row.marker) {
        tr = el("tr", { className: "resync-marker marker-" + row.marker }, el("td", { colSpan: 8 }, clock(row.ts) + "  " + rowInformer(row) + "  " + row.text));
      } else {
        const focus = api.focusKey();
        tr = ROW_TEMPLATE.cloneNode(true);
        tr.className = "ev-" + row.kind + (row.meta ? " meta" : "") + (row.outcome === P.HandlerOutcome.ERROR ? " outcome-error" : "") + (focus && row.key === focus ? " focus" : "");
        const c = tr.cells;
        c[0].textContent = clock(row.ts);
        c[1].textContent = rowInformer(row);
        c[2].textContent = row.kind;
        c[3].className = "type type-" + String(row.type || "").split(" ")[0];
        if (row.type) c[3].textContent = row.type;
        if (row.key && keyPages) c[4].append(el("a", { className: "key-link", href: window.ctrlscopeUrl.key(api.page.worker, api.page.controller, row.key) }, row.key));
        else if (row.key) c[4].textContent = row.key;
        if (row.rv) c[5].textContent = row.rv;
        if (row.handler) { c[6].textContent = row.handler; c[6].title = row.handler; }
        if (row.error) c[7].title = row.error;
        const outcome = row.outcome === P.HandlerOutcome.ERROR ? "error: " + (row.error || "") : row.outcome || "";
        if (outcome) c[7].textContent = outcome;
      }
      row.tr = tr;
      return tr;
    }

    function renderEvents() {
      const tbody = $("ievents");
      if (events.paused) {
        $("paused-note").textContent = "paused: " + events.heldSince.toLocaleString() + " new events held (p to resume)";
        if (!events.rebuild) return;
      }
      if (events.rebuild) {
        // Every kept row in order, newest first: after a resume, a filter change, and on pause (the
        // rows a busy frame skipped are drawn then); paused, the held rows (the newest) stay out.
        events.rebuild = false;
        events.fresh = [];
        const rows = [];
        const end = events.paused ? Math.max(0, events.data.length - events.heldSince) : events.data.length;
        for (let i = end - 1; i >= 0 && rows.length < MAX_EVENT_ROWS; i--) if (matches(events.data[i])) rows.push(eventRow(events.data[i]));
        tbody.replaceChildren(...rows);
        if (events.paused) return;
      } else if (events.fresh.length) {
        const frag = document.createDocumentFragment();
        const fresh = events.fresh;
        let n = 0, i = fresh.length - 1;
        for (; i >= 0 && n < MAX_ROWS_PER_FRAME; i--) {
          if (matches(fresh[i])) { frag.appendChild(eventRow(fresh[i])); n += 1; }
        }
        // What this frame could not draw: counted, and one row in the table says where it is missing
        // (pausing draws everything kept, in order). Marker rows (stream resyncs, faults) are drawn
        // anyway, below that row: they are what a reader looks for in a burst, and a resync's marker
        // arrives with the burst of rows the resync reloads.
        let skipped = 0;
        const markers = [];
        for (; i >= 0; i--) {
          if (!matches(fresh[i])) continue;
          if (fresh[i].marker) markers.push(eventRow(fresh[i]));
          else skipped += 1;
        }
        events.fresh = [];
        if (skipped) {
          events.summarised += skipped;
          frag.appendChild(SKIPPED_TEMPLATE.cloneNode(true));
          frag.lastChild.firstChild.textContent = "⋯ " + skipped.toLocaleString() + " more not drawn here (pause, p, draws them)";
        }
        for (const tr of markers) { frag.appendChild(tr); n += 1; }
        if (n) {
          tbody.insertBefore(frag, tbody.firstChild);
          // The overflow past MAX_EVENT_ROWS in one range deletion: deleteRow(-1) in a loop re-counted
          // the live tbody.rows after every removal.
          const rows = tbody.rows;
          if (rows.length > MAX_EVENT_ROWS) {
            const extra = document.createRange();
            extra.setStartBefore(rows[MAX_EVENT_ROWS]);
            extra.setEndAfter(tbody.lastChild);
            extra.deleteContents();
          }
          // Busy: the rows past BUSY_EVENT_ROWS go too, except marker rows (stream resyncs, faults):
          // they are rare, and what a reader looks for in a burst, and a relist right after a resync
          // would otherwise push its marker out within two frames. The MAX_EVENT_ROWS bound above
          // still holds for them.
          if ((skipped || events.busy) && rows.length > BUSY_EVENT_ROWS) {
            for (const tr of Array.prototype.slice.call(rows, BUSY_EVENT_ROWS)) {
              if (!tr.classList.contains("resync-marker")) tr.remove();
            }
          }
        }
      }
      const note = events.summarised ? "(" + events.summarised.toLocaleString() + " counted, not drawn: faster than frames; pause (p) draws them)" : "";
      const pausedNote = $("paused-note");
      if (pausedNote.textContent !== note) pausedNote.textContent = note;
    }

    function setPaused(p) {
      events.paused = p;
      const b = $("pause");
      b.textContent = p ? "resume (p)" : "pause (p)";
      b.setAttribute("aria-pressed", String(p));
      b.classList.toggle("on", p);
      $("events-panel").classList.toggle("paused", p);
      if (!p) events.heldSince = 0;
      events.rebuild = true;
      schedule();
    }
    $("pause").addEventListener("click", () => setPaused(!events.paused));
    const filterBox = $("filter");
    filterBox.addEventListener("input", () => {
      events.filter = filterBox.value.toLowerCase().split(/\s+/).filter(Boolean);
      events.rebuild = true; schedule();
    });
    if (api.focusKey()) { filterBox.value = api.focusKey(); events.filter = [api.focusKey().toLowerCase()]; }
  }

  (window.ctrlscopePanels = window.ctrlscopePanels || []).push(init);
})();
