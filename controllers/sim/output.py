"""Response bodies in the serializer a request negotiated: JSON as handlers write it, or YAML or
Kubernetes protobuf made from that JSON.

Handlers answer JSON (``api._json``); when ``negotiation`` picked another serializer for the request,
``transcode`` rewrites the finished response once, on its way out, so no handler needs to know about
serializers. YAML is what the API server's YAML serializer (sigs.k8s.io/yaml) writes: keys sorted,
block style, multi-line strings as literal blocks, double quotes only where a plain scalar would
read as something else (``"True"``, a timestamp, a number). Protobuf is ``protoenc``; a body it
cannot encode (a kind without a message) stays JSON, which every client that asked for protobuf
also reads.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import yaml
from aiohttp import web
from multidict import CIMultiDict

from controllers.sim import protoenc
from controllers.sim.negotiation import Media

log = logging.getLogger(__name__)


class _Dumper(yaml.SafeDumper):
    pass


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value and not value.endswith((" ", "\t")) and value.strip(" ") == value.lstrip(" "):
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    implicit = dumper.resolve(yaml.ScalarNode, value, (True, False))
    if implicit != "tag:yaml.org,2002:str" or not dumper.analyze_scalar(value).allow_block_plain:
        # go-yaml double-quotes what would not read back as this string; PyYAML would single-quote.
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _string)


def to_yaml(value: Any) -> bytes:
    """``value`` as the API server writes application/yaml."""
    return yaml.dump(value, Dumper=_Dumper, default_flow_style=False, sort_keys=True, allow_unicode=True,
                     width=80).encode()


def transcode(response: web.StreamResponse, media: Media | None, *, stored: bool = False) -> web.StreamResponse:
    """``response`` (a finished JSON response) in ``media``; ``stored``: the body holds objects as
    stored (a get or list), whose protobuf messages may be cached."""
    if media is None or media is Media.JSON or not isinstance(response, web.Response) \
            or response.content_type != "application/json" or not isinstance(response.body, bytes):
        return response
    body = orjson.loads(response.body)
    if media is Media.YAML:
        data = to_yaml(body)
    else:
        try:
            data = protoenc.encode(body, protoenc.CACHE if stored else None)
        except protoenc.EncodeError as e:
            log.debug("answering JSON, not protobuf: %s", e)
            return response
    headers = CIMultiDict(response.headers)
    headers.pop("Content-Length", None)
    headers["Content-Type"] = media.value
    return web.Response(body=data, status=response.status, headers=headers)
