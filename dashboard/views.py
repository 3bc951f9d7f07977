"""Pages. The live data arrives over the websocket; views only render the shell."""

from __future__ import annotations

import threading

import orjson
import redis
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse

from controllers.schema import TOPIC_SEGMENT as _SEGMENT
from controllers.schema import ComponentKind, TopicKind, topic_part, worker_topic, worker_topic_prefix
from controllers.telemetry import inspector, redis_config
from controllers.telemetry.redisboot import ping
from controllers.telemetry.streams import Keys, StreamReader
from dashboard import key_story, snapshot_body
from dashboard.access import can_view, is_operator
from dashboard.faults import panel_context


def _shell_context(request: HttpRequest) -> dict[str, object]:
    return {
        "anonymous_mode": settings.CTRLSCOPE_ALLOW_ANONYMOUS and not request.user.is_authenticated,
        "operator": is_operator(request.user),
    }


def index(request: HttpRequest) -> HttpResponse:
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    return render(request, "dashboard/index.html", _shell_context(request))


def _snapshot_preloads(worker: str, prefix: str, topics: list[str]) -> list[tuple[str, str]]:
    """(topic, snapshot.json URL) of each informer the page loads at once: the head preloads them
    (``<link rel=preload>``, the page's first requests, before its scripts: informer_snapshots.js)."""
    return [(t, reverse("informer_snapshot", args=[worker, t[len(prefix):]]) + f"?history={SNAPSHOT_HISTORY}&form=columns")
            for t in topics]


# Frames of context a page asks for with an informer's snapshot (the events panel's recent rows).
SNAPSHOT_HISTORY = 500


def controller(request: HttpRequest, worker: str, controller: str) -> HttpResponse:
    """One controller of one worker: workqueue, reconcile timeline and its informers' events.

    ``worker`` and ``controller`` are topic segments (``w/{worker}/controller/{controller}``); the
    optional ``?key=ns/name`` query focuses one key (a shareable deep link)."""
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    if not _SEGMENT.match(worker) or not _SEGMENT.match(controller):
        raise Http404("no such controller")
    topics = {
        "components": worker_topic(worker, TopicKind.COMPONENTS),
        "metrics": worker_topic(worker, TopicKind.METRICS),
        "queue": worker_topic(worker, TopicKind.QUEUE, controller),
        "controller": worker_topic(worker, TopicKind.CONTROLLER, controller),
        "informer_prefix": worker_topic_prefix(worker, TopicKind.INFORMER),
    }
    page = _live_page(request, worker, ComponentKind.CONTROLLER, controller, topics)
    # Informer topics already known: the page starts loading their caches (snapshot.json) at once,
    # in parallel with opening the websocket, which shortens the first paint of a large cache.
    try:
        page["informers"] = [t for t in _reader().topics() if t.startswith(topics["informer_prefix"])][:20]
    except redis.RedisError:
        page["informers"] = []
    preloads = _snapshot_preloads(worker, topics["informer_prefix"], page["informers"])
    return render(request, "dashboard/controller.html",
                  {**_shell_context(request), **panel_context(request), "page": page, "snapshot_preloads": preloads})


def key(request: HttpRequest, worker: str, controller: str, name: str, namespace: str = "") -> HttpResponse:
    """One key of one controller (``/c/{worker}/{controller}/k/{namespace}/{name}``, ``/k/{name}``
    for a cluster-scoped object): its story from the retained streams (``story.json``), live after
    that, with its object as the informer caches it."""
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    obj_key = f"{namespace}/{name}" if namespace else name
    if not _SEGMENT.match(worker) or not _SEGMENT.match(controller) or not inspector.KEY.match(obj_key):
        raise Http404("no such key")
    topics = {
        "components": worker_topic(worker, TopicKind.COMPONENTS),
        "queue": worker_topic(worker, TopicKind.QUEUE, controller),
        "controller": worker_topic(worker, TopicKind.CONTROLLER, controller),
        "informer_prefix": worker_topic_prefix(worker, TopicKind.INFORMER),
    }
    page = _live_page(request, worker, ComponentKind.CONTROLLER, controller, topics)
    page["key"] = obj_key
    return render(request, "dashboard/key.html", {**_shell_context(request), "page": page})


