"""The telemetry websocket: one per browser tab, multiplexing every topic the tab shows.

Thin by design (like channels' generic consumers): authentication and the socket live here, the
protocol lives in ``session.ClientSession``. Origin is checked before this consumer runs
(``AllowedHostsOriginValidator`` in asgi.py).
"""

from __future__ import annotations

import logging

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings

from dashboard.access import can_view
from dashboard.hub import get_hub
from dashboard.session import ClientSession, ProtocolViolation

log = logging.getLogger(__name__)

CLOSE_UNAUTHORIZED = 4401
CLOSE_INTERNAL = 4500


class TelemetryConsumer(AsyncWebsocketConsumer):
    # Telemetry comes from Redis Streams through the hub, not the channel layer. Naming an alias
    # that is not configured keeps this consumer off the layer: channels_redis' receive loop raises
    # when Redis restarts and would take the socket down with it, which is exactly when the page
    # must stay up and show "reconnecting".
    channel_layer_alias = "ctrlscope-telemetry-has-no-channel-layer"
    session: ClientSession | None = None

    async def connect(self) -> None:
        if not can_view(self.scope.get("user")):
            # Accept-then-close carries an application close code the page can explain
            # (a rejected handshake only shows up as a generic 403 in the browser).
            await self.accept()
            await self.close(code=CLOSE_UNAUTHORIZED)
            return
        await self.accept()
        self.session = ClientSession(get_hub(settings.REDIS_URL, settings.CTRLSCOPE_PREFIX), self._send_text,
                                     on_fatal=self._fatal)
        await self.session.start()

    async def _fatal(self) -> None:
        await self.close(code=CLOSE_INTERNAL)

    async def _send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None) -> None:
        if self.session is None:
            return
        try:
            await self.session.handle(text_data, bytes_data)
        except ProtocolViolation as violation:
            log.info("closing websocket: %s", violation.reason)
            await self.close(code=violation.code)

    async def disconnect(self, code: int) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None
