"""The records that flow between the loop and a model: messages, tool calls, responses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, Literal


def _unencodable(value: Any) -> Any:
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# json.dumps sets up an encoder on every call, and so does JSONEncoder.encode for anything but a
# string; for a call's arguments that costs more than the encoding. This is the C encoder that
# `json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
# check_circular=False)` sets up, made once. (Without circular checks: a value that contains
# itself fails with RecursionError instead of ValueError.)
_ENCODE = c_make_encoder(None, _unencodable, encode_basestring, None, ":", ",", True, False, True)
_DECODER = json.JSONDecoder()


def canonical_json(value: Any) -> str:
    """Serialize `value` as canonical JSON: sorted keys, no spaces, UTF-8 kept as is.

    Two calls with the same arguments in a different key order get the same text, which is
    what loop detection compares.
    """
    return "".join(_ENCODE(value, 0))


def parse_json(text: str) -> Any:
    """`json.loads(text)` for a str, quicker for the usual text with no whitespace around it."""
    try:
        value, end = _DECODER.raw_decode(text)
    except (json.JSONDecodeError, RecursionError):
        return json.loads(text)  # leading whitespace is fine; anything else raises as loads does
    return value if end == len(text) else json.loads(text)


def parse_object(text: str) -> dict[str, Any] | None:
    """Arguments text parsed, when it is a JSON object (empty text is `{}`); None otherwise."""
    try:
        value = parse_json(text or "{}")
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def canonical_arguments_text(text: str) -> str:
    """Canonical JSON of arguments as a model wrote them; empty text is `{}`.

    Text that is not valid JSON is kept as it is: it is still a stable key for comparing calls.
    """
    try:
        return canonical_json(parse_json(text or "{}"))
    except (json.JSONDecodeError, RecursionError):
        return text


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One tool call requested by the model."""

    id: str
    """The call id the model gave; tool results refer to it."""
    name: str
    """The name of the tool to call."""
    arguments: str
    """The arguments exactly as the model wrote them: a JSON object text, possibly malformed."""

    @classmethod
    def of(cls, name: str, call_id: str | None = None, /, **arguments: Any) -> ToolCall:
        """Build a call from Python arguments (for scripts and simulated models)."""
        return cls(id=call_id or f"call_{name}", name=name, arguments=canonical_json(arguments))


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    """Instructions from the harness: the system prompt, or the pinned plan message."""

    content: str
    """The text of the message."""
    role: Literal["system"] = "system"
    """Discriminator."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """A message in the user's voice: a request, or a prompt the harness adds (nudges, warnings)."""

    content: str
    """The text of the message."""
    role: Literal["user"] = "user"
    """Discriminator."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """What the model said: text, tool calls, or both (or neither, for an empty reply)."""

    content: str = ""
    """The text the model wrote; empty when it only called tools."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls the model made, in order."""
    role: Literal["assistant"] = "assistant"
    """Discriminator."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMessage:
    """The result of one tool call, as the model will see it."""

    tool_call_id: str
    """The id of the call this answers."""
    name: str
    """The tool's name."""
    content: str
    """The result text: the tool's output, or an error that says what to do next."""
    is_error: bool = False
    """True when the call failed (bad arguments, unknown tool, tool exception, gate bounce)."""
    role: Literal["tool"] = "tool"
    """Discriminator."""


Message = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any message of a conversation."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token counts of one model call."""

    prompt_tokens: int = 0
    """Tokens the model read."""
    completion_tokens: int = 0
    """Tokens the model wrote."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelResponse:
    """One model call's answer."""

    message: AssistantMessage
    """What the model said."""
    usage: Usage = field(default_factory=Usage)
    """Token counts, when the model reports them."""
    model_name: str = ""
    """The model that answered, as it names itself."""
    finish_reason: str | None = None
    """The provider's finish reason (`stop`, `tool_calls`, `length`), when known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """What a model is told about a tool."""

    name: str
    """The tool's name."""
    description: str
    """What the tool does, from its docstring."""
    parameters: dict[str, Any]
    """JSON schema of the arguments object."""


def message_to_dict(message: Message) -> dict[str, Any]:
    """A message as JSON-able data (for saved runs and golden datasets)."""
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if isinstance(message, AssistantMessage) and message.tool_calls:
        data["tool_calls"] = [
            {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
        ]
    if isinstance(message, ToolMessage):
        data.update(tool_call_id=message.tool_call_id, name=message.name, is_error=message.is_error)
    return data


def message_from_dict(data: dict[str, Any]) -> Message:
    """The inverse of `message_to_dict`."""
    role = data["role"]
    if role == "system":
        return SystemMessage(content=data["content"])
    if role == "user":
        return UserMessage(content=data["content"])
    if role == "assistant":
        calls = tuple(
            ToolCall(id=c["id"], name=c["name"], arguments=c["arguments"])
            for c in data.get("tool_calls", ())
        )
        return AssistantMessage(content=data["content"], tool_calls=calls)
    if role == "tool":
        return ToolMessage(
            tool_call_id=data["tool_call_id"],
            name=data["name"],
            content=data["content"],
            is_error=bool(data.get("is_error", False)),
        )
    raise ValueError(f"unknown message role {role!r}")
