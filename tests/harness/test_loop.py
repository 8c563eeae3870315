"""The turn loop on scripted models: context assembly, the finish gate, guards, stop reasons."""

from __future__ import annotations

import dataclasses
import gc
import weakref

import pytest

from plangate.harness import (
    Agent,
    AssistantMessage,
    ModelError,
    ScriptedModel,
    SystemMessage,
    ToolMessage,
    UserMessage,
    get_domain,
    load_variant,
    model_from_spec,
)
from plangate.harness.models import UnexpectedModelCall
from plangate.harness.plans import PLAN_HEADER
from tests.helpers import WORK_TOOLS, agent, call, run

TWO_TASKS = "Add 1 and 2, then add 3 and 4"

PLAN_TWO = call("todo_write", "w", todos=[{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}])


def diligent_two_tasks() -> list[object]:
    return [
        PLAN_TWO,
        call("todo_update", "u1", item_id=1, status="in_progress"),
        call("add", "a1", a=1, b=2),
        call("todo_update", "u2", item_id=1, status="completed"),
        call("todo_update", "u3", item_id=2, status="in_progress"),
        call("add", "a2", a=3, b=4),
        call("todo_update", "u4", item_id=2, status="completed"),
        call("finish", "f", summary="3 and 7"),
    ]


async def test_pinned_plan_message_sits_right_after_the_system_prompt_on_every_call() -> None:
    result, model = await run(diligent_two_tasks(), TWO_TASKS)

    assert result.stop_reason == "finished"
    assert result.answer == "3 and 7"
    assert len(model.requests) == 8
    for seen in model.requests:
        assert isinstance(seen.messages[0], SystemMessage)
        assert isinstance(seen.messages[1], SystemMessage)
        assert seen.messages[1].content.startswith(PLAN_HEADER)
        assert seen.messages[2] == UserMessage(content=TWO_TASKS)
    # Rebuilt from state on every call: the plan message follows the todo list's progress.
    assert "no plan yet" in model.requests[0].messages[1].content
    assert "[~] 1. Add 1 and 2 ← CURRENT" in model.requests[2].messages[1].content
    assert "[x] 1. Add 1 and 2" in model.requests[4].messages[1].content
    assert model.requests[7].messages[1].content.splitlines()[1:3] == [
        "[x] 1. Add 1 and 2",
        "[x] 2. Add 3 and 4",
    ]


async def test_history_only_plan_is_never_pinned_but_rides_in_tool_results() -> None:
    script = [
        call("todo_write", "w", todos=[{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}]),
        call("add", "a1", a=1, b=2),
        call("todo_update", "u1", item_id=1, status="completed"),
        "All done.",
    ]
    result, model = await run(script, TWO_TASKS, variant="todo-basic")

    assert result.stop_reason == "finished"
    for seen in model.requests:
        assert not any(
            isinstance(m, SystemMessage) and m.content.startswith(PLAN_HEADER)
            for m in seen.messages
        )
    write_result = result.messages[2]
    assert isinstance(write_result, ToolMessage)
    assert PLAN_HEADER in write_result.content
    # Two statuses: the model is only offered pending / completed.
    update = next(t for t in model.requests[0].tools if t == "todo_update")
    assert update == "todo_update"
    assert result.plan[1].status == "pending"


async def test_finish_gate_bounces_with_the_incomplete_items_then_accepts() -> None:
    script = [
        PLAN_TWO,
        call("todo_update", "u1", item_id=1, status="in_progress"),
        call("add", "a1", a=1, b=2),
        call("finish", "f1", summary="too early"),
        call("todo_update", "u2", item_id=1, status="completed"),
        call("todo_update", "u3", item_id=2, status="blocked", reason="needs the user's numbers"),
        call("finish", "f2", summary="one done, one blocked"),
    ]
    result, _ = await run(script, TWO_TASKS)

    bounce = result.tool_calls[3]
    assert bounce.status == "error"
    assert bounce.content.startswith("Cannot finish: 2 plan items are not completed:")
    assert "[~] 1. Add 1 and 2 (in_progress)" in bounce.content
    assert "[ ] 2. Add 3 and 4 (pending)" in bounce.content
    assert [e.kind for e in result.events].count("gate_bounce") == 1
    # A blocked item with a reason does not hold the turn.
    assert result.stop_reason == "finished"
    assert result.answer == "one done, one blocked"


