"""The Kubernetes REST API over aiohttp: routing, verbs, watch streaming, subresources.

One catch-all route parses ``/api/v1/...`` and ``/apis/{group}/{version}/...`` into a
``ResourceRequest`` (type, namespace, name, subresource), asks the fault injector whether to delay
or fail it, and dispatches on the HTTP method:

* GET → get, list (optionally paged or as a ``Table``) or, with ``watch=true`` (or the legacy
  ``/watch/`` prefix), a chunked stream of JSON lines (protobuf frames for Go clients) fed by a
  ``Watcher``; POST → create; PUT → update; PATCH → one of four patch types computed against the live
  object, then an update; DELETE → delete or deletecollection.
* Handlers answer JSON; a request that negotiated YAML or protobuf (``negotiation``) has the finished
  response rewritten once on its way out (``output``).
* ``/status`` writes touch only ``.status``; ``/scale`` translates to and from ``autoscaling/v1``
  Scale; ``pods/{name}/log`` reads the simulated kubelet's log buffer.

``dryRun=All`` runs every check and default without committing. A watch stream writes whatever
events piled up since its last write in one chunk, after waiting ``flush_delay`` (2 ms by default)
so that under load one wake-up and one socket write carry many events.

Handlers never mutate stored objects: they compute the new object and hand it to the ``Store``,
which owns RVs, generation, finalizers and history. Every failure is a ``StatusError`` rendered as
a ``Status`` body; anything else would be a bug and is reported as a 500 Status, never a crash.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from aiohttp import web

from controllers.schema import WatchEventType
from controllers.sim import (
    codec,
    fieldvalidation,
    gojson,
    health,
    output,
    protobuf,
    protoenc,
    reviews,
    structural,
    typed,
)
from controllers.sim.apply import server_side_apply
from controllers.sim.discovery import AGGREGATED_CONTENT_TYPE, Discovery
from controllers.sim.errors import StatusError, bad_request, internal, invalid, qualified
from controllers.sim.negotiation import (
    COLLECTION_ROUTE,
    ITEM_ROUTE,
    SERIALIZERS,
    Media,
    Representation,
    negotiate_output,
    not_acceptable,
    parse_accept,
)
from controllers.sim.patch import json_patch, merge_patch
from controllers.sim.resources import ResourceType
from controllers.sim.selectors import parse_field_selector, parse_label_selector, selector_from_label_selector
from controllers.sim.store import Store, copy_obj, parse_resource_version, rfc3339
from controllers.sim.strategic import StrategicMerge
from controllers.sim.tables import jsonpath_value, partial_object_metadata, table
from controllers.sim.validation import check_apply_type, check_name_match, check_namespace_match, check_type, too_large
from controllers.sim.watch import CloseReason, Watcher, WatchEvent

if TYPE_CHECKING:
    from controllers.faults.injector import FaultInjector
    from controllers.faults.request_counts import RequestCounter
    from controllers.sim.kubelet import Kubelet

log = logging.getLogger(__name__)

# Request keys: the serializer the response is written with, and whether its objects are as stored.
_MEDIA = web.RequestKey("media", Media)
_STORED = web.RequestKey("stored", bool)

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass
class ResourceRequest:
    """A parsed resource URL."""

    rt: ResourceType
    namespace: str | None
    name: str | None
    sub: str | None
    # What the response carries, negotiated from Accept before any work is done.
    representation: Representation = Representation.OBJECT
    # Reached through the deprecated /watch/ path prefix: a watch whatever the query says.
    legacy_watch: bool = False
    # The serializer the response is written with (negotiated with the representation).
    media: Media = Media.JSON


@dataclass(frozen=True)
class Access:
    """One resource request as an RBAC authorizer sees it: verb, API group, resource (``pods``) and
    subresource (``status``, or ""), the namespace ("" for a cluster-scoped resource or a request
    across all namespaces) and the name ("" for a collection, and for a create, whose name RBAC's
    ``resourceNames`` cannot restrict)."""

    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


def _not_found_path() -> StatusError:
    return StatusError(404, "the server could not find the requested resource", reason="NotFound", generic=True)


def _page_not_found() -> web.Response:
    """What kube-apiserver's mux answers for a path no API handler claims (outside /api and /apis,
    or under a group it does not serve): Go's http.NotFound, plain text, not a Status."""
    return web.Response(status=404, text="404 page not found\n", charset="utf-8", content_type="text/plain",
                        headers={"X-Content-Type-Options": "nosniff"})


def _method_not_allowed() -> StatusError:
    return StatusError(405, "the server does not allow this method on the requested resource",
                       reason="MethodNotAllowed", generic=True)


def _go_type(rt: ResourceType, list_: bool) -> str:
    """The Go type the API server names in its conversion errors (``*v1.Pod``, ``*v1.PodList``)."""
    if not rt.builtin:
        return "*unstructured.UnstructuredList" if list_ else "*unstructured.Unstructured"
    return f"*{rt.version}.{rt.kind}{'List' if list_ else ''}"


def _a_list(rt: ResourceType) -> StatusError:
    return StatusError(406, f"you requested PartialObjectMetadata, but the requested object is a list "
                            f"({_go_type(rt, True)})", reason="NotAcceptable")


def _not_a_list(rt: ResourceType) -> StatusError:
    return StatusError(406, f"you requested PartialObjectMetadataList, but the requested object is not a list "
                            f"({_go_type(rt, False)})", reason="NotAcceptable")


def _bool(value: str | None) -> bool:
    return (value or "").lower() in ("true", "1")


def _int(request: web.Request, name: str) -> int:
    raw = request.query.get(name)
    if raw in (None, ""):
        return 0
    try:
        value = int(raw)
    except ValueError:
        # The query parameter's conversion to int64 fails before anything else is looked at.
        raise bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None
    if value < 0:
        raise bad_request(f"{name} must be non-negative")
    return value


