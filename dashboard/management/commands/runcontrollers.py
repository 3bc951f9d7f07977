"""``python manage.py runcontrollers``: the worker process.

Today it runs the synthetic load generator (``--synthetic RATE``) with the telemetry publisher; the
controller runtime plugs in here as it lands. Errors in user code are shown, never fatal.
"""

from __future__ import annotations

import signal
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis
from controllers.telemetry.synthetic import SyntheticLoad


class Command(BaseCommand):
    help = "Run the worker: controllers and/or synthetic telemetry, published to Redis."

    def add_arguments(self, parser):
        parser.add_argument("--synthetic", type=float, metavar="RATE",
                            help="publish RATE synthetic observations per second")
        parser.add_argument("--objects", type=int, default=200, help="synthetic object count (200)")
        parser.add_argument("--topic", default="synthetic", help="synthetic topic name (synthetic)")
        parser.add_argument("--duration", type=float, help="stop after this many seconds")
        parser.add_argument("--status-every", type=float, default=10.0,
                            help="print a status line every N seconds (0: never)")

    def handle(self, *args, **opts):
        if opts["synthetic"] is None:
            raise CommandError("nothing to run: pass --synthetic RATE (controllers arrive with the runtime)")
        if opts["synthetic"] <= 0 or opts["objects"] <= 0:
            raise CommandError("--synthetic and --objects must be positive")
        try:
            redis_handle = ensure_redis(settings.RUN_DIR)
        except RedisUnavailable as exc:
            raise CommandError(str(exc)) from exc
        publisher = RedisPublisher(redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX).start()
        load = SyntheticLoad(publisher, opts["synthetic"], topic=opts["topic"], objects=opts["objects"])
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        worker = threading.Thread(target=load.run, args=(stop, opts["duration"]), daemon=True)
        worker.start()
        self.stdout.write(f"worker: publishing {opts['synthetic']:g} synthetic observations/s to "
                          f"{redis_handle.url} topic {opts['topic']!r} (Ctrl-C stops)")
        self.stdout.flush()
        last = time.monotonic()
        while worker.is_alive() and not stop.is_set():
            worker.join(0.2)
            every = opts["status_every"]
            if every and time.monotonic() - last >= every:
                last = time.monotonic()
                self.stdout.write(f"worker: {publisher.records_published} records in "
                                  f"{publisher.frames_published} frames, {publisher.records_dropped} dropped, "
                                  f"redis {'up' if publisher.connected else 'DOWN'}")
                self.stdout.flush()
        stop.set()
        worker.join()
        publisher.stop()
        redis_handle.stop()
