"""Spans, from any source, as trace-table rows (OpenInference, OpenTelemetry GenAI).

Every span source builds `SpanRecord`s (`replay._spans`); `rows_from_spans` finds each span's
turn and trial (`replay._span_turns`, which says how) and maps its attributes onto the trace
table's columns, one row per span, the rest to the row's `attributes` JSON. A span is read in
one convention (`span_convention`, a lookup or two): OpenInference's with an
`openinference.span.kind` (not UNKNOWN); else the GenAI conventions' with a
`gen_ai.operation.name`, `gen_ai.tool.name`, `gen_ai.agent.name` or pydantic-ai span name.

Conventions:
- `tool_args` is the canonical `input.value` of a TOOL span (else `tool.parameters`, where some
  instrumentations put the arguments), or `gen_ai.tool.call.arguments` (`tool_arguments`).
- `variant`, `task_id`, `trial` and `reward` come from the `metadata` JSON object (text, or a
  dict when Phoenix has already parsed it); `metadata` itself stays in `attributes`, parsed.
- `iteration` is `plangate.iteration`; in a turn whose spans carry none (another agent's),
  the model calls are numbered by start, and each tool call gets the number of the model call
  before it, or, where the clocks disagree, of the model call that asked for its call id.
- NaN is missing; a value that should be a whole number and is not raises `TraceTableError`.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Set
from functools import lru_cache
from itertools import groupby
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
    GenAI,
    PydanticAI,
)
from plangate.replay._llm_rows import asked_ids
from plangate.replay._span_turns import Turn, span_trial, span_turns
from plangate.replay._spans import (
    EPOCH,
    SpanEvent,
    SpanRecord,
    as_integer,
    as_json,
    as_number,
    as_text,
    first_key,
    is_missing,
    metadata_of,
    parsed_json,
)
from plangate.replay.schema import SPAN_KINDS, TASK_ID, canonical_arguments

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
    trials = [span_trial(span) for span in spans]
    turns = span_turns(spans, trials, _kind)
    keyed = []
    for position, span in enumerate(spans):
        row = _row(span, turns[position], trials[position], source)
        start = span.start_time
        key = (row[schema.SESSION_ID], row[schema.TURN_INDEX], start is None, start or EPOCH)
        keyed.append(((*key, position), row))
    keyed.sort(key=lambda pair: pair[0])
    rows = [row for _, row in keyed]
    for _, turn in groupby(rows, key=lambda row: (row[schema.SESSION_ID], row[schema.TURN_INDEX])):
        _number_model_calls(list(turn))
    return rows


def _number_model_calls(turn: list[dict[str, Any]]) -> None:
    """Number a turn's model calls where its spans number none (by start: they are sorted).

    LLM rows are 1, 2, … A TOOL row gets the number of the model call that started last before
    it: a model call's tool calls run after it and before the next one. Where the clock leaves
    doubt, a tool call with an id started before any model call or before the one it follows
    ended (its host's clock disagrees with the model call's), the turn's tool calls take the
    number of the model call whose answer asked for their id, where one did (`_by_call_id`).
    """
    if any(row[schema.ITERATION] is not None for row in turn):
        return
    calls, ended, doubt = 0, None, False
    for row in turn:
        kind, start = row[schema.SPAN_KIND], row[schema.START_TIME]
        if kind == "LLM" and start is not None:
            calls += 1
            row[schema.ITERATION], ended = calls, row[schema.END_TIME]
        elif kind == "TOOL":
            row[schema.ITERATION] = calls if start is not None and calls else None
            early = row[schema.ITERATION] is None or (ended is not None and start < ended)
            doubt = doubt or bool(row[schema.TOOL_CALL_ID] and early)
    if doubt:  # else no answer is read: most turns, and reading them all costs
        _by_call_id(turn)


def _by_call_id(turn: list[dict[str, Any]]) -> None:
    """Each TOOL row the number of the model call that asked for its id, where one did."""
    llms = [r for r in turn if r[schema.SPAN_KIND] == "LLM" and r[schema.START_TIME] is not None]
    tools = [r for r in turn if r[schema.SPAN_KIND] == "TOOL" and r[schema.TOOL_CALL_ID]]
    carried = Counter(r[schema.TOOL_CALL_ID] for r in tools)
    asker = _askers(llms, once={i for i, n in carried.items() if n == 1})
    for row in tools:
        row[schema.ITERATION] = asker.get(row[schema.TOOL_CALL_ID], row[schema.ITERATION])


def _askers(llms: list[dict[str, Any]], once: Set[str]) -> dict[str, int]:
    """Each call id of `once` (one TOOL row's) that one model call asked for, and its number.

    An id two answers asked for, or two TOOL rows carry, says nothing: some models number their
    calls afresh in each answer (`call_0`), and an answer may be missing (an attribute limit
    drops it). Then only the clock tells.
    """
    numbers: dict[str, set[int]] = defaultdict(set)
    for number, llm in enumerate(llms, start=1):
        for call_id in asked_ids(llm):
            numbers[call_id].add(number)
    return {i: min(found) for i, found in numbers.items() if len(found) == 1 and i in once}


def span_convention(span: SpanRecord) -> Literal["openinference", "genai"] | None:
    """The convention a span is read in: "openinference" (or plangate's), "genai", or None."""
    genai = _genai_kind(span.attributes, span.name) is not None
    return "genai" if genai else None if MAPPED.isdisjoint(span.attributes) else "openinference"


def _row(span: SpanRecord, turn: Turn, trial: int | None, source: str) -> dict[str, Any]:
    attributes = {k: v for k, v in span.attributes.items() if not is_missing(v)}
    genai = _genai_kind(attributes, span.name)
    columns = _oi_columns(attributes, span) if genai is None else _genai(attributes, genai, span)
    metadata = metadata_of(attributes.get(METADATA))
    task_id = as_text(metadata.get(TASK_ID))
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
        schema.ITERATION: as_integer(attributes.get(ITERATION), ITERATION, span),
        **columns,
        schema.PLAN: as_text(attributes.get(PLAN)),
        schema.EVENTS: _events_json(span.events),
        schema.SOURCE: source,
        schema.VARIANT: as_text(metadata.get("variant")),
        schema.STOP_REASON: as_text(attributes.get(STOP_REASON)),
        schema.REWARD: as_number(metadata.get("reward"), "metadata.reward", span),
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
    output = as_text(attributes.get(OUTPUT_VALUE))
    arguments = attributes.get(INPUT_VALUE, attributes.get(TOOL_PARAMETERS)) if tool else None
    return {
        schema.SPAN_KIND: kind,
        schema.TOOL_NAME: as_text(attributes.get(TOOL_NAME)),
        schema.TOOL_CALL_ID: as_text(attributes.get(TOOL_ID)),
        schema.TOOL_ARGS: None if arguments is None else canonical_arguments(arguments),
        schema.TOOL_OUTPUT: output if tool else None,
        schema.MODEL_NAME: as_text(attributes.get(LLM_MODEL_NAME)),
        schema.TOKENS_PROMPT: as_integer(attributes.get(TOKENS_PROMPT), TOKENS_PROMPT, span),
        schema.TOKENS_COMPLETION: as_integer(
            attributes.get(TOKENS_COMPLETION), TOKENS_COMPLETION, span
        ),
        schema.INPUT_VALUE: as_text(attributes.get(INPUT_VALUE)),
        schema.OUTPUT_VALUE: output,
        schema.ATTRIBUTES: _rest_json(attributes, kind),
    }


def _genai(attributes: Mapping[str, Any], kind: str, span: SpanRecord) -> dict[str, Any]:
    used = set(_GENAI_MAPPED)
    columns: dict[str, Any] = {**dict.fromkeys(_GENAI_COLUMNS), schema.SPAN_KIND: kind}
    for column, keys in _GENAI_COLUMNS.items():
        key = first_key(attributes, keys)
        if key is not None:
            value = attributes[key]
            columns[column] = as_integer(value, key, span) if column in _COUNTS else as_text(value)
            used.add(key)
    tool = kind == "TOOL"
    key = first_key(attributes, _GENAI_ARGUMENTS) if tool else None
    columns[schema.TOOL_ARGS] = None if key is None else canonical_arguments(attributes[key])
    if key is not None:
        used.add(key)
    columns[schema.TOOL_OUTPUT] = columns[schema.OUTPUT_VALUE] if tool else None
    columns[schema.ATTRIBUTES] = _rest_json(attributes, kind, used)
    return columns


def _kind(span: SpanRecord) -> str:
    """The span's kind, as its row will say it (`LLM`, `TOOL`, …)."""
    attributes = {k: v for k, v in span.attributes.items() if not is_missing(v)}
    genai = _genai_kind(attributes, span.name)
    return genai if genai is not None else _span_kind(attributes.get(SPAN_KIND))


def _span_kind(value: Any) -> str:
    kind = str(value).upper() if isinstance(value, str) else "UNKNOWN"
    return kind if kind in SPAN_KINDS else "UNKNOWN"


def _rest_json(attributes: Mapping[str, Any], kind: str, mapped: Set[str] = MAPPED) -> str | None:
    rest = {
        key: parsed_json(value) if is_json_valued(key) else value
        for key, value in attributes.items()
        if key not in mapped or (key == SPAN_KIND and value != kind)
    }
    return as_json(rest) if rest else None


@lru_cache(maxsize=4096)
def is_json_valued(key: str) -> bool:
    """Whether an attribute holds a JSON object as text (`metadata`, `tool.parameters`, …).

    Asked of every attribute of every span, of a few hundred names: each is answered once.
    """
    return any(key == name or key.endswith(f".{name}") for name in JSON_VALUED)


def _events_json(events: tuple[SpanEvent, ...]) -> str | None:
    if not events:
        return None
    return as_json(
        [
            {
                "name": event.name,
                "time": event.time.isoformat() if event.time is not None else None,
                "attributes": {k: v for k, v in event.attributes.items() if not is_missing(v)},
            }
            for event in events
        ]
    )
