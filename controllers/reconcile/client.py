"""The reconciler's client (controller-runtime ``pkg/client``): reads from the informer cache, writes
to the API server.

Objects are plain dicts that carry their ``apiVersion``, ``kind`` and ``metadata`` (controller-
runtime's unstructured objects), so one client serves every kind, built-in or custom; paths come
from discovery (``KubernetesClient.resource_path``). Every request goes through the
``KubernetesClient``, which reports it to the observer with its status code: made from a
Reconcile, each write shows on the controller's page as an API write (409s counted as conflicts).

Reads (``get``, ``list``) come from the shared informer of the kind, as controller-runtime's
delegating client reads from its cache: no request, but what the informer has seen so far, which
may be older than the server (the reason writes carry a ``resourceVersion`` and can fail with 409).
An informer that does not exist yet is created, started and waited for on first read (as
controller-runtime's informer cache does); ``live=True`` reads from the API server instead (its
``APIReader``). Cached objects are copies: mutating one never changes the cache.

Writes: ``create``, ``update`` (a PUT: fails with 409 when ``metadata.resourceVersion`` is stale),
``patch`` (merge, JSON, strategic merge), ``apply`` (server-side apply with a field manager;
``force`` takes fields other managers own, otherwise such a conflict is an ``ApiError`` 409),
``delete`` (with ``Preconditions`` on uid/resourceVersion and a ``PropagationPolicy``), and
``status()``, a writer for the ``status`` subresource (a status write never changes spec, and
a spec write never changes status, on kinds that have the subresource). Each raises ``ApiError``
for a non-2xx answer; ``is_not_found`` / ``is_conflict`` tell the usual ones apart, and
``ignore_not_found`` is controller-runtime's ``client.IgnoreNotFound``.

Helpers from ``controllerutil``: ``add_finalizer`` / ``remove_finalizer`` / ``contains_finalizer``,
``set_owner_reference`` and ``set_controller_reference`` (one controller owner at most:
``AlreadyOwnedError``). ``EventRecorder`` posts core/v1 Events about an object (below).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Protocol

import orjson

from controllers.clock import Clock, RealClock
from controllers.informers.factory import SharedInformerFactory
from controllers.informers.http_client import ACCEPT_PARTIAL, as_partial_object_metadata
from controllers.informers.listwatch import ApiError, ListOptions
from controllers.informers.shared_informer import SharedInformer
from controllers.labels import Matcher, everything, format_match_labels, parse_label_selector

log = logging.getLogger("ctrlscope.client")

Obj = dict[str, Any]

DEFAULT_CACHE_SYNC_TIMEOUT = 30.0


class ApiClient(Protocol):
    """What the client needs of ``KubernetesClient``."""

    def get_json(self, path: str, query: list[tuple[str, str]] | None = None, timeout: float = ...,
                 headers: dict[str, str] | None = None) -> Obj: ...

    def send_json(self, method: str, path: str, body: Any = None, timeout: float = ...,
                  headers: dict[str, str] | None = None, query: list[tuple[str, str]] | None = None) -> Obj: ...

    def resource_path(self, api_version: str, kind: str, namespace: str | None = None, name: str | None = None,
                      subresource: str | None = None) -> str: ...

    def list_watch(self, api_version: str, kind: str, namespace: str | None = None, *,
                   options: ListOptions | None = None, metadata_only: bool = False) -> Any: ...


class PatchType(StrEnum):
    """A patch's ``Content-Type`` (controller-runtime ``client.Merge``, ``client.Apply``...)."""

    MERGE = "application/merge-patch+json"  # RFC 7386: null deletes a field
    JSON = "application/json-patch+json"  # RFC 6902: a list of operations
    STRATEGIC = "application/strategic-merge-patch+json"  # built-in kinds only (415 for custom resources)
    APPLY = "application/apply-patch+yaml"  # server-side apply (``apply``)


class PropagationPolicy(StrEnum):
    """What a delete does to the object's dependents (garbage collection)."""

    FOREGROUND = "Foreground"  # dependents first, then the owner
    BACKGROUND = "Background"  # the owner now, dependents by the garbage collector
    ORPHAN = "Orphan"  # dependents lose the owner reference and stay


