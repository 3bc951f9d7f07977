/*
 * window.ctrlscopeProtocol: telemetry protocol v1's vocabulary, as the server hands it to the page.
 *
 * controllers/schema.py is the one definition of every name a publisher and the dashboard share
 * (record kinds, queue ops, reconcile results, delta and watch event types, topic layout, the protocol
 * version). base.html embeds its browser_vocabulary() as <script id="cs-protocol">, and this script
 * (loaded before every other one) turns it into frozen enums and the topic helpers the panels use:
 *
 *   const P = window.ctrlscopeProtocol;
 *   if (r.k === P.RecordKind.QUEUE && P.QUEUE_ADDS.has(r.op)) ...
 *   P.workerTopic(worker, P.TopicKind.QUEUE, name)  // "w/{worker}/queue/{name}"
 *   P.parseTopic(topic)                              // {worker, kind, name, leaderLock} | null
 *
 * Scripts spell no protocol string themselves: tests/protocol/test_js_vocabulary.py fails on a raw
 * literal compared with a record field, and on a P.<Enum>.<MEMBER> the schema does not define.
 */
(function (global) {
  "use strict";
  const V = JSON.parse(document.getElementById("cs-protocol").textContent);
  const T = V.topics;

  // Every {MEMBER: value} object of the vocabulary is an enum (RecordKind, QueueOp, ...).
  const P = { VERSION: V.version, MAJOR: V.major, ENUMS: [] };
  for (const name in V) {
    const v = V[name];
    if (name === "topics" || !v || typeof v !== "object" || Array.isArray(v)) continue;
    P[name] = Object.freeze(Object.assign({}, v));
    P.ENUMS.push(name);
  }
  P.QUEUE_ADDS = new Set(V.QUEUE_ADDS);        // ops that are an Add by someone: the queue's input
  P.FAILED_RESULTS = new Set(V.FAILED_RESULTS); // reconcile results counted as errors
  P.RETRIED_ERROR_KINDS = new Set(V.RETRIED_ERROR_KINDS); // error kinds a framework runs the handler again after
  P.KEY_FINDINGS = new Set(V.KEY_FINDINGS);     // v1.7: findings about a key (the others are an informer's)
  P.KNOWN_KINDS = new Set(Object.values(P.RecordKind));
  P.INFORMER_SCOPE_FIELDS = Object.freeze([...V.INFORMER_SCOPE_FIELDS]); // v1.3: what may narrow an informer
  P.WORKER_PREFIX = T.worker_prefix;
  P.LEADER_PREFIX = T.leader_prefix;
  P.FAULTS_TOPIC = T.faults;
  P.SCENARIOS_TOPIC = T.scenarios;
  P.SCOREBOARD_TABLE = T.scoreboard_table;
  const NAMED_KINDS = new Set(V.NAMED_KINDS);
  // "u": one match per code point, as schema.topic_part (an emoji is one "_", not two UTF-16 halves).
  const UNSAFE = new RegExp(T.unsafe, "gu");
  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const WORKER_TOPIC = new RegExp("^" + escape(T.worker_prefix) + "(" + T.segment + ")/([a-z]+)(?:/(" + T.segment + "))?$");
  const KINDS = new Set(Object.values(P.TopicKind));

  // schema.topic_part: a name made safe for one topic segment ("/" and other unsafe characters → "_";
  // protocol/vectors/names/). After the replacement every character is ASCII, so slice counts code points.
  P.topicPart = (name) => String(name).replace(UNSAFE, "_").slice(0, 120) || "_";

  // schema.worker_topic: w/{worker}/{kind}[/{name}] from raw names.
  P.workerTopic = function (worker, kind, name) {
    if (!KINDS.has(kind)) throw new Error("not a topic kind: " + kind);
    const base = T.worker_prefix + P.topicPart(worker) + "/" + kind;
    const named = NAMED_KINDS.has(kind);
    if (named !== (name !== undefined && name !== null)) throw new Error("a " + kind + " topic " + (named ? "needs a name" : "has no name"));
    return named ? base + "/" + P.topicPart(name) : base;
  };

  // The prefix every topic of one kind of a worker starts with ("w/{worker}/informer/").
  P.workerTopicPrefix = (worker, kind) => T.worker_prefix + P.topicPart(worker) + "/" + kind + "/";

  // "leader-{lock}" → the lock's name; null for any other controller name.
  P.leaderLock = (name) => (typeof name === "string" && name.startsWith(T.leader_prefix) ? name.slice(T.leader_prefix.length) : null);

  // schema.parse_topic: {worker, kind, name, leaderLock} of a worker topic; null for a global topic
  // or anything unknown (a reader skips topics it does not understand instead of failing).
  P.parseTopic = function (topic) {
    const m = WORKER_TOPIC.exec(topic);
    if (!m || !KINDS.has(m[2])) return null;
    const name = m[3] === undefined ? null : m[3];
    if ((name === null) === NAMED_KINDS.has(m[2])) return null;
    return { worker: m[1], kind: m[2], name: name,
      leaderLock: m[2] === P.TopicKind.CONTROLLER ? P.leaderLock(name) : null };
  };

  // w/{worker}/status/{table} of the scenario scoreboard.
  P.scoreboardTopic = function (topic) {
    const p = P.parseTopic(topic);
    return p && p.kind === P.TopicKind.STATUS && p.name === T.scoreboard_table ? p : null;
  };

  // A w/{worker}/components state entry is keyed {kind}/{name}.
  P.componentKey = (kind, name) => kind + "/" + name;

  // schema.version_major: the major of "MAJOR.MINOR"; a frame without "v" predates versioning (1);
  // null for anything unreadable (which no reader interprets either).
  P.major = function (v) {
    if (v === undefined || v === null) return 1;
    if (typeof v !== "string") return null;
    const m = /^([0-9]+)(?:\.([0-9]+))?$/.exec(v);
    return m ? Number(m[1]) : null;
  };
  // Whether this page can interpret data of version v (same major; a newer minor only adds).
  P.speaks = (v) => P.major(v) === P.MAJOR;

  // Liveness: the one rule (schema.worker_liveness; protocol/redis-layout.md, "Liveness"). Times are
  // ms of one clock (the dashboard's pages use the server's, presence.js).
  P.ALIVE_MS = V.alive_ms;
  P.FRAME_STALE_MS = V.frame_stale_ms;
  const ms = (v) => (typeof v === "number" ? v : 0);
  // schema.run_alive: a presence entry's run is alive (not stopped, seen at most ALIVE_MS ago).
  P.runAlive = (entry, now) => !entry.stopped && now - ms(entry.seen) <= V.alive_ms;
  // schema.worker_run: the worker's newest run (role worker, name its topic segment), or null.
  P.workerRun = function (publishers, worker) {
    let best = null;
    for (const p of publishers || []) {
      if (p.role !== V.worker_role || p.name !== worker) continue;
      if (!best || ms(p.started) > ms(best.started) || (ms(p.started) === ms(best.started) && ms(p.seen) > ms(best.seen))) best = p;
    }
    return best;
  };
  // schema.worker_liveness: a P.Liveness. Presence decides when the worker keeps an entry (an idle
  // worker sends no frame for minutes and is live); without one, its last components or metrics
  // frame (lastFrame, null: none) must be at most FRAME_STALE_MS old.
  P.workerLiveness = function (publishers, worker, now, lastFrame) {
    const run = P.workerRun(publishers, worker);
    if (run) return P.runAlive(run, now) ? P.Liveness.LIVE : P.Liveness.STOPPED;
    return typeof lastFrame === "number" && now - lastFrame <= V.frame_stale_ms ? P.Liveness.LIVE : P.Liveness.STALE;
  };

  // v1.5: a workqueue's rate limiter, as its controller component describes it (a RateLimiterSpec;
  // schema.rate_limiter_delay / rate_limiter_step, fixed by protocol/vectors/backoff/).
  // limiterDelay: the delay of a key's n-th retry after a forget (n ≥ 1) from the per-key parts,
  // assuming the token buckets have tokens; null when the spec does not say.
  const RL = P.RateLimiterType;
  P.limiterDelay = function (spec, n) {
    if (!spec || typeof spec !== "object" || !(n >= 1)) return null;
    if (spec.type === RL.EXPONENTIAL) return n > 1000 ? Number(spec.max) : Math.min(spec.base * Math.pow(2, n - 1), spec.max);
    if (spec.type === RL.FAST_SLOW) return Number(n <= spec.fast_attempts ? spec.fast : spec.slow);
    if (spec.type === RL.BUCKET) return 0;
    if (spec.type === RL.MAX_OF) {
      const known = (spec.of || []).map((s) => P.limiterDelay(s, n)).filter((d) => d !== null);
      return known.length ? Math.max(...known) : null;
    }
    return null;
  };
  // limiterStep: the part of the limiter that chose `delay` for a key's n-th retry (the leaf spec),
  // or null: the first per-key part whose delay it is; else, for a delay no shorter than every
  // per-key one, the token bucket; else a limiter the publisher could not describe.
  P.limiterStep = function (spec, n, delay) {
    const leaves = [];
    const walk = (s) => { if (s && typeof s === "object") { if (s.type === RL.MAX_OF) (s.of || []).forEach(walk); else leaves.push(s); } };
    walk(spec);
    for (const leaf of leaves) {
      if (leaf.type === RL.BUCKET || leaf.type === RL.OTHER) continue;
      const expected = P.limiterDelay(leaf, n);
      if (expected !== null && Math.abs(delay - expected) <= 1e-6 + 1e-3 * expected) return leaf;
    }
    const longest = P.limiterDelay(spec, n) || 0;
    for (const leaf of leaves) if (leaf.type === RL.BUCKET && delay >= longest - 1e-6) return leaf;
    for (const leaf of leaves) if (leaf.type === RL.OTHER) return leaf;
    return null;
  };

  global.ctrlscopeProtocol = Object.freeze(P);
})(window);
