"""Single sign-on settings from the environment (imported by settings.py; no Django models here).

Two ways in, both mapping the identity provider's groups to the dashboard's roles (access.py):

* trusted proxy: an authenticating proxy (oauth2-proxy, ...) sets the user and groups headers. Only
  requests whose direct peer (REMOTE_ADDR, the ASGI client address; never X-Forwarded-For) is in
  ``CTRLSCOPE_TRUSTED_PROXIES`` are trusted (dashboard/sso.py).
* OIDC: "Sign in with SSO" on the login page, the authorization-code flow with mozilla-django-oidc
  (dashboard/oidc.py).

``CTRLSCOPE_OPERATOR_GROUPS`` / ``CTRLSCOPE_VIEWER_GROUPS`` (comma lists; ``*`` among the viewer
groups admits everyone the identity provider signs in) say which groups give which role; a user in
no mapped group gets no access. Each malformed value is a startup error naming the variable.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, MutableMapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

AUTH_MIDDLEWARE = "django.contrib.auth.middleware.AuthenticationMiddleware"
PROXY_BACKEND = "dashboard.sso.TrustedProxyBackend"
PROXY_MIDDLEWARE = "dashboard.sso.TrustedProxyMiddleware"
OIDC_BACKEND = "dashboard.oidc.OidcBackend"
OIDC_MIDDLEWARE = "dashboard.oidc.OidcSessionRefresh"

# mozilla-django-oidc's endpoint settings and the discovery document's names for them.
OIDC_ENDPOINTS = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": ("CTRLSCOPE_OIDC_AUTHORIZATION_ENDPOINT", "authorization_endpoint"),
    "OIDC_OP_TOKEN_ENDPOINT": ("CTRLSCOPE_OIDC_TOKEN_ENDPOINT", "token_endpoint"),
    "OIDC_OP_USER_ENDPOINT": ("CTRLSCOPE_OIDC_USERINFO_ENDPOINT", "userinfo_endpoint"),
    "OIDC_OP_JWKS_ENDPOINT": ("CTRLSCOPE_OIDC_JWKS_ENDPOINT", "jwks_uri"),
}


def _list(env: Mapping[str, str], name: str) -> list[str]:
    return [item.strip() for item in env.get(name, "").split(",") if item.strip()]


def _header(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name, "").strip() or default
    if not all(c.isalnum() or c == "-" for c in value):
        raise ImproperlyConfigured(f"{name}={value!r}: a header name such as {default}")
    return value


def _networks(env: Mapping[str, str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    nets = []
    for item in _list(env, "CTRLSCOPE_TRUSTED_PROXIES"):
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            raise ImproperlyConfigured(f"CTRLSCOPE_TRUSTED_PROXIES: {item!r} is not an address or a CIDR "
                                       "(e.g. 10.0.0.7, 10.0.0.0/24, fd00::/64)") from None
    return tuple(nets)


def _url(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    if value and not value.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"{name}={value!r}: an absolute http(s):// URL")
    return value


def apply(ns: MutableMapping[str, Any], env: Mapping[str, str]) -> None:
    """Set the single sign-on settings in the settings module's namespace ``ns``: the CTRLSCOPE_*
    SSO values, AUTHENTICATION_BACKENDS, the SSO middleware (after AuthenticationMiddleware) and,
    when OIDC is configured, mozilla-django-oidc's OIDC_* settings."""
    operator_groups = frozenset(_list(env, "CTRLSCOPE_OPERATOR_GROUPS"))
    viewer_groups = frozenset(_list(env, "CTRLSCOPE_VIEWER_GROUPS"))
    if "*" in operator_groups:
        raise ImproperlyConfigured("CTRLSCOPE_OPERATOR_GROUPS: '*' is not allowed (it would make everyone an "
                                   "operator); name the groups")
    ns["CTRLSCOPE_OPERATOR_GROUPS"] = operator_groups
    ns["CTRLSCOPE_VIEWER_GROUPS"] = viewer_groups

    networks = _networks(env)
    ns["CTRLSCOPE_TRUSTED_PROXIES"] = networks
    ns["CTRLSCOPE_PROXY_USER_HEADER"] = _header(env, "CTRLSCOPE_PROXY_USER_HEADER", "X-Forwarded-User")
    ns["CTRLSCOPE_PROXY_GROUPS_HEADER"] = _header(env, "CTRLSCOPE_PROXY_GROUPS_HEADER", "X-Forwarded-Groups")
    ns["CTRLSCOPE_PROXY_EMAIL_HEADER"] = _header(env, "CTRLSCOPE_PROXY_EMAIL_HEADER", "X-Forwarded-Email")

    issuer = _url(env, "CTRLSCOPE_OIDC_ISSUER").rstrip("/")
    explicit = {setting: _url(env, var) for setting, (var, _) in OIDC_ENDPOINTS.items()}
    client_id = env.get("CTRLSCOPE_OIDC_CLIENT_ID", "").strip()
    oidc = bool(issuer or any(explicit.values()) or client_id)
    if oidc:
        missing = [var for setting, (var, _) in OIDC_ENDPOINTS.items() if not explicit[setting]]
        if not issuer and missing:
            raise ImproperlyConfigured("OIDC: set CTRLSCOPE_OIDC_ISSUER (its discovery document gives the endpoints) "
                                       f"or every endpoint explicitly; missing: {', '.join(missing)}")
        if not client_id:
            raise ImproperlyConfigured("OIDC: CTRLSCOPE_OIDC_CLIENT_ID is not set")
        if not (operator_groups or viewer_groups):
            raise ImproperlyConfigured("OIDC: map groups to roles with CTRLSCOPE_OPERATOR_GROUPS and/or "
                                       "CTRLSCOPE_VIEWER_GROUPS (nobody could sign in otherwise)")
        try:
            renew = int(env.get("CTRLSCOPE_OIDC_RENEW_SECONDS", "") or 900)
        except ValueError:
            raise ImproperlyConfigured("CTRLSCOPE_OIDC_RENEW_SECONDS: a number of seconds") from None
        token_auth = env.get("CTRLSCOPE_OIDC_TOKEN_AUTH", "").strip().lower() or "post"
        if token_auth not in ("post", "basic"):
            raise ImproperlyConfigured(f"CTRLSCOPE_OIDC_TOKEN_AUTH={token_auth!r}: post (client_secret_post) "
                                       "or basic (client_secret_basic)")
        ns.update({
            "OIDC_TOKEN_USE_BASIC_AUTH": token_auth == "basic",
            "OIDC_RP_CLIENT_ID": client_id,
            "OIDC_RP_CLIENT_SECRET": env.get("CTRLSCOPE_OIDC_CLIENT_SECRET", ""),
            "OIDC_RP_SCOPES": env.get("CTRLSCOPE_OIDC_SCOPES", "").strip() or "openid email profile groups",
            "OIDC_RP_SIGN_ALGO": env.get("CTRLSCOPE_OIDC_SIGN_ALGO", "").strip() or "RS256",
            "OIDC_USE_PKCE": True,
            "OIDC_TIMEOUT": 10,
            # How often a signed-in user's groups are asked again (a silent prompt=none round trip
            # on the next page load); roles follow the identity provider within that time.
            "OIDC_RENEW_ID_TOKEN_EXPIRY_SECONDS": renew,
            "OIDC_STORE_ID_TOKEN": False,
            "OIDC_STORE_ACCESS_TOKEN": False,
        })
        ns.update({setting: value or None for setting, value in explicit.items()})
    elif env.get("CTRLSCOPE_OIDC_CLIENT_SECRET") or env.get("CTRLSCOPE_OIDC_GROUPS_CLAIM"):
        raise ImproperlyConfigured("OIDC: CTRLSCOPE_OIDC_ISSUER (or the explicit endpoints) and "
                                   "CTRLSCOPE_OIDC_CLIENT_ID are needed too")
    ns["CTRLSCOPE_OIDC_ENABLED"] = oidc
    ns["CTRLSCOPE_OIDC_ISSUER"] = issuer
    ns["CTRLSCOPE_OIDC_GROUPS_CLAIM"] = env.get("CTRLSCOPE_OIDC_GROUPS_CLAIM", "").strip() or "groups"

    if networks and not (operator_groups or viewer_groups):
        raise ImproperlyConfigured("CTRLSCOPE_TRUSTED_PROXIES is set: map groups to roles with "
                                   "CTRLSCOPE_OPERATOR_GROUPS and/or CTRLSCOPE_VIEWER_GROUPS")

    backends = ["django.contrib.auth.backends.ModelBackend"]  # the local users (the demo, admins)
    middleware = ns["MIDDLEWARE"]
    at = middleware.index(AUTH_MIDDLEWARE) + 1
    if networks:
        backends.append(PROXY_BACKEND)
        middleware.insert(at, PROXY_MIDDLEWARE)
        at += 1
    if oidc:
        backends.append(OIDC_BACKEND)
        middleware.insert(at, OIDC_MIDDLEWARE)
    ns["AUTHENTICATION_BACKENDS"] = backends
