"""Template context every page gets.

``protocol``: the telemetry protocol's vocabulary (``controllers.schema.browser_vocabulary()``), which
``base.html`` hands the scripts as ``<script id="cs-protocol" type="application/json">``. The page's
JS reads record kinds, queue ops, topic layout and the protocol version from there (protocol.js)
instead of spelling them again, so the Python schema stays the one definition of every name.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from django.http import HttpRequest

from controllers.schema import browser_vocabulary


@cache
def _vocabulary() -> dict[str, Any]:
    return browser_vocabulary()  # constant for the process: built once


def protocol(request: HttpRequest) -> dict[str, Any]:
    return {"protocol": _vocabulary()}
