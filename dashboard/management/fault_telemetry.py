"""The fault servers' commands' shared wiring: their injected faults, published unless told not to.

``manage.py simcluster`` and ``manage.py faultproxy`` both serve the fault API and both publish what
it does to the ``cluster/faults`` topic (``controllers.telemetry.fault_telemetry``). Each needs the
same steps around its server: find or start a Redis (``ensure_redis``: a clear CommandError naming
``--no-telemetry`` when there is none), start a publisher, attach it once the server runs, and on the
way out say "stopped" and stop what it started. ``published_faults`` is those steps once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError

from controllers.telemetry.fault_telemetry import FaultSource, FaultTelemetry
from controllers.telemetry.publisher import RedisPublisher
from controllers.telemetry.redisboot import RedisUnavailable, ensure_redis


class PublishedFaults:
    """What a command calls once its fault server runs (a no-op with ``--no-telemetry``)."""

    def __init__(self, telemetry: FaultTelemetry | None, redis_url: str, announce: Callable[[str], None]) -> None:
        self.telemetry = telemetry
        self._redis_url = redis_url
        self._announce = announce

    def attach(self, source: FaultSource, **labels: Any) -> None:
        if self.telemetry is not None:
            self.telemetry.attach(source, **labels)
            self._announce(f"faults published to topic {self.telemetry.topic} on {self._redis_url}")


@contextmanager
def published_faults(enabled: bool, announce: Callable[[str], None]) -> Iterator[PublishedFaults]:
    if not enabled:
        yield PublishedFaults(None, "", announce)
        return
    try:
        redis_handle = ensure_redis(settings.RUN_DIR)
    except RedisUnavailable as exc:
        raise CommandError(f"{exc} (or run with --no-telemetry)") from exc
    # The default publisher id ({host}-{pid}-{random}): unique per run, as the protocol requires. A
    # fixed one made the next run's frames look like retries of the last run's (same seq numbers,
    # skipped), so an earlier run's "simulator stopped" stayed next to a running one.
    telemetry = FaultTelemetry(RedisPublisher(redis_handle.url, prefix=settings.CTRLSCOPE_PREFIX).start())
    try:
        yield PublishedFaults(telemetry, redis_handle.url, announce)
    finally:
        telemetry.detach()
        telemetry.publisher.stop()
        redis_handle.stop()
