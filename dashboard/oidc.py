"""OIDC sign-in ("Sign in with SSO" on the login page) with mozilla-django-oidc: the
authorization-code flow with PKCE, the groups claim (``CTRLSCOPE_OIDC_GROUPS_CLAIM``) mapped to the
dashboard's roles like the trusted proxy's groups header (sso.py).

The endpoints come from ``CTRLSCOPE_OIDC_ISSUER``'s discovery document, fetched when first needed and
kept for an hour (an identity provider that is down at startup does not stop the dashboard), or
from the explicit ``CTRLSCOPE_OIDC_*_ENDPOINT`` settings. On top of mozilla-django-oidc's checks
(signature, nonce, expiry) the ID token's issuer and audience are checked too.

Users are found by their ``sub`` (never by e-mail, and never onto a local account); their role is
set at sign-in and again at every renewal (``OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS``: the next page
load after it asks the provider again with ``prompt=none``), and a user whose groups no longer map
to a role is signed out with a 403 saying why.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import requests
from django.conf import settings
from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import SuspiciousOperation
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.functional import cached_property
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.middleware import SessionRefresh
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from dashboard.models import ExternalIdentity
from dashboard.sso import sign_in_external, split_groups
from dashboard.sso_settings import OIDC_ENDPOINTS

log = logging.getLogger(__name__)

DISCOVERY_TTL = 3600.0
_discovery_lock = threading.Lock()
_discovery: dict[str, Any] = {"doc": None, "at": 0.0}


class OidcUnavailable(Exception):
    """The identity provider's discovery document could not be had."""


def discovery() -> dict[str, Any]:
    issuer = settings.CTRLSCOPE_OIDC_ISSUER
    with _discovery_lock:
        doc, at = _discovery["doc"], _discovery["at"]
        if doc is not None and time.monotonic() - at < DISCOVERY_TTL:
            return doc
        url = issuer + "/.well-known/openid-configuration"
        try:
            resp = requests.get(url, timeout=10)
            resp.raise_for_status()
            fresh = resp.json()
        except (requests.RequestException, ValueError) as exc:
            if doc is not None:
                log.warning("OIDC discovery %s failed (%s): keeping the one from before", url, exc)
                return doc
            raise OidcUnavailable(f"the identity provider's discovery document {url} could not be read: {exc}") from exc
        if fresh.get("issuer", "").rstrip("/") != issuer:
            raise OidcUnavailable(f"{url} names the issuer {fresh.get('issuer')!r}, not {issuer!r}")
        _discovery.update(doc=fresh, at=time.monotonic())
        return fresh


def endpoint(attr: str) -> str:
    """An endpoint setting (OIDC_OP_*_ENDPOINT): the explicit one, else the discovery document's."""
    return getattr(settings, attr, None) or discovery()[OIDC_ENDPOINTS[attr][1]]


def oidc_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's ``get_settings``. The endpoints are read through the ``_lazy``
    properties instead: its classes read them in ``__init__`` (the backend's on every request of a
    signed-in user, the renewal middleware's at startup), which must not need the provider."""
    if attr in OIDC_ENDPOINTS:
        return None
    return import_from_settings(attr, *default)


def _lazy(attr: str) -> property:
    # Assignments from mozilla-django-oidc's __init__s are ignored; reading asks endpoint().
    return property(lambda self: endpoint(attr), lambda self, value: None)


def _denied(request: HttpRequest, message: str) -> HttpResponse:
    body = render_to_string("registration/sso_denied.html", {"message": message}, request=request)
    return HttpResponse(body, status=403)


class OidcBackend(OIDCAuthenticationBackend):
    OIDC_OP_TOKEN_ENDPOINT = _lazy("OIDC_OP_TOKEN_ENDPOINT")
    OIDC_OP_USER_ENDPOINT = _lazy("OIDC_OP_USER_ENDPOINT")
    OIDC_OP_JWKS_ENDPOINT = _lazy("OIDC_OP_JWKS_ENDPOINT")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not super().__init__: it checks the endpoints, which are resolved only when used here.
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        self.OIDC_RP_SIGN_ALGO = settings.OIDC_RP_SIGN_ALGO
        self.OIDC_RP_IDP_SIGN_KEY = None
        self.UserModel = get_user_model()

    get_settings = staticmethod(oidc_setting)

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        payload = super().verify_token(token, **kwargs)
        issuer = settings.CTRLSCOPE_OIDC_ISSUER
        if issuer and str(payload.get("iss", "")).rstrip("/") != issuer:
            raise SuspiciousOperation(f"ID token issuer {payload.get('iss')!r} is not {issuer!r}")
        aud = payload.get("aud")
        audiences = [aud] if isinstance(aud, str) else list(aud or [])
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SuspiciousOperation("ID token is not for this client (aud)")
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        info = self.get_userinfo(access_token, id_token, payload)
        if info.get("sub") != payload.get("sub"):
            raise SuspiciousOperation("the userinfo's sub is not the ID token's")
        claims = {**payload, **info}
        groups = split_groups(claims.get(settings.CTRLSCOPE_OIDC_GROUPS_CLAIM))
        username = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])
        user, problem = sign_in_external(ExternalIdentity.OIDC, str(claims["sub"]), username, claims.get("email"),
                                         groups)
        self.request.ctrlscope_sso_denied = problem
        return user

    def get_user(self, user_id: Any) -> Any:
        user = super().get_user(user_id)
        return user if user is not None and user.is_active else None


