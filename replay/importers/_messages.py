"""OpenAI-style message lists as trace-table rows, and the `openai-messages` importer.

`rows_from_messages` turns one conversation, or one turn of it, into the rows of one turn; the
tau-bench and tau2 importers use it too. What it does with each message:

- the turn is one AGENT row (`agent.turn`, the root): `input_value` is the first user message,
  `output_value` the last assistant text, and it carries the turn's outcome (`stop_reason`,
  `reward`, `task_id`, `trial`);
- each assistant message is an LLM row (`llm.call`, iteration 1, 2, …) under the AGENT row, with
  its text as `output_value`, the model name, and tokens when the source gives them;
- each tool call of an assistant message is a TOOL row (`tool.<name>`) under the AGENT row with
  the same iteration. Its result is the tool message with the same call id among the tool
  messages right after the assistant message (call ids are matched there only, because some
  sources reuse them within a conversation); with no such message the output is null.
  `status_code` is `ERROR` or `OK` only where the tool message has a boolean `error` (tau2
  does); otherwise `UNSET`: an error is never guessed from the text;
- system messages are not spans: the AGENT row's `attributes` keep only their total length
  (`system_prompt_chars`), not the text;
- user messages after the first, and tool messages no call claims, are events on the AGENT row:
  `{"name": "user_message" | "unmatched_tool_result", "attributes": {...}}`, with a
  `timestamp` when the message has one.

Ids are deterministic: the trace id is a hash of the session id and turn index, a span id a
hash of the trace id and the row's position, so importing a file twice gives identical tables.
Times come only from the source: a span produced by message `j` (an assistant message, or the
tool message holding a call's result) runs from the timestamp of message `j - 1` (for the first
message, the turn's given start) to its own, if message `j` has one; a call without a result
starts at its assistant message and has no end. The AGENT span runs from the given start and
end, else from the first and last message timestamps. Without timestamps every time stays null.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from plangate.harness import canonical_json
from plangate.harness.semconv import AGENT_SPAN_NAME, LLM_SPAN_NAME, TOOL_SPAN_PREFIX
from plangate.replay.importers._reading import (
    Row,
    load_json,
    located,
    optional,
    require,
    span_id_for,
    text_of,
    timestamp,
    trace_id_for,
)
from plangate.replay.importers._registry import importer
from plangate.replay.schema import (
    ATTRIBUTES,
    END_TIME,
    EVENTS,
    INPUT_VALUE,
    ITERATION,
    MODEL_NAME,
    NAME,
    OUTPUT_VALUE,
    PARENT_SPAN_ID,
    REWARD,
    SESSION_ID,
    SOURCE,
    SPAN_ID,
    SPAN_KIND,
    START_TIME,
    STATUS_CODE,
    STOP_REASON,
    TASK_ID,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOOL_ARGS,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_OUTPUT,
    TRACE_ID,
    TRIAL,
    TURN_INDEX,
    VARIANT,
    TraceTableError,
    build_table,
    canonical_arguments,
)

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
_SYSTEM_ROLES = frozenset({"system", "developer"})

Window = tuple[datetime | None, datetime | None]
"""The start and end of the span a message produces."""


def rows_from_messages(
    messages: Sequence[Any],
    *,
    session_id: str,
    turn_index: int,
    source: str,
    trace_id: str | None = None,
    task_id: str | None = None,
    trial: int | None = None,
    reward: float | None = None,
    stop_reason: str | None = None,
    model_name: str | None = None,
    timestamps: Sequence[Any] | None = None,
    usage: Sequence[Any] | None = None,
    variant: str | None = None,
    start_time: Any = None,
    end_time: Any = None,
    attributes: Mapping[str, Any] | None = None,
    first_message: int = 0,
) -> list[Row]:
    """The trace-table rows of one turn, from its OpenAI-style messages.

    Args:
        messages: The turn's messages: `{role, content, tool_calls, tool_call_id}`; tool calls
            as OpenAI's `{id, type, function: {name, arguments}}` or tau2's
            `{id, name, arguments}`; a tool message's call id in `tool_call_id` or `id`, and
            an optional boolean `error`.
        session_id: The session the turn belongs to.
        turn_index: The turn's position in its session.
        source: The format name, for the `source` column.
        trace_id: The turn's trace id; by default hashed from the session id and turn index.
        task_id: The task the turn attempts, if the source has one.
        trial: The repeat number, if the source has one.
        reward: The source's own judgement of the turn.
        stop_reason: Why the turn ended, in the source's words.
        model_name: The agent's model, for the LLM rows.
        timestamps: One timestamp (ISO text, epoch seconds, datetime or None) per message.
        usage: One usage mapping (`prompt_tokens`/`completion_tokens`, or `input_tokens`/
            `output_tokens`) or None per message; read for assistant messages only.
        variant: The variant label, if any.
        start_time: The AGENT span's start; by default the first message timestamp.
        end_time: The AGENT span's end; by default the last message timestamp.
        attributes: More attributes for the AGENT row (JSON-serializable).
        first_message: The position of `messages[0]` in its conversation, for error messages.

    Returns:
        The AGENT row first, then the LLM and TOOL rows in message order.

    Raises:
        TraceTableError: A message is malformed; the message names it and the field.
    """
    checked = [
        _check_message(message, first_message + index) for index, message in enumerate(messages)
    ]
    times = _times(checked, timestamps, first_message)
    tokens = _per_message(usage, len(checked), "usage")
    trace = trace_id or trace_id_for(session_id, turn_index)
    base: Row = {
        SESSION_ID: session_id,
        TURN_INDEX: turn_index,
        TRACE_ID: trace,
        SOURCE: source,
        VARIANT: variant,
    }
    agent_span = span_id_for(trace, 0)
    start, end = timestamp(start_time, "start_time"), timestamp(end_time, "end_time")
    windows: list[Window] = [
        (before, time) if time is not None else (None, None)
        for before, time in zip([start, *times], times, strict=False)
    ]
    children, claimed = _child_rows(checked, windows, tokens, model_name, first_message)
    agent: Row = {
        **base,
        SPAN_ID: agent_span,
        SPAN_KIND: "AGENT",
        NAME: AGENT_SPAN_NAME,
        START_TIME: start or _first(times),
        END_TIME: end or _first(reversed(times)),
        STATUS_CODE: "UNSET",
        INPUT_VALUE: _first(text_of(m.get("content")) for m in _with_role(checked, "user")),
        OUTPUT_VALUE: _last_text(checked),
        EVENTS: _events(checked, times, claimed),
        ATTRIBUTES: _agent_attributes(checked, attributes),
        STOP_REASON: stop_reason,
        REWARD: reward,
        TASK_ID: task_id,
        TRIAL: trial,
    }
    rows = [agent]
    for position, child in enumerate(children, start=1):
        rows.append(
            {**base, SPAN_ID: span_id_for(trace, position), PARENT_SPAN_ID: agent_span, **child}
        )
    return rows


def _check_message(message: Any, index: int) -> Mapping[str, Any]:
    with located(f"message {index}"):
        role = require(message, "role", str, f"one of {', '.join(sorted(ROLES))}")
        if role not in ROLES:
            raise TraceTableError(
                f"field 'role' is {role!r}; expected one of {', '.join(sorted(ROLES))}"
            )
        optional(message, "tool_calls", list)
        if role == "tool" and _answered_id(message) is None:
            raise TraceTableError(
                "a tool message needs field 'tool_call_id' (or 'id'); expected the id of the "
                "call it answers"
            )
    checked: Mapping[str, Any] = message
    return checked


def _answered_id(message: Mapping[str, Any]) -> Any:
    """The call id a tool message answers: `tool_call_id` (OpenAI) or `id` (tau2)."""
    call_id = message.get("tool_call_id")
    return message.get("id") if call_id is None else call_id


def _per_message(values: Sequence[Any] | None, count: int, name: str) -> list[Any]:
    if values is None:
        return [None] * count
    if len(values) != count:
        raise TraceTableError(f"{len(values)} {name} values for {count} messages")
    return list(values)


def _times(
    messages: list[Mapping[str, Any]], values: Sequence[Any] | None, first: int
) -> list[datetime | None]:
    times = []
    for index, value in enumerate(_per_message(values, len(messages), "timestamp")):
        with located(f"message {first + index}"):
            times.append(timestamp(value, "timestamp"))
    return times


def _child_rows(
    messages: list[Mapping[str, Any]],
    windows: list[Window],
    usage: list[Any],
    model_name: str | None,
    first: int,
) -> tuple[list[Row], set[int]]:
    """LLM and TOOL rows (without ids) in message order, and the tool messages they claimed."""
    rows: list[Row] = []
    claimed: set[int] = set()
    iteration = 0
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        iteration += 1
        with located(f"message {first + index}"):
            rows.append(
                {
                    SPAN_KIND: "LLM",
                    NAME: LLM_SPAN_NAME,
                    START_TIME: windows[index][0],
                    END_TIME: windows[index][1],
                    STATUS_CODE: "UNSET",
                    ITERATION: iteration,
                    MODEL_NAME: model_name,
                    OUTPUT_VALUE: text_of(message.get("content")),
                    **_tokens(usage[index]),
                }
            )
            results = _results(messages, index)
            for number, call in enumerate(message.get("tool_calls") or []):
                with located(f"tool_calls[{number}]"):
                    row, result = _tool_row(call, results, messages, windows, index)
                rows.append({ITERATION: iteration, **row})
                if result is not None:
                    claimed.add(result)
    return rows, claimed


def _results(messages: list[Mapping[str, Any]], index: int) -> dict[str, list[int]]:
    """Call id → indices of the tool messages that directly follow the assistant message."""
    results: dict[str, list[int]] = {}
    for later in range(index + 1, len(messages)):
        message = messages[later]
        if message["role"] != "tool":
            break
        call_id = _answered_id(message)
        results.setdefault(str(call_id), []).append(later)
    return results


def _tool_row(
    call: Any,
    results: dict[str, list[int]],
    messages: list[Mapping[str, Any]],
    windows: list[Window],
    index: int,
) -> tuple[Row, int | None]:
    call_id, name, arguments = _call_parts(call)
    matches = results.get(str(call_id)) if call_id is not None else None
    result = matches.pop(0) if matches else None
    message = messages[result] if result is not None else {}
    row: Row = {
        SPAN_KIND: "TOOL",
        NAME: f"{TOOL_SPAN_PREFIX}{name}",
        START_TIME: windows[index][1] if result is None else windows[result][0],
        END_TIME: None if result is None else windows[result][1],
        STATUS_CODE: _tool_status(message.get("error")),
        TOOL_NAME: name,
        TOOL_CALL_ID: None if call_id is None else str(call_id),
        TOOL_ARGS: canonical_arguments(arguments),
        TOOL_OUTPUT: text_of(message.get("content")),
    }
    return row, result


def _call_parts(call: Any) -> tuple[Any, str, Any]:
    """(id, name, arguments) of an OpenAI `{id, function: {name, arguments}}` or tau2 call."""
    if not isinstance(call, Mapping):
        raise TraceTableError(f"is {call!r}; expected an object with 'function' or 'name'")
    spec = call.get("function", call)
    expected = "the tool's name (as 'function.name' or 'name')"
    name = require(spec, "name", str, expected)
    arguments = spec.get("arguments")
    return call.get("id"), name, {} if arguments is None else arguments


def _tool_status(error: Any) -> str:
    if isinstance(error, bool):
        return "ERROR" if error else "OK"
    return "UNSET"


def _tokens(usage: Any) -> Row:
    if usage is None:
        return {}
    if not isinstance(usage, Mapping):
        raise TraceTableError(f"field 'usage' is {usage!r}; expected an object of token counts")
    prompt = usage.get("prompt_tokens", usage.get("input_tokens"))
    completion = usage.get("completion_tokens", usage.get("output_tokens"))
    for value in (prompt, completion):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise TraceTableError(f"field 'usage' has {value!r}; expected whole token counts")
    return {TOKENS_PROMPT: prompt, TOKENS_COMPLETION: completion}


def _with_role(messages: list[Mapping[str, Any]], role: str) -> Iterator[Mapping[str, Any]]:
    return (message for message in messages if message["role"] == role)


def _first(values: Any) -> Any:
    return next((value for value in values if value is not None), None)


def _last_text(messages: list[Mapping[str, Any]]) -> str | None:
    texts = (text_of(m.get("content")) for m in reversed(messages) if m["role"] == "assistant")
    return next((text for text in texts if text), None)


def _events(
    messages: list[Mapping[str, Any]], times: list[datetime | None], claimed: set[int]
) -> str | None:
    """Later user messages and unclaimed tool results, as the AGENT row's events JSON."""
    events: list[dict[str, Any]] = []
    users = 0
    for index, message in enumerate(messages):
        content = text_of(message.get("content"))
        if message["role"] == "user":
            users += 1
            if users > 1:
                events.append(_event("user_message", {"content": content}, times[index]))
        elif message["role"] == "tool" and index not in claimed:
            call_id = _answered_id(message)
            attributes = {"tool_call_id": str(call_id), "content": content}
            events.append(_event("unmatched_tool_result", attributes, times[index]))
    return canonical_json(events) if events else None