@dataclass(frozen=True)
class Preconditions:
    """A delete happens only if the object still has this ``uid`` / ``resource_version`` (409 otherwise)."""

    uid: str | None = None
    resource_version: str | None = None


class AlreadyOwnedError(ValueError):
    """``set_controller_reference`` on an object another controller already controls."""


def ignore_not_found(exc: BaseException) -> None:
    """Re-raise ``exc`` unless it is a 404 (controller-runtime's ``client.IgnoreNotFound``)."""
    if not (isinstance(exc, ApiError) and exc.is_not_found):
        raise exc


@contextmanager
def not_found_ignored() -> Iterator[None]:
    """``with not_found_ignored(): client.delete(obj)`` -- a 404 inside is not an error."""
    try:
        yield
    except ApiError as exc:
        ignore_not_found(exc)


def _meta(obj: Obj) -> dict[str, Any]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name") and not meta.get("generateName"):
        raise ValueError("the object has no metadata.name")
    return meta


def _gvk(obj: Obj) -> tuple[str, str]:
    api_version, kind = obj.get("apiVersion"), obj.get("kind")
    if not isinstance(api_version, str) or not api_version or not isinstance(kind, str) or not kind:
        raise ValueError("the object says neither its apiVersion nor its kind")
    return api_version, kind


