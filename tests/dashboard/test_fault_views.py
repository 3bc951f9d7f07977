"""POST /cluster/faults/<action> against a real simulator: operators only, CSRF-protected, validated
before anything is sent, the simulator's answers (and its absence) surfaced; GET …/status says whether
the configured cluster is a simulator at all."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests
import yaml

from controllers.informers.http_client import KubernetesClient
from controllers.sim import SimCluster
from controllers.telemetry.redisboot import free_port
from tests.dashboard.conftest import login
from tests.sim.conftest import FAST

VALID = {
    "errors": {"verb": "create", "resource": "pods", "rate": "50", "code": "503"},
    "latency": {"verb": "list", "resource": "*", "ms": "200"},
    "kill-pods": {"count": "1", "namespace": "default"},
    "reset": {"confirm": "reset"},
}


@pytest.fixture
def sim():
    cluster = SimCluster(port=0, **FAST).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def sim_kubeconfig(sim: SimCluster, tmp_path: Path) -> Path:
    return sim.write_kubeconfig(tmp_path / "kubeconfig-sim.yaml")


@pytest.fixture
def dashboard(dashboard_factory, sim_kubeconfig: Path, request):
    """Overrides conftest's: this dashboard injects faults into the test's simulator (more settings
    through indirect parametrization)."""
    return dashboard_factory(**{"CTRLSCOPE_SIM_KUBECONFIG": str(sim_kubeconfig), **getattr(request, "param", {})})


def post(session: requests.Session, dashboard, action: str, data: dict[str, str] | None = None,
         csrf: bool = True) -> requests.Response:
    headers = {"X-CSRFToken": session.cookies.get("csrftoken", "")} if csrf else {}
    return session.post(f"{dashboard.url}/cluster/faults/{action}", data=data or {}, headers=headers, timeout=15)


def anonymous_session(dashboard) -> requests.Session:
    s = requests.Session()
    s.get(dashboard.url + "/accounts/login/", timeout=10)  # a CSRF cookie, as the page would have
    return s


def sim_state(sim: SimCluster) -> tuple:
    return sim.call(lambda: (dict(sim.faults.errors), dict(sim.faults.latency), sim.kubelet.paused,
                             len(sim.faults.events), sim.store.rv))


def test_viewers_and_anonymous_users_get_403_and_the_simulator_is_untouched(users, sim):
    dashboard = users
    before = sim_state(sim)
    for who, session in (("anonymous", anonymous_session(dashboard)), ("viewer", login(dashboard, "viewer"))):
        for action in ("drop-watches", "errors", "kill-pods", "reset", "pause-kubelet"):
            resp = post(session, dashboard, action, VALID.get(action))
            assert resp.status_code == 403, (who, action, resp.text[:200])
            assert "operators only" in resp.json()["error"]
    assert sim_state(sim) == before
    assert "fault reset refused for viewer: not an operator" in dashboard.log.read_text()


def test_operator_actions_change_the_simulator_and_are_logged_with_the_user(users, sim):
    dashboard = users
    op = login(dashboard, "op")
    assert post(op, dashboard, "errors", VALID["errors"]).json() == {"ok": True, "action": "errors",
                                                                     "label": "inject errors", "result": {"ok": True}}
    assert post(op, dashboard, "latency", VALID["latency"]).status_code == 200
    assert post(op, dashboard, "pause-kubelet").status_code == 200
    assert sim_state(sim)[:3] == ({("create", "pods"): (0.5, 503)}, {("list", "*"): 0.2}, True)
    client = KubernetesClient.for_host(sim.url)
    for name in ("a", "b"):
        client.send_json("POST", "/api/v1/namespaces/default/pods",
                         {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    killed = post(op, dashboard, "kill-pods", VALID["kill-pods"]).json()["result"]["killed"]
    assert len(killed) == 1 and killed[0] in ("default/a", "default/b")
    assert post(op, dashboard, "drop-watches").json()["result"]["closed"] == 0
    for action in ("clear-errors", "clear-latency", "resume-kubelet", "end-watches", "compact"):
        assert post(op, dashboard, action).status_code == 200, action
    assert sim_state(sim)[:3] == ({}, {}, False)
    assert post(op, dashboard, "reset", VALID["reset"]).status_code == 200
    assert [e["fault"] for e in sim.call(lambda: list(sim.faults.events))] == [
        "errors", "latency", "kubelet-pause", "kill-pods", "drop-watches", "errors-cleared", "latency-cleared",
        "kubelet-resume", "end-watches", "compact", "reset"]
    # The simulator's own fault log (and the telemetry built from it) says who injected each one.
    assert {e.get("by") for e in sim.call(lambda: list(sim.faults.events))} == {"op"}
    log = dashboard.log.read_text()
    assert "fault errors {'verb': 'create', 'resource': 'pods', 'rate': 50.0, 'code': 503} by op at" in log
    assert "fault reset {'confirm': 'reset'} by op at" in log


BAD_INPUT = [
    ("errors", {**VALID["errors"], "rate": "150"}, "rate: Ensure this value is less than or equal to 100."),
    ("errors", {**VALID["errors"], "rate": "half"}, "rate: Enter a number."),
    ("errors", {**VALID["errors"], "verb": "frobnicate"}, "verb: Select a valid choice."),
    ("errors", {**VALID["errors"], "resource": "Pods!"}, "resource: a lowercase plural resource"),
    ("errors", {**VALID["errors"], "code": "200"}, "code: Ensure this value is greater than or equal to 400."),
    ("latency", {**VALID["latency"], "ms": "-1"}, "ms: Ensure this value is greater than or equal to 0."),
    ("latency", {**VALID["latency"], "ms": "99999"}, "ms: Ensure this value is less than or equal to 30000."),
    ("latency", {"verb": "list"}, "resource: This field is required.; ms: This field is required."),
    ("kill-pods", {"count": "0"}, "count: Ensure this value is greater than or equal to 1."),
    ("kill-pods", {"count": "1000"}, "count: Ensure this value is less than or equal to 50."),
    ("kill-pods", {"count": "1", "namespace": "Bad_NS"}, "namespace: a namespace name"),
    ("reset", {"confirm": "yes"}, "confirm: send confirm=reset"),
    ("reset", {}, "confirm: This field is required."),
]


def test_bad_input_is_a_400_with_the_reason_and_nothing_reaches_the_simulator(users, sim):
    dashboard = users
    op = login(dashboard, "op")
    before = sim_state(sim)
    for action, data, message in BAD_INPUT:
        resp = post(op, dashboard, action, data)
        assert resp.status_code == 400 and message in resp.json()["error"], (action, data, resp.text)
    assert sim_state(sim) == before


def test_unknown_actions_are_404_and_posts_without_the_csrf_token_are_refused(users, sim):
    dashboard = users
    op = login(dashboard, "op")
    before = sim_state(sim)
    assert post(op, dashboard, "explode").status_code == 404
    refused = post(op, dashboard, "drop-watches", csrf=False)
    assert refused.status_code == 403 and "CSRF" in refused.text
    assert post(op, dashboard, "reset", VALID["reset"], csrf=False).status_code == 403
    assert sim_state(sim) == before


@pytest.mark.parametrize("dashboard", [{"CTRLSCOPE_ALLOW_ANONYMOUS": "0"}], indirect=True)
def test_anonymous_is_refused_everything_when_anonymous_access_is_off(dashboard, sim):
    session = anonymous_session(dashboard)
    page = session.get(dashboard.url + "/cluster/", timeout=10, allow_redirects=False)
    assert page.status_code == 302 and page.headers["Location"].startswith("/accounts/login/")
    assert session.get(dashboard.url + "/cluster/faults/status", timeout=10).status_code == 403
    before = sim_state(sim)
    resp = post(session, dashboard, "drop-watches")
    assert resp.status_code == 403 and "operators only" in resp.json()["error"]
    assert sim_state(sim) == before


class _RealApiServer(BaseHTTPRequestHandler):
    """What a real kube-apiserver answers for /_sim/…: it has no such path."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's spelling)
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                           "message": "the server could not find the requested resource", "code": 404}).encode()
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args) -> None:
        pass