async def test_finish_gate_gives_way_after_max_bounces() -> None:
    finishes = [call("finish", f"f{i}", summary="nope") for i in range(4)]
    result, _ = await run([PLAN_TWO, *finishes], TWO_TASKS)

    assert [c.status for c in result.tool_calls] == ["ok", "error", "error", "error", "ok"]
    kinds = [e.kind for e in result.events]
    assert kinds.count("gate_bounce") == 3
    assert "gate_exhausted" in kinds
    assert result.stop_reason == "finished"


async def test_text_ends_the_turn_in_the_naive_variant() -> None:
    result, model = await run(
        [call("add", "a", a=1, b=2), "It is 3."], "Add 1 and 2", variant="naive"
    )

    assert result.stop_reason == "finished"
    assert result.answer == "It is 3."
    assert model.requests[0].tools == ("add", "explode")


async def test_text_does_not_end_a_finish_tool_turn() -> None:
    script = ["I will add them now.", call("add", "a", a=1, b=2), call("finish", "f", summary="3")]
    result, model = await run(script, "Add 1 and 2")

    assert result.stop_reason == "finished"
    reminder = model.requests[1].messages[-1]
    assert isinstance(reminder, UserMessage)
    assert "does not end the turn" in reminder.content
    assert [e.kind for e in result.events] == ["planning_skipped", "continuation", "stop"]


async def test_a_tool_call_written_as_text_gets_a_nudge() -> None:
    script = ['add({"a": 1, "b": 2})', call("add", "a", a=1, b=2), call("finish", "f", summary="3")]
    result, model = await run(script, "Add 1 and 2")

    nudge = model.requests[1].messages[-1]
    assert isinstance(nudge, UserMessage)
    assert "'add'" in nudge.content and "as text" in nudge.content
    assert [e.kind for e in result.events] == ["planning_skipped", "nudge", "stop"]
    assert result.stop_reason == "finished"


async def test_empty_reply_with_an_open_plan_gets_a_continuation_prompt_in_text_mode() -> None:
    variant = load_variant("todo-basic")
    variant = dataclasses.replace(
        variant, guards=dataclasses.replace(variant.guards, continuation=True)
    )
    model = ScriptedModel([PLAN_TWO, "", "Stopping here."])
    session = Agent(model=model, variant=variant, tools=lambda: WORK_TOOLS).session("s")
    result = await session.run_turn(TWO_TASKS)
    model.assert_complete()

    assert [e.kind for e in result.events if e.kind != "plan_updated"] == ["continuation", "stop"]
    assert result.answer == "Stopping here."


async def test_empty_reply_ends_a_naive_turn() -> None:
    result, _ = await run([""], "Add 1 and 2", variant="naive")
    assert result.stop_reason == "finished"
    assert result.answer == ""


async def test_loop_guard_warns_then_stops_and_keeps_the_partial_trajectory() -> None:
    repeats = [call("add", f"a{i}", a=1, b=2) for i in range(5)]
    result, _ = await run(repeats, "Add 1 and 2")

    assert result.stop_reason == "loop_guard"
    assert "5 identical calls in a row" in result.stop_detail
    assert [c.status for c in result.tool_calls] == ["ok", "ok", "ok", "ok", "error"]
    assert "Loop guard" not in result.tool_calls[1].content
    assert "same call with the same arguments 3 times" in result.tool_calls[2].content
    assert "4 times" in result.tool_calls[3].content
    assert result.tool_calls[4].content.startswith("Not run: the loop guard stopped the turn")
    kinds = [e.kind for e in result.events]
    assert kinds.count("loop_warning") == 2 and "loop_stop" in kinds
    assert len(result.messages) == 1 + 5 * 2


async def test_loop_guard_ignores_call_ids_and_argument_order() -> None:
    from plangate.harness import ToolCall

    repeats = [
        ToolCall(id="same", name="add", arguments='{"a": 1, "b": 2}'),
        ToolCall(id="same", name="add", arguments='{"b":2,"a":1}'),
        ToolCall(id="other", name="add", arguments='{"a":1, "b":2}'),
        ToolCall(id="x", name="add", arguments='{"b": 2, "a": 1}'),
        ToolCall(id="y", name="add", arguments='{"a":1,"b":2}'),
    ]
    result, _ = await run(repeats, "Add 1 and 2")
    assert result.stop_reason == "loop_guard"


