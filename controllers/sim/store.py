"""The object store: one global resourceVersion, bounded history, and API write semantics.

This plays the part of etcd plus the generic registry of kube-apiserver:

* Every committed change takes the next value of one global counter (etcd's revision), so a
  resourceVersion orders changes across all kinds. A no-op update keeps the object's RV and emits
  nothing, like the API server's no-op detection.
* Each change is appended to a bounded history. A watch from an RV still inside the window replays
  what followed it; a watch from an older RV (or after ``compact()``) gets 410 Expired, which is what
  makes informers relist. ``compacted_rv`` is the oldest RV a watch may resume from.
* Writes apply the registry strategy: uid/creationTimestamp/generation are server-owned, a status
  subresource splits ``.status`` from the rest, a stale ``metadata.resourceVersion`` is a 409, and
  DELETE of an object with finalizers only sets ``deletionTimestamp`` until the finalizers are gone.
* Garbage collection and namespace termination run as *deferred work*: queued by a write and run
  after it commits, before the request returns. Cascading deletes therefore produce their own events,
  after the owner's DELETED, exactly as a client watching would see from a real cluster.

All methods run on the server's event loop thread; the store is not thread-safe by design (one
writer, like etcd's single raft leader), which is also what makes its order total.
"""

from __future__ import annotations

import base64
import bisect
import itertools
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import orjson

from controllers.clock import Clock, RealClock
from controllers.schema import WatchEventType
from controllers.sim import defaults, gojson, managedfields
from controllers.sim.errors import (
    StatusError,
    already_exists,
    bad_request,
    conflict,
    expired,
    internal,
    invalid,
    not_found,
    qualified,
)
from controllers.sim.resources import Registry, ResourceType
from controllers.sim.selectors import Matcher
from controllers.sim.validation import immutable_errors, validate_object
from controllers.sim.watch import Watcher, WatchEvent

Listener = Callable[[WatchEvent], None]
ObjKey = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects

_SPEC_EXCLUDED = frozenset(("metadata", "status", "apiVersion", "kind"))
_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"
_NODE_PORT_RANGE = 2768  # 30000-32767, the API server's default --service-node-port-range


def parse_resource_version(rv: str) -> int:
    """A resourceVersion as the API server's versioner parses it (strconv.ParseUint): ValueError,
    with Go's text, for anything but digits."""
    if not rv.isascii() or not rv.isdigit():
        raise ValueError(f'resourceVersion: Invalid value: "{rv}": strconv.ParseUint: parsing "{rv}": '
                         "invalid syntax")
    return int(rv)


def copy_obj(obj: Any) -> Any:
    """Deep copy through orjson: stored objects are never mutated in place, writers copy first."""
    return orjson.loads(orjson.dumps(obj))


def rfc3339(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ts))


def _spec_part(obj: dict[str, Any], rt: ResourceType) -> dict[str, Any]:
    """What ``metadata.generation`` counts changes of: everything but metadata (and the status of a
    kind with a status subresource). A pod's binding to a node is no change of its spec: the
    binding subresource sets ``spec.nodeName`` without one, and nothing else may change it."""
    part = {k: v for k, v in obj.items() if k not in _SPEC_EXCLUDED or (k == "status" and not rt.status)}
    if rt.key == ("", "pods") and isinstance(part.get("spec"), dict):
        part["spec"] = {k: v for k, v in part["spec"].items() if k != "nodeName"}
    return part


class Bucket:
    """All objects of one resource (storage key), plus a lazily rebuilt sorted key index.

    Invariant: when ``_sorted`` is not None it holds exactly ``objects``' keys in order; adding or
    removing a key drops it (modifications keep it), so paging through 100k pods sorts once.
    """

    __slots__ = ("objects", "_sorted")

    def __init__(self) -> None:
        self.objects: dict[ObjKey, dict[str, Any]] = {}
        self._sorted: list[ObjKey] | None = None

    def put(self, k: ObjKey, obj: dict[str, Any]) -> None:
        if k not in self.objects:
            self._sorted = None
        self.objects[k] = obj

    def remove(self, k: ObjKey) -> None:
        if self.objects.pop(k, None) is not None:
            self._sorted = None

    def sorted_keys(self) -> list[ObjKey]:
        if self._sorted is None:
            self._sorted = sorted(self.objects)
        return self._sorted


