"""The OpenAI chat-completions wire format, both ways: plain dicts in, plangate's records out.

Harness → wire (`message_to_wire`, `tool_to_wire`) is what `OpenAIModel` sends; wire → harness
(`read_completion`) is how it reads the answer. The inverse directions serve an agent written
in any framework: `messages_from_wire` and `tools_from_wire` read the request it sends, and
`completion_to_wire` and `chunks_to_wire` write the answer it expects, whole or streamed.

Plain `dict[str, Any]` throughout, and no import of the `openai` package: this module is cheap
to import. What the wire cannot carry is lost on the way: a tool message's `is_error` flag is
not on the wire (a tool message read back is never an error), and a tool message's name is taken
from the assistant call it answers.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from plangate.harness._errors import PlangateError
from plangate.harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)

SNIPPET = 200
"""How many characters of a bad value an error message quotes."""
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}
"""The schema of a tool that declares no parameters (the API's meaning of an absent one)."""
ROLES = ("system", "developer", "user", "assistant", "tool")
"""The message roles `messages_from_wire` reads; `developer` is read as a system message."""


class WireError(PlangateError):
    """A chat-completions message, tool or reply is not what the format says; names the field."""


def snippet(value: object) -> str:
    """`value` as text (`repr` unless a string), cut to `SNIPPET` characters."""
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SNIPPET else text[:SNIPPET] + "…"


# -- harness → wire ---------------------------------------------------------------------------


def message_to_wire(message: Message) -> dict[str, Any]:
    """One message as a chat-completions request message."""
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": message.content}
    if isinstance(message, UserMessage):
        return {"role": "user", "content": message.content}
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    if not message.tool_calls:
        return {"role": "assistant", "content": message.content}
    # The API rejects an empty `tool_calls` list, and wants null content beside calls.
    return {
        "role": "assistant",
        "content": message.content or None,
        "tool_calls": [call_to_wire(call) for call in message.tool_calls],
    }


def messages_to_wire(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """A conversation as chat-completions request messages (`message_to_wire` of each)."""
    return [message_to_wire(message) for message in messages]


def tools_to_wire(tools: Iterable[ToolDefinition]) -> list[dict[str, Any]]:
    """Tool definitions as chat-completions function tools (`tool_to_wire` of each)."""
    return [tool_to_wire(tool) for tool in tools]


def call_to_wire(call: ToolCall) -> dict[str, Any]:
    """One tool call as the wire's `{"id", "type": "function", "function": {...}}`."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": call.arguments},
    }


def tool_to_wire(tool: ToolDefinition) -> dict[str, Any]:
    """One tool definition as a chat-completions function tool."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def completion_to_wire(
    response: ModelResponse, *, model: str, completion_id: str, created: int
) -> dict[str, Any]:
    """A response as a `chat.completion` object, the body of a non-streamed answer.

    Args:
        response: The model's answer.
        model: The model the completion names (`model`).
        completion_id: The completion's `id`.
        created: Its `created` time, in seconds since the epoch.
    """
    message: dict[str, Any] = {"role": "assistant", "content": response.message.content}
    calls = response.message.tool_calls
    if calls:
        message["content"] = response.message.content or None
        message["tool_calls"] = [call_to_wire(call) for call in calls]
    message["refusal"] = None
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _finish_reason(response),
                "logprobs": None,
            }
        ],
        "usage": usage_to_wire(response.usage),
    }


