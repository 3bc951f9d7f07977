/*
 * TelemetryClient: one multiplexed websocket per tab, with resume and resync.
 *
 * Per topic the client keeps a cursor (the last stream id applied) and the topic's state (a Map
 * rebuilt from each snapshot and updated by every frame's "s" changes). After a reconnect it
 * resubscribes with {since: cursor, epoch} and the server resumes exactly after the cursor, or
 * answers "resync" + a fresh snapshot when that is impossible (retention, Redis restart, slow
 * client). Every data message is acked so the server can bound what it has in flight.
 *
 * Protocol versions (controllers/schema.py, window.ctrlscopeProtocol): every frame says "v":
 * "MAJOR.MINOR" (none: 1.0, published before versioning). A frame of another major is not
 * interpreted: its state changes are not applied and its records not emitted; the topic is listed in
 * client.unsupported (topic → version), counted (stats.unsupported) and a "protocol" event tells the
 * page, which says so instead of drawing nothing. The topic's state (its snapshot, written by that
 * publisher) is dropped too: a "snapshot" event with an empty state, and later snapshots stay empty;
 * a frame of our major again asks for a fresh snapshot. A newer minor may add record kinds: a record
 * whose "k" this page does not know is dropped before "records" and counted (stats.unknown, and per
 * kind in stats.unknownKinds), so panels only ever see kinds they were written for.
 *
 * Listeners: onState(state), onRecords(topic, records, entryId, frame), onSnapshot(topic),
 * onResync(topic, reason), onTopics(list), onRedis(up), onError(err), onProtocol(topic, version).
 */
