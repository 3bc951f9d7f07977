"""Template context every page gets.

``protocol``: the telemetry protocol's vocabulary (``controllers.schema.browser_vocabulary()``), which
``base.html`` hands the scripts as ``<script id="cs-protocol" type="application/json">``. The page's
JS reads record kinds, queue ops, topic layout and the protocol version from there (protocol.js)
instead of spelling them again, so the Python schema stays the one definition of every name.

``ctrlscope_base``: the path prefix the dashboard is served under (``dashboard/base_path.py``).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.conf import settings
from django.http import HttpRequest

from controllers.schema import browser_vocabulary


@cache
def _vocabulary() -> dict[str, Any]:
    return browser_vocabulary()  # constant for the process: built once


def protocol(request: HttpRequest) -> dict[str, Any]:
    # ctrlscope_base: the path prefix (CTRLSCOPE_BASE_PATH, "" at the root) for links and for urls.js.
    return {"protocol": _vocabulary(), "ctrlscope_base": settings.CTRLSCOPE_BASE_PATH}
