"""Spans of the reference agent in the OpenInference conventions, on the OpenTelemetry API only.

One AGENT span per turn, one LLM span per model call, one TOOL span per tool call; plan changes,
gate bounces, nudges, guard firings and the stop reason are events on the AGENT span. Every span
carries `session.id`, `user.id` and `metadata` (with the variant). Where spans go is the caller's
choice (a `TracerProvider`, or None for no tracing).

Tracing must stay cheap and must never break a run. An LLM span's input messages are its
`input.value`: one JSON text joined from per-message JSON that is serialized once per session
and reused by every later span (`messages="flat"` instead flattens them into the
`llm.input_messages.*` attributes, which costs one attribute per message field per span: the
context is re-listed on every call, so that cost grows with the square of the turn's length).
Tool schemas go on the first LLM span of a turn and whenever the offered tools change. Strings
are bounded, and every call into OpenTelemetry is guarded: a failure is logged, never raised.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, Status, StatusCode, TracerProvider

from harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
)

logger = logging.getLogger("plangate.tracing")

SPAN_KIND = "openinference.span.kind"
SESSION_ID = "session.id"
USER_ID = "user.id"
METADATA = "metadata"
TAGS = "tag.tags"
AGENT_NAME = "agent.name"
INPUT_VALUE = "input.value"
INPUT_MIME_TYPE = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME_TYPE = "output.mime_type"
LLM_MODEL_NAME = "llm.model_name"
LLM_INPUT_MESSAGES = "llm.input_messages"
LLM_OUTPUT_MESSAGES = "llm.output_messages"
LLM_TOOLS = "llm.tools"
LLM_FINISH_REASON = "llm.finish_reason"
TOKENS_PROMPT = "llm.token_count.prompt"
TOKENS_COMPLETION = "llm.token_count.completion"
TOKENS_TOTAL = "llm.token_count.total"
TOOL_NAME = "tool.name"
TOOL_ID = "tool.id"
TOOL_PARAMETERS = "tool.parameters"
ITERATION = "plangate.iteration"
TURN_INDEX = "plangate.turn_index"
PLAN = "plangate.plan"
STOP_REASON = "plangate.stop_reason"
ITERATIONS = "plangate.iterations"
MIME_JSON = "application/json"
MIME_TEXT = "text/plain"

MAX_CHARS = 16_000
"""Longest string put in an attribute; longer ones are cut with a note of how much was cut."""

AGENT_SPAN_NAME = "agent.turn"
LLM_SPAN_NAME = "llm.call"

Pairs = tuple[tuple[str, Any], ...]
MessageDetail = Literal["json", "flat"]
"""How LLM spans carry their input messages: one JSON `input.value`, or flattened attributes."""


def bounded(text: str) -> str:
    """`text`, cut to `MAX_CHARS` with a note when longer."""
    if len(text) <= MAX_CHARS:
        return text
    return f"{text[:MAX_CHARS]}…[{len(text) - MAX_CHARS} more characters]"


class SpanHandle:
    """A started span that the loop may add to; every method is a no-op when tracing is off."""

    __slots__ = ("span",)

    def __init__(self, span: Span | None) -> None:
        self.span = span

    def set(self, attributes: Mapping[str, Any]) -> None:
        """Add attributes."""
        if self.span is not None:
            _guard(self.span.set_attributes, attributes)

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """Add an event."""
        if self.span is not None:
            _guard(self.span.add_event, name, attributes)

    def error(self, description: str) -> None:
        """Mark the span as failed."""
        if self.span is not None:
            _guard(self.span.set_status, Status(StatusCode.ERROR, bounded(description)))


NO_SPAN = SpanHandle(None)


def _guard(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception:  # telemetry must never break a run
        logger.exception(
            "tracing failed in %s; the run goes on", getattr(function, "__name__", "?")
        )
        return None


class SessionTracing:
    """The spans of one session: its identity attributes and its per-message attribute cache."""

    def __init__(
        self,
        provider: TracerProvider | None,
        *,
        session_id: str,
        user_id: str,
        metadata: Mapping[str, Any],
        tags: Sequence[str] = (),
        messages: MessageDetail = "json",
    ) -> None:
        self.enabled = provider is not None
        self.messages = messages
        self._tracer = provider.get_tracer("plangate.harness") if provider is not None else None
        self._base: dict[str, Any] = {
            SESSION_ID: session_id,
            USER_ID: user_id,
            METADATA: json.dumps(dict(metadata), sort_keys=True),
        }
        if tags:
            self._base[TAGS] = list(tags)
        self._messages: dict[tuple[int, int], tuple[Message, Pairs]] = {}
        self._json: dict[int, tuple[Message, str]] = {}
        self._system_json: dict[str, str] = {}
        self._tools: dict[tuple[str, ...], Pairs] = {}
        self._last_tools: tuple[str, ...] = ()
        self._schemas: dict[str, str] = {}
        self._turn: SpanHandle = NO_SPAN

    @contextmanager
    def span(self, name: str, attributes: Mapping[str, Any]) -> Iterator[SpanHandle]:
        """Start a span as the current one; always ends it. `attributes` include the base ones."""
        if self._tracer is None:
            yield NO_SPAN
            return
        span = _guard(self._tracer.start_span, name, None, trace.SpanKind.INTERNAL, attributes)
        token = _guard(otel_context.attach, trace.set_span_in_context(span)) if span else None
        try:
            yield SpanHandle(span)
        finally:
            if token is not None:
                _guard(otel_context.detach, token)
            if span is not None:
                _guard(span.end)

    @contextmanager
    def turn(self, turn_index: int, request: str, agent_name: str) -> Iterator[SpanHandle]:
        """The AGENT span of one turn; events of the turn go to it."""
        self._last_tools = ()
        attributes = {
            **self._base,
            SPAN_KIND: "AGENT",
            AGENT_NAME: agent_name,
            INPUT_VALUE: bounded(request),
            INPUT_MIME_TYPE: MIME_TEXT,
            TURN_INDEX: turn_index,
        }
        with self.span(AGENT_SPAN_NAME, attributes) as handle:
            self._turn = handle
            try:
                yield handle
            finally:
                self._turn = NO_SPAN

    def event(self, name: str, attributes: Mapping[str, Any]) -> None:
        """An event on the current turn's AGENT span."""
        self._turn.event(name, attributes)

    def llm(
        self,
        iteration: int,
        messages: Sequence[Message],
        tools: Sequence[ToolDefinition],
        model_name: str,
    ) -> Any:
        """The LLM span of one model call (a context manager yielding a `SpanHandle`)."""
        if not self.enabled:
            return self.span("", {})
        attributes: dict[str, Any] = {
            **self._base,
            SPAN_KIND: "LLM",
            LLM_MODEL_NAME: model_name,
            ITERATION: iteration,
        }
        if self.messages == "flat":
            for index, message in enumerate(messages):
                attributes.update(self._message_pairs(index, message))
        else:
            parts = ",".join([self._message_json(m) for m in messages])
            attributes[INPUT_VALUE] = '{"messages":[' + parts + "]}"
            attributes[INPUT_MIME_TYPE] = MIME_JSON
        names = tuple(t.name for t in tools)
        if names != self._last_tools or self.messages == "flat":
            self._last_tools = names
            attributes.update(self._tool_pairs(tools))
        return self.span(LLM_SPAN_NAME, attributes)

    def record_response(self, handle: SpanHandle, response: ModelResponse) -> None:
        """Put a model response on its LLM span."""
        if handle.span is None:
            return
        message = response.message
        usage = response.usage
        attributes: dict[str, Any] = {
            f"{LLM_OUTPUT_MESSAGES}.0.message.role": "assistant",
            OUTPUT_VALUE: bounded(message.content),
            OUTPUT_MIME_TYPE: MIME_TEXT,
            TOKENS_PROMPT: usage.prompt_tokens,
            TOKENS_COMPLETION: usage.completion_tokens,
            TOKENS_TOTAL: usage.prompt_tokens + usage.completion_tokens,
        }
        if message.content:
            attributes[f"{LLM_OUTPUT_MESSAGES}.0.message.content"] = bounded(message.content)
        attributes.update(_call_pairs(f"{LLM_OUTPUT_MESSAGES}.0", message.tool_calls))
        if response.model_name:
            attributes[LLM_MODEL_NAME] = response.model_name
        if response.finish_reason:
            attributes[LLM_FINISH_REASON] = response.finish_reason
        handle.set(attributes)

    def plan_change(self, iteration: int, plan: str, reason: str) -> None:
        """A CHAIN span for a plan change the harness made itself (no tool call behind it)."""
        if not self.enabled:
            return
        attributes = {
            **self._base,
            SPAN_KIND: "CHAIN",
            ITERATION: iteration,
            PLAN: plan,
            INPUT_VALUE: reason,
            INPUT_MIME_TYPE: MIME_TEXT,
        }
        with self.span("plan", attributes):
            pass

    def tool(self, iteration: int, call: ToolCall, schema: Mapping[str, Any] | None) -> Any:
        """The TOOL span of one call (a context manager yielding a `SpanHandle`)."""
        if not self.enabled:
            return self.span("", {})
        attributes: dict[str, Any] = {
            **self._base,
            SPAN_KIND: "TOOL",
            TOOL_NAME: call.name,
            TOOL_ID: call.id,
            INPUT_VALUE: bounded(call.arguments),
            INPUT_MIME_TYPE: MIME_JSON,
            ITERATION: iteration,
        }
        if schema is not None:
            attributes[TOOL_PARAMETERS] = self._schema_text(call.name, schema)
        return self.span(f"tool.{call.name}", attributes)

    def _schema_text(self, name: str, schema: Mapping[str, Any]) -> str:
        text = self._schemas.get(name)
        if text is None:
            text = self._schemas[name] = json.dumps(schema, sort_keys=True)
        return text

    def _message_pairs(self, index: int, message: Message) -> Pairs:
        if isinstance(message, SystemMessage):  # rebuilt on every call: nothing to reuse
            return _flatten(f"{LLM_INPUT_MESSAGES}.{index}", message)
        key = (index, id(message))
        cached = self._messages.get(key)
        if cached is not None and cached[0] is message:
            return cached[1]
        pairs = _flatten(f"{LLM_INPUT_MESSAGES}.{index}", message)
        self._messages[key] = (message, pairs)
        return pairs

    def _message_json(self, message: Message) -> str:
        if isinstance(message, SystemMessage):
            # Rebuilt on every call, but mostly with the same text: cache by text, bounded.
            text = self._system_json.get(message.content)
            if text is None:
                if len(self._system_json) > 16:
                    self._system_json.clear()
                text = json.dumps(_message_dict(message), ensure_ascii=False)
                self._system_json[message.content] = text
            return text
        cached = self._json.get(id(message))
        if cached is not None and cached[0] is message:
            return cached[1]
        text = json.dumps(_message_dict(message), ensure_ascii=False)
        self._json[id(message)] = (message, text)
        return text

    def _tool_pairs(self, tools: Sequence[ToolDefinition]) -> Pairs:
        names = tuple(t.name for t in tools)
        cached = self._tools.get(names)
        if cached is None:
            cached = self._tools[names] = tuple(
                (f"{LLM_TOOLS}.{i}.tool.json_schema", json.dumps(_tool_schema(t), sort_keys=True))
                for i, t in enumerate(tools)
            )
        return cached


