"""Chromium tabs on two dashboard replicas over a Redis Cluster (3 masters + 3 replicas of Debian's
redis-server, controllers/telemetry/clusterboot.py): the master holding the synthetic topic's slot is
killed with SIGKILL under load. Every tab shows reconnecting, then live again; every record seq is
applied once, or falls in a gap the page was told about (a resync, or the reset frame that carries
the lost records' count); the page reports no JavaScript error."""

from __future__ import annotations

import threading
import time

import pytest
from redis.crc import key_slot

from controllers.schema import SYNTHETIC_TOPIC
from controllers.telemetry.synthetic import SyntheticLoad
from tests.conftest import wait_until
from tests.telemetry.test_redis_cluster import redis_cluster  # noqa: F401 -- the fixture

pytestmark = pytest.mark.browser

RATE = 500.0
TABS = 2

# Per tab: the client's states, and on the synthetic topic every record seq: applied, twice, or
# skipped -- after a resync or on a reset frame (announced) or without either (silent).
RECORDER_JS = """(synthetic) => {
  const c = window.ctrlscope.client;
  const rec = window.__cluster = { states: [], first: null, last: null, n: 0, dups: 0, silent: [], announced: [], dropped: 0,
                                   resyncs: [] };
  let told = false;
  c.on("state", (s) => rec.states.push([Date.now(), s]));
  c.on("resync", (topic, reason) => { if (topic === synthetic) { told = true; rec.resyncs.push(reason); } });
  c.on("records", (topic, records, id, frame) => {
    if (topic !== synthetic) return;
    rec.dropped += frame.dropped || 0;
    for (const r of records) {
      if (typeof r.seq !== "number") continue;
      if (rec.first === null) rec.first = r.seq;
      if (rec.last !== null && r.seq <= rec.last) { rec.dups += 1; continue; }
      if (rec.last !== null && r.seq > rec.last + 1) (told || frame.reset ? rec.announced : rec.silent).push([rec.last + 1, r.seq - 1]);
      rec.last = r.seq; rec.n += 1; told = false;
    }
  });
}"""


def open_tab(browser, url: str):
    page = browser.new_page()
    page.js_errors = []
    page.on("pageerror", lambda err: page.js_errors.append(str(err)))
    page.goto(url + "/")
    page.wait_for_selector('#conn[data-state="live"]', timeout=30_000)
    page.click("#dev > summary")
    page.wait_for_function("(t) => window.ctrlscope.client.topics.get(t)?.cursor", arg=SYNTHETIC_TOPIC, timeout=30_000)
    page.evaluate(RECORDER_JS, SYNTHETIC_TOPIC)
    return page


def test_tabs_on_two_replicas_come_back_live_after_a_cluster_master_is_killed(
        browser, redis_cluster, dashboard_factory, publisher_factory):  # noqa: F811
    cluster = redis_cluster
    env = {"REDIS_URL": "", "REDIS_CLUSTER_NODES": cluster.nodes_env}
    replicas = [dashboard_factory(**env), dashboard_factory(**env)]
    pub = publisher_factory(url=cluster.url).start()
    load = SyntheticLoad(pub, rate=RATE, objects=100, seed=33)
    stop = threading.Event()
    producer = threading.Thread(target=load.run, args=(stop,), name="synthetic-load", daemon=True)
    pages = []
    try:
        producer.start()
        wait_until(lambda: pub.frames_published >= 5, timeout=15, what="the synthetic load to be published")
        pages = [open_tab(browser, replicas[i % 2].url) for i in range(TABS)]
        for page in pages:
            page.wait_for_function("() => window.__cluster.n > 200", timeout=30_000)
        victim = cluster.slot_owner(key_slot(SYNTHETIC_TOPIC.encode()))
        killed_ms = time.time() * 1000
        cluster.kill(victim)
        wait_until(lambda: victim not in cluster.master_ports(), timeout=30, what="the replica promoted")

        def back(page) -> bool:
            states = [s for t, s in page.evaluate("window.__cluster.states") if t >= killed_ms]
            return "reconnecting" in states and states[-1] == "live"

        for page in pages:
            wait_until(lambda page=page: back(page), timeout=40, interval=0.2, what="the tab live again")
        time.sleep(2)
        stop.set()
        producer.join(10)
        wait_until(lambda: pub._inflight is None and not pub._buffer, timeout=15, what="the publisher drained")
        published = load.seq
        for page in pages:
            page.wait_for_function("(n) => window.__cluster.last === n", arg=published, timeout=30_000)
        report = []
        for i, page in enumerate(pages):
            got = page.evaluate("window.__cluster")
            assert got["silent"] == [], f"tab {i}: records skipped without a resync or reset: {got['silent'][:5]}"
            assert got["dups"] == 0, f"tab {i}: {got['dups']} record(s) applied twice"
            assert page.evaluate("window.ctrlscope.client.stats.duplicates") == 0
            assert page.evaluate("window.ctrlscope.client.state") == "live"
            assert page.js_errors == [], f"tab {i}: {page.js_errors}"
            skipped = sum(hi - lo + 1 for lo, hi in got["announced"])
            assert got["n"] + skipped == published - got["first"] + 1, f"tab {i}: {got}"
            # What the failover cost is what the page was told was dropped (counted on the reset frame).
            assert got["dropped"] == pub.records_lost + pub.records_dropped, (got["dropped"], pub.records_lost)
            report.append(f"tab {i}: {got['n']} records applied, {skipped} in announced gaps, dropped reported "
                          f"{got['dropped']}, resyncs {sorted(set(got['resyncs']))}")
        print(f"\ncluster browser: {published} records at {RATE:.0f}/s, publisher lost {pub.records_lost}; " + "; ".join(report))
    finally:
        stop.set()
        for page in pages:
            page.close()
