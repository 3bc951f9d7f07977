"""PodSet as a kopf operator: the same custom resource, handled the way kopf handles things.

A plain kopf operator (it imports nothing from ctrlscope), so it runs the way any kopf operator
runs -- ``kopf run --standalone -A controllers/examples/kopf_podsets.py`` -- and equally under
``manage.py runkopf ... -- <those arguments>``, which shows every handler attempt on the dashboard.
It owns the PodSets labelled ``demo.ctrlscope.dev/implementation=kopf`` (the ``handlers`` and
``reconciler`` implementations in ``podset.py`` ignore them, and it ignores theirs).

``converge`` runs on create, on update (a change of the PodSet's spec, labels or annotations:
kopf leaves status out) and on resume (every PodSet found when the operator starts). Each time it
lists the pods the PodSet owns (by its template's labels, then by ownerReference), creates the
missing ones and deletes the extras with the official ``kubernetes`` client, and sets
``status.replicas``. Within one call that is level-based, like the reconciler; *when* it is called
is event-based: kopf watches PodSets only, so a pod deleted behind its back is not replaced until
the PodSet changes or the operator restarts (a ``@kopf.on.delete`` on pods, or a timer, would
close that gap; this example leaves it open to show it).

An API error raises out of the handler. kopf then retries the whole handler after its backoff:
``settings.execution.default_backoff``, 60 s unless ``PODSET_KOPF_BACKOFF`` says otherwise (read
once, in the startup handler). That fixed delay, against a workqueue's exponential backoff from
5 ms, is what the ``kopf-vs-reconciler`` scenario measures.
"""

from __future__ import annotations

import os
from typing import Any

import kopf
import kubernetes

GROUP, VERSION, PLURAL, KIND = "demo.ctrlscope.dev", "v1", "podsets", "PodSet"
IMPLEMENTATION_LABEL = f"{GROUP}/implementation"
MINE = {"labels": {IMPLEMENTATION_LABEL: "kopf"}}
BACKOFF_ENV = "PODSET_KOPF_BACKOFF"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: Any, **_: Any) -> None:
    """The retry backoff, and the official client configured for the cluster kopf logs in to."""
    if os.environ.get(BACKOFF_ENV):
        settings.execution.default_backoff = float(os.environ[BACKOFF_ENV])
    logger.info(f"a failed handler is retried after {settings.execution.default_backoff:g} s")
    try:
        kubernetes.config.load_incluster_config()
    except kubernetes.config.ConfigException:
        kubernetes.config.load_kube_config()  # $KUBECONFIG or ~/.kube/config, as kopf's own login
    memo.core = kubernetes.client.CoreV1Api()


@kopf.on.resume(GROUP, VERSION, PLURAL, **MINE)
@kopf.on.create(GROUP, VERSION, PLURAL, **MINE)
@kopf.on.update(GROUP, VERSION, PLURAL, **MINE)
def converge(spec: kopf.Spec, meta: kopf.Meta, namespace: str, patch: kopf.Patch, memo: kopf.Memo,
             logger: Any, **_: Any) -> None:
    """Make the PodSet's pods match ``spec.replicas``; raise on an API error (kopf retries)."""
    core: kubernetes.client.CoreV1Api = memo.core
    want = spec.get("replicas", 1)
    want = want if isinstance(want, int) and want >= 0 else 0
    template = spec.get("template") or {}
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
    pods = core.list_namespaced_pod(namespace, label_selector=selector).items
    live = sorted(p.metadata.name for p in pods if p.metadata.deletion_timestamp is None
                  and any(ref.uid == meta["uid"] and ref.controller for ref in p.metadata.owner_references or []))
    for _ in range(want - len(live)):
        created = core.create_namespaced_pod(namespace, _pod(meta, namespace, labels, template))
        live.append(created.metadata.name)
    for name in live[want:]:
        try:
            core.delete_namespaced_pod(name, namespace)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
    current = min(len(live), want)  # every missing pod was created, every extra one deleted
    patch.status["replicas"] = current
    logger.info(f"{current} pods for {want} wanted")


def _pod(meta: kopf.Meta, namespace: str, labels: dict[str, str], template: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{meta['name']}-", "namespace": namespace, "labels": labels,
                         "ownerReferences": [{"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "name": meta["name"],
                                              "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}]},
            "spec": template.get("spec") or {"containers": [{"name": "app", "image": "nginx:1.27"}]}}
