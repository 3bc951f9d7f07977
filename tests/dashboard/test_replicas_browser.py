"""Two dashboard replicas behind a real load balancer: kill one, every tab resumes on the other.

Two daphne processes (same Redis, same key prefix, same database) behind Debian's haproxy on a
loopback port (``balance leastconn``: the websockets are long-lived, so new ones go to the replica
with fewer; a health check on ``/healthz`` takes a dead replica out within about a second, and
``option redispatch`` sends a connection refused by it to the other one meanwhile). A RedisPublisher
in this process publishes the synthetic load (``SyntheticLoad``: every record has a gap-free ``seq``)
at 1,000 observations/s. Five headless Chromium tabs open the overview through haproxy with its
developer view open (it subscribes to every topic, the ``synthetic`` one included), each with a
recorder (``RECORDER_JS``) noting the client's states, resyncs with their reasons, what ``#conn``
showed, and per topic the stream ids and frame seqs it applied and, on the synthetic topic, every
record seq.

Which replica each tab's websocket landed on: haproxy names the server in a response header
(``X-Ctrlscope-Replica``) of the websocket handshake, which the tab's DevTools session reports
(``Network.webSocketHandshakeResponseReceived``); each daphne's access log counts its WSCONNECTs as a
cross-check. The test asserts both replicas have tabs, SIGKILLs the one with more, and checks that:

- every tab that was on it showed reconnecting and then live again, now on the other replica; the
  tabs already there never left live;
- 0 lost: every record seq from the first the tab saw to the last published was applied, or was
  skipped after a resync snapshot that replaced it (counted apart, with the resync's reason);
  the stream ids each tab applied are exactly what Redis holds over that stretch (XRANGE);
- 0 duplicates: none applied (by record seq and by frame seq) and none sent (the client's own count
  of frames at or before its cursor).
"""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest
import redis

from controllers.process import stop_process
from controllers.schema import SYNTHETIC_TOPIC
from controllers.telemetry.redisboot import free_port
from controllers.telemetry.streams import Keys
from controllers.telemetry.synthetic import SyntheticLoad
from tests.conftest import wait_until

pytestmark = pytest.mark.browser

RATE = 1000.0  # observations per second
TABS = 5
REPLICA_HEADER = "x-ctrlscope-replica"
HAPROXY_CANDIDATES = ("/usr/sbin/haproxy", "/usr/bin/haproxy")

HAPROXY_CFG = """\
global
    maxconn 512
    stats socket {sock} mode 600 level admin

defaults
    mode http
    timeout connect 500ms
    timeout client 30s
    timeout server 30s
    # a websocket, once upgraded, is a tunnel: idle for as long as a quiet topic is
    timeout tunnel 1h
    timeout client-fin 1s
    timeout server-fin 1s
    timeout http-request 10s
    # a connection refused by a replica that just died goes to the other one, on every retry
    retries 3
    option redispatch 1

frontend dashboard
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance leastconn
    option httpchk
    http-check send meth GET uri /healthz ver HTTP/1.1 hdr Host 127.0.0.1
    http-check expect status 200
    # a dead replica is out after 2 failed checks 200 ms apart (about half a second)
    default-server inter 500ms fastinter 200ms downinter 1s fall 2 rise 2
    http-response set-header X-Ctrlscope-Replica %[srv_name]
{servers}
"""

