"""The root-CA publisher: kube-controller-manager's ``root-ca-cert-publisher``, simulated.

A real cluster has a ConfigMap ``kube-root-ca.crt`` in every namespace, holding the CA bundle that
pods use to verify the API server (the projected ``kube-api-access-*`` volume mounts it). Users see it
in every ``kubectl get configmaps``, informers cache it, and paging counts it; a simulated cluster
without it answers lists differently from every real one (tests/differential found it).

The simulator serves plain HTTP, so its bundle is a fixed self-signed certificate that verifies
nothing (its private key was discarded when it was made). Like the real controller, the publisher
creates the ConfigMap when a namespace appears and puts it back when it is deleted or edited.
Store listeners only mark namespaces; the writes happen in a task on the server's event loop, as
ordinary later writes with their own resourceVersions.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from controllers.sim.background import BackgroundLoop
from controllers.sim.errors import StatusError
from controllers.sim.store import Store
from controllers.sim.watch import WatchEvent

NAME = "kube-root-ca.crt"
MANAGER = "kube-controller-manager"
NAMESPACES = ("", "namespaces")
CONFIGMAPS = ("", "configmaps")
DESCRIPTION = ("Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints "
               "such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across "
               "distributions of Kubernetes clusters.")
CA_BUNDLE = """-----BEGIN CERTIFICATE-----
MIIBqDCCAU+gAwIBAgIUYgh+O6BFV/LlYhTIEApxrN10CZgwCgYIKoZIzj0EAwIw
KTEnMCUGA1UEAwweY3RybHNjb3BlLXNpbXVsYXRlZC1jbHVzdGVyLWNhMCAXDTI2
MTIwNTEyMjEzOVoYDzIxMjYxMTExMTIyMTM5WjApMScwJQYDVQQDDB5jdHJsc2Nv
cGUtc2ltdWxhdGVkLWNsdXN0ZXItY2EwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNC
AAS5wWCDJCJoA/5LsK+bYb0zgTyVbfE7SB+nkth+3hdXmodDp1AqE/tZEE/yYXfg
q/ebO7k6mxldAJCLpKMlcCxto1MwUTAdBgNVHQ4EFgQUsCeDQ6SPXrICgflRkRT5
7HUbIj4wHwYDVR0jBBgwFoAUsCeDQ6SPXrICgflRkRT57HUbIj4wDwYDVR0TAQH/
BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAjdu1m5X78M5dScxtax53YujYmTRvx
++zLGNgXGO9q+AIgHe/cG6Jh/PO2GudvWxlWV/KytjMUzkQ5WiStit3g1JA=
-----END CERTIFICATE-----
"""
log = logging.getLogger(__name__)


def desired(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": NAME, "namespace": namespace, "annotations": {"kubernetes.io/description": DESCRIPTION}},
            "data": {"ca.crt": CA_BUNDLE}}


class RootCAPublisher(BackgroundLoop):
    """Keeps ``kube-root-ca.crt`` in every namespace that is not terminating."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._dirty: set[str] = set()
        self._wake = asyncio.Event()
        store.listeners.append(self._on_event)

    def _on_event(self, ev: WatchEvent) -> None:
        meta = ev.obj["metadata"]
        if ev.key == NAMESPACES and ev.type != "DELETED":
            self._mark(meta["name"])
        elif ev.key == CONFIGMAPS and meta.get("name") == NAME:
            self._mark(meta.get("namespace", ""))

    def _mark(self, namespace: str) -> None:
        self._dirty.add(namespace)
        self._wake.set()

    def resync(self) -> None:
        for _, name in list(self.store.bucket(NAMESPACES).objects):
            self._mark(name)

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            self.drain()

    def drain(self) -> None:
        batch, self._dirty = self._dirty, set()
        for namespace in sorted(batch):
            try:
                self._publish(namespace)
            except StatusError as exc:
                log.debug("root CA for %s not published: %s", namespace, exc)

    def _publish(self, namespace: str) -> None:
        ns = self.store.find(NAMESPACES, "", namespace)
        if ns is None or ns["metadata"].get("deletionTimestamp"):
            return
        rt = self.store.registry.storage_type(CONFIGMAPS)
        assert rt is not None
        want = desired(namespace)
        current = self.store.find(CONFIGMAPS, namespace, NAME)
        if current is None:
            self.store.create(rt, namespace, want, manager=MANAGER)
        elif current.get("data") != want["data"]:
            self.store.update(rt, namespace, NAME, {**current, "data": want["data"]}, manager=MANAGER)