class Client:
    """Reads from the informer cache (``cache``: the Manager's factory), writes to the API server."""

    def __init__(self, api: ApiClient, cache: SharedInformerFactory | None = None, *, field_owner: str = "",
                 cache_sync_timeout: float = DEFAULT_CACHE_SYNC_TIMEOUT) -> None:
        self.api = api
        self.cache = cache
        # The default field manager of every write (``client.WithFieldOwner``): who changed what, in
        # managedFields; a server-side apply needs one.
        self.field_owner = field_owner
        self.cache_sync_timeout = cache_sync_timeout

    # -- reads -----------------------------------------------------------------------------------
    def get(self, api_version: str, kind: str, name: str, namespace: str = "", *, live: bool = False,
            metadata_only: bool = False) -> Obj:
        """The object, from the cache (or the server with ``live``); ``ApiError`` 404 if it is not there."""
        if live or self.cache is None:
            path = self.api.resource_path(api_version, kind, namespace or None, name)
            if not metadata_only:
                return self.api.get_json(path)
            # As the metadata-only informer reads: a server that ignores as= still gives metadata only.
            return as_partial_object_metadata(self.api.get_json(path, headers={"Accept": ACCEPT_PARTIAL}))
        informer = self._informer(api_version, kind, metadata_only)
        obj = informer.store.get_by_key(f"{namespace}/{name}" if namespace else name)
        if obj is None:
            raise ApiError(404, "NotFound", f'{kind.lower()} "{name}" not found (in the informer cache)')
        return _copy(informer, obj)

    def list(self, api_version: str, kind: str, namespace: str = "", *, labels: Mapping[str, str] | None = None,
             label_selector: str = "", live: bool = False, metadata_only: bool = False) -> list[Obj]:
        """Objects of ``kind`` (in ``namespace``, or all), matching ``labels`` (every pair, as
        ``MatchingLabels``) and ``label_selector`` (the API server's syntax); from the cache unless ``live``."""
        selector = ",".join(s for s in (format_match_labels(labels or {}), label_selector) if s)
        if live or self.cache is None:
            # The informer's own LIST (selector on the query, kinds filled in, metadata-only as it reads).
            lw = self.api.list_watch(api_version, kind, namespace or None, options=ListOptions(label_selector=selector),
                                     metadata_only=metadata_only)
            return lw.list(resource_version="").items
        match: Matcher = parse_label_selector(selector) if selector else everything
        informer = self._informer(api_version, kind, metadata_only)
        return [_copy(informer, o) for o in informer.store.list()
                if (not namespace or (o.get("metadata") or {}).get("namespace") == namespace) and match(o)]

    def _informer(self, api_version: str, kind: str, metadata_only: bool) -> SharedInformer:
        assert self.cache is not None
        informer = self.cache.informer_for(api_version, kind, metadata_only=metadata_only)
        if not informer.has_synced():
            self.cache.start()  # starts only what is not running yet
            if not informer.wait_for_sync(self.cache_sync_timeout):
                raise TimeoutError(f"the informer cache for {informer.name} did not sync within "
                                   f"{self.cache_sync_timeout:g} s")
        return informer

    # -- writes ----------------------------------------------------------------------------------
    def _query(self, field_manager: str | None, dry_run: bool, force: bool | None = None) -> list[tuple[str, str]]:
        query = []
        if field_manager or self.field_owner:
            query.append(("fieldManager", field_manager or self.field_owner))
        if dry_run:
            query.append(("dryRun", "All"))
        if force is not None:
            query.append(("force", "true" if force else "false"))
        return query

    def _path(self, obj: Obj, subresource: str | None = None, *, collection: bool = False) -> str:
        api_version, kind = _gvk(obj)
        meta = _meta(obj)
        return self.api.resource_path(api_version, kind, meta.get("namespace") or None,
                                      None if collection else meta["name"], subresource)

    def create(self, obj: Obj, *, field_manager: str | None = None, dry_run: bool = False) -> Obj:
        """POST ``obj`` (``metadata.generateName`` works); returns the object the server stored."""
        return self.api.send_json("POST", self._path(obj, collection=True), obj,
                                  query=self._query(field_manager, dry_run))

    def update(self, obj: Obj, *, field_manager: str | None = None, dry_run: bool = False) -> Obj:
        """PUT ``obj``; with its ``metadata.resourceVersion`` a 409 when the object changed since."""
        return self.api.send_json("PUT", self._path(obj), obj, query=self._query(field_manager, dry_run))

    def patch(self, obj: Obj, patch: Obj | list[Any], patch_type: PatchType = PatchType.MERGE, *,
              field_manager: str | None = None, dry_run: bool = False) -> Obj:
        """PATCH the object ``obj`` names with ``patch`` (a list of operations for ``PatchType.JSON``)."""
        if patch_type is PatchType.APPLY:
            raise ValueError("use apply() for server-side apply")
        if (patch_type is PatchType.JSON) != isinstance(patch, list):
            raise ValueError("a JSON patch is a list of operations; the other patch types are objects")
        return self.api.send_json("PATCH", self._path(obj), patch, headers={"Content-Type": patch_type},
                                  query=self._query(field_manager, dry_run))

    def apply(self, obj: Obj, *, field_manager: str | None = None, force: bool = False, dry_run: bool = False) -> Obj:
        """Server-side apply ``obj``, the fields this manager wants to own (a partial object: what is
        left out and was applied before is removed). Fields another manager owns with another value
        are a 409 conflict unless ``force``."""
        if not (field_manager or self.field_owner):
            raise ValueError("server-side apply needs a field manager (field_manager=, or the client's field_owner)")
        return self.api.send_json("PATCH", self._path(obj), obj, headers={"Content-Type": PatchType.APPLY},
                                  query=self._query(field_manager, dry_run, force))

    def delete(self, obj: Obj, *, preconditions: Preconditions | None = None,
               propagation_policy: PropagationPolicy | None = None, grace_period_seconds: int | None = None,
               dry_run: bool = False) -> Obj:
        """DELETE the object; returns what the server answers (the object while finalizers hold it,
        else a Status). ``ApiError`` 404 if it is gone already (``not_found_ignored``)."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if preconditions is not None:
            body["preconditions"] = {k: v for k, v in (("uid", preconditions.uid),
                                                       ("resourceVersion", preconditions.resource_version)) if v}
        if propagation_policy is not None:
            body["propagationPolicy"] = str(propagation_policy)
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if dry_run:
            body["dryRun"] = ["All"]
        return self.api.send_json("DELETE", self._path(obj), body if len(body) > 2 else None)

    def status(self) -> StatusWriter:
        """The writer of the ``status`` subresource (``client.Status()``)."""
        return StatusWriter(self)


class StatusWriter:
    """Writes an object's ``status`` subresource: the server takes only ``status`` from the body."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def update(self, obj: Obj, *, field_manager: str | None = None, dry_run: bool = False) -> Obj:
        c = self.client
        return c.api.send_json("PUT", c._path(obj, "status"), obj, query=c._query(field_manager, dry_run))

    def patch(self, obj: Obj, patch: Obj | list[Any], patch_type: PatchType = PatchType.MERGE, *,
              field_manager: str | None = None, force: bool | None = None, dry_run: bool = False) -> Obj:
        c = self.client
        if patch_type is PatchType.APPLY and not (field_manager or c.field_owner):
            raise ValueError("server-side apply needs a field manager")
        return c.api.send_json("PATCH", c._path(obj, "status"), patch, headers={"Content-Type": patch_type},
                               query=c._query(field_manager, dry_run, force if patch_type is PatchType.APPLY else None))


