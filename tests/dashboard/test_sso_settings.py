"""The single sign-on settings from the environment (dashboard/sso_settings.py): what each variable
turns on, and a clear error naming the variable for each malformed or incomplete one."""

from __future__ import annotations

import ipaddress

import pytest
from django.core.exceptions import ImproperlyConfigured

from dashboard.sso_settings import (
    AUTH_MIDDLEWARE,
    OIDC_BACKEND,
    OIDC_MIDDLEWARE,
    PROXY_BACKEND,
    PROXY_MIDDLEWARE,
    apply,
)

BASE_MIDDLEWARE = ["django.contrib.sessions.middleware.SessionMiddleware", AUTH_MIDDLEWARE,
                   "django.contrib.messages.middleware.MessageMiddleware"]


def settings_for(**env: str) -> dict:
    ns = {"MIDDLEWARE": list(BASE_MIDDLEWARE)}
    apply(ns, env)
    return ns


def test_nothing_configured_is_local_users_only():
    ns = settings_for()
    assert ns["AUTHENTICATION_BACKENDS"] == ["django.contrib.auth.backends.ModelBackend"]
    assert ns["MIDDLEWARE"] == BASE_MIDDLEWARE
    assert ns["CTRLSCOPE_TRUSTED_PROXIES"] == () and ns["CTRLSCOPE_OIDC_ENABLED"] is False


def test_trusted_proxy_mode():
    ns = settings_for(CTRLSCOPE_TRUSTED_PROXIES="10.0.0.7, 10.1.0.0/16,fd00::/64", CTRLSCOPE_VIEWER_GROUPS="a,b",
                      CTRLSCOPE_PROXY_USER_HEADER="X-Auth-Request-User")
    assert ns["CTRLSCOPE_TRUSTED_PROXIES"] == (ipaddress.ip_network("10.0.0.7/32"), ipaddress.ip_network("10.1.0.0/16"),
                                               ipaddress.ip_network("fd00::/64"))
    assert ns["CTRLSCOPE_VIEWER_GROUPS"] == {"a", "b"} and ns["CTRLSCOPE_OPERATOR_GROUPS"] == frozenset()
    assert ns["CTRLSCOPE_PROXY_USER_HEADER"] == "X-Auth-Request-User"
    assert ns["CTRLSCOPE_PROXY_GROUPS_HEADER"] == "X-Forwarded-Groups"
    assert PROXY_BACKEND in ns["AUTHENTICATION_BACKENDS"]
    assert ns["MIDDLEWARE"].index(PROXY_MIDDLEWARE) == ns["MIDDLEWARE"].index(AUTH_MIDDLEWARE) + 1


def test_oidc_with_discovery_or_explicit_endpoints():
    ns = settings_for(CTRLSCOPE_OIDC_ISSUER="https://idp.example/realms/x/", CTRLSCOPE_OIDC_CLIENT_ID="dash",
                      CTRLSCOPE_OIDC_CLIENT_SECRET="s", CTRLSCOPE_OPERATOR_GROUPS="ops")
    assert ns["CTRLSCOPE_OIDC_ISSUER"] == "https://idp.example/realms/x"
    assert ns["OIDC_OP_TOKEN_ENDPOINT"] is None, "from discovery, when first needed"
    assert ns["OIDC_USE_PKCE"] is True and ns["OIDC_RP_SIGN_ALGO"] == "RS256"
    assert OIDC_BACKEND in ns["AUTHENTICATION_BACKENDS"] and OIDC_MIDDLEWARE in ns["MIDDLEWARE"]
    explicit = {f"CTRLSCOPE_OIDC_{n}_ENDPOINT": f"https://idp.example/{n.lower()}"
                for n in ("AUTHORIZATION", "TOKEN", "USERINFO", "JWKS")}
    ns = settings_for(**explicit, CTRLSCOPE_OIDC_CLIENT_ID="dash", CTRLSCOPE_VIEWER_GROUPS="*",
                      CTRLSCOPE_OIDC_TOKEN_AUTH="basic")
    assert ns["OIDC_OP_JWKS_ENDPOINT"] == "https://idp.example/jwks" and ns["OIDC_TOKEN_USE_BASIC_AUTH"] is True


@pytest.mark.parametrize(("env", "names"), [
    ({"CTRLSCOPE_TRUSTED_PROXIES": "10.0.0.300", "CTRLSCOPE_VIEWER_GROUPS": "a"}, "CTRLSCOPE_TRUSTED_PROXIES"),
    ({"CTRLSCOPE_TRUSTED_PROXIES": "10.0.0.1"}, "CTRLSCOPE_VIEWER_GROUPS"),
    ({"CTRLSCOPE_OPERATOR_GROUPS": "*"}, "CTRLSCOPE_OPERATOR_GROUPS"),
    ({"CTRLSCOPE_PROXY_GROUPS_HEADER": "X Groups"}, "CTRLSCOPE_PROXY_GROUPS_HEADER"),
    ({"CTRLSCOPE_OIDC_ISSUER": "idp.example", "CTRLSCOPE_OIDC_CLIENT_ID": "c"}, "CTRLSCOPE_OIDC_ISSUER"),
    ({"CTRLSCOPE_OIDC_ISSUER": "https://idp.example", "CTRLSCOPE_VIEWER_GROUPS": "a"}, "CTRLSCOPE_OIDC_CLIENT_ID"),
    ({"CTRLSCOPE_OIDC_TOKEN_ENDPOINT": "https://idp.example/t", "CTRLSCOPE_OIDC_CLIENT_ID": "c",
      "CTRLSCOPE_VIEWER_GROUPS": "a"}, "CTRLSCOPE_OIDC_JWKS_ENDPOINT"),
    ({"CTRLSCOPE_OIDC_ISSUER": "https://idp.example", "CTRLSCOPE_OIDC_CLIENT_ID": "c"}, "CTRLSCOPE_VIEWER_GROUPS"),
    ({"CTRLSCOPE_OIDC_CLIENT_SECRET": "s"}, "CTRLSCOPE_OIDC_ISSUER"),
    ({"CTRLSCOPE_OIDC_ISSUER": "https://idp.example", "CTRLSCOPE_OIDC_CLIENT_ID": "c", "CTRLSCOPE_VIEWER_GROUPS": "a",
      "CTRLSCOPE_OIDC_TOKEN_AUTH": "jwt"}, "CTRLSCOPE_OIDC_TOKEN_AUTH"),
])
def test_each_malformed_or_incomplete_setting_is_a_clear_error(env, names):
    with pytest.raises(ImproperlyConfigured, match=names):
        settings_for(**env)
