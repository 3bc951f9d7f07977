"""Whether, and where, a worker exports OpenTelemetry spans: the OTLP variables, read once at start.

Spans are exported when ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``
(OpenTelemetry's own variables, which the exporter reads itself along with the rest of
``OTEL_EXPORTER_OTLP_*``: headers, timeout, compression) or ``CTRLSCOPE_OTLP_ENDPOINT`` (a base URL
such as ``http://127.0.0.1:4318``, for a ctrlscope worker only; ``/v1/traces`` is appended) is set.
``OTEL_SERVICE_NAME`` names the service (default: the worker's name), ``OTEL_RESOURCE_ATTRIBUTES``
adds to the resource, ``OTEL_BSP_*`` tune the batch processor, as everywhere in OpenTelemetry.

This module imports nothing of OpenTelemetry until spans are asked for: a worker that exports none
pays no import time for the SDK (about half a second).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from controllers.clock import Clock
    from controllers.telemetry.otel import OtelObserver

OTEL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
CTRLSCOPE_VARIABLE = "CTRLSCOPE_OTLP_ENDPOINT"


def otlp_traces_endpoint() -> str | None:
    """The URL spans go to (``None``: no span export is configured)."""
    if os.environ.get(OTEL_VARIABLES[0]):
        return os.environ[OTEL_VARIABLES[0]]
    for name in (OTEL_VARIABLES[1], CTRLSCOPE_VARIABLE):
        base = os.environ.get(name)
        if base:
            return f"{base.rstrip('/')}/v1/traces"
    return None


def otlp_from_environment(*, worker: str, clock: Clock | None = None) -> OtelObserver | None:
    """An ``OtelObserver`` exporting to the configured endpoint through a batch span processor, or
    ``None`` when no endpoint is configured. Join it to the worker's observer with
    ``FanoutObserver`` and call its ``shutdown()`` when the worker stops (that flushes)."""
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
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return OtelObserver(provider, clock=clock)
