"""The OpenAI Responses API's wire format, as a local endpoint reads it and answers it.

`responses_input_from_wire` and `responses_tools_from_wire` read a `POST /responses` request
into the same records that `messages_from_wire` and `tools_from_wire` read from the equivalent
chat-completions request: `instructions` become the first system message; a `function_call`
item joins the assistant message before it (or starts one), as the call would sit in that
message's `tool_calls` on the chat wire; a `function_call_output` becomes a tool message named
after the call it answers. `response_to_wire` and `response_events_to_wire` write the answer, a
`response` object or the typed events of its stream.

Only what a stateless endpoint in front of a plangate `Model` can serve is read: messages (text
parts), function calls and their outputs, function tools. Any other item, part or tool type is a
`WireError` naming its place (`input[2].type`). Plain `dict[str, Any]`, no `openai` import.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
from plangate.harness.models._wire import (
    EMPTY_PARAMETERS,
    WireError,
    json_object,
    nonempty,
    snippet,
    text_parts,
)

TEXT_PARTS = ("input_text", "output_text")
"""The content part types read as text; any other part (an image, a file) is refused."""
TOOL_CHOICES = ("auto", "none", "required")
"""The `tool_choice` modes read; a `{"type": "function", "name": ...}` choice is read too."""
_INCOMPLETE = {"length": "max_output_tokens", "content_filter": "content_filter"}
"""The finish reasons that leave a response `incomplete`, and the reason the API gives."""


# -- wire → harness: the request --------------------------------------------------------------


def responses_input_from_wire(instructions: Any, items: Any) -> list[Message]:
    """Read a Responses request's `instructions` and `input` as a conversation.

    Args:
        instructions: The request's `instructions`: a string, or None for none.
        items: Its `input`: a string (one user message) or a list of input items, each a
            message (`role` user, system, developer or assistant; `type` "message" or absent),
            a `function_call` or a `function_call_output`.

    Raises:
        WireError: A value is malformed or of a type not served; the message names its place.
    """
    conversation = _Conversation()
    if instructions is not None:
        conversation.add(SystemMessage(content=nonempty(instructions, "instructions")))
    if isinstance(items, str):
        conversation.add(UserMessage(content=items))
    elif isinstance(items, list):
        for index, item in enumerate(items):
            _read_item(item, f"input[{index}]", conversation)
    else:
        raise WireError(f"input: expected a string or a list of input items, got {snippet(items)}")
    conversation.flush()
    return conversation.messages


def responses_tools_from_wire(tools: Any) -> list[ToolDefinition]:
    """Read a Responses request's `tools`: function tools (`{"type": "function", "name", …}`).

    An absent description is empty; absent parameters are an empty object schema.

    Raises:
        WireError: A tool is malformed or not a function tool; the message names its index.
    """
    if not isinstance(tools, list):
        raise WireError(f"tools: expected a list of tools, got {snippet(tools)}")
    return [_tool(tool, f"tools[{index}]") for index, tool in enumerate(tools)]


def check_responses_tool_choice(choice: Any, tools: list[ToolDefinition]) -> None:
    """Check a Responses request's `tool_choice` against the tools it offers.

    A mode (`auto`, `none`, `required`) or a function by name is accepted; the `Model`
    protocol takes no tool choice, so it is checked and echoed, never passed on (as on the
    chat-completions route).

    Raises:
        WireError: The choice is of another kind, or names a function not offered.
    """
    if choice is None or choice in TOOL_CHOICES:
        return
    if not isinstance(choice, dict) or choice.get("type") != "function":
        raise WireError(
            f"tool_choice: expected one of {', '.join(TOOL_CHOICES)} or "
            f"{{'type': 'function', 'name': ...}}, got {snippet(choice)}"
        )
    name = nonempty(choice.get("name"), "tool_choice.name")
    if name not in {tool.name for tool in tools}:
        raise WireError(f"tool_choice.name: {name!r} is not one of the request's tools")


@dataclass(slots=True)
class _Conversation:
    """The messages read so far, and the assistant message that calls may still join."""

    messages: list[Message] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    pending: AssistantMessage | None = None

    def add(self, message: Message) -> None:
        self.flush()
        self.messages.append(message)

    def flush(self) -> None:
        if self.pending is not None:
            self.messages.append(self.pending)
            self.pending = None

    def say(self, text: str) -> None:
        # A stream may order a turn's calls before its text: the text joins those calls.
        pending = self.pending
        if pending is not None and pending.tool_calls and not pending.content:
            self.pending = AssistantMessage(content=text, tool_calls=pending.tool_calls)
            return
        self.flush()
        self.pending = AssistantMessage(content=text)

    def call(self, call: ToolCall) -> None:
        pending = self.pending or AssistantMessage()
        self.pending = AssistantMessage(
            content=pending.content, tool_calls=(*pending.tool_calls, call)
        )
        self.names[call.id] = call.name


def _read_item(item: Any, where: str, conversation: _Conversation) -> None:
    item = json_object(item, where)
    kind = item.get("type", "message")
    reader = _ITEM_READERS.get(kind) if isinstance(kind, str) else None
    if reader is None:
        raise WireError(
            f"{where}.type: only {', '.join(_ITEM_READERS)} items are served by plangate's "
            f"stateless endpoint, got {snippet(kind)}"
        )
    reader(item, where, conversation)


def _message(item: dict[str, Any], where: str, conversation: _Conversation) -> None:
    role = item.get("role")
    content = text_parts(item.get("content"), f"{where}.content", TEXT_PARTS)
    if role == "assistant":
        conversation.say(content)
    elif role == "user":
        conversation.add(UserMessage(content=content))
    elif role in ("system", "developer"):
        conversation.add(SystemMessage(content=content))
    else:
        raise WireError(
            f"{where}.role: expected one of user, system, developer, assistant; got {role!r}"
        )


def _function_call(item: dict[str, Any], where: str, conversation: _Conversation) -> None:
    arguments = item.get("arguments")
    if not isinstance(arguments, str):
        raise WireError(f"{where}.arguments: expected a JSON text, got {snippet(arguments)}")
    conversation.call(
        ToolCall(
            id=nonempty(item.get("call_id"), f"{where}.call_id"),
            name=nonempty(item.get("name"), f"{where}.name"),
            arguments=arguments,
        )
    )


def _function_output(item: dict[str, Any], where: str, conversation: _Conversation) -> None:
    call_id = nonempty(item.get("call_id"), f"{where}.call_id")
    output = item.get("output")
    conversation.add(
        ToolMessage(
            tool_call_id=call_id,
            name=conversation.names.get(call_id, ""),
            content=text_parts(output, f"{where}.output", TEXT_PARTS),
        )
    )


_ITEM_READERS: dict[str, Callable[[dict[str, Any], str, _Conversation], None]] = {
    "message": _message,
    "function_call": _function_call,
    "function_call_output": _function_output,
}


def _tool(tool: Any, where: str) -> ToolDefinition:
    tool = json_object(tool, where)
    if tool.get("type") != "function":
        raise WireError(
            f"{where}.type: only 'function' tools are served, got {snippet(tool.get('type'))}"
        )
    description, parameters = tool.get("description"), tool.get("parameters")
    if description is not None and not isinstance(description, str):
        raise WireError(f"{where}.description: expected a string, got {snippet(description)}")
    if parameters is not None and not isinstance(parameters, dict):
        raise WireError(
            f"{where}.parameters: expected a JSON schema object, got {snippet(parameters)}"
        )
    return ToolDefinition(
        name=nonempty(tool.get("name"), f"{where}.name"),
        description=description or "",
        parameters=dict(EMPTY_PARAMETERS) if parameters is None else parameters,
    )


# -- harness → wire: the answer ---------------------------------------------------------------


def response_to_wire(
    response: ModelResponse,
    *,
    response_id: str,
    model: str,
    created: int,
    echo: Mapping[str, Any],
) -> dict[str, Any]:
    """A model's answer as a `response` object, the body of a non-streamed answer.

    Its output is a `message` item with the text (unless the answer is only tool calls), then
    a `function_call` item per call. A `length` or `content_filter` finish without calls makes
    it `incomplete`, as the API does.

    Args:
        response: The model's answer.
        response_id: The response's `id` (`resp_…`); its items' ids are made from it.
        model: The model it names.
        created: Its `created_at` time, in seconds since the epoch.
        echo: The request's settings a response repeats (`instructions`, `tools`,
            `tool_choice`, `parallel_tool_calls`, `temperature`, …), as they should appear.
    """
    reason = None if response.message.tool_calls else _INCOMPLETE.get(response.finish_reason or "")
    status = "completed" if reason is None else "incomplete"
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": status,
        "completed_at": created if reason is None else None,
        "error": None,
        "incomplete_details": None if reason is None else {"reason": reason},
        "model": model,
        "output": _output(response, response_id.removeprefix("resp_"), status),
        **echo,
        "usage": responses_usage_to_wire(response.usage),
    }


def response_events_to_wire(
    response: ModelResponse,
    *,
    response_id: str,
    model: str,
    created: int,
    echo: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """A model's answer as the events of a streamed response, in order.

    `response.created` and `response.in_progress` (no output yet), then for each output item
    `response.output_item.added`, its content (`response.content_part.added`,
    `response.output_text.delta` and `.done`, `response.content_part.done`; or
    `response.function_call_arguments.delta` and `.done`) and `response.output_item.done`,
    then `response.completed` (or `response.incomplete`) with the whole response. Every event
    carries its `sequence_number`. The arguments are as for `response_to_wire`.
    """
    whole = response_to_wire(
        response, response_id=response_id, model=model, created=created, echo=echo
    )
    start = {**whole, "status": "in_progress", "completed_at": None, "incomplete_details": None}
    start.update(output=[], usage=None)
    events = [
        {"type": "response.created", "response": start},
        {"type": "response.in_progress", "response": start},
    ]
    for index, item in enumerate(whole["output"]):
        events += _item_events(item, index)
    events.append({"type": f"response.{whole['status']}", "response": whole})
    return [{**event, "sequence_number": number} for number, event in enumerate(events)]


def responses_usage_to_wire(usage: Usage) -> dict[str, Any]:
    """Token counts as a response's `usage` object (no cached or reasoning tokens)."""
    return {
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    }


