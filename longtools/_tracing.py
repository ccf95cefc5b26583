"""OpenTelemetry traces, when asked for (``LONGTOOLS_TRACES``). API and worker processes.

The SDK already opens a span per request, continuing the ``traceparent`` a client puts in
``_meta``; with no tracer provider installed those spans would go nowhere, and the API does not
open them (``_WhenTraced`` in ``server/_handlers.py``). This installs a tracer provider that
exports them: over OTLP/HTTP (configured by the standard ``OTEL_EXPORTER_OTLP_*`` variables) or as
JSON lines to a file. The exporter packages are the optional ``longtools[otel]`` extra.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from opentelemetry import trace

from longtools._settings import Settings


class TracingUnavailable(Exception):
    """Traces were asked for but the exporter packages are not installed."""


def configure_tracing(settings: Settings) -> Callable[[], None] | None:
    """Install the exporting tracer provider; returns its shutdown (flushes), or None when off."""
    if settings.traces == "off":
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )
    except ImportError:
        raise TracingUnavailable(
            "LONGTOOLS_TRACES needs the OpenTelemetry SDK: pip install 'longtools[otel]'"
        ) from None
    processor: SpanProcessor
    if settings.traces == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        except ImportError:
            raise TracingUnavailable(
                "LONGTOOLS_TRACES=otlp needs the OTLP exporter: pip install 'longtools[otel]'"
            ) from None
        processor = BatchSpanProcessor(OTLPSpanExporter())
    else:
        path = Path(settings.traces.removeprefix("file:"))
        out = path.open("a", encoding="utf-8")  # lives as long as the process
        # One span per line, written as it ends: a file is for tests and for a quick look.
        exporter = ConsoleSpanExporter(out=out, formatter=lambda span: span.to_json(indent=None) + "\n")
        processor = SimpleSpanProcessor(exporter)
    provider = TracerProvider(resource=Resource.create({"service.name": settings.server_name}))
    provider.add_span_processor(processor)
    trace.set_tracer_provider(provider)
    return provider.shutdown