async def test_naive_runs_into_the_iteration_limit() -> None:
    variant = load_variant("naive")
    variant = dataclasses.replace(variant, turn=dataclasses.replace(variant.turn, max_iterations=4))
    model = ScriptedModel([call("add", f"a{i}", a=i, b=i) for i in range(4)])
    result = (
        await Agent(model=model, variant=variant, tools=lambda: WORK_TOOLS).session().run_turn("x")
    )
    model.assert_complete()

    assert result.stop_reason == "max_iterations"
    assert result.iterations == 4
    assert len(result.tool_calls) == 4


async def test_iteration_warning_then_forced_finish() -> None:
    variant = load_variant("alyx")
    variant = dataclasses.replace(
        variant, turn=dataclasses.replace(variant.turn, max_iterations=5, iteration_warning=2)
    )
    script = [call("add", f"a{i}", a=i, b=1) for i in range(4)]
    script.append(call("finish", "f", summary="ran out of calls"))
    model = ScriptedModel(script)
    result = (
        await Agent(model=model, variant=variant, tools=lambda: WORK_TOOLS).session().run_turn("x")
    )
    model.assert_complete()

    assert result.stop_reason == "forced_finish"
    assert result.answer == "ran out of calls"
    warning = model.requests[3].messages[-1]
    assert isinstance(warning, UserMessage) and "Only 2 model calls remain" in warning.content
    # The forced call may only call finish.
    assert model.requests[4].tools == ("finish",)
    assert "iteration limit" in model.requests[4].messages[-1].content
    assert [e.kind for e in result.events] == [
        "planning_skipped",
        "iteration_warning",
        "forced_finish",
        "stop",
    ]


async def test_forced_finish_stops_even_if_the_model_ignores_it() -> None:
    variant = load_variant("alyx")
    variant = dataclasses.replace(
        variant, turn=dataclasses.replace(variant.turn, max_iterations=2, iteration_warning=0)
    )
    model = ScriptedModel([call("add", "a", a=1, b=1), "I refuse to finish."])
    result = (
        await Agent(model=model, variant=variant, tools=lambda: WORK_TOOLS).session().run_turn("x")
    )
    assert result.stop_reason == "forced_finish"
    assert result.iterations == 2


async def test_model_error_stops_the_turn_and_keeps_what_was_done() -> None:
    script = [call("add", "a", a=1, b=2), ModelError("upstream returned 503 three times")]
    result, _ = await run(script, "Add 1 and 2")

    assert result.stop_reason == "model_error"
    assert "503" in result.stop_detail
    assert [c.name for c in result.tool_calls] == ["add"]
    assert result.iterations == 2


async def test_recoverable_errors_come_back_as_tool_results() -> None:
    script = [
        call("nope", "n"),
        call("add", "b1", a="one", b=2),
        call("explode", "e", reason="disk on fire"),
        call("add", "a", a=1, b=2),
        call("finish", "f", summary="3"),
    ]
    result, _ = await run(script, "Add 1 and 2")

    assert result.stop_reason == "finished"
    unknown, bad, boom, ok, _ = result.tool_calls
    assert unknown.status == "error" and "Unknown tool 'nope'" in unknown.content
    assert "add" in unknown.content and "finish" in unknown.content
    assert bad.status == "error" and "a must be an integer" in bad.content
    assert boom.status == "error" and "RuntimeError: disk on fire" in boom.content
    assert ok.status == "ok" and ok.content.startswith("3")


async def test_malformed_json_arguments_are_recoverable() -> None:
    from plangate.harness import ToolCall

    script = [ToolCall(id="m", name="add", arguments='{"a": 1,'), call("finish", "f", summary="-")]
    result, _ = await run(script, "Add")
    assert result.tool_calls[0].status == "error"
    assert "not valid JSON" in result.tool_calls[0].content
    assert result.tool_calls[0].arguments == '{"a": 1,'


async def test_planning_trigger_offers_plan_tools_only_for_multi_action_requests() -> None:
    _, simple = await run([call("finish", "f", summary="p95 is 2 s")], "What is the p95 latency?")
    assert "todo_write" not in simple.requests[0].tools
    assert not any(m.content.startswith(PLAN_HEADER) for m in simple.requests[0].messages)

    _, multi = await run(diligent_two_tasks(), TWO_TASKS)
    assert {"todo_write", "todo_update", "todo_read"} <= set(multi.requests[0].tools)


async def test_status_reminder_follows_each_tool_result() -> None:
    result, _ = await run(diligent_two_tasks(), TWO_TASKS)
    after_first_add = result.tool_calls[2].content
    assert after_first_add.endswith(
        '[Plan: 0/2 done. Active: "Add 1 and 2". Ready: "Add 3 and 4".]'
    )


