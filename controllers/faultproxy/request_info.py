"""``request_info``: which verb and resource a request is, read off its method, path and query.

The fault rules match ``(verb, resource)`` as the simulator routes them and as the API server's
authorizer sees them, so the proxy reads a path the way the API server's ``RequestInfoFactory``
does (k8s.io/apiserver/pkg/endpoints/request/requestinfo.go):

* ``/api/v1/...`` is the core group, ``/apis/{group}/{version}/...`` any other; anything else
  (``/version``, ``/openapi/v3``, ``/api``, ``/apis``: discovery) is not a resource request;
* ``namespaces/{ns}/{resource}/{name}/{subresource}`` or ``{resource}/{name}/{subresource}``; a
  namespace's own ``status`` and ``finalize`` are subresources of ``namespaces``;
* the verb from the method: GET is ``get`` with a name, else ``list``, or ``watch`` with
  ``?watch=true`` (or the legacy ``/watch/`` path segment); POST ``create``, PUT ``update``,
  PATCH ``patch``, DELETE ``delete`` with a name, else ``deletecollection``.
"""

from __future__ import annotations

from dataclasses import dataclass

from multidict import MultiMapping

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_METHOD_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                 "DELETE": "delete"}
# strconv.ParseBool's true spellings: what ?watch= accepts.
_TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})


@dataclass(frozen=True)
class RequestInfo:
    """A resource request's verb, resource and where it points (``name`` "" for a collection)."""

    verb: str
    resource: str
    namespace: str = ""
    name: str = ""
    subresource: str = ""


def request_info(method: str, path: str, query: MultiMapping[str]) -> RequestInfo | None:
    """The resource request ``method path?query`` is, or None for anything else (discovery,
    ``/version``, ``/healthz``, an unknown method)."""
    verb = _METHOD_VERBS.get(method)
    if verb is None:
        return None
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        parts = parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        parts = parts[3:]
    else:
        return None
    if parts and parts[0] == "watch":
        verb, parts = "watch", parts[1:]
    if not parts:
        return None
    namespace = ""
    if parts[0] == "namespaces" and len(parts) > 1:
        namespace = parts[1]
        if len(parts) > 2 and parts[2] not in _NAMESPACE_SUBRESOURCES:
            parts = parts[2:]
    name = parts[1] if len(parts) >= 2 else ""
    subresource = parts[2] if len(parts) >= 3 else ""
    if verb == "get" and not name:
        verb = "watch" if query.get("watch", "") in _TRUE else "list"
    elif verb == "delete" and not name:
        verb = "deletecollection"
    return RequestInfo(verb=verb, resource=parts[0], namespace=namespace, name=name, subresource=subresource)