def _output(response: ModelResponse, key: str, status: str) -> list[dict[str, Any]]:
    message = response.message
    items: list[dict[str, Any]] = []
    if message.content or not message.tool_calls:
        text = {"type": "output_text", "text": message.content, "annotations": [], "logprobs": []}
        items.append(
            {
                "id": f"msg_{key}",
                "type": "message",
                "status": status,
                "role": "assistant",
                "content": [text],
            }
        )
    for index, call in enumerate(message.tool_calls):
        items.append(
            {
                "id": f"fc_{key}_{index}",
                "type": "function_call",
                "status": "completed",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            }
        )
    return items


def _item_events(item: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """The events that stream one output item, from its `added` to its `done`."""
    if item["type"] == "function_call":
        added, body = {**item, "status": "in_progress", "arguments": ""}, _call_events(item, index)
    else:
        added, body = {**item, "status": "in_progress", "content": []}, _text_events(item, index)
    return [
        {"type": "response.output_item.added", "output_index": index, "item": added},
        *body,
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


def _call_events(item: dict[str, Any], index: int) -> list[dict[str, Any]]:
    at = {"item_id": item["id"], "output_index": index}
    arguments = item["arguments"]
    delta = [{"type": "response.function_call_arguments.delta", **at, "delta": arguments}]
    done = {"type": "response.function_call_arguments.done", **at, "arguments": arguments}
    return [*(delta if arguments else []), done]


def _text_events(item: dict[str, Any], index: int) -> list[dict[str, Any]]:
    part = item["content"][0]
    text = part["text"]
    at = {"item_id": item["id"], "output_index": index, "content_index": 0}
    delta = [{"type": "response.output_text.delta", **at, "delta": text, "logprobs": []}]
    return [
        {"type": "response.content_part.added", **at, "part": {**part, "text": ""}},
        *(delta if text else []),
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": part},
    ]
