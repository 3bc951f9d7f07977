"""Request bodies in, response bodies out.

Bodies are decoded by Content-Type the way the API server negotiates them: an empty Content-Type
means JSON (the Python client's ``create`` sends none), YAML is accepted for plain writes and for
server-side apply, Kubernetes protobuf (what Go clients and kubectl's typed commands send) for plain writes and
delete options (see ``protobuf``), the four patch types are told apart by their media type and
anything else is a 415. A body over 3 MiB is a 413 before it is parsed. Malformed JSON or YAML is a 400. Encoding is
orjson everywhere; YAML parsing is only paid for by clients that send YAML.
"""

from __future__ import annotations

from typing import Any

import orjson
import yaml

from controllers.sim import protobuf
from controllers.sim.errors import StatusError, bad_request

MAX_BODY = 3 * 1024 * 1024

MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, APPLY_PATCH, STRATEGIC_PATCH)


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def unsupported_media(ctype: str, accepted: tuple[str, ...]) -> StatusError:
    return StatusError(415, f"the body of the request was in an unknown format - accepted media types include: "
                            f"{', '.join(accepted)}", reason="UnsupportedMediaType")


MAX_DEPTH = 100


class _NoAliasLoader(yaml.SafeLoader):
    """SafeLoader without anchors/aliases: a few aliases can expand to gigabytes ("billion laughs")."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("YAML aliases are not supported")
        return super().compose_node(parent, index)


def _check_depth(doc: Any) -> Any:
    """400 for documents nested deeper than any Kubernetes object (recursion would fail later)."""
    stack = [(doc, 1)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise bad_request(f"object nesting exceeds the maximum depth of {MAX_DEPTH}")
        if isinstance(value, dict):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, list):
            stack.extend((v, depth + 1) for v in value)
    return doc


def _yaml(raw: bytes) -> Any:
    try:
        doc = yaml.load(raw.decode("utf-8"), Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as e:
        raise bad_request(f"error converting YAML to JSON: {str(e).splitlines()[0] if str(e) else e!r}") from None
    return _check_depth(_json_compatible(doc))


def _json_compatible(doc: Any) -> Any:
    """YAML can carry what JSON cannot (dates, non-string keys, NaN): reject it as the server does."""
    try:
        return orjson.loads(orjson.dumps(doc))
    except (TypeError, orjson.JSONEncodeError) as e:
        raise bad_request(f"error converting YAML to JSON: {e}") from None


def _json(raw: bytes) -> Any:
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise bad_request(f"couldn't get version/kind; json parse error: {e}") from None
    return _check_depth(doc)


def decode_object(raw: bytes, content_type: str | None) -> Any:
    """Body of a POST/PUT (or DELETE options): JSON (also when no Content-Type is given), YAML or protobuf."""
    ctype = media_type(content_type)
    if not raw.strip():
        raise bad_request("the body of the request was empty")
    if ctype in ("", "application/json", "*/*"):
        return _json(raw)
    if ctype in ("application/yaml", "application/x-yaml", "text/yaml"):
        return _yaml(raw)
    if ctype == protobuf.MEDIA_TYPE:
        return protobuf.decode(raw)
    raise unsupported_media(ctype, ("application/json", "application/yaml", protobuf.MEDIA_TYPE))


def decode_patch(raw: bytes, content_type: str | None) -> tuple[str, Any]:
    """(patch type, document) of a PATCH body."""
    ctype = media_type(content_type)
    if ctype not in PATCH_TYPES:
        raise unsupported_media(ctype, PATCH_TYPES)
    if not raw.strip():
        raise bad_request("the body of the request was empty")
    if ctype == APPLY_PATCH:
        doc = _json(raw) if raw.lstrip()[:1] == b"{" else _yaml(raw)
        if not isinstance(doc, dict):
            raise bad_request("apply patch must be an object")
        return ctype, doc
    return ctype, _json(raw)


def dumps(obj: Any) -> bytes:
    return orjson.dumps(obj)
