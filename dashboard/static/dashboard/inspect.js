/*
 * The object inspector in the cache panel's details pane: on a click (never on a frame) it asks the
 * dashboard for one object (GET /c/<worker>/informer/<informer>/object?key=, which asks the worker
 * through Redis and waits at most 2 s) and shows it as YAML, with the lines whose values the worker
 * redacted marked, and a "diff (old → new)" tab: the last (old, new) pair an update handler received,
 * both rendered as YAML and diffed line by line (added and removed lines coloured, unchanged runs
 * folded to CONTEXT lines around each change). Errors (worker not running, no answer, Redis down,
 * unknown key) are shown as the server words them, with a retry button; a request the server does
 * not answer within CLIENT_TIMEOUT_MS is given up, so the pane never waits forever.
 */
(function (global) {
  "use strict";
  const U = window.ctrlscopeUrl; // the dashboard's URLs under its path prefix (urls.js)
  const { el, clock } = global.ctrlscopeUI;
  const { toYamlLines } = global.ctrlscopeYaml;
  const { diffLines, hunks } = global.ctrlscopeDiff;

  const CONTEXT = 3;
  const CLIENT_TIMEOUT_MS = 6000;
  const MAX_DIFF_ROWS = 4000; // DOM rows; the rest is counted

  function yamlBlock(lines) {
    // Plain text in runs; redacted lines are spans (CSS adds the "redacted" marker).
    const pre = el("pre", { className: "obj-yaml" });
    let run = [];
    const flush = () => { if (run.length) { pre.append(run.join("\n") + "\n"); run = []; } };
    for (const line of lines) {
      if (!line.redacted) { run.push(line.text); continue; }
      flush();
      pre.append(el("span", { className: "redacted", title: "redacted in the worker: this value never left it" }, line.text), "\n");
    }
    flush();
    return pre;
  }

  function diffRow(row) {
    const cls = row.op === "+" ? "add" : row.op === "-" ? "del" : "ctx";
    return el("div", { className: "dl " + cls + (row.redacted ? " redacted-row" : "") },
      el("span", { className: "sign", "aria-hidden": "true" }, row.op), el("span", { className: "txt" }, row.text));
  }

  function diffBlock(oldLines, newLines) {
    const redacted = new Set([...oldLines, ...newLines].filter((l) => l.redacted).map((l) => l.text));
    const rows = diffLines(oldLines.map((l) => l.text), newLines.map((l) => l.text));
    for (const r of rows) r.redacted = redacted.has(r.text);
    const added = rows.filter((r) => r.op === "+").length, removed = rows.filter((r) => r.op === "-").length;
    const box = el("div", { className: "obj-diff", role: "table", "aria-label": "line diff, old to new" });
    let drawn = 0, hidden = 0;
    for (const h of hunks(rows, CONTEXT)) {
      if (drawn >= MAX_DIFF_ROWS) { hidden += h.fold ? h.fold : 1; continue; }
      if (h.row) { box.append(diffRow(h.row)); drawn++; continue; }
      const fold = el("button", { type: "button", className: "dl fold" }, "⋯ " + h.fold + " unchanged line" + (h.fold === 1 ? "" : "s"));
      fold.addEventListener("click", () => fold.replaceWith(...h.rows.map(diffRow)));
      box.append(fold);
      drawn++;
    }
    if (hidden) box.append(el("div", { className: "dl more muted" }, hidden.toLocaleString() + " more lines not drawn"));
    const stat = el("span", { className: "diff-stat" }, el("span", { className: "plus" }, "+" + added), " ",
      el("span", { className: "minus" }, "−" + removed));
    return { box, stat, changed: added + removed };
  }

  function create(box, { worker }) {
    // cacheRv: the selected key's rv in the page's cache summary (null: not in it; undefined: not told yet).
    let ctl = null, shown = null, tab = "yaml", answer = null, error = null, cacheRv;

    function url(informer, key) {
      return U("/c/" + encodeURIComponent(worker) + "/informer/" + encodeURIComponent(informer) +
        "/object?key=" + encodeURIComponent(key));
    }

    async function load(informer, key) {
      if (ctl) ctl.abort();
      const mine = ctl = new AbortController();
      shown = { informer, key }; answer = null; error = null; cacheRv = undefined;
      render();
      const timer = setTimeout(() => mine.abort("timeout"), CLIENT_TIMEOUT_MS);
      try {
        const resp = await fetch(url(informer, key), { signal: mine.signal, headers: { Accept: "application/json" } });
        let body = null;
        try { body = await resp.json(); } catch (e) { body = null; }
        if (mine !== ctl) return;
        if (resp.ok && body) answer = body;
        else error = { status: resp.status, text: (body && body.error) || resp.statusText || "the dashboard answered " + resp.status };
      } catch (e) {
        if (mine !== ctl) return;
        error = { status: 0, text: mine.signal.aborted ? "no answer from the dashboard server within " + CLIENT_TIMEOUT_MS / 1000 + " s"
          : "cannot reach the dashboard server: " + e.message };
      } finally {
        clearTimeout(timer);
      }
      ctl = null;
      render();
    }

    function clear() {
      if (ctl) ctl.abort();
      ctl = null; shown = null; answer = null; error = null;
      box.replaceChildren();
    }

    // The cache summary's rv, on every details refresh: says when the shown object is out of date.
    function noteCacheRv(rv) {
      if (rv === cacheRv) return;
      cacheRv = rv;
      if (answer) render();
    }

    function tabButton(name, label) {
      const b = el("button", { type: "button", role: "tab", className: "tab" + (tab === name ? " on" : ""), dataset: { tab: name } }, label);
      b.setAttribute("aria-selected", tab === name ? "true" : "false");
      return b;
    }

    function render() {
      if (!shown) return;
      const reload = el("button", { type: "button", className: "obj-reload", title: "ask the worker again" }, error ? "retry" : "reload");
      reload.addEventListener("click", () => load(shown.informer, shown.key));
      if (!answer && !error) {
        box.replaceChildren(el("p", { className: "muted obj-status" }, "asking worker " + worker + " for the object…"));
        return;
      }
      if (error) {
        box.replaceChildren(el("div", { className: "obj-error", role: "alert" },
          el("b", null, error.status ? "HTTP " + error.status + ": " : ""), error.text, " ", reload));
        return;
      }
      const a = answer, u = a.update;
      const latest = u ? (u.new || a.current) : null;
      const meta = a.cached ? [el("span", null, "rv ", el("b", { className: "obj-rv" }, a.current_rv || "?"), " in the cache")]
        : [el("span", { className: "badge bad" }, "deleted"), el("span", null, "last seen at rv ", el("b", { className: "obj-rv" }, u.new_rv || "?"))];
      if (a.cached && cacheRv === null) meta.push(el("span", { className: "badge warn" }, "deleted from the cache since"));
      else if (a.cached && cacheRv && cacheRv !== a.current_rv) meta.push(el("span", { className: "badge warn" }, "the cache has rv " + cacheRv + " now"));
      meta.push(el("span", { className: "spacer" }), reload);
      const object = a.cached ? a.current : latest;
      const lines = toYamlLines(object, a.redacted);
      const nRedacted = lines.filter((l) => l.redacted).length;
      const tabs = el("div", { className: "tabs", role: "tablist" }, tabButton("yaml", "YAML"), tabButton("diff", "diff (old → new)"));
      let content;
      if (tab === "yaml") {
        content = [
          a.cached ? null : el("p", { className: "muted obj-note" }, "not in the cache any more: its last state as handler " + u.handler + " saw it (rv " + u.new_rv + ")"),
          nRedacted ? el("p", { className: "obj-note redacted-note" }, el("span", { className: "badge redacted-badge" }, "Redacted"),
            " " + nRedacted + " value" + (nRedacted === 1 ? "" : "s") + " redacted in the worker (Secret data never leaves it; the #fingerprint changes when a value does)") : null,
          yamlBlock(lines)];
      } else if (!u) {
        content = [el("p", { className: "muted obj-note diff-none" }, (a.note || "no update seen since the worker started") + ": only the current version is known.")];
      } else {
        const diff = diffBlock(toYamlLines(a.previous, a.redacted), toYamlLines(latest, a.redacted));
        content = [
          el("p", { className: "obj-note diff-head" }, "rv ", el("b", null, u.old_rv || "?"), " → ", el("b", null, u.new_rv || "?"),
            " as handler ", el("code", null, u.handler), " received it at ", clock(u.at), " (worker time) · ", diff.stat),
          u.new && a.cached ? el("p", { className: "muted obj-note" }, "the cache has moved on to rv " + a.current_rv + " since (no update handler call for it yet)") : null,
          diff.changed ? diff.box : el("p", { className: "muted obj-note" }, "no difference in the redacted YAML (only redacted values or fields outside it changed)")];
      }
      box.replaceChildren(el("div", { className: "obj-meta" }, ...meta), tabs,
        el("div", { className: "obj-body", role: "tabpanel" }, ...content.filter(Boolean)));
    }

    box.addEventListener("click", (e) => {
      const t = e.target.closest("button.tab[data-tab]");
      if (t && t.dataset.tab !== tab) { tab = t.dataset.tab; render(); }
    });

    return { load, clear, noteCacheRv };
  }

  global.ctrlscopeInspect = { create };
})(window);