class _OidcOnly:
    """Both OIDC views: 404 while OIDC is off, and a provider that cannot be reached is a page that
    says so (logged), not a 500."""

    def get(self, request: HttpRequest) -> HttpResponse:
        if not settings.CTRLSCOPE_OIDC_ENABLED:
            return HttpResponse("single sign-on (OIDC) is not configured", status=404, content_type="text/plain")
        try:
            return super().get(request)  # type: ignore[misc]
        except OidcUnavailable as exc:
            log.warning("OIDC %s: %s", type(self).__name__, exc)
            return _denied(request, f"Single sign-on is unavailable: {exc}")


class OidcLoginView(_OidcOnly, OIDCAuthenticationRequestView):
    """"Sign in with SSO": to the provider's authorization endpoint."""

    OIDC_OP_AUTH_ENDPOINT = _lazy("OIDC_OP_AUTHORIZATION_ENDPOINT")
    get_settings = staticmethod(oidc_setting)

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # not super(): it needs the OIDC settings, absent when OIDC is off
        self.OIDC_RP_CLIENT_ID = getattr(settings, "OIDC_RP_CLIENT_ID", "")


class OidcCallbackView(_OidcOnly, OIDCAuthenticationCallbackView):
    get_settings = staticmethod(oidc_setting)

    def login_failure(self) -> HttpResponse:
        request = self.request
        auth.logout(request)  # a renewal that fails ends the session
        problem = getattr(request, "ctrlscope_sso_denied", None)
        error = request.GET.get("error")
        if error in ("login_required", "interaction_required", "consent_required"):
            return redirect_to_login(settings.LOGIN_REDIRECT_URL)  # a renewal found the provider's session over
        if problem:
            message = problem
        elif error:
            message = f"The identity provider refused the sign-in ({error}: {request.GET.get('error_description', '')})."
        else:
            message = "Single sign-on failed. Try again from the login page."
        return _denied(request, message)


class OidcSessionRefresh(SessionRefresh):
    """mozilla-django-oidc's renewal (silent ``prompt=none`` re-authentication once
    OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS have passed), for page loads only: the pages' own JSON
    fetches and the websocket are never redirected to the provider."""

    OIDC_OP_AUTHORIZATION_ENDPOINT = _lazy("OIDC_OP_AUTHORIZATION_ENDPOINT")
    get_settings = staticmethod(oidc_setting)

    @cached_property
    def exempt_urls(self) -> set[str]:
        return {reverse("oidc_authentication_init"), reverse("oidc_authentication_callback"), reverse("logout")}

    def is_refreshable_url(self, request: HttpRequest) -> bool:
        return "text/html" in request.headers.get("Accept", "") and super().is_refreshable_url(request)

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        try:
            return super().process_request(request)
        except OidcUnavailable as exc:
            log.warning("OIDC renewal postponed: %s", exc)
            return None