class Store:
    """Objects of every kind, the global resourceVersion, history and open watchers."""

    def __init__(self, registry: Registry, *, clock: Clock | None = None, history_limit: int = 50_000,
                 watch_backlog: int = 200_000) -> None:
        self.registry = registry
        self.clock = clock or RealClock()
        self.history_limit = history_limit
        self.watch_backlog = watch_backlog
        self.rv = 1
        # Watches from an RV below this have lost events to the bounded history: 410 Expired.
        self.compacted_rv = 1
        self.buckets: dict[tuple[str, str], Bucket] = {}
        self.history: deque[WatchEvent] = deque()
        self.watchers: dict[tuple[str, str], set[Watcher]] = {}
        self.listeners: list[Listener] = []
        # owner uid → dependents, for garbage collection without scanning every object.
        self.dependents: dict[str, set[tuple[tuple[str, str], ObjKey]]] = {}
        self._deferred: deque[Callable[[], None]] = deque()
        # Garbage-collector hooks: called when an object starts terminating / is gone for good.
        self._terminating_hooks: list[Callable[[ResourceType, dict[str, Any]], None]] = []
        self._removed_hooks: list[Callable[[ResourceType, dict[str, Any]], None]] = []
        self._depth = 0
        self._ip_counter = itertools.count(10)
        self._node_port_counter = itertools.count(1)

    # ---- reads -------------------------------------------------------------------------------

    def bucket(self, key: tuple[str, str]) -> Bucket:
        b = self.buckets.get(key)
        if b is None:
            b = self.buckets[key] = Bucket()
        return b

    def find(self, key: tuple[str, str], ns: str, name: str) -> dict[str, Any] | None:
        b = self.buckets.get(key)
        return b.objects.get((ns, name)) if b else None

    def get(self, rt: ResourceType, ns: str, name: str) -> dict[str, Any]:
        obj = self.find(rt.key, ns if rt.namespaced else "", name)
        if obj is None:
            raise not_found(rt.plural, rt.group, name)
        return obj

    def list(self, rt: ResourceType, ns: str | None, match: Matcher | None = None, *, limit: int = 0,
             continue_token: str | None = None, resource_version: str = "",
             ) -> tuple[list[dict[str, Any]], int, str | None, int | None]:
        """Objects in key order: (items, list RV, continue token or None, remainingItemCount).

        remainingItemCount is None with a selector (``match``): like etcd's store, the count is only
        known without a predicate to apply to the rest.
        """
        list_rv = self.rv
        start: ObjKey | None = None
        if continue_token:
            list_rv, start = self._decode_continue(continue_token)
            if resource_version not in ("", "0"):
                raise bad_request("specifying resource version is not allowed when using continue")
            if list_rv < 0:
                list_rv = self.rv  # the token an expired one was answered with: go on at the latest
            elif list_rv < self.compacted_rv:
                # The revision this list was read at is compacted away: no consistent continuation.
                # Like the API server, offer a token that goes on at the latest revision instead.
                err = expired("The provided continue parameter is too old to display a consistent list result. "
                              "You can start a new list without the continue parameter, or use the continue "
                              "token in this response to retrieve the remainder of the results. Continuing "
                              "with the provided token results in an inconsistent list - objects that were "
                              "created, modified, or deleted between the time the first chunk was returned "
                              "and now may show up in the list.")
                err.list_continue = self._encode_continue(-1, start)
                raise err
        b = self.buckets.get(rt.key)
        if b is None:
            return [], list_rv, None, None
        keys = b.sorted_keys()
        lo, hi = 0, len(keys)
        if ns:
            lo = bisect.bisect_left(keys, (ns, ""))
            hi = bisect.bisect_left(keys, (ns + "\x00", ""))
        if start is not None:
            lo = max(lo, bisect.bisect_right(keys, start))
        objects = b.objects
        items: list[dict[str, Any]] = []
        i = lo
        while i < hi:
            obj = objects[keys[i]]
            i += 1
            if match is None or match(obj):
                items.append(obj)
                if limit and len(items) >= limit:
                    break
        if limit and len(items) >= limit and i < hi:
            rest = keys[i:hi]
            if match is None:
                last = items[-1]["metadata"]
                token = self._encode_continue(list_rv, (last.get("namespace", ""), last["name"]))
                return items, list_rv, token, len(rest)
            if any(match(objects[k]) for k in rest):
                last = items[-1]["metadata"]
                token = self._encode_continue(list_rv, (last.get("namespace", ""), last["name"]))
                return items, list_rv, token, None
        return items, list_rv, None, None

    def _encode_continue(self, rv: int, start: ObjKey) -> str:
        raw = orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(start)})
        return base64.urlsafe_b64encode(raw).decode()

    def _decode_continue(self, token: str) -> tuple[int, ObjKey]:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
            rv, start = int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
        except Exception as e:
            raise bad_request(f"invalid continue token: continue key is not valid: {e}") from None
        return rv, start

    # ---- write helpers -----------------------------------------------------------------------

    def _next_rv(self) -> int:
        self.rv += 1
        return self.rv

    def _commit(self, rt: ResourceType, type: WatchEventType, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj["metadata"]
        k = (meta.get("namespace", ""), meta["name"])
        bucket = self.bucket(rt.key)
        if type == WatchEventType.DELETED:
            bucket.remove(k)
            self._index_owners(rt.key, k, old, None)
        else:
            bucket.put(k, obj)
            self._index_owners(rt.key, k, old, obj)
        ev = WatchEvent(int(meta["resourceVersion"]), type, rt.key, obj, old)
        self.history.append(ev)
        if len(self.history) > self.history_limit:
            dropped = self.history.popleft()
            self.compacted_rv = dropped.rv
        for w in self.watchers.get(rt.key, ()):
            w.offer(ev)
        for listener in self.listeners:
            listener(ev)

    def _index_owners(self, key: tuple[str, str], k: ObjKey, old: dict[str, Any] | None,
                      new: dict[str, Any] | None) -> None:
        old_refs = {r["uid"] for r in (old or {}).get("metadata", {}).get("ownerReferences") or ()}
        new_refs = {r["uid"] for r in (new or {}).get("metadata", {}).get("ownerReferences") or ()}
        for uid in old_refs - new_refs:
            deps = self.dependents.get(uid)
            if deps is not None:
                deps.discard((key, k))
                if not deps:
                    del self.dependents[uid]
        for uid in new_refs - old_refs:
            self.dependents.setdefault(uid, set()).add((key, k))

    def defer(self, work: Callable[[], None]) -> None:
        """Run ``work`` after the current write commits (garbage collection, namespace cleanup)."""
        self._deferred.append(work)
        if self._depth == 0:
            self._run_deferred()

    def _run_deferred(self) -> None:
        self._depth += 1
        try:
            while self._deferred:
                self._deferred.popleft()()
        finally:
            self._depth -= 1

    def _write(self, fn: Callable[[], Any]) -> Any:
        self._depth += 1
        try:
            result = fn()
        finally:
            self._depth -= 1
        if self._depth == 0:
            self._run_deferred()
        return result

    @staticmethod
    def _random_suffix() -> str:
        """Five characters of the alphabet the API server's random names use (utilrand.String)."""
        rng = uuid.uuid4().int
        return "".join(_NAME_CHARS[(rng >> (5 * i)) % len(_NAME_CHARS)] for i in range(5))

    def _generate_name(self, prefix: str, rt: ResourceType, ns: str) -> str:
        for _ in range(8):
            name = (prefix[:58] if len(prefix) > 58 else prefix) + self._random_suffix()
            if self.find(rt.key, ns, name) is None:
                return name
        raise StatusError(409, f"unable to generate a unique name for {prefix}", reason="AlreadyExists")

    def _check_namespace(self, ns: str) -> None:
        ns_obj = self.find(("", "namespaces"), "", ns)
        if ns_obj is None:
            raise not_found("namespaces", "", ns)
        if ns_obj["metadata"].get("deletionTimestamp"):
            raise StatusError(403, f"unable to create new content in namespace {ns} because it is being "
                                   "terminated", reason="Forbidden", name=ns, kind="namespaces")

    def _storage_version(self, rt: ResourceType) -> str:
        storage = self.registry.storage_type(rt.key)
        return (storage or rt).api_version

    def _allocate_ip(self) -> str:
        n = next(self._ip_counter)
        return f"10.96.{(n >> 8) & 255}.{n & 255}"

    def _kept_cluster_ip(self, new: dict[str, Any], current: dict[str, Any]) -> str:
        """An updated service keeps its cluster IP; one that stops being ExternalName gets one."""
        held = (current.get("spec") or {}).get("clusterIP")
        if held:
            return str(held)
        spec = new.get("spec") if isinstance(new.get("spec"), dict) else {}
        return "" if spec.get("type") == "ExternalName" or spec.get("clusterIP") else self._allocate_ip()

    def _allocate_node_ports(self, obj: dict[str, Any], current: dict[str, Any] | None) -> None:
        """Give NodePort/LoadBalancer ports a node port (30000-32767), keeping the ones already held.

        Like the API server's allocator this is not defaulting: an update that omits a port's
        ``nodePort`` keeps the one the same port and protocol had.
        """
        spec = obj.get("spec")
        if not isinstance(spec, dict) or spec.get("type") not in ("NodePort", "LoadBalancer"):
            return
        held = {(p.get("port"), p.get("protocol")): p.get("nodePort")
                for p in ((current or {}).get("spec") or {}).get("ports") or [] if isinstance(p, dict)}
        listed = spec.get("ports")
        ports = [p for p in listed if isinstance(p, dict)] if isinstance(listed, list) else []
        used = {p.get("nodePort") for svc in self.bucket(("", "services")).objects.values()
                for p in (svc.get("spec") or {}).get("ports") or [] if isinstance(p, dict)}
        used.update(p.get("nodePort") for p in ports)
        for port in ports:
            if not port.get("nodePort"):
                port["nodePort"] = held.get((port.get("port"), port.get("protocol"))) or self._free_node_port(used)
                used.add(port["nodePort"])

    def _free_node_port(self, used: set[Any]) -> int:
        for _ in range(_NODE_PORT_RANGE):
            # A stride coprime with the range's size visits every port before repeating one.
            candidate = 30000 + next(self._node_port_counter) * 1009 % _NODE_PORT_RANGE
            if candidate not in used:
                return candidate
        raise StatusError(422, "Service is invalid: spec.ports: Internal error: range of valid node ports "
                               "(30000-32767) is full", reason="Invalid")

    # ---- writes ------------------------------------------------------------------------------

    def create(self, rt: ResourceType, ns: str | None, obj: dict[str, Any], *, manager: str = "",
               managed: list[dict[str, Any]] | None = None, dry_run: bool = False) -> dict[str, Any]:
        """Store a new object (POST). ``obj`` is owned by the store from here on.

        With ``dry_run`` every check and default runs but nothing is committed (``dryRun=All``).
        """
        return self._write(lambda: self._create(rt, ns, obj, manager, managed, dry_run))

    def _create(self, rt: ResourceType, ns: str | None, obj: dict[str, Any], manager: str,
                managed: list[dict[str, Any]] | None, dry_run: bool = False) -> dict[str, Any]:
        if rt.builtin:
            obj = gojson.encode(rt.api_version, rt.kind, obj)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        if rt.namespaced:
            ns = ns or meta.get("namespace") or "default"
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
            ns = ""
        if not meta.get("name") and isinstance(meta.get("generateName"), str) and meta["generateName"]:
            meta["name"] = self._generate_name(meta["generateName"], rt, ns)
        # Stored in the first served version, like etcd's storage version; reads convert back.
        obj["apiVersion"] = self._storage_version(rt)
        obj["kind"] = rt.kind
        defaults.apply_defaults(rt, obj)
        now = rfc3339(self.clock.wall())
        # Ownership is settled before the registry and admission add their fields: those are nobody's.
        managed_fields = managed if managed is not None else managedfields.track_update(
            None, obj, rt=rt, manager=manager, now=now, zero=gojson.zero(rt.api_version, rt.kind))
        defaults.prepare_for_create(rt, obj, self._random_suffix())
        if rt.plural == "services":
            defaults.allocate_service_ips(obj, self._allocate_ip())
            self._allocate_node_ports(obj, None)
        validate_object(rt, obj)
        if rt.namespaced:
            self._check_namespace(ns)
        sent_rv = meta.get("resourceVersion")
        if not dry_run and isinstance(sent_rv, str) and sent_rv.isdigit() and int(sent_rv):
            # etcd's store refuses it, past validation and before it looks for the key; a value it
            # cannot parse as a number is ignored (and dropped) instead.
            raise internal("resourceVersion should not be set on objects to be created")
        if self.find(rt.key, ns, meta["name"]) is not None:
            raise already_exists(rt.plural, rt.group, meta["name"])
        for field in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds"):
            meta.pop(field, None)
        if dry_run and sent_rv:
            meta["resourceVersion"] = sent_rv  # a dry run answers the object as it was sent
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = rfc3339(self.clock.wall())
        if rt.generation:
            meta["generation"] = 1
        else:
            meta.pop("generation", None)
        if rt.status:
            status = defaults.initial_status(rt, obj)
            if status is None:
                obj.pop("status", None)
            else:
                obj["status"] = status
        if managed_fields:
            meta["managedFields"] = managed_fields
        else:
            meta.pop("managedFields", None)  # omitempty
        if dry_run:
            return obj
        meta["resourceVersion"] = str(self._next_rv())
        self._commit(rt, WatchEventType.ADDED, obj, None)
        return obj

    def update(self, rt: ResourceType, ns: str | None, name: str, obj: dict[str, Any], *,
               subresource: str | None = None, manager: str = "",
               managed: list[dict[str, Any]] | None = None, create_if_missing: bool = False,
               dry_run: bool = False, tracked_as: str | None = None) -> tuple[dict[str, Any], bool]:
        """Replace an object (PUT, and every patch after it is computed): (stored object, created).

        ``tracked_as`` names the subresource a write of the main object is owned through in
        managedFields (``scale``: a /scale write changes the object's replicas)."""
        return self._write(lambda: self._update(rt, ns, name, obj, subresource, manager, managed,
                                                create_if_missing, dry_run, tracked_as))

    def _update(self, rt: ResourceType, ns: str | None, name: str, obj: dict[str, Any], subresource: str | None,
                manager: str, managed: list[dict[str, Any]] | None, create_if_missing: bool,
                dry_run: bool = False, tracked_as: str | None = None) -> tuple[dict[str, Any], bool]:
        ns = (ns or "default") if rt.namespaced else ""
        current = self.find(rt.key, ns, name)
        if current is None:
            if create_if_missing and subresource is None:
                obj.setdefault("metadata", {})["name"] = name
                obj["metadata"].pop("resourceVersion", None)  # an update's RV, not one sent to create with
                return self._create(rt, ns, obj, manager, managed, dry_run), True
            raise not_found(rt.plural, rt.group, name)
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            meta = obj["metadata"] = {}
        given_rv = meta.get("resourceVersion")
        # A client that rewrites managedFields itself (kubectl's client-side → server-side apply
        # migration does) is taken at its word, as the API server's field manager does.
        explicit_managed = managed is None and subresource is None and managedfields.is_explicit(
            meta.get("managedFields"), current["metadata"].get("managedFields"))
        cur_meta = current["metadata"]
        given_uid = meta.get("uid")
        if given_uid not in (None, "") and given_uid != cur_meta.get("uid"):
            # The body's uid is a storage precondition, checked first; etcd's store words the failure.
            key = "/".join(("/registry", *((rt.group,) if not rt.builtin else ()), rt.plural, *((ns,) if ns else ()),
                            name))
            raise StatusError(409, f'Operation cannot be fulfilled on {qualified(rt.plural, rt.group)} "{name}": '
                                   f"StorageError: invalid object, Code: 4, Key: {key}, ResourceVersion: 0, "
                                   f"AdditionalErrorMsg: Precondition failed: UID in precondition: {given_uid}, "
                                   f"UID in object meta: {cur_meta.get('uid')}", reason="Conflict", name=name,
                              group=rt.group, kind=rt.plural)
        if given_rv not in (None, ""):
            if not (isinstance(given_rv, str) and given_rv.isascii() and given_rv.isdigit()):
                # The registry's strconv.ParseUint error, passed on as it is: a 500 without a reason.
                raise internal(f'strconv.ParseUint: parsing "{given_rv}": invalid syntax')
            if given_rv != cur_meta["resourceVersion"]:
                raise conflict(rt.plural, rt.group, name)
        finalizers = meta.get("finalizers")
        if cur_meta.get("deletionTimestamp") and subresource is None and isinstance(finalizers, list) \
                and all(isinstance(f, str) for f in finalizers):
            held = set(cur_meta.get("finalizers") or [])
            added = [f for f in finalizers if f not in held]
            if added:
                shown = ", ".join(f'"{f}"' for f in added)  # Go's %#v of a []string
                raise invalid(rt.kind, rt.group, name, [(
                    "metadata.finalizers", "Forbidden: no new finalizers can be added if the object is being "
                                           f"deleted, found new finalizers []string{{{shown}}}")])
        if subresource == "status":
            new = copy_obj(current)
            if rt.builtin:
                new["status"] = gojson.encode_field(rt.api_version, rt.kind, "status", obj.get("status"))
            elif "status" in obj:
                new["status"] = obj["status"]
            else:
                new.pop("status", None)
            new_meta = new["metadata"]
        else:
            new = gojson.encode(rt.api_version, rt.kind, obj) if rt.builtin else obj
            new_meta = new.get("metadata")
            if not isinstance(new_meta, dict):
                new_meta = new["metadata"] = {}
            new["apiVersion"] = self._storage_version(rt)
            new["kind"] = rt.kind
            if rt.status:
                if "status" in current:
                    new["status"] = current["status"]
                else:
                    new.pop("status", None)
            defaults.apply_defaults(rt, new)
            if rt.plural == "services":
                defaults.allocate_service_ips(new, self._kept_cluster_ip(new, current))
                self._allocate_node_ports(new, current)
            # Server-owned metadata survives whatever the client sent.
            for field in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                          "generation"):
                if field in cur_meta:
                    new_meta[field] = cur_meta[field]
                else:
                    new_meta.pop(field, None)
            new_meta["name"] = cur_meta["name"]
            if rt.namespaced:
                new_meta["namespace"] = ns
            else:
                new_meta.pop("namespace", None)
            validate_object(rt, new)
            immutable = immutable_errors(rt, new, current)
            if immutable:
                raise invalid(rt.kind, rt.group, name, immutable)
            if rt.plural == "services":
                spec = new.get("spec") or {}
                old_ip = (current.get("spec") or {}).get("clusterIP")
                if old_ip and spec.get("clusterIP") not in (None, "", old_ip):
                    raise StatusError(422, f'Service "{name}" is invalid: spec.clusterIP: Invalid value: '
                                           f'"{spec.get("clusterIP")}": field is immutable',
                                      reason="Invalid", name=name, kind="Service")
        if rt.generation and subresource is None:
            if _spec_part(new, rt) != _spec_part(current, rt):
                new_meta["generation"] = int(cur_meta.get("generation", 1)) + 1
        new_meta["resourceVersion"] = cur_meta["resourceVersion"]
        if managed is not None:
            new_meta["managedFields"] = managed
        elif explicit_managed:
            new_meta["managedFields"] = managedfields.explicit_base(obj["metadata"]["managedFields"])
        else:
            new_meta["managedFields"] = cur_meta.get("managedFields") or []
        if not explicit_managed and _same_ignoring_managed(new, current):
            return current, False
        if managed is None:
            new_meta["managedFields"] = managedfields.track_update(
                current, new, rt=rt, manager=manager, now=rfc3339(self.clock.wall()),
                zero=gojson.zero(rt.api_version, rt.kind), base=new_meta["managedFields"],
                subresource=tracked_as or subresource)
        if not new_meta["managedFields"]:
            del new_meta["managedFields"]  # omitempty
        if dry_run:
            return new, False
        new_meta["resourceVersion"] = str(self._next_rv())
        if new_meta.get("deletionTimestamp") and not new_meta.get("finalizers") and self._finalizable(rt, new):
            self._commit(rt, WatchEventType.DELETED, new, current)
            self._after_delete(rt, new)
            return new, False
        self._commit(rt, WatchEventType.MODIFIED, new, current)
        return new, False

    def _finalizable(self, rt: ResourceType, obj: dict[str, Any]) -> bool:
        """Namespaces also wait for their ``spec.finalizers`` (content removal) before they go."""
        if rt.plural == "namespaces" and rt.group == "":
            return not (obj.get("spec") or {}).get("finalizers")
        return True

    def delete(self, rt: ResourceType, ns: str | None, name: str, *, propagation: str | None = None,
               precondition_rv: str | None = None, precondition_uid: str | None = None, dry_run: bool = False,
               grace_period: int | None = None) -> tuple[dict[str, Any], bool]:
        """DELETE: (object, removed now). With finalizers only ``deletionTimestamp`` is set.

        A pod bound to a node is deleted gracefully, as by a real API server: it gets a
        ``deletionTimestamp`` ``grace_period`` seconds ahead (default: its
        ``terminationGracePeriodSeconds``) and stays ``Terminating`` until the kubelet stops it
        and deletes it with grace period 0.
        """
        return self._write(lambda: self._delete(rt, ns, name, propagation, precondition_rv, precondition_uid,
                                                dry_run, grace_period))

    def _delete(self, rt: ResourceType, ns: str | None, name: str, propagation: str | None,
                precondition_rv: str | None, precondition_uid: str | None, dry_run: bool = False,
                grace_period: int | None = None) -> tuple[dict[str, Any], bool]:
        ns = (ns or "default") if rt.namespaced else ""
        current = self.find(rt.key, ns, name)
        if current is None:
            raise not_found(rt.plural, rt.group, name)
        meta = current["metadata"]
        if precondition_uid and precondition_uid != meta.get("uid"):
            raise _precondition_failed(rt, name, f"the UID in the precondition ({precondition_uid}) does not match "
                                                 f"the UID in record ({meta.get('uid')}). The object might have "
                                                 "been deleted and then recreated")
        if precondition_rv and precondition_rv != meta.get("resourceVersion"):
            raise _precondition_failed(rt, name, f"the ResourceVersion in the precondition ({precondition_rv}) does "
                                                 f"not match the ResourceVersion in record "
                                                 f"({meta.get('resourceVersion')}). The object might have been "
                                                 "modified")
        finalizers = list(meta.get("finalizers") or [])
        if propagation == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        if propagation == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")
        namespace_pending = rt.plural == "namespaces" and rt.group == ""
        grace = 0
        if rt.key == ("", "pods"):
            spec = current.get("spec") if isinstance(current.get("spec"), dict) else {}
            default_grace = spec.get("terminationGracePeriodSeconds", 30)
            grace = grace_period if grace_period is not None else default_grace
            if not isinstance(grace, int) or isinstance(grace, bool):
                grace = 30
            elif grace < 0:
                grace = 1  # the pod strategy's minimum: a negative period is not an immediate delete
            if not spec.get("nodeName"):
                grace = 0  # never scheduled: nothing to stop
        if meta.get("deletionTimestamp"):
            # Only the kubelet's final grace-0 delete of a terminated pod goes further.
            if not (rt.key == ("", "pods") and grace == 0 and not meta.get("finalizers")):
                return current, False
        elif finalizers or namespace_pending or grace > 0:
            if dry_run:
                return current, False
            new = copy_obj(current)
            new_meta = new["metadata"]
            new_meta["deletionTimestamp"] = rfc3339(self.clock.wall() + grace)
            new_meta["deletionGracePeriodSeconds"] = grace
            if new_meta.get("generation"):
                # Marking an object as deleting is a change of its intent (rest.BeforeDelete).
                new_meta["generation"] = int(new_meta["generation"]) + 1
            if finalizers:
                new_meta["finalizers"] = finalizers
            if namespace_pending:
                new.setdefault("status", {})["phase"] = "Terminating"
            new_meta["resourceVersion"] = str(self._next_rv())
            self._commit(rt, WatchEventType.MODIFIED, new, current)
            for hook in self._terminating_hooks:
                hook(rt, new)
            return new, False
        if dry_run:
            return current, True  # what would be removed: the API answers it as if it were
        new = copy_obj(current)
        new["metadata"]["resourceVersion"] = str(self._next_rv())
        self._commit(rt, WatchEventType.DELETED, new, current)
        self._after_delete(rt, new)
        return new, True

    def add_delete_hooks(self, *, terminating: Callable[[ResourceType, dict[str, Any]], None],
                         removed: Callable[[ResourceType, dict[str, Any]], None]) -> None:
        self._terminating_hooks.append(terminating)
        self._removed_hooks.append(removed)

    def _after_delete(self, rt: ResourceType, obj: dict[str, Any]) -> None:
        for hook in self._removed_hooks:
            hook(rt, obj)

    # ---- watch -------------------------------------------------------------------------------

    def watch(self, rt: ResourceType, ns: str | None, *, resource_version: str | None, label_match: Matcher,
              field_match: Matcher, filtered: bool, send_initial_events: bool | None = None,
              raw_lines: bool = False) -> Watcher:
        """Open a watcher primed with the events the client is owed; raises 410 for a stale RV."""
        w = Watcher(key=rt.key, namespace=ns or None, label_match=label_match, field_match=field_match,
                    filtered=filtered, max_backlog=self.watch_backlog)
        w.raw_lines = raw_lines
        from_any = resource_version in (None, "", "0")
        initial = send_initial_events if send_initial_events is not None else from_any
        w.initial_events = initial
        if initial:
            items, _, _, _ = self.list(rt, ns, w.matches if filtered else None)
            for obj in items:
                w.pending.append((WatchEventType.ADDED, None, obj))
            w.start_rv = self.rv
        elif from_any:
            w.start_rv = self.rv  # sendInitialEvents=false from "any" revision: from now on
        else:
            try:
                since = parse_resource_version(resource_version or "")
            except ValueError as e:
                # The watch cache's versioner fails with a plain error, which the API server turns
                # into a 500 without a reason.
                raise StatusError(500, str(e), reason="") from None
            w.start_rv = since
            if since < self.compacted_rv:
                raise expired(f"too old resource version: {since} ({self.compacted_rv})")
            if since > self.rv:
                # A real API server waits briefly for its cache to catch up, then gives up like this.
                raise StatusError(504, f"Too large resource version: {since}, current: {self.rv}",
                                  reason="Timeout", causes=[{"reason": "ResourceVersionTooLarge",
                                                             "message": "Too large resource version"}])
            if self.history and since < self.history[-1].rv:
                start = self._history_index_after(since)
                for i in range(start, len(self.history)):
                    ev = self.history[i]
                    if ev.key == rt.key:
                        w.offer(ev)
        self.watchers.setdefault(rt.key, set()).add(w)
        if w.pending:
            w.wake.set()
        return w

    def _history_index_after(self, rv: int) -> int:
        lo, hi = 0, len(self.history)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.history[mid].rv <= rv:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def unwatch(self, w: Watcher) -> None:
        ws = self.watchers.get(w.key)
        if ws is not None:
            ws.discard(w)

    def all_watchers(self) -> list[Watcher]:
        return [w for ws in self.watchers.values() for w in ws]

    def compact(self) -> int:
        """Forget all history: every watch from an RV before now gets 410 (etcd compaction)."""
        self.history.clear()
        self.compacted_rv = self.rv
        return self.rv

    # ---- persistence -------------------------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        return {
            "resourceVersion": self.rv,
            "objects": [obj for b in self.buckets.values() for obj in b.objects.values()],
        }

    def load(self, state: dict[str, Any]) -> None:
        """Restore objects saved by ``dump``; history starts empty, so older RVs are compacted."""
        objects = state.get("objects") or []
        # CRDs first: their custom resources can only be placed once the CRD's kinds are served.
        crd_kind = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        objects = sorted(objects, key=lambda o: (o.get("apiVersion"), o.get("kind")) != crd_kind)
        for obj in objects:
            api_version = obj.get("apiVersion", "")
            group = api_version.rpartition("/")[0]
            rt = next((t for t in self.registry.by_gvr.values() if t.group == group and t.kind == obj.get("kind")),
                      None)
            if rt is None:
                continue
            meta = obj["metadata"]
            k = (meta.get("namespace", ""), meta["name"])
            self.bucket(rt.key).put(k, obj)
            self._index_owners(rt.key, k, None, obj)
            if rt.plural == "customresourcedefinitions":
                self.registry.register_crd(obj)
        self.rv = max(self.rv, int(state.get("resourceVersion", 1)))
        self.compacted_rv = self.rv


def _precondition_failed(rt: ResourceType, name: str, why: str) -> StatusError:
    """A DELETE whose preconditions do not hold. Checked before storage (rest.BeforeDelete), the
    conflict names the kind, not the resource: ``Operation cannot be fulfilled on ConfigMap "a"``."""
    return StatusError(409, f'Operation cannot be fulfilled on {qualified(rt.kind, rt.group)} "{name}": {why}',
                       reason="Conflict", name=name, group=rt.group, kind=rt.kind)


def _same_ignoring_managed(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """No-op detection: equal apart from managedFields timestamps, which alone are no change."""
    if a.keys() != b.keys():
        return False
    for k, v in a.items():
        if k == "metadata":
            ma, mb = v, b[k]
            if {x: y for x, y in ma.items() if x != "managedFields"} != {
                    x: y for x, y in mb.items() if x != "managedFields"}:
                return False
        elif v != b[k]:
            return False
    return True
