"""What the endpoint reads from a request and writes back: no sockets, no threads."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from plangate.harness import Message, ModelResponse, ToolDefinition
from plangate.harness.models import (
    WireError,
    chunks_to_wire,
    completion_to_wire,
    messages_from_wire,
    tools_from_wire,
)

JSON = "application/json"
EVENT_STREAM = "text/event-stream"
ErrorType = Literal["invalid_request_error", "server_error"]
"""The OpenAI error types the endpoint answers with."""
_SNIPPET = 200


@dataclass(frozen=True, slots=True)
class Reply:
    """An HTTP answer: status, body and its content type."""

    status: int
    """The HTTP status code."""
    body: bytes
    """The body, sent with its length (so the connection stays open for the next request)."""
    content_type: str = JSON
    """The `Content-Type` header."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """The parts of a chat-completions request the endpoint uses; the rest is ignored."""

    messages: tuple[Message, ...]
    """The conversation."""
    tools: tuple[ToolDefinition, ...]
    """The tools offered."""
    model: str
    """The model asked for; empty when absent."""
    stream: bool
    """`stream: true`: answer with server-sent events."""
    include_usage: bool
    """`stream_options.include_usage: true`: end the stream with a usage chunk."""


def read_request(body: bytes) -> ChatRequest:
    """Read a chat-completions request body.

    Raises:
        WireError: The body is not a JSON object, or a message or a tool is malformed; the
            message names the field.
    """
    data = read_object(body)
    tools = data.get("tools")
    model, options = data.get("model"), data.get("stream_options")
    return ChatRequest(
        messages=tuple(messages_from_wire(data.get("messages"))),
        tools=() if tools is None else tuple(tools_from_wire(tools)),
        model=model if isinstance(model, str) else "",
        stream=data.get("stream") is True,
        include_usage=isinstance(options, dict) and options.get("include_usage") is True,
    )


def read_object(body: bytes) -> dict[str, Any]:
    """A request body read as a JSON object.

    Raises:
        WireError: The body is not JSON, or not an object; the message quotes its start.
    """
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        text = body[:_SNIPPET].decode("utf-8", "replace")
        raise WireError(f"the request body is not JSON: {text!r}") from None
    if not isinstance(data, dict):
        raise WireError(f"the request body is not a JSON object: {_snippet(data)}")
    return data


def completion_reply(
    request: ChatRequest, response: ModelResponse, *, model: str, completion_id: str, created: int
) -> Reply:
    """The answer to `request`: a `chat.completion`, or its chunks as server-sent events."""
    if not request.stream:
        body = completion_to_wire(
            response, model=model, completion_id=completion_id, created=created
        )
        return Reply(200, dump_json(body))
    chunks = chunks_to_wire(
        response,
        model=model,
        completion_id=completion_id,
        created=created,
        include_usage=request.include_usage,
    )
    events = b"".join(b"data: " + dump_json(chunk) + b"\n\n" for chunk in chunks)
    return Reply(200, events + b"data: [DONE]\n\n", EVENT_STREAM)


def models_reply(model_name: str) -> Reply:
    """The answer to `GET /models`: a list of the one model the route serves."""
    model = {"id": model_name, "object": "model", "created": 0, "owned_by": "plangate"}
    return Reply(200, dump_json({"object": "list", "data": [model]}))


def error_reply(status: int, message: str, kind: ErrorType) -> Reply:
    """An error in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""
    error = {"message": message, "type": kind, "param": None, "code": None}
    return Reply(status, dump_json({"error": error}))


def dump_json(value: Any) -> bytes:
    """`value` as compact UTF-8 JSON, the way every reply body is written."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _snippet(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _SNIPPET else text[:_SNIPPET] + "…"
