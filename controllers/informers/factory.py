"""SharedInformerFactory: one informer per resource, shared by every controller in the process
(client-go ``informers/factory.go``, dynamic flavour).

Two controllers watching Pods share one LIST+WATCH and one cache. ``informer_for`` creates the
informer on first use (later calls return the same one); ``start`` runs every informer not yet
running, including ones requested after an earlier ``start``; ``wait_for_cache_sync`` waits for all.
The ``client`` is anything that can build a ``ListWatch`` for an api_version/kind/namespace -- the
Kubernetes HTTP client (``KubernetesClient``) or a test fake.
"""

from __future__ import annotations

import threading
from typing import Protocol

from controllers.clock import Clock, RealClock
from controllers.informers.listwatch import ListWatch
from controllers.informers.reflector import MIN_WATCH_TIMEOUT
from controllers.informers.shared_informer import SharedInformer
from controllers.observer import NOOP_OBSERVER, Observer

InformerKey = tuple[str, str, str | None]


class ListWatchClient(Protocol):
    """Builds the list/watch for one resource."""

    def list_watch(self, api_version: str, kind: str, namespace: str | None = None) -> ListWatch: ...


class SharedInformerFactory:
    """Creates, shares, starts and syncs informers."""

    def __init__(self, client: ListWatchClient, resync_period: float = 0.0, *, clock: Clock | None = None,
                 observer: Observer | None = None, freeze_gc_after_sync: bool = False,
                 min_watch_timeout: float = MIN_WATCH_TIMEOUT) -> None:
        self.client = client
        # Each watch asks the server to end it after [min_watch_timeout, 2 x min_watch_timeout) s.
        self.min_watch_timeout = min_watch_timeout
        self.resync_period = resync_period
        self.clock: Clock = clock or RealClock()
        self.observer: Observer = observer or NOOP_OBSERVER
        self.freeze_gc_after_sync = freeze_gc_after_sync
        self._lock = threading.Lock()
        self._informers: dict[InformerKey, SharedInformer] = {}
        self._started: set[InformerKey] = set()

    def informer_for(self, api_version: str, kind: str, namespace: str | None = None) -> SharedInformer:
        """The shared informer for ``kind`` in ``api_version`` (all namespaces unless given)."""
        key = (api_version, kind, namespace)
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                name = f"{api_version}/{kind}" + (f" ns={namespace}" if namespace else "")
                informer = SharedInformer(self.client.list_watch(api_version, kind, namespace), name=name,
                                          resync_period=self.resync_period, clock=self.clock,
                                          observer=self.observer, freeze_gc_after_sync=self.freeze_gc_after_sync,
                                          min_watch_timeout=self.min_watch_timeout)
                self._informers[key] = informer
            return informer

    def informers(self) -> list[SharedInformer]:
        """Every informer created so far, started or not."""
        with self._lock:
            return list(self._informers.values())

    def start(self) -> None:
        """Start every informer that is not running yet."""
        with self._lock:
            pending = [(k, i) for k, i in self._informers.items() if k not in self._started]
            self._started.update(k for k, _ in pending)
        for _, informer in pending:
            informer.start()

    def wait_for_cache_sync(self, timeout: float) -> dict[InformerKey, bool]:
        """Wait (sharing one ``timeout``) for every started informer; returns who synced."""
        with self._lock:
            started = {k: self._informers[k] for k in self._started}
        deadline = self.clock.now() + timeout
        return {k: i.wait_for_sync(max(0.0, deadline - self.clock.now())) for k, i in started.items()}

    def shutdown(self) -> None:
        """Stop every informer."""
        with self._lock:
            informers = list(self._informers.values())
        for informer in informers:
            informer.stop()
