"""client-go's metadata-only, selector- and namespace-scoped informer with the managedFields
transform, against the simulator, call by call next to ctrlscope's Python informer with the same
options.

Both run at once on the same objects (``go/cmd/scoped-informer``: metadatainformer,
WithTweakListOptions, controller-runtime's TransformStripManagedFields; the Python twin: a
SharedInformerFactory with ``namespace``, ``tweak_list_options``, ``transform`` and
``metadata_only``). The simulator has to serve what client-go's metadata client asks for
(``as=PartialObjectMetadataList`` lists and ``as=PartialObjectMetadata`` watch events, with the
label selector), and a label change that moves an object out of or into the selector has to arrive
as DELETED / ADDED in both. The Go program's published scope is the Python one's, field for field.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from controllers.informers import ListOptions, SharedInformerFactory, transform_strip_managed_fields
from controllers.informers.http_client import KubernetesClient
from controllers.informers.keys import DeletedFinalStateUnknown
from controllers.informers.listwatch import ApiError
from tests.conftest import wait_until
from tests.golang.telemetry import Published
from tests.runtime.informers.test_scoped_informers import create_cm, relabel

NAMESPACE = "scoped"
SELECTOR = "app=web"
WORKER = "go-scoped"


class PythonTwin:
    """The same informer in ctrlscope's runtime; every handler call as a dict like the Go one's."""

    def __init__(self, client: KubernetesClient) -> None:
        def tweak(options: ListOptions) -> None:
            options.label_selector = SELECTOR

        self.factory = SharedInformerFactory(client, namespace=NAMESPACE, tweak_list_options=tweak,
                                             transform=transform_strip_managed_fields())
        self.informer = self.factory.informer_for("v1", "ConfigMap", metadata_only=True)
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.informer.add_event_handler(on_add=lambda o: self.note("add", o),
                                        on_update=lambda _old, new: self.note("update", new),
                                        on_delete=lambda o: self.note("delete", o))

    def note(self, handler: str, obj: Any) -> None:
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        meta = obj["metadata"]
        with self._lock:
            self.calls.append({"handler": handler, "name": meta["name"], "namespace": meta.get("namespace"),
                               "kind": obj.get("kind"), "apiVersion": obj.get("apiVersion"),
                               "labels": meta.get("labels") or None, "managedFields": len(meta.get("managedFields") or []),
                               "resourceVersion": meta.get("resourceVersion"), "keys": sorted(obj)})


def go_calls(process) -> list[dict[str, Any]]:
    out = []
    for line in process.output().splitlines():
        if line.startswith("{") and '"handler"' in line:
            out.append(json.loads(line))
    return out


def sequence(calls: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(c["handler"], c["name"]) for c in calls]


def test_client_go_metadata_informer_sees_what_ctrlscope_sees(go_process, sim_kubeconfig, redis_url, prefix):
    client = KubernetesClient.from_kubeconfig(str(sim_kubeconfig))
    try:
        client.send_json("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    except ApiError as exc:
        assert exc.code == 409, exc
    create_cm(client, "web-1", ns=NAMESPACE, labels={"app": "web"}, a="1")
    create_cm(client, "web-2", ns=NAMESPACE, labels={"app": "web"}, a="2")
    create_cm(client, "db-1", ns=NAMESPACE, labels={"app": "db"}, a="3")
    create_cm(client, "web-elsewhere", labels={"app": "web"}, a="4")  # another namespace: never seen
    live = client.get_json(f"/api/v1/namespaces/{NAMESPACE}/configmaps/web-1")
    assert live["metadata"].get("managedFields"), "the simulator records managedFields: the transform has work"

    go = go_process("scoped-informer", "--kubeconfig", str(sim_kubeconfig), "--worker-name", WORKER,
                    "--namespace", NAMESPACE, "--selector", SELECTOR, "--resource", "configmaps")
    py = PythonTwin(client)
    py.factory.start()
    try:
        assert py.factory.wait_for_cache_sync(15) == {("v1", "ConfigMap", NAMESPACE, True): True}
        go.wait_for_output('"synced"', timeout=60)

        def both(expected: list[tuple[str, str]], what: str) -> None:
            wait_until(lambda: sequence(go_calls(go)) == expected and sequence(py.calls) == expected,
                       timeout=20, what=f"{what}: go {sequence(go_calls(go))}, python {sequence(py.calls)}")

        # A synced cache is not yet a handled one: the handlers hear the initial adds on their own
        # thread, after the sync (client-go's registration HasSynced, not the informer's, says when).
        initial = [("add", "web-1"), ("add", "web-2")]
        wait_until(lambda: sorted(sequence(py.calls)) == initial, timeout=10,
                   what=f"the Python handlers to hear the initial adds: {py.calls}")
        wait_until(lambda: sorted(sequence(go_calls(go))) == initial, timeout=20,
                   what=f"client-go's initial adds (it printed {sequence(go_calls(go))})")
        # From here on the order is the server's: make both lists start with the same initial order.
        order = sequence(go_calls(go))
        py.calls.sort(key=lambda c: order.index((c["handler"], c["name"])))

        relabel(client, "web-1", {"app": "db"}, ns=NAMESPACE)  # leaves the selector: DELETED
        both([*order, ("delete", "web-1")], "web-1 relabelled out")
        relabel(client, "db-1", {"app": "web"}, ns=NAMESPACE)  # enters it: ADDED
        both([*order, ("delete", "web-1"), ("add", "db-1")], "db-1 relabelled in")
        relabel(client, "web-2", {"tier": "front"}, ns=NAMESPACE)  # still matches: MODIFIED
        both([*order, ("delete", "web-1"), ("add", "db-1"), ("update", "web-2")], "web-2 relabelled")
        client.send_json("DELETE", f"/api/v1/namespaces/{NAMESPACE}/configmaps/web-2")
        both([*order, ("delete", "web-1"), ("add", "db-1"), ("update", "web-2"), ("delete", "web-2")],
             "web-2 deleted")
        # Neither hears of objects outside the namespace or the selector: the marker, created after
        # them, is the next call in both.
        create_cm(client, "web-later", labels={"app": "web"})
        create_cm(client, "db-2", ns=NAMESPACE, labels={"app": "db"})
        create_cm(client, "marker", ns=NAMESPACE, labels={"app": "web"})
        expected = [*order, ("delete", "web-1"), ("add", "db-1"), ("update", "web-2"), ("delete", "web-2"),
                    ("add", "marker")]
        both(expected, "the marker created")
    finally:
        py.factory.shutdown()
        output = go.stop()

    calls = go_calls(go)
    assert not [c for c in calls if "error" in c], output[-2000:]
    assert sequence(calls) == expected and sequence(py.calls) == expected
    for g, p in zip(calls, py.calls, strict=True):
        # PartialObjectMetadata in both, managedFields stripped before any handler saw them; the
        # same object at the same resourceVersion.
        assert p["keys"] == ["apiVersion", "kind", "metadata"], p
        assert p["kind"] == "PartialObjectMetadata" and p["apiVersion"] == "meta.k8s.io/v1", p
        assert g["managedFields"] == 0 and p["managedFields"] == 0, (g, p)
        assert (g["name"], g["namespace"], g["resourceVersion"], g["labels"]) == \
            (p["name"], p["namespace"], p["resourceVersion"], p["labels"]), (g, p)

    published = Published(redis_url, prefix)
    try:
        components = published.state(f"w/{WORKER}/components")
        informer = components["informer/v1/ConfigMap"]
        scope = {k: informer.get(k) for k in ("namespace", "label_selector", "metadata_only", "transform")}
        assert scope == py.informer.scope == {"namespace": NAMESPACE, "label_selector": SELECTOR,
                                              "metadata_only": True, "transform": "strip managedFields"}
    finally:
        published.close()
