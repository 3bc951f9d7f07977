"""Who publishes, which runs stopped, and what retention dropped (``controllers/telemetry/presence.py``).

``GET /presence.json`` is what pages poll (every few seconds) to tell live state from an earlier
run's: every publisher run with ``alive``, every worker with its ``liveness`` (the one rule,
``controllers/schema.py`` ``worker_liveness``, which the pages apply too, between polls), the newest
removals, the retention. Each call may run the
retention sweep (at most once per ``presence.SWEEP_S`` across every replica: a Redis lock), so what
expired is noticed and logged while anyone looks. ``POST /workers/<worker>/forget`` drops a stopped
worker's keys at once; it changes what everyone sees, so it is for operators, and a running worker is
refused (it would only rewrite everything).
"""

from __future__ import annotations

import logging

import redis
from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from controllers.schema import ALIVE_MS, TOPIC_SEGMENT
from controllers.telemetry import presence
from controllers.telemetry.streams import Keys
from dashboard.access import can_view, is_operator
from dashboard.views import _redis

log = logging.getLogger(__name__)


def _who(request: HttpRequest) -> str:
    return request.user.get_username() if request.user.is_authenticated else "anonymous"


@require_GET
def presence_status(request: HttpRequest) -> JsonResponse:
    if not can_view(request.user):
        return JsonResponse({"error": "forbidden"}, status=403)
    client, keys = _redis(), Keys.for_url(settings.CTRLSCOPE_PREFIX, settings.REDIS_URL)
    try:
        presence.sweep(client, keys, retention=settings.CTRLSCOPE_RETENTION)
        now_ms = presence.redis_now_ms(client)
        publishers = presence.read_publishers(client, keys, now_ms)
        workers = presence.read_workers(client, keys, publishers, now_ms)
        expired = presence.read_expired(client, keys)
    except redis.RedisError as exc:
        return JsonResponse({"error": f"Redis is unreachable: {exc}"}, status=503)
    return JsonResponse({"now": now_ms, "retention": settings.CTRLSCOPE_RETENTION, "alive_ms": ALIVE_MS,
                         "publishers": publishers, "workers": workers, "expired": expired})


@require_POST
def forget_worker(request: HttpRequest, worker: str) -> JsonResponse:
    who = _who(request)
    if not is_operator(request.user):
        log.warning("forget worker %s refused for %s: not an operator", worker, who)
        return JsonResponse({"error": "forgetting a worker removes its telemetry for everyone: operators only"},
                            status=403)
    if not TOPIC_SEGMENT.match(worker):
        return JsonResponse({"error": "a worker name is a topic segment (letters, digits and :._@-)"}, status=400)
    try:
        entry = presence.forget_worker(_redis(), Keys.for_url(settings.CTRLSCOPE_PREFIX, settings.REDIS_URL), worker, by=who)
    except LookupError as exc:
        return JsonResponse({"error": str(exc)}, status=404)
    except RuntimeError as exc:
        return JsonResponse({"error": str(exc)}, status=409)
    except redis.RedisError as exc:
        return JsonResponse({"error": f"Redis is unreachable: {exc}"}, status=503)
    log.info("worker %s forgotten by %s (%d topics)", worker, who, entry["topics"])
    return JsonResponse(entry)
