"""The browser security headers without a browser: every HTML view (and the JSON, redirects, static
files and error pages around them) carries them; the policy's knobs; and a scan of the templates and
static files for what the policy would block (test_csp_browser.py shows the pages working under it).
"""

from __future__ import annotations

import re

import pytest
import requests
from django.core.exceptions import ImproperlyConfigured

from dashboard.security_headers import DIRECTIVES, _sources, build_policy
from tests.conftest import ROOT

STRICT = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
          "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'")

# Every route of dashboard/urls.py, by what it answers (GET, anonymous access on as in make demo).
HTML = {"index": "/", "controller": "/c/w1/podset/", "informer": "/c/w1/informer/v1_Pod/",
        "watcher": "/c/w1/watcher/deployments/", "scenarios": "/scenarios/",
        "cluster": "/cluster/", "login": "/accounts/login/", "key": "/c/w1/podset/k/default/web",
        "cluster-key": "/c/w1/nodes/k/node-1"}
OTHER = {"informer_snapshot": "/c/w1/informer/pods/snapshot.json", "key_story": "/c/w1/podset/story.json", "inspect_object": "/c/w1/informer/pods/object",
         "fault-status": "/cluster/faults/status", "healthz": "/healthz", "readyz": "/readyz",
         "presence": "/presence.json", "start-scenario": None, "fault-action": None, "forget-worker": None,
         "logout": None,  # None: POST only, or (the OIDC flow's two) served only when OIDC is configured
         "oidc_authentication_init": None, "oidc_authentication_callback": None}
EXTRA = ["/admin/login/", "/admin/", "/no/such/page/", "/static/dashboard/app.js", "/static/admin/css/base.css"]


def assert_headers(resp: requests.Response, policy: str = STRICT) -> None:
    where = f"{resp.request.method} {resp.url} ({resp.status_code})"
    assert resp.headers.get("Content-Security-Policy") == policy, where
    assert resp.headers.get("Referrer-Policy") == "same-origin", where
    assert resp.headers.get("X-Content-Type-Options") == "nosniff", where
    if "/static/" not in resp.url:  # WhiteNoise answers before XFrameOptionsMiddleware; frame-ancestors covers it
        assert resp.headers.get("X-Frame-Options") == "DENY", where


def test_every_route_is_classified():
    names = set(re.findall(r'name="([^"]+)"', (ROOT / "dashboard" / "urls.py").read_text()))
    assert names <= HTML.keys() | OTHER.keys(), f"a new route: add it to HTML (and test_csp_browser.py) or OTHER: {names - HTML.keys() - OTHER.keys()}"


def test_every_response_carries_the_headers(dashboard):
    for path in [*HTML.values(), *(p for p in OTHER.values() if p), *EXTRA]:
        resp = requests.get(dashboard.url + path, timeout=10, allow_redirects=False,
                            params={"key": "default/x"} if path.endswith("/object") else None)
        assert_headers(resp)
        if path in HTML.values():
            assert resp.status_code == 200 and resp.headers["Content-Type"].startswith("text/html"), path
    # A POST refused (no CSRF token) is an HTML page too.
    assert_headers(requests.post(dashboard.url + "/accounts/login/", timeout=10))


def test_a_deployment_extends_connect_src_and_asks_for_reports(dashboard_factory):
    server = dashboard_factory(CTRLSCOPE_CSP_CONNECT_SRC="wss://dash.example.com, https://api.example.com:8443",
                               CTRLSCOPE_CSP_REPORT_URI="/csp-reports")
    expected = STRICT.replace("connect-src 'self'", "connect-src 'self' wss://dash.example.com https://api.example.com:8443")
    assert_headers(requests.get(server.url + "/", timeout=10), expected + "; report-uri /csp-reports")


def test_the_policy_and_its_knobs():
    assert build_policy() == STRICT
    assert "'unsafe-" not in STRICT and "*" not in STRICT
    assert set(DIRECTIVES) >= {"default-src", "script-src", "style-src", "img-src", "connect-src", "object-src",
                               "base-uri", "form-action", "frame-ancestors"}
    assert _sources(" wss://dash.example.com,dash.example.com:8443 ", "X") == ("wss://dash.example.com",
                                                                              "dash.example.com:8443")
    assert _sources("", "X") == ()
    for bad in ("'unsafe-inline'", "'unsafe-eval'", "*", "https:", "*.example.com", "data:", "a.example; script-src *",
                "'nonce-abc'", "https://*.example.com"):
        with pytest.raises(ImproperlyConfigured):
            _sources(bad, "CTRLSCOPE_CSP_CONNECT_SRC")
    for bad in ("javascript:alert(1)", "/r; script-src *", "x y"):
        with pytest.raises(ImproperlyConfigured):
            build_policy(report_uri=bad)


# What script-src 'self' and style-src 'self' block, as it would appear in our sources. (A page's data
# comes in json_script's <script type="application/json">, written by the filter, not in template text.)
TEMPLATE_BLOCKED = {
    "inline <script>": re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I),
    "event handler attribute": re.compile(r"<[^>]*\son[a-z]+\s*=", re.I),
    "style attribute": re.compile(r"<[^>]*\sstyle\s*=", re.I),
    "<style> element": re.compile(r"<style\b", re.I),
    "javascript: URL": re.compile(r"javascript:", re.I),
}
SCRIPT_BLOCKED = {
    "setAttribute('style')": re.compile(r"setAttribute\(\s*[\"']style[\"']"),
    "HTML parsing": re.compile(r"\.(?:innerHTML|outerHTML)\s*=|insertAdjacentHTML|document\.write"),
    "eval": re.compile(r"\beval\(|new Function\b|set(?:Timeout|Interval)\(\s*[\"'`]"),
    "javascript: URL": re.compile(r"javascript:", re.I),
}
FOREIGN = re.compile(r"(?:https?:|wss?:)?//(?!www\.w3\.org/2000/svg)[a-z0-9.-]+\.[a-z]{2,}", re.I)


def test_templates_and_static_files_have_nothing_the_policy_blocks():
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text()
        found += [f"{path.relative_to(ROOT)}: {what}" for what, rx in TEMPLATE_BLOCKED.items() if rx.search(text)]
        found += [f"{path.relative_to(ROOT)}: foreign origin {m}" for m in FOREIGN.findall(text)]
    for path in sorted((ROOT / "dashboard" / "static").rglob("*")):
        if path.suffix not in (".js", ".css"):
            continue
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("//"))
        if path.suffix == ".js":
            found += [f"{path.relative_to(ROOT)}: {what}" for what, rx in SCRIPT_BLOCKED.items() if rx.search(text)]
        else:
            found += [f"{path.relative_to(ROOT)}: @import" for _ in re.findall(r"@import", text)]
        found += [f"{path.relative_to(ROOT)}: foreign origin {m}" for m in FOREIGN.findall(text)]
    assert found == []