async def test_calls_after_a_stop_are_answered_as_not_run() -> None:
    from plangate.harness import AssistantMessage

    both = AssistantMessage(
        tool_calls=(call("finish", "f", summary="done"), call("add", "a", a=1, b=1))
    )
    result, _ = await run([both], "Add 1 and 1")
    assert [c.status for c in result.tool_calls] == ["ok", "not_run"]
    assert result.tool_calls[1].content == "Not run: the turn ended (finished)."


async def test_harness_owned_plan_hands_out_one_item_at_a_time() -> None:
    script = [
        call("add", "a1", a=1, b=2),
        call("finish", "f1", summary="3"),
        call("add", "a2", a=3, b=4),
        call("finish", "f2", summary="7"),
    ]
    result, model = await run(script, TWO_TASKS, variant="harness-plan")

    assert result.stop_reason == "finished"
    assert not {"todo_write", "todo_update"} & set(model.requests[0].tools)
    first_plan = model.requests[0].messages[1].content
    assert "[~] 1. Add 1 and 2 ← CURRENT" in first_plan and "[ ] 2. Add 3 and 4" in first_plan
    assert result.tool_calls[1].content.startswith(
        'Recorded "Add 1 and 2" as done. Next item: "Add 3 and 4"'
    )
    assert "[~] 2. Add 3 and 4 ← CURRENT" in model.requests[2].messages[1].content
    assert [item.status for item in result.plan] == ["completed", "completed"]


async def test_history_and_plan_carry_over_to_the_next_turn() -> None:
    model = ScriptedModel(
        [
            *diligent_two_tasks(),
            call("todo_read", "r"),
            call("finish", "f2", summary="still done"),
        ]
    )
    session = agent(model).session("multi")
    first = await session.run_turn(TWO_TASKS)
    second = await session.run_turn("Show me the plan, then summarize it")
    model.assert_complete()

    assert (first.turn_index, second.turn_index) == (0, 1)
    sent = model.requests[-1].messages
    assert sent[2] == UserMessage(content=TWO_TASKS)
    assert UserMessage(content="Show me the plan, then summarize it") in sent
    assert "[x] 2. Add 3 and 4" in second.tool_calls[0].content


async def test_scripted_model_refuses_an_extra_call() -> None:
    model = ScriptedModel([call("add", "a", a=1, b=1)])
    with pytest.raises(UnexpectedModelCall, match="called 2 times"):
        await agent(model).session().run_turn("Add 1 and 1")


async def test_scripted_model_reports_unused_steps() -> None:
    model = ScriptedModel(["a", "b"])
    with pytest.raises(AssertionError, match="1 unused steps of 2"):
        await agent(model, "naive").session().run_turn("hi")
        model.assert_complete()


async def test_turn_result_json_has_the_documented_keys() -> None:
    result, _ = await run(diligent_two_tasks(), TWO_TASKS)
    data = result.to_dict()
    assert {"stop_reason", "plan", "tool_calls", "iterations"} <= set(data)
    assert data["plan"][0] == {"id": "1", "text": "Add 1 and 2", "status": "completed"}
    assert data["tool_calls"][2] == {
        "name": "add",
        "arguments": '{"a":1,"b":2}',
        "status": "ok",
        "iteration": 3,
    }
    assert isinstance(result.messages[1], AssistantMessage)


@pytest.mark.parametrize(
    "variant",
    ["naive", "todo-basic", "alyx", "harness-plan", "alyx-context", "flux", "flux-review"],
)
async def test_a_finished_session_is_freed_as_soon_as_it_is_dropped(variant: str) -> None:
    # No reference cycle through the session (its `finish` tool once held it): replaying a
    # dataset makes thousands of sessions, and each must go with its messages when dropped,
    # not wait for the garbage collector.
    domain = get_domain("observability")
    model = model_from_spec("sim:diligent", domain=domain)
    built = Agent(model=model, variant=load_variant(variant), tools=domain.make_tools)
    session = built.session("dropped")
    result = await session.run_turn(
        "Sort the LLM spans by latency, identify the bottlenecks, and write a latency report."
    )
    if result.stop_reason == "awaiting_approval":  # flux-review: a reviewer approves the plan
        result = await session.approve()
    assert result.stop_reason == "finished" and len(result.tool_calls) >= 3
    gone = weakref.ref(session)
    gc.disable()
    try:
        del session
        assert gone() is None
    finally:
        gc.enable()
