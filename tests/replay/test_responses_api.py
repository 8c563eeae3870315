"""The model endpoint's Responses API, spoken to by the real `openai` client and the Agents SDK."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)
from agents import Model as AgentsModel

from plangate.harness import (
    AssistantMessage,
    Message,
    ModelError,
    ModelResponse,
    ScriptedModel,
    SystemMessage,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    UserMessage,
)
from plangate.replay.endpoint import ModelEndpoint, Route
from tests.replay.test_model_endpoint import CALLS, TEXT

UNTRACED = RunConfig(tracing_disabled=True)
"""The Agents SDK's runs here trace nothing (its default would export to OpenAI)."""

PARAMETERS = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
ADD: Any = {
    "type": "function",
    "name": "add",
    "description": "Add two numbers.",
    "parameters": PARAMETERS,
    "strict": True,
}
CHAT_ADD: Any = {"type": "function", "function": {k: v for k, v in ADD.items() if k != "type"}}
ASKED = "What are 2 + 3 and 40 + 2?"
# One conversation, as the two APIs carry it: the messages the route must record for both.
CONVERSATION: tuple[Message, ...] = (
    SystemMessage(content="You add numbers."),
    UserMessage(content=ASKED),
    CALLS.message,
    ToolMessage(tool_call_id="call_1", name="add", content="5"),
    ToolMessage(tool_call_id="call_2", name="add", content="42"),
)
AS_CHAT: list[Any] = [
    {"role": "system", "content": "You add numbers."},
    {"role": "user", "content": ASKED},
    {
        "role": "assistant",
        "content": "Let me add.",
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in CALLS.message.tool_calls
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "42"}]},
]
AS_RESPONSES: list[Any] = [
    {"role": "user", "content": [{"type": "input_text", "text": ASKED}]},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Let me add.", "annotations": []}],
    },
    *(
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
        for c in CALLS.message.tool_calls
    ),
    {"type": "function_call_output", "call_id": "call_1", "output": "5"},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "42"}],
    },
]


@pytest.fixture
def endpoint() -> Iterator[ModelEndpoint]:
    with ModelEndpoint() as running:
        yield running


def client(route: Route) -> openai.OpenAI:
    return openai.OpenAI(base_url=route.base_url, api_key="unused", max_retries=0)


def create(route: Route, *, stream: bool = False, **kw: Any) -> Any:
    """`responses.create`; streamed, the events' last response, checked against the events."""
    with client(route) as sync:
        if not stream:
            return sync.responses.create(model="gpt-test", **kw)
        events = list(sync.responses.create(model="gpt-test", stream=True, **kw))
    final = events[-1].response
    assert [event.sequence_number for event in events] == list(range(len(events)))
    assert [event.type for event in events] == expected_event_types(final)
    texts = [e.delta for e in events if e.type == "response.output_text.delta"]
    arguments = [e.delta for e in events if e.type == "response.function_call_arguments.delta"]
    assert "".join(texts) == final.output_text
    assert arguments == [item.arguments for item in final.output if item.type == "function_call"]
    return final


def expected_event_types(final: Any) -> list[str]:
    kinds = ["response.created", "response.in_progress"]
    for item in final.output:
        kinds.append("response.output_item.added")
        if item.type == "message":
            text = ["response.output_text.delta"] if item.content[0].text else []
            kinds += ["response.content_part.added", *text, "response.output_text.done"]
            kinds.append("response.content_part.done")
        else:
            kinds += ["response.function_call_arguments.delta"]
            kinds.append("response.function_call_arguments.done")
        kinds.append("response.output_item.done")
    return [*kinds, f"response.{final.status}"]


