"""The dashboard under a path prefix (``CTRLSCOPE_BASE_PATH=/ctrlscope``), behind a proxy that
serves it at ``https://tools.example/ctrlscope/``.

ASGI says ``path`` is the full path and ``root_path`` the mount point within it; Django then routes
``path`` minus the prefix (``FORCE_SCRIPT_NAME``) and builds every URL with it, and Channels'
``URLRouter`` strips ``root_path`` before matching the websocket route. Proxies differ in whether
they pass the prefix on (nginx ``proxy_pass http://up;``) or strip it (``proxy_pass http://up/;``,
an Ingress rewrite), so this middleware accepts both: a path without the prefix gets it put back,
and every scope carries ``root_path``. The pages' scripts build their URLs from the same prefix
(``<meta name="ctrlscope-base">``, read by urls.js).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

Scope = dict[str, Any]


def parse_base_path(raw: str | None) -> str:
    """``""`` (mounted at the root) or ``/a/b`` (leading slash, no trailing one)."""
    value = (raw or "").strip()
    if value in ("", "/"):
        return ""
    if not value.startswith("/") or "//" in value or any(c in value for c in "?#% \\") or value.endswith("/."):
        raise ImproperlyConfigured(f"CTRLSCOPE_BASE_PATH={raw!r}: a path such as /ctrlscope (no query, no spaces)")
    return value.rstrip("/")


class BasePathMiddleware:
    """Puts ``base`` back into paths a proxy stripped it from, and sets ``root_path`` to it."""

    def __init__(self, app: Any, base: str) -> None:
        self.app = app
        self.base = base

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if self.base and scope["type"] in ("http", "websocket"):
            path = scope["path"]
            if path != self.base and not path.startswith(self.base + "/"):
                path = self.base + path
            scope = {**scope, "path": path, "raw_path": path.encode("utf-8"), "root_path": self.base}
        await self.app(scope, receive, send)
