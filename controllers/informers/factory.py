"""SharedInformerFactory: one informer per resource, shared by every controller in the process
(client-go ``informers/factory.go``, dynamic flavour).

Two controllers watching Pods share one LIST+WATCH and one cache. ``informer_for`` creates the
informer on first use (later calls return the same one); ``start`` runs every informer not yet
running, including ones requested after an earlier ``start``; ``wait_for_cache_sync`` waits for all.
The ``client`` is anything that can build a ``ListWatch`` for an api_version/kind/namespace -- the
Kubernetes HTTP client (``KubernetesClient``) or a test fake.

Options for big clusters, with client-go's semantics (``NewSharedInformerFactoryWithOptions``):

* ``namespace`` (``WithNamespace``): every informer watches that namespace only.
* ``tweak_list_options`` (``WithTweakListOptions``): called with each informer's fresh
  ``ListOptions`` before its first LIST, to set label/field selectors; the server filters.
* ``transform`` (``WithTransform``): applied to every object before it is cached (``transform.py``;
  ``transform_strip_managed_fields()`` is the usual one).
* ``informer_for(..., metadata_only=True)`` (client-go's ``metadatainformer`` factory): the informer
  lists and watches ``PartialObjectMetadata`` -- names, labels, owners, finalizers, no spec or
  status -- for controllers that only need to know what exists. It is its own informer, beside a
  full one for the same kind.

GC policy: the factory owns its process's informers, so by default it keeps CPython's cyclic GC off
them (``freeze_gc_after_sync``, ``gc_freeze.py``), with the compact JSON-bytes cache
(``cache="compact"``, ~4 KB per Pod). Without the freeze the GC's share of an informer's CPU grows
with the cache -- bench/informer_gc.py measured 29 % at 20,000 Pods and 49 % at 100,000 on the
compact cache -- and the factory fell below 10x the official informer (8.3x at 20,000 Pods, issue
16; bench/informer_scale.py). ``freeze_gc_after_sync=False`` leaves the GC as the process set it.

An informer's name says what narrows it beyond the kind (``v1/Pod ns=web labels=app=web
metadata``), so two factories with other selectors in one process publish two topics, not one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from controllers.clock import Clock, RealClock
from controllers.informers.listwatch import ListOptions, ListWatch
from controllers.informers.reflector import MIN_WATCH_TIMEOUT
from controllers.informers.shared_informer import SharedInformer
from controllers.informers.store import CacheMode
from controllers.informers.transform import TransformFunc
from controllers.observer import NOOP_OBSERVER, Observer

InformerKey = tuple[str, str, str | None] | tuple[str, str, str | None, bool]
"""(api_version, kind, namespace), with ``True`` appended for a metadata-only informer."""

TweakListOptionsFunc = Callable[[ListOptions], None]


class ListWatchClient(Protocol):
    """Builds the list/watch for one resource; ``options`` and ``metadata_only`` are passed only
    when set, so a client without them serves every unnarrowed informer."""

    def list_watch(self, api_version: str, kind: str, namespace: str | None = None,
                   **narrowing: Any) -> ListWatch: ...


def informer_name(api_version: str, kind: str, namespace: str | None, options: ListOptions,
                  metadata_only: bool) -> str:
    """``v1/Pod``, plus what narrows it: `` ns=..``, `` labels=..``, `` fields=..``, `` metadata``."""
    name = f"{api_version}/{kind}"
    if namespace:
        name += f" ns={namespace}"
    if options.label_selector:
        name += f" labels={options.label_selector}"
    if options.field_selector:
        name += f" fields={options.field_selector}"
    return name + (" metadata" if metadata_only else "")


class SharedInformerFactory:
    """Creates, shares, starts and syncs informers."""

    def __init__(self, client: ListWatchClient, resync_period: float = 0.0, *, clock: Clock | None = None,
                 observer: Observer | None = None, freeze_gc_after_sync: bool = True,
                 min_watch_timeout: float = MIN_WATCH_TIMEOUT, namespace: str | None = None,
                 tweak_list_options: TweakListOptionsFunc | None = None,
                 transform: TransformFunc | None = None, cache: CacheMode | str | None = None) -> None:
        self.client = client
        # Checked here, so a bad value is an error where it was written, not at the first informer.
        self.cache = CacheMode.resolve(cache, CacheMode.COMPACT)
        self.namespace = namespace or None
        self.tweak_list_options = tweak_list_options
        self.transform = transform
        # Each watch asks the server to end it after [min_watch_timeout, 2 x min_watch_timeout) s.
        self.min_watch_timeout = min_watch_timeout
        self.resync_period = resync_period
        self.clock: Clock = clock or RealClock()
        self.observer: Observer = observer or NOOP_OBSERVER
        self.freeze_gc_after_sync = freeze_gc_after_sync
        self._lock = threading.Lock()
        self._informers: dict[InformerKey, SharedInformer] = {}
        self._started: set[InformerKey] = set()

    def informer_for(self, api_version: str, kind: str, namespace: str | None = None, *,
                     metadata_only: bool = False) -> SharedInformer:
        """The shared informer for ``kind`` in ``api_version``: in the factory's namespace (or
        ``namespace``, or all), narrowed by its ``tweak_list_options``; ``metadata_only`` for one
        that caches ``PartialObjectMetadata``."""
        if self.namespace and namespace and namespace != self.namespace:
            raise ValueError(f"this factory watches namespace {self.namespace!r} only, not {namespace!r}")
        namespace = namespace or self.namespace
        key: InformerKey = (api_version, kind, namespace, True) if metadata_only else (api_version, kind, namespace)
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                options = ListOptions()
                if self.tweak_list_options is not None:
                    self.tweak_list_options(options)
                narrowing: dict[str, Any] = {}
                if options != ListOptions():
                    narrowing["options"] = options
                if metadata_only:
                    narrowing["metadata_only"] = True
                informer = SharedInformer(self.client.list_watch(api_version, kind, namespace, **narrowing),
                                          name=informer_name(api_version, kind, namespace, options, metadata_only),
                                          resync_period=self.resync_period, clock=self.clock,
                                          observer=self.observer, freeze_gc_after_sync=self.freeze_gc_after_sync,
                                          min_watch_timeout=self.min_watch_timeout, transform=self.transform,
                                          cache=self.cache)
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
