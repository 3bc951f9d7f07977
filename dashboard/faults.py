"""The faults an operator may inject from the dashboard: one validated form per action.

Each action names a ``SimFaults`` call and, where it takes parameters, the Django form that checks
them first: a bad value is a 400 with the form's message and nothing reaches the simulator. The forms
render the page's inputs too, so the limits the browser enforces (``min``, ``max``, ``maxlength``) are
the very limits the server checks. Bounds are what a demo needs, not what the simulator could take:
a 30 s delay already makes every watch look dead, 50 dead pods at once is a massacre.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.http import HttpRequest

from controllers.faults.vocabulary import VERBS, Capability
from controllers.sim.faults_client import SimFaults
from dashboard.access import is_operator

MAX_LATENCY_MS = 30_000
MAX_KILL = 50
# Resource names as the simulator's rules match them: lowercase plurals (``pods``), or ``*``.
RESOURCE = r"^(\*|[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?)$"
NAMESPACE = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
RESOURCES = ("*", "pods", "podsets", "deployments", "replicasets", "configmaps", "secrets", "services",
             "events", "leases", "namespaces", "nodes")  # suggestions only: any served resource works


def _resource_field() -> forms.RegexField:
    return forms.RegexField(
        regex=RESOURCE, max_length=63, initial="*",
        widget=forms.TextInput(attrs={"list": "fault-resources", "size": 13, "spellcheck": "false"}),
        error_messages={"invalid": "a lowercase plural resource such as pods or configmaps, or *"})


class RuleForm(forms.Form):
    """Which calls a rule applies to: ``verb`` and ``resource``, either may be ``*``."""

    verb = forms.ChoiceField(choices=[("*", "* any")] + [(v, v) for v in VERBS if v != "*"], initial="*")
    resource = _resource_field()


class ErrorsForm(RuleForm):
    rate = forms.FloatField(label="rate %", min_value=0, max_value=100, initial=50,
                            widget=forms.NumberInput(attrs={"step": "any"}), help_text="0 removes the rule")
    code = forms.IntegerField(label="status", min_value=400, max_value=599, initial=500)


class LatencyForm(RuleForm):
    ms = forms.IntegerField(label="ms", min_value=0, max_value=MAX_LATENCY_MS, initial=500,
                            help_text="0 removes the rule")


class KillPodsForm(forms.Form):
    count = forms.IntegerField(min_value=1, max_value=MAX_KILL, initial=1)
    namespace = forms.RegexField(regex=NAMESPACE, max_length=63, required=False, initial="default",
                                 widget=forms.TextInput(attrs={"size": 10, "spellcheck": "false"}),
                                 help_text="empty: any namespace",
                                 error_messages={"invalid": "a namespace name (lowercase letters, digits, -)"})


class ResetForm(forms.Form):
    confirm = forms.CharField(max_length=10)

    def clean_confirm(self) -> str:
        value = self.cleaned_data["confirm"]
        if value != "reset":
            raise forms.ValidationError('send confirm=reset: a reset deletes every object in the cluster')
        return value


@dataclass(frozen=True)
class Action:
    """One thing the Faults panel can do to the cluster (through the simulator or a fault proxy)."""

    label: str
    call: Callable[[SimFaults, dict[str, Any]], Any]
    form: type[forms.Form] | None = None
    needs: Capability | None = None  # what the fault API must be able to do (None: everyone can)


ACTIONS: dict[str, Action] = {
    "drop-watches": Action("drop watches", lambda f, _: f.drop_watches()),
    "end-watches": Action("end watches", lambda f, _: f.end_watches()),
    "compact": Action("compact history", lambda f, _: f.compact_history(), needs=Capability.COMPACT),
    "errors": Action("inject errors", lambda f, d: f.errors(verb=d["verb"], resource=d["resource"],
                                                          rate=d["rate"] / 100, code=d["code"]), ErrorsForm),
    "clear-errors": Action("clear errors", lambda f, _: f.clear_errors()),
    "latency": Action("add latency", lambda f, d: f.latency(verb=d["verb"], resource=d["resource"], ms=d["ms"]),
                      LatencyForm),
    "clear-latency": Action("clear latency", lambda f, _: f.clear_latency()),
    "pause-kubelet": Action("pause kubelet", lambda f, _: f.pause_kubelet(), needs=Capability.KUBELET),
    "resume-kubelet": Action("resume kubelet", lambda f, _: f.resume_kubelet(), needs=Capability.KUBELET),
    "kill-pods": Action("kill pods", lambda f, d: f.kill_pods(d["count"], d["namespace"] or None), KillPodsForm,
                        needs=Capability.KILL_PODS),
    "reset": Action("reset cluster", lambda f, _: f.reset(), ResetForm, needs=Capability.RESET),
}


def disabled_actions(unsupported: dict[str, str]) -> dict[str, str]:
    """The actions the fault API cannot do (``unsupported`` of ``GET /_sim/faults``: capability →
    why), each with that reason: the panel disables them and says why on hover."""
    return {name: unsupported[a.needs] for name, a in ACTIONS.items() if a.needs is not None and a.needs in unsupported}


def form_error(form: forms.Form) -> str:
    """The form's errors as one line: ``rate: Ensure this value is less than or equal to 100.``"""
    return "; ".join(f"{field}: {' '.join(errors)}" if field != "__all__" else " ".join(errors)
                     for field, errors in form.errors.items())


def unbound_forms() -> dict[str, forms.Form]:
    """The page's forms by action (``kill_pods``: templates cannot look up ``-``), with ids that cannot
    collide (two forms have a ``verb``)."""
    return {name.replace("-", "_"): a.form(auto_id=f"fault-{name}-%s") for name, a in ACTIONS.items()
            if a.form is not None}


def panel_context(request: HttpRequest) -> dict[str, Any]:
    """What the Faults panel template needs (``templates/dashboard/_faults.html``): every page that
    folds the panel in renders it from here, without the views that talk to the simulator."""
    return {"fault_panel": {"operator": is_operator(request.user), "enabled": bool(settings.CTRLSCOPE_SIM_KUBECONFIG),
                            "forms": unbound_forms(), "resources": RESOURCES}}
