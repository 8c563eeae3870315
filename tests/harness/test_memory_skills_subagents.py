"""Memory, skills and subagents, end to end on the real session loop and a scripted model."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.harness import (
    Agent,
    ConfigError,
    ModelError,
    ScriptedModel,
    SystemMessage,
    UserMessage,
    Variant,
    load_variant,
    tool,
)
from plangate.harness._turn import Turn
from plangate.harness.features._memory import MAX_CHARS, UPDATE_PROMPT, Memory, MemoryPathError
from plangate.harness.features._skills import Skill, Skills
from plangate.harness.features._subagents import SUBAGENT_INSTRUCTIONS, scoped_variant
from plangate.harness.plans import PLAN_HEADER
from tests.helpers import WORK_TOOLS, call

TWO_TASKS = "Add 1 and 2, then add 3 and 4"
ONE_TASK = "What is 1 plus 2?"
MEMORY = "- Ana prefers metric units."


def variant(**switches: bool) -> Variant:
    """The alyx variant with some `context` switches turned on."""
    loaded = load_variant("alyx")
    return dataclasses.replace(loaded, context=dataclasses.replace(loaded.context, **switches))


def make_agent(model: ScriptedModel, switches: dict[str, bool], **kw: Any) -> Agent:
    return Agent(model=model, variant=variant(**switches), tools=lambda: WORK_TOOLS, **kw)


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def memory_of(session: Any) -> Memory:
    return next(f for f in session.features if isinstance(f, Memory))


def events(spans: Sequence[ReadableSpan], name: str) -> list[dict[str, Any]]:
    return [dict(e.attributes or {}) for s in spans for e in s.events if e.name == name]


# -- memory -----------------------------------------------------------------------------------


async def test_memory_is_loaded_after_the_plan_on_every_call_and_no_change_keeps_it(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ana" / "default.md"
    path.parent.mkdir()
    path.write_text(MEMORY + "\n", encoding="utf-8")
    before = path.stat().st_mtime_ns
    todos = [{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}]
    model = ScriptedModel(
        [
            call("todo_write", "w", todos=[{**t, "status": "completed"} for t in todos]),
            call("add", "a", a=1, b=2),
            call("finish", "f", summary="3 and 7"),
            "NO_CHANGE",  # the separate memory update step
        ]
    )
    session = make_agent(model, {"memory": True}, memory_dir=tmp_path).session(user_id="ana")
    result = await session.run_turn(TWO_TASKS)
    model.assert_complete()
    assert result.stop_reason == "finished"
    *turn_calls, update = model.requests
    for seen in turn_calls:
        assert isinstance(seen.messages[0], SystemMessage)
        assert seen.messages[1].content.startswith(PLAN_HEADER)
        assert seen.messages[2] == SystemMessage(content=f"# Memory of ana\n{MEMORY}")
        assert seen.messages[3] == UserMessage(content=TWO_TASKS)
    assert update.tools == ()
    assert update.messages[0] == SystemMessage(content=UPDATE_PROMPT)
    assert MEMORY in update.messages[1].content
    assert TWO_TASKS in update.messages[1].content and "3 and 7" in update.messages[1].content
    assert path.read_text(encoding="utf-8") == MEMORY + "\n"
    assert path.stat().st_mtime_ns == before
    assert [u.status for u in memory_of(session).updates] == ["unchanged"]


async def test_memory_is_written_after_a_turn_and_read_on_the_next(tmp_path: Path) -> None:
    provider, exporter = traced()
    new = "# Ana\n- Prefers metric units."
    model = ScriptedModel(
        [
            call("finish", "f", summary="3"),
            f"```markdown\n{new}\n```",  # a fenced answer is unwrapped
            call("finish", "g", summary="hello again"),
            "NO_CHANGE",
        ]
    )
    agent = make_agent(model, {"memory": True}, memory_dir=tmp_path, tracer_provider=provider)
    session = agent.session("s", user_id="ana")
    first = await session.run_turn(ONE_TASK)
    assert [e.kind for e in first.events][-2:] == ["memory_updated", "stop"]
    memory_span = next(s for s in exporter.get_finished_spans() if s.name == "memory.update")
    turn_span = next(s for s in exporter.get_finished_spans() if s.name == "agent.turn")
    assert (
        memory_span.parent is not None and memory_span.parent.span_id == turn_span.context.span_id
    )
    assert not any("# Memory of" in m.content for m in model.requests[0].messages)
    assert (tmp_path / "ana" / "default.md").read_text(encoding="utf-8") == new + "\n"
    await session.run_turn("Hello")
    model.assert_complete()
    # No plan on a one-action request: the memory sits right after the system prompt.
    assert model.requests[2].messages[1] == SystemMessage(content=f"# Memory of ana\n{new}")
    assert [u.status for u in memory_of(session).updates] == ["written", "unchanged"]
    spans = exporter.get_finished_spans()
    chain = [s for s in spans if s.name == "memory.update"]
    assert len(chain) == 2
    assert (chain[0].attributes or {})["openinference.span.kind"] == "CHAIN"
    llm = [
        s for s in spans if s.parent is not None and s.parent.span_id == chain[0].context.span_id
    ]
    assert [(s.attributes or {})["openinference.span.kind"] for s in llm] == ["LLM"]
    details = [e["plangate.detail"] for e in events(spans, "memory_updated")]
    assert details[0].startswith("written: ") and details[1] == "unchanged"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("Ana's key is sk-proj-abcdefghijklmnop1234", "an API key (sk-…)"),
        ("Use Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.abc", "a bearer token"),
        ("AWS key AKIAIOSFODNN7EXAMPLE for deploys", "an AWS access key"),
        ("DB at postgres://ana:hunter2@db.example.com/app", "a password in a URL"),
        ("-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----", "a private key"),
        ("x" * (MAX_CHARS + 1), "over the 8,000 limit"),
        ("Ana\x00likes tea", "control character U+0000"),
        ("Ana\x1b[31mlikes tea", "control character U+001B"),
        ("   ", "empty"),
    ],
)
async def test_unsafe_memory_writes_are_rejected_and_the_old_file_kept(
    tmp_path: Path, answer: str, reason: str
) -> None:
    provider, exporter = traced()
    path = tmp_path / "ana" / "default.md"
    path.parent.mkdir()
    path.write_text(MEMORY, encoding="utf-8")
    model = ScriptedModel([call("finish", "f", summary="done"), answer])
    agent = make_agent(model, {"memory": True}, memory_dir=tmp_path, tracer_provider=provider)
    session = agent.session(user_id="ana")
    result = await session.run_turn(ONE_TASK)
    model.assert_complete()
    assert result.stop_reason == "finished"
    assert path.read_text(encoding="utf-8") == MEMORY
    assert sorted(p.name for p in path.parent.iterdir()) == ["default.md"]  # no temp file left
    (update,) = memory_of(session).updates
    assert update.status == "rejected"
    assert update.detail.startswith("rejected: ") and reason in update.detail
    assert update.detail.endswith("the old memory is kept")
    assert "hunter2" not in update.detail and "AKIA" not in update.detail.replace("(AKIA…)", "")
    (event,) = events(exporter.get_finished_spans(), "memory_updated")
    assert event["plangate.detail"] == update.detail


async def test_a_failed_memory_model_call_keeps_the_file_and_does_not_raise(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([call("finish", "f", summary="done"), ModelError("503")])
    session = make_agent(model, {"memory": True}, memory_dir=tmp_path).session(user_id="ana")
    result = await session.run_turn(ONE_TASK)
    assert result.stop_reason == "finished"
    (update,) = memory_of(session).updates
    assert update.status == "failed" and "503" in update.detail
    assert not (tmp_path / "ana").exists()


async def test_an_unreadable_memory_file_is_skipped_and_not_overwritten(tmp_path: Path) -> None:
    (tmp_path / "ana" / "default.md").mkdir(parents=True)  # a folder where the file should be
    model = ScriptedModel([call("finish", "f", summary="done")])  # no update call is made
    session = make_agent(model, {"memory": True}, memory_dir=tmp_path).session(user_id="ana")
    result = await session.run_turn(ONE_TASK)
    model.assert_complete()
    assert result.stop_reason == "finished"
    assert not any("# Memory of" in m.content for m in model.requests[0].messages)
    (update,) = memory_of(session).updates
    assert update.status == "failed" and update.detail.startswith("failed: cannot read")
    assert (tmp_path / "ana" / "default.md").is_dir()


@pytest.mark.parametrize(
    ("user", "space"),
    [
        ("../x", "default"),
        ("a/b", "default"),
        ("..", "default"),
        (".", "default"),
        ("/etc/passwd", "default"),
        ("a\\b", "default"),
        ("a" * 65, "default"),
        ("", "default"),
        ("ana\x00", "default"),
        ("ana", "../bob/default"),
        ("ana", "a..b"),
        ("ana", "/tmp/x"),
        ("ana", 7),
    ],
)
def test_unsafe_user_and_space_ids_are_rejected(tmp_path: Path, user: str, space: Any) -> None:
    agent = make_agent(ScriptedModel([]), {"memory": True}, memory_dir=tmp_path)
    with pytest.raises(MemoryPathError, match="cannot name a memory file"):
        agent.session(user_id=user, metadata={"space": space})
    assert list(tmp_path.iterdir()) == []


def test_a_link_out_of_the_memory_folder_is_rejected(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    memory_dir = tmp_path / "memory"
    memory_dir.mkdir()
    (memory_dir / "eve").symlink_to(outside, target_is_directory=True)
    agent = make_agent(ScriptedModel([]), {"memory": True}, memory_dir=memory_dir)
    with pytest.raises(MemoryPathError, match="outside the memory folder"):
        agent.session(user_id="eve")


def test_memory_needs_a_memory_dir() -> None:
    with pytest.raises(ConfigError, match="memory_dir"):
        make_agent(ScriptedModel([]), {"memory": True}).session()


async def test_users_and_spaces_are_isolated(tmp_path: Path) -> None:
    owners = [("ana", "default"), ("ana", "work"), ("bob", "default")]
    for user, space in owners:
        model = ScriptedModel([call("finish", "f", summary="ok"), f"- {user} in {space}"])
        agent = make_agent(model, {"memory": True}, memory_dir=tmp_path)
        await agent.session(user_id=user, metadata={"space": space}).run_turn(ONE_TASK)
        model.assert_complete()
    for user, space in owners:
        path = tmp_path / user / f"{space}.md"
        assert path.read_text(encoding="utf-8") == f"- {user} in {space}\n"
        model = ScriptedModel([call("finish", "f", summary="ok"), "NO_CHANGE"])
        agent = make_agent(model, {"memory": True}, memory_dir=tmp_path)
        await agent.session(user_id=user, metadata={"space": space}).run_turn(ONE_TASK)
        shown = [m.content for m in model.requests[0].messages if "# Memory of" in m.content]
        where = "" if space == "default" else f" (space {space})"
        assert shown == [f"# Memory of {user}{where}\n- {user} in {space}"]


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
