"""GET /c/<worker>/<controller>/story.json?key=: one key's story from the retained streams, against
real daphne and a real Redis, the worker's records published by a real TelemetryObserver."""

from __future__ import annotations

import pytest
import requests

from controllers.schema import QueueOp, ReconcileResult, RecordKind, TopicKind, worker_topic
from controllers.telemetry.telemetry_observer import TelemetryObserver
from dashboard.key_story import MAX_SCAN, path_key
from tests.dashboard.conftest import login
from tests.dashboard.key_story_data import CONTROLLER, KEY, OTHER, WORKER, observer, retried_key


def get(dashboard, key: str | None = KEY, controller: str = CONTROLLER, session=requests, **params):
    if key is not None:
        params["key"] = key
    resp = session.get(f"{dashboard.url}/c/{WORKER}/{controller}/story.json", params=params, timeout=10)
    return resp.status_code, resp.json()


@pytest.fixture
def worker(publisher_factory):
    pub = publisher_factory()
    obs, clock = observer(pub)
    retried_key(obs, clock, flush=pub.flush)
    return obs, pub


def kinds(topic: dict) -> list[str]:
    return [r["r"]["k"] + (":" + r["r"]["op"] if r["r"]["k"] == RecordKind.QUEUE else "") for r in topic["records"]]


def test_the_story_holds_every_record_naming_the_key_and_nothing_else(dashboard, worker):
    status, body = get(dashboard)
    assert status == 200 and body["key"] == KEY
    ctl, queue, podsets, pods = body["topics"]
    assert (ctl["kind"], queue["kind"], podsets["name"], pods["name"]) == ("controller", "queue", "podsets", "pods")
    assert ctl["topic"] == worker_topic(WORKER, TopicKind.CONTROLLER, CONTROLLER)
    # Every record is the key's (an event mapped to it, its attempts, its writes).
    for r in ctl["records"] + queue["records"] + podsets["records"]:
        rec = r["r"]
        assert OTHER not in (rec.get("key"), *rec.get("requests", ())), rec
    assert kinds(ctl) == ["event", "reconcile_start", "write", "reconcile", "event", "reconcile_start", "reconcile"]
    assert kinds(queue) == ["queue:add", "queue:get", "queue:add_rate_limited", "queue:done", "queue:add",
                            "queue:dedup", "queue:get", "queue:forget", "queue:done"]
    assert [r["r"]["k"] for r in podsets["records"]] == ["watch", "handler", "watch", "handler"]
    assert pods["records"] == []
    write = ctl["records"][2]
    assert write["via"] == "path" and write["r"]["rv"] == "103"
    first, second = (r["r"] for r in ctl["records"] if r["r"]["k"] == RecordKind.RECONCILE)
    assert (first["result"], second["result"]) == (ReconcileResult.ERROR, ReconcileResult.SUCCESS)
    backoff = next(r["r"] for r in queue["records"] if r["r"]["op"] == QueueOp.ADD_RATE_LIMITED)
    assert (backoff["delay"], backoff["requeues"]) == (0.005, 1)
    # The object's successive cache summaries, and what each topic's snapshot says of the key now.
    assert [s["v"]["rv"] for s in podsets["states"]] == ["101", "103"]
    assert podsets["now"]["rv"] == "103" and ctl["now"]["attempts"] == 2 and queue["now"] is None
    assert body["component"]["rate_limiter"]["type"] == "exponential"
    # The scans covered whole streams, and say where each ended (the page goes on live from there).
    assert all(t["complete"] and t["scanned"] > 0 for t in body["topics"] if t["name"] != "pods" or t["scanned"])
    assert ctl["cursor"] == ctl["records"][-1]["id"] or ctl["cursor"] > ctl["records"][-1]["id"]


def test_a_short_scan_says_it_is_incomplete_and_returns_only_what_it_read(dashboard, worker):
    status, body = get(dashboard, scan=1)
    assert status == 200
    ctl, queue = body["topics"][:2]
    assert ctl["scanned"] == 1 and not ctl["complete"] and ctl["first_ts"] > 0
    assert kinds(ctl) == ["reconcile_start", "reconcile"]  # the last frame: the second attempt
    assert ctl["cursor"] == ctl["records"][-1]["id"]


def test_a_write_with_no_path_match_is_the_keys_when_its_attempt_ran_alone(dashboard, publisher_factory):
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker=WORKER)
    obs.on_reconcile_start(CONTROLLER, key=KEY, worker=0)
    obs.on_request(method="POST", path="/api/v1/namespaces/default/pods", code=201, duration=0.002)
    obs.on_reconcile_end(CONTROLLER, key=KEY, worker=0, duration=0.01, result="success")
    # Two attempts at once (two workers): a write naming neither object is nobody's for sure.
    obs.on_reconcile_start(CONTROLLER, key=KEY, worker=0)
    obs.on_reconcile_start(CONTROLLER, key=OTHER, worker=1)
    obs.on_request(method="POST", path="/api/v1/namespaces/default/events", code=201, duration=0.002)
    obs.on_request(method="DELETE", path="/api/v1/namespaces/default/configmaps/web", code=200, duration=0.002)
    obs.on_reconcile_end(CONTROLLER, key=OTHER, worker=1, duration=0.01, result="success")
    obs.on_reconcile_end(CONTROLLER, key=KEY, worker=0, duration=0.01, result="success")
    pub.flush()
    _, body = get(dashboard)
    writes = [(r["r"]["path"], r["via"]) for r in body["topics"][0]["records"] if r["r"]["k"] == RecordKind.WRITE]
    assert writes == [("/api/v1/namespaces/default/pods", "attempt"), ("/api/v1/namespaces/default/configmaps/web", "path")]


