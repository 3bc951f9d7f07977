"""The peer for bench/transport.py: the plain channels_redis way, one ``group_send`` per observation.

A bench-only ASGI app (never routed in production): clients join group ``bench`` and every
observation the publisher sends with ``group_send`` is forwarded to the socket as it arrives.
"""

import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")

import django  # noqa: E402

django.setup()

from channels.generic.websocket import AsyncWebsocketConsumer  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402
from django.urls import path  # noqa: E402


class GroupConsumer(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        await self.accept()
        await self.channel_layer.group_add("bench", self.channel_name)

    async def disconnect(self, code: int) -> None:
        await self.channel_layer.group_discard("bench", self.channel_name)

    async def observation(self, event: dict) -> None:
        await self.send(text_data=event["data"])


application = ProtocolTypeRouter({
    "http": get_asgi_application(),
    "websocket": URLRouter([path("ws/peer/", GroupConsumer.as_asgi())]),
})
