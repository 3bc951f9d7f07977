// Runs protocol/vectors/derive/*.json through the browser's TelemetryClient (telemetry.js) under
// Node, with the page's protocol vocabulary (protocol.js reading cs-protocol). Prints one JSON
// line per vector with what the client derived; tests/protocol/test_vectors_js.py compares it.
// Usage: node derive_vectors.js STATIC_DIR VOCABULARY_JSON VECTOR...
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const [staticDir, vocabularyFile, ...vectorFiles] = process.argv.slice(2);
const vocabulary = fs.readFileSync(vocabularyFile, "utf8");
const sandbox = {
  console,
  document: { getElementById: (id) => (id === "cs-protocol" ? { textContent: vocabulary } : null) },
  setTimeout, clearTimeout,
};
sandbox.window = sandbox;
vm.createContext(sandbox);
for (const file of ["protocol.js", "telemetry.js"]) {
  vm.runInContext(fs.readFileSync(path.join(staticDir, file), "utf8"), sandbox, { filename: file });
}

for (const file of vectorFiles) {
  const vector = JSON.parse(fs.readFileSync(file, "utf8"));
  const client = new sandbox.TelemetryClient("ws://unused/", { autoSubscribe: false });
  const sent = [];
  client.send = (msg) => sent.push(msg);
  const handedOn = [];
  const seen = [];
  client.on("records", (topic, records, id) => { if (records.length) handedOn.push([id, records]); });
  client.on("protocol", (topic, version) => { if (!sandbox.ctrlscopeProtocol.speaks(version) && !seen.includes(version)) seen.push(version); });
  let seq = 0;
  const snapshot = (snap) => client.handle(JSON.stringify({ t: "snapshot", seq: ++seq, topic: vector.topic, id: snap.id,
    epoch: "e", part: 0, more: false, state: snap.state }));
  client.subscribe(vector.topic);
  sent.length = 0;
  snapshot(vector.snapshot);
  for (const entry of vector.entries) {
    client.handle(JSON.stringify({ t: "frames", seq: ++seq, topics: { [vector.topic]: [entry] } }));
  }
  if (vector.later_snapshot) snapshot(vector.later_snapshot);
  const t = client.topics.get(vector.topic);
  process.stdout.write(JSON.stringify({
    name: vector.name,
    state: Object.fromEntries(t.state),
    cursor: t.cursor,
    records: handedOn,
    duplicates: client.stats.duplicates,
    dropped: client.stats.dropped,
    unknown_records: client.stats.unknown,
    unsupported: client.unsupported.has(vector.topic) ? client.unsupported.get(vector.topic) : null,
    unsupported_seen: seen,
    needs_snapshot: sent.some((m) => m.op === "sub" && m.topic === vector.topic && m.since === undefined),
  }) + "\n");
}