def _copy(informer: SharedInformer, obj: Obj) -> Obj:
    # A compact store decodes a fresh dict on every read; a decoded one hands out its own.
    return obj if informer.store.compact else orjson.loads(orjson.dumps(obj))


# -- controllerutil ------------------------------------------------------------------------------
def contains_finalizer(obj: Obj, finalizer: str) -> bool:
    return finalizer in ((obj.get("metadata") or {}).get("finalizers") or [])


def add_finalizer(obj: Obj, finalizer: str) -> bool:
    """Add ``finalizer`` to ``obj`` (in place); True if it changed (then write the object)."""
    meta = obj.setdefault("metadata", {})
    finalizers = meta.setdefault("finalizers", [])
    if finalizer in finalizers:
        return False
    finalizers.append(finalizer)
    return True


def remove_finalizer(obj: Obj, finalizer: str) -> bool:
    """Remove ``finalizer`` from ``obj`` (in place); True if it changed."""
    meta = obj.get("metadata") or {}
    finalizers = meta.get("finalizers") or []
    if finalizer not in finalizers:
        return False
    meta["finalizers"] = [f for f in finalizers if f != finalizer]
    return True


def _owner_ref(owner: Obj, controller: bool) -> dict[str, Any]:
    api_version, kind = _gvk(owner)
    meta = _meta(owner)
    if not meta.get("uid"):
        raise ValueError("the owner has no metadata.uid: it must come from the server (a get or the create's answer)")
    ref = {"apiVersion": api_version, "kind": kind, "name": meta["name"], "uid": meta["uid"]}
    if controller:
        ref.update(controller=True, blockOwnerDeletion=True)
    return ref


def _check_namespaces(owner: Obj, obj: Obj) -> None:
    owner_ns = (owner.get("metadata") or {}).get("namespace") or ""
    obj_ns = (obj.get("metadata") or {}).get("namespace") or ""
    if owner_ns and owner_ns != obj_ns:
        raise ValueError(f"cross-namespace owner references are not allowed: owner in {owner_ns!r}, "
                         f"object in {obj_ns or 'no namespace'!r}")


def set_owner_reference(owner: Obj, obj: Obj) -> None:
    """Make ``owner`` an owner of ``obj`` (in place; replaces an earlier reference to the same owner)."""
    _check_namespaces(owner, obj)
    ref = _owner_ref(owner, controller=False)
    refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
    for i, existing in enumerate(refs):
        if existing.get("uid") == ref["uid"]:
            refs[i] = {**existing, **ref}
            return
    refs.append(ref)


