"""Spans with their secrets redacted, for every span that leaves the process (Phoenix, OTLP)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.attributes import BoundedAttributes
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.trace import Status

from plangate.replay._redact import Redactor


def redacted_span(
    span: ReadableSpan,
    redactor: Redactor,
    *,
    attributes: dict[str, Any] | None = None,
    resource: Resource | None = None,
) -> ReadableSpan:
    """A copy of `span` whose string attributes, events and status message are redacted.

    `attributes` replaces the span's own (before redaction), `resource` its resource. The count
    of attributes the span's SDK dropped over its limit stays with the copy (OTLP sends it).
    """
    status = span.status
    if status.description:
        status = Status(status.status_code, redactor.text(status.description))
    return ReadableSpan(
        name=span.name,
        context=span.context,
        parent=span.parent,
        resource=resource if resource is not None else span.resource,
        attributes=_keeping_dropped(
            _redacted(attributes if attributes is not None else span.attributes, redactor),
            span.dropped_attributes,
        ),
        events=[
            Event(e.name, _redacted(e.attributes, redactor), timestamp=e.timestamp)
            for e in span.events
        ],
        links=span.links,
        kind=span.kind,
        status=status,
        start_time=span.start_time,
        end_time=span.end_time,
        instrumentation_scope=span.instrumentation_scope,
    )


def _keeping_dropped(attributes: dict[str, Any], dropped: int) -> Mapping[str, Any]:
    """The attributes, with the count of those dropped (the SDK's own kind, as spans carry it)."""
    if not dropped:
        return attributes
    kept = BoundedAttributes(attributes=attributes, immutable=True)
    kept.dropped = dropped
    return kept


def _redacted(attributes: Any, redactor: Redactor) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in (attributes or {}).items():
        if isinstance(value, str):
            value = redactor.text(value)
        elif isinstance(value, tuple | list) and any(isinstance(v, str) for v in value):
            value = tuple(redactor.text(v) if isinstance(v, str) else v for v in value)
        out[key] = value
    return out


class RedactingExporter(SpanExporter):
    """Exports redacted copies of spans to another exporter (OTLP, say)."""

    def __init__(self, exporter: SpanExporter, redactor: Redactor | None = None) -> None:
        self._exporter = exporter
        self._redactor = redactor or Redactor()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Export the redacted copies."""
        return self._exporter.export([redacted_span(s, self._redactor) for s in spans])

    def shutdown(self) -> None:
        """Shut the wrapped exporter down."""
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Flush the wrapped exporter."""
        return self._exporter.force_flush(timeout_millis)
