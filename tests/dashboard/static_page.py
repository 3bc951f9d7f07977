"""How the ``*_js`` tests run the dashboard's pure scripts in the browser that runs them on the page:
a blank page in the session's headless Chromium with some of ``dashboard/static/dashboard``'s scripts
loaded from disk, in order (no server). With ``vocabulary=True`` the page carries the protocol
vocabulary where protocol.js reads it, a ``<script id="cs-protocol" type="application/json">`` as the
templates render it; ``body`` is any markup a script draws into."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

from controllers.schema import browser_vocabulary
from tests.conftest import ROOT

STATIC = ROOT / "dashboard" / "static" / "dashboard"


@contextlib.contextmanager
def static_page(browser: Any, *scripts: str, vocabulary: bool = False, body: str = "") -> Iterator[Any]:
    """A page titled after the last script, with ``scripts`` loaded; closed on the way out."""
    page = browser.new_page()
    try:
        protocol = (f'<script id="cs-protocol" type="application/json">{json.dumps(browser_vocabulary())}</script>'
                    if vocabulary else "")
        page.set_content(f"<!doctype html><title>{scripts[-1]}</title>{protocol}{body}")
        for script in scripts:
            page.add_script_tag(path=str(STATIC / script))
        yield page
    finally:
        page.close()
