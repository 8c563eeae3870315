"""The model endpoint, spoken to by the real `openai` clients: answers, streams, errors, records."""

from __future__ import annotations

import http.client
import json
import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest

from plangate.harness import (
    AssistantMessage,
    ModelError,
    ModelResponse,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    Usage,
    UserMessage,
)
from plangate.harness.models import messages_from_wire
from plangate.replay.endpoint import EndpointError, ModelEndpoint, Route

ASK: list[Any] = [{"role": "user", "content": "What is 2 + 3?"}]
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
        "strict": True,  # the client's `.stream()` helper takes strict tools only
    },
}
USAGE = Usage(prompt_tokens=12, completion_tokens=7)
TEXT = ModelResponse(message=AssistantMessage(content="It is 5."), usage=USAGE, model_name="m-1")
CALLS = ModelResponse(
    message=AssistantMessage(
        content="Let me add.",
        tool_calls=(
            ToolCall.of("add", "call_1", a=2, b=3),
            ToolCall(id="call_2", name="add", arguments='{"a": 40, "b": 2}'),
        ),
    ),
    usage=USAGE,
    model_name="m-1",
)
ONLY_CALLS = ModelResponse(
    message=AssistantMessage(tool_calls=(ToolCall.of("add", "call_3", a=1, b=1),)), usage=USAGE
)


@pytest.fixture
def endpoint() -> Iterator[ModelEndpoint]:
    with ModelEndpoint() as running:
        yield running


def client(route: Route | str) -> openai.OpenAI:
    base_url = route if isinstance(route, str) else route.base_url
    return openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0)


def ask(route: Route, **kw: Any) -> Any:
    with client(route) as sync:
        return sync.chat.completions.create(model="gpt-test", messages=ASK, **kw)


def calls_of(message: Any) -> list[tuple[str, str, str]]:
    return [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]


def expected_calls(response: ModelResponse) -> list[tuple[str, str, str]]:
    return [(c.id, c.name, c.arguments) for c in response.message.tool_calls]


# Answers, whole


def test_a_text_answer(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([TEXT]))

    completion = ask(route)

    assert completion.choices[0].message.content == "It is 5."
    assert completion.choices[0].message.tool_calls is None
    assert completion.choices[0].finish_reason == "stop"
    assert completion.model == "m-1"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (12, 7)
    assert completion.usage.total_tokens == 19
    assert route.failure is None


@pytest.mark.parametrize("response", [CALLS, ONLY_CALLS], ids=["with-text", "calls-only"])
def test_tool_calls_round_trip(endpoint: ModelEndpoint, response: ModelResponse) -> None:
    route = endpoint.open_route(ScriptedModel([response]))

    completion = ask(route, tools=[ADD], tool_choice="auto", temperature=0, seed=3)

    message = completion.choices[0].message
    assert calls_of(message) == expected_calls(response)
    assert message.content == (response.message.content or None)
    assert completion.choices[0].finish_reason == "tool_calls"
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [
        json.loads(c.arguments) for c in response.message.tool_calls
    ]


def test_the_model_name_falls_back_to_the_routes(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([ONLY_CALLS], name="s"), model_name="my-model")

    assert ask(route).model == "my-model"
    with client(route) as sync:
        assert [model.id for model in sync.models.list()] == ["my-model"]


# Answers, streamed


@pytest.mark.parametrize("response", [TEXT, CALLS, ONLY_CALLS], ids=["text", "calls", "only"])
def test_a_stream_adds_up_to_the_whole_answer(
    endpoint: ModelEndpoint, response: ModelResponse
) -> None:
    route = endpoint.open_route(ScriptedModel([response, response]))
    whole = ask(route, tools=[ADD])

    with client(route) as sync:
        chunks = list(
            sync.chat.completions.create(
                model="gpt-test",
                messages=ASK,
                tools=[ADD],
                stream=True,
                stream_options={"include_usage": True},
            )
        )

    content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    calls: dict[int, list[str]] = {}
    for chunk in chunks:
        for delta in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            call = calls.setdefault(delta.index, ["", "", ""])
            call[0] += delta.id or ""
            call[1] += delta.function.name or ""
            call[2] += delta.function.arguments or ""
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert content == (whole.choices[0].message.content or "")
    assert [tuple(calls[i]) for i in sorted(calls)] == calls_of(whole.choices[0].message)
    assert finish == [whole.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage == whole.usage
    assert {c.id for c in chunks} != {whole.id}
    assert [call.stream for call in route.calls] == [False, True]


def test_the_clients_stream_helper(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([CALLS]))

    with (
        client(route) as sync,
        sync.chat.completions.stream(
            model="gpt-test", messages=ASK, tools=[ADD], stream_options={"include_usage": True}
        ) as stream,
    ):
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        final = stream.get_final_completion()

    assert "".join(deltas) == "Let me add."
    message = final.choices[0].message
    assert calls_of(message) == expected_calls(CALLS)
    assert [call.function.parsed_arguments for call in message.tool_calls or []] == [
        {"a": 2, "b": 3},
        {"a": 40, "b": 2},
    ]
    assert final.usage is not None and final.usage.total_tokens == 19


async def test_an_async_client_streams(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([TEXT]))

    async with openai.AsyncOpenAI(
        base_url=route.base_url, api_key="unused", max_retries=0
    ) as async_client:
        stream = await async_client.chat.completions.create(
            model="gpt-test", messages=ASK, stream=True
        )
        chunks = [chunk async for chunk in stream]

    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "It is 5."
    assert all(chunk.usage is None for chunk in chunks)  # no usage chunk unless asked for


# What the route records


def test_observed_calls_hold_what_the_client_sent(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([TEXT]))
    conversation: list[Any] = [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": "What is 2 + 3?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "5"},
    ]

    with client(route) as sync:
        sync.chat.completions.create(model="gpt-asked", messages=conversation, tools=[ADD])

    (call,) = route.calls
    assert list(call.messages) == messages_from_wire(conversation)
    assert call.messages == (
        SystemMessage(content="You add numbers."),
        UserMessage(content="What is 2 + 3?"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="add", arguments="{}"),)),
        ToolMessage(tool_call_id="c1", name="add", content="5"),
    )
    assert call.tools == (
        ToolDefinition(
            name="add",
            description="Add two numbers.",
            parameters=ADD["function"]["parameters"],
        ),
    )
    assert call.response == TEXT
    assert call.error is None and call.stream is False
    assert call.model_name == "gpt-asked"
    assert 0 < call.start_ns <= call.end_ns