def _list_options_invalid(errors: list[tuple[str, str, str]]) -> StatusError:
    """422 for ListOptions that apimachinery's ValidateListOptions refuses: (reason, field, detail)."""
    texts = [f"{field}: {detail}" for _, field, detail in errors]
    text = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return StatusError(422, f'ListOptions.meta.k8s.io "" is invalid: {text}', reason="Invalid",
                       group="meta.k8s.io", kind="ListOptions",
                       causes=[{"reason": reason, "message": detail, "field": field}
                               for reason, field, detail in errors])


def validate_list_options(query: Any, *, watch: bool) -> None:
    """What the API server checks of a list's or watch's options before it reads anything
    (k8s.io/apimachinery .../meta/internalversion/validation ValidateListOptions)."""
    match = query.get("resourceVersionMatch", "")
    rv = query.get("resourceVersion", "")
    cont = query.get("continue", "")
    initial = "sendInitialEvents" in query
    errors: list[tuple[str, str, str]] = []
    forbidden, unsupported = "FieldValueForbidden", "FieldValueNotSupported"
    if watch:
        if initial and match != "NotOlderThan":
            errors.append((forbidden, "resourceVersionMatch", "Forbidden: sendInitialEvents requires setting "
                                                              "resourceVersionMatch to NotOlderThan"))
        if match:
            if not initial:
                errors.append((forbidden, "resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden "
                                                                  "for watch unless sendInitialEvents is provided"))
            if match != "NotOlderThan":
                errors.append((unsupported, "resourceVersionMatch",
                               f'Unsupported value: "{match}": supported values: "NotOlderThan"'))
            if cont:
                errors.append((forbidden, "resourceVersionMatch",
                               "Forbidden: resourceVersionMatch is forbidden when continue is provided"))
    else:
        if match:
            if not rv:
                errors.append((forbidden, "resourceVersionMatch",
                               "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"))
            if cont:
                errors.append((forbidden, "resourceVersionMatch",
                               "Forbidden: resourceVersionMatch is forbidden when continue is provided"))
            if match not in ("Exact", "NotOlderThan"):
                errors.append((unsupported, "resourceVersionMatch", f'Unsupported value: "{match}": supported '
                                                                    'values: "Exact", "NotOlderThan", ""'))
            if match == "Exact" and rv == "0":
                errors.append((forbidden, "resourceVersionMatch",
                               'Forbidden: resourceVersionMatch "exact" is forbidden for resourceVersion "0"'))
        if initial:
            errors.append((forbidden, "sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list"))
    if errors:
        raise _list_options_invalid(errors)


def _json(data: Any, status: int = 200) -> web.Response:
    return web.Response(body=codec.dumps(data), status=status, content_type="application/json")


def _warned(response: web.Response, warnings: list[str]) -> web.Response:
    """One ``Warning`` header per warning, as the API server sends them."""
    for text in warnings:
        response.headers.add("Warning", fieldvalidation.warning_header(text))
    return response


def _raw_json(data: bytes, status: int = 200, content_type: str = "application/json") -> web.Response:
    return web.Response(body=data, status=status, headers={"Content-Type": content_type})


# Kinds whose PUT creates a missing object (registry strategies with AllowCreateOnUpdate).
_CREATE_ON_UPDATE = frozenset(("leases", "events"))


def _dry_run(request: web.Request) -> bool:
    return "All" in request.query.getall("dryRun", [])


# fieldManager's limit (apimachinery's FieldManagerMaxLength).
_FIELD_MANAGER_MAX = 128


def _dry_run_errors(values: list[str]) -> list[tuple[str, str]]:
    """ValidateDryRun: "All" is the only value (the whole list is shown when another is there)."""
    if all(v == "All" for v in values):
        return []
    return [("dryRun", f'Unsupported value: {json.dumps(values, separators=(",", ":"))}: supported values: "All"')]


def _field_manager_errors(manager: str) -> list[tuple[str, str]]:
    """ValidateFieldManager: at most 128 bytes, every character printable."""
    errors: list[tuple[str, str]] = []
    if len(manager.encode()) > _FIELD_MANAGER_MAX:
        errors.append(("fieldManager", f"Too long: may not be more than {_FIELD_MANAGER_MAX} bytes"))
    for i, char in enumerate(manager):
        if not char.isprintable():
            errors.append(("fieldManager", f"Invalid value: {json.dumps(manager)}: invalid character "
                                           f"U+{ord(char):04X} (at position {i})"))
    return errors


def validate_write_options(request: web.Request, options_kind: str, *, patch_type: str | None = None) -> None:
    """422 on ``CreateOptions``/``UpdateOptions``/``PatchOptions`` (group meta.k8s.io) for query
    parameters the API server refuses before it decodes the body: an unsupported ``dryRun``, an
    unprintable or overlong ``fieldManager``, ``force`` on anything but an apply patch, an apply
    patch without a ``fieldManager``."""
    query = request.query
    errors: list[tuple[str, str]] = []
    if patch_type is not None and patch_type != codec.APPLY_PATCH:
        if query.get("force"):
            errors.append(("force", "Forbidden: may not be specified for non-apply patch"))
    elif patch_type is not None and not query.get("fieldManager"):
        errors.append(("fieldManager", "Required value: is required for apply patch"))
    errors += _field_manager_errors(query.get("fieldManager", "")) + _dry_run_errors(query.getall("dryRun", []))
    if errors:
        raise invalid(options_kind, "meta.k8s.io", "", errors)


_PROPAGATION = ("Foreground", "Background", "Orphan")


def validate_delete_options(opts: dict[str, Any]) -> None:
    """422 on ``DeleteOptions`` (ValidateDeleteOptions): a propagationPolicy that is none of the
    three (an empty one included), one given together with the deprecated orphanDependents, an
    unsupported dryRun."""
    errors: list[tuple[str, str]] = []
    policy = opts.get("propagationPolicy")
    if opts.get("orphanDependents") is not None and policy is not None:
        errors.append(("propagationPolicy", f"Invalid value: {json.dumps(policy)}: orphanDependents and "
                                            "deletionPropagation cannot be both set"))
    if policy is not None and policy not in _PROPAGATION:
        supported = ", ".join(f'"{p}"' for p in (*_PROPAGATION, "nil"))
        errors.append(("propagationPolicy", f"Unsupported value: {json.dumps(policy)}: supported values: "
                                            f"{supported}"))
    errors += _dry_run_errors(opts.get("dryRun") or [])
    if errors:
        raise invalid("DeleteOptions", "meta.k8s.io", "", errors)