def _message_dict(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": bounded(message.content)}
    if isinstance(message, ToolMessage):
        data["tool_call_id"] = message.tool_call_id
        data["name"] = message.name
    elif isinstance(message, AssistantMessage) and message.tool_calls:
        data["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": bounded(c.arguments)},
            }
            for c in message.tool_calls
        ]
    return data


def _tool_schema(definition: ToolDefinition) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": definition.name,
            "description": definition.description,
            "parameters": definition.parameters,
        },
    }


def _flatten(prefix: str, message: Message) -> Pairs:
    pairs: list[tuple[str, Any]] = [(f"{prefix}.message.role", message.role)]
    if message.content:
        pairs.append((f"{prefix}.message.content", bounded(message.content)))
    if isinstance(message, ToolMessage):
        pairs.append((f"{prefix}.message.tool_call_id", message.tool_call_id))
        pairs.append((f"{prefix}.message.name", message.name))
    elif isinstance(message, AssistantMessage):
        pairs.extend(_call_pairs(prefix, message.tool_calls))
    return tuple(pairs)


def _call_pairs(prefix: str, calls: Sequence[ToolCall]) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for j, call in enumerate(calls):
        base = f"{prefix}.message.tool_calls.{j}.tool_call"
        pairs.append((f"{base}.id", call.id))
        pairs.append((f"{base}.function.name", call.name))
        pairs.append((f"{base}.function.arguments", bounded(call.arguments)))
    return pairs
