"""The dashboard under a path prefix (CTRLSCOPE_BASE_PATH, dashboard/base_path.py), as a proxy that
keeps the prefix and one that strips it would forward: pages, links, static files and the websocket."""

from __future__ import annotations

import re
import urllib.request

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.base_path import parse_base_path
from dashboard.wsclient import TelemetryWsClient
from tests.conftest import ROOT, run_async

BASE = "/team/ctrlscope"
JS_DIR = ROOT / "dashboard" / "static" / "dashboard"
ROUTES = r"(?:c|ws|cluster|presence\.json|scenarios|workers|accounts|static)\b"


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read().decode("utf-8", "replace")


def test_the_prefix_is_parsed_with_a_clear_error():
    assert parse_base_path(None) == parse_base_path("") == parse_base_path("/") == ""
    assert parse_base_path(" /team/ctrlscope/ ") == BASE
    for bad in ("team", "/a//b", "/a?b", "/a b", "/a%20b"):
        with pytest.raises(ImproperlyConfigured, match="CTRLSCOPE_BASE_PATH"):
            parse_base_path(bad)


def test_no_script_or_template_spells_an_absolute_dashboard_url_without_the_prefix():
    for js in sorted(JS_DIR.glob("*.js")):
        text = js.read_text()
        bad = [m.group(0) for m in re.finditer(r'(?<!U\()(["\'`])/' + ROUTES, text)]
        assert not bad, f"{js.name}: {bad} — build it with U(...) (urls.js)"
    for html in sorted((ROOT / "templates").rglob("*.html")):
        bad = re.findall(r'(?:href|action|src)="/(?!/)', html.read_text())
        assert not bad, f"{html.relative_to(ROOT)}: an absolute link without {{{{ ctrlscope_base }}}}"


def test_pages_static_files_and_the_websocket_work_under_the_prefix_either_way(dashboard_factory):
    dashboard = dashboard_factory(CTRLSCOPE_BASE_PATH=BASE)
    status, html = get(dashboard.url + BASE + "/")
    assert status == 200
    assert f'<meta name="ctrlscope-base" content="{BASE}">' in html
    assert f'src="{BASE}/static/dashboard/urls.js"' in html and f'href="{BASE}/scenarios/"' in html
    for url in (dashboard.url + BASE + "/static/dashboard/urls.js", dashboard.url + "/static/dashboard/urls.js"):
        status, js = get(url)  # kept prefix, and a proxy that strips it
        assert status == 200 and "ctrlscopeUrl" in js
    assert get(dashboard.url + "/scenarios/")[0] == 200  # a stripped page path is put back under the prefix

    async def hello(url: str) -> list[str]:
        c = await TelemetryWsClient(url, origin=dashboard.url).connect()
        await c.close()
        return c.statuses

    port = dashboard.url.rsplit(":", 1)[1]
    for ws in (f"ws://127.0.0.1:{port}{BASE}/ws/telemetry/", f"ws://127.0.0.1:{port}/ws/telemetry/"):
        run_async(hello(ws))  # connect() waits for the server's hello

