"""Trusted-proxy single sign-on against a real daphne: the proxy's user and groups headers sign a
user in with the mapped role only when the connection comes from a trusted proxy address.

daphne listens on 127.0.0.1; the trusted proxy is 127.0.0.2 (loopback is a /8 on Linux), so the
same server is reached from a trusted peer (source address 127.0.0.2) and an untrusted one
(127.0.0.1). Nothing here sets X-Forwarded-For: the peer address is the connection's own.
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid

import pytest
import requests
import websockets
from requests.adapters import HTTPAdapter

from tests.conftest import run_async

PROXY = "127.0.0.2"
ENV = {
    "CTRLSCOPE_TRUSTED_PROXIES": f"{PROXY}/32,10.99.0.0/16",
    "CTRLSCOPE_OPERATOR_GROUPS": "ctrl-ops",
    "CTRLSCOPE_VIEWER_GROUPS": "ctrl-view, readers",
    "CTRLSCOPE_ALLOW_ANONYMOUS": "0",  # nothing may fall back to anonymous viewing
}


class SourceAddress(HTTPAdapter):
    """Connections from a chosen local address (the proxy's)."""

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args, **kwargs):
        kwargs["source_address"] = (self.address, 0)
        return super().init_poolmanager(*args, **kwargs)


def session_from(address: str | None) -> requests.Session:
    s = requests.Session()
    if address is not None:
        s.mount("http://", SourceAddress(address))
    return s


def proxied(user: str, groups: str, email: str | None = None) -> dict[str, str]:
    headers = {"X-Forwarded-User": user, "X-Forwarded-Groups": groups}
    if email:
        headers["X-Forwarded-Email"] = email
    return headers


def post_action(s: requests.Session, url: str, headers: dict[str, str]) -> requests.Response:
    """An operator action (forgetting a worker): CSRF token from the cookie the pages set."""
    token = s.cookies.get("csrftoken", "")
    return s.post(url + "/workers/no-such-worker/forget", headers={**headers, "X-CSRFToken": token},
                  timeout=10, allow_redirects=False)


def db_user(db, username: str) -> tuple | None:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT u.is_active, u.password, i.source, i.role FROM auth_user u "
                            "LEFT JOIN dashboard_externalidentity i ON i.user_id = u.id WHERE u.username = ?",
                            (username,)).fetchone()


@pytest.fixture
def sso(dashboard_factory):
    return dashboard_factory(**ENV)


def test_proxy_headers_from_an_untrusted_address_are_refused(sso, django_db):
    name = f"mallory-{uuid.uuid4().hex[:6]}"
    direct = session_from(None)  # 127.0.0.1: not a trusted proxy
    page = direct.get(sso.url + "/", headers=proxied(name, "ctrl-ops"), timeout=10, allow_redirects=False)
    assert page.status_code == 403, page.text[:300]
    assert "not a trusted proxy" in page.text and "X-Forwarded-User" in page.text
    # An operator action with forged headers: refused before anything runs, and nobody was created.
    assert post_action(direct, sso.url, proxied(name, "ctrl-ops")).status_code == 403
    assert direct.get(sso.url + "/presence.json", headers={"X-Forwarded-Groups": "ctrl-ops"},
                      timeout=10).status_code == 403, "a groups header alone is refused as well"
    assert db_user(django_db, name) is None
    # Without the headers the same peer is simply not signed in (the login page, no anonymous mode).
    plain = direct.get(sso.url + "/", timeout=10, allow_redirects=False)
    assert plain.status_code == 302 and "/accounts/login/" in plain.headers["Location"]
    assert direct.get(sso.url + "/healthz", timeout=10).status_code == 200


