"""Skills and subagents, end to end on the real session loop and a scripted model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from plangate.harness import Agent, ConfigError, ModelError, ScriptedModel, UserMessage, tool
from plangate.harness._turn import Turn
from plangate.harness.features._skills import Skill, Skills
from plangate.harness.features._subagents import SUBAGENT_INSTRUCTIONS, scoped_variant
from tests.harness.test_memory import ONE_TASK, make_agent, traced, variant
from tests.helpers import WORK_TOOLS, call

# -- skills -----------------------------------------------------------------------------------


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two whole numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a * b


ARITH = Skill(
    name="arith",
    description="Multiplication and other arithmetic.",
    instructions="Use multiply for products; never multiply in your head.",
    tools=(multiply,),
)
GREET = Skill(name="greet", description="Greeting people politely.", instructions="Say hello.")


def skills_of(session: Any) -> Skills:
    return next(f for f in session.features if isinstance(f, Skills))


async def test_skills_are_listed_loaded_and_their_tools_offered_from_the_next_call() -> None:
    model = ScriptedModel(
        [
            call("load_skill", "l1", name="arith"),
            call("multiply", "m", a=6, b=7),
            call("load_skill", "l2", name="arith"),
            call("load_skill", "l3", name="nope"),
            call("finish", "f", summary="42"),
        ]
    )
    session = make_agent(model, {"skills": True}, skills=(ARITH, GREET)).session()
    offered = skills_of(session).tools(Turn(index=0, request="", planning=False))
    (load,) = offered
    assert load.name == "load_skill"
    assert "- arith: Multiplication and other arithmetic." in load.description
    assert "- greet: Greeting people politely." in load.description
    result = await session.run_turn("Multiply 6 by 7")
    model.assert_complete()
    assert "multiply" not in model.requests[0].tools
    assert "load_skill" in model.requests[0].tools
    assert "multiply" in model.requests[1].tools
    systems = {r.messages[0].content for r in model.requests}
    assert len(systems) == 1 and "arith" not in systems.pop()
    by_id = {c.id: c for c in result.tool_calls}
    assert by_id["l1"].status == "ok" and ARITH.instructions in by_id["l1"].content
    assert "multiply" in by_id["l1"].content
    assert by_id["m"].content == "42"
    assert by_id["l2"].status == "ok" and "already loaded" in by_id["l2"].content
    assert by_id["l3"].status == "error"
    assert "'arith', 'greet'" in by_id["l3"].content
    assert [(e.kind, e.detail) for e in result.events if e.kind == "skill_loaded"] == [
        ("skill_loaded", "arith")
    ]


async def test_loaded_skills_survive_state_and_restore() -> None:
    first = ScriptedModel(
        [call("load_skill", "l", name="arith"), call("finish", "f", summary="ok")]
    )
    agent = make_agent(first, {"skills": True}, skills=(ARITH, GREET))
    session = agent.session("s")
    await session.run_turn("Load arithmetic")
    state = session.state()
    assert state["features"]["skills"] == {"loaded": ["arith"]}

    second = ScriptedModel([call("multiply", "m", a=2, b=3), call("finish", "f", summary="6")])
    restored = dataclasses.replace(agent, model=second).session("s2")
    restored.restore(state)
    result = await restored.run_turn("Multiply 2 by 3")
    second.assert_complete()
    assert "multiply" in second.requests[0].tools
    assert result.tool_calls[0].content == "6"


@pytest.mark.parametrize(
    ("skills", "message"),
    [
        ((ARITH, ARITH), "two skills are named 'arith'"),
        ((ARITH, dataclasses.replace(GREET, tools=(tool(name="multiply")(lambda: 1),))), "taken"),
        (("arith",), "must be a Skill"),
    ],
)
def test_bad_skill_sets_are_config_errors(skills: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_agent(ScriptedModel([]), {"skills": True}, skills=skills).session()


# -- subagents --------------------------------------------------------------------------------


def child_spans(spans: Sequence[ReadableSpan], session_id: str) -> list[ReadableSpan]:
    return [s for s in spans if (s.attributes or {}).get("session.id") == session_id]


async def test_delegate_runs_a_scoped_child_as_a_child_span_of_the_tool() -> None:
    provider, exporter = traced()
    model = ScriptedModel(
        [
            call("delegate", "d", task="Add 1 and 2", tools=["add"], max_iterations=3),
            call("add", "a", a=1, b=2),  # the child
            call("finish", "cf", summary="1 + 2 = 3"),  # the child
            call("finish", "f", summary="It is 3"),
        ]
    )
    agent = make_agent(model, {"subagents": True}, tracer_provider=provider)
    session = agent.session("parent", user_id="ana")
    result = await session.run_turn(ONE_TASK)
    model.assert_complete()
    assert result.stop_reason == "finished"
    assert "delegate" in model.requests[0].tools
    assert model.requests[1].tools == ("add", "finish")
    assert model.requests[2].tools == ("add", "finish")
    child_system = model.requests[1].messages[0].content
    assert SUBAGENT_INSTRUCTIONS in child_system
    assert model.requests[1].messages[1:] == (UserMessage(content="Add 1 and 2"),)
    delegated = result.tool_calls[0]
    assert delegated.status == "ok"
    assert delegated.content == (
        "Subagent parent/sub-1 finished after 2 model calls, 1 tool call.\n"
        "Stop reason: finished\nAnswer: 1 + 2 = 3"
    )

    spans = exporter.get_finished_spans()
    (tool_span,) = [s for s in spans if s.name == "tool.delegate"]
    (child_agent,) = [s for s in child_spans(spans, "parent/sub-1") if s.name == "agent.turn"]
    assert child_agent.parent is not None
    assert child_agent.parent.span_id == tool_span.context.span_id
    assert child_agent.context.trace_id == tool_span.context.trace_id
    assert (child_agent.attributes or {})["user.id"] == "ana"
    assert '"variant": "alyx/sub"' in str((child_agent.attributes or {})["metadata"])
    (parent_agent,) = [s for s in child_spans(spans, "parent") if s.name == "agent.turn"]
    assert tool_span.parent is not None
    assert tool_span.parent.span_id == parent_agent.context.span_id
    child_llm = [s for s in child_spans(spans, "parent/sub-1") if s.name == "llm.call"]
    assert len(child_llm) == 2
    assert all(s.parent and s.parent.span_id == child_agent.context.span_id for s in child_llm)


async def test_subagent_ids_count_up_and_survive_restore() -> None:
    script = [
        call("delegate", "d", task="Say hi", tools=[]),
        call("finish", "cf", summary="hi"),
        call("finish", "f", summary="done"),
    ]
    model = ScriptedModel(list(script))
    agent = make_agent(model, {"subagents": True})
    session = agent.session("p")
    await session.run_turn("Greet")
    state = session.state()
    again = ScriptedModel(list(script))
    restored = dataclasses.replace(agent, model=again).session("p")
    restored.restore(state)
    result = await restored.run_turn("Greet again")
    assert again.requests[1].tools == ("finish",)
    assert result.tool_calls[0].content.startswith("Subagent p/sub-2 finished")


@pytest.mark.parametrize(
    ("case", "child_script", "max_iterations", "reason"),
    [
        ("model_error", [ModelError("upstream 503")], 4, "stopped with model_error (upstream 503)"),
        (
            "max_iterations",
            [call("add", "a1", a=1, b=1), call("add", "a2", a=2, b=2)],
            2,
            "stopped with max_iterations (2 model calls) after 2 model calls, 2 tool calls",
        ),
        (
            "loop_guard",
            [call("add", f"a{i}", a=1, b=1) for i in range(5)],
            8,
            "stopped with loop_guard (5 identical calls in a row",
        ),
        (
            "forced_finish",
            [call("finish", "cf", summary="partial")],
            1,
            "stopped with forced_finish after 1 model call",
        ),
    ],
)
async def test_a_failing_subagent_comes_back_as_a_result(
    case: str, child_script: list[Any], max_iterations: int, reason: str
) -> None:
    model = ScriptedModel(
        [
            call("delegate", "d", task="Add", tools=["add"], max_iterations=max_iterations),
            *child_script,
            call("finish", "f", summary="the subagent failed"),
        ]
    )
    parent = variant(subagents=True)
    if case == "max_iterations":  # without a forced finish, the limit itself stops the turn
        parent = dataclasses.replace(
            parent, turn=dataclasses.replace(parent.turn, forced_finish=False)
        )
    agent = Agent(model=model, variant=parent, tools=lambda: WORK_TOOLS)
    result = await agent.session("p").run_turn(ONE_TASK)
    model.assert_complete()
    assert result.stop_reason == "finished"
    delegated = result.tool_calls[0]
    assert delegated.status == "ok"
    assert reason in delegated.content
    assert f"Stop reason: {case}" in delegated.content
    assert "Its work may be incomplete." in delegated.content


@pytest.mark.parametrize("name", ["finish", "delegate", "todo_write", "load_skill", "nope"])
async def test_a_tool_that_cannot_be_delegated_is_an_error_result(name: str) -> None:
    model = ScriptedModel(
        [
            call("delegate", "d", task="Do it", tools=["add", name]),
            call("finish", "f", summary="could not delegate"),
        ]
    )
    agent = make_agent(model, {"subagents": True, "skills": True}, skills=(GREET,))
    result = await agent.session("p").run_turn(ONE_TASK)
    model.assert_complete()  # no model call was spent on a child
    delegated = result.tool_calls[0]
    assert delegated.status == "error"
    assert f"Cannot delegate {name!r}" in delegated.content
    assert "your work tools: add, explode" in delegated.content


def test_the_subagent_variant_is_scoped() -> None:
    parent = variant(memory=True, skills=True, subagents=True)
    parent = dataclasses.replace(
        parent, guards=dataclasses.replace(parent.guards, loop_guard=False, nudge=False)
    )
    child = scoped_variant(parent, 100)
    assert child.name == "alyx/sub"
    assert child.plan.dialect == "none"
    assert child.turn.ending == "finish_tool"
    assert child.turn.max_iterations == parent.turn.max_iterations == 30
    assert scoped_variant(parent, 4).turn.max_iterations == 4
    assert scoped_variant(parent, 1).turn.iteration_warning == 0
    assert child.guards.loop_guard and child.guards.nudge and child.guards.continuation
    assert not (child.context.memory or child.context.skills or child.context.subagents)
