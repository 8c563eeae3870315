"""The chat-completions wire format both ways: round trips, what is accepted, what is refused."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from plangate.harness import (
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
from plangate.harness.models import (
    WireError,
    chunks_to_wire,
    completion_to_wire,
    message_to_wire,
    messages_from_wire,
    read_completion,
    tool_to_wire,
    tools_from_wire,
)

TEXT = st.text(max_size=30)
NAMES = st.text(min_size=1, max_size=12)
ARGUMENTS = st.one_of(TEXT, st.dictionaries(NAMES, st.integers()).map(json.dumps))


def through_json(value: Any) -> Any:
    """What the other side of a socket reads."""
    return json.loads(json.dumps(value))


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Conversations whose tool messages answer earlier calls (the wire names them by call)."""
    messages: list[Message] = []
    kinds = draw(st.lists(st.sampled_from(["system", "user", "assistant", "calls"]), max_size=8))
    for number, kind in enumerate(kinds):
        if kind == "system":
            messages.append(SystemMessage(content=draw(TEXT)))
        elif kind == "user":
            messages.append(UserMessage(content=draw(TEXT)))
        elif kind == "assistant":
            messages.append(AssistantMessage(content=draw(TEXT)))
        else:
            pairs = draw(st.lists(st.tuples(NAMES, ARGUMENTS), min_size=1, max_size=3))
            calls = tuple(
                # The id ends in a number of its own, so two calls never share an id.
                ToolCall(id=f"{draw(TEXT)}_{number}_{i}", name=name, arguments=arguments)
                for i, (name, arguments) in enumerate(pairs)
            )
            messages.append(AssistantMessage(content=draw(TEXT), tool_calls=calls))
            for call in calls:
                messages.append(
                    ToolMessage(tool_call_id=call.id, name=call.name, content=draw(TEXT))
                )
    return messages


@st.composite
def responses(draw: st.DrawFn) -> ModelResponse:
    """Responses whose finish reason is what the wire says for them."""
    calls = tuple(
        ToolCall(id=call_id, name=name, arguments=arguments)
        for call_id, name, arguments in draw(
            st.lists(st.tuples(NAMES, NAMES, ARGUMENTS), max_size=3)
        )
    )
    finish = st.just("tool_calls") if calls else st.sampled_from(["stop", "length"])
    return ModelResponse(
        message=AssistantMessage(content=draw(TEXT), tool_calls=calls),
        usage=Usage(
            prompt_tokens=draw(st.integers(0, 10**6)),
            completion_tokens=draw(st.integers(0, 10**6)),
        ),
        model_name=draw(NAMES),
        finish_reason=draw(finish),
    )


@given(conversations())
def test_messages_round_trip(messages: list[Message]) -> None:
    wire = through_json([message_to_wire(message) for message in messages])

    assert messages_from_wire(wire) == messages


@given(responses())
def test_completion_round_trips_through_the_reader(response: ModelResponse) -> None:
    body = completion_to_wire(response, model=response.model_name, completion_id="c", created=1)

    assert read_completion(json.dumps(body), "unused") == response
    ChatCompletion.model_validate(body)  # the openai package reads it too


def calls_of(completion: Any) -> list[tuple[str, str, str, str]]:
    return [
        (call.type, call.id, call.function.name, call.function.arguments)
        for call in completion.choices[0].message.tool_calls or []
    ]


@given(responses(), st.booleans())
def test_chunks_add_up_to_the_completion(response: ModelResponse, include_usage: bool) -> None:
    ids: dict[str, Any] = {"model": response.model_name, "completion_id": "c", "created": 1}
    chunks = chunks_to_wire(response, include_usage=include_usage, **ids)
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    for chunk in through_json(chunks):
        state.handle_chunk(ChatCompletionChunk.model_validate(chunk))
    streamed = state.current_completion_snapshot  # the final one refuses `length`
    whole = ChatCompletion.model_validate(completion_to_wire(response, **ids))

    assert streamed.choices[0].message.content == whole.choices[0].message.content
    assert calls_of(streamed) == calls_of(whole)
    assert streamed.choices[0].finish_reason == whole.choices[0].finish_reason
    assert streamed.usage == (whole.usage if include_usage else None)


