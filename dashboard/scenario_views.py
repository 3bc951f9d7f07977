"""The scenarios page (narration, live claims, scoreboard) and starting a scenario from it.

Starting a scenario changes the cluster (faults, scaling, killed pods or workers), so it needs the
operator role: viewers and anonymous users get 403 and nothing happens. The scenario runs as
``manage.py scenario NAME`` in its own process (one at a time); its narration, claims and
measurements reach every open page through the ``scenarios`` telemetry topic.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_POST

from controllers.scenarios import SCENARIOS
from dashboard.access import can_view, is_operator

PID_FILE = "scenario.pid"


def scenarios(request: HttpRequest) -> HttpResponse:
    if not can_view(request.user):
        return redirect_to_login(request.get_full_path())
    return render(request, "dashboard/scenarios.html", {
        "anonymous_mode": settings.CTRLSCOPE_ALLOW_ANONYMOUS and not request.user.is_authenticated,
        "operator": is_operator(request.user),
        "scenarios": list(SCENARIOS.values()),
        # Empty when the demo runs without the simulator (--real, --kubeconfig): no faults to inject.
        "faults_enabled": bool(settings.CTRLSCOPE_SIM_KUBECONFIG),
    })


def _running() -> int | None:
    """The pid of the scenario process still running, if any. A finished scenario started by this
    server is its child: reap it here, or it lingers as a zombie that looks alive to ``kill(pid, 0)``
    and every later start would be refused with 409."""
    try:
        pid = int((settings.RUN_DIR / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    try:
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return None  # it had exited; now reaped
    except ChildProcessError:
        pass  # not our child (started by another server process, or already reaped)
    try:
        return None if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE else pid
    except psutil.Error:
        return None


@require_POST
def start_scenario(request: HttpRequest, name: str) -> JsonResponse:
    if not is_operator(request.user):
        return JsonResponse({"error": "starting a scenario changes the cluster: operators only"}, status=403)
    if name not in SCENARIOS:
        return JsonResponse({"error": f"no scenario {name!r}"}, status=404)
    try:
        speed = float(request.POST.get("speed", "1"))
    except ValueError:
        speed = 0.0
    if not 0.05 <= speed <= 10:
        return JsonResponse({"error": "speed must be a number from 0.05 to 10"}, status=400)
    if SCENARIOS[name].needs_faults and not settings.CTRLSCOPE_SIM_KUBECONFIG:
        return JsonResponse({"error": f"{name} injects the simulated cluster's faults, and this demo runs without "
                                      "the simulator (fault injection is off here)"}, status=409)
    if _running() is not None:
        return JsonResponse({"error": "a scenario is already running"}, status=409)
    settings.RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(settings.RUN_DIR / "scenario.log", "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", "dashboard", "scenario", name, "--speed", str(speed)],
                                cwd=settings.BASE_DIR, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
    (settings.RUN_DIR / PID_FILE).write_text(str(proc.pid))
    return JsonResponse({"started": name, "speed": speed, "pid": proc.pid}, status=202)