(function (global) {
  "use strict";
  const P = global.ctrlscopeProtocol;

  function cmpId(a, b) {
    const [am, as] = a.split("-").map(Number);
    const [bm, bs] = b.split("-").map(Number);
    return am !== bm ? am - bm : as - bs;
  }

  class TelemetryClient {
    constructor(url, opts) {
      this.url = url;
      this.opts = Object.assign({ autoSubscribe: true, maxBackoff: 5000, history: 50 }, opts || {});
      this.topics = new Map(); // topic -> {cursor, state: Map}
      this.knownTopics = [];
      this.epoch = "";
      this.state = "connecting"; // connecting | live | reconnecting | resyncing | unauthorized
      this.listeners = {};
      this.stats = { records: 0, frames: 0, resyncs: 0, duplicates: 0, dropped: 0, messages: 0, errors: 0, reconnects: 0,
        unsupported: 0, unknown: 0, unknownKinds: new Map() };
      this.unsupported = new Map(); // topic -> the version of its last frame, of a major this page does not speak
      this.backoff = 250;
      this.ws = null;
      this.closedByUser = false;
      this.resyncing = new Set();
      this.down = new Set(); // topics whose Redis Cluster master is out (a "status" that names topics)
    }

    // The state once nothing is connecting: a topic still out, a resync under way, or live.
    settled() { return this.down.size ? "reconnecting" : this.resyncing.size ? "resyncing" : "live"; }

    on(name, fn) { (this.listeners[name] = this.listeners[name] || []).push(fn); return this; }
    emit(name, ...args) { (this.listeners[name] || []).forEach((fn) => { try { fn(...args); } catch (e) { console.error(e); } }); }

    setState(s) { if (this.state !== s) { this.state = s; this.emit("state", s); } }

    connect() {
      this.closedByUser = false;
      const ws = new WebSocket(this.url);
      this.ws = ws;
      ws.onopen = () => { this.backoff = 250; };
      ws.onmessage = (ev) => this.handle(ev.data);
      ws.onclose = (ev) => {
        if (this.ws !== ws) return;
        this.ws = null;
        if (ev.code === 4401) { this.setState("unauthorized"); return; }
        if (this.closedByUser) return;
        this.setState("reconnecting");
        this.stats.reconnects += 1;
        const delay = this.backoff * (0.5 + Math.random());
        this.backoff = Math.min(this.backoff * 2, this.opts.maxBackoff);
        setTimeout(() => this.connect(), delay);
      };
    }

    close() { this.closedByUser = true; if (this.ws) this.ws.close(); }

    send(obj) { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(obj)); }

    subscribe(topic) {
      let t = this.topics.get(topic);
      if (!t) { t = { cursor: null, state: new Map() }; this.topics.set(topic, t); }
      const msg = { op: "sub", topic: topic };
      // opts.history: frames of context before a first snapshot; a number, or a function of the topic.
      const history = typeof this.opts.history === "function" ? this.opts.history(topic) : this.opts.history;
      if (t.cursor !== null) { msg.since = t.cursor; msg.epoch = t.epoch || this.epoch; } else if (history) msg.history = history;
      this.send(msg);
    }

    // Stop receiving a topic (and forget its state); a later subscribe starts afresh.
    unsubscribe(topic) {
      if (this.topics.delete(topic)) this.send({ op: "unsub", topic: topic });
    }

    handle(text) {
      let msg;
      try { msg = JSON.parse(text); } catch (e) { this.stats.errors += 1; return; }
      this.stats.messages += 1;
      switch (msg.t) {
        case "hello":
          this.knownTopics = msg.topics;
          this.emit("topics", msg.topics);
          this.emit("redis", msg.redis === "up");
          // Resume every topic we had; subscribe to new ones.
          for (const topic of this.topics.keys()) this.subscribe(topic);
          if (this.opts.autoSubscribe) for (const topic of msg.topics) if (!this.topics.has(topic)) this.subscribe(topic);
          this.epoch = msg.epoch || this.epoch;
          this.down.clear();
          this.setState(this.settled());
          break;
        case "topics":
          this.knownTopics = msg.topics;
          this.emit("topics", msg.topics);
          if (this.opts.autoSubscribe) for (const topic of msg.topics) if (!this.topics.has(topic)) this.subscribe(topic);
          break;
        case "snapshot": {
          const t = this.topics.get(msg.topic) || { cursor: null, state: new Map() };
          // A big snapshot arrives in parts; the state is replaced when the last one is in.
          if (!msg.part) t.incoming = new Map();
          for (const k in msg.state) t.incoming.set(k, msg.state[k]);
          if (msg.more) { this.topics.set(msg.topic, t); this.ack(msg.seq); break; }
          t.state = this.unsupported.has(msg.topic) ? new Map() : t.incoming;
          t.incoming = null;
          t.cursor = msg.id;
          this.topics.set(msg.topic, t);
          // The epoch the cursor belongs to, per topic: a Redis Cluster has one per topic (its shard's).
          if (msg.epoch) { this.epoch = msg.epoch; t.epoch = msg.epoch; }
          this.resyncing.delete(msg.topic);
          this.emit("snapshot", msg.topic, t.state);
          this.ack(msg.seq);
          if (this.state !== "unauthorized") this.setState(this.settled());
          break;
        }
        case "frames":
          for (const topic in msg.topics) this.applyEntries(topic, msg.topics[topic]);
          this.ack(msg.seq);
          break;
        case "resync":
          this.stats.resyncs += 1;
          this.resyncing.add(msg.topic);
          this.setState("resyncing");
          this.emit("resync", msg.topic, msg.reason);
          break;
        case "status":
          if (msg.topics) {
            // A Redis Cluster: only these topics' master went out or came back. The server resyncs
            // those of them a new master serves (a "resync" for each); the others go on as they were.
            for (const topic of msg.topics) if (msg.redis === "up") this.down.delete(topic); else this.down.add(topic);
            this.emit("redis", this.down.size === 0);
            this.setState(this.settled());
            break;
          }
          this.emit("redis", msg.redis === "up");
          if (msg.redis !== "up") { this.setState("reconnecting"); break; }
          // The server resyncs every subscription after a Redis outage: snapshots follow.
          for (const topic of this.topics.keys()) this.resyncing.add(topic);
          this.setState(this.settled());
          break;
        case "error":
          this.stats.errors += 1;
          // A topic the server does not know is not resubscribed on every reconnect; it is
          // subscribed again when a "topics" message lists it.
          if (msg.code === "unknown_topic" && msg.topic) this.topics.delete(msg.topic);
          this.emit("error", msg);
          break;
        default:
          break;
      }
    }

    applyEntries(topic, entries) {
      const t = this.topics.get(topic);
      if (!t) return;
      for (const [id, frame] of entries) {
        if (t.cursor !== null && cmpId(id, t.cursor) <= 0) { this.stats.duplicates += 1; continue; }
        t.cursor = id;
        this.stats.frames += 1;
        if (!P.speaks(frame.v)) {
          this.stats.unsupported += 1;
          const version = String(frame.v);
          if (this.unsupported.get(topic) !== version) {
            this.unsupported.set(topic, version);
            t.state = new Map();
            this.emit("snapshot", topic, t.state);
            this.emit("protocol", topic, version);
          }
          continue;
        }
        if (this.unsupported.delete(topic)) {
          // Readable again (the worker went back to our major): what was built meanwhile is
          // partial, so ask for a fresh snapshot, which replaces it (protocol/README.md §7).
          this.emit("protocol", topic, frame.v === undefined ? P.VERSION : frame.v);
          this.send({ op: "sub", topic: topic });
        }
        if (frame.s) {
          for (const k in frame.s) {
            if (frame.s[k] === null) t.state.delete(k); else t.state.set(k, frame.s[k]);
          }
        }
        if (frame.dropped) this.stats.dropped += frame.dropped;
        const records = this.knownRecords(frame.r);
        this.stats.records += records.length;
        this.emit("records", topic, records, id, frame);
      }
    }

    // The records of kinds this page knows (the same array when all are: the common case costs one scan).
    knownRecords(records) {
      let unknown = 0;
      for (const r of records) if (!r || !P.KNOWN_KINDS.has(r.k)) unknown += 1;
      if (!unknown) return records;
      this.stats.unknown += unknown;
      const kept = [];
      for (const r of records) {
        if (r && P.KNOWN_KINDS.has(r.k)) { kept.push(r); continue; }
        const k = String(r && r.k);
        this.stats.unknownKinds.set(k, (this.stats.unknownKinds.get(k) || 0) + 1);
      }
      return kept;
    }

    ack(seq) { if (typeof seq === "number") this.send({ op: "ack", seq: seq }); }
  }

  global.TelemetryClient = TelemetryClient;
  global.TelemetryClient.cmpId = cmpId;
})(window);