def point_kubeconfig_at(path: Path, url: str) -> None:
    config = yaml.safe_load(path.read_text())
    config["clusters"][0]["cluster"]["server"] = url
    path.write_text(yaml.safe_dump(config))


def test_status_and_502s_say_whether_the_cluster_is_a_simulator(users, sim, sim_kubeconfig):
    dashboard = users
    op = login(dashboard, "op")
    status = lambda: op.get(dashboard.url + "/cluster/faults/status", timeout=15).json()  # noqa: E731
    assert status() == {"state": "ok", "url": sim.url, "backend": "simulator", "disabled": {}}

    real = ThreadingHTTPServer(("127.0.0.1", 0), _RealApiServer)
    threading.Thread(target=real.serve_forever, daemon=True).start()
    try:
        point_kubeconfig_at(sim_kubeconfig, f"http://127.0.0.1:{real.server_port}")
        assert status()["state"] == "not-simulator"
        resp = post(op, dashboard, "drop-watches")
        assert resp.status_code == 502
        assert "has no /_sim/ endpoints (404): it is not a simulator" in resp.json()["error"]
    finally:
        real.shutdown()
        real.server_close()

    gone = f"http://127.0.0.1:{free_port()}"
    point_kubeconfig_at(sim_kubeconfig, gone)
    assert status() == {"state": "unreachable", "url": gone,
                        "message": f"the simulator at {gone} does not answer (is `make demo` running?)"}
    resp = post(op, dashboard, "compact")
    assert resp.status_code == 502 and "does not answer" in resp.json()["error"]


@pytest.mark.parametrize("dashboard", [{"CTRLSCOPE_SIM_KUBECONFIG": ""}], indirect=True)
def test_without_a_simulator_the_page_says_so_and_offers_no_buttons(users):
    dashboard = users
    op = login(dashboard, "op")
    html = op.get(dashboard.url + "/cluster/", timeout=10).text
    assert "fault injection needs the simulated cluster" in html
    assert 'id="faults-actions"' not in html and "data-action=" not in html
    assert op.get(dashboard.url + "/cluster/faults/status", timeout=10).json()["state"] == "off"
    resp = post(op, dashboard, "drop-watches")
    assert resp.status_code == 409 and "fault injection needs the simulated cluster" in resp.json()["error"]
