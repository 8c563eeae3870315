"""Spans, from any source, as trace-table rows (OpenInference, OpenTelemetry GenAI).

Every span source (our exporter, OTLP JSON, Phoenix dataframes) first builds `SpanRecord`s (hex
ids, aware UTC times, flat dotted attribute keys); `rows_from_spans` maps attributes onto the
trace table's columns, one row per span, the rest to the row's `attributes` JSON. A span is
read in one convention (`span_convention`, a lookup or two): OpenInference's with an
`openinference.span.kind` (not UNKNOWN); else the GenAI conventions' with a
`gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.agent.name` or pydantic-ai span name.

Conventions:
- `session_id` is a trace's first `session.id`, else `gen_ai.conversation.id`, else its id.
- a turn is a trace: its roots (no parent, or one not in the input) and all under them, split
  by trial: a span's trial is its own (`metadata`'s `trial`, `metadata.trial`, `plangate.trial`,
  `trial`) or its nearest ancestor's. `turn_index` is `plangate.turn_index` where a turn has it,
  else the rank of its root's start among its session's turns of the same trial without one
  (untimed last, in input order). A session of several trials becomes one per trial,
  `<session>/trial-<n>`, its rows' `task_id` defaulting to `<session>#<turn_index>`: repeats
  of one task, never one merged turn.
- `tool_args` is the canonical `input.value` of a TOOL span (else `tool.parameters`, where some
  instrumentations put the arguments), or `gen_ai.tool.call.arguments` (`tool_arguments`).
- `variant`, `task_id`, `trial` and `reward` come from the `metadata` JSON object (text, or a
  dict when Phoenix has already parsed it); `metadata` itself stays in `attributes`, parsed.
- NaN is missing; a value that should be a whole number and is not raises `TraceTableError`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NamedTuple

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
    TRIAL,
    TURN_INDEX,
    GenAI,
    PydanticAI,
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

GENAI_KINDS: Mapping[str, str] = {
    GenAI.CHAT: "LLM", GenAI.TEXT_COMPLETION: "LLM", GenAI.GENERATE_CONTENT: "LLM",
    GenAI.EMBEDDINGS: "EMBEDDING", GenAI.RETRIEVAL: "RETRIEVER", GenAI.EXECUTE_TOOL: "TOOL",
    GenAI.CREATE_AGENT: "AGENT", GenAI.INVOKE_AGENT: "AGENT", GenAI.INVOKE_WORKFLOW: "CHAIN",
}  # fmt: skip
"""The span kind of each `gen_ai.operation.name`; another operation's span is UNKNOWN."""

_NAMED_KINDS = {PydanticAI.AGENT_RUN_SPAN: "AGENT", PydanticAI.TOOL_SPAN: "TOOL"}  # by name only

