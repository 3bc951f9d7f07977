"""GET /presence.json and POST /workers/<worker>/forget against a real daphne and Redis: runs with
``alive``, what the retention sweep dropped, and forgetting a stopped worker (operators only,
CSRF-protected, never a running worker, logged with the user)."""

from __future__ import annotations

import redis

from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.streams import Keys
from tests.dashboard.conftest import login


def post_forget(session, dashboard, worker: str):
    return session.post(f"{dashboard.url}/workers/{worker}/forget", timeout=15,
                        headers={"X-CSRFToken": session.cookies.get("csrftoken", ""), "Referer": dashboard.url + "/"})


def test_presence_lists_runs_and_forget_drops_a_stopped_worker_only(users, redis_url, prefix):
    dashboard = users
    running = RedisPublisher(redis_url, prefix=prefix)
    running.describe(role="worker", name="live")
    running.set_state("w/live/components", "worker/live", {"kind": "worker"})
    running.start()
    stopped = RedisPublisher(redis_url, prefix=prefix)
    stopped.describe(role="worker", name="old")
    stopped.set_state("w/old/components", "worker/old", {"kind": "worker"})
    stopped.publish("w/old/queue/q", {"k": "queue", "op": "add", "key": "ns/a"})
    stopped.start()
    try:
        viewer, op = login(dashboard, "viewer"), login(dashboard, "op")
        import time
        deadline = time.time() + 10
        while time.time() < deadline:
            body = viewer.get(dashboard.url + "/presence.json", timeout=10).json()
            if {p["name"] for p in body["publishers"]} >= {"live", "old"}:
                break
            time.sleep(0.2)
        stopped.stop()
        body = viewer.get(dashboard.url + "/presence.json", timeout=10).json()
        runs = {p["name"]: p for p in body["publishers"]}
        assert runs["live"]["alive"] and not runs["old"]["alive"] and runs["old"]["stopped"]
        assert body["retention"] == 3600 and body["expired"] == []

        refused = post_forget(viewer, dashboard, "old")
        assert refused.status_code == 403 and "operators only" in refused.json()["error"]
        assert post_forget(op, dashboard, "live").status_code == 409
        assert "worker live is running" in post_forget(op, dashboard, "live").json()["error"]
        assert post_forget(op, dashboard, "no such/worker").status_code in (400, 404)
        assert post_forget(op, dashboard, "nobody").status_code == 404
        no_csrf = op.post(f"{dashboard.url}/workers/old/forget", timeout=10)
        assert no_csrf.status_code == 403

        done = post_forget(op, dashboard, "old")
        assert done.status_code == 200 and done.json()["topics"] == 2, done.text
        client = redis.Redis.from_url(redis_url)
        try:
            topics = {t.decode() for t in client.smembers(Keys(prefix).topics)}
        finally:
            client.close()
        assert topics == {"w/live/components"}
        body = viewer.get(dashboard.url + "/presence.json", timeout=10).json()
        assert [p["name"] for p in body["publishers"]] == ["live"]
        assert body["expired"][0]["what"] == "worker old" and body["expired"][0]["reason"] == "forgotten by op"
        assert "worker old forgotten by op (2 topics)" in dashboard.log.read_text()
    finally:
        running.stop()
        stopped.stop()