def _event(name: str, attributes: dict[str, Any], time: datetime | None) -> dict[str, Any]:
    event: dict[str, Any] = {"name": name, "attributes": attributes}
    if time is not None:
        event["timestamp"] = time.isoformat()
    return event


def _agent_attributes(
    messages: list[Mapping[str, Any]], extra: Mapping[str, Any] | None
) -> str | None:
    attributes = dict(extra or {})
    system = [text_of(m.get("content")) or "" for m in messages if m["role"] in _SYSTEM_ROLES]
    if system:
        attributes["system_prompt_chars"] = sum(map(len, system))
    return canonical_json(attributes) if attributes else None


# The openai-messages file format.

SOURCE_OPENAI = "openai-messages"
_OPENAI_EXPECTED = (
    "a list of messages, an object with 'messages', or a list of conversations (each a list "
    "of messages or an object with 'messages')"
)


@importer(SOURCE_OPENAI)
def import_openai_messages(path: Path) -> pa.Table:
    """Read OpenAI-style conversations from a JSON file.

    The file holds one conversation (a list of messages, or `{"messages": [...]}`) or a list of
    them. A conversation object may also give `session_id` (default: `openai-messages/`, the
    file stem and `/<index>` for a list of conversations) and `model`. Messages may carry the
    non-standard fields `timestamp` and `usage`. Each user message starts a new turn; messages
    before the first user message belong to turn 0.

    Args:
        path: The JSON file.

    Returns:
        The trace table: one AGENT row per turn, then its LLM and TOOL rows.

    Raises:
        TraceTableError: The file is not JSON or not of that shape; the message names the
            file, the conversation, the message and the field.
    """
    data = load_json(path, _OPENAI_EXPECTED)
    single, conversations = _conversations(data, path)
    rows: list[Row] = []
    sessions: dict[str, int] = {}  # each session's conversation
    for index, conversation in enumerate(conversations):
        session_id = f"{SOURCE_OPENAI}/{path.stem}" + ("" if single else f"/{index}")
        with located(f"{path}: conversation {index}"):
            found = _conversation_rows(conversation, session_id)
        session_id = found[0][SESSION_ID] if found else session_id
        if sessions.setdefault(session_id, index) != index:
            raise TraceTableError(
                f"{path}: conversations {sessions[session_id]} and {index} both have session_id "
                f"{session_id!r}; a session is one conversation: give each its own session_id, "
                "or join their messages into one"
            )
        rows.extend(found)
    return build_table(rows)


