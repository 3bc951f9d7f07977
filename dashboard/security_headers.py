"""The Content-Security-Policy every response of the dashboard carries.

Why: the pages show what clusters and controllers put in object names, labels, log lines and error
messages. They already build their DOM with ``textContent`` and never parse HTML from data, so an
injected ``<script>`` or ``onerror=`` would be inert text; the policy is the second line behind that
(and behind Django's autoescaping): even if markup got in somewhere, the browser runs only the
scripts and styles served by this origin.

What it allows: scripts, styles, fonts and images from this origin only (images also as ``data:``
URLs, for the inline SVG favicon); fetch, XHR and websockets to this origin only (CSP Level 3's
``'self'`` matches ``ws:``/``wss:`` of the page's own host, as Chromium, Firefox and Safari do); no
plugins (``object-src 'none'``), no ``<base>`` elsewhere, forms post only here, and no framing of the
dashboard at all (``frame-ancestors 'none'``, next to ``X-Frame-Options: DENY``). No ``'unsafe-inline'``
and no ``'unsafe-eval'``: the templates have no inline scripts, event handler attributes or ``style``
attributes, the data a page needs comes in ``json_script`` blocks (``type="application/json"`` is data,
never executed, so CSP does not apply to it), and the scripts set styles through the CSSOM
(``el.style.left = ...``), which ``style-src`` does not restrict.

Django 5.2 has no CSP of its own and this is one constant header, so a small middleware rather
than django-csp. The other headers come from Django's settings (``SECURE_REFERRER_POLICY``,
``SECURE_CONTENT_TYPE_NOSNIFF``, ``X_FRAME_OPTIONS``; see settings.py).

Configurable only where a deployment may need it, strict by default:

``CTRLSCOPE_CSP_CONNECT_SRC``
    extra ``connect-src`` sources, space- or comma-separated (e.g. ``wss://dash.example.com`` for a
    browser too old to match websockets with ``'self'``). Keywords and wildcards are refused.
``CTRLSCOPE_CSP_REPORT_URI``
    where browsers POST violation reports (``report-uri``); unset, they only log to the console.

Django admin (``/admin/``) works under the same policy: Django 5.2's admin templates load their
scripts from static files and pass data in ``data-`` attributes and ``json_script``.

With ``DEBUG`` on, Django's technical 404/500 pages (inline ``<style>`` and ``<script>``) are served
without the policy so that they stay readable; every other response keeps it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin

HEADER = "Content-Security-Policy"

DIRECTIVES: dict[str, tuple[str, ...]] = {
    "default-src": ("'self'",),
    "script-src": ("'self'",),
    "style-src": ("'self'",),
    "img-src": ("'self'", "data:"),
    "font-src": ("'self'",),
    "connect-src": ("'self'",),
    "object-src": ("'none'",),
    "base-uri": ("'self'",),
    "form-action": ("'self'",),
    "frame-ancestors": ("'none'",),
}

# A host source, with or without its scheme, port and path (CSP's grammar, narrowed): no quotes
# (keywords, nonces, hashes), no wildcards, nothing that would start another directive.
_SOURCE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?:[A-Za-z0-9-]+\.)*[A-Za-z0-9-]+(?::\d+)?(?:/[^\s;,'*]*)?$")


def _sources(raw: str, name: str) -> tuple[str, ...]:
    sources = tuple(s for s in re.split(r"[\s,]+", raw.strip()) if s)
    for source in sources:
        if not _SOURCE.match(source):
            raise ImproperlyConfigured(
                f"{name}: {source!r} is not a host source such as wss://dash.example.com "
                "(keywords, wildcards and 'unsafe-*' are not accepted)")
    return sources


def build_policy(extra_connect_src: Iterable[str] = (), report_uri: str = "") -> str:
    """The header's value: DIRECTIVES plus the deployment's extra connect-src sources and report URI."""
    directives = dict(DIRECTIVES)
    extra = tuple(extra_connect_src)
    if extra:
        directives["connect-src"] = directives["connect-src"] + extra
    parts = [f"{name} {' '.join(values)}" for name, values in directives.items()]
    if report_uri:
        if not re.match(r"^(?:https?://[^\s;,']+|/[^\s;,']*)$", report_uri):
            raise ImproperlyConfigured(f"CTRLSCOPE_CSP_REPORT_URI: {report_uri!r} is not an http(s) URL or a path")
        parts.append(f"report-uri {report_uri}")
    return "; ".join(parts)


def policy_from_settings() -> str:
    return build_policy(_sources(getattr(settings, "CTRLSCOPE_CSP_CONNECT_SRC", ""), "CTRLSCOPE_CSP_CONNECT_SRC"),
                        getattr(settings, "CTRLSCOPE_CSP_REPORT_URI", ""))


class ContentSecurityPolicyMiddleware(MiddlewareMixin):
    """Adds the policy to every response that has none (static files and JSON too: harmless there,
    and a JSON body some browser sniffed as HTML would still run nothing)."""

    def __init__(self, get_response) -> None:
        super().__init__(get_response)
        self.policy = policy_from_settings()

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        if HEADER in response:
            return response
        if settings.DEBUG and response.status_code >= 400 and response.get("Content-Type", "").startswith("text/html"):
            return response  # Django's technical error pages, DEBUG only (see the module docstring)
        response[HEADER] = self.policy
        return response
