"""A trace table's rows as OpenTelemetry spans again, in OpenInference's names.

A team's agent's replay arrives as a trace table (its own spans, or what plangate's endpoint
saw), not as live spans; to send it where the reference agent's spans go (a Phoenix
experiment's run, say), each row becomes a `ReadableSpan` again. The columns go back to the
attributes `rows_from_spans` read them from, and the row's `attributes` JSON is merged back in
(an object or a mixed list as JSON text, as OpenInference sends `metadata`). With `under`, every
row moves into that span's trace and the roots become its children: a replay nested under the
span that ran it.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pyarrow as pa
from opentelemetry.sdk.trace import Event, ReadableSpan
from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

import plangate.replay.schema as schema
from plangate.harness.semconv import (
    INPUT_VALUE,
    ITERATION,
    LLM_MODEL_NAME,
    OUTPUT_VALUE,
    PLAN,
    SESSION_ID,
    SPAN_KIND,
    STOP_REASON,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOOL_ID,
    TOOL_NAME,
    TURN_INDEX,
)

_ATTRIBUTE_OF = {
    schema.SPAN_KIND: SPAN_KIND,
    schema.SESSION_ID: SESSION_ID,
    schema.TURN_INDEX: TURN_INDEX,
    schema.ITERATION: ITERATION,
    schema.TOOL_NAME: TOOL_NAME,
    schema.TOOL_CALL_ID: TOOL_ID,
    schema.MODEL_NAME: LLM_MODEL_NAME,
    schema.TOKENS_PROMPT: TOKENS_PROMPT,
    schema.TOKENS_COMPLETION: TOKENS_COMPLETION,
    schema.INPUT_VALUE: INPUT_VALUE,
    schema.OUTPUT_VALUE: OUTPUT_VALUE,
    schema.PLAN: PLAN,
    schema.STOP_REASON: STOP_REASON,
}
"""The attribute each column was read from."""
_STATUS = {"OK": StatusCode.OK, "ERROR": StatusCode.ERROR, "UNSET": StatusCode.UNSET}
_PLAIN = (str, bool, int, float)


def spans_from_table(table: pa.Table, *, under: SpanContext | None = None) -> list[ReadableSpan]:
    """Each row of `table` as a finished span; with `under`, moved into that span's trace."""
    return [_span(row, under) for row in table.to_pylist()]


def _span(row: dict[str, Any], under: SpanContext | None) -> ReadableSpan:
    trace_id = under.trace_id if under is not None else int(row[schema.TRACE_ID], 16)
    parent_id = row[schema.PARENT_SPAN_ID]
    parent = under if parent_id is None else _context(trace_id, parent_id)
    return ReadableSpan(
        name=row[schema.NAME],
        context=_context(trace_id, row[schema.SPAN_ID]),
        parent=parent,
        attributes=_attributes(row),
        events=[_event(e) for e in json.loads(row[schema.EVENTS] or "[]")],
        status=Status(_STATUS[row[schema.STATUS_CODE]], row[schema.STATUS_MESSAGE]),
        start_time=_nanos(row[schema.START_TIME]),
        end_time=_nanos(row[schema.END_TIME]),
    )


def _attributes(row: dict[str, Any]) -> dict[str, Any]:
    rest = json.loads(row[schema.ATTRIBUTES] or "{}")
    out = {key: _value(value) for key, value in rest.items() if value is not None}
    out.update(
        (key, row[column]) for column, key in _ATTRIBUTE_OF.items() if row[column] is not None
    )
    return out


def _event(event: dict[str, Any]) -> Event:
    time = event.get("time")
    stamp = _nanos(datetime.fromisoformat(time)) if time else None
    attributes = {k: _value(v) for k, v in (event.get("attributes") or {}).items()}
    return Event(event["name"], attributes, timestamp=stamp)


def _value(value: Any) -> Any:
    """An attribute value OpenTelemetry takes: plain values and plain lists as they are."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _context(trace_id: int, span_id: str) -> SpanContext:
    return SpanContext(trace_id, int(span_id, 16), False, TraceFlags(TraceFlags.SAMPLED))


def _nanos(moment: datetime | None) -> int | None:
    if moment is None:
        return None
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000
