"""A publisher written from protocol/ alone (none of ctrlscope's publisher code: redis-py, frame.lua and
the rules of protocol/README.md and redis-layout.md) is a worker like any other on the overview, and
its pipeline's counters move: they come from the metrics samples it computes by README §5.5, from
the same observations it publishes as records. Checked in real headless Chromium against daphne."""

from __future__ import annotations

import re
import time
import uuid
from typing import Any

import orjson
import pytest
import redis

from tests.conftest import ROOT
from tests.dashboard.test_overview_browser import open_overview
from tests.dashboard.test_panels_browser import close_page

pytestmark = pytest.mark.browser

FRAME_LUA = (ROOT / "protocol" / "frame.lua").read_text()
VERSION = re.match(r"# ctrlscope telemetry protocol, version (\d+\.\d+)\n", (ROOT / "protocol" / "README.md").read_text()).group(1)


class SpecPublisher:
    """redis-layout.md, "The publisher's loop", for a publisher that never loses Redis: an epoch, one
    reset frame per topic first, then ordinary frames with the changed keys in ``s``, a seq +1 per
    frame, and a presence entry."""

    def __init__(self, client: redis.Redis, prefix: str, worker: str) -> None:
        self.client, self.prefix, self.worker = client, prefix, worker
        self.src = f"spec-{uuid.uuid4().hex[:8]}"
        self.script = client.register_script(FRAME_LUA)
        client.set(prefix + "epoch", uuid.uuid4().hex, nx=True)
        self.epoch = client.get(prefix + "epoch").decode()
        self.seq: dict[str, int] = {}
        self.started = time.time() * 1000

    def frame(self, topic: str, records: list[dict[str, Any]], state: dict[str, Any] | None = None) -> None:
        state = state or {}
        seq = self.seq[topic] = self.seq.get(topic, 0) + 1
        reset = seq == 1
        head: dict[str, Any] = {"reset": True} if reset else {}
        frame = {**head, "r": records, "v": VERSION, "ts": time.time() * 1000, "src": self.src, "seq": seq}
        if not reset:
            frame["s"] = state
        sets = [(k, v) for k, v in state.items() if v is not None]
        deletes = [k for k, v in state.items() if v is None]
        keys = [f"{self.prefix}stream:{topic}", f"{self.prefix}snap:{topic}", f"{self.prefix}epoch",
                f"{self.prefix}topics", f"{self.prefix}pubseq:{topic}"]
        args = [self.epoch, 20000, orjson.dumps(frame), topic, self.src, seq, "1" if reset else "0", len(sets),
                *[x for k, v in sets for x in (k, orjson.dumps(v))], *deletes]
        status, _ = self.script(keys=keys, args=args)
        assert status == 1, (topic, status)

    def presence(self) -> None:
        self.client.hset(self.prefix + "publishers", self.src, orjson.dumps({
            "role": "worker", "name": self.worker, "host": "spec", "pid": 1, "started": self.started,
            "seen": time.time() * 1000, "stopped": None, "topics": sorted(self.seq), "retention": 3600, "v": VERSION}))


