"""Fuzz every dashboard view with arbitrary parameters, over real HTTP against daphne.

The dashboard runs on the real Redis (the test's prefix, with telemetry topics published into it)
and drives a real simulator; requests come from a logged-in operator with a CSRF token (so POSTs
get past authentication and reach validation), from a viewer and from an anonymous client.

- GET every page and JSON view with arbitrary path segments and query parameters: never a 5xx
  other than the documented 503/504 (Redis down, worker not answering), a JSON refusal's ``error``
  is a sentence.
- POST every fault action, the scenario start and forgetting a worker with arbitrary form fields: never a 5xx but the
  documented 502 (the simulator refused); a refusal (4xx) says why and leaves the simulator
  (fault rules, kubelet, stored objects) and Redis (every key under the prefix) exactly as they were;
  no scenario process is ever started (a live pid file makes every valid start a 409).
- daphne's log shows no traceback afterwards.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import requests
from hypothesis import example, given
from hypothesis import strategies as st

from controllers.sim import SimCluster
from controllers.telemetry.publisher import RedisPublisher
from dashboard.faults import ACTIONS
from tests.dashboard.conftest import CREATE_USERS, login
from tests.fuzz.budget import assert_clear, budget, record
from tests.sim.conftest import FAST

TARGET = "views"
WORKER, INFORMER, CONTROLLER = "demo", "pods", "podset"


@pytest.fixture(scope="module")
def stack(redis_url: str, django_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    import subprocess
    import sys
    import uuid

    from tests.conftest import ROOT, DashboardServer, delete_prefix

    prefix = f"ctrlscope-test-fuzz-{uuid.uuid4().hex[:8]}:"
    run_dir = tmp_path_factory.mktemp("fuzz-views")
    sim = SimCluster(port=0, **FAST).start()
    kubeconfig = sim.write_kubeconfig(run_dir / "kubeconfig-sim.yaml")
    pub = RedisPublisher(redis_url, prefix=prefix).start()
    for topic in (f"w/{WORKER}/informer/{INFORMER}", f"w/{WORKER}/controller/{CONTROLLER}", "synthetic"):
        pub.set_state(topic, "default/a", {"n": 1})
        pub.publish(topic, {"kind": "fuzz"})
    pub.flush()
    pub.stop()
    # A scenario "already running" (this process): a valid start is a 409 and starts nothing.
    (run_dir / "scenario.pid").write_text(str(os.getpid()))
    server = DashboardServer(redis_url, prefix, django_db, run_dir, CTRLSCOPE_SIM_KUBECONFIG=str(kubeconfig),
                             CTRLSCOPE_RUN_DIR=str(run_dir)).start()
    subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_USERS], cwd=ROOT, env=server.env,
                   check=True, capture_output=True, timeout=60)
    sessions = {"op": login(server, "op"), "viewer": login(server, "viewer"), "anonymous": requests.Session()}
    sessions["anonymous"].get(server.url + "/accounts/login/", timeout=10)
    client = redis.Redis.from_url(redis_url)
    yield {"server": server, "sim": sim, "sessions": sessions, "redis": client, "prefix": prefix, "run_dir": run_dir}
    client.close()
    server.stop()
    sim.stop()
    delete_prefix(redis_url, prefix)
    log = server.log.read_text(errors="replace")
    assert "Traceback" not in log and "Internal Server Error" not in log, log[-3000:]


def redis_state(stack: dict) -> dict[bytes, bytes | None]:
    """Every lasting key under the prefix and its value. Keys with a TTL (the presence sweep's lock,
    inspector rate counters) come and go with the clock, not with requests, and are left out."""
    client: redis.Redis = stack["redis"]
    keys = sorted(k for k in client.scan_iter(match=stack["prefix"] + "*", count=1000) if client.pttl(k) == -1)
    return {k: client.dump(k) for k in keys}


def sim_state(sim: SimCluster) -> tuple:
    return sim.call(lambda: (dict(sim.faults.errors), dict(sim.faults.latency), sim.kubelet.paused,
                             sim.store.rv))


def clear_errors(body: object, status: int, context: object) -> None:
    if isinstance(body, dict) and "error" in body:
        assert_clear(body["error"], context=context)
        record(TARGET, f"{status}: {body['error']}")
    else:
        record(TARGET, None if status < 400 else f"{status}")


TEXT = st.text(max_size=12) | st.sampled_from(["", "nan", "inf", "-1", "1e309", "0", "100", "reset", "*", "pods",
                                               "default", "a" * 400, "\x00", "../..", "%", "😀", "1" * 40])
SEGMENT = st.sampled_from([WORKER, INFORMER, CONTROLLER, "x", "-", "a.b", "ä", "%2F", "..", "a" * 300]) | \
    st.text(st.characters(codec="utf-8", exclude_characters="/?#"), min_size=1, max_size=8)
QUERY = st.dictionaries(st.sampled_from(["key", "history", "cache", "obj", "next", "x", "speed"]), TEXT, max_size=3)


def quote(segment: str) -> str:
    return urllib.parse.quote(segment, safe="")


PAGES = ["/", "/c/{a}/{b}/", "/c/{a}/informer/{b}/snapshot.json", "/c/{a}/informer/{b}/object", "/scenarios/",
         "/cluster/", "/cluster/faults/status", "/healthz", "/accounts/login/", "/scenarios/{a}/start",
         "/cluster/faults/{a}", "/presence.json", "/workers/{a}/forget"]


@budget(80)
@given(page=st.sampled_from(PAGES), a=SEGMENT, b=SEGMENT, query=QUERY,
       who=st.sampled_from(["op", "viewer", "anonymous"]))
@example(page="/c/{a}/informer/{b}/object", a=WORKER, b=INFORMER, query={"key": "default/a"}, who="op")
@example(page="/c/{a}/informer/{b}/snapshot.json", a=WORKER, b=INFORMER, query={"history": "1e309"}, who="op")
def test_every_get_with_any_parameters(stack: dict, page: str, a: str, b: str, query: dict, who: str) -> None:
    url = stack["server"].url + page.format(a=quote(a), b=quote(b))
    resp = stack["sessions"][who].get(url, params=query, timeout=15, allow_redirects=False)
    assert resp.status_code < 500 or resp.status_code in (503, 504), (url, query, resp.status_code, resp.text[:300])
    body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") else None
    clear_errors(body, resp.status_code, (url, query))


FIELDS = st.sampled_from(["verb", "resource", "rate", "code", "ms", "count", "namespace", "confirm", "speed", "x"])
FORM = st.dictionaries(FIELDS, TEXT | st.lists(TEXT, min_size=2, max_size=2), max_size=5)


@budget(100)
@given(action=st.sampled_from([*ACTIONS, "nope", "Reset", "a" * 70]), form=FORM,
       who=st.sampled_from(["op", "op", "op", "viewer", "anonymous"]), csrf=st.booleans() | st.just(True),
       kind=st.sampled_from(["fault", "fault", "scenario", "forget"]))
@example(action="errors", form={"verb": "create", "resource": "pods", "rate": "1e309", "code": "500"}, who="op",
         csrf=True, kind="fault")
@example(action="latency", form={"verb": "list", "resource": "*", "ms": "nan"}, who="op", csrf=True,
         kind="fault")
@example(action="leader-failover", form={"speed": "nan"}, who="op", csrf=True, kind="scenario")
@example(action="a" * 70, form={}, who="op", csrf=True, kind="forget")
def test_every_post_with_any_form(stack: dict, action: str, form: dict, who: str, csrf: bool,
                                  kind: str) -> None:
    from controllers.scenarios import SCENARIOS

    server, sim = stack["server"], stack["sim"]
    session: requests.Session = stack["sessions"][who]
    if kind == "scenario":
        name = action if action in SCENARIOS else next(iter(SCENARIOS))
        url = f"{server.url}/scenarios/{quote(name)}/start"
    elif kind == "forget":
        url = f"{server.url}/workers/{quote(WORKER if action in ACTIONS else action)}/forget"
    else:
        url = f"{server.url}/cluster/faults/{quote(action)}"
    headers = {"X-CSRFToken": session.cookies.get("csrftoken", ""), "Referer": server.url + "/"} if csrf else {}
    sim_before, redis_before = sim_state(sim), redis_state(stack)
    pid_before = (stack["run_dir"] / "scenario.pid").read_text()
    resp = session.post(url, data=form, headers=headers, timeout=15)
    status = resp.status_code
    assert status < 500 or status == 502, (url, form, status, resp.text[:300])
    body = resp.json() if resp.headers.get("content-type", "").startswith("application/json") else None
    clear_errors(body, status, (url, form))
    assert (stack["run_dir"] / "scenario.pid").read_text() == pid_before, "a scenario was started"
    if status >= 400:
        assert sim_state(sim) == sim_before, f"a refused POST changed the simulator: {url} {form}"
        assert redis_state(stack) == redis_before, f"a refused POST changed Redis: {url} {form}"
    # An accepted action changed the simulator; undo what would slow or fail the next examples.
    sim.call(lambda: (sim.faults.errors.clear(), sim.faults.latency.clear()))
