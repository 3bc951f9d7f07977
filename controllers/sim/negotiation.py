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

The simulator writes JSON only. So ``application/vnd.kubernetes.protobuf,application/json`` (what
client-go 0.37's typed clients send) and ``application/vnd.kubernetes.protobuf, */*``
(controller-runtime) get JSON, which client-go decodes by the response's Content-Type; a client
that accepts *only* protobuf or CBOR gets the same 406 a real API server gives for a media type it
does not serve, instead of JSON it did not ask for. Empty ``Accept`` means JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

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
    return StatusError(406, f"only the following media types are accepted: {JSON}", reason="NotAcceptable")


def negotiate(accept: str | None, *, table: bool = False, aggregated: bool = False) -> Representation:
    """The representation to answer ``accept`` with; ``table``/``aggregated`` say what the endpoint offers."""
    if not accept or not accept.strip():
        return Representation.OBJECT
    for media in parse_accept(accept):
        if not media.covers_json():
            continue
        conversion = media.params.get("as")
        if conversion is None:
            return Representation.OBJECT
        group, version = media.params.get("g"), media.params.get("v")
        if table and conversion == "Table" and (group, version) == ("meta.k8s.io", "v1"):
            return Representation.TABLE
        if table and (group, version) == ("meta.k8s.io", "v1"):
            # Offered wherever a Table is (get, list, watch of a resource).
            if conversion == "PartialObjectMetadata":
                return Representation.PARTIAL
            if conversion == "PartialObjectMetadataList":
                return Representation.PARTIAL_LIST
        if aggregated and conversion == "APIGroupDiscoveryList" and (group, version) == ("apidiscovery.k8s.io", "v2"):
            return Representation.AGGREGATED
    raise not_acceptable()
