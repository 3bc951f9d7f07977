"""Every page the dashboard serves, in headless Chromium under its own Content-Security-Policy.

One stack for all of them: ``manage.py simcluster`` (publishing its faults), a worker running the
example controllers plus a Secret informer, a kopf-like operator publishing handler calls and log
lines (the Handlers and Logs panels and the mode banner), Redis, daphne and one browser page.

Each page must (a) come with the headers (a CSP without ``'unsafe-inline'``/``'unsafe-eval'``,
``Referrer-Policy``, ``nosniff``, frame denial), (b) report no ``securitypolicyviolation`` event, no
console message about the Content Security Policy and no page error, and (c) actually work: its live
panels fill with data from the stack, its forms and buttons do what they do. A page that quietly
stopped working under the policy would have no violation to show only if nothing ran at all; (c)
rules that out.

The violations are collected by an init script (Playwright injects it through DevTools, outside the
page's CSP) that forwards each event to Python, so they survive navigations.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from controllers.informers.http_client import KubernetesClient
from controllers.kopf import controller_name
from controllers.process import stop_process
from controllers.publish import ProtocolPublisher
from controllers.scenarios import SCENARIOS
from controllers.schema import HandlerCause, LogLevel, ObservationMode, topic_part
from tests.conftest import ROOT, LoggedProcess
from tests.dashboard.conftest import CREATE_USERS
from tests.dashboard.test_faults_browser import DEPLOYMENT, sim_kubeconfig  # noqa: F401 (fixture)

pytestmark = pytest.mark.browser

WORKER = "csp"
CONTROLLER = f"/c/{WORKER}/deployment-summary/"
KOPF_WORKER = "csp-kopf"
KOPF_CONTROLLER = controller_name("demo.ctrlscope.dev", "podsets")
KOPF_PAGE = f"/c/{KOPF_WORKER}/{topic_part(KOPF_CONTROLLER)}/"

LISTEN = """
document.addEventListener('securitypolicyviolation', (e) => window.__cspViolation({
  page: location.pathname, directive: e.violatedDirective, blocked: e.blockedURI,
  source: e.sourceFile + ':' + e.lineNumber, sample: e.sample,
}), true);
"""

CREATE_ADMIN = CREATE_USERS + """
admin, _ = User.objects.get_or_create(username="csp-admin")
admin.is_staff = admin.is_superuser = True
admin.set_password("s3cret-pass-admin")
admin.save()
print(admin.pk)
"""


@pytest.fixture
def dashboard(dashboard_factory, sim_kubeconfig):  # noqa: F811
    return dashboard_factory(CTRLSCOPE_SIM_KUBECONFIG=str(sim_kubeconfig))


@pytest.fixture
def stack(dashboard, sim_kubeconfig, tmp_path, redis_url, prefix):  # noqa: F811
    """The dashboard (conftest's users ``viewer`` and ``op``, and the superuser ``csp-admin``; one
    ``manage.py shell`` for the three) with live data."""
    admin_id = subprocess.run([sys.executable, "manage.py", "shell", "-c", CREATE_ADMIN], cwd=ROOT, env=dashboard.env,
                              check=True, capture_output=True, text=True, timeout=60).stdout.split()[-1]
    api = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    api.send_json("POST", "/apis/apps/v1/namespaces/default/deployments", DEPLOYMENT)
    api.send_json("POST", "/api/v1/namespaces/default/configmaps",
                  {"metadata": {"name": "greeting"}, "data": {"message": "hello"}})
    env = {**dashboard.env}
    worker = LoggedProcess(
        [sys.executable, "manage.py", "runcontrollers", "--controller", "controllers.examples.deployments:setup",
         "--controller", "tests.dashboard.inspect_setup:watch_secrets", "--kubeconfig", str(sim_kubeconfig),
         "--worker-name", WORKER, "--status-every", "0"], env, tmp_path / "worker.log", cwd=ROOT)
    kopf = ProtocolPublisher(redis_url, worker=KOPF_WORKER, runtime="kopf", prefix=prefix, metrics=False).start()
    try:
        podsets = kopf.informer("demo.ctrlscope.dev/v1/PodSet")
        podsets.listed([{"metadata": {"namespace": "default", "name": "web", "resourceVersion": "7"}}],
                       resource_version="7")
        podsets.synced()
        ctl = kopf.controller(KOPF_CONTROLLER, watches=["demo.ctrlscope.dev/v1/PodSet"], mode=ObservationMode.IN_PROCESS)
        queue = kopf.queue(KOPF_CONTROLLER)
        ctl.event("create", "default/web")
        queue.add("default/web")
        queue.get("default/web")
        with ctl.reconcile("default/web", handler="create_fn", cause=HandlerCause.CREATE, retry=0):
            ctl.log("default/web", LogLevel.INFO, "creating 3 pods", handler="create_fn")
            time.sleep(0.02)
        queue.done("default/web")
        kopf.publisher.flush()
        yield dashboard, admin_id
    finally:
        kopf.stop()
        stop_process(worker.proc)


class Recorder:
    """What the browser reported while the test drove it, and the headers of every document."""

    def __init__(self, page, base: str) -> None:
        self.page, self.base = page, base
        self.violations: list[dict] = []
        self.console: list[str] = []
        self.errors: list[str] = []
        self.documents: list[tuple[str, dict[str, str]]] = []
        page.expose_function("__cspViolation", lambda v: self.violations.append(v))
        page.add_init_script(LISTEN)
        page.on("console", lambda m: self.console.append(f"{m.type}: {m.text}")
                if "Content Security Policy" in m.text or "Content-Security-Policy" in m.text else None)
        page.on("pageerror", lambda err: self.errors.append(f"{page.url}: {err}"))
        page.on("response", lambda r: self.documents.append((r.url, r.all_headers()))
                if r.request.resource_type == "document" else None)

    def visit(self, path: str) -> None:
        response = self.page.goto(self.base + path)
        assert response is not None and response.ok, (path, response and response.status)

    def assert_clean(self) -> None:
        assert self.violations == [], self.violations
        assert self.console == [], self.console
        assert self.errors == [], self.errors


def assert_headers(url: str, headers: dict[str, str]) -> None:
    csp = headers.get("content-security-policy", "")
    directives = {d.split()[0]: d.split()[1:] for d in csp.split(";") if d.strip()}
    assert directives.get("script-src") == ["'self'"], (url, csp)
    assert directives.get("style-src") == ["'self'"], (url, csp)
    assert directives.get("default-src") == ["'self'"], (url, csp)
    assert directives.get("object-src") == ["'none'"] and directives.get("frame-ancestors") == ["'none'"], (url, csp)
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp and "*" not in csp, (url, csp)
    assert headers.get("referrer-policy") == "same-origin", url
    assert headers.get("x-content-type-options") == "nosniff", url
    assert headers.get("x-frame-options") == "DENY", url


def log_in(rec: Recorder, path: str, name: str, password: str) -> None:
    page = rec.page
    rec.visit(path)
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", password)
    with page.expect_navigation():
        page.click("form [type=submit]")


def test_every_page_works_under_the_policy(browser, stack):
    dashboard, admin_id = stack
    page = browser.new_page()
    rec = Recorder(page, dashboard.url)
    try:
        # Control: the login page as served, its headers kept, with an inline script and a style
        # attribute added. The policy blocks both and the recorder hears both.
        def tamper(route):
            served = route.fetch()
            body = served.text().replace("<main>", '<main style="outline: 1px solid red">'
                                         "<script>window.__inline = true</script>")
            route.fulfill(response=served, body=body)

        page.route("**/accounts/login/?control", tamper)
        rec.visit("/accounts/login/?control")
        page.unroute("**/accounts/login/?control")
        page.wait_for_function("() => document.getElementById('id_username')")
        page.wait_for_timeout(200)  # (the exposed function's calls arrive while Playwright waits)
        assert page.evaluate("window.__inline") is None, "the inline script ran"
        assert sorted(v["directive"] for v in rec.violations) == ["script-src-elem", "style-src-attr"], rec.violations
        assert len(rec.console) == 2 and all("Content Security Policy" in m for m in rec.console), rec.console
        rec.violations.clear()
        rec.console.clear()

        # Login (anonymous), then every dashboard page as an operator.
        log_in(rec, "/accounts/login/?next=/", "op", "s3cret-pass-op")
        assert page.url == dashboard.url + "/"
        page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        page.wait_for_selector(f'#overview .worker[data-worker="{WORKER}"] .ctl-card[data-controller="deployment-summary"]',
                               timeout=20_000)
        page.wait_for_selector(f'#overview .worker[data-worker="{KOPF_WORKER}"]', timeout=10_000)
        page.click("#dev > summary")  # the developer view: counters, topics, the live event list
        page.wait_for_function("() => document.querySelectorAll('#events tr').length > 0", timeout=10_000)
        page.click("#theme-toggle")  # theme.js: a class on <html>, no inline style
        page.click("#theme-toggle")

        # The controller page with every panel, deep-linked into the cache and the object inspector.
        rec.visit(CONTROLLER + "?cache=v1_ConfigMap&obj=default/greeting")
        page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        lane = '#lanes .lane[data-key="default/web"]'
        page.wait_for_selector(f"{lane} .attempt.result-success", timeout=20_000)
        page.wait_for_selector("#q-queued, #q-processing, #q-waiting", state="attached")
        page.wait_for_function("() => document.querySelectorAll('#ievents tr').length > 0", timeout=10_000)
        page.wait_for_selector("#tl-axis .tick", state="attached", timeout=10_000)
        assert page.evaluate("document.querySelector('#tl-axis .tick').style.left") != "", "tick placed by CSSOM"
        yaml_box = page.wait_for_selector("#cache-object .obj-yaml", timeout=20_000)
        assert "kind: ConfigMap" in yaml_box.inner_text() and "message: hello" in yaml_box.inner_text()
        page.wait_for_selector("#metrics-charts .metric-key .swatch", timeout=20_000)
        swatch = page.evaluate("getComputedStyle(document.querySelector('#metrics-charts .swatch')).backgroundColor")
        assert swatch not in ("", "rgba(0, 0, 0, 0)"), "the legend's colour (a CSSOM style) applies"
        page.dispatch_event(f"{lane} .attempt.result-success", "click")
        page.wait_for_selector("#details:not([hidden])")
        if not page.evaluate("document.getElementById('faults-panel').open"):
            page.click("#faults-panel > summary")
        page.wait_for_selector('#faults-sim[data-state="ok"]', timeout=10_000)

        # A key's own page: its story from the retained streams, its object and the versions' diffs.
        rec.visit(CONTROLLER + "k/default/web")
        page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        page.wait_for_selector("#story tr", timeout=15_000)

        # An informer's own page: its handlers' calls, its events and its cache.
        rec.visit(f"/c/{WORKER}/informer/apps_v1_Deployment/")
        page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        page.wait_for_function("() => document.querySelectorAll('#ievents tr').length > 0", timeout=10_000)

        # The same page for a kopf operator: handlers, logs and the mode banner.
        rec.visit(KOPF_PAGE)
        page.wait_for_selector("#mode:not([hidden])", timeout=15_000)
        page.wait_for_selector('#handlers-panel:not([hidden]) #handlers tr[data-handler="create_fn"]', timeout=10_000)
        page.wait_for_selector("#logs-panel:not([hidden])", timeout=10_000)
        assert "creating 3 pods" in page.inner_text("#logs")

        # Scenarios: every scenario's section, live, with the operator's controls.
        rec.visit("/scenarios/")
        page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        assert page.locator("section.scenario").count() == len(SCENARIOS)
        assert page.locator("section.scenario button.start").count() == len(SCENARIOS)

        # Cluster: the Faults panel reaches the simulator, and an action (a POST over fetch) works.
        rec.visit("/cluster/")
        page.wait_for_selector('#conn[data-state="live"]', timeout=15_000)
        page.wait_for_selector('#faults-sim[data-state="ok"]', timeout=10_000)
        page.click('#faults-panel button[data-action="end-watches"]')
        page.wait_for_selector("#faults-result.ok", timeout=10_000)
        page.wait_for_selector("#faults-log tr.fault-end-watches", timeout=10_000)

        # A 404 (Django's plain page, DEBUG off) carries the policy too.
        response = page.goto(dashboard.url + "/no/such/page/")
        assert response.status == 404
        assert_headers(response.url, response.all_headers())

        # Log out from the top bar: the logged-out page.
        rec.visit("/")
        with page.expect_navigation():
            page.click("header form.inline button[type=submit]")
        assert "Logged out" in page.content()

        # Django admin under the same policy: login, index, a changelist, change and add forms.
        log_in(rec, "/admin/login/?next=/admin/", "csp-admin", "s3cret-pass-admin")
        assert page.url == dashboard.url + "/admin/"
        page.wait_for_selector("#content-main a[href='/admin/auth/user/']")
        rec.visit("/admin/auth/user/")
        page.wait_for_selector("#action-toggle")
        page.click("#action-toggle")  # actions.js ticks every row and shows the count
        page.wait_for_function("() => /^(\\d+) of \\1 selected/.test(document.querySelector('.action-counter').textContent)")
        rec.visit(f"/admin/auth/user/{admin_id}/change/")
        page.wait_for_selector("#id_user_permissions_from", timeout=10_000)  # SelectFilter2.js built its widget
        rec.visit("/admin/auth/group/add/")
        page.wait_for_selector("#id_permissions_from", timeout=10_000)
        page.locator("#id_permissions_input").press_sequentially("log entry")  # SelectBox.js filters on keyup
        page.wait_for_function("() => document.querySelectorAll('#id_permissions_from option').length <= 4", timeout=5_000)
        with page.expect_navigation():
            page.click("#logout-form button[type=submit]")
        assert "Logged out" in page.content()

        page.wait_for_timeout(300)  # anything reported late
        rec.assert_clean()
        assert len(rec.documents) >= 14, [u for u, _ in rec.documents]
        for url, headers in rec.documents:
            assert_headers(url, headers)
    finally:
        page.close()
        browser.clear_cookies()
