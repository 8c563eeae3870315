"""OpenAIModel through the real `openai` client against a local chat-completions server:
replies, what the client sends, malformed replies, configuration and secrets."""

from __future__ import annotations

import asyncio
import traceback
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.harness._errors import ConfigError
from plangate.harness._messages import (
    AssistantMessage,
    Message,
    ModelResponse,
    SystemMessage,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from plangate.harness.models._model import Model, ModelError
from plangate.harness.models._openai import OpenAIModel
from tests.chat_server import (
    ChatServer,
    Reply,
    completion,
    error,
    json_reply,
    raw,
    tool_call,
)
from tests.harness.openai_helpers import ASK, KEY, MODEL, WEATHER, MakeModel, Sleeps, failure


def one_request(server: ChatServer) -> dict[str, Any]:
    [request] = server.requests
    body: dict[str, Any] = request.body
    return body


# Replies


async def test_text_reply(server: ChatServer, make_model: MakeModel) -> None:
    server.enqueue(completion("Sunny.", model="test-model-2024", usage=(42, 7)))
    model = make_model()

    response = await model.request(ASK, [WEATHER])

    assert response == ModelResponse(
        message=AssistantMessage(content="Sunny."),
        usage=Usage(prompt_tokens=42, completion_tokens=7),
        model_name="test-model-2024",
        finish_reason="stop",
    )
    assert isinstance(model, Model)
    assert model.name == MODEL
    server.assert_complete()


async def test_tool_calls_keep_arguments_as_written(
    server: ChatServer, make_model: MakeModel
) -> None:
    malformed = '{"city": "Par'
    server.enqueue(
        completion(
            None,
            tool_calls=[
                tool_call("get_weather", '{"city": "Paris",  "unit":"C"}', "call_1"),
                tool_call("get_weather", malformed, "call_2"),
            ],
        )
    )

    response = await make_model().request(ASK, [WEATHER])

    assert response.message == AssistantMessage(
        content="",
        tool_calls=(
            ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris",  "unit":"C"}'),
            ToolCall(id="call_2", name="get_weather", arguments=malformed),
        ),
    )
    assert response.finish_reason == "tool_calls"
    server.assert_complete()


def test_any_arguments_text_comes_back_unchanged() -> None:
    # One server, client and loop for all examples: each example is one HTTP round trip.
    with ChatServer() as server, asyncio.Runner() as runner:
        model = OpenAIModel(model=MODEL, api_key=KEY, base_url=server.base_url)

        @settings(max_examples=50, deadline=None)
        @given(arguments=st.text(max_size=40))
        def check(arguments: str) -> None:
            server.enqueue(completion(tool_calls=[tool_call("get_weather", arguments)]))
            response = runner.run(model.request(ASK, [WEATHER]))
            assert response.message.tool_calls[0].arguments == arguments

        try:
            check()
        finally:
            runner.run(model.aclose())
    server.assert_complete()


async def test_missing_usage_counts_zero(server: ChatServer, make_model: MakeModel) -> None:
    server.enqueue(completion("ok", usage=None))

    response = await make_model().request(ASK, [])

    assert response.usage == Usage()


# What the client sends


async def test_messages_and_tools_are_sent_in_wire_format(
    server: ChatServer, make_model: MakeModel
) -> None:
    server.enqueue(completion("It is sunny in Paris."))
    conversation: list[Message] = [
        SystemMessage(content="You are a weather bot."),
        UserMessage(content="Weather in Paris?"),
        AssistantMessage(tool_calls=(ToolCall(id="c1", name="get_weather", arguments="{bad"),)),
        ToolMessage(tool_call_id="c1", name="get_weather", content="bad JSON", is_error=True),
        AssistantMessage(
            content="Retrying.",
            tool_calls=(ToolCall.of("get_weather", "c2", city="Paris"),),
        ),
        ToolMessage(tool_call_id="c2", name="get_weather", content="sunny, 21 C"),
        AssistantMessage(content="Anything else?"),
    ]

    await make_model().request(conversation, [WEATHER])

    assert one_request(server) == {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": "You are a weather bot."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": "{bad"},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "bad JSON"},
            {
                "role": "assistant",
                "content": "Retrying.",
                "tool_calls": [
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c2", "content": "sunny, 21 C"},
            {"role": "assistant", "content": "Anything else?"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Get the current weather in a city.",
                    "parameters": WEATHER.parameters,
                },
            }
        ],
    }
    assert server.requests[0].path == "/v1/chat/completions"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_no_tools_key_without_tools(server: ChatServer, make_model: MakeModel) -> None:
    server.enqueue(completion("hi"))

    await make_model().request(ASK, [])

    assert "tools" not in one_request(server)


# Malformed replies