def test_chunk_sequence() -> None:
    response = ModelResponse(
        message=AssistantMessage(content="Adding.", tool_calls=(ToolCall.of("add", "c1", a=1),)),
        usage=Usage(prompt_tokens=3, completion_tokens=2),
    )

    chunks = chunks_to_wire(response, model="m", completion_id="c", created=7, include_usage=True)

    assert [chunk["choices"][0]["delta"] if chunk["choices"] else None for chunk in chunks] == [
        {"role": "assistant", "content": ""},
        {"content": "Adding."},
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "add", "arguments": ""},
                }
            ]
        },
        {"tool_calls": [{"index": 0, "function": {"arguments": '{"a":1}'}}]},
        {},
        None,
    ]
    assert [c["choices"][0]["finish_reason"] for c in chunks[:-1]] == [None] * 4 + ["tool_calls"]
    assert chunks[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert all(c["usage"] is None for c in chunks[:-1])


def test_completion_shape() -> None:
    response = ModelResponse(message=AssistantMessage(content="hi"), finish_reason="length")

    body = completion_to_wire(response, model="m", completion_id="chatcmpl-1", created=5)

    assert body["object"] == "chat.completion"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["message"]["content"] == "hi"
    assert "tool_calls" not in body["choices"][0]["message"]
    assert body["usage"]["total_tokens"] == 0


@given(st.lists(st.builds(ToolDefinition, name=NAMES, description=TEXT, parameters=st.just({}))))
def test_tools_round_trip(tools: list[ToolDefinition]) -> None:
    assert tools_from_wire(through_json([tool_to_wire(tool) for tool in tools])) == tools


def test_what_the_wire_accepts() -> None:
    wire = [
        {"role": "developer", "content": "Be brief.", "name": "ops"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": ""}}],
        },
        {"role": "tool", "tool_call_id": "c", "content": [{"type": "text", "text": "ok"}]},
        {"role": "tool", "tool_call_id": "elsewhere", "name": "g", "content": "?"},
        {"role": "assistant", "content": None, "refusal": None},
    ]

    assert messages_from_wire(wire) == [
        SystemMessage(content="Be brief."),
        UserMessage(content="a\nb"),
        AssistantMessage(tool_calls=(ToolCall(id="c", name="f", arguments=""),)),
        ToolMessage(tool_call_id="c", name="f", content="ok"),
        ToolMessage(tool_call_id="elsewhere", name="g", content="?"),
        AssistantMessage(),
    ]
    assert tools_from_wire([{"type": "function", "function": {"name": "f"}}]) == [
        ToolDefinition(name="f", description="", parameters={"type": "object", "properties": {}})
    ]


@pytest.mark.parametrize(
    ("wire", "where"),
    [
        ({"role": "user"}, "messages[0].content: expected a string or a list of text parts"),
        ({"role": "function", "content": "x"}, "messages[0].role: expected one of"),
        ("hello", "messages[0]: expected a message object"),
        ({"role": "user", "content": [{"type": "image_url"}]}, "messages[0].content[0]: only text"),
        ({"role": "assistant", "tool_calls": {}}, "messages[0].tool_calls: expected a list"),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"arguments": "{}"}}]},
            "messages[0].tool_calls[0].function.name: expected a non-empty string",
        ),
        (
            {"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]},
            "messages[0].tool_calls[0].function.arguments: expected a JSON text",
        ),
        (
            {"role": "assistant", "tool_calls": [{"type": "custom", "id": "c"}]},
            "messages[0].tool_calls[0].type: only 'function' calls",
        ),
        ({"role": "tool", "content": "x"}, "messages[0].tool_call_id: expected a non-empty string"),
    ],
)
def test_a_bad_message_names_its_index_and_field(wire: Any, where: str) -> None:
    with pytest.raises(WireError) as caught:
        messages_from_wire([{"role": "user", "content": "first"}, wire])

    assert where.replace("messages[0]", "messages[1]") in str(caught.value)


@pytest.mark.parametrize(
    ("wire", "where"),
    [
        ({"type": "custom", "custom": {"name": "x"}}, "tools[0].type: only 'function' tools"),
        ({"type": "function"}, "tools[0].function: expected an object"),
        ({"type": "function", "function": {"name": ""}}, "tools[0].function.name"),
        ({"type": "function", "function": {"name": "f", "parameters": []}}, "parameters"),
        ({"type": "function", "function": {"name": "f", "description": 1}}, "description"),
    ],
)
def test_a_bad_tool_names_its_index_and_field(wire: Any, where: str) -> None:
    with pytest.raises(WireError, match=r"^tools\[0\]") as caught:
        tools_from_wire([wire])

    assert where in str(caught.value)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
ROLE_SHAPED = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "x"])},
    optional={"content": JSON_VALUES, "tool_calls": JSON_VALUES, "tool_call_id": JSON_VALUES},
)


@given(st.one_of(JSON_VALUES, st.lists(st.one_of(ROLE_SHAPED, JSON_VALUES), max_size=4)))
def test_bad_input_raises_only_wire_error(value: Any) -> None:
    try:
        messages = messages_from_wire(value)
    except WireError as err:
        assert str(err).startswith("messages")
    else:
        assert isinstance(value, list) and len(messages) == len(value)
    try:
        tools_from_wire(value)
    except WireError as err:
        assert str(err).startswith("tools")