# DeleteOptions' fields and their Go types, for the decoding error of a body that gets one wrong.
_DELETE_OPTION_TYPES = {"gracePeriodSeconds": "int64", "propagationPolicy": "v1.DeletionPropagation",
                        "orphanDependents": "bool", "dryRun": "[]string", "preconditions": "v1.Preconditions"}


def _go_typed(value: Any, go_type: str) -> bool:
    """Whether a JSON value decodes into a field of ``go_type`` (one of ``_DELETE_OPTION_TYPES``)."""
    if go_type == "int64":
        return isinstance(value, int) and not isinstance(value, bool)
    if go_type == "bool":
        return isinstance(value, bool)
    if go_type == "[]string":
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if go_type == "v1.Preconditions":
        return isinstance(value, dict)
    return isinstance(value, str)


def manager_of(request: web.Request) -> str:
    manager = request.query.get("fieldManager")
    if manager:
        return manager
    agent = request.headers.get("User-Agent", "unknown")
    return agent.split("/")[0].strip() or "unknown"


class KubeAPI:
    """aiohttp handlers for the Kubernetes API paths served by one simulated cluster."""

    # How long a read at a resourceVersion the store has not reached waits for it (the API server's
    # watch cache waits 3 s for etcd before it answers 504).
    too_large_wait = 3.0

    def __init__(self, *, store: Store, discovery: Discovery, faults: FaultInjector, kubelet: Kubelet,
                 bookmark_interval: float, server_address: Callable[[], str], flush_delay: float = 0.0,
                 protobuf: bool = True, requests: RequestCounter | None = None) -> None:
        self.store = store
        self.registry = store.registry
        self.discovery = discovery
        self.faults = faults
        self.requests = requests
        self.kubelet = kubelet
        self.bookmark_interval = bookmark_interval
        self.flush_delay = flush_delay
        # Answer built-in kinds in protobuf to clients that prefer it, as a real API server does.
        self.protobuf = protobuf
        self.server_address = server_address
        self.streams: set[web.StreamResponse] = set()
        # Every distinct Access served, when a caller asks for it (SimCluster(record_access=True)):
        # what a client really needs from RBAC. Touched on the loop thread only.
        self.accesses: set[Access] | None = None

    # ---- entry -------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            if self.faults.stall_until:
                await self.faults.hold()  # a network stall: nothing is answered until it ends
            response = await self._route(request)
        except StatusError as e:
            # An error is written like the answer would have been (a protobuf Status for a Go client).
            return output.transcode(_json(e.status(), e.code), request.get(_MEDIA))
        except web.HTTPRequestEntityTooLarge:
            e = too_large()
            return _json(e.status(), e.code)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:  # a bug: still answer like an API server, and log it loudly
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            err = StatusError(500, f"Internal error occurred: {e}")
            return _json(err.status(), 500)
        return output.transcode(response, request.get(_MEDIA), stored=request.get(_STORED, False))

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path.startswith(("/healthz", "/readyz", "/livez")):
            text = health.answer(path, verbose="verbose" in request.query,
                                 excluded=request.query.getall("exclude", []))
            return _page_not_found() if text is None else web.Response(text=text)
        if path == "/version":
            return _json(self.discovery.version())
        if path == "/openapi/v2":
            return self._openapi_v2(request.headers.get("Accept", ""))
        if path.startswith("/openapi/"):
            return self._openapi(path)
        segs = [s for s in path.split("/") if s]
        if not segs or segs[0] not in ("api", "apis"):
            return _page_not_found()
        accept = request.headers.get("Accept", "")
        if segs in (["api"], ["apis"]):
            core = segs == ["api"]
            representation, request[_MEDIA] = negotiate_output(accept, aggregated=True, produces=SERIALIZERS)
            if representation is Representation.AGGREGATED:
                return _raw_json(self.discovery.aggregated(core=core), content_type=AGGREGATED_CONTENT_TYPE)
            if core:
                return _raw_json(self.discovery.api_versions(self.server_address()))
            return _raw_json(self.discovery.api_group_list())
        if segs[0] == "api":
            group, version, rest = "", segs[1], segs[2:]
        elif len(segs) == 2:
            doc = self.discovery.api_group(segs[1])
            if doc is None:
                return _page_not_found()
            # Discovery documents have no protobuf form here: JSON or YAML.
            request[_MEDIA] = negotiate_output(accept, produces=SERIALIZERS)[1]
            return _raw_json(doc)
        else:
            group, version, rest = segs[1], segs[2], segs[3:]
        if group and group not in self.registry.groups:
            return _page_not_found()  # no handler for the group at all, unlike an unknown version
        if not rest:
            rl = self.discovery.resource_list(group, version)
            if rl is None:
                raise _not_found_path()
            request[_MEDIA] = negotiate_output(accept, produces=SERIALIZERS)[1]
            return _raw_json(rl)
        legacy_watch = rest[0] == "watch" and len(rest) > 1
        if legacy_watch:
            # The deprecated /watch/ prefix (…/watch/namespaces/{ns}/{plural}[/{name}]), still served:
            # a watch as if ?watch=true were given.
            rest = rest[1:]
        req = self._parse(group, version, rest)
        req.legacy_watch = legacy_watch
        return await self._dispatch(request, req)

    def _openapi_v2(self, accept: str) -> web.Response:
        """The Swagger 2.0 document, in the first of JSON or gnostic protobuf that Accept names."""
        for media in parse_accept(accept or "*/*"):
            if media.type == "application" and "proto-openapi" in media.subtype:
                # kubectl <= 1.28 insists on OpenAPI v2 (protobuf only) before apply; an empty
                # document makes it skip client-side schema validation, as for unknown kinds.
                return web.Response(body=self.discovery.openapi_v2_protobuf(), headers={
                    "Content-Type": "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", "Vary": "Accept"})
            if media.covers_json():
                return web.Response(body=self.discovery.openapi_v2(),
                                    headers={"Content-Type": "application/json", "Vary": "Accept"})
        raise not_acceptable()

    def _openapi(self, path: str) -> web.Response:
        if path in ("/openapi/v3", "/openapi/v3/"):
            return _raw_json(self.discovery.openapi_index())
        if path.startswith("/openapi/v3/"):
            segs = [s for s in path[len("/openapi/v3/"):].split("/") if s]
            doc = None
            if len(segs) == 2 and segs[0] == "api":
                doc = self.discovery.openapi_doc_bytes("", segs[1])
            elif len(segs) == 3 and segs[0] == "apis":
                doc = self.discovery.openapi_doc_bytes(segs[1], segs[2])
            if doc is not None:
                return _raw_json(doc)
        raise _not_found_path()

    def _parse(self, group: str, version: str, rest: list[str]) -> ResourceRequest:
        ns: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = self.registry.lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                ns, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise _not_found_path()
        rt = self.registry.lookup(group, version, rest[0])
        if rt is None:
            raise _not_found_path()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rt.subresources():
            raise _not_found_path()
        if rt.namespaced and name is not None and ns is None:
            raise _not_found_path()
        if not rt.namespaced and ns is not None:
            raise _not_found_path()
        return ResourceRequest(rt, ns, name, sub)

    async def _dispatch(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        method = request.method
        if req.legacy_watch and method != "GET":
            raise _method_not_allowed()
        watching = method == "GET" and (req.legacy_watch or _bool(request.query.get("watch")))
        if method == "GET":
            verb = "watch" if watching else ("get" if req.name else "list")
        else:
            verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
            if verb == "delete" and req.name is None:
                verb = "deletecollection"
        if verb not in req.rt.verbs:
            raise _method_not_allowed()
        if self.accesses is not None:  # before faults: an injected failure was still asked for
            self.accesses.add(Access(verb, req.rt.group, req.rt.plural, req.sub or "", req.namespace or "",
                                     "" if verb == "create" else req.name or ""))
        rt = req.rt
        req.representation, req.media = negotiate_output(
            request.headers.get("Accept"), table=verb in ("get", "list", "watch"), watch=verb == "watch",
            protobuf=self.protobuf and rt.builtin and protoenc.encodable(rt.api_version, rt.kind),
            # Built-in resources are go-restful routes (a collection's GET also streams watches);
            # custom resources are served by the CRD handler, which has no route-level check.
            produces=(COLLECTION_ROUTE if req.name is None and verb in ("list", "watch") else ITEM_ROUTE)
            if rt.builtin else None)
        if verb != "watch":
            request[_MEDIA] = req.media
            request[_STORED] = verb in ("get", "list")  # objects as stored: their messages may be cached
        if self.requests is not None:
            self.requests.count(request.headers.get("User-Agent", ""), verb, req.rt.plural)
        injected = await self.faults.before_request(verb, req.rt.plural)
        if injected is not None:
            raise StatusError(injected.code, injected.message, reason=injected.reason)
        handler: Callable[[web.Request, ResourceRequest], Awaitable[web.StreamResponse]]
        if verb == "watch":
            handler = self.watch
        elif verb == "list":
            handler = self.list
        elif verb == "get":
            handler = self.get
        elif verb == "create":
            if req.name is not None:
                raise _method_not_allowed()
            handler = self.create
        elif verb in ("update", "patch"):
            if req.name is None:
                raise _method_not_allowed()
            handler = self.update if verb == "update" else self.patch
        elif verb == "delete":
            handler = self.delete
        else:
            handler = self.delete_collection
        return await handler(request, req)

    # ---- presentation ------------------------------------------------------------------------

    def present(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The object as seen through ``rt``'s version (CRDs with several served versions)."""
        if obj.get("apiVersion") != rt.api_version:
            return {**obj, "apiVersion": rt.api_version}
        return obj

    async def _body(self, request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > codec.MAX_BODY:
            raise too_large()
        return await request.read()

    # ---- reads -------------------------------------------------------------------------------

    async def _reach(self, rv: str) -> None:
        """Hold a read at ``resourceVersion`` ``rv`` until the store has got there, as the API
        server's watch cache waits to catch up with etcd -- ``too_large_wait`` seconds at most, then
        504 ``Timeout`` (ResourceVersionTooLarge; clients retry after a second). A revision that
        cannot be parsed is etcd versioner's 500."""
        try:
            wanted = parse_resource_version(rv)
        except ValueError as e:
            raise internal(str(e)) from None
        if wanted <= self.store.rv:
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.too_large_wait
        while self.store.rv < wanted:
            left = deadline - loop.time()
            if left <= 0:
                raise StatusError(504, f"Timeout: Too large resource version: {wanted}, current: {self.store.rv}",
                                  reason="Timeout", retry_after=1,
                                  causes=[{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}])
            await asyncio.sleep(min(0.05, left))

    async def get(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        assert req.name is not None
        rv = request.query.get("resourceVersion", "")
        if rv and rv != "0":
            await self._reach(rv)
        obj = self.store.get(req.rt, req.namespace or "", req.name)
        if req.sub == "scale":
            return _json(self.scale_of(req.rt, obj))
        if req.sub == "log":
            return await self.logs(request, req, obj)
        if req.representation is Representation.TABLE:
            return _json(table(req.rt, [obj], now=self.store.clock.wall(),
                               resource_version=obj["metadata"]["resourceVersion"],
                               include_object=request.query.get("includeObject", "Metadata")))
        if req.representation is Representation.PARTIAL:
            return _json(partial_object_metadata(obj))
        if req.representation is Representation.PARTIAL_LIST:
            raise _not_a_list(req.rt)
        return _json(self.present(req.rt, obj))

    def _matcher(self, request: web.Request, rt: ResourceType) -> tuple[Callable[[dict[str, Any]], bool], bool]:
        labels = request.query.get("labelSelector")
        fields = request.query.get("fieldSelector")
        label_match = parse_label_selector(labels)
        field_match = parse_field_selector(fields, rt.plural, rt.builtin)
        if not labels and not fields:
            return (lambda _o: True), False
        return (lambda o: label_match(o) and field_match(o)), True

    async def list(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        rt = req.rt
        if req.representation is Representation.PARTIAL:
            raise _a_list(rt)
        query = request.query
        limit = _int(request, "limit")
        validate_list_options(query, watch=False)
        match, filtered = self._matcher(request, rt)
        rv = query.get("resourceVersion", "")
        token_in = query.get("continue") or None
        if rv:
            try:
                parse_resource_version(rv)
            except ValueError as e:
                raise bad_request(f"invalid resource version: {e}") from None
        if rv == "0" and not token_in:
            # Served from the watch cache, which does not page: the whole list, no continue.
            limit = 0
        elif rv and not token_in:
            await self._reach(rv)
        items, list_rv, token, remaining = self.store.list(
            rt, req.namespace, match if filtered else None, limit=limit, continue_token=token_in,
            resource_version=rv)
        if req.representation is Representation.TABLE:
            return _json(table(rt, items, now=self.store.clock.wall(), resource_version=str(list_rv),
                               include_object=request.query.get("includeObject", "Metadata"),
                               continue_token=token, remaining=remaining))
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if token:
            meta["continue"] = token
            if remaining is not None:
                meta["remainingItemCount"] = remaining
        if req.representation is Representation.PARTIAL_LIST:
            return _json({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1", "metadata": meta,
                          "items": [partial_object_metadata(o) for o in items]})
        return _json(self.list_body(rt, items, meta))

    def list_body(self, rt: ResourceType, items: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
        """A list of ``rt`` as the API server writes one. The items of a built-in kind carry no
        ``kind``/``apiVersion`` (Go's typed items leave their TypeMeta empty: the list says it once);
        custom resources are unstructured and keep theirs, and their list always has a ``continue``."""
        if rt.builtin:
            items = [{k: v for k, v in o.items() if k != "apiVersion" and k != "kind"} for o in items]
        else:
            if any(o.get("apiVersion") != rt.api_version for o in items[:1]):
                items = [self.present(rt, o) for o in items]
            meta = {"continue": "", **meta}
        return {"kind": rt.list_kind, "apiVersion": rt.api_version, "metadata": meta, "items": items}

    async def watch(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        rt = req.rt
        q = request.query
        label_match = parse_label_selector(q.get("labelSelector"))
        field_match = parse_field_selector(q.get("fieldSelector"), rt.plural, rt.builtin)
        filtered = bool(q.get("labelSelector") or q.get("fieldSelector"))
        if req.name is not None:
            # A watch of one object (legacy /watch/.../{name} or ?watch on an item): by its name.
            by_field, name = field_match, req.name
            field_match = lambda o: by_field(o) and o["metadata"].get("name") == name  # noqa: E731
            filtered = True
        timeout = _int(request, "timeoutSeconds")
        bookmarks = _bool(q.get("allowWatchBookmarks"))
        validate_list_options(q, watch=True)
        send_initial = _bool(q.get("sendInitialEvents")) if "sendInitialEvents" in q else None
        if req.representation is Representation.PARTIAL_LIST:
            raise _not_a_list(rt)  # each event's object is one object
        as_table = req.representation is Representation.TABLE
        as_partial = req.representation is Representation.PARTIAL
        as_protobuf = req.media is Media.PROTOBUF
        response = web.StreamResponse(status=200, headers={
            "Content-Type": protoenc.WATCH_MEDIA_TYPE if as_protobuf else "application/json",
            "Cache-Control": "no-cache, private"})
        response.enable_chunked_encoding()
        try:
            watcher = self.store.watch(rt, req.namespace, resource_version=q.get("resourceVersion"),
                                       label_match=label_match, field_match=field_match, filtered=filtered,
                                       send_initial_events=send_initial,
                                       raw_lines=not (as_table or as_partial or as_protobuf)
                                       and self.registry.storage_type(rt.key) is rt)
        except StatusError as e:
            if e.code != 410:
                raise
            # A real API server answers an expired watch with 200 and one ERROR event.
            await response.prepare(request)
            await response.write(self._encode(rt, WatchEventType.ERROR, None, e.status(), False, False,
                                              protobuf=as_protobuf))
            await response.write_eof()
            return response
        watcher.protobuf = as_protobuf
        if watcher.initial_events and bookmarks:
            # The current state ends with a bookmark at its RV, annotated initial-events-end: for a
            # watch from RV 0 or none as for sendInitialEvents=true (the API server's cacher sends
            # it to every watch that starts with the state, when bookmarks are allowed).
            watcher.pending.append((WatchEventType.BOOKMARK, None,
                                    self._bookmark(rt, watcher.start_rv, initial_end=True)))
            watcher.wake.set()
        self.streams.add(response)
        try:
            await response.prepare(request)
            await self._pump(request, response, watcher, rt, timeout=timeout, bookmarks=bookmarks,
                             as_table=as_table, as_partial=as_partial)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            self.store.unwatch(watcher)
            self.streams.discard(response)
        return response

    def _bookmark(self, rt: ResourceType, rv: int, initial_end: bool = False) -> dict[str, Any]:
        """An empty object of the watched kind carrying only a resourceVersion (and the annotation):
        ObjectMeta's zero creationTimestamp is omitted (omitzero), as the API server writes it."""
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta}

    def _next_bookmark(self, now: float, deadline: float | None) -> float | None:
        """When the next periodic bookmark is due (the API server's cacheWatcher.nextBookmarkTime):
        ``bookmark_interval`` from now (a minute by default, as on a real server), or 2 s before the
        watch's timeout if that comes first; none once that moment is past."""
        due = now + self.bookmark_interval
        if deadline is not None:
            due = min(due, deadline - 2.0)
        return None if due < now else due

    def _encode(self, rt: ResourceType, type: WatchEventType, event: WatchEvent | None, obj: dict[str, Any],
                as_table: bool, first: bool, as_partial: bool = False, protobuf: bool = False) -> bytes:
        if protobuf:  # Table and PartialObjectMetadata are JSON only (negotiation): a plain object
            if event is not None and event.type == type and obj.get("apiVersion") == rt.api_version:
                return event.frame()
            return protoenc.watch_frame(type, obj if type is WatchEventType.ERROR else self.present(rt, obj),
                                        protoenc.CACHE)
        if as_partial and type is not WatchEventType.ERROR:
            # Every object event and the bookmarks too, as the API server converts them.
            return codec.dumps({"type": type, "object": partial_object_metadata(obj)}) + b"\n"
        if as_table and type is not WatchEventType.BOOKMARK:
            t = table(rt, [obj], now=self.store.clock.wall(), resource_version=obj["metadata"]["resourceVersion"],
                      headers=first)
            return codec.dumps({"type": type, "object": t}) + b"\n"
        if event is not None and event.type == type and obj.get("apiVersion") == rt.api_version:
            return event.line()
        return codec.dumps({"type": type, "object": self.present(rt, obj)}) + b"\n"

    async def _pump(self, request: web.Request, response: web.StreamResponse, w: Watcher, rt: ResourceType, *,
                    timeout: int, bookmarks: bool, as_table: bool, as_partial: bool = False) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout if timeout else None
        next_bookmark = self._next_bookmark(loop.time(), deadline) if bookmarks else None
        first = True
        faults = self.faults
        while True:
            if faults.stall_until:
                await faults.hold()  # a network stall: the stream stays open and silent
            if w.pending:
                chunk = []
                pending = w.pending
                while pending:
                    item = pending.popleft()
                    if isinstance(item, bytes):
                        chunk.append(item)
                        continue
                    type, event, obj = item
                    chunk.append(self._encode(rt, type, event, obj, as_table, first, as_partial, w.protobuf))
                    if type is not WatchEventType.BOOKMARK:
                        first = False
                await response.write(b"".join(chunk))
                continue
            if w.closed:
                if w.close_reason is CloseReason.ABORT:
                    if request.transport is not None:
                        request.transport.abort()
                    return
                await response.write_eof()
                return
            now = loop.time()
            if deadline is not None and deadline <= now:
                await response.write_eof()
                return
            if next_bookmark is not None and next_bookmark <= now:
                # Only a revision past the watch's start is worth a bookmark (the cacher's process()
                # drops older ones): a watch on a quiet cluster gets none.
                if self.store.rv > w.start_rv:
                    await response.write(self._encode(rt, WatchEventType.BOOKMARK, None,
                                                      self._bookmark(rt, self.store.rv), as_table, False, as_partial,
                                                      w.protobuf))
                next_bookmark = self._next_bookmark(now, deadline)
                continue
            wait = min((t - now for t in (deadline, next_bookmark) if t is not None), default=None)
            w.wake.clear()
            try:
                if wait is None:
                    await w.wake.wait()
                else:
                    await asyncio.wait_for(w.wake.wait(), wait)
            except TimeoutError:
                continue  # a bookmark or the deadline is due (a stall holds both at the top)
            if self.flush_delay and not w.closed:
                # Coalesce: under load, one wake-up and one socket write per watcher carry many
                # events instead of one each, at the cost of at most flush_delay of latency.
                await asyncio.sleep(self.flush_delay)

    # ---- writes ------------------------------------------------------------------------------

    async def create(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        if req.sub is not None:
            raise _method_not_allowed()
        validate_write_options(request, "CreateOptions")
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), "CreateOptions")
        raw, ctype = await self._body(request), request.headers.get("Content-Type")
        obj = codec.decode_object(raw, ctype, kind=req.rt.kind)
        check_type(req.rt, obj)
        obj, warnings = self._typed(req.rt, obj, mode, raw, ctype)
        if not req.rt.stored:
            return _warned(_json(reviews.answer(req.rt, obj), 201), warnings)
        check_namespace_match(req.namespace, obj)
        created = self.store.create(req.rt, req.namespace, obj, manager=manager_of(request),
                                    dry_run=_dry_run(request))
        return _warned(_json(self.present(req.rt, created), 201), warnings)

    @staticmethod
    def _typed(rt: ResourceType, obj: Any, mode: str, raw: bytes | None, ctype: str | None, *,
               patch: bool = False, scale: bool = False) -> tuple[Any, list[str]]:
        """The body as its type holds it, and the warnings for what it had no place for
        (``fieldvalidation``); a protobuf body is typed already."""
        media = codec.media_type(ctype)
        if media == protobuf.MEDIA_TYPE or not isinstance(obj, dict):
            return obj, []
        json_raw = raw if raw is not None and media in ("", "application/json", "*/*") else None
        if scale:
            return fieldvalidation.decode(rt, obj, mode, raw=json_raw, patch=patch, api_version="autoscaling/v1",
                                          kind="Scale")
        return fieldvalidation.decode(rt, obj, mode, raw=json_raw, patch=patch)

    async def update(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        assert req.name is not None
        validate_write_options(request, "UpdateOptions")
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), "UpdateOptions")
        raw, ctype = await self._body(request), request.headers.get("Content-Type")
        obj = codec.decode_object(raw, ctype, kind="Scale" if req.sub == "scale" else req.rt.kind)
        if req.sub == "scale":
            obj, warnings = self._typed(req.rt, obj, mode, raw, ctype, scale=True)
            return _warned(_json(self._write_scale(request, req, obj)), warnings)
        if req.sub == "log":
            raise _method_not_allowed()
        check_type(req.rt, obj)
        obj, warnings = self._typed(req.rt, obj, mode, raw, ctype)
        check_namespace_match(req.namespace, obj)
        check_name_match(req.name, obj)
        stored, created = self.store.update(req.rt, req.namespace, req.name, obj, subresource=req.sub,
                                            manager=manager_of(request), dry_run=_dry_run(request),
                                            create_if_missing=req.rt.builtin and req.rt.plural in _CREATE_ON_UPDATE)
        return _warned(_json(self.present(req.rt, stored), 201 if created else 200), warnings)

    async def patch(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        assert req.name is not None
        rt = req.rt
        ptype = codec.patch_type(request.headers.get("Content-Type"))
        raw = await self._body(request)
        validate_write_options(request, "PatchOptions", patch_type=ptype)
        mode = fieldvalidation.directive(request.query.get("fieldValidation"), "PatchOptions")
        doc = codec.decode_patch(raw, ptype)
        if req.sub == "log":
            raise _method_not_allowed()
        if ptype == codec.APPLY_PATCH:
            return self._apply(request, req, doc)
        if ptype == codec.STRATEGIC_PATCH and not rt.builtin:
            raise codec.unsupported_media(ptype, (codec.JSON_PATCH, codec.MERGE_PATCH, codec.APPLY_PATCH))
        current = self.store.get(rt, req.namespace or "", req.name)
        base = self.scale_of(rt, current) if req.sub == "scale" else self.present(rt, current)
        if ptype == codec.MERGE_PATCH:
            patched = merge_patch(base, doc)
        elif ptype == codec.JSON_PATCH:
            patched = json_patch(base, doc)
        else:
            patched = StrategicMerge(("autoscaling", "scale") if req.sub == "scale" else rt.key).apply(base, doc)
        if req.sub == "scale":
            patched, warnings = self._typed(rt, patched, mode, None, None, patch=True, scale=True)
            return _warned(_json(self._write_scale(request, req, patched)), warnings)
        check_type(rt, patched, patch=True)
        patched, warnings = self._typed(rt, patched, mode, None, None, patch=True)
        check_name_match(req.name, patched)
        check_namespace_match(req.namespace, patched)
        stored, _ = self.store.update(rt, req.namespace, req.name, patched, subresource=req.sub,
                                      manager=manager_of(request), dry_run=_dry_run(request))
        return _warned(_json(self.present(rt, stored)), warnings)

    def _apply(self, request: web.Request, req: ResourceRequest, doc: dict[str, Any]) -> web.Response:
        assert req.name is not None
        rt = req.rt
        manager = request.query["fieldManager"]  # validate_write_options: required for apply
        if req.sub == "scale":
            raise codec.unsupported_media(codec.APPLY_PATCH, (codec.JSON_PATCH, codec.MERGE_PATCH))
        check_apply_type(rt, doc)
        # Apply builds a typed object of the configuration first: whatever the fieldValidation, a
        # field its type lacks or a value of the wrong type is a 500 (structured-merge-diff's error).
        if rt.builtin:
            errors = typed.apply_errors(rt.api_version, rt.kind, rt.key, doc)
        else:
            errors = structural.apply_errors(rt.schema, doc) if rt.schema is not None else []
        if errors:
            raise typed.typed_patch_failed(doc, errors)
        try:  # what a built-in kind's ObjectMeta has no field for is dropped without a word
            typed.decode_metadata(doc.get("metadata"), "metadata").prune()
        except typed.DecodeError:
            pass
        check_name_match(req.name, doc)
        check_namespace_match(req.namespace, doc)
        ns = (req.namespace or "default") if rt.namespaced else ""
        live = self.store.find(rt.key, ns, req.name)
        now = rfc3339(self.store.clock.wall())
        merged, managed = server_side_apply(rt, live, doc, manager=manager, force=_bool(request.query.get("force")),
                                            now=now, subresource=req.sub)
        if rt.schema is not None:
            structural.default(rt.schema, merged)
        if live is None:
            if req.sub is not None:
                raise self._not_found(rt, req.name)
            merged.setdefault("metadata", {})["name"] = req.name
            created = self.store.create(rt, req.namespace, merged, manager=manager, managed=managed,
                                        dry_run=_dry_run(request))
            return _json(self.present(rt, created), 201)
        merged["metadata"]["resourceVersion"] = doc.get("metadata", {}).get("resourceVersion") or \
            live["metadata"]["resourceVersion"]
        stored, _ = self.store.update(rt, req.namespace, req.name, merged, subresource=req.sub, manager=manager,
                                      managed=managed, dry_run=_dry_run(request))
        return _json(self.present(rt, stored))

    @staticmethod
    def _not_found(rt: ResourceType, name: str) -> StatusError:
        return StatusError(404, f'{qualified(rt.plural, rt.group)} "{name}" not found', name=name, group=rt.group,
                           kind=rt.plural)

    async def delete(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        assert req.name is not None
        if req.sub is not None:
            raise _method_not_allowed()
        opts = await self._delete_options(request)
        pre = opts.get("preconditions") or {}
        obj, removed = self.store.delete(req.rt, req.namespace, req.name, propagation=opts.get("propagationPolicy"),
                                         precondition_rv=pre.get("resourceVersion"),
                                         precondition_uid=pre.get("uid"), dry_run="All" in opts.get("dryRun", ()),
                                         grace_period=opts.get("gracePeriodSeconds"))
        if req.rt.plural == "pods" or not removed:
            return _json(self.present(req.rt, obj))
        details = {"name": req.name, "group": req.rt.group, "kind": req.rt.plural, "uid": obj["metadata"].get("uid")}
        return _json({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                      "details": {k: v for k, v in details.items() if v}})  # omitempty, as a failure's

    async def _delete_options(self, request: web.Request) -> dict[str, Any]:
        """The DeleteOptions of a DELETE, validated: from its body when it has one -- the query is
        then not read at all, as by the API server -- else from the query."""
        raw = await self._body(request)
        opts: dict[str, Any] = {}
        if raw.strip():
            opts = codec.decode_object(raw, request.headers.get("Content-Type"))
            kind, api_version = opts.get("kind"), opts.get("apiVersion") or "v1"
            if kind and kind != "DeleteOptions":
                raise bad_request(f'no kind "{kind}" is registered for version "{api_version}" in scheme '
                                  '"pkg/runtime/scheme.go:111"')
            for field, want in _DELETE_OPTION_TYPES.items():
                value = opts.get(field)
                if value is not None and not _go_typed(value, want):
                    raise bad_request(f"json: cannot unmarshal {codec.go_json_type(value)} into Go struct field "
                                      f"DeleteOptions.{field} of type {want}")
        else:
            query = request.query
            if "propagationPolicy" in query:
                opts["propagationPolicy"] = query["propagationPolicy"]
            if query.get("gracePeriodSeconds"):
                try:  # any int64: a negative grace period is the registry's to clamp
                    opts["gracePeriodSeconds"] = int(query["gracePeriodSeconds"])
                except ValueError:
                    raise bad_request(f'strconv.ParseInt: parsing "{query["gracePeriodSeconds"]}": invalid '
                                      "syntax") from None
            if query.get("orphanDependents"):
                opts["orphanDependents"] = _bool(query["orphanDependents"])
            opts["dryRun"] = query.getall("dryRun", [])
        validate_delete_options(opts)
        if opts.get("orphanDependents") is not None:
            opts["propagationPolicy"] = "Orphan" if opts["orphanDependents"] else "Background"
        return opts

    async def delete_collection(self, request: web.Request, req: ResourceRequest) -> web.StreamResponse:
        rt = req.rt
        match, filtered = self._matcher(request, rt)
        opts = await self._delete_options(request)
        items, _, _, _ = self.store.list(rt, req.namespace, match if filtered else None)
        deleted = []
        for obj in list(items):
            meta = obj["metadata"]
            try:
                gone, _ = self.store.delete(rt, meta.get("namespace"), meta["name"],
                                            propagation=opts.get("propagationPolicy"))
                deleted.append(gone)
            except StatusError as e:
                if e.code != 404:
                    raise
        return _json(self.list_body(rt, deleted, {"resourceVersion": str(self.store.rv)}))

    # ---- scale -------------------------------------------------------------------------------

    def scale_of(self, rt: ResourceType, obj: dict[str, Any]) -> dict[str, Any]:
        """The ``autoscaling/v1`` Scale view of ``obj``."""
        assert rt.scale is not None
        meta = obj["metadata"]
        replicas = jsonpath_value(obj, rt.scale.spec_replicas) or 0
        status: dict[str, Any] = {"replicas": jsonpath_value(obj, rt.scale.status_replicas) or 0}
        if rt.builtin:
            selector = selector_from_label_selector((obj.get("spec") or {}).get("selector"))
        else:
            selector = jsonpath_value(obj, rt.scale.label_selector) if rt.scale.label_selector else None
        if selector:
            status["selector"] = selector
        scale_meta = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                      if k in meta}
        # Through the Go type, as the API server answers it: no spec.replicas when it is 0 (omitempty).
        return gojson.encode("autoscaling/v1", "Scale", {"kind": "Scale", "apiVersion": "autoscaling/v1",
                                                         "metadata": scale_meta, "spec": {"replicas": replicas},
                                                         "status": status})

    def _write_scale(self, request: web.Request, req: ResourceRequest, scale: Any) -> dict[str, Any]:
        assert req.name is not None and req.rt.scale is not None
        rt = req.rt
        if not isinstance(scale, dict):
            raise bad_request("Scale must be an object")
        replicas = (scale.get("spec") or {}).get("replicas")
        if replicas is None:
            replicas = 0  # omitempty: a Scale to zero carries no replicas (Go's zero value)
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise invalid("Scale", "autoscaling", req.name, [
                ("spec.replicas", f"Invalid value: {replicas!r}: must be greater than or equal to 0")])
        current = self.store.get(rt, req.namespace or "", req.name)
        new = copy_obj(current)
        path = [p for p in rt.scale.spec_replicas.split(".") if p]
        cur = new
        for p in path[:-1]:
            cur = cur.setdefault(p, {})
        cur[path[-1]] = replicas
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        new["metadata"]["resourceVersion"] = rv or current["metadata"]["resourceVersion"]
        stored, _ = self.store.update(rt, req.namespace, req.name, new, manager=manager_of(request),
                                      dry_run=_dry_run(request), tracked_as="scale")
        return self.scale_of(rt, stored)

    # ---- logs --------------------------------------------------------------------------------

    async def logs(self, request: web.Request, req: ResourceRequest, pod: dict[str, Any]) -> web.StreamResponse:
        containers = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        name = pod["metadata"]["name"]
        container = request.query.get("container")
        if not container:
            if len(containers) != 1:
                raise bad_request(f"a container name must be specified for pod {name}, choose one of: "
                                  f"[{' '.join(str(c) for c in containers)}]")
            container = containers[0]
        if container not in containers:
            raise bad_request(f"container {container} is not valid for pod {name}")
        ns = pod["metadata"].get("namespace", "")
        waiting = self.kubelet.waiting_reason(pod, container)
        if waiting:
            raise bad_request(f'container "{container}" in pod "{name}" is waiting to start: {waiting}')
        tail = request.query.get("tailLines")
        lines = self.kubelet.logs(ns, name, container)
        if tail is not None:
            n = _int(request, "tailLines")
            lines = lines[-n:] if n else []
        timestamps = _bool(request.query.get("timestamps"))
        body = "".join(self._log_line(line, timestamps) for line in lines)
        if not _bool(request.query.get("follow")):
            return web.Response(text=body, content_type="text/plain")
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        await response.write(body.encode())
        sent = len(self.kubelet.logs(ns, name, container))
        uid = pod["metadata"].get("uid")
        while True:
            await asyncio.sleep(0.1)
            current = self.store.find(req.rt.key, ns, name)
            if current is None or current["metadata"].get("uid") != uid:
                break
            all_lines = self.kubelet.logs(ns, name, container)
            if len(all_lines) > sent:
                await response.write("".join(self._log_line(line, timestamps)
                                             for line in all_lines[sent:]).encode())
                sent = len(all_lines)
        await response.write_eof()
        return response

    @staticmethod
    def _log_line(line: tuple[str, str], timestamps: bool) -> str:
        ts, text = line
        return f"{ts} {text}\n" if timestamps else f"{text}\n"
