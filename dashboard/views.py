"""Pages. The live data arrives over the websocket; views only render the shell."""

from __future__ import annotations

import re

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from dashboard.access import can_view, is_operator

# A topic segment as TelemetryObserver.topic_part makes it (no "/", so one URL segment each).
_SEGMENT = re.compile(r"^[A-Za-z0-9:._@-]{1,120}$")


def _shell_context(request: HttpRequest) -> dict[str, object]:
    return {
        "anonymous_mode": settings.CTRLSCOPE_ALLOW_ANONYMOUS and not request.user.is_authenticated,
        "operator": is_operator(request.user),
    }


def index(request: HttpRequest) -> HttpResponse:
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    return render(request, "dashboard/index.html", _shell_context(request))


def controller(request: HttpRequest, worker: str, controller: str) -> HttpResponse:
    """One controller of one worker: workqueue, reconcile timeline and its informers' events.

    ``worker`` and ``controller`` are topic segments (``w/{worker}/controller/{controller}``); the
    optional ``?key=ns/name`` query focuses one key (a shareable deep link)."""
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    if not _SEGMENT.match(worker) or not _SEGMENT.match(controller):
        raise Http404("no such controller")
    page = {
        "worker": worker,
        "controller": controller,
        "key": request.GET.get("key", "")[:300],
        "topics": {
            "components": f"w/{worker}/components",
            "queue": f"w/{worker}/queue/{controller}",
            "controller": f"w/{worker}/controller/{controller}",
            "informer_prefix": f"w/{worker}/informer/",
        },
    }
    return render(request, "dashboard/controller.html", {**_shell_context(request), "page": page})


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})