def _conversations(data: Any, path: Path) -> tuple[bool, list[Any]]:
    """Whether the file holds a single conversation, and its conversations."""
    if isinstance(data, Mapping) or (
        isinstance(data, list) and data and all(_is_message(item) for item in data)
    ):
        return True, [data]
    if isinstance(data, list):
        return False, data
    raise TraceTableError(
        f"{path}: the top level is {type(data).__name__}; expected {_OPENAI_EXPECTED}"
    )


def _is_message(item: Any) -> bool:
    return isinstance(item, Mapping) and "role" in item


def _conversation_rows(conversation: Any, default_session: str) -> list[Row]:
    if isinstance(conversation, list):
        messages, session_id, model = conversation, default_session, None
    elif isinstance(conversation, Mapping):
        messages = require(conversation, "messages", list, "a list of messages")
        session_id = optional(conversation, "session_id", str) or default_session
        model = optional(conversation, "model", str)
    else:
        raise TraceTableError(
            f"is {conversation!r}; expected a list of messages or an object with 'messages'"
        )
    for index, message in enumerate(messages):
        _check_message(message, index)
    rows: list[Row] = []
    for turn_index, (start, turn) in enumerate(_turns(messages)):
        rows.extend(
            rows_from_messages(
                turn,
                session_id=session_id,
                turn_index=turn_index,
                source=SOURCE_OPENAI,
                model_name=model,
                timestamps=[message.get("timestamp") for message in turn],
                usage=[message.get("usage") for message in turn],
                first_message=start,
            )
        )
    return rows


def _turns(messages: list[Mapping[str, Any]]) -> Iterator[tuple[int, list[Mapping[str, Any]]]]:
    """(first message index, messages) of each turn: a user message and what follows it."""
    if not messages:
        return
    starts = [index for index, message in enumerate(messages) if message["role"] == "user"] or [0]
    starts[0] = 0  # what comes before the first user message belongs to the first turn
    for start, end in zip(starts, [*starts[1:], len(messages)], strict=True):
        yield start, messages[start:end]