# Installed in each tab once it is live on the synthetic topic (see the module doc). Per topic:
# segments of applied stream ids (a new one at each snapshot), per (topic, publisher run) the frame
# seqs, and on the synthetic topic the record seqs: the last one, duplicates, gaps, and what a
# snapshot after a resync replaced (with the resync's reason).
RECORDER_JS = """(synthetic) => {
  const c = window.ctrlscope.client;
  const cmp = TelemetryClient.cmpId;
  const rec = window.__replicas = { seen: [], segs: {}, frames: {}, recs: null, resyncs: [] };
  const note = (...what) => rec.seen.push([Date.now(), ...what]);
  const open = (topic, start) => { (rec.segs[topic] = rec.segs[topic] || []).push({ start: start, ids: [], bad: [] }); };
  for (const [topic, t] of c.topics) if (t.cursor) open(topic, t.cursor);
  const afterSnapshot = new Set(); // "frames:<key>" and "recs": the next one follows a snapshot
  const reasonOf = {}; // topic -> the reason of the resync whose snapshot is due
  c.on("state", (s) => note("state", s));
  c.on("resync", (topic, reason) => { note("resync", topic, reason); rec.resyncs.push([topic, reason]); reasonOf[topic] = reason; });
  c.on("snapshot", (topic) => {
    const t = c.topics.get(topic);
    note("snapshot", topic, t && t.cursor, reasonOf[topic] || "no resync announced");
    if (t && t.cursor) open(topic, t.cursor);
    for (const k in rec.frames) if (rec.frames[k].topic === topic) afterSnapshot.add("frames:" + k);
    if (topic === synthetic) afterSnapshot.add("recs");
  });
  new MutationObserver(() => note("dom", document.getElementById("conn").dataset.state))
    .observe(document.getElementById("conn"), { attributes: true, attributeFilter: ["data-state"] });
  const count = (s, seq, key, reason) => {
    if (s.last !== null && seq <= s.last) { s.dups += 1; return; }
    if (s.last !== null && seq > s.last + 1) {
      if (afterSnapshot.has(key)) s.skipped.push([s.last + 1, seq - 1, reason]);
      else s.gaps.push([s.last + 1, seq - 1]);
    }
    afterSnapshot.delete(key);
    s.last = seq; s.n += 1;
  };
  c.on("records", (topic, records, id, frame) => {
    const segs = rec.segs[topic];
    if (segs) {
      const seg = segs[segs.length - 1];
      const last = seg.ids.length ? seg.ids[seg.ids.length - 1] : seg.start;
      if (cmp(id, last) <= 0) seg.bad.push(id); else seg.ids.push(id);
    }
    if (typeof frame.seq === "number") {
      const k = topic + " " + frame.src;
      const s = rec.frames[k] = rec.frames[k] || { topic: topic, src: frame.src, first: frame.seq, last: null, n: 0, dups: 0, gaps: [], skipped: [] };
      count(s, frame.seq, "frames:" + k, reasonOf[topic]);
    }
    if (topic !== synthetic) return;
    for (const r of records) {
      if (typeof r.seq !== "number") continue;
      const s = rec.recs = rec.recs || { first: r.seq, last: null, n: 0, dups: 0, gaps: [], skipped: [] };
      count(s, r.seq, "recs", reasonOf[topic]);
    }
  });
}"""

READ_JS = """(synthetic) => ({ ...window.__replicas, state: window.ctrlscope.client.state,
  conn: document.getElementById("conn").dataset.state,
  cursor: (window.ctrlscope.client.topics.get(synthetic) || {}).cursor || null,
  stats: { duplicates: window.ctrlscope.client.stats.duplicates, reconnects: window.ctrlscope.client.stats.reconnects,
           resyncs: window.ctrlscope.client.stats.resyncs } })"""


def find_haproxy() -> str:
    found = shutil.which("haproxy") or next((p for p in HAPROXY_CANDIDATES if os.access(p, os.X_OK)), None)
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("haproxy is missing in CI: .ci/run should have installed Debian's haproxy")
    pytest.skip("haproxy not installed (apt-get install haproxy); .ci/run installs it")


