"""OpenInference spans, from any source, as trace-table rows.

Every span source (our exporter, OTLP JSON files, Phoenix dataframes) first builds `SpanRecord`s:
ids as lowercase hex, times as aware UTC datetimes, attributes as flat dotted keys. Then
`rows_from_spans` maps the OpenInference and plangate attribute names onto the trace table's
columns, one row per span; what no column holds goes to the row's `attributes` JSON.

Conventions:
- `session_id` is the first `session.id` found on a trace's spans and holds for every span of
  that trace (a plain tracer stamps it on the root only); a trace without one is its own session,
  named after its trace id.
- `turn_index` is `plangate.turn_index` where a trace has it; otherwise the rank of the trace's
  root start time among the session's other traces without it (untimed traces come last, in the
  order they appeared).
- `tool_args` is the canonical `input.value` of a TOOL span, where OpenInference puts the call
  arguments. Only when a TOOL span has no `input.value` does `tool.parameters` stand in: it
  normally holds the tool's JSON schema, but some instrumentations put the arguments there.
- `variant`, `task_id`, `trial` and `reward` come from the `metadata` JSON object (text, or a
  dict when Phoenix has already parsed it); `metadata` itself stays in `attributes`, parsed.
- NaN counts as missing; a value that should be a whole number and is not raises
  `TraceTableError` naming the span and the attribute.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import plangate.replay.schema as schema
from plangate.harness.semconv import (
    INPUT_VALUE,
    ITERATION,
    LLM_MODEL_NAME,
    LLM_PROMPT_TEMPLATE_VARIABLES,
    METADATA,
    OUTPUT_VALUE,
    PLAN,
    SESSION_ID,
    SPAN_KIND,
    STOP_REASON,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOOL_ID,
    TOOL_NAME,
    TOOL_PARAMETERS,
    TURN_INDEX,
)
from plangate.replay.schema import (
    SPAN_KINDS,
    STATUS_CODES,
    TASK_ID,
    TraceTableError,
    canonical_arguments,
)

JSON_VALUED = (METADATA, TOOL_PARAMETERS, LLM_PROMPT_TEMPLATE_VARIABLES)
"""Attributes whose value is a JSON object sent as text (Phoenix parses them on ingestion)."""

MAPPED = frozenset(
    {SPAN_KIND, SESSION_ID, INPUT_VALUE, OUTPUT_VALUE, LLM_MODEL_NAME, TOKENS_PROMPT,
     TOKENS_COMPLETION, TOOL_NAME, TOOL_ID, ITERATION, TURN_INDEX, PLAN, STOP_REASON}
)  # fmt: skip
"""Attributes that have a column of their own, and so are left out of the `attributes` JSON."""

StatusCode = Literal["OK", "ERROR", "UNSET"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanEvent:
    """An event recorded on a span."""

    name: str
    """What happened (`gate_bounce`, `stop`, `exception`, …)."""
    time: datetime | None = None
    """When, as an aware UTC datetime; None when the source has no time."""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """The event's attributes, flat dotted keys."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SpanRecord:
    """One span, normalized from whichever source produced it."""

    trace_id: str
    """The trace id as 32 lowercase hex digits."""
    span_id: str
    """The span id as 16 lowercase hex digits."""
    parent_span_id: str | None = None
    """The parent's span id; None for a root span."""
    name: str = ""
    """The span name."""
    start_time: datetime | None = None
    """Start, as an aware UTC datetime."""
    end_time: datetime | None = None
    """End, as an aware UTC datetime."""
    status_code: StatusCode = "UNSET"
    """The OpenTelemetry status."""
    status_message: str | None = None
    """The status description, usually set only with ERROR."""
    attributes: Mapping[str, Any] = field(default_factory=dict)
    """Span attributes, flat dotted keys (`llm.input_messages.0.message.role`)."""
    events: tuple[SpanEvent, ...] = ()
    """Span events, in order."""

    def __post_init__(self) -> None:
        if self.status_code not in STATUS_CODES:
            raise TraceTableError(
                f"span {self.span_id!r}: status {self.status_code!r} is not one of "
                f"{', '.join(sorted(STATUS_CODES))}"
            )
        for moment in (self.start_time, self.end_time):
            if moment is not None and moment.tzinfo is None:
                raise TraceTableError(f"span {self.span_id!r}: time {moment} has no time zone")


