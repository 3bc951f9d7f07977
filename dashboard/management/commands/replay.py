"""``python manage.py replay FILE [--speed 4]``: play a recording into the dashboard, no cluster needed.

Replayed topics appear as worker ``<name>@replay`` next to any live ones.
"""

from __future__ import annotations

import sys
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.recording import RecordingError, read_recording, replay
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis


class Command(BaseCommand):
    help = "Replay a recording made with `manage.py record` at 1x, 4x, ... into the dashboard."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--speed", type=float, default=1.0, help="playback speed (default 1)")

    def handle(self, *args, **opts):
        if opts["speed"] <= 0:
            raise CommandError("--speed must be positive")
        try:
            read_recording(opts["file"])  # validate before touching Redis
        except RecordingError as exc:
            raise CommandError(str(exc)) from exc
        try:
            handle = ensure_redis(settings.RUN_DIR)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        publisher = RedisPublisher(handle.url, prefix=settings.CTRLSCOPE_PREFIX)
        publisher.describe(role="replay", name=str(opts["file"]))
        publisher.start()

        def progress(n: int, total: int) -> None:
            if n == total or n % 100 == 0:
                sys.stdout.write(f"\rreplayed {n}/{total} frames")
                sys.stdout.flush()

        try:
            frames = replay(opts["file"], publisher, speed=opts["speed"], progress=progress)
        finally:
            publisher.stop()
            handle.stop()
        self.stdout.write(f"\nreplay finished: {frames} frames at {opts['speed']:g}x")
