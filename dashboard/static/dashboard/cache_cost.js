/*
 * What an informer's cache costs, computed in the browser (window.ctrlscopeCacheCost): the bytes it
 * holds as JSON, the share of them in metadata.managedFields and in large annotations (over
 * BIG_ANNOTATION bytes, such as kubectl.kubernetes.io/last-applied-configuration), the objects per
 * namespace, and what a transform dropping managedFields (client-go's SetTransform, controller-runtime's
 * cache.TransformStripManagedFields) or a metadata-only informer would save.
 *
 * Where the numbers come from. The cache panel's snapshot (the informer topic's state) has every
 * cached key but only a summary per object: the counts per namespace are exact. Whole objects stay in
 * the worker (summary.py); the object inspector hands out one at a time (GET
 * /c/{worker}/informer/{informer}/object?key=, at most 10 a second per worker). So the bytes are
 * measured on a sample: up to SAMPLE keys spread evenly over the sorted keys (every namespace gets
 * its share), fetched one after the other at the inspector's pace, and scaled by the object count;
 * with SAMPLE objects or fewer every object is measured and the numbers are exact. Sizes are those
 * of the objects as the inspector returns them: a Secret's values are redacted there, so a Secret
 * cache measures smaller than it is. JSON bytes are the cache's size on the wire, not the worker's
 * heap (an object in memory is several times its JSON), but the shares and the savings hold.
 *
 *   CC.measure(obj)                  // {bytes, managed, bigAnnotations, metadataOnly, annotationNames}
 *   CC.estimate(measured, count)     // totals for `count` objects from the measured ones
 *   CC.perNamespace(keys)            // [[namespace, objects], ...], most first
 *   CC.sampleKeys(keys, n)           // n keys spread evenly over the sorted keys
 *   CC.fetchSample(url, keys, onEach, signal) // objects fetched at the inspector's pace
 */
(function (global) {
  "use strict";
  const SAMPLE = 24;
  const BIG_ANNOTATION = 1024; // bytes of one annotation's value
  const PACE_MS = 120;         // between two inspector requests: under its 10 per second
  const enc = new TextEncoder();
  const size = (v) => (v === undefined ? 0 : enc.encode(JSON.stringify(v)).length);

  // One object's bytes as JSON and the parts of them the savings are made of. A field's share counts
  // its key and separators too ("managedFields":[...],), so that dropping it saves exactly that.
  function measure(obj) {
    const meta = (obj && obj.metadata) || {};
    const bytes = size(obj);
    const field = (name, value) => (value === undefined ? 0 : size(name) + 1 + size(value) + 1);
    const managed = field("managedFields", meta.managedFields);
    let bigAnnotations = 0;
    const annotationNames = [];
    const ann = meta.annotations && typeof meta.annotations === "object" ? meta.annotations : {};
    for (const k in ann) {
      const b = size(ann[k]);
      if (b > BIG_ANNOTATION) { bigAnnotations += field(k, ann[k]); annotationNames.push(k); }
    }
    // A metadata-only informer (PartialObjectMetadata) keeps apiVersion, kind and metadata.
    const metadataOnly = size({ apiVersion: obj && obj.apiVersion, kind: obj && obj.kind, metadata: meta });
    return { bytes, managed, bigAnnotations, metadataOnly, annotationNames };
  }

  function estimate(measured, count) {
    const n = measured.length;
    const sum = (f) => measured.reduce((s, m) => s + f(m), 0);
    const scale = n ? count / n : 0;
    const bytes = sum((m) => m.bytes) * scale;
    const managed = sum((m) => m.managed) * scale;
    const big = sum((m) => m.bigAnnotations) * scale;
    const metadataOnly = sum((m) => m.metadataOnly) * scale;
    const names = new Map();
    for (const m of measured) for (const a of m.annotationNames) names.set(a, (names.get(a) || 0) + 1);
    return {
      sampled: n, count: count, exact: n === count, bytes: bytes, perObject: n ? sum((m) => m.bytes) / n : 0,
      managed: managed, managedShare: bytes ? managed / bytes : 0,
      bigAnnotations: big, bigAnnotationsShare: bytes ? big / bytes : 0,
      bigAnnotationNames: [...names].sort((a, b) => b[1] - a[1]).map(([k]) => k),
      // What each alternative would no longer hold.
      saveStripManaged: managed,
      saveMetadataOnly: bytes - metadataOnly,
      saveMetadataOnlyStripped: bytes - (metadataOnly - managed),
    };
  }

  function perNamespace(keys) {
    const counts = new Map();
    for (const k of keys) {
      const i = k.indexOf("/");
      const ns = i < 0 ? "" : k.slice(0, i);
      counts.set(ns, (counts.get(ns) || 0) + 1);
    }
    return [...counts].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  }

  function sampleKeys(keys, n) {
    const sorted = [...keys].sort();
    if (sorted.length <= n) return sorted;
    const out = [];
    for (let i = 0; i < n; i++) out.push(sorted[Math.floor(((i + 0.5) * sorted.length) / n)]);
    return out;
  }

  const sleep = (ms, signal) => new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    if (signal) signal.addEventListener("abort", () => { clearTimeout(t); reject(new Error("stopped")); }, { once: true });
  });

  // The sample's objects, one request at a time at the inspector's pace; a 429 (its rate) waits a
  // second and asks again; an object gone meanwhile (404) is skipped. onEach(done, total) reports.
  async function fetchSample(url, keys, onEach, signal) {
    const out = [];
    const errors = [];
    for (let i = 0; i < keys.length; i++) {
      let tries = 0;
      for (;;) {
        if (signal && signal.aborted) throw new Error("stopped");
        const resp = await fetch(url(keys[i]), { signal: signal, headers: { Accept: "application/json" } });
        let body = null;
        try { body = await resp.json(); } catch (e) { body = null; }
        if (resp.status === 429 && tries++ < 5) { await sleep(1000, signal); continue; }
        if (resp.ok && body && body.current) out.push(body.current);
        else if (resp.status !== 404) errors.push((body && body.error) || "HTTP " + resp.status);
        break;
      }
      onEach(i + 1, keys.length);
      if (errors.length >= 3 && !out.length) throw new Error(errors[0]);
      if (i + 1 < keys.length) await sleep(PACE_MS, signal);
    }
    return out;
  }

  global.ctrlscopeCacheCost = { SAMPLE, BIG_ANNOTATION, measure, estimate, perNamespace, sampleKeys, fetchSample };
})(window);
