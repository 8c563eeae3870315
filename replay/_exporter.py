"""An OpenTelemetry span exporter that collects finished spans into a trace table.

Wire it to any `TracerProvider` (ours or another agent's instrumentation) and call `.table()`
whenever the rows are needed; the spans are kept as normalized records until then, so exporting
stays cheap. Like every telemetry path it never raises into the traced program: a span it
cannot convert is logged and the batch reported as failed.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Sequence

import pyarrow as pa
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import StatusCode as OtelStatusCode

from plangate.replay._openinference import rows_from_spans
from plangate.replay._spans import (
    SpanEvent,
    SpanRecord,
    StatusCode,
    time_from_nanos,
    with_dropped,
)
from plangate.replay.schema import build_table, empty_table

logger = logging.getLogger("plangate.replay")

PLANGATE_PREFIX = "plangate."
"""Attributes our harness writes; a table holding any is marked with source "plangate"."""

_STATUS: dict[OtelStatusCode, StatusCode] = {
    OtelStatusCode.UNSET: "UNSET",
    OtelStatusCode.OK: "OK",
    OtelStatusCode.ERROR: "ERROR",
}


class TraceTableExporter(SpanExporter):
    """Keeps every exported span; `.table()` returns them as a trace table. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: list[SpanRecord] = []
        self._plangate = False
        self._stopped = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Convert and keep finished spans."""
        if self._stopped:
            return SpanExportResult.FAILURE
        try:
            records = [record_from_span(span) for span in spans]
        except Exception:  # telemetry must never break the traced program
            logger.exception("could not convert %d spans for the trace table", len(spans))
            return SpanExportResult.FAILURE
        plangate = any(
            key.startswith(PLANGATE_PREFIX) for record in records for key in record.attributes
        )
        with self._lock:
            self._records.extend(records)
            self._plangate = self._plangate or plangate
        return SpanExportResult.SUCCESS

    def table(self) -> pa.Table:
        """The spans exported so far, as a trace table.

        Returns:
            The table; `source` is "plangate" when some span carries `plangate.*` attributes,
            else "opentelemetry".
        """
        with self._lock:
            records = list(self._records)
            source = "plangate" if self._plangate else "opentelemetry"
        if not records:
            return empty_table()
        return build_table(rows_from_spans(records, source=source))

    def clear(self) -> None:
        """Forget the spans exported so far."""
        with self._lock:
            self._records.clear()
            self._plangate = False

    def shutdown(self) -> None:
        """Accept no more spans (those kept stay readable)."""
        self._stopped = True

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered: spans are kept as soon as they are exported."""
        return True


def record_from_span(span: ReadableSpan) -> SpanRecord:
    """A finished OpenTelemetry SDK span as a normalized span record.

    Args:
        span: The span, as a span processor or exporter receives it.

    Returns:
        The record: hex ids, UTC times, the attributes and events as they are.

    Raises:
        ValueError: The span has no span context (never the case for SDK spans).
    """
    context = span.context
    if context is None:
        raise ValueError(f"span {span.name!r} has no span context")
    parent = span.parent
    return SpanRecord(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_span_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        start_time=time_from_nanos(span.start_time) if span.start_time else None,
        end_time=time_from_nanos(span.end_time) if span.end_time else None,
        status_code=_STATUS[span.status.status_code],
        status_message=span.status.description or None,
        attributes=with_dropped(dict(span.attributes or {}), span.dropped_attributes),
        events=tuple(
            SpanEvent(
                name=event.name,
                time=time_from_nanos(event.timestamp) if event.timestamp else None,
                attributes=dict(event.attributes or {}),
            )
            for event in span.events
        ),
    )


@functools.cache
def _resource() -> Resource:
    """The process's resource, detected once (about 1 ms each time a provider detects it)."""
    return Resource.create()


def trace_table_provider(
    *extra_processors: SpanProcessor,
) -> tuple[TracerProvider, TraceTableExporter]:
    """A tracer provider whose spans land in a new `TraceTableExporter`.

    Spans are handed over as each one ends (a `SimpleSpanProcessor`), and the attribute limit is
    raised from the SDK's 128 to 10,000 so that flattened message attributes are not dropped.

    Args:
        *extra_processors: Also receive every span, after the trace table (e.g. an export).

    Returns:
        The provider, to pass to the agent, and the exporter, to read the table from.
    """
    exporter = TraceTableExporter()
    provider = TracerProvider(
        resource=_resource(), span_limits=SpanLimits(max_span_attributes=10_000)
    )
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    for processor in extra_processors:
        provider.add_span_processor(processor)
    return provider, exporter