def time_from_nanos(nanos: int) -> datetime:
    """Epoch nanoseconds as an aware UTC datetime, cut (exactly) to microseconds."""
    return _EPOCH + timedelta(microseconds=nanos // 1000)


def rows_from_spans(spans: Iterable[SpanRecord], *, source: str) -> list[dict[str, Any]]:
    """Trace-table rows for spans, ordered by session, turn, start time, then original order.

    Args:
        spans: The spans, of any number of traces and sessions.
        source: What produced them (the `source` column).

    Returns:
        One row mapping per span, ready for `build_table`.

    Raises:
        TraceTableError: An attribute that must be a whole number (`plangate.iteration`,
            `plangate.turn_index`, token counts, `trial`) is not one.
    """
    spans = list(spans)
    traces: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        traces[span.trace_id].append(span)
    sessions = {trace_id: _session(trace_id, members) for trace_id, members in traces.items()}
    turns = _turns(traces, sessions)
    keyed = []
    for position, span in enumerate(spans):
        row = _row(span, sessions[span.trace_id], turns[span.trace_id], source)
        start = span.start_time
        key = (row[schema.SESSION_ID], row[schema.TURN_INDEX], start is None, start or _EPOCH)
        keyed.append(((*key, position), row))
    keyed.sort(key=lambda pair: pair[0])
    return [row for _, row in keyed]


def _session(trace_id: str, spans: list[SpanRecord]) -> str:
    for span in spans:
        value = span.attributes.get(SESSION_ID)
        if not _missing(value) and str(value):
            return str(value)
    return trace_id


def _turns(traces: Mapping[str, list[SpanRecord]], sessions: Mapping[str, str]) -> dict[str, int]:
    """Each trace's turn index: its own attribute, else its rank in the session by start time."""
    turns: dict[str, int] = {}
    unnumbered: dict[str, list[tuple[bool, datetime, int, str]]] = defaultdict(list)
    for position, (trace_id, spans) in enumerate(traces.items()):
        explicit = _first_integer(spans, TURN_INDEX)
        if explicit is not None:
            turns[trace_id] = explicit
            continue
        start = _root_start(spans)
        unnumbered[sessions[trace_id]].append((start is None, start or _EPOCH, position, trace_id))
    for entries in unnumbered.values():
        for rank, entry in enumerate(sorted(entries)):
            turns[entry[3]] = rank
    return turns


def _first_integer(spans: list[SpanRecord], key: str) -> int | None:
    for span in spans:
        value = _integer(span.attributes.get(key), key, span)
        if value is not None:
            return value
    return None


def _root_start(spans: list[SpanRecord]) -> datetime | None:
    ids = {span.span_id for span in spans}
    starts = [
        span.start_time
        for span in spans
        if span.start_time is not None and span.parent_span_id not in ids
    ]
    return min(starts) if starts else None


def _row(span: SpanRecord, session_id: str, turn_index: int, source: str) -> dict[str, Any]:
    attributes = {k: v for k, v in span.attributes.items() if not _missing(v)}
    kind = _span_kind(attributes.get(SPAN_KIND))
    metadata = _metadata(attributes.get(METADATA))
    tool = kind == "TOOL"
    output = _text(attributes.get(OUTPUT_VALUE))
    return {
        schema.SESSION_ID: session_id,
        schema.TURN_INDEX: turn_index,
        schema.TRACE_ID: span.trace_id,
        schema.SPAN_ID: span.span_id,
        schema.PARENT_SPAN_ID: span.parent_span_id,
        schema.SPAN_KIND: kind,
        schema.NAME: span.name,
        schema.START_TIME: span.start_time,
        schema.END_TIME: span.end_time,
        schema.STATUS_CODE: span.status_code,
        schema.STATUS_MESSAGE: span.status_message or None,
        schema.ITERATION: _integer(attributes.get(ITERATION), ITERATION, span),
        schema.TOOL_NAME: _text(attributes.get(TOOL_NAME)),
        schema.TOOL_CALL_ID: _text(attributes.get(TOOL_ID)),
        schema.TOOL_ARGS: _tool_args(attributes) if tool else None,
        schema.TOOL_OUTPUT: output if tool else None,
        schema.MODEL_NAME: _text(attributes.get(LLM_MODEL_NAME)),
        schema.TOKENS_PROMPT: _integer(attributes.get(TOKENS_PROMPT), TOKENS_PROMPT, span),
        schema.TOKENS_COMPLETION: _integer(
            attributes.get(TOKENS_COMPLETION), TOKENS_COMPLETION, span
        ),
        schema.INPUT_VALUE: _text(attributes.get(INPUT_VALUE)),
        schema.OUTPUT_VALUE: output,
        schema.PLAN: _text(attributes.get(PLAN)),
        schema.EVENTS: _events_json(span.events),
        schema.ATTRIBUTES: _rest_json(attributes, kind),
        schema.SOURCE: source,
        schema.VARIANT: _text(metadata.get("variant")),
        schema.STOP_REASON: _text(attributes.get(STOP_REASON)),
        schema.REWARD: _number(metadata.get("reward"), "metadata.reward", span),
        schema.TASK_ID: _text(metadata.get(TASK_ID)),
        schema.TRIAL: _integer(metadata.get("trial"), "metadata.trial", span),
    }


def _span_kind(value: Any) -> str:
    kind = str(value).upper() if isinstance(value, str) else "UNKNOWN"
    return kind if kind in SPAN_KINDS else "UNKNOWN"


def _tool_args(attributes: Mapping[str, Any]) -> str | None:
    arguments = attributes.get(INPUT_VALUE, attributes.get(TOOL_PARAMETERS))
    return None if arguments is None else canonical_arguments(arguments)


def _metadata(value: Any) -> Mapping[str, Any]:
    parsed = _parsed(value)
    return parsed if isinstance(parsed, Mapping) else {}


def _parsed(value: Any) -> Any:
    """A JSON object given as text, parsed; anything else as it is."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    return value


def _rest_json(attributes: Mapping[str, Any], kind: str) -> str | None:
    rest = {
        key: _parsed(value) if is_json_valued(key) else value
        for key, value in attributes.items()
        if key not in MAPPED or (key == SPAN_KIND and value != kind)
    }
    return _json(rest) if rest else None


def is_json_valued(key: str) -> bool:
    """Whether an attribute holds a JSON object as text (`metadata`, `tool.parameters`, …)."""
    return any(key == name or key.endswith(f".{name}") for name in JSON_VALUED)


def _events_json(events: tuple[SpanEvent, ...]) -> str | None:
    if not events:
        return None
    return _json(
        [
            {
                "name": event.name,
                "time": event.time.isoformat() if event.time is not None else None,
                "attributes": {k: v for k, v in event.attributes.items() if not _missing(v)},
            }
            for event in events
        ]
    )


def _json(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _text(value: Any) -> str | None:
    if _missing(value):
        return None
    return value if isinstance(value, str) else _json(value)


def _integer(value: Any, key: str, span: SpanRecord) -> int | None:
    if _missing(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    raise TraceTableError(
        f"span {span.span_id!r} ({span.name!r}): {key} is {value!r}, expected a whole number"
    )


def _number(value: Any, key: str, span: SpanRecord) -> float | None:
    if _missing(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TraceTableError(
            f"span {span.span_id!r} ({span.name!r}): {key} is {value!r}, expected a number"
        ) from None
    return None if math.isnan(number) else number
