"""Spans as every source gives them (`SpanRecord`), and the readers of their attribute values.

Every span source (our exporter, OTLP JSON, Phoenix dataframes, the OTLP receiver) builds
`SpanRecord`s: hex ids, aware UTC times, flat dotted attribute keys. The readers below turn one
attribute value into a column's: NaN is missing, a JSON object sent as text is parsed, and a
value that should be a whole number and is not raises `TraceTableError` naming the span.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from plangate.replay._attribute_fields import DROPPED_ATTRIBUTES
from plangate.replay.schema import STATUS_CODES, TraceTableError

StatusCode = Literal["OK", "ERROR", "UNSET"]
"""A span's OpenTelemetry status."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
"""The Unix epoch, as an aware UTC datetime."""


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
    """Epoch nanoseconds as an aware UTC datetime, cut (exactly) to microseconds.

    Raises:
        ValueError: The time is not in the years 1 to 9999.
    """
    try:
        return EPOCH + timedelta(microseconds=nanos // 1000)
    except OverflowError:
        raise ValueError(f"{nanos} ns from 1970 is not in the years 1 to 9999") from None


def with_dropped(attributes: dict[str, Any], dropped: Any) -> dict[str, Any]:
    """The attributes with the sender's count of dropped ones (`DROPPED_ATTRIBUTES`), if any."""
    count = as_count(dropped)
    if count:
        attributes[DROPPED_ATTRIBUTES] = count
    return attributes


def as_count(value: Any) -> int:
    """A count a source sends as a number or, as OTLP JSON may, as text; 0 for anything else."""
    if isinstance(value, str) and value.strip().isdecimal():
        return int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def first_key(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` that `attributes` holds."""
    for key in keys:
        if key in attributes:
            return key
    return None


def metadata_of(value: Any) -> Mapping[str, Any]:
    parsed = parsed_json(value)
    return parsed if isinstance(parsed, Mapping) else {}


def parsed_json(value: Any) -> Any:
    """A JSON object given as text, parsed; anything else as it is."""
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    return value


def as_json(value: Any) -> str:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_default
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def as_text(value: Any) -> str | None:
    if is_missing(value):
        return None
    return value if isinstance(value, str) else as_json(value)


class SpanValueError(TraceTableError):
    """An attribute value of `span` that its column cannot take.

    The caller can say where the span came from: its file, when several files are read together.
    """

    def __init__(self, problem: str, span: SpanRecord) -> None:
        super().__init__(f"span {span.span_id!r} ({span.name!r}): {problem}")
        self.span = span

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return TraceTableError, (str(self),)  # the message across processes; the span stays


def as_integer(value: Any, key: str, span: SpanRecord) -> int | None:
    if is_missing(value):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdecimal():
        return int(value)
    raise SpanValueError(f"{key} is {value!r}, expected a whole number", span)


def as_number(value: Any, key: str, span: SpanRecord) -> float | None:
    if is_missing(value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise SpanValueError(f"{key} is {value!r}, expected a number", span) from None
    return None if math.isnan(number) else number
