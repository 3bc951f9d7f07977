"""Settings a team deployment sets (dashboard/settings.py): DATABASE_URL, the TLS-proxy header,
Secure cookies and CSRF trusted origins — each read from the environment, each a clear error when
malformed. Each case imports the settings in a fresh interpreter, as a process starting would."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

SHOW = ("import json, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'dashboard.settings'; "
        "from django.conf import settings as s; d = s.DATABASES['default']; "
        "print(json.dumps({'db': {k: d.get(k) for k in ('ENGINE', 'NAME', 'USER', 'PASSWORD', 'HOST', 'PORT', 'OPTIONS')},"
        " 'ssl': getattr(s, 'SECURE_PROXY_SSL_HEADER', None), 'secure': [s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE],"
        " 'csrf': s.CSRF_TRUSTED_ORIGINS}))")


def settings_with(**env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CTRLSCOPE_PROXY_SSL_HEADER",
                                                              "CTRLSCOPE_SECURE_COOKIES", "CTRLSCOPE_CSRF_TRUSTED_ORIGINS")}
    return subprocess.run([sys.executable, "-c", SHOW], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          env={**clean, "CTRLSCOPE_DEMO": "1", **env})


def shown(**env: str) -> dict:
    done = settings_with(**env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_defaults_are_the_demos_sqlite_and_plain_cookies():
    out = shown()
    assert out["db"]["ENGINE"] == "django.db.backends.sqlite3" and out["db"]["NAME"].endswith("ctrlscope.sqlite3")
    assert out["ssl"] is None and out["secure"] == [False, False] and out["csrf"] == []


def test_a_postgres_url_becomes_the_database_and_a_proxy_header_makes_cookies_secure():
    out = shown(DATABASE_URL="postgresql://ctrl:p%40ss%2Fw@db.internal:5433/ctrlscope?sslmode=require",
                CTRLSCOPE_PROXY_SSL_HEADER="X-Forwarded-Proto",
                CTRLSCOPE_CSRF_TRUSTED_ORIGINS="https://ctrlscope.example/, https://alt.example")
    assert out["db"] == {"ENGINE": "django.db.backends.postgresql", "NAME": "ctrlscope", "USER": "ctrl",
                         "PASSWORD": "p@ss/w", "HOST": "db.internal", "PORT": "5433", "OPTIONS": {"sslmode": "require"}}
    assert out["ssl"] == ["HTTP_X_FORWARDED_PROTO", "https"] and out["secure"] == [True, True]
    assert out["csrf"] == ["https://ctrlscope.example", "https://alt.example"]
    assert shown(CTRLSCOPE_PROXY_SSL_HEADER="X-Forwarded-Proto", CTRLSCOPE_SECURE_COOKIES="0")["secure"] == [False, False]
    assert shown(DATABASE_URL="sqlite:///tmp/team.sqlite3")["db"]["NAME"] == "/tmp/team.sqlite3"


@pytest.mark.parametrize(("env", "message"), [
    ({"DATABASE_URL": "mysql://u@h/db"}, "mysql:// is not supported"),
    ({"DATABASE_URL": "postgres://u@h:5432/"}, "no database name"),
    ({"DATABASE_URL": "postgres://u@h:port/db"}, "the port is not a number"),
    ({"DATABASE_URL": "sqlite://"}, "sqlite:///ABSOLUTE/PATH"),
    ({"CTRLSCOPE_PROXY_SSL_HEADER": "X-Forwarded-Proto: https"}, "a header name such as X-Forwarded-Proto"),
    ({"CTRLSCOPE_CSRF_TRUSTED_ORIGINS": "ctrlscope.example"}, "needs its scheme"),
    ({"CTRLSCOPE_SECURE_COOKIES": "maybe"}, "CTRLSCOPE_SECURE_COOKIES='maybe'"),
])
def test_malformed_values_are_clear_errors(env, message):
    done = settings_with(**env)
    assert done.returncode != 0 and "ImproperlyConfigured" in done.stderr and message in done.stderr, done.stderr