def key_story_json(request: HttpRequest, worker: str, controller: str) -> HttpResponse:
    """``?key=namespace/name[&scan=N]``: what the retained streams of the controller's, its queue's and
    its informers' topics say about one key (``dashboard/key_story.py``), and where each scan ended,
    for the key page to go on live from. 400 bad key or scan, 404 unknown controller, 503 Redis down;
    the body says which in ``error``."""
    if not can_view(request.user):
        return JsonResponse({"status": 403, "error": "forbidden"}, status=403)
    if not _SEGMENT.match(worker) or not _SEGMENT.match(controller):
        return JsonResponse({"status": 404, "error": "no such controller"}, status=404)
    obj_key = request.GET.get("key", "")
    if not inspector.KEY.match(obj_key):
        return JsonResponse({"status": 400, "error": "?key= must be namespace/name (or name, cluster-scoped)"}, status=400)
    try:
        scan = int(request.GET.get("scan", key_story.DEFAULT_SCAN))
    except ValueError:
        scan = 0
    if not 1 <= scan <= key_story.MAX_SCAN:
        return JsonResponse({"status": 400, "error": f"?scan= must be a number of entries from 1 to {key_story.MAX_SCAN}"},
                            status=400)
    try:
        body = key_story.story(_reader(), worker=worker, controller=controller, key=obj_key, scan=scan)
    except key_story.UnknownController as exc:
        return JsonResponse({"status": 404, "error": str(exc)}, status=404)
    except redis.RedisError as exc:
        return JsonResponse({"status": 503, "error": f"Redis is unreachable: {exc}"}, status=503)
    response = HttpResponse(orjson.dumps({"status": 200, **body}), content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def informer(request: HttpRequest, worker: str, informer: str) -> HttpResponse:
    """One informer of one worker, whether a controller watches it or not (a plain client-go informer
    with Add/Update/Delete handlers has no other home): its pipeline ending at its handlers, its
    handlers' calls, its watch events and its cache. ``informer`` is the topic segment
    (``w/{worker}/informer/{informer}``); ``?key=`` focuses one key, as on a controller's page."""
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    if not _SEGMENT.match(worker) or not _SEGMENT.match(informer):
        raise Http404("no such informer")
    topic = worker_topic(worker, TopicKind.INFORMER, informer)
    topics = {
        "components": worker_topic(worker, TopicKind.COMPONENTS),
        "informer": topic,
        "informer_prefix": worker_topic_prefix(worker, TopicKind.INFORMER),
    }
    page = _live_page(request, worker, ComponentKind.INFORMER, informer, topics)
    page["informers"] = [topic]
    preloads = _snapshot_preloads(worker, topics["informer_prefix"], page["informers"])
    return render(request, "dashboard/informer.html",
                  {**_shell_context(request), **panel_context(request), "page": page, "snapshot_preloads": preloads})


def watcher(request: HttpRequest, worker: str, watcher: str) -> HttpResponse:
    """One raw watch loop of one worker (protocol v1.6: a program's own Watch in a loop, no cache): its
    chain, what it did -- each watch it opened, each event, each GET it made for one, how each stream
    ended -- and whether it still watches. ``watcher`` is the topic segment (``w/{worker}/watcher/{watcher}``)."""
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    if not _SEGMENT.match(worker) or not _SEGMENT.match(watcher):
        raise Http404("no such watcher")
    topics = {
        "components": worker_topic(worker, TopicKind.COMPONENTS),
        "metrics": worker_topic(worker, TopicKind.METRICS),
        "watcher": worker_topic(worker, TopicKind.WATCHER, watcher),
    }
    page = _live_page(request, worker, ComponentKind.WATCHER, watcher, topics)
    return render(request, "dashboard/watcher.html", {**_shell_context(request), "page": page})


def _live_page(request: HttpRequest, worker: str, kind: ComponentKind, segment: str,
               topics: dict[str, str]) -> dict[str, object]:
    """What a controller's, an informer's or a watcher's page starts from (the ``cs-page`` JSON): whose page it is,
    its topics, the deep link's parts, and the names the worker gave its informers and this
    component. Topics and URLs carry topic segments (``v1_Pod``); people read names (``v1/Pod``):
    ``names`` maps each informer topic to its name as the components entry says it, so that even
    the rows loaded with the page, before the websocket brings the components, are named as the
    worker names them."""
    page: dict[str, object] = {
        "kind": str(kind),
        "worker": worker,
        str(kind): segment,  # "controller", "informer" or "watcher": whose page it is
        "key": request.GET.get("key", "")[:300],
        # Cache panel deep link: ?cache=<informer>&obj=<namespace/name> selects a cached object.
        "cache": request.GET.get("cache", "")[:120],
        "obj": request.GET.get("obj", "")[:300],
        "topics": topics,
        "names": {},
        "name": "",
    }
    try:
        _, components = _reader().snapshot(topics["components"])
    except redis.RedisError:
        return page
    names: dict[str, str] = {}
    for raw in components.values():
        try:
            entry = orjson.loads(raw)
        except orjson.JSONDecodeError:
            continue
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            continue
        if entry.get("kind") == ComponentKind.INFORMER:
            names[worker_topic(worker, TopicKind.INFORMER, name)] = name
        if entry.get("kind") == kind and topic_part(name) == segment:
            page["name"] = name
    page["names"] = names
    return page


def cluster(request: HttpRequest) -> HttpResponse:
    """The simulated cluster: its Faults panel (active rules, the fault log, the operators' actions)."""
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    return render(request, "dashboard/cluster.html", {**_shell_context(request), **panel_context(request)})


_redis_lock = threading.Lock()
_redis_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _redis_client
    with _redis_lock:
        if _redis_client is None:
            _redis_client = redis_config.sync_client(settings.REDIS_URL, socket_timeout=5, socket_connect_timeout=2)
        return _redis_client


def _reader() -> StreamReader:
    return StreamReader(_redis(), Keys.for_url(settings.CTRLSCOPE_PREFIX, settings.REDIS_URL))


def informer_snapshot(request: HttpRequest, worker: str, informer: str) -> HttpResponse:
    """The informer topic's snapshot (the cache as compact summaries) over plain HTTP.

    A 100,000-object cache is ~8 MB of JSON: more than one websocket message may carry (daphne caps
    messages at 1 MiB, both ways). The page loads the snapshot here, then subscribes on the socket
    from the snapshot's stream id (``since`` + ``epoch``), which resumes instead of re-sending it.
    ``?history=N`` adds up to N frames before the snapshot (context for the events panel);
    ``?form=columns`` sends the state as ``keys`` and ``values`` arrays (what the page asks for:
    parsed faster) instead of the ``state`` object.

    The body is streamed (``dashboard/snapshot_body.py``: one HGETALL, then sent in parts, off
    Django's sync thread); this view only checks access and that Redis answers (503 if not)."""
    if not can_view(request.user):
        return JsonResponse({"error": "forbidden"}, status=403)
    if not _SEGMENT.match(worker) or not _SEGMENT.match(informer):
        raise Http404("no such informer")
    try:
        history = max(0, min(int(request.GET.get("history", "0")), snapshot_body.MAX_HISTORY))
    except ValueError:
        history = 0
    form = request.GET.get("form", "object")
    if form not in snapshot_body.FORMS:
        return JsonResponse({"error": f"?form= must be one of {', '.join(snapshot_body.FORMS)}"}, status=400)
    topic = worker_topic(worker, TopicKind.INFORMER, informer)
    reader = _reader()
    try:
        epoch = reader.epoch(topic)  # read before the snapshot, as the websocket's snapshots do
    except redis.RedisError as exc:
        return JsonResponse({"error": "redis", "detail": str(exc)}, status=503)
    response = StreamingHttpResponse(snapshot_body.stream(reader, topic, epoch, history, form),
                                     content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


# Each waiting inspect request holds a thread and a Redis connection for up to 2 s: cap them per process.
MAX_INSPECTS_IN_FLIGHT = 8
_inspects = threading.BoundedSemaphore(MAX_INSPECTS_IN_FLIGHT)


def inspect_object(request: HttpRequest, worker: str, informer: str) -> HttpResponse:
    """One cached object, asked from the worker that holds it (``controllers/telemetry/inspector.py``):
    ``?key=ns/name`` → its current state and the last ``(old, new)`` pair an update handler received,
    redacted in the worker. 404 unknown worker/informer/key, 503 worker not running or Redis down,
    504 no answer within 2 s, 429 too many requests; the body always says which, in ``error``.

    A sync view is fine here: Django runs each ASGI request's sync code in a thread of its own."""
    if not can_view(request.user):
        return JsonResponse({"status": 403, "error": "forbidden"}, status=403)
    if not _SEGMENT.match(worker) or not _SEGMENT.match(informer):
        return JsonResponse({"status": 404, "error": "no such informer"}, status=404)
    key = request.GET.get("key", "")
    if not inspector.KEY.match(key):
        return JsonResponse({"status": 400, "error": "?key= must be namespace/name"}, status=400)
    if not _inspects.acquire(blocking=False):
        return JsonResponse({"status": 503, "error": "too many inspect requests in flight; try again"}, status=503)
    try:
        answer = inspector.ask(_redis(), Keys.for_url(settings.CTRLSCOPE_PREFIX, settings.REDIS_URL), worker=worker, informer=informer, key=key)
    except redis.RedisError as exc:
        return JsonResponse({"status": 503, "error": f"Redis is unreachable: {exc}"}, status=503)
    finally:
        _inspects.release()
    response = HttpResponse(answer.body, status=answer.status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    return response


def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness: the process serves requests. Deliberately not Redis-aware: a Redis outage must take
    replicas out of the Service (``readyz``), not have Kubernetes restart every one of them."""
    return JsonResponse({"ok": True})


def readyz(request: HttpRequest) -> JsonResponse:
    """Readiness: 200 while Redis answers PING within a second, else 503 (the replica has no live
    data to serve). The body never names the Redis URL: it may carry a password."""
    if ping(settings.REDIS_URL, timeout=1.0):
        return JsonResponse({"ok": True, "redis": "up"})
    return JsonResponse({"ok": False, "redis": "down"}, status=503)
