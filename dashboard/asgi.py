"""ASGI entry point: HTTP through Django, websockets through Channels (Origin and session checked)."""

import os

from django.conf import settings
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402 - needs the app registry ready
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.urls import path  # noqa: E402

from dashboard import memtrim  # noqa: E402
from dashboard.base_path import BasePathMiddleware  # noqa: E402
from dashboard.consumers import TelemetryConsumer  # noqa: E402
from dashboard.sso import TrustedProxyWebsocketMiddleware  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(
            # The trusted proxy's user (dashboard/sso.py) after the session's, checked on the peer address.
            AuthMiddlewareStack(TrustedProxyWebsocketMiddleware(
                URLRouter([path("ws/telemetry/", TelemetryConsumer.as_asgi())])))
        ),
    }
)
# Mounted under CTRLSCOPE_BASE_PATH behind a proxy (base_path.py); a no-op when it is empty.
application = BasePathMiddleware(application, settings.CTRLSCOPE_BASE_PATH)
# Freed memory back to the system every few seconds (memtrim.py: else RSS follows the high-water mark).
memtrim.start(settings.CTRLSCOPE_MALLOC_TRIM_S)