class Haproxy:
    """Debian's haproxy in the foreground on a free loopback port, in front of ``servers``
    (name → port), with its stats socket for the servers' states."""

    def __init__(self, binary: str, tmp: Path, servers: dict[str, int]) -> None:
        self.port = free_port()
        self.sock = tmp / "haproxy.sock"
        self.cfg = tmp / "haproxy.cfg"
        self.log = tmp / "haproxy.log"
        lines = "\n".join(f"    server {name} 127.0.0.1:{port} check" for name, port in servers.items())
        self.cfg.write_text(HAPROXY_CFG.format(sock=self.sock, port=self.port, servers=lines))
        check = subprocess.run([binary, "-c", "-f", str(self.cfg)], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, f"haproxy rejects its configuration:\n{check.stdout}\n{check.stderr}"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen([binary, "-db", "-f", str(self.cfg)], stdout=log, stderr=subprocess.STDOUT)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stat(self) -> dict[str, dict[str, str]]:
        """``show stat`` of the backend's servers: name → {column: value} (status, scur, stot...)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.sock))
            s.sendall(b"show stat\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        lines = data.decode().splitlines()
        header = lines[0].lstrip("# ").split(",")
        rows = [dict(zip(header, line.split(","), strict=False)) for line in lines[1:] if line]
        return {r["svname"]: r for r in rows if r.get("pxname") == "replicas" and r["svname"] not in ("BACKEND", "FRONTEND")}

    def status(self) -> dict[str, str]:
        try:
            return {name: row["status"] for name, row in self.stat().items()}
        except OSError:
            return {}

    def stop(self) -> None:
        stop_process(self.proc)


def open_tab(browser, url: str) -> tuple[object, list[tuple[float, str]]]:
    """A tab on the overview through haproxy, developer view open, live on the synthetic topic;
    and the list its DevTools session fills with (wall ms, replica) per websocket upgraded."""
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    handshakes: list[tuple[float, str]] = []

    def handshake(ev: dict) -> None:
        if ev["response"].get("status") == 101:  # upgraded (not haproxy's own 503 when no replica is up)
            headers = {k.lower(): v for k, v in ev["response"]["headers"].items()}
            handshakes.append((time.time() * 1000, headers.get(REPLICA_HEADER, "?")))

    cdp = page.context.new_cdp_session(page)
    cdp.on("Network.webSocketHandshakeResponseReceived", handshake)
    cdp.send("Network.enable")
    page.goto(url + "/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=20_000)
    page.click("#dev > summary")
    page.wait_for_function("(t) => window.ctrlscope.client.topics.get(t)?.cursor", arg=SYNTHETIC_TOPIC, timeout=20_000)
    page.evaluate(RECORDER_JS, SYNTHETIC_TOPIC)
    return page, handshakes


def ws_connects(server) -> int:
    return server.log.read_text(errors="replace").count("WSCONNECT /ws/telemetry/")


def stream_ids(client: redis.Redis, keys: Keys, topic: str, after: str, until: str) -> list[str] | None:
    """The stream's ids in (after, until], or None if ``after`` is not in the stream any more."""
    rows = client.xrange(keys.stream(topic), min=after, max=until)
    ids = [eid.decode() for eid, _ in rows]
    if not ids or ids[0] != after:
        return None
    return ids[1:]


def test_two_replicas_behind_haproxy_every_tab_resumes_on_the_survivor(
        browser, dashboard_factory, publisher_factory, redis_url, prefix, tmp_path):
    binary = find_haproxy()
    began = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:  # both replicas start at once
        replicas = list(pool.map(lambda _: dashboard_factory(PYTHONUNBUFFERED="1"), range(2)))
    names = {f"r{i + 1}": server for i, server in enumerate(replicas)}
    lb = Haproxy(binary, tmp_path, {name: server.port for name, server in names.items()})
    pub = publisher_factory().start()
    load = SyntheticLoad(pub, rate=RATE, objects=200, seed=15)
    stop = threading.Event()
    producer = threading.Thread(target=load.run, args=(stop,), name="synthetic-load", daemon=True)
    pages = []
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    try:
        wait_until(lambda: set(lb.status().values()) == {"UP"} and len(lb.status()) == 2, timeout=20,
                   interval=0.1, what=f"haproxy to see both replicas up ({lb.status()})")
        producer.start()
        wait_until(lambda: pub.frames_published >= 5, timeout=10, what="the synthetic load to be published")
        offsets = {name: ws_connects(server) for name, server in names.items()}
        tabs = [open_tab(browser, lb.url) for _ in range(TABS)]
        pages = [page for page, _ in tabs]
        ready = time.monotonic()
        # Frames flow to every tab for a while before the kill.
        for page in pages:
            page.wait_for_function("() => (window.__replicas.recs || {}).n > 500", timeout=20_000)

        def where_now() -> list[str]:
            return [handshakes[-1][1] if handshakes else "?" for _, handshakes in tabs]

        on = where_now()
        assert "?" not in on, f"a websocket handshake without haproxy's replica header: {on}"
        # leastconn spreads the websockets, but a tab's page requests in flight while its socket
        # opens count too: should every tab be on one replica, a tab's socket is closed (as a
        # network blip does) and its reconnect goes to the replica without any.
        rebalanced = 0
        while len(set(on)) < len(names) and rebalanced < TABS:
            i = rebalanced
            before = len(tabs[i][1])
            pages[i].evaluate("window.ctrlscope.client.ws.close()")
            # (the page call first: the DevTools events are taken in while Playwright is called)
            wait_until(lambda i=i, before=before: pages[i].evaluate("window.ctrlscope.client.state") == "live"
                       and len(tabs[i][1]) > before, timeout=15, what=f"tab {i} to reconnect after its socket was closed")
            rebalanced += 1
            on = where_now()
        per_replica = {name: on.count(name) for name in names}
        assert all(per_replica.values()), f"every tab is on one replica: {per_replica}"
        connects = {name: sum(h[1] == name for _, hs in tabs for h in hs) for name in names}
        logged = {name: ws_connects(server) - offsets[name] for name, server in names.items()}
        assert logged == connects, f"daphne logs say {logged} websockets, the handshakes {connects}"

        victim = max(per_replica, key=lambda name: per_replica[name])
        survivor = next(name for name in names if name != victim)
        moved = [i for i, name in enumerate(on) if name == victim]
        down_ms: list[float] = []

        def watch_down() -> None:  # when haproxy's health check takes the victim out
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and not lb.status().get(victim, "").startswith("DOWN"):
                time.sleep(0.02)
            down_ms.append(time.time() * 1000)

        killed_ms = time.time() * 1000
        os.kill(names[victim].proc.pid, signal.SIGKILL)
        watcher = threading.Thread(target=watch_down, name="haproxy-down", daemon=True)
        watcher.start()
        names[victim].proc.wait(10)

        def resumed(i: int) -> float | None:
            rows = pages[i].evaluate("window.__replicas.seen")
            states = [row for row in rows if row[1] == "state" and row[0] >= killed_ms]
            went = next((n for n, row in enumerate(states) if row[2] == "reconnecting"), None)
            back = next((row for row in states[went + 1:] if row[2] == "live"), None) if went is not None else None
            return back[0] - killed_ms if back else None

        resume_ms = {}
        for i in moved:
            resume_ms[i] = wait_until(lambda i=i: resumed(i), timeout=20, interval=0.1,
                                      what=f"tab {i} (on {victim}) to reconnect and go live again")
        watcher.join(20)
        assert lb.status().get(victim, "").startswith("DOWN"), f"haproxy never took {victim} out: {lb.status()}"
        down = down_ms[0]
        for i in moved:
            assert tabs[i][1][-1][1] == survivor, f"tab {i} reconnected through haproxy to {tabs[i][1][-1][1]}"
        time.sleep(3)  # the load goes on on the survivor alone
        stop.set()
        producer.join(10)
        pub.flush()
        published = load.seq
        # Every record is in Redis once a tab has the last one; then the stream's end is final.
        pages[0].wait_for_function("(n) => (window.__replicas.recs || {}).last === n", arg=published, timeout=30_000)
        time.sleep(0.3)
        last_id = client.xrevrange(Keys(prefix).stream(SYNTHETIC_TOPIC), count=1)[0][0].decode()
        for page in pages:
            page.wait_for_function("([n, id]) => (window.__replicas.recs || {}).last === n"
                                   " && window.ctrlscope.client.topics.get('synthetic').cursor === id",
                                   arg=[published, last_id], timeout=30_000)

        keys = Keys(prefix)
        report = []
        for i, page in enumerate(pages):
            got = page.evaluate(READ_JS, SYNTHETIC_TOPIC)
            recs = got["recs"]
            where = f"tab {i} ({on[i]}{' → ' + survivor if i in moved else ''})"
            assert recs["gaps"] == [], f"{where}: record seqs never applied nor replaced by a snapshot: {recs['gaps'][:5]}"
            assert recs["dups"] == 0, f"{where}: {recs['dups']} record(s) applied twice"
            skipped = sum(hi - lo + 1 for lo, hi, _ in recs["skipped"])
            assert recs["n"] + skipped == published - recs["first"] + 1, f"{where}: {recs}"
            for key, frames in got["frames"].items():
                assert frames["gaps"] == [] and frames["dups"] == 0, f"{where} {key}: frame seqs {frames}"
            assert got["stats"]["duplicates"] == 0, f"{where}: the server sent {got['stats']['duplicates']} duplicate frame(s)"
            checked = 0
            segs = got["segs"][SYNTHETIC_TOPIC]
            for n, seg in enumerate(segs):
                assert seg["bad"] == [], f"{where}: stream ids applied out of order: {seg['bad'][:5]}"
                if not seg["ids"]:
                    continue
                held = stream_ids(client, keys, SYNTHETIC_TOPIC, seg["start"], seg["ids"][-1])
                assert held is not None or n < len(segs) - 1, f"{where}: its latest segment is not in Redis"
                if held is not None:
                    missing = sorted(set(held) - set(seg["ids"]))
                    assert held == seg["ids"], f"{where}: {len(missing)} frame(s) in Redis never applied, e.g. {missing[:3]}"
                    checked += len(seg["ids"])
            assert segs[-1]["ids"][-1] == last_id and got["cursor"] == last_id
            states = [row[2] for row in got["seen"] if row[1] == "state" and row[0] >= killed_ms]
            shown = [row[2] for row in got["seen"] if row[1] == "dom" and row[0] >= killed_ms]
            if i in moved:
                assert "reconnecting" in states and states[-1] == "live", f"{where}: states {states}"
                assert "reconnecting" in shown and shown[-1] == "live", f"{where}: #conn showed {shown}"
            else:
                assert states == [] and shown == [], f"{where} was on the survivor and still left live: {states}"
            assert got["state"] == "live" and got["conn"] == "live"
            assert page.js_errors == [], f"{where}: {page.js_errors}"
            reasons = sorted({reason for _, _, reason in recs["skipped"]})
            report.append(f"{where}: {recs['n']} records in {checked} frames applied = Redis's ids; "
                          f"{skipped} replaced by a resync snapshot {reasons}; resyncs {got['resyncs']}; "
                          f"0 lost, 0 duplicates" + (f"; live again {resume_ms[i]:.0f} ms after the kill" if i in moved else ""))
        print(f"\n{TABS} tabs via haproxy (leastconn): {per_replica} ({rebalanced} socket(s) closed to spread them); killed {victim} ({per_replica[victim]} tabs); "
              f"haproxy marked it DOWN {down - killed_ms:.0f} ms after the kill; resumed in "
              f"{min(resume_ms.values()):.0f}–{max(resume_ms.values()):.0f} ms; {published} records published "
              f"in all at {RATE:.0f}/s; setup {ready - began:.1f} s, "
              f"total {time.monotonic() - began:.1f} s")
        print("\n".join(report))
    finally:
        stop.set()
        for page in pages:
            page.close()
        lb.stop()
        client.close()
