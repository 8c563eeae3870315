"""Property tests of the turn loop: whatever a model answers, a turn ends well formed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.harness import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolDefinition,
    ToolMessage,
    builtin_variants,
)
from plangate.harness.models import FunctionModel
from tests.helpers import agent

STOPS = {"finished", "forced_finish", "max_iterations", "loop_guard", "model_error"}
NAMES = ["add", "explode", "todo_write", "todo_update", "todo_read", "finish", "nope"]
ARGUMENTS = st.sampled_from(
    [
        "{}",
        '{"a": 1, "b": 2}',
        '{"a": "x"}',
        '{"reason": "boom"}',
        '{"todos": [{"content": "one"}, {"content": "two", "status": "in_progress"}]}',
        '{"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "in_progress"}]}',
        '{"item_id": 1, "status": "in_progress"}',
        '{"item_id": 1, "status": "completed"}',
        '{"item_id": 2, "status": "blocked"}',
        '{"item_id": 2, "status": "blocked", "reason": "needs input"}',
        '{"summary": "done"}',
        '{"a": 1,',
        "[1, 2]",
    ]
)
CALLS = st.builds(
    lambda name, arguments, n: ToolCall(id=f"c{n}", name=name, arguments=arguments),
    st.sampled_from(NAMES),
    ARGUMENTS,
    st.integers(0, 10_000),
)
REPLIES = st.one_of(
    st.sampled_from(["", "Done.", "todo_read({})", "Next I will use the add tool."]).map(
        lambda text: AssistantMessage(content=text)
    ),
    st.lists(CALLS, min_size=1, max_size=3).map(
        lambda calls: AssistantMessage(tool_calls=tuple(calls))
    ),
)


def scripted(replies: Sequence[AssistantMessage]) -> FunctionModel:
    queue = list(replies)

    def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> AssistantMessage:
        if queue:
            return queue.pop(0)
        return AssistantMessage(tool_calls=(ToolCall.of("finish", "end", summary="out of script"),))

    return FunctionModel(answer)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    replies=st.lists(REPLIES, max_size=40),
    variant=st.sampled_from(builtin_variants()),
    request=st.sampled_from(["Add 1 and 2, then add 3 and 4", "What is 1 plus 2?"]),
)
def test_every_turn_ends_with_a_named_stop_and_a_well_formed_trajectory(
    replies: list[AssistantMessage], variant: str, request: str
) -> None:
    session = agent(scripted(replies), variant).session("prop")
    result = asyncio.run(session.run_turn(request))

    assert result.stop_reason in STOPS
    assert result.events[-1].kind == "stop"
    assert result.iterations <= session.agent.variant.turn.max_iterations
    calls = [c for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answers = [m for m in result.messages if isinstance(m, ToolMessage)]
    assert [c.id for c in calls] == [m.tool_call_id for m in answers]
    assert len(result.tool_calls) == len(calls)
    assert sum(i.status == "in_progress" for i in result.plan) <= 1
    assert all(i.reason for i in result.plan if i.status == "blocked")
    if result.stop_reason == "loop_guard":
        assert any(e.kind == "loop_stop" for e in result.events)
    # The next turn sees a history it can continue from.
    assert session.history[-len(result.messages) :] == list(result.messages)
