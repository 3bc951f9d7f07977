"""OIDC single sign-on against a real OpenID Connect provider on loopback: panva's oidc-provider
(npm, exact versions from oidc_provider/package-lock.json, installed by this test with `npm ci` into
a cache outside the repo). A requests session plays the browser: the login page's "Sign in with
SSO" button, the provider's login and consent forms, the redirects back; the groups claim decides
the role (operators act, viewers read, anyone else gets no access), and again at each renewal.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import time
import uuid
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import pytest
import requests
import websockets

from controllers.telemetry.redisboot import free_port
from tests.conftest import DashboardServer, LoggedProcess, run_async

HERE = Path(__file__).resolve().parent / "oidc_provider"
FILES = ("package.json", "package-lock.json", "provider.mjs")
CLIENT_ID, CLIENT_SECRET = "ctrlscope-test", "test-only-client-secret"
RENEW_SECONDS = 3


def _cache_root() -> Path:
    if os.environ.get("CTRLSCOPE_CACHE"):
        return Path(os.environ["CTRLSCOPE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or (Path.home() / ".cache" if Path.home() != Path("/") else "/tmp")
    return Path(base) / "ctrlscope"


@pytest.fixture(scope="session")
def oidc_provider_dir() -> Path:
    """oidc-provider installed from the committed lockfile (once per lockfile) into the cache."""
    npm, node = shutil.which("npm"), shutil.which("node")
    if not (npm and node):
        if os.environ.get("CI"):
            pytest.fail("node and npm are needed for the OIDC provider: .ci/run should have installed them")
        pytest.skip("node/npm not installed (apt-get install nodejs npm); .ci/run installs them")
    digest = hashlib.sha256(b"".join((HERE / f).read_bytes() for f in FILES)).hexdigest()[:12]
    target = _cache_root() / f"oidc-provider-{digest}"
    if not (target / ".installed").exists():
        target.mkdir(parents=True, exist_ok=True)
        for f in FILES:
            shutil.copy(HERE / f, target / f)
        result = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"],
                                cwd=target, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"npm ci failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        (target / ".installed").touch()
    return target


class Forms(HTMLParser):
    """The forms of a page: action, method and the inputs' names and values."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form":
            self.forms.append({"action": a.get("action", ""), "method": (a.get("method") or "get").lower(),
                               "id": a.get("id"), "inputs": {}})
        elif tag == "input" and self.forms and a.get("name"):
            self.forms[-1]["inputs"][a["name"]] = a.get("value") or ""


def forms(resp: requests.Response) -> list[dict]:
    parser = Forms()
    parser.feed(resp.text)
    return parser.forms


def submit(s: requests.Session, resp: requests.Response, form: dict, **fields: str) -> requests.Response:
    url = urljoin(resp.url, form["action"] or resp.url)
    data = {**form["inputs"], **fields}
    if form["method"] == "post":
        return s.post(url, data=data, timeout=20)
    return s.get(url, params=data, timeout=20)


def sso_sign_in(dashboard: DashboardServer, login: str, next_path: str = "/scenarios/") -> tuple[requests.Session, requests.Response]:
    """Through the login page's button, the provider's login form (any password) and its consent form."""
    s = requests.Session()
    page = s.get(dashboard.url + "/accounts/login/", params={"next": next_path}, timeout=10)
    assert "Sign in with SSO" in page.text
    button = next(f for f in forms(page) if f["id"] == "sso-login")
    at_provider = submit(s, page, button)
    assert at_provider.url.startswith(dashboard.env["CTRLSCOPE_OIDC_ISSUER"]), at_provider.url
    login_form = next(f for f in forms(at_provider) if f["inputs"].get("prompt") == "login")
    after_login = submit(s, at_provider, login_form, login=login, password="anything")
    consent = next((f for f in forms(after_login) if f["inputs"].get("prompt") == "consent"), None)
    final = submit(s, after_login, consent) if consent else after_login
    return s, final


def forget(s: requests.Session, dashboard: DashboardServer) -> requests.Response:
    return s.post(dashboard.url + "/workers/no-such-worker/forget", timeout=10, allow_redirects=False,
                  headers={"X-CSRFToken": s.cookies.get("csrftoken", "")})


def db_identity(db: Path, username: str) -> tuple | None:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT u.is_active, u.password, i.source, i.role, i.groups FROM auth_user u "
                            "JOIN dashboard_externalidentity i ON i.user_id = u.id WHERE u.username = ?",
                            (username,)).fetchone()