def post(endpoint: ModelEndpoint, path: str, body: bytes) -> tuple[int, Any]:
    host, port = endpoint.url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request("POST", path, body, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        connection.close()


def calls_of(response: Any) -> list[tuple[str, str, str]]:
    return [(i.call_id, i.name, i.arguments) for i in response.output if i.type == "function_call"]


# Answers


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_text_answer(endpoint: ModelEndpoint, stream: bool) -> None:
    route = endpoint.open_route(ScriptedModel([TEXT]))

    response = create(route, stream=stream, input="What is 2 + 3?", instructions="Add.")

    assert response.output_text == "It is 5."
    assert [(item.type, item.role, item.status) for item in response.output] == [
        ("message", "assistant", "completed")
    ]
    assert response.status == "completed" and response.model == "m-1"
    assert response.id.startswith("resp_") and response.instructions == "Add."
    assert (response.usage.input_tokens, response.usage.output_tokens) == (12, 7)
    assert response.usage.total_tokens == 19
    assert route.calls[0].messages == (
        SystemMessage(content="Add."),
        UserMessage(content="What is 2 + 3?"),
    )
    assert route.calls[0].stream is stream and route.calls[0].model_name == "gpt-test"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_tool_calls_and_their_outputs_across_two_calls(
    endpoint: ModelEndpoint, stream: bool
) -> None:
    model = ScriptedModel([CALLS, "They are 5 and 42."])
    route = endpoint.open_route(model)
    conversation: list[Any] = [{"role": "user", "content": ASKED}]

    first = create(route, stream=stream, input=conversation, tools=[ADD], tool_choice="auto")
    conversation += first.output  # the output items as they came, as the openai docs do
    for call_id, _, arguments in calls_of(first):
        total = str(sum(json.loads(arguments).values()))
        conversation.append({"type": "function_call_output", "call_id": call_id, "output": total})
    second = create(
        route, stream=stream, input=conversation, tools=[ADD], instructions="You add numbers."
    )

    model.assert_complete()
    assert first.output_text == "Let me add."
    assert calls_of(first) == [(c.id, c.name, c.arguments) for c in CALLS.message.tool_calls]
    assert [item.status for item in first.output] == ["completed"] * 3
    assert second.output_text == "They are 5 and 42." and calls_of(second) == []
    assert route.calls[1].messages == CONVERSATION
    assert model.requests[1].messages == route.calls[1].messages  # what the model was sent
    assert route.calls[1].tools == (
        ToolDefinition(name="add", description="Add two numbers.", parameters=PARAMETERS),
    )
    assert [call.stream for call in route.calls] == [stream, stream]


def test_the_clients_stream_helper(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([CALLS]))

    with (
        client(route) as sync,
        sync.responses.stream(model="gpt-test", input=ASKED, tools=[ADD]) as stream,
    ):
        deltas = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()

    assert "".join(deltas) == "Let me add."
    assert [item.parsed_arguments for item in final.output if item.type == "function_call"] == [
        {"a": 2, "b": 3},
        {"a": 40, "b": 2},
    ]
    assert final.usage is not None and final.usage.total_tokens == 19


def test_an_answer_cut_short_is_incomplete(endpoint: ModelEndpoint) -> None:
    cut = ModelResponse(message=AssistantMessage(content="It is"), finish_reason="length")
    route = endpoint.open_route(ScriptedModel([cut, cut]))

    for stream in (False, True):
        response = create(route, stream=stream, input="What is 2 + 3?")
        assert response.status == "incomplete" and response.output_text == "It is"
        assert response.incomplete_details.reason == "max_output_tokens"


# What the route records: the same as for chat completions


def test_a_conversation_records_as_it_does_over_chat_completions(endpoint: ModelEndpoint) -> None:
    chat, responses = (endpoint.open_route(ScriptedModel([TEXT])) for _ in range(2))

    with client(chat) as sync:
        sync.chat.completions.create(model="gpt-test", messages=AS_CHAT, tools=[CHAT_ADD])
    create(responses, instructions="You add numbers.", input=AS_RESPONSES, tools=[ADD])

    assert responses.calls[0].messages == chat.calls[0].messages == CONVERSATION
    assert responses.calls[0].tools == chat.calls[0].tools
    assert responses.calls[0].response == chat.calls[0].response == TEXT


# The OpenAI Agents SDK on its default model


@function_tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@function_tool
def multiply(a: int, b: int) -> int:
    """Multiply two numbers."""
    return a * b


def calculator() -> ScriptedModel:
    """Adds, then multiplies what the sum came back as, then answers."""
    return ScriptedModel(
        [
            AssistantMessage(
                content="First the sum.", tool_calls=(ToolCall.of("add", "call_add", a=2, b=3),)
            ),
            ToolCall.of("multiply", "call_multiply", a=5, b=4),
            "(2 + 3) * 4 = 20.",
        ]
    )


async def run_agent(model: AgentsModel, *, stream: bool) -> Any:
    agent = Agent(
        name="calculator", instructions="Use the tools.", model=model, tools=[add, multiply]
    )
    if not stream:
        return (await Runner.run(agent, "What is (2 + 3) * 4?", run_config=UNTRACED)).final_output
    result = Runner.run_streamed(agent, "What is (2 + 3) * 4?", run_config=UNTRACED)
    async for _ in result.stream_events():
        pass
    return result.final_output


@pytest.mark.parametrize("stream", [False, True], ids=["run", "run_streamed"])
async def test_an_agents_sdk_agent_on_its_default_model(
    endpoint: ModelEndpoint, stream: bool
) -> None:
    model, twin = calculator(), calculator()
    route, chat = endpoint.open_route(model), endpoint.open_route(twin)

    async with (
        openai.AsyncOpenAI(base_url=route.base_url, api_key="x", max_retries=0) as responses_api,
        openai.AsyncOpenAI(base_url=chat.base_url, api_key="x", max_retries=0) as chat_api,
    ):
        answer = await run_agent(OpenAIResponsesModel("gpt-4.1", responses_api), stream=stream)
        on_chat = await run_agent(OpenAIChatCompletionsModel("gpt-4.1", chat_api), stream=stream)

    model.assert_complete(), twin.assert_complete()
    assert answer == on_chat == "(2 + 3) * 4 = 20."
    assert route.failure is None and [call.stream for call in route.calls] == [stream] * 3
    assert route.calls[-1].messages == (
        SystemMessage(content="Use the tools."),
        UserMessage(content="What is (2 + 3) * 4?"),
        AssistantMessage(content="First the sum.", tool_calls=(ToolCall.of("add", "call_add", a=2, b=3),)),
        ToolMessage(tool_call_id="call_add", name="add", content="5"),
        AssistantMessage(tool_calls=(ToolCall.of("multiply", "call_multiply", a=5, b=4),)),
        ToolMessage(tool_call_id="call_multiply", name="multiply", content="20"),
    )  # fmt: skip
    assert [t.name for t in route.calls[0].tools] == ["add", "multiply"]
    # The same agent on chat completions: the route records the very same exchanges.
    assert [(c.messages, c.tools, c.response) for c in route.calls] == [
        (c.messages, c.tools, c.response) for c in chat.calls
    ]


# Errors


def test_a_model_error_is_a_500_and_the_routes_failure(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([ModelError("upstream is down")]))

    with pytest.raises(openai.InternalServerError, match="upstream is down"):
        create(route, input="What is 2 + 3?")

    assert route.failure == "upstream is down" and route.calls[0].response is None


def test_previous_response_id_is_refused(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([]))

    with pytest.raises(openai.BadRequestError) as caught:
        create(route, input="And 3 + 4?", previous_response_id="resp_plangate_1")

    assert "previous_response_id: not supported" in str(caught.value)
    assert "whole conversation in `input`" in str(caught.value)
    assert route.calls == [] and route.failure is None


@pytest.mark.parametrize(
    ("body", "what"),
    [
        ({"input": "hi", "conversation": "conv_1"}, "conversation: not supported"),
        ({"input": "hi", "prompt": {"id": "pmpt_1"}}, "prompt: not supported"),
        ({"model": "m"}, "input: expected a string or a list of input items"),
        ({"input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type"),
        ({"input": [{"role": "critic", "content": "hm"}]}, "input[0].role"),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content[0]: only text parts are supported",
        ),
        (
            {"input": [{"role": "user", "content": "hi"}, {"type": "function_call_output"}]},
            "input[1].call_id",
        ),
        ({"input": [{"type": "function_call", "call_id": "c", "name": "add"}]}, "input[0].arguments"),
        ({"input": "hi", "instructions": ["be brief"]}, "instructions"),
        ({"input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type"),
        ({"input": "hi", "tools": [{"type": "function"}]}, "tools[0].name"),
        ({"input": "hi", "tools": [ADD], "tool_choice": {"type": "function", "name": "mul"}},
         "tool_choice.name: 'mul'"),
        ({"input": "hi", "tool_choice": {"type": "web_search_preview"}}, "tool_choice: expected"),
    ],
)  # fmt: skip
def test_a_bad_body_is_a_400_naming_the_field(
    endpoint: ModelEndpoint, body: dict[str, Any], what: str
) -> None:
    route = endpoint.open_route(ScriptedModel([]))

    status, answer = post(endpoint, f"/r/{route.key}/v1/responses", json.dumps(body).encode())

    assert status == 400, answer
    assert answer["error"]["message"].startswith(what)
    assert answer["error"]["type"] == "invalid_request_error"
    assert route.calls == []


def test_a_body_that_is_not_json_is_a_400(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([]))

    status, answer = post(endpoint, f"/r/{route.key}/v1/responses", b"{not json")

    assert status == 400 and "the request body is not JSON" in answer["error"]["message"]


def test_a_wrong_path_names_the_responses_route(endpoint: ModelEndpoint) -> None:
    route = endpoint.open_route(ScriptedModel([]))

    status, answer = post(endpoint, f"/r/{route.key}/v1/responses/resp_1", b"{}")

    assert status == 404 and f"POST /r/{route.key}/v1/responses" in answer["error"]["message"]