def test_a_publisher_written_from_the_spec_alone_gets_moving_pipeline_counters(browser, dashboard, redis_url,
                                                                                prefix):
    client = redis.Redis.from_url(redis_url)
    pub = SpecPublisher(client, prefix, "spec-worker")
    w = "w/spec-worker"
    informer, controller = "v1/Pod", "podsets"
    inf_topic, queue_topic, ctl_topic = f"{w}/informer/v1_Pod", f"{w}/queue/podsets", f"{w}/controller/podsets"
    components = {
        "worker/spec-worker": {"kind": "worker", "name": "spec-worker", "runtime": "node", "protocol": VERSION,
                               "publisher": pub.src},
        f"informer/{informer}": {"kind": "informer", "name": informer, "fifo": "DeltaFIFO", "resync_period": 0,
                                 "synced": True, "rv": "12", "listed": 3, "state": "watching"},
        f"controller/{controller}": {"kind": "controller", "name": controller, "watches": [informer], "workers": 2,
                                     "started": True},
    }
    pods = {f"default/p{i}": {"rv": str(10 + i), "gen": None, "uid": f"u{i}", "phase": "Running"} for i in range(3)}
    # Reset frames first (their state goes in the hash write only), then the state as ordinary frames.
    for topic in (f"{w}/components", inf_topic, queue_topic, ctl_topic, f"{w}/metrics"):
        pub.frame(topic, [])
    pub.frame(f"{w}/components", [], components)
    pub.frame(inf_topic, [], pods)
    pub.presence()
    # The counters of README §5.5, kept from the observations as they are published.
    stages = {"watch": 0, "fifo": 0, "cache": 3, "handlers": 0, "handler_errors": 0, "fifo_depth": 0, "size": 3}
    ctl = {"writes": 0, "write_errors": 0, "write_conflicts": 0, "writes_refused": 0, "last_result": ""}
    fam = {"workqueue_adds_total": 0, "workqueue_depth": 0, "workqueue_retries_total": 0,
           "controller_runtime_reconcile_total": {"success": 0, "error": 0, "requeue": 0, "requeue_after": 0},
           "controller_runtime_reconcile_errors_total": 0, "controller_runtime_active_workers": 0,
           "controller_runtime_max_concurrent_reconciles": 2}
    gets = [0]  # workqueue_queue_duration_seconds: every observation in the first bucket

    def second(n: int) -> None:
        now = time.time() * 1000
        watch, queue, reconciles = [], [], []
        for i in range(5):  # five pod updates a second, each reconciled once, every fifth failing
            key = f"default/p{i % 3}"
            watch.append({"k": "watch", "type": "MODIFIED", "key": key, "rv": str(100 * n + i), "ts": now})
            watch.append({"k": "handler", "handler": "enqueue", "event": "update", "key": key, "outcome": "ok",
                          "duration": 0.0001, "error": None, "rv": str(100 * n + i), "old_rv": None, "ts": now})
            queue += [{"k": "queue", "op": "add", "key": key, "depth": 1, "delay": None, "requeues": None,
                       "duration": None, "ts": now},
                      {"k": "queue", "op": "get", "key": key, "depth": 0, "delay": None, "requeues": None,
                       "duration": 0.001, "ts": now},
                      {"k": "queue", "op": "done", "key": key, "depth": 0, "delay": None, "requeues": None,
                       "duration": 0.002, "ts": now}]
            result = "error" if i == 4 else "success"
            reconciles += [{"k": "reconcile_start", "key": key, "worker": 0, "ts": now},
                           {"k": "write", "method": "PATCH", "path": f"/api/v1/namespaces/default/pods/p{i % 3}",
                            "code": 200, "duration": 0.003, "ts": now},
                           {"k": "reconcile", "key": key, "worker": 0, "duration": 0.002, "result": result,
                            "requeue_after": 0, "error": "boom" if i == 4 else None, "ts": now}]
            stages["watch"] += 1
            stages["handlers"] += 1
            fam["workqueue_adds_total"] += 1
            gets[0] += 1
            fam["controller_runtime_reconcile_total"][result] += 1
            fam["controller_runtime_reconcile_errors_total"] += result == "error"
            ctl["writes"] += 1
            ctl["last_result"] = result
        pub.frame(inf_topic, watch)
        pub.frame(queue_topic, queue)
        pub.frame(ctl_topic, reconciles)
        sample = {"k": "metrics", "ts": time.time() * 1000,
                  "families": {controller: {**fam, "controller_runtime_reconcile_total": dict(fam["controller_runtime_reconcile_total"]),
                                            "workqueue_queue_duration_seconds": {"b": [gets[0]], "sum": gets[0] * 0.001}}},
                  "stages": {"informers": {informer: dict(stages)}, "controllers": {controller: dict(ctl)}}}
        pub.frame(f"{w}/metrics", [sample])
        pub.presence()

    try:
        second(0)
        page = open_overview(browser, dashboard)
        card = '#overview .worker[data-worker="spec-worker"] .ctl-card[data-controller="podsets"]'
        page.wait_for_selector(card, timeout=10_000)
        for n in range(1, 5):
            time.sleep(1.0)
            second(n)
        assert page.get_attribute('#overview .worker[data-worker="spec-worker"]', "data-liveness") == "live"
        stage = f'{card} .stage[data-stage="{{}}"]'
        # The last sample drawn (the overview redraws at most 4 times a second), with rates.
        page.wait_for_function(f"""() => {{
            const r = document.querySelector('{stage.format("reconcile")} .rate');
            const h = document.querySelector('{stage.format("handlers")}');
            return r && r.textContent !== '–' && parseFloat(r.textContent) > 0 && h.innerText.includes('25 calls'); }}""",
            timeout=10_000)
        text = {s: page.inner_text(stage.format(s)) for s in ("reflector", "cache", "handlers", "workqueue", "workers",
                                                               "reconcile", "writes")}
        rates = {s: page.inner_text(stage.format(s) + " .rate") for s in text}
        assert "3 objects" in text["cache"] and "25 calls" in text["handlers"], text
        assert "25 writes" in text["writes"] and "error" in text["reconcile"], text
        for s in ("reflector", "handlers", "workqueue", "workers", "reconcile", "writes"):
            assert rates[s] != "–" and float(re.match(r"[\d.]+", rates[s]).group()) > 0, (s, rates)
        close_page(page)
    finally:
        client.close()
