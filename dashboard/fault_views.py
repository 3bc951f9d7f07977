"""The fault actions behind the Faults panel (the cluster page, and folded on every controller page).

What the panel *shows* — active rules, the fault log — arrives like everything else, over the
websocket from the ``cluster/faults`` topic the simulator publishes (``FaultTelemetry``). What it
*does* goes through these views, which talk to the simulator over HTTP (``SimFaults``):

* ``POST /cluster/faults/<action>`` changes the cluster, so it needs the operator role: viewers and
  anonymous users get a 403 and nothing is sent. CSRF-protected like every Django POST. Parameters
  are validated first (``dashboard.faults``; 400 with the reason, nothing sent); the simulator's own
  refusals and an unreachable or real cluster come back as 502 with its message. Every action, done
  or refused, is logged with the user who asked.
* ``GET /cluster/faults/status`` says whether the configured cluster is a simulator (or a fault
  proxy) at all, so the page can say "fault injection needs the simulated cluster" instead of
  offering buttons, and which actions it cannot do (``disabled``: action → why), which the page
  disables with that reason.
"""

from __future__ import annotations

import logging
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET, require_POST

from dashboard.access import can_view, is_operator
from dashboard.faults import ACTIONS, disabled_actions, form_error
from dashboard.simulator import CALL_ERRORS, NoSimulator, explain, probe, sim_faults

log = logging.getLogger(__name__)


@require_GET
def fault_status(request: HttpRequest) -> JsonResponse:
    if not can_view(request.user):
        return JsonResponse({"error": "forbidden"}, status=403)
    status = probe()
    if status["state"] == "ok":
        status["disabled"] = disabled_actions(status.pop("unsupported"))
    return JsonResponse(status)


def _who(request: HttpRequest) -> str:
    return request.user.get_username() if request.user.is_authenticated else "anonymous"


@require_POST
def fault_action(request: HttpRequest, action: str) -> JsonResponse:
    who = _who(request)
    if not is_operator(request.user):
        log.warning("fault %s refused for %s: not an operator", action, who)
        return JsonResponse({"error": "fault injection changes the cluster: operators only"}, status=403)
    spec = ACTIONS.get(action)
    if spec is None:
        return JsonResponse({"error": f"no fault action {action!r}; one of {', '.join(ACTIONS)}"}, status=404)
    params: dict[str, Any] = {}
    if spec.form is not None:
        form = spec.form(request.POST)
        if not form.is_valid():
            log.info("fault %s by %s rejected: %s", action, who, form_error(form))
            return JsonResponse({"error": form_error(form)}, status=400)
        params = form.cleaned_data
    try:
        faults = sim_faults()
    except NoSimulator as exc:
        log.info("fault %s by %s not sent: %s", action, who, exc)
        return JsonResponse({"error": str(exc)}, status=409)
    url = faults.client.server
    try:
        result = spec.call(faults.as_actor(who), params)
    except CALL_ERRORS as exc:
        log.warning("fault %s %s by %s failed at %s: %s", action, params, who, url, exc)
        return JsonResponse({"error": explain(exc, url)}, status=502)
    log.info("fault %s %s by %s at %s", action, params, who, url)
    return JsonResponse({"ok": True, "action": action, "label": spec.label, "result": result})