@pytest.mark.parametrize(
    ("reply", "what"),
    [
        (raw('{"choices": [{"message": '), "the body is not JSON"),
        (raw("<html>Bad gateway</html>", content_type="text/html"), "the body is not JSON"),
        (raw(""), "the body is not JSON"),
        (json_reply([1, 2]), "the body is not a JSON object"),
        (json_reply({"id": "x", "object": "chat.completion"}), "the body has no 'choices' list"),
        (json_reply({"choices": []}), "'choices' is empty"),
        (json_reply({"choices": [None]}), "choice 0 is not an object"),
        (json_reply({"choices": [{"index": 0}]}), "choice 0 has no message"),
        (
            json_reply({"choices": [{"message": {"content": None, "tool_calls": {}}}]}),
            "choice 0 has tool_calls that are not a list",
        ),
        (
            completion(tool_calls=[{"id": "c", "type": "function", "function": {"arguments": ""}}]),
            "tool call 0 has no function name",
        ),
        (completion(tool_calls=[{"id": "c", "type": "function"}]), "tool call 0 has no function"),
    ],
)
async def test_malformed_reply_is_a_model_error(
    server: ChatServer, make_model: MakeModel, sleeps: Sleeps, reply: Reply, what: str
) -> None:
    server.enqueue(reply)

    message = await failure(make_model())

    assert "sent a malformed reply" in message
    assert what in message
    assert server.base_url in message
    assert len(server.requests) == 1
    assert sleeps.delays == []


async def test_lenient_reply_fields(server: ChatServer, make_model: MakeModel) -> None:
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Nice"}}}
    server.enqueue(json_reply({"choices": [{"message": {"tool_calls": [call]}}]}))

    response = await make_model().request(ASK, [WEATHER])

    assert response == ModelResponse(
        message=AssistantMessage(
            tool_calls=(
                ToolCall(id="call_0_get_weather", name="get_weather", arguments='{"city": "Nice"}'),
            )
        ),
        model_name=MODEL,
    )


# Configuration and secrets


async def test_key_never_appears_in_errors(server: ChatServer, make_model: MakeModel) -> None:
    server.enqueue(error(401, f"Incorrect API key provided: {KEY}."))
    model = make_model()

    message = await failure(model)

    assert "Incorrect API key provided: [redacted]." in message
    assert KEY not in repr(model)


async def test_key_never_appears_in_tracebacks(server: ChatServer, make_model: MakeModel) -> None:
    server.enqueue(error(401, f"Incorrect API key provided: {KEY}."))

    with pytest.raises(ModelError) as caught:
        await make_model().request(ASK, [])

    assert "Incorrect API key provided" in "".join(traceback.format_exception(caught.value))
    assert KEY not in "".join(traceback.format_exception(caught.value))


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for variable in (
        "PLANGATE_OPENAI_API_KEY",
        "OPENAI_API_KEY",
        "PLANGATE_OPENAI_BASE_URL",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def test_from_env_without_key_is_a_config_error(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAIModel.from_env("gpt-4o-mini")

    message = str(caught.value)
    assert "PLANGATE_OPENAI_API_KEY" in message
    assert "OPENAI_API_KEY" in message
    assert "'gpt-4o-mini'" in message
    assert "https://api.openai.com/v1" in message


async def test_from_env_prefers_plangate_variables(
    clean_env: pytest.MonkeyPatch, server: ChatServer
) -> None:
    clean_env.setenv("PLANGATE_OPENAI_API_KEY", KEY)
    clean_env.setenv("OPENAI_API_KEY", "sk-the-wrong-key-entirely")
    clean_env.setenv("PLANGATE_OPENAI_BASE_URL", server.base_url)
    clean_env.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    server.enqueue(completion("ok"))

    async with OpenAIModel.from_env("local-model") as model:
        response = await model.request(ASK, [])

    assert (model.name, model.base_url, response.message.content) == (
        "local-model",
        server.base_url,
        "ok",
    )
    assert one_request(server)["model"] == "local-model"
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


async def test_from_env_falls_back_to_openai_variables(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("OPENAI_API_KEY", KEY)

    async with OpenAIModel.from_env("gpt-4o-mini") as model:
        assert (model.api_key, model.base_url) == (KEY, "https://api.openai.com/v1")

    clean_env.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1")
    async with OpenAIModel.from_env("gpt-4o-mini") as model:
        assert model.base_url == "http://localhost:8000/v1"


@pytest.mark.parametrize(
    "options",
    [
        {"model": ""},
        {"api_key": ""},
        {"timeout": 0},
        {"max_retries": -1},
        {"backoff_base": -1.0},
        {"backoff_max": -0.5},
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any]) -> None:
    defaults: dict[str, Any] = {"model": MODEL, "api_key": KEY}
    with pytest.raises(ConfigError, match="OpenAIModel"):
        OpenAIModel(**(defaults | options))
