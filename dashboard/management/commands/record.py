"""``python manage.py record FILE``: save live telemetry (snapshots, then every frame) to a file."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from controllers.telemetry.recording import Recorder
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis


class Command(BaseCommand):
    help = "Record the dashboard's telemetry to FILE (gzip'd JSON lines) until Ctrl-C or --duration."

    def add_arguments(self, parser):
        parser.add_argument("file", type=Path)
        parser.add_argument("--duration", type=float, help="stop after this many seconds")
        parser.add_argument("--topic", action="append", help="record only these topics (default: all)")

    def handle(self, *args, **opts):
        if opts["duration"] is not None and opts["duration"] <= 0:
            raise CommandError("--duration must be positive")
        try:
            handle = ensure_redis(settings.RUN_DIR)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        self.stdout.write(f"recording to {opts['file']} (Ctrl-C stops)")
        self.stdout.flush()
        try:
            frames = Recorder(handle.url, prefix=settings.CTRLSCOPE_PREFIX, topics=opts["topic"]).record(
                opts["file"], duration=opts["duration"], stop=stop.is_set)
        except OSError as exc:
            raise CommandError(f"cannot write {opts['file']}: {exc}") from exc
        finally:
            handle.stop()
        self.stdout.write(f"recorded {frames} frames")
