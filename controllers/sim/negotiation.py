"""Accept negotiation: which representation a response is written in, or a 406.

The API server (k8s.io/apiserver ``endpoints/handlers/negotiation``) reads ``Accept`` as a list of
media ranges with ``q`` weights, tries them from the most to the least preferred (ties in the order
given), and answers with the first one it can produce; a range whose ``as``/``g``/``v`` parameters
ask for a conversion the endpoint does not offer (a ``Table`` of a discovery document, a discovery
list of a Pod) is skipped, not an error. When nothing in the header can be produced it answers 406
``NotAcceptable`` before doing any work — a create is not committed first.

Conversions offered (``as=``, ``g=meta.k8s.io``, ``v=v1``; the API server also serves v1beta1, which no
current client asks for): ``Table`` (``kubectl get``) and
``PartialObjectMetadata`` / ``PartialObjectMetadataList`` (client-go's metadata client, metadata-only
informers) on get, list and watch. As on the API server, negotiation only checks that the
conversion exists; asking for ``PartialObjectMetadata`` of a list (or ``...List`` of one object) is
then a 406 from the handler, not a fall back to the next media range.

Serializers: JSON, YAML (get and list; a watch streams JSON or protobuf only) and Kubernetes
protobuf for built-in kinds (``protoenc``) -- what client-go's typed clients
(``application/vnd.kubernetes.protobuf,application/json``) and controller-runtime
(``application/vnd.kubernetes.protobuf, */*``) get from a real API server. Custom resources have no
protobuf form: those clients get JSON, and a client accepting only protobuf a 406. Conversions
(Table, PartialObjectMetadata) are written as JSON. Two 406s, as on the API server: go-restful's
``406: Not Acceptable ... Available representations: ...`` (empty details) when no range names
anything a built-in resource's route produces (text/html, CBOR), and the negotiation's ``only the
following media types are accepted: ...`` when a range matched but nothing it asks for is served.
Empty ``Accept`` means JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from controllers.sim.errors import StatusError

JSON = "application/json"


class Representation(Enum):
    """What a negotiated response carries."""

    OBJECT = "object"  # the resource (or list, or discovery document) itself
    TABLE = "table"  # meta.k8s.io/v1 Table (kubectl get)
    AGGREGATED = "aggregated"  # apidiscovery.k8s.io/v2 APIGroupDiscoveryList (on /api and /apis)
    PARTIAL = "partial"  # meta.k8s.io/v1 PartialObjectMetadata (one object, or each watch event's)
    PARTIAL_LIST = "partial-list"  # meta.k8s.io/v1 PartialObjectMetadataList


@dataclass(frozen=True)
class MediaRange:
    """One comma-separated element of an ``Accept`` header."""

    type: str
    subtype: str
    params: dict[str, str]
    q: float

    def covers_json(self) -> bool:
        return (self.type, self.subtype) in (("application", "json"), ("application", "*"), ("*", "*"))


def parse_accept(header: str) -> list[MediaRange]:
    """Media ranges by preference: higher ``q`` first, the header's order among equals; q=0 dropped."""
    ranges: list[tuple[float, int, MediaRange]] = []
    for index, part in enumerate(header.split(",")):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        kind, _, sub = pieces[0].lower().partition("/")
        params: dict[str, str] = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            if key:
                params[key.strip().lower()] = value.strip().strip('"')
        try:
            q = float(params.pop("q", "1"))
        except ValueError:
            q = 1.0  # an unreadable weight is ignored, as goautoneg does
        if q <= 0:
            continue
        ranges.append((-q, index, MediaRange(kind, sub or "*", params, q)))
    return [r for _, _, r in sorted(ranges, key=lambda t: (t[0], t[1]))]


def not_acceptable() -> StatusError:
    """The API server's 406 (a generic server response: empty details), naming what it can write."""
    return StatusError(406, f"406: Not Acceptable\n\nAvailable representations: {JSON}", reason="NotAcceptable",
                       generic=True)


def negotiate(accept: str | None, *, table: bool = False, aggregated: bool = False) -> Representation:
    """The representation to answer ``accept`` with; ``table``/``aggregated`` say what the endpoint offers."""
    return negotiate_output(accept, table=table, aggregated=aggregated)[0]