def chunks_to_wire(
    response: ModelResponse,
    *,
    model: str,
    completion_id: str,
    created: int,
    include_usage: bool = False,
) -> list[dict[str, Any]]:
    """A response as the `chat.completion.chunk` objects of a streamed answer, in order.

    The role first (with empty content, null when the answer is only tool calls), then the
    text, then each tool call (its id, type and name, then its arguments), then the finish
    reason; with `include_usage` (the request's `stream_options.include_usage`), every chunk
    carries `usage: null` and one last chunk with no choices carries the usage.

    Args:
        response: The model's answer.
        model: The model the chunks name.
        completion_id: The `id` every chunk carries.
        created: The `created` time every chunk carries.
        include_usage: Whether to end with a usage chunk.
    """
    # As the API does: null content beside calls, else text that the next chunks extend.
    calls_only = response.message.tool_calls and not response.message.content
    role = {"role": "assistant", "content": None if calls_only else ""}
    deltas: list[tuple[dict[str, Any], str | None]] = [(role, None)]
    if response.message.content:
        deltas.append(({"content": response.message.content}, None))
    for index, call in enumerate(response.message.tool_calls):
        head = {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
        deltas.append(({"tool_calls": [{"index": index, **head}]}, None))
        if call.arguments:
            arguments = {"index": index, "function": {"arguments": call.arguments}}
            deltas.append(({"tool_calls": [arguments]}, None))
    deltas.append(({}, _finish_reason(response)))
    base = {"id": completion_id, "object": "chat.completion.chunk", "created": created}
    base["model"] = model
    extra = {"usage": None} if include_usage else {}
    chunks = [
        {**base, "choices": [_chunk_choice(delta, finish)], **extra} for delta, finish in deltas
    ]
    if include_usage:
        chunks.append({**base, "choices": [], "usage": usage_to_wire(response.usage)})
    return chunks


def usage_to_wire(usage: Usage) -> dict[str, int]:
    """Token counts as the wire's `usage` object."""
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def _chunk_choice(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}


def _finish_reason(response: ModelResponse) -> str:
    if response.message.tool_calls:
        return "tool_calls"
    return response.finish_reason or "stop"


# -- wire → harness: the reply ----------------------------------------------------------------


def read_completion(text: str, model: str) -> ModelResponse:
    """Read a chat-completion body.

    Lenient where compatible servers differ (no usage, arguments sent as an object, no call id),
    strict where the answer could not be read.

    Args:
        text: The body.
        model: The model name to use when the body names none.

    Raises:
        WireError: The body is not a chat completion; the message says what is wrong.
    """
    body = read_object(text)
    choice = first_choice(body, text)
    message = choice.get("message")
    if not isinstance(message, dict):
        raise WireError(f"choice 0 has no message: {snippet(choice)}")
    content, calls = message.get("content"), message.get("tool_calls")
    if calls is None:
        calls = []
    elif not isinstance(calls, list):
        raise WireError(f"choice 0 has tool_calls that are not a list: {snippet(calls)}")
    reported_model, finish_reason = body.get("model"), choice.get("finish_reason")
    return ModelResponse(
        message=AssistantMessage(
            content=content if isinstance(content, str) else "",
            tool_calls=tuple(read_call(call, index) for index, call in enumerate(calls)),
        ),
        usage=read_usage(body.get("usage")),
        model_name=reported_model if isinstance(reported_model, str) else model,
        finish_reason=finish_reason if isinstance(finish_reason, str) else None,
    )


def read_object(text: str) -> dict[str, Any]:
    """`text` parsed as a JSON object.

    Raises:
        WireError: It is not JSON, or not an object.
    """
    try:
        body = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise WireError(f"the body is not JSON: {snippet(text)!r}") from None
    if not isinstance(body, dict):
        raise WireError(f"the body is not a JSON object: {snippet(text)!r}")
    return body


def first_choice(body: dict[str, Any], text: str) -> dict[str, Any]:
    """The first of a completion's choices (`text`, the body, is quoted in errors).

    Raises:
        WireError: There is no choice, or it is not an object.
    """
    choices = body.get("choices")
    if not isinstance(choices, list):
        raise WireError(f"the body has no 'choices' list: {snippet(text)!r}")
    if not choices:
        raise WireError("'choices' is empty")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise WireError(f"choice 0 is not an object: {snippet(choice)}")
    return choice


def read_call(call: Any, index: int) -> ToolCall:
    """Tool call number `index` of a reply; a missing id becomes `call_{index}_{name}`.

    Raises:
        WireError: The call names no function.
    """
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    if not isinstance(function, dict) or not isinstance(name, str) or not name:
        raise WireError(f"tool call {index} has no function name: {snippet(call)}")
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        # Some compatible servers send an object; an absent value means no arguments.
        arguments = "{}" if arguments is None else json.dumps(arguments, ensure_ascii=False)
    call_id = call.get("id")
    return ToolCall(
        id=call_id if isinstance(call_id, str) and call_id else f"call_{index}_{name}",
        name=name,
        arguments=arguments,
    )


def read_usage(usage: Any) -> Usage:
    """A reply's `usage` object; anything missing counts zero."""
    if not isinstance(usage, dict):
        return Usage()
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    return Usage(
        prompt_tokens=prompt if isinstance(prompt, int) else 0,
        completion_tokens=completion if isinstance(completion, int) else 0,
    )


# -- wire → harness: the request --------------------------------------------------------------


def messages_from_wire(messages: Any) -> list[Message]:
    """Read the `messages` of a chat-completions request.

    Roles `system` and `developer` become system messages; `user` a user message (its content
    a string or a list of text parts, joined by newlines); `assistant` an assistant message
    (null or absent content with `tool_calls`); `tool` a tool message, named after the call it
    answers (else its own `name`, else empty). Fields the records have no place for (`name` on
    other roles, `refusal`, `audio`) are ignored.

    Args:
        messages: The request's `messages` value.

    Raises:
        WireError: A message is malformed; the message names its index and field.
    """
    if not isinstance(messages, list):
        raise WireError(f"messages: expected a list of messages, got {snippet(messages)}")
    names: dict[str, str] = {}
    read: list[Message] = []
    for index, item in enumerate(messages):
        where = f"messages[{index}]"
        if not isinstance(item, dict):
            raise WireError(f"{where}: expected a message object, got {snippet(item)}")
        role = item.get("role")
        reader = _READERS.get(role) if isinstance(role, str) else None
        if reader is None:
            raise WireError(f"{where}.role: expected one of {', '.join(ROLES)}; got {role!r}")
        read.append(reader(item, where, names))
    return read


def tools_from_wire(tools: Any) -> list[ToolDefinition]:
    """Read the `tools` of a chat-completions request (function tools only).

    An absent description is empty; absent parameters are an empty object schema.

    Args:
        tools: The request's `tools` value.

    Raises:
        WireError: A tool is malformed or not a function tool; the message names its index and
            field.
    """
    if not isinstance(tools, list):
        raise WireError(f"tools: expected a list of tools, got {snippet(tools)}")
    return [_tool_from_wire(tool, f"tools[{index}]") for index, tool in enumerate(tools)]


def _tool_from_wire(tool: Any, where: str) -> ToolDefinition:
    if not isinstance(tool, dict):
        raise WireError(f"{where}: expected a tool object, got {snippet(tool)}")
    if tool.get("type") != "function":
        raise WireError(
            f"{where}.type: only 'function' tools are supported, got {snippet(tool.get('type'))}"
        )
    function = json_object(tool.get("function"), f"{where}.function")
    description = function.get("description")
    if description is not None and not isinstance(description, str):
        raise WireError(
            f"{where}.function.description: expected a string, got {snippet(description)}"
        )
    parameters = function.get("parameters")
    if parameters is None:
        parameters = dict(EMPTY_PARAMETERS)
    elif not isinstance(parameters, dict):
        raise WireError(
            f"{where}.function.parameters: expected a JSON schema object, got {snippet(parameters)}"
        )
    return ToolDefinition(
        name=nonempty(function.get("name"), f"{where}.function.name"),
        description=description or "",
        parameters=parameters,
    )


def _system(item: dict[str, Any], where: str, names: dict[str, str]) -> Message:
    return SystemMessage(content=text_parts(item.get("content"), f"{where}.content"))


def _user(item: dict[str, Any], where: str, names: dict[str, str]) -> Message:
    return UserMessage(content=text_parts(item.get("content"), f"{where}.content"))


def _assistant(item: dict[str, Any], where: str, names: dict[str, str]) -> Message:
    content = item.get("content")
    text = "" if content is None else text_parts(content, f"{where}.content")
    calls = item.get("tool_calls")
    if calls is None:
        calls = []
    elif not isinstance(calls, list):
        raise WireError(f"{where}.tool_calls: expected a list of tool calls, got {snippet(calls)}")
    read = tuple(_call(call, f"{where}.tool_calls[{i}]") for i, call in enumerate(calls))
    names.update((call.id, call.name) for call in read)
    return AssistantMessage(content=text, tool_calls=read)


def _tool(item: dict[str, Any], where: str, names: dict[str, str]) -> Message:
    call_id = nonempty(item.get("tool_call_id"), f"{where}.tool_call_id")
    own = item.get("name")
    return ToolMessage(
        tool_call_id=call_id,
        name=names.get(call_id) or (own if isinstance(own, str) else ""),
        content=text_parts(item.get("content"), f"{where}.content"),
    )


_READERS: dict[str, Callable[[dict[str, Any], str, dict[str, str]], Message]] = {
    "system": _system,
    "developer": _system,
    "user": _user,
    "assistant": _assistant,
    "tool": _tool,
}


def _call(call: Any, where: str) -> ToolCall:
    call = json_object(call, where)
    if call.get("type", "function") != "function":
        raise WireError(
            f"{where}.type: only 'function' calls are supported, got {snippet(call.get('type'))}"
        )
    function = json_object(call.get("function"), f"{where}.function")
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        raise WireError(
            f"{where}.function.arguments: expected a JSON text, got {snippet(arguments)}"
        )
    return ToolCall(
        id=nonempty(call.get("id"), f"{where}.id"),
        name=nonempty(function.get("name"), f"{where}.function.name"),
        arguments=arguments,
    )


def text_parts(content: Any, where: str, types: tuple[str, ...] = ("text",)) -> str:
    """A content value: a string, or a list of text parts (of `types`) joined by newlines."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise WireError(
            f"{where}: expected a string or a list of text parts, got {snippet(content)}"
        )
    texts = []
    for index, part in enumerate(content):
        part = json_object(part, f"{where}[{index}]")
        text = part.get("text")
        if part.get("type") not in types or not isinstance(text, str):
            named = " or ".join(repr(t) for t in types)
            raise WireError(
                f"{where}[{index}]: only text parts are supported "
                f"({{'type': {named}, 'text': ...}}), got {snippet(part)}"
            )
        texts.append(text)
    return "\n".join(texts)


def json_object(value: Any, where: str) -> dict[str, Any]:
    """`value` if it is a JSON object; else a `WireError` naming `where`."""
    if not isinstance(value, dict):
        raise WireError(f"{where}: expected an object, got {snippet(value)}")
    return value


def nonempty(value: Any, where: str) -> str:
    """`value` if it is a non-empty string; else a `WireError` naming `where`."""
    if not isinstance(value, str) or not value:
        raise WireError(f"{where}: expected a non-empty string, got {snippet(value)}")
    return value