def set_controller_reference(owner: Obj, obj: Obj) -> None:
    """Make ``owner`` the controller of ``obj`` (``controller: true``, ``blockOwnerDeletion``): the
    garbage collector deletes ``obj`` with it, and ``owns()`` watches map ``obj``'s events to it.
    ``AlreadyOwnedError`` if another object controls ``obj``."""
    _check_namespaces(owner, obj)
    ref = _owner_ref(owner, controller=True)
    refs = obj.setdefault("metadata", {}).setdefault("ownerReferences", [])
    for existing in refs:
        if existing.get("controller") and existing.get("uid") != ref["uid"]:
            raise AlreadyOwnedError(f"{existing.get('kind')} {existing.get('name')!r} already controls this object")
    obj["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != ref["uid"]] + [ref]


# -- events --------------------------------------------------------------------------------------
class EventType(StrEnum):
    NORMAL = "Normal"
    WARNING = "Warning"


EVENT_CACHE_SIZE = 4096
"""Distinct events remembered for deduplication (client-go's ``maxLruCacheEntries``)."""


class EventRecorder:
    """Posts core/v1 Events about objects (client-go ``record.EventRecorder``, what
    ``mgr.GetEventRecorderFor(component)`` returns); ``kubectl describe`` and ``kubectl get events``
    show them.

    The same event again (same object, type, reason and message) is not a new Event: the first one's
    ``count`` and ``lastTimestamp`` are patched, as client-go's EventCorrelator does, for the last
    ``EVENT_CACHE_SIZE`` distinct events. Where upstream hands events to a goroutine, this posts on
    the caller's thread, so that from a Reconcile the POST shows as that Reconcile's API write; a
    failed post is logged (``errors``), never raised into the Reconcile: events are best effort.
    """

    def __init__(self, api: ApiClient, component: str, *, clock: Clock | None = None, host: str = "") -> None:
        self.api = api
        self.component = component
        self.host = host
        self.clock: Clock = clock or RealClock()
        self._lock = threading.Lock()
        self._seen: OrderedDict[str, tuple[str, str, int]] = OrderedDict()  # key -> (namespace, name, count)
        self.errors = 0
        self.last_error: str | None = None

    def event(self, obj: Obj, event_type: EventType | str, reason: str, message: str) -> Obj | None:
        """Record an event about ``obj``; returns the stored Event, None if the post failed."""
        api_version, kind = _gvk(obj)
        meta = _meta(obj)
        namespace = meta.get("namespace") or "default"
        now = datetime.fromtimestamp(self.clock.wall(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        key = hashlib.sha1(orjson.dumps([meta.get("uid") or meta["name"], kind, str(event_type), reason, message,
                                         self.component])).hexdigest()
        with self._lock:
            seen = self._seen.get(key)
            if seen is not None:
                self._seen.move_to_end(key)
        try:
            if seen is not None:
                ev_ns, ev_name, count = seen
                stored = self.api.send_json("PATCH", self.api.resource_path("v1", "Event", ev_ns, ev_name),
                                            {"count": count + 1, "lastTimestamp": now},
                                            headers={"Content-Type": PatchType.MERGE})
            else:
                stored = self.api.send_json("POST", self.api.resource_path("v1", "Event", namespace), {
                    "apiVersion": "v1", "kind": "Event",
                    "metadata": {"name": f"{meta['name']}.{int(self.clock.wall() * 1e9):x}", "namespace": namespace},
                    "involvedObject": {"apiVersion": api_version, "kind": kind, "name": meta["name"],
                                       "namespace": meta.get("namespace") or "", "uid": meta.get("uid") or "",
                                       "resourceVersion": meta.get("resourceVersion") or ""},
                    "type": str(event_type), "reason": reason, "message": message,
                    "source": {"component": self.component, **({"host": self.host} if self.host else {})},
                    "reportingComponent": self.component, "reportingInstance": self.host,
                    "firstTimestamp": now, "lastTimestamp": now, "count": 1})
        except (ApiError, ConnectionError, OSError) as exc:
            log.warning("event recorder %s: could not record %s %s on %s %s: %s", self.component, event_type,
                        reason, kind, meta["name"], exc)
            with self._lock:
                self.errors += 1
                self.last_error = f"{exc.__class__.__name__}: {exc}"
                if seen is not None and isinstance(exc, ApiError) and exc.is_not_found:
                    self._seen.pop(key, None)  # the Event expired on the server: post a new one next time
            return None
        with self._lock:
            sm = stored.get("metadata") or {}
            self._seen[key] = (sm.get("namespace", namespace), sm.get("name", ""), int(stored.get("count") or 1))
            while len(self._seen) > EVENT_CACHE_SIZE:
                self._seen.popitem(last=False)
        return stored

    def eventf(self, obj: Obj, event_type: EventType | str, reason: str, fmt: str, *args: Any) -> Obj | None:
        """``event`` with ``fmt % args`` (client-go's ``Eventf``)."""
        return self.event(obj, event_type, reason, fmt % args if args else fmt)
