"""Where the examples' spans go: to the OTLP endpoint plangate names for the turn, and nowhere else.

plangate hands each turn an OTLP/HTTP endpoint (`TurnInput.otlp_endpoint`, one route per slot:
two turns running at once have two). A framework's instrumentation writes to one tracer
provider, `TRACER_PROVIDER`, for the whole process (the Agents SDK's instrumentor is a
singleton), so the provider hands each span to the exporter of the turn it started in:
`Exporters.turn(endpoint)` marks the turn's code (a context variable, which the turn's tasks
inherit), and a span started outside any marked turn is dropped. A turn without an endpoint
exports nothing.

`Exporters` keeps one `BatchSpanProcessor` with an `OTLPSpanExporter` per endpoint (plangate
names the same route turn after turn), flushes it when the turn ends, so plangate has the
turn's spans when the turn returns, and shuts them down on `aclose`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

TRACES_PATH = "/v1/traces"
"""What an OTLP/HTTP exporter given a full URL needs after the endpoint (the SDK appends it only
to `OTEL_EXPORTER_OTLP_ENDPOINT`)."""

_TURN: ContextVar[SpanProcessor | None] = ContextVar("examples_turn_spans", default=None)
"""The processor of the turn whose code is running (None: no turn, or one without spans)."""


class _ToTheTurn(SpanProcessor):
    """Hands each span to the processor of the turn it started in; drops the others."""

    def __init__(self) -> None:
        self._of: dict[int, SpanProcessor] = {}  # span id → its turn's processor, until it ends

    def on_start(self, span: Span, parent_context: Context | None = None) -> None:
        processor = _TURN.get()
        if processor is not None and span.context is not None:
            self._of[span.context.span_id] = processor
            processor.on_start(span, parent_context)

    def on_end(self, span: ReadableSpan) -> None:
        processor = self._of.pop(span.context.span_id, None) if span.context else None
        if processor is not None:
            processor.on_end(span)


TRACER_PROVIDER = TracerProvider(span_limits=SpanLimits(max_span_attributes=10_000))
"""The tracer provider both examples instrument their framework with.

OpenTelemetry keeps 128 attributes a span by default and drops the oldest beyond: OpenInference
writes each message of a model call as attributes of its own, so from about the twentieth call
of a turn the Agents SDK's model spans lost their kind, system and model name (the first ones
set), and with the model name their price."""
TRACER_PROVIDER.add_span_processor(_ToTheTurn())


@dataclass(slots=True)
class Exporters:
    """An OTLP/HTTP exporter per endpoint the turns name, made once, shut down by `aclose`."""

    made: dict[str, BatchSpanProcessor] = field(default_factory=dict)

    @asynccontextmanager
    async def turn(self, endpoint: str | None) -> AsyncIterator[None]:
        """Send the spans that start inside to `endpoint`; flush them when the block ends.

        Args:
            endpoint: The turn's OTLP endpoint (`/v1/traces` is appended); None exports
                nothing.
        """
        if endpoint is None:
            yield
            return
        if endpoint not in self.made:
            exporter = OTLPSpanExporter(endpoint=endpoint.rstrip("/") + TRACES_PATH)
            self.made[endpoint] = BatchSpanProcessor(exporter)
        processor = self.made[endpoint]
        token = _TURN.set(processor)
        try:
            yield
        finally:
            _TURN.reset(token)
            await asyncio.to_thread(processor.force_flush)

    async def aclose(self) -> None:
        """Flush and stop every exporter."""
        made, self.made = list(self.made.values()), {}
        for processor in made:
            await asyncio.to_thread(processor.shutdown)
