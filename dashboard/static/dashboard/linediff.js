/*
 * A line diff (Myers' O(ND) algorithm, "An O(ND) Difference Algorithm and Its Variations", 1986) and
 * its presentation as hunks with a few lines of context, for the object inspector's old → new tab.
 *
 * diffLines(a, b) returns rows {op: " " | "-" | "+", text} that turn `a` into `b` with the fewest
 * removed + added lines. The common prefix and suffix are skipped first (an update usually changes a
 * few lines of a long object), then Myers walks the edit graph keeping, per edit count d, only the
 * furthest-reaching x of each diagonal in [-d, d] (O(D²) memory for the backtrack). Past MAX_EDITS
 * edits the middle is reported as removed-then-added: still a correct diff, just not a minimal one,
 * and the page never spends seconds on two unrelated objects.
 *
 * hunks(rows, context) keeps `context` unchanged lines around each change and folds every longer
 * unchanged run into one {fold: n, rows} entry the page can expand.
 */
(function (global) {
  "use strict";
  const MAX_EDITS = 2000;

  // The middle part (no common prefix/suffix): Myers with a trace of each round's diagonals.
  function myers(a, b) {
    const n = a.length, m = b.length, limit = Math.min(n + m, MAX_EDITS);
    const offset = limit + 1;
    const v = new Int32Array(2 * limit + 3);
    const trace = [];
    for (let d = 0; d <= limit; d++) {
      for (let k = -d; k <= d; k += 2) {
        let x = k === -d || (k !== d && v[offset + k - 1] < v[offset + k + 1]) ? v[offset + k + 1] : v[offset + k - 1] + 1;
        let y = x - k;
        while (x < n && y < m && a[x] === b[y]) { x++; y++; }
        v[offset + k] = x;
        if (x >= n && y >= m) { trace.push(v.slice(offset - d, offset + d + 1)); return backtrack(trace, a, b); }
      }
      trace.push(v.slice(offset - d, offset + d + 1)); // trace[d][k + d]: furthest x on diagonal k after d edits
    }
    return null;
  }

  function backtrack(trace, a, b) {
    const rows = [];
    let x = a.length, y = b.length;
    for (let d = trace.length - 1; d > 0; d--) {
      const prev = trace[d - 1], k = x - y;
      const down = k === -d || (k !== d && prev[k - 1 + d - 1] < prev[k + 1 + d - 1]);
      const pk = down ? k + 1 : k - 1;
      const px = prev[pk + d - 1], py = px - pk;
      while (x > px && y > py) rows.push({ op: " ", text: a[--x] }), y--;
      if (down) rows.push({ op: "+", text: b[--y] }); else rows.push({ op: "-", text: a[--x] });
    }
    while (x > 0 && y > 0) rows.push({ op: " ", text: a[--x] }), y--;
    return rows.reverse();
  }

  /** The rows that turn lines `a` into lines `b` (strings compared with ===). */
  function diffLines(a, b) {
    let start = 0;
    while (start < a.length && start < b.length && a[start] === b[start]) start++;
    let endA = a.length, endB = b.length;
    while (endA > start && endB > start && a[endA - 1] === b[endB - 1]) { endA--; endB--; }
    const midA = a.slice(start, endA), midB = b.slice(start, endB);
    const middle = myers(midA, midB) ||
      [...midA.map((text) => ({ op: "-", text })), ...midB.map((text) => ({ op: "+", text }))];
    return [...a.slice(0, start).map((text) => ({ op: " ", text })), ...middle,
      ...a.slice(endA).map((text) => ({ op: " ", text }))];
  }

  /** Rows with unchanged runs longer than 2 × context (+1) folded: [{row} | {fold: n, rows}]. */
  function hunks(rows, context) {
    const keep = new Uint8Array(rows.length);
    rows.forEach((r, i) => {
      if (r.op === " ") return;
      for (let j = Math.max(0, i - context); j <= Math.min(rows.length - 1, i + context); j++) keep[j] = 1;
    });
    const out = [];
    for (let i = 0; i < rows.length;) {
      if (keep[i]) { out.push({ row: rows[i] }); i++; continue; }
      let j = i;
      while (j < rows.length && !keep[j]) j++;
      if (j - i === 1) out.push({ row: rows[i] }); // folding one line saves nothing
      else out.push({ fold: j - i, rows: rows.slice(i, j) });
      i = j;
    }
    return out;
  }

  global.ctrlscopeDiff = { diffLines, hunks, MAX_EDITS };
})(window);