@pytest.mark.parametrize(("controller", "key", "params", "status", "says"), [
    (CONTROLLER, None, {}, 400, "?key= must be namespace/name"),
    (CONTROLLER, "default/a b", {}, 400, "?key= must be namespace/name"),
    (CONTROLLER, KEY, {"scan": "lots"}, 400, f"?scan= must be a number of entries from 1 to {MAX_SCAN}"),
    (CONTROLLER, KEY, {"scan": str(MAX_SCAN + 1)}, 400, "?scan="),
    (CONTROLLER, KEY, {"scan": "0"}, 400, "?scan="),
    ("nosuch", KEY, {}, 404, "worker w1 has no controller nosuch"),
    ("bad name", KEY, {}, 404, "no such controller"),
])
def test_bad_and_unknown_requests_get_a_clear_error(dashboard, worker, controller, key, params, status, says):
    answered, body = get(dashboard, key, controller, **params)
    assert answered == status and body["status"] == status and says in body["error"]


def test_the_story_needs_the_same_access_as_every_view(dashboard_factory, users, worker):
    closed = dashboard_factory(CTRLSCOPE_ALLOW_ANONYMOUS="0")
    status, body = get(closed)
    assert status == 403 and body["error"] == "forbidden"
    page = requests.get(f"{closed.url}/c/{WORKER}/{CONTROLLER}/k/default/web", timeout=10, allow_redirects=False)
    assert page.status_code == 302 and "/accounts/login/" in page.headers["Location"]
    viewer = login(closed, "viewer")
    status, body = get(closed, session=viewer)
    assert status == 200 and body["topics"][0]["records"]


def test_the_key_page_is_served_for_namespaced_and_cluster_scoped_keys(dashboard, worker):
    for path, key in ((f"/c/{WORKER}/{CONTROLLER}/k/default/web", "default/web"), (f"/c/{WORKER}/{CONTROLLER}/k/node-1", "node-1")):
        resp = requests.get(dashboard.url + path, timeout=10)
        assert resp.status_code == 200 and f'"key": "{key}"' in resp.text
    assert requests.get(dashboard.url + f"/c/{WORKER}/{CONTROLLER}/k/default/a%20b", timeout=10).status_code == 404


def test_the_scan_finds_the_keys_records_among_many_frames_of_keys_that_nearly_match(dashboard, publisher_factory):
    """Queue and informer frames are searched as bytes for the key's JSON string before they are
    decoded (key_story.py), then each record's key is compared: among 400 frames of keys that contain
    the key (``default/web-1``, ``xdefault/web``) or that it contains (``default/we``), only the key's
    own records, one per topic, are returned. How long the scan of full streams takes is measured in
    bench/key_story.py, not here."""
    pub = publisher_factory()
    obs = TelemetryObserver(pub, worker=WORKER)
    obs.on_informer("pods", fifo="DeltaFIFO", resync_period=0.0)
    obs.on_controller(CONTROLLER, watches=["pods"], workers=4, started=True)
    near = ["default/web-1", "xdefault/web", "default/we", "default/web/", "default/webb"]
    for i in range(400):
        for j, other in enumerate(near):
            key = KEY if (i, j) == (200, 0) else f"{other}{i}" if j == 0 else other
            obs.on_watch_event("pods", event_type="MODIFIED", key=key, resource_version=str(i))
            obs.on_queue(CONTROLLER, op=QueueOp.ADD, key=key, depth=1)
            obs.on_event(CONTROLLER, event="update", key=key, requests=[key])
        pub.flush()
    status, body = get(dashboard)
    assert status == 200
    assert [(t["kind"], t["name"]) for t in body["topics"]] == [("controller", CONTROLLER), ("queue", CONTROLLER),
                                                                 ("informer", "pods")]
    assert [len(t["records"]) for t in body["topics"]] == [1, 1, 1]
    assert all(t["records"][0]["r"]["key"] == KEY for t in body["topics"])
    assert all(t["complete"] and t["scanned"] >= 400 for t in body["topics"])


def test_path_key_reads_the_object_a_path_names():
    assert path_key("/apis/demo.ctrlscope.dev/v1/namespaces/default/podsets/web/status") == "default/web"
    assert path_key("/api/v1/namespaces/default/pods/web-1?dryRun=All") == "default/web-1"
    assert path_key("/api/v1/namespaces/default/pods") is None
    assert path_key("/api/v1/nodes/node-1") == "node-1"
    assert path_key("/api/v1/namespaces/team-a") == "team-a"
    assert path_key("/healthz") is None
