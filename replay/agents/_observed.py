"""A turn as plangate's model endpoint saw it: its messages, its steps, its trace-table rows.

An agent that emits no spans is still scored: every model call went through the endpoint, so
the calls, the tool calls the model asked for, the results the agent sent back (the next
request's tool messages), the tokens and the times are all known. The rows follow the
OpenInference shape plangate's own spans have: an AGENT row per turn, an LLM row per model
call, a TOOL row per tool call.

An agent that does emit spans (OpenInference or the GenAI conventions) is scored on its own
spans instead, wherever they show its model or tool calls: they land under the turn's AGENT row
(the boundary's turn, with its stop reason and answer), and the agent's own agent spans become
CHAIN rows, so that a turn has one AGENT row whatever the framework nests.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa

from plangate.harness import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    canonical_json,
    message_to_dict,
)
from plangate.harness import semconv as sc
from plangate.replay._openinference import rows_from_spans
from plangate.replay._spans import SpanRecord
from plangate.replay.schema import (
    ATTRIBUTES,
    END_TIME,
    INPUT_VALUE,
    ITERATION,
    MODEL_NAME,
    NAME,
    OUTPUT_VALUE,
    PARENT_SPAN_ID,
    SESSION_ID,
    SOURCE,
    SPAN_ID,
    SPAN_KIND,
    START_TIME,
    STATUS_CODE,
    STATUS_MESSAGE,
    STOP_REASON,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOOL_ARGS,
    TOOL_CALL_ID,
    TOOL_NAME,
    TOOL_OUTPUT,
    TOOL_SPAN_PREFIX,
    TRACE_ID,
    TRIAL,
    TURN_INDEX,
    VARIANT,
    build_table,
    canonical_arguments,
)

SOURCE_NAME = "agent"
"""The trace table's `source` for rows built from what the endpoint saw (and the turn's AGENT
row, which is the boundary's)."""
SPANS_SOURCE = "agent-spans"
"""The trace table's `source` for rows from the agent's own spans."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SeenTurn:
    """One turn of an agent, as the endpoint saw it."""

    session_id: str
    turn_index: int
    request: str
    answer: str
    stop_reason: str
    """`finished`, `model_error` (the endpoint's model failed), or `agent_error`."""
    detail: str
    """Why it stopped, when not `finished`."""
    calls: Sequence[Any]
    """The endpoint's observed calls of the turn (`ObservedCall`), in order."""
    start_ns: int
    end_ns: int
    agent: str
    """The agent's label (spec and settings)."""
    trial: int | None = None


def turn_messages(
    history: Sequence[Message], calls: Sequence[Any], request: str, answer: str
) -> list[Message]:
    """The turn's messages, request first.

    They are the last model request's messages after `history`, plus its answer; when that
    answer asked for tools (the agent stopped at its own limit, with the calls unanswered), the
    agent's answer instead, so the next turn's history holds no call without a result; and when
    the model was never called, the request and the agent's answer.
    """
    if not calls:
        return [UserMessage(content=request), AssistantMessage(content=answer)]
    last = calls[-1]
    seen = [m for m in last.messages if not isinstance(m, SystemMessage)]
    tail = seen[len(history) :]
    reply = last.response.message if last.response is not None else None
    if reply is not None and not reply.tool_calls:
        tail.append(reply)
    else:  # the agent stopped on its own (a limit, an error): its calls got no answer here
        tail.append(AssistantMessage(content=answer))
    return tail


def turn_steps(turn: SeenTurn) -> list[str]:
    """The turn's trajectory as comparable steps, in the reference agent's words.

    Each tool call the model asked for, then the stop. A call is `-> ok`: the wire does not say
    how a tool went, only that the model asked for it (a golden built from these turns' trace
    table with `dataset from-traces` computes the same steps).
    """
    out = [
        f"call {c.name} {canonical_arguments(c.arguments)} -> ok"
        for call in turn.calls
        if call.response is not None
        for c in call.response.message.tool_calls
    ]
    out.append(f"stop {turn.stop_reason}")
    return out


def turn_rows(turn: SeenTurn) -> list[dict[str, Any]]:
    """The turn's trace-table rows: AGENT, then per model call an LLM row and its TOOL rows."""
    trace = _hex(f"{turn.session_id}\x00{turn.turn_index}\x00{turn.trial}", 32)
    root = _hex(f"{trace}:agent", 16)
    base = {
        SESSION_ID: turn.session_id,
        TURN_INDEX: turn.turn_index,
        TRACE_ID: trace,
        SOURCE: SOURCE_NAME,
        VARIANT: turn.agent,
        TRIAL: turn.trial,
    }
    failed = turn.stop_reason != "finished"
    rows = [
        {
            **base,
            SPAN_ID: root,
            SPAN_KIND: "AGENT",
            NAME: "agent.turn",
            START_TIME: _time(turn.start_ns),
            END_TIME: _time(turn.end_ns),
            STATUS_CODE: "ERROR" if failed else "OK",
            STATUS_MESSAGE: turn.detail or None,
            INPUT_VALUE: turn.request,
            OUTPUT_VALUE: turn.answer,
            STOP_REASON: turn.stop_reason,
        }
    ]
    results = _results(turn.calls)
    for iteration, call in enumerate(turn.calls, start=1):
        following = turn.calls[iteration].start_ns if iteration < len(turn.calls) else turn.end_ns
        rows.append(_llm_row(base, root, iteration, call))
        if call.response is None:
            continue
        for c in call.response.message.tool_calls:
            rows.append(
                {
                    **base,
                    SPAN_ID: _hex(f"{trace}:tool:{iteration}:{c.id}:{c.name}", 16),
                    PARENT_SPAN_ID: root,
                    SPAN_KIND: "TOOL",
                    NAME: f"{TOOL_SPAN_PREFIX}{c.name}",
                    START_TIME: _time(call.end_ns),
                    END_TIME: _time(following),
                    STATUS_CODE: "OK",
                    ITERATION: iteration,
                    TOOL_NAME: c.name,
                    TOOL_CALL_ID: c.id,
                    TOOL_ARGS: canonical_arguments(c.arguments),
                    TOOL_OUTPUT: results.get(c.id),
                }
            )
    return rows


def turn_table(turn: SeenTurn, spans: Sequence[SpanRecord] = ()) -> pa.Table:
    """The turn's trace table, from the agent's own spans or from what the endpoint saw.

    The agent's spans are used when they show its model or tool calls (`source`
    `agent-spans`; one trace goes under the boundary's AGENT row); otherwise the rows are
    `turn_rows`.
    """
    rows = turn_rows(turn)
    if not spans:
        return build_table(rows)
    own = rows_from_spans(spans, source=SPANS_SOURCE)
    if not any(r[SPAN_KIND] in ("LLM", "TOOL") for r in own):
        return build_table(rows)
    agent = rows[0]
    _adopt(agent, own)
    for row in own:
        row.update(
            {SESSION_ID: turn.session_id, TURN_INDEX: turn.turn_index, VARIANT: turn.agent,
             TRIAL: turn.trial}
        )  # fmt: skip
        if row[SPAN_KIND] == "AGENT":
            row[SPAN_KIND] = "CHAIN"
        if row[STOP_REASON] is not None:
            row[STOP_REASON] = None  # the turn's stop reason is the boundary's
    return build_table([agent, *own])


def _adopt(agent: dict[str, Any], own: list[dict[str, Any]]) -> None:
    """Put the agent's spans under the turn's AGENT row, when they are one trace.

    The row joins that trace, and the trace's roots become its children.
    """
    traces = {row[TRACE_ID] for row in own}
    if len(traces) != 1:
        return
    agent[TRACE_ID] = traces.pop()
    ids = {row[SPAN_ID] for row in own}
    for row in own:
        if row[PARENT_SPAN_ID] not in ids:
            row[PARENT_SPAN_ID] = agent[SPAN_ID]


def _llm_row(base: dict[str, Any], root: str, iteration: int, call: Any) -> dict[str, Any]:
    response = call.response
    return {
        **base,
        INPUT_VALUE: canonical_json({"messages": [message_to_dict(m) for m in call.messages]}),
        ATTRIBUTES: _llm_attributes(call),
        SPAN_ID: _hex(f"{base[TRACE_ID]}:llm:{iteration}", 16),
        PARENT_SPAN_ID: root,
        SPAN_KIND: "LLM",
        NAME: "llm.call",
        START_TIME: _time(call.start_ns),
        END_TIME: _time(call.end_ns),
        STATUS_CODE: "ERROR" if response is None else "OK",
        STATUS_MESSAGE: call.error,
        ITERATION: iteration,
        MODEL_NAME: (response.model_name if response is not None else "") or call.model_name,
        TOKENS_PROMPT: response.usage.prompt_tokens if response is not None else None,
        TOKENS_COMPLETION: response.usage.completion_tokens if response is not None else None,
        OUTPUT_VALUE: response.message.content if response is not None else None,
    }


def _llm_attributes(call: Any) -> str:
    """The offered tools and the answer, under OpenInference's names.

    `llm.tools.N…` and `llm.output_messages.0…`: what `dataset from-traces` rebuilds a
    cassette from.
    """
    attributes: dict[str, Any] = {
        f"{sc.LLM_TOOLS}.{i}.{sc.TOOL_JSON_SCHEMA}": canonical_json(
            {"type": "function", "function": {"name": t.name, "parameters": t.parameters}}
        )
        for i, t in enumerate(call.tools)
    }
    if call.response is not None:
        message = call.response.message
        answer = f"{sc.LLM_OUTPUT_MESSAGES}.0"
        attributes[f"{answer}.{sc.MESSAGE_ROLE}"] = "assistant"
        attributes[f"{answer}.{sc.MESSAGE_CONTENT}"] = message.content
        for i, c in enumerate(message.tool_calls):
            at = f"{answer}.{sc.MESSAGE_TOOL_CALLS}.{i}"
            attributes[f"{at}.{sc.TOOL_CALL_ID}"] = c.id
            attributes[f"{at}.{sc.TOOL_CALL_FUNCTION_NAME}"] = c.name
            attributes[f"{at}.{sc.TOOL_CALL_FUNCTION_ARGUMENTS}"] = c.arguments
    return canonical_json(attributes)


def _results(calls: Sequence[Any]) -> dict[str, str]:
    """Each tool call's result, by call id, from the tool messages the agent sent back."""
    return {
        m.tool_call_id: m.content
        for call in calls
        for m in call.messages
        if isinstance(m, ToolMessage)
    }


def _hex(text: str, digits: int) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:digits]


def _time(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC)
