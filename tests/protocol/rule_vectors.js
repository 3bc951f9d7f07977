// Runs the rule vectors through the browser's own functions (protocol.js, as every page loads it)
// under Node: protocol/vectors/liveness/*.json through ctrlscopeProtocol.workerLiveness (which
// presence.js applies on every page), protocol/vectors/names/*.json through ctrlscopeProtocol.topicPart,
// protocol/vectors/backoff/*.json through ctrlscopeProtocol.limiterStep and limiterDelay (the timeline
// and queue panels').
// Prints one JSON line per vector, {name, got}; tests/protocol/test_vectors_js.py compares it with
// the vectors' expectations.
// Usage: node rule_vectors.js STATIC_DIR VOCABULARY_JSON (liveness|names|backoff) VECTOR...
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

const [staticDir, vocabularyFile, family, ...vectorFiles] = process.argv.slice(2);
const vocabulary = fs.readFileSync(vocabularyFile, "utf8");
const sandbox = { document: { getElementById: (id) => (id === "cs-protocol" ? { textContent: vocabulary } : null) } };
sandbox.window = sandbox;
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(path.join(staticDir, "protocol.js"), "utf8"), sandbox, { filename: "protocol.js" });
const P = sandbox.ctrlscopeProtocol;

const run = {
  liveness: (vector) => Object.fromEntries(Object.entries(vector.workers).map(([worker, c]) =>
    [worker, P.workerLiveness(vector.publishers, worker, vector.now, c.last_frame)])),
  names: (vector) => vector.cases.map(([name]) => [name, P.topicPart(name)]),
  backoff: (vector) => vector.cases.map(([n, delay]) => {
    const step = P.limiterStep(vector.rate_limiter, n, delay);
    return [n, delay, step ? step.type : null, P.limiterDelay(vector.rate_limiter, n + 1)];
  }),
}[family];
if (!run) throw new Error("unknown family " + family);
for (const file of vectorFiles) {
  const vector = JSON.parse(fs.readFileSync(file, "utf8"));
  process.stdout.write(JSON.stringify({ name: vector.name, got: run(vector) }) + "\n");
}
