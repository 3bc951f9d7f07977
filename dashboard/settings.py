"""Django settings for the ctrlscope dashboard.

Twelve-factor: everything that differs between a laptop demo, CI and a deployment comes from the
environment. Defaults are safe for a loopback demo; ``CTRLSCOPE_SECRET_KEY`` must be set anywhere
else (a missing key outside DEBUG is a startup error, not a silent default).
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

from controllers.telemetry import redis_config as _redis_config
from controllers.telemetry.presence import parse_retention as _parse_retention
from dashboard import memtrim as _memtrim
from dashboard.base_path import parse_base_path as _parse_base_path
from dashboard.sso_settings import apply as _apply_sso

BASE_DIR = Path(__file__).resolve().parent.parent
# A checkout (manage.py beside the packages; the Docker image's /app is one) keeps its writable state
# in run/. An installed package (pip install .: BASE_DIR is site-packages) uses a per-user directory.
CHECKOUT = (BASE_DIR / "manage.py").is_file()


def _default_run_dir() -> Path:
    if CHECKOUT:
        return BASE_DIR / "run"
    state = os.environ.get("XDG_STATE_HOME", "").strip()
    if state:
        return Path(state) / "ctrlscope"
    try:
        return Path.home() / ".local" / "state" / "ctrlscope"
    except RuntimeError:  # no HOME and no passwd entry (an arbitrary container UID): set CTRLSCOPE_RUN_DIR
        import tempfile

        return Path(tempfile.gettempdir()) / f"ctrlscope-{os.getuid()}"


# The run directory: logs, pid files, the simulator's kubeconfig, a private Redis, the SQLite default.
RUN_DIR = Path(os.environ.get("CTRLSCOPE_RUN_DIR") or _default_run_dir())


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r}: expected one of 1/0, true/false, yes/no, on/off")


DEBUG = _env_bool("CTRLSCOPE_DEBUG", False)
SECRET_KEY = os.environ.get("CTRLSCOPE_SECRET_KEY", "")
if not SECRET_KEY:
    if not (DEBUG or _env_bool("CTRLSCOPE_DEMO", False)):
        raise ImproperlyConfigured(
            "CTRLSCOPE_SECRET_KEY is not set. Set it to a long random string "
            "(make demo and the tests set CTRLSCOPE_DEMO=1, which uses a throwaway key)."
        )
    SECRET_KEY = "ctrlscope-demo-only-not-secret"

ALLOWED_HOSTS = [h.strip() for h in os.environ.get("CTRLSCOPE_ALLOWED_HOSTS", "127.0.0.1,localhost,[::1]").split(",") if h.strip()]

# Anonymous read-only access exists only when explicitly switched on (make demo does, on loopback,
# and says so). Everything else requires a logged-in user.
CTRLSCOPE_ALLOW_ANONYMOUS = _env_bool("CTRLSCOPE_ALLOW_ANONYMOUS", False)

# The simulated cluster the Faults panel may break on purpose (dashboard/simulator.py): the kubeconfig
# the demo's simulator writes. Empty switches fault injection off (the demo does so for a real cluster).
CTRLSCOPE_SIM_KUBECONFIG = os.environ.get("CTRLSCOPE_SIM_KUBECONFIG", str(RUN_DIR / "kubeconfig-sim.yaml"))

# Redis: the only link between worker and dashboard processes (see controllers/telemetry/redisboot.py).
# REDIS_URL, or REDIS_SENTINELS + REDIS_MASTER_NAME for a Sentinel-managed master (redis_config.py).
try:
    REDIS_URL = _redis_config.url_from_env(default="redis://127.0.0.1:6379/0") or ""
except _redis_config.RedisConfigError as exc:
    raise ImproperlyConfigured(str(exc)) from None
CTRLSCOPE_PREFIX = os.environ.get("CTRLSCOPE_PREFIX", "ctrlscope:")
# How long the keys of a worker or simulator that stopped publishing stay in Redis (presence.py).
try:
    CTRLSCOPE_RETENTION = _parse_retention(os.environ.get("CTRLSCOPE_RETENTION"))
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None

# daphne gives the memory it freed back to the system every this many seconds (memtrim.py; 0: off).
try:
    CTRLSCOPE_MALLOC_TRIM_S = _memtrim.interval_from_env(os.environ)
except ValueError as exc:
    raise ImproperlyConfigured(str(exc)) from None

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "dashboard",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every response, static files included (dashboard/security_headers.py).
    "dashboard.security_headers.ContentSecurityPolicyMiddleware",
    # Static files straight from the app directories: no collectstatic step, works offline.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        # templates/ in a checkout; an installed package carries them as dashboard/templates/.
        "DIRS": [BASE_DIR / "templates" if CHECKOUT else Path(__file__).resolve().parent / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "dashboard.context_processors.protocol",
            ],
        },
    },
]

def _database(url: str) -> dict[str, object]:
    """``DATABASE_URL`` (postgres://user:password@host:port/name?sslmode=..., or sqlite:///path) as a
    Django database; users and sessions then live where every dashboard replica sees them."""
    parts = urlsplit(url)
    if parts.scheme in ("postgres", "postgresql"):
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(f"DATABASE_URL: no database name in {parts.scheme}://…/NAME")
        try:
            port = parts.port
        except ValueError:
            raise ImproperlyConfigured("DATABASE_URL: the port is not a number") from None
        return {"ENGINE": "django.db.backends.postgresql", "NAME": name, "USER": unquote(parts.username or ""),
                "PASSWORD": unquote(parts.password or ""), "HOST": parts.hostname or "", "PORT": str(port or ""),
                "OPTIONS": dict(parse_qsl(parts.query))}  # CONN_MAX_AGE stays 0: Django advises against persistent connections under ASGI
    if parts.scheme == "sqlite":
        if not parts.path or parts.path == "/":
            raise ImproperlyConfigured("DATABASE_URL: sqlite:///ABSOLUTE/PATH (three slashes, then the path)")
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": unquote(parts.path)}
    raise ImproperlyConfigured(f"DATABASE_URL: {parts.scheme or 'no scheme'}:// is not supported "
                               "(postgres://user:password@host:5432/name, or sqlite:///path)")


# SQLite in the run directory by default (the demo); PostgreSQL (or another file) when DATABASE_URL
# says so, which several dashboard replicas need: they must share users and sessions.
DATABASES = {
    "default": _database(os.environ["DATABASE_URL"]) if os.environ.get("DATABASE_URL", "").strip() else {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("CTRLSCOPE_DB", str(RUN_DIR / "ctrlscope.sqlite3")),
    }
}

# The channel layer carries only small control/presence messages; telemetry goes through Redis
# Streams (DESIGN.md). socket_timeout=None: redis-py 8's 5 s default closes idle layer sockets.
# A Redis Cluster: channels-redis' pub/sub layer on a seed node (channel_layer_backend says why).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": _redis_config.channel_layer_backend(REDIS_URL),
        "CONFIG": {
            "hosts": [_redis_config.channel_layer_host(REDIS_URL, socket_timeout=None)],
            "prefix": CTRLSCOPE_PREFIX + "layer:",
        },
    }
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

# Served under a path prefix behind a proxy (dashboard/base_path.py): every URL Django builds, the
# static files, the cookies and the pages' own fetches and websocket carry it.
CTRLSCOPE_BASE_PATH = _parse_base_path(os.environ.get("CTRLSCOPE_BASE_PATH"))
FORCE_SCRIPT_NAME = CTRLSCOPE_BASE_PATH or None
LOGIN_URL = CTRLSCOPE_BASE_PATH + "/accounts/login/"
LOGIN_REDIRECT_URL = CTRLSCOPE_BASE_PATH + "/"
# Single sign-on (dashboard/sso_settings.py): a trusted authenticating proxy's headers and/or OIDC,
# their groups mapped to viewer/operator; sets AUTHENTICATION_BACKENDS and adds the SSO middleware.
_apply_sso(globals(), os.environ)
LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = CTRLSCOPE_BASE_PATH + "/static/"
STATIC_ROOT = RUN_DIR / "static"
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_PATH = CSRF_COOKIE_PATH = CTRLSCOPE_BASE_PATH + "/"

# Behind a TLS-terminating proxy (an Ingress, haproxy, nginx): the header it sets to say the browser
# used HTTPS, e.g. CTRLSCOPE_PROXY_SSL_HEADER=X-Forwarded-Proto. Only set it when a proxy always
# sets (or strips) that header: otherwise a client could claim HTTPS itself. Cookies are then
# Secure by default, and CSRF_TRUSTED_ORIGINS lists the public origins (https://ctrlscope.example).
_ssl_header = os.environ.get("CTRLSCOPE_PROXY_SSL_HEADER", "").strip()
if _ssl_header:
    if not all(c.isalnum() or c == "-" for c in _ssl_header):
        raise ImproperlyConfigured(f"CTRLSCOPE_PROXY_SSL_HEADER={_ssl_header!r}: a header name such as X-Forwarded-Proto")
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _ssl_header.upper().replace("-", "_"), "https")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = _env_bool("CTRLSCOPE_SECURE_COOKIES", bool(_ssl_header))
CSRF_TRUSTED_ORIGINS = [o.strip().rstrip("/") for o in os.environ.get("CTRLSCOPE_CSRF_TRUSTED_ORIGINS", "").split(",")
                        if o.strip()]
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("https://", "http://")):
        raise ImproperlyConfigured(f"CTRLSCOPE_CSRF_TRUSTED_ORIGINS: {_origin!r} needs its scheme (https://host)")
CSRF_COOKIE_SAMESITE = "Strict"
SESSION_COOKIE_SAMESITE = "Lax"
# Browser security headers. The Content-Security-Policy is dashboard/security_headers.py's (strict:
# this origin only, no inline script or style); these two knobs extend it for a deployment that needs it.
CTRLSCOPE_CSP_CONNECT_SRC = os.environ.get("CTRLSCOPE_CSP_CONNECT_SRC", "")
CTRLSCOPE_CSP_REPORT_URI = os.environ.get("CTRLSCOPE_CSP_REPORT_URI", "")
# same-origin, not no-referrer: Django's CSRF check of an HTTPS POST without an Origin header needs
# the Referer, and the dashboard's own links lose nothing; other origins get no Referer at all.
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    # Known Secret values are masked in the process' own log lines too (controllers/telemetry/scrub.py).
    "filters": {"secrets": {"()": "controllers.telemetry.scrub.ScrubbingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["secrets"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("CTRLSCOPE_LOG_LEVEL", "INFO")},
    "loggers": {"daphne": {"level": "WARNING"}, "django.channels.server": {"level": "WARNING"}},
}
