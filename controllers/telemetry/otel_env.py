"""Whether, and where, a worker exports OpenTelemetry spans: the OTLP variables, read once at start.

Spans are exported when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``
(OpenTelemetry's own variables, which the exporter reads itself along with the rest of
``OTEL_EXPORTER_OTLP_*``: headers, timeout, compression) or ``CTRLSCOPE_OTLP_ENDPOINT`` (a base URL
such as ``http://127.0.0.1:4318``, for a ctrlscope worker only; ``/v1/traces`` is appended) is set.
``OTEL_SERVICE_NAME`` names the service (default: the worker's name), ``OTEL_RESOURCE_ATTRIBUTES``
adds to the resource, ``OTEL_BSP_*`` tune the batch processor, as everywhere in OpenTelemetry.

A value that is not an ``http://`` or ``https://`` URL with a host (``localhost:4318``, a typo in the
port) is a ``ValueError`` naming the variable, raised when the worker starts: the exporter itself would
only log, on its own thread, that each batch failed. So is an ``OTEL_EXPORTER_OTLP_(TRACES_)PROTOCOL``
other than ``http/protobuf``: the sink exports over OTLP/HTTP only (gRPC needs another exporter).

This module imports nothing of OpenTelemetry until spans are asked for: a worker that exports none
pays no import time for the SDK (about half a second).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from controllers.clock import Clock
    from controllers.telemetry.otel import OtelObserver

OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CTRLSCOPE_VARIABLE = "CTRLSCOPE_OTLP_ENDPOINT"


PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
PROTOCOL = "http/protobuf"
EXAMPLE = "http://127.0.0.1:4318"


def _checked_url(name: str, value: str) -> str:
    """``value`` when it is an http(s) URL with a host (and a numeric port, if any); else a
    ValueError that names the variable and says what is expected."""
    parts = urlsplit(value.strip())
    try:
        parts.port  # noqa: B018 (parsing it is the check: a non-numeric or out-of-range port raises)
    except ValueError as exc:
        raise ValueError(f"{name}={value!r}: {exc} (expected a URL such as {EXAMPLE})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{name}={value!r} is not an http:// or https:// URL with a host "
                         f"(expected a URL such as {EXAMPLE}, the collector's OTLP/HTTP port)")
    return value.strip()


def otlp_traces_endpoint() -> str | None:
    """The URL spans go to (``None``: no span export is configured); a ValueError naming the
    variable when the configured value is not a usable OTLP/HTTP URL or protocol."""
    for name in PROTOCOL_VARIABLES:
        protocol = os.environ.get(name)
        if protocol and protocol.strip() != PROTOCOL:
            raise ValueError(f"{name}={protocol!r}: ctrlscope exports spans over OTLP/HTTP only ({PROTOCOL}); "
                             "unset it or point the endpoint at the collector's OTLP/HTTP port (4318)")
    if os.environ.get(OTEL_VARIABLES[0], "").strip():
        return _checked_url(OTEL_VARIABLES[0], os.environ[OTEL_VARIABLES[0]])
    for name in (OTEL_VARIABLES[1], CTRLSCOPE_VARIABLE):
        base = os.environ.get(name, "").strip()
        if base:
            return f"{_checked_url(name, base).rstrip('/')}/v1/traces"
    return None


def otlp_from_environment(*, worker: str, clock: Clock | None = None) -> OtelObserver | None:
    """An ``OtelObserver`` exporting to the configured endpoint through a batch span processor, or
    ``None`` when no endpoint is configured (a ValueError when one is, wrongly). Join it to the
    worker's observer with ``FanoutObserver`` and call its ``shutdown()`` when the worker stops
    (that flushes, for a bounded time)."""
    endpoint = otlp_traces_endpoint()
    if endpoint is None:
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from controllers.telemetry.otel import OtelObserver

    attributes: dict[str, str] = {"ctrlscope.worker": worker}
    if not os.environ.get("OTEL_SERVICE_NAME"):  # the variable, when set, names the service
        attributes["service.name"] = worker
    provider = TracerProvider(resource=Resource.create(attributes))
    exporter = OTLPSpanExporter(endpoint=endpoint)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    return OtelObserver(provider, clock=clock, exporter=exporter)