_GENAI_COLUMNS = {
    schema.MODEL_NAME: (GenAI.RESPONSE_MODEL, GenAI.REQUEST_MODEL, LLM_MODEL_NAME),
    schema.TOOL_NAME: (GenAI.TOOL_NAME, TOOL_NAME),
    schema.TOOL_CALL_ID: (GenAI.TOOL_CALL_ID, TOOL_ID),
    schema.INPUT_VALUE: (INPUT_VALUE, GenAI.INPUT_MESSAGES, GenAI.TOOL_CALL_ARGUMENTS,
                         PydanticAI.TOOL_ARGUMENTS),
    schema.OUTPUT_VALUE: (OUTPUT_VALUE, GenAI.OUTPUT_MESSAGES, GenAI.TOOL_CALL_RESULT,
                          PydanticAI.TOOL_RESPONSE, PydanticAI.FINAL_RESULT),
    schema.TOKENS_PROMPT: (GenAI.USAGE_INPUT_TOKENS, GenAI.USAGE_PROMPT_TOKENS, TOKENS_PROMPT),
    schema.TOKENS_COMPLETION: (GenAI.USAGE_OUTPUT_TOKENS, GenAI.USAGE_COMPLETION_TOKENS,
                               TOKENS_COMPLETION),
}  # fmt: skip
"""Where a GenAI span's columns come from, the first attribute present winning (some GenAI
instrumentations write OpenInference's names too)."""
_GENAI_ARGUMENTS = (GenAI.TOOL_CALL_ARGUMENTS, PydanticAI.TOOL_ARGUMENTS, INPUT_VALUE)
_COUNTS = frozenset({schema.TOKENS_PROMPT, schema.TOKENS_COMPLETION})
_GENAI_MAPPED = (SESSION_ID, ITERATION, TURN_INDEX, PLAN, STOP_REASON)  # and what columns read
_TRIAL_KEYS = (f"{METADATA}.trial", TRIAL, "trial")  # after `metadata`'s `trial`
TRIAL_SESSION = "{session}/trial-{trial}"
"""The session of one trial, where a session holds several."""

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
        spans: The spans, of any traces and sessions, in OpenInference or GenAI conventions.
        source: What produced them (the `source` column).

    Returns:
        One row mapping per span, ready for `build_table`.

    Raises:
        TraceTableError: An attribute that must be a whole number (`plangate.iteration`,
            `plangate.turn_index`, token counts, `trial`) is not one.
    """
    spans = list(spans)
    trials = [_trial(span) for span in spans]
    turns = _turns(spans, trials)
    keyed = []
    for position, span in enumerate(spans):
        row = _row(span, turns[position], trials[position], source)
        start = span.start_time
        key = (row[schema.SESSION_ID], row[schema.TURN_INDEX], start is None, start or _EPOCH)
        keyed.append(((*key, position), row))
    keyed.sort(key=lambda pair: pair[0])
    return [row for _, row in keyed]


def span_convention(span: SpanRecord) -> Literal["openinference", "genai"] | None:
    """The convention a span is read in: "openinference" (or plangate's), "genai", or None."""
    genai = _genai_kind(span.attributes, span.name) is not None
    return "genai" if genai else None if MAPPED.isdisjoint(span.attributes) else "openinference"


class _Turn(NamedTuple):
    session_id: str
    turn_index: int
    task_id: str | None = None  # a repeat's task, where its spans name none


_Unit = tuple[str, int | None]  # the spans of one turn: a trace, and the trial they belong to


def _turns(spans: list[SpanRecord], trials: list[int | None]) -> list[_Turn]:
    """Each span's turn (by position)."""
    traces: dict[str, list[int]] = defaultdict(list)
    for position, span in enumerate(spans):
        traces[span.trace_id].append(position)
    sessions: dict[str, str] = {}
    units: dict[_Unit, list[SpanRecord]] = defaultdict(list)
    inherited: dict[str, list[int | None]] = {}
    for trace_id, positions in traces.items():
        members = [spans[p] for p in positions]
        sessions[trace_id] = _session(trace_id, members)
        inherited[trace_id] = own = _inherited_trials(members, [trials[p] for p in positions])
        if own.count(own[0]) == len(own):  # the usual: one trial (or none), one turn
            units[trace_id, own[0]] = members
            continue
        for span, trial in zip(members, own, strict=True):
            units[trace_id, trial].append(span)
    keys = _keys(_turn_indices(units, sessions), sessions)
    turns = {
        position: keys[trace_id, trial]
        for trace_id, positions in traces.items()
        for position, trial in zip(positions, inherited[trace_id], strict=True)
    }
    return [turns[position] for position in range(len(spans))]


def _session(trace_id: str, spans: list[SpanRecord]) -> str:
    found = (s.attributes.get(key) for key in (SESSION_ID, GenAI.CONVERSATION_ID) for s in spans)
    return next((str(value) for value in found if not _missing(value) and str(value)), trace_id)


def _trial(span: SpanRecord) -> int | None:
    """The span's own trial: `metadata`'s `trial`, else the first plain trial attribute."""
    attributes = span.attributes
    value = _metadata(attributes[METADATA]).get("trial") if METADATA in attributes else None
    if not _missing(value):
        return _integer(value, "metadata.trial", span)
    key = _found(attributes, _TRIAL_KEYS)
    return None if key is None else _integer(attributes[key], key, span)


def _inherited_trials(spans: list[SpanRecord], own: list[int | None]) -> list[int | None]:
    """Each span's trial: its own, else its nearest ancestor's (in the same trace)."""
    if own.count(None) == len(own):
        return own
    parents = {span.span_id: span.parent_span_id for span in spans}
    roots = [i for i, span in enumerate(spans) if span.parent_span_id not in parents]
    if len(roots) == 1 and own.count(None) == len(own) - 1 and own[roots[0]] is not None:
        return [own[roots[0]]] * len(own)  # the usual: the root alone says
    known: dict[str, int | None] = {}
    known.update((s.span_id, t) for s, t in zip(spans, own, strict=True) if t is not None)
    trials = []
    for span in spans:
        path: list[str] = []  # walk up to a known trial, and remember it on the way
        current: str | None = span.span_id
        while current in parents and current not in known and len(path) <= len(parents):
            path.append(current)
            current = parents[current]
        trial = known.get(current) if current is not None else None
        known.update(dict.fromkeys(path, trial))
        trials.append(trial)
    return trials


def _turn_indices(
    units: Mapping[_Unit, list[SpanRecord]], sessions: Mapping[str, str]
) -> dict[_Unit, int]:
    """Each turn's index: its own attribute, else its rank in the session's trial by start."""
    turns: dict[_Unit, int] = {}
    unnumbered: dict[_Unit, list[tuple[bool, datetime, int, _Unit]]] = defaultdict(list)
    for position, (unit, spans) in enumerate(units.items()):
        found = (_integer(s.attributes.get(TURN_INDEX), TURN_INDEX, s) for s in spans)
        explicit = next((index for index in found if index is not None), None)
        if explicit is not None:
            turns[unit] = explicit
            continue
        start = _root_start(spans)
        group = (sessions[unit[0]], unit[1])  # the session and trial
        unnumbered[group].append((start is None, start or _EPOCH, position, unit))
    for entries in unnumbered.values():
        for rank, entry in enumerate(sorted(entries)):
            turns[entry[3]] = rank
    return turns


def _keys(turns: Mapping[_Unit, int], sessions: Mapping[str, str]) -> dict[_Unit, _Turn]:
    """Each turn's key; a session with several trials becomes one session per trial."""
    trials: dict[str, set[int | None]] = defaultdict(set)
    for trace_id, trial in turns:
        trials[sessions[trace_id]].add(trial)
    keys = {}
    for (trace_id, trial), index in turns.items():
        session = sessions[trace_id]
        keys[trace_id, trial] = _Turn(session, index)
        if trial is not None and len(trials[session]) > 1:
            own = TRIAL_SESSION.format(session=session, trial=trial)
            keys[trace_id, trial] = _Turn(own, index, f"{session}#{index}")
    return keys


def _root_start(spans: list[SpanRecord]) -> datetime | None:
    ids = {span.span_id for span in spans}
    starts = [s.start_time for s in spans if s.start_time and s.parent_span_id not in ids]
    return min(starts) if starts else None


def _row(span: SpanRecord, turn: _Turn, trial: int | None, source: str) -> dict[str, Any]:
    attributes = {k: v for k, v in span.attributes.items() if not _missing(v)}
    genai = _genai_kind(attributes, span.name)
    columns = _oi_columns(attributes, span) if genai is None else _genai(attributes, genai, span)
    metadata = _metadata(attributes.get(METADATA))
    task_id = _text(metadata.get(TASK_ID))
    return {
        schema.SESSION_ID: turn.session_id,
        schema.TURN_INDEX: turn.turn_index,
        schema.TRACE_ID: span.trace_id,
        schema.SPAN_ID: span.span_id,
        schema.PARENT_SPAN_ID: span.parent_span_id,
        schema.NAME: span.name,
        schema.START_TIME: span.start_time,
        schema.END_TIME: span.end_time,
        schema.STATUS_CODE: span.status_code,
        schema.STATUS_MESSAGE: span.status_message or None,
        schema.ITERATION: _integer(attributes.get(ITERATION), ITERATION, span),
        **columns,
        schema.PLAN: _text(attributes.get(PLAN)),
        schema.EVENTS: _events_json(span.events),
        schema.SOURCE: source,
        schema.VARIANT: _text(metadata.get("variant")),
        schema.STOP_REASON: _text(attributes.get(STOP_REASON)),
        schema.REWARD: _number(metadata.get("reward"), "metadata.reward", span),
        schema.TASK_ID: turn.task_id if task_id is None else task_id,
        schema.TRIAL: trial,
    }


def _genai_kind(attributes: Mapping[str, Any], name: str) -> str | None:
    """The span kind of a span in the GenAI conventions; None for any other span."""
    kind = attributes.get(SPAN_KIND)  # OpenInference's (Phoenix says UNKNOWN for a GenAI span)
    if kind is not None and kind != "UNKNOWN":
        return None
    operation = attributes.get(GenAI.OPERATION_NAME)
    if operation is not None:
        return GENAI_KINDS.get(str(operation), "UNKNOWN")
    if GenAI.TOOL_NAME in attributes:  # pydantic-ai's tool spans carry no operation name
        return "TOOL"
    if GenAI.AGENT_NAME in attributes:
        return "AGENT"
    return _NAMED_KINDS.get(name)


def _oi_columns(attributes: Mapping[str, Any], span: SpanRecord) -> dict[str, Any]:
    kind = _span_kind(attributes.get(SPAN_KIND))
    tool = kind == "TOOL"
    output = _text(attributes.get(OUTPUT_VALUE))
    arguments = attributes.get(INPUT_VALUE, attributes.get(TOOL_PARAMETERS)) if tool else None
    return {
        schema.SPAN_KIND: kind,
        schema.TOOL_NAME: _text(attributes.get(TOOL_NAME)),
        schema.TOOL_CALL_ID: _text(attributes.get(TOOL_ID)),
        schema.TOOL_ARGS: None if arguments is None else canonical_arguments(arguments),
        schema.TOOL_OUTPUT: output if tool else None,
        schema.MODEL_NAME: _text(attributes.get(LLM_MODEL_NAME)),
        schema.TOKENS_PROMPT: _integer(attributes.get(TOKENS_PROMPT), TOKENS_PROMPT, span),
        schema.TOKENS_COMPLETION: _integer(
            attributes.get(TOKENS_COMPLETION), TOKENS_COMPLETION, span
        ),
        schema.INPUT_VALUE: _text(attributes.get(INPUT_VALUE)),
        schema.OUTPUT_VALUE: output,
        schema.ATTRIBUTES: _rest_json(attributes, kind),
    }


def _genai(attributes: Mapping[str, Any], kind: str, span: SpanRecord) -> dict[str, Any]:
    used = set(_GENAI_MAPPED)
    columns: dict[str, Any] = {**dict.fromkeys(_GENAI_COLUMNS), schema.SPAN_KIND: kind}
    for column, keys in _GENAI_COLUMNS.items():
        key = _found(attributes, keys)
        if key is not None:
            value = attributes[key]
            columns[column] = _integer(value, key, span) if column in _COUNTS else _text(value)
            used.add(key)
    tool = kind == "TOOL"
    key = _found(attributes, _GENAI_ARGUMENTS) if tool else None
    columns[schema.TOOL_ARGS] = None if key is None else canonical_arguments(attributes[key])
    if key is not None:
        used.add(key)
    columns[schema.TOOL_OUTPUT] = columns[schema.OUTPUT_VALUE] if tool else None
    columns[schema.ATTRIBUTES] = _rest_json(attributes, kind, used)
    return columns


def _found(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> str | None:
    """The first of `keys` that `attributes` holds."""
    for key in keys:
        if key in attributes:
            return key
    return None


def _span_kind(value: Any) -> str:
    kind = str(value).upper() if isinstance(value, str) else "UNKNOWN"
    return kind if kind in SPAN_KINDS else "UNKNOWN"


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


def _rest_json(attributes: Mapping[str, Any], kind: str, mapped: Set[str] = MAPPED) -> str | None:
    rest = {
        key: _parsed(value) if is_json_valued(key) else value
        for key, value in attributes.items()
        if key not in mapped or (key == SPAN_KIND and value != kind)
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
