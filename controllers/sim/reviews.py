"""Self reviews: the create-only APIs behind ``kubectl auth can-i`` and ``kubectl auth whoami``.

A review is a question posted as an object (``SelfSubjectAccessReview``: "may I create pods?") that
the API server answers by returning it with ``status`` filled in; nothing is stored. The simulated
cluster has no authentication or authorization — it serves every request and never checks the
kubeconfig's token — so the honest answers are: every access review is allowed, the rules review
grants every verb on everything (what ``can-i --list`` prints for cluster-admin), and the caller is
the kubeconfig's user, a member of ``system:masters``.
"""

from __future__ import annotations

from typing import Any

from controllers.sim.errors import invalid
from controllers.sim.resources import ResourceType

USERNAME = "ctrlscope-sim"
_REASON = "the simulated cluster authorizes every request"


def answer(rt: ResourceType, review: dict[str, Any]) -> dict[str, Any]:
    """The review as the API server returns it (201): the question, plus the answer in ``status``."""
    spec = review.get("spec") if isinstance(review.get("spec"), dict) else {}
    out: dict[str, Any] = {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": {"creationTimestamp": None}}
    if rt.kind == "SelfSubjectAccessReview":
        if bool(spec.get("resourceAttributes")) == bool(spec.get("nonResourceAttributes")):
            raise invalid(rt.kind, rt.group, "", [(
                "spec.resourceAttributes", "Invalid value: exactly one of nonResourceAttributes or "
                                           "resourceAttributes must be specified")])
        out["spec"] = spec
        out["status"] = {"allowed": True, "reason": _REASON}
    elif rt.kind == "SelfSubjectRulesReview":
        out["spec"] = spec
        out["status"] = {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                         "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                         "incomplete": False}
    else:
        out["status"] = {"userInfo": {"username": USERNAME, "groups": ["system:masters", "system:authenticated"]}}
    return out