def test_a_viewer_from_the_proxy_reads_but_cannot_act(sso, django_db):
    name = f"vera-{uuid.uuid4().hex[:6]}"
    s = session_from(PROXY)
    headers = proxied(name, "readers,unrelated", f"{name}@example.test")
    page = s.get(sso.url + "/", headers=headers, timeout=10, allow_redirects=False)
    assert page.status_code == 200, page.text[:300]
    assert name in page.text, "the page shows who is signed in"
    assert s.get(sso.url + "/presence.json", headers=headers, timeout=10).status_code == 200
    refused = post_action(s, sso.url, headers)
    assert refused.status_code == 403 and "operators only" in refused.json()["error"]
    active, password, source, role = db_user(django_db, name)
    assert (active, source, role) == (1, "proxy", "viewer")
    assert password.startswith("!"), "an externally managed user has an unusable password"
    # The session the proxy signed in is worth nothing without the proxy.
    direct = session_from(None)
    direct.cookies.update(s.cookies)
    assert direct.get(sso.url + "/", timeout=10, allow_redirects=False).status_code == 302


def test_an_operator_acts_and_the_role_follows_the_groups_on_every_request(sso, django_db):
    name = f"otto-{uuid.uuid4().hex[:6]}"
    s = session_from(PROXY)
    assert s.get(sso.url + "/", headers=proxied(name, "ctrl-ops"), timeout=10).status_code == 200
    acted = post_action(s, sso.url, proxied(name, "ctrl-ops"))
    # Past the operator check: the action ran and found no such worker.
    assert acted.status_code == 404, acted.text[:300]
    assert db_user(django_db, name)[3] == "operator"

    # The operator group is removed at the identity provider: the next request has no operator role.
    assert post_action(s, sso.url, proxied(name, "ctrl-view")).status_code == 403
    assert db_user(django_db, name)[3] == "viewer"
    # No mapped group at all: no access, with the reason; the user is deactivated.
    gone = s.get(sso.url + "/", headers=proxied(name, "interns"), timeout=10, allow_redirects=False)
    assert gone.status_code == 403
    assert "none of your groups (interns)" in gone.text and "CTRLSCOPE_VIEWER_GROUPS" in gone.text
    assert db_user(django_db, name)[0] == 0
    # And back.
    assert s.get(sso.url + "/", headers=proxied(name, "ctrl-ops"), timeout=10).status_code == 200
    assert post_action(s, sso.url, proxied(name, "ctrl-ops")).status_code == 404


def test_a_proxy_user_without_a_mapped_group_gets_no_access(sso, django_db):
    name = f"nina-{uuid.uuid4().hex[:6]}"
    s = session_from(PROXY)
    page = s.get(sso.url + "/", headers=proxied(name, "marketing"), timeout=10, allow_redirects=False)
    assert page.status_code == 403 and "none of your groups (marketing)" in page.text
    assert db_user(django_db, name) is None, "no user is created for someone without a role"


async def _ws(url: str, origin: str, headers: dict[str, str], local: str | None):
    """(status, first message or close code): 403 for a refused handshake."""
    kwargs = {"local_addr": (local, 0)} if local else {}
    try:
        ws = await websockets.connect(url, origin=origin, additional_headers=headers, open_timeout=10, **kwargs)
    except websockets.InvalidStatus as exc:
        return exc.response.status_code, None
    try:
        first = await asyncio.wait_for(ws.recv(), 10)
        return 101, first
    except websockets.ConnectionClosed:
        return 101, ws.close_code
    finally:
        await ws.close()


def test_the_websocket_gets_the_same_treatment(sso):
    origin = sso.url
    name = f"wanda-{uuid.uuid4().hex[:6]}"
    status, _ = run_async(_ws(sso.ws_url, origin, proxied(name, "ctrl-ops"), None))
    assert status == 403, "proxy headers from an untrusted peer: the handshake is refused"
    status, hello = run_async(_ws(sso.ws_url, origin, proxied(name, "readers"), PROXY))
    assert status == 101 and isinstance(hello, str) and '"hello"' in hello, hello
    status, _ = run_async(_ws(sso.ws_url, origin, proxied(name, "marketing"), PROXY))
    assert status == 403, "a user whose groups map to no role gets no telemetry"
    # No headers, no session, no anonymous mode: accepted and closed with the page's 'sign in' code.
    status, code = run_async(_ws(sso.ws_url, origin, {}, None))
    assert (status, code) == (101, 4401)
