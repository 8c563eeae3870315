"""The Responses API on a route (`POST /r/{key}/v1/responses`): reading a request, answering it.

The OpenAI Agents SDK's default model (`OpenAIResponsesModel`) speaks this API. A request is
read into the same messages and tools as the equivalent chat-completions request
(`plangate.harness.models.responses_input_from_wire`), so the route's model is called, and the
exchange recorded, exactly as on `/chat/completions`; the answer is a `response` object, or its
typed events as server-sent events.

The endpoint keeps no responses: a request must carry the whole conversation in `input`, which
the Agents SDK does by default. `previous_response_id`, `conversation`, a stored `prompt` and
`background` are refused with a 400 that names them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plangate.harness import Message, ModelResponse, ToolDefinition
from plangate.harness.models import (
    WireError,
    check_responses_tool_choice,
    response_events_to_wire,
    response_to_wire,
    responses_input_from_wire,
    responses_tools_from_wire,
)
from plangate.replay.endpoint._exchange import EVENT_STREAM, Reply, dump_json, read_object

RESPONSES_PATH = "v1/responses"
"""A route's Responses API path, after `/r/{key}/`."""
ECHOED: Mapping[str, Any] = {
    "instructions": None,
    "max_output_tokens": None,
    "metadata": {},
    "parallel_tool_calls": True,
    "temperature": None,
    "text": {"format": {"type": "text"}},
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "truncation": "disabled",
}
"""The request fields a response repeats, with what it says when the request left them out."""
_STATEFUL = {
    "previous_response_id": "plangate's endpoint keeps no responses",
    "conversation": "plangate's endpoint keeps no conversations",
    "prompt": "plangate's endpoint has no stored prompts",
    "background": "plangate's endpoint answers in the foreground only",
}
"""Request fields that need state the endpoint does not keep, and why each is refused."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsesRequest:
    """The parts of a Responses API request the endpoint uses; the rest is ignored."""

    messages: tuple[Message, ...]
    """The conversation: `instructions` as a system message, then `input`."""
    tools: tuple[ToolDefinition, ...]
    """The function tools offered."""
    model: str
    """The model asked for; empty when absent."""
    stream: bool
    """`stream: true`: answer with server-sent events."""
    echo: Mapping[str, Any]
    """The request's settings the response repeats (see `ECHOED`)."""


def read_responses_request(body: bytes) -> ResponsesRequest:
    """Read a Responses API request body.

    Raises:
        WireError: The body is not a JSON object, a field is malformed or not served, or the
            request needs stored state (`previous_response_id`, say); the message names the
            field.
    """
    data = read_object(body)
    for name, why in _STATEFUL.items():
        if data.get(name) not in (None, False):
            raise WireError(
                f"{name}: not supported: {why}. Send the whole conversation in `input` instead "
                "(the OpenAI Agents SDK does unless it is given a previous_response_id or a "
                "conversation_id)"
            )
    raw_tools = data.get("tools")
    tools = [] if raw_tools is None else responses_tools_from_wire(raw_tools)
    check_responses_tool_choice(data.get("tool_choice"), tools)
    model = data.get("model")
    return ResponsesRequest(
        messages=tuple(responses_input_from_wire(data.get("instructions"), data.get("input"))),
        tools=tuple(tools),
        model=model if isinstance(model, str) else "",
        stream=data.get("stream") is True,
        echo={
            name: default if data.get(name) is None else data[name]
            for name, default in ECHOED.items()
        },
    )


def responses_reply(
    request: ResponsesRequest,
    response: ModelResponse,
    *,
    model: str,
    response_id: str,
    created: int,
) -> Reply:
    """The answer to `request`: a `response` object, or its events as server-sent events."""
    if not request.stream:
        whole = response_to_wire(
            response, response_id=response_id, model=model, created=created, echo=request.echo
        )
        return Reply(200, dump_json(whole))
    events = response_events_to_wire(
        response, response_id=response_id, model=model, created=created, echo=request.echo
    )
    body = b"".join(
        b"event: " + event["type"].encode() + b"\ndata: " + dump_json(event) + b"\n\n"
        for event in events
    )
    return Reply(200, body, EVENT_STREAM)
