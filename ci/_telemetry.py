"""Where spans go: in memory, OTLP over HTTP, or nowhere.

The harness only uses the OpenTelemetry API; this module wires an SDK `TracerProvider` for the
command line and for Python callers who do not bring their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.harness import ConfigError
from plangate.harness.semconv import PROJECT_NAME

Exporter = Literal["memory", "otlp", "none"]
"""Where spans go."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Telemetry:
    """A wired tracer provider and, for `memory`, the exporter that holds the spans."""

    provider: TracerProvider | None
    """Pass to `Agent(tracer_provider=...)`; None when tracing is off."""
    memory: InMemorySpanExporter | None = None
    """The finished spans, for `memory`."""

    def shutdown(self) -> None:
        """Flush and stop exporting."""
        if self.provider is not None:
            self.provider.force_flush()
            self.provider.shutdown()


def telemetry(
    exporter: Exporter = "memory",
    *,
    endpoint: str | None = None,
    project: str = "plangate",
) -> Telemetry:
    """Wire spans to `exporter`; `endpoint` is the OTLP/HTTP traces URL for `otlp`."""
    if exporter == "none":
        return Telemetry(provider=None)
    provider = TracerProvider(
        resource=Resource.create({PROJECT_NAME: project}),
        # The SDK's default of 128 attributes drops most of an LLM span's messages.
        span_limits=SpanLimits(max_span_attributes=10_000),
    )
    if exporter == "memory":
        memory = InMemorySpanExporter()
        provider.add_span_processor(SimpleSpanProcessor(memory))
        return Telemetry(provider=provider, memory=memory)
    if exporter == "otlp":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        if not endpoint:
            raise ConfigError(
                "the otlp exporter needs an endpoint, e.g. http://127.0.0.1:6006/v1/traces"
            )
        from plangate.replay import RedactingExporter  # spans leave the process: redact them

        exporter_ = RedactingExporter(OTLPSpanExporter(endpoint=endpoint))
        provider.add_span_processor(BatchSpanProcessor(exporter_))
        return Telemetry(provider=provider)
    raise ConfigError(f"unknown exporter {exporter!r}; choose one of: memory, otlp, none")