class Media(Enum):
    """The serializer a negotiated response is written with."""

    JSON = JSON
    YAML = "application/yaml"
    PROTOBUF = "application/vnd.kubernetes.protobuf"


# What the API server can write: its serializers, and for watches their streaming forms.
SERIALIZERS = (JSON, Media.YAML.value, Media.PROTOBUF.value)
STREAMS = (f"{JSON};stream=watch", f"{Media.PROTOBUF.value};stream=watch")
# What a go-restful route (built-in resources, legacy discovery) produces: a collection's GET also
# serves watches.
ITEM_ROUTE = SERIALIZERS
COLLECTION_ROUTE = SERIALIZERS + STREAMS


class _RouteNotAcceptable(StatusError):
    """go-restful's own error, which the API server writes as a generic Status: empty details."""

    def status(self) -> dict[str, Any]:
        body = super().status()
        code = body.pop("code")
        body.setdefault("details", {})
        body["code"] = code
        return body


def route_not_acceptable(produces: tuple[str, ...]) -> StatusError:
    """go-restful's 406, before the API server's own negotiation: no media range of Accept names
    anything the route produces (text/html, CBOR)."""
    return _RouteNotAcceptable(406, "406: Not Acceptable\n\nAvailable representations: " + ", ".join(produces),
                               reason="NotAcceptable")


def serializer_not_acceptable(accepted: tuple[str, ...]) -> StatusError:
    """The API server's own 406 (handlers/negotiation errNotAcceptable): a range matched, but no
    serializer and conversion it offers does (YAML for a watch, only a conversion not offered)."""
    return StatusError(406, "only the following media types are accepted: " + ", ".join(accepted),
                       reason="NotAcceptable")


def _route_matches(media: MediaRange, produces: tuple[str, ...]) -> bool:
    if media.type == "*":
        return True
    for produced in produces:
        kind, _, sub = produced.split(";")[0].partition("/")
        if media.type == kind and media.subtype in ("*", sub):
            return True
    return False


def _serializer(media: MediaRange) -> Media | None:
    if media.covers_json():
        return Media.JSON
    if media.type == "application" and media.subtype == "yaml":
        return Media.YAML
    if media.type == "application" and media.subtype == "vnd.kubernetes.protobuf":
        return Media.PROTOBUF
    return None


def negotiate_output(accept: str | None, *, table: bool = False, aggregated: bool = False, protobuf: bool = False,
                     watch: bool = False, produces: tuple[str, ...] | None = None) -> tuple[Representation, Media]:
    """The representation and serializer to answer ``accept`` with, or a 406.

    ``table``/``aggregated`` say which conversions the endpoint offers, ``protobuf`` whether its
    objects have a protobuf form (built-in kinds), ``watch`` that it streams (no YAML), and
    ``produces`` what its go-restful route declares (None: not a go-restful route, as custom
    resources are not). Conversions are written as JSON only.
    """
    if not accept or not accept.strip():
        return Representation.OBJECT, Media.JSON
    ranges = parse_accept(accept)
    if produces is not None and not any(_route_matches(m, produces) for m in ranges):
        raise route_not_acceptable(produces)
    for media in ranges:
        serializer = _serializer(media)
        if serializer is None or (serializer is Media.PROTOBUF and not protobuf) or \
                (serializer is Media.YAML and watch):
            continue
        conversion = media.params.get("as")
        if conversion is None:
            return Representation.OBJECT, serializer
        if serializer is not Media.JSON:
            continue
        group, version = media.params.get("g"), media.params.get("v")
        if table and conversion == "Table" and (group, version) == ("meta.k8s.io", "v1"):
            return Representation.TABLE, serializer
        if table and (group, version) == ("meta.k8s.io", "v1"):
            # Offered wherever a Table is (get, list, watch of a resource).
            if conversion == "PartialObjectMetadata":
                return Representation.PARTIAL, serializer
            if conversion == "PartialObjectMetadataList":
                return Representation.PARTIAL_LIST, serializer
        if aggregated and conversion == "APIGroupDiscoveryList" and (group, version) == ("apidiscovery.k8s.io", "v2"):
            return Representation.AGGREGATED, serializer
    raise serializer_not_acceptable(STREAMS if watch else SERIALIZERS)
