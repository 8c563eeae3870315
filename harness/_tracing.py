"""Spans of the reference agent in the OpenInference conventions, on the OpenTelemetry API only.

One AGENT span per turn, one LLM span per model call, one TOOL span per tool call; plan changes,
gate bounces, nudges, guard firings and the stop reason are events on the AGENT span. Every span
carries `session.id`, `user.id` and `metadata` (with the variant). Where spans go is the caller's
choice (a `TracerProvider`, or None for no tracing).

Tracing must stay cheap and must never break a run. Spans that others may nest in (the AGENT
span, the TOOL span of an async tool such as `delegate`, whose subagent's spans go under it) are
current while they run. An LLM span, and the TOOL span of a sync tool, is made when its block
ends, dated from its start, with all its attributes in one call: no context switch and one
attribute pass, but a span started inside the block (by an instrumented HTTP client, say) is
its sibling rather than its child. An LLM span's input messages are its `input.value`: one
JSON text in which each message is serialized once per session, and the part of the context
that the previous call already sent is reused whole (`messages="flat"` instead flattens them
into the `llm.input_messages.*` attributes, which costs one attribute per message field per
span: the context is re-listed on every call, so that cost grows with the square of the turn's
length). Tool schemas go on the first LLM span of a turn and whenever the offered tools change.
Strings are bounded, and every call into OpenTelemetry is guarded: a failure is logged, never
raised.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from json.encoder import encode_basestring as _quote
from typing import Any, Literal

from opentelemetry.trace import TracerProvider

from plangate.harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
)
from plangate.harness._spans import (
    NO_SPAN,
    CurrentSpan,
    LateSpan,
    SpanHandle,
    bounded,
    tracer_of,
)
from plangate.harness.semconv import (
    AGENT_NAME,
    AGENT_SPAN_NAME,
    INPUT_MIME_TYPE,
    INPUT_VALUE,
    ITERATION,
    LLM_FINISH_REASON,
    LLM_INPUT_MESSAGES,
    LLM_MODEL_NAME,
    LLM_OUTPUT_MESSAGES,
    LLM_SPAN_NAME,
    LLM_TOOLS,
    MESSAGE_CONTENT,
    MESSAGE_NAME,
    MESSAGE_ROLE,
    MESSAGE_TOOL_CALL_ID,
    MESSAGE_TOOL_CALLS,
    METADATA,
    MIME_JSON,
    MIME_TEXT,
    OUTPUT_MIME_TYPE,
    OUTPUT_VALUE,
    PLAN,
    SESSION_ID,
    SPAN_KIND,
    TAGS,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOKENS_TOTAL,
    TOOL_CALL_FUNCTION_ARGUMENTS,
    TOOL_CALL_FUNCTION_NAME,
    TOOL_CALL_ID,
    TOOL_ID,
    TOOL_JSON_SCHEMA,
    TOOL_NAME,
    TOOL_PARAMETERS,
    TOOL_SPAN_PREFIX,
    TURN_INDEX,
    USER_ID,
)

OUTPUT_MESSAGE = f"{LLM_OUTPUT_MESSAGES}.0"
OUTPUT_ROLE = f"{OUTPUT_MESSAGE}.{MESSAGE_ROLE}"
OUTPUT_CONTENT = f"{OUTPUT_MESSAGE}.{MESSAGE_CONTENT}"


Pairs = tuple[tuple[str, Any], ...]
MessageDetail = Literal["json", "flat"]
"""How LLM spans carry their input messages: one JSON `input.value`, or flattened attributes."""


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
        self._tracer = tracer_of(provider) if provider is not None else None
        self._base: dict[str, Any] = {
            SESSION_ID: session_id,
            USER_ID: user_id,
            METADATA: json.dumps(dict(metadata), sort_keys=True),
        }
        if tags:
            self._base[TAGS] = list(tags)
        self._messages: dict[tuple[int, int], tuple[Message, Pairs]] = {}
        self._json: dict[int, str] = {}
        self._kept: list[Message] = []
        self._system_texts: dict[str, str] = {}
        self._body: Sequence[Message] = ()
        self._body_json: list[str] = []
        self._tools: dict[tuple[str, ...], Pairs] = {}
        self._last_tools: tuple[str, ...] = ()
        self._schemas: dict[str, str] = {}
        self._turn: SpanHandle = NO_SPAN

    def span(self, name: str, attributes: Mapping[str, Any]) -> SpanHandle:
        """A span, current while its block runs. `attributes` include the base ones."""
        if self._tracer is None:
            return NO_SPAN
        return CurrentSpan(self._tracer, name, attributes)

    def chain(self, name: str, attributes: Mapping[str, Any]) -> SpanHandle:
        """A CHAIN span of the session (its identity attributes, then `attributes`), current."""
        return self.span(name, {**self._base, SPAN_KIND: "CHAIN", **attributes})

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
    ) -> SpanHandle:
        """The LLM span of one model call, made when the call returns (nothing nests in it)."""
        if self._tracer is None:
            return NO_SPAN
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
            attributes[INPUT_VALUE] = self._input_json(messages)
            attributes[INPUT_MIME_TYPE] = MIME_JSON
        names = tuple([t.name for t in tools])
        if names != self._last_tools or self.messages == "flat":
            self._last_tools = names
            attributes.update(self._tool_pairs(names, tools))
        return LateSpan(self._tracer, LLM_SPAN_NAME, attributes)

    def record_response(self, handle: SpanHandle, response: ModelResponse) -> None:
        """Put a model response on its LLM span."""
        if not handle.recording:
            return
        message = response.message
        usage = response.usage
        content = bounded(message.content)
        attributes: dict[str, Any] = {
            OUTPUT_ROLE: "assistant",
            TOKENS_PROMPT: usage.prompt_tokens,
            TOKENS_COMPLETION: usage.completion_tokens,
            TOKENS_TOTAL: usage.prompt_tokens + usage.completion_tokens,
        }
        if content:  # a reply of tool calls only has no text: no empty output attributes
            attributes[OUTPUT_VALUE] = content
            attributes[OUTPUT_MIME_TYPE] = MIME_TEXT
            attributes[OUTPUT_CONTENT] = content
        for position, call in enumerate(message.tool_calls):
            id_key, name_key, arguments_key = _call_keys(OUTPUT_MESSAGE, position)
            attributes[id_key] = call.id
            attributes[name_key] = call.name
            attributes[arguments_key] = bounded(call.arguments)
        if response.model_name:
            attributes[LLM_MODEL_NAME] = response.model_name
        if response.finish_reason:
            attributes[LLM_FINISH_REASON] = response.finish_reason
        handle.set(attributes)

    def plan_change(self, iteration: int, plan: str, reason: str) -> None:
        """A CHAIN span for a plan change the harness made itself (no tool call behind it)."""
        if self._tracer is None:
            return
        attributes = {
            **self._base,
            SPAN_KIND: "CHAIN",
            ITERATION: iteration,
            PLAN: plan,
            INPUT_VALUE: reason,
            INPUT_MIME_TYPE: MIME_TEXT,
        }
        with LateSpan(self._tracer, "plan", attributes):
            pass

    def tool(
        self, iteration: int, call: ToolCall, schema: Mapping[str, Any] | None, *, nests: bool
    ) -> SpanHandle:
        """The TOOL span of one call; current while the tool runs if spans may `nest` in it."""
        if self._tracer is None:
            return NO_SPAN
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
        name = f"{TOOL_SPAN_PREFIX}{call.name}"
        if nests:
            return CurrentSpan(self._tracer, name, attributes)
        return LateSpan(self._tracer, name, attributes)

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

    def _input_json(self, messages: Sequence[Message]) -> str:
        """`{"messages":[...]}`, serializing only the messages new since the previous call.

        The leading system messages are rebuilt for every call (their texts are cached by
        text); the rest usually extends the previous call's, whose texts are kept in order.
        """
        head = 0
        for message in messages:
            if not isinstance(message, SystemMessage):
                break
            head += 1
        body = messages[head:]  # a copy: later changes to the caller's list do not reach it
        seen = len(self._body)
        if seen and body[:seen] == self._body:
            self._body_json.extend(map(self._message_json, body[seen:]))
        else:
            self._body_json = list(map(self._message_json, body))
        self._body = body
        joined = ",".join([*map(self._system_json, messages[:head]), *self._body_json])
        return f'{{"messages":[{joined}]}}'

    def _system_json(self, message: Message) -> str:
        # Rebuilt on every call, but mostly with the same text: cache by text, bounded.
        text = self._system_texts.get(message.content)
        if text is None:
            if len(self._system_texts) > 16:
                self._system_texts.clear()
            text = self._system_texts[message.content] = encode_message(message)
        return text

    def _message_json(self, message: Message) -> str:
        text = self._json.get(id(message))
        if text is None:
            text = self._json[id(message)] = encode_message(message)
            self._kept.append(message)  # alive, so that its id is not reused
        return text

    def _tool_pairs(self, names: tuple[str, ...], tools: Sequence[ToolDefinition]) -> Pairs:
        cached = self._tools.get(names)
        if cached is None:
            cached = self._tools[names] = tuple(
                (f"{LLM_TOOLS}.{i}.{TOOL_JSON_SCHEMA}", json.dumps(_tool_schema(t), sort_keys=True))
                for i, t in enumerate(tools)
            )
        return cached


def encode_message(message: Message) -> str:
    """The message as `json.dumps(..., ensure_ascii=False)` writes its OpenAI-style dict.

    Built with json's own string encoder: the same text, without setting up an encoder for
    every message (which costs more than the message).
    """
    head = f'{{"role": {_quote(message.role)}, "content": {_quote(bounded(message.content))}'
    if isinstance(message, ToolMessage):
        call_id, name = _quote(message.tool_call_id), _quote(message.name)
        return f'{head}, "tool_call_id": {call_id}, "name": {name}}}'
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join([_call_json(c) for c in message.tool_calls])
        return f'{head}, "tool_calls": [{calls}]}}'
    return head + "}"


def _call_json(call: ToolCall) -> str:
    name, arguments = _quote(call.name), _quote(bounded(call.arguments))
    function = f'{{"name": {name}, "arguments": {arguments}}}'
    return f'{{"id": {_quote(call.id)}, "type": "function", "function": {function}}}'


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
    pairs: list[tuple[str, Any]] = [(f"{prefix}.{MESSAGE_ROLE}", message.role)]
    if message.content:
        pairs.append((f"{prefix}.{MESSAGE_CONTENT}", bounded(message.content)))
    if isinstance(message, ToolMessage):
        pairs.append((f"{prefix}.{MESSAGE_TOOL_CALL_ID}", message.tool_call_id))
        pairs.append((f"{prefix}.{MESSAGE_NAME}", message.name))
    elif isinstance(message, AssistantMessage):
        pairs.extend(_call_pairs(prefix, message.tool_calls))
    return tuple(pairs)


def _call_pairs(prefix: str, calls: Sequence[ToolCall]) -> list[tuple[str, Any]]:
    pairs: list[tuple[str, Any]] = []
    for j, call in enumerate(calls):
        id_key, name_key, arguments_key = _call_keys(prefix, j)
        pairs.append((id_key, call.id))
        pairs.append((name_key, call.name))
        pairs.append((arguments_key, bounded(call.arguments)))
    return pairs


@functools.lru_cache(maxsize=1024)
def _call_keys(prefix: str, position: int) -> tuple[str, str, str]:
    base = f"{prefix}.{MESSAGE_TOOL_CALLS}.{position}"
    return (
        f"{base}.{TOOL_CALL_ID}",
        f"{base}.{TOOL_CALL_FUNCTION_NAME}",
        f"{base}.{TOOL_CALL_FUNCTION_ARGUMENTS}",
    )
