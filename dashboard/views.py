"""Pages. The live data arrives over the websocket; views only render the shell."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from dashboard.access import can_view, is_operator


def index(request: HttpRequest) -> HttpResponse:
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    return render(request, "dashboard/index.html", {
        "anonymous_mode": settings.CTRLSCOPE_ALLOW_ANONYMOUS and not request.user.is_authenticated,
        "operator": is_operator(request.user),
    })


def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"ok": True})