@pytest.fixture
def oidc_stack(oidc_provider_dir, redis_url, prefix, django_db, run_dir):
    """The provider and a dashboard that signs in with it; yields (dashboard, accounts file, names)."""
    tag = uuid.uuid4().hex[:6]
    names = {"op": f"olga-{tag}", "viewer": f"victor-{tag}", "nobody": f"nadia-{tag}"}
    accounts = run_dir / f"oidc-accounts-{tag}.json"
    accounts.write_text(json.dumps({
        names["op"]: {"email": f"{names['op']}@example.test", "groups": ["ctrl-ops", "staff"]},
        names["viewer"]: {"email": f"{names['viewer']}@example.test", "groups": ["ctrl-view"]},
        names["nobody"]: {"email": f"{names['nobody']}@example.test", "groups": ["marketing"]},
    }))
    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    dashboard = DashboardServer(redis_url, prefix, django_db, run_dir, CTRLSCOPE_ALLOW_ANONYMOUS="0",
                                CTRLSCOPE_OIDC_ISSUER=issuer, CTRLSCOPE_OIDC_CLIENT_ID=CLIENT_ID,
                                CTRLSCOPE_OIDC_CLIENT_SECRET=CLIENT_SECRET,
                                CTRLSCOPE_OIDC_TOKEN_AUTH="basic",  # the provider's default client auth
                                CTRLSCOPE_OIDC_RENEW_SECONDS=str(RENEW_SECONDS),
                                CTRLSCOPE_OPERATOR_GROUPS="ctrl-ops", CTRLSCOPE_VIEWER_GROUPS="ctrl-view")
    provider = LoggedProcess(["node", str(oidc_provider_dir / "provider.mjs"), str(port), CLIENT_ID, CLIENT_SECRET,
                              dashboard.url + "/accounts/oidc/callback/", str(accounts)],
                             env={**os.environ, "NODE_ENV": "development"}, log=run_dir / f"oidc-provider-{tag}.log",
                             cwd=oidc_provider_dir)
    try:
        provider.wait_for_output("listening on", timeout=60)
        dashboard.start()
        yield dashboard, accounts, names
    finally:
        dashboard.stop()
        provider.stop()


def test_oidc_sign_in_maps_the_groups_claim_to_roles(oidc_stack, django_db):
    dashboard, _, names = oidc_stack

    s, page = sso_sign_in(dashboard, names["op"])
    assert page.status_code == 200 and page.url == dashboard.url + "/scenarios/", (page.status_code, page.url, page.text[:500])
    assert names["op"] in page.text, "signed in: the page shows the user"
    acted = forget(s, dashboard)
    assert acted.status_code == 404, f"an operator gets past the role check: {acted.text[:300]}"
    active, password, source, role, groups = db_identity(django_db, names["op"])
    assert (active, source, role, json.loads(groups)) == (1, "oidc", "operator", ["ctrl-ops", "staff"])
    assert password.startswith("!"), "an externally managed user has an unusable password"

    v, page = sso_sign_in(dashboard, names["viewer"], next_path="/")
    assert page.status_code == 200 and page.url == dashboard.url + "/"
    assert v.get(dashboard.url + "/presence.json", timeout=10).status_code == 200
    refused = forget(v, dashboard)
    assert refused.status_code == 403 and "operators only" in refused.json()["error"]
    assert db_identity(django_db, names["viewer"])[3] == "viewer"

    n, page = sso_sign_in(dashboard, names["nobody"])
    assert page.status_code == 403, page.text[:500]
    assert "none of your groups (marketing)" in page.text
    assert n.get(dashboard.url + "/", timeout=10, allow_redirects=False).status_code == 302, "not signed in"


async def _ws_hello(url: str, origin: str, cookie: str) -> str:
    async with websockets.connect(url, origin=origin, additional_headers={"Cookie": cookie}, open_timeout=10) as ws:
        return await ws.recv()


def test_oidc_session_opens_the_websocket_and_renewal_reevaluates_groups(oidc_stack, django_db):
    dashboard, accounts, names = oidc_stack
    s, page = sso_sign_in(dashboard, names["op"], next_path="/")
    assert page.status_code == 200
    cookie = "; ".join(f"{c.name}={c.value}" for c in s.cookies if c.name == "sessionid")
    assert '"hello"' in run_async(_ws_hello(dashboard.ws_url, dashboard.url, cookie))
    assert forget(s, dashboard).status_code == 404

    # The operator group is taken away at the identity provider. After the renewal interval the
    # next page load goes back to the provider (prompt=none, no form) and comes back a viewer.
    table = json.loads(accounts.read_text())
    table[names["op"]]["groups"] = ["ctrl-view"]
    accounts.write_text(json.dumps(table))
    time.sleep(RENEW_SECONDS + 0.5)
    renewed = s.get(dashboard.url + "/", headers={"Accept": "text/html"}, timeout=20)
    assert renewed.status_code == 200 and renewed.url == dashboard.url + "/", (renewed.status_code, renewed.url)
    assert any(r.url.startswith(dashboard.env["CTRLSCOPE_OIDC_ISSUER"]) for r in renewed.history), \
        "the renewal went to the provider"
    assert db_identity(django_db, names["op"])[3] == "viewer"
    assert forget(s, dashboard).status_code == 403

    # All mapped groups gone: the next renewal signs the user out with the reason.
    table[names["op"]]["groups"] = []
    accounts.write_text(json.dumps(table))
    time.sleep(RENEW_SECONDS + 0.5)
    gone = s.get(dashboard.url + "/", headers={"Accept": "text/html"}, timeout=20)
    assert gone.status_code == 403 and "none of your groups (none)" in gone.text, gone.text[:500]
    assert s.get(dashboard.url + "/", timeout=10, allow_redirects=False).status_code == 302