# Errors


def test_a_model_error_is_a_500_and_the_routes_failure(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([ModelError("upstream is down"), TEXT]))

    with pytest.raises(openai.InternalServerError) as caught:
        ask(route)

    assert caught.value.status_code == 500
    assert caught.value.body == {
        "message": "upstream is down",
        "type": "server_error",
        "param": None,
        "code": None,
    }
    assert route.failure == "upstream is down"
    assert route.calls[0].response is None and route.calls[0].error == "upstream is down"
    assert ask(route).choices[0].message.content == "It is 5."  # the route still serves
    assert route.failure == "upstream is down"  # the first failure stays


def test_a_model_bug_is_logged_and_a_500(
    endpoint: ModelEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    route = endpoint.open_route(ScriptedModel([]))  # any call is one too many

    with (
        caplog.at_level(logging.ERROR, logger="plangate.endpoint"),
        pytest.raises(openai.InternalServerError),
    ):
        ask(route)

    assert route.failure is not None and route.failure.startswith("UnexpectedModelCall: ")
    assert any(record.exc_info for record in caplog.records if record.name == "plangate.endpoint")


def test_an_unknown_route_is_a_404(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([]))
    endpoint.close_route(route)
    endpoint.close_route(route)  # idempotent

    for base_url in (f"{endpoint.url}/r/no-such-key/v1", route.base_url):
        with client(base_url) as sync, pytest.raises(openai.NotFoundError) as caught:
            sync.chat.completions.create(model="gpt-test", messages=ASK)
        assert base_url.split("/")[-2] in str(caught.value)
    assert route.calls == []


def test_a_bad_message_is_a_400_naming_the_field(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([]))
    image = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}

    with client(route) as sync, pytest.raises(openai.BadRequestError) as caught:
        sync.chat.completions.create(
            model="gpt-test",
            messages=[ASK[0], {"role": "user", "content": [image]}],
        )

    assert "messages[1].content[0]: only text parts are supported" in str(caught.value)
    assert route.calls == [] and route.failure is None


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b"{not json", "the request body is not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"model": "m"}', "messages: expected a list of messages"),
        (b'{"messages": [], "tools": [{"type": "web_search"}]}', "tools[0].type"),
    ],
)
def test_a_malformed_body_is_a_400(endpoint: ModelEndpoint, body: bytes, what: str) -> None:
    route = endpoint.open_route(ScriptedModel([]))

    status, answer = post(endpoint, f"/r/{route.key}/v1/chat/completions", body)

    assert status == 400
    assert what in answer["error"]["message"]
    assert answer["error"]["type"] == "invalid_request_error"


def test_other_paths_are_404s(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([]))

    status, answer = post(endpoint, f"/r/{route.key}/v1/embeddings", b"{}")
    assert status == 404 and "/r/KEY/v1/chat/completions" not in answer["error"]["message"]
    assert f"/r/{route.key}/v1/chat/completions" in answer["error"]["message"]
    assert post(endpoint, "/v1/chat/completions", b"{}")[0] == 404


def test_a_chunked_body_is_read(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([TEXT]))
    body = json.dumps({"model": "m", "messages": ASK}).encode()
    chunked = b"".join(
        b"%x\r\n%s\r\n" % (len(body[i : i + 10]), body[i : i + 10]) for i in range(0, len(body), 10)
    )

    status, answer = post(
        endpoint, f"/r/{route.key}/v1/chat/completions", chunked + b"0\r\n\r\n", chunked=True
    )

    assert status == 200 and answer["choices"][0]["message"]["content"] == "It is 5."


def post(
    endpoint: ModelEndpoint, path: str, body: bytes, *, chunked: bool = False
) -> tuple[int, Any]:
    host, port = endpoint.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    headers = {"Content-Type": "application/json"}
    if chunked:
        headers["Transfer-Encoding"] = "chunked"
    else:
        headers["Content-Length"] = str(len(body))
    try:
        connection.putrequest("POST", path)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.endheaders(body)
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        connection.close()


# The endpoint's life


def test_start_and_close() -> None:
    endpoint = ModelEndpoint()
    with pytest.raises(EndpointError, match="not started"):
        _ = endpoint.url
    assert endpoint.start() is endpoint and endpoint.start() is endpoint
    assert endpoint.url.startswith("http://127.0.0.1:")
    route = endpoint.open_route(ScriptedModel([TEXT]))
    with client(route) as sync:
        sync.chat.completions.create(model="gpt-test", messages=ASK)  # keeps its connection
        endpoint.close()
        endpoint.close()
        with pytest.raises(openai.APIConnectionError):
            sync.chat.completions.create(model="gpt-test", messages=ASK)
    with pytest.raises(EndpointError, match="closed"):
        endpoint.open_route(ScriptedModel([]))
    with pytest.raises(EndpointError, match="closed"):
        endpoint.start()
