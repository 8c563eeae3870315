"""The todo-list plan dialect's tools: schemas, results through run_tool, and bad arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from plangate.harness import PlanItem, Tool, ToolCall, canonical_json
from plangate.harness._tools import ToolResult, run_tool
from plangate.harness.plans import PLAN_HEADER, TodoList, render_plan, todo_tools
from tests.harness.test_todo import FOUR, TWO, written


def tools_for(plan: TodoList, *, show_plan: bool = True) -> dict[str, Tool]:
    return {t.name: t for t in todo_tools(plan, show_plan=show_plan)}


async def call(tools: dict[str, Tool], name: str, /, **arguments: Any) -> ToolResult:
    return await run_tool(ToolCall.of(name, **arguments), tools)


async def call_raw(tools: dict[str, Tool], name: str, arguments: str) -> ToolResult:
    return await run_tool(ToolCall(id="call_1", name=name, arguments=arguments), tools)


# --- the tools -----------------------------------------------------------------------------


def test_four_status_tool_schemas_offer_every_status_and_a_reason() -> None:
    tools = tools_for(TodoList("four"))
    assert list(tools) == ["todo_write", "todo_update", "todo_read"]
    item = tools["todo_write"].parameters["properties"]["todos"]["items"]
    assert item["properties"]["status"] == {"enum": list(FOUR)}
    assert item["properties"]["reason"] == {"type": "string"}
    assert item["required"] == ["content"]
    update = tools["todo_update"].parameters
    assert update["properties"]["status"]["enum"] == list(FOUR)
    assert "reason" in update["properties"]
    assert update["required"] == ["item_id", "status"]


def test_two_status_tool_schemas_advertise_only_pending_and_completed_and_no_reason() -> None:
    tools = tools_for(TodoList("two"))
    item = tools["todo_write"].parameters["properties"]["todos"]["items"]
    assert item["properties"]["status"] == {"enum": list(TWO)}
    assert "reason" not in item["properties"]
    update = tools["todo_update"].parameters
    assert update["properties"]["status"]["enum"] == list(TWO)
    assert "reason" not in update["properties"]
    # Nothing the model reads about these tools may mention what it cannot use.
    for name in ("todo_write", "todo_update"):
        text = canonical_json(tools[name].parameters) + tools[name].description
        assert "reason" not in text, (name, text)
        assert "blocked" not in text, (name, text)
        assert "in_progress" not in text, (name, text)


async def test_tools_write_update_read_with_show_plan() -> None:
    plan = TodoList()
    tools = tools_for(plan, show_plan=True)
    todos = [{"content": "Analyze"}, {"content": "Validate"}, {"content": "Report"}]
    result = await call(tools, "todo_write", todos=todos)
    assert result.status == "ok"
    assert result.content == (
        "Todo list saved with 3 items.\n"
        "# Plan\n"
        "[ ] 1. Analyze\n"
        "[ ] 2. Validate\n"
        "[ ] 3. Report\n"
        'Next: mark "Analyze" in_progress and work on it.'
    )
    await call(tools, "todo_update", item_id=1, status="completed")
    result = await call(tools, "todo_update", item_id=2, status="in_progress")
    assert result.status == "ok"
    assert result.content == (
        "Item 2 is now in_progress.\n"
        "# Plan\n"
        "[x] 1. Analyze\n"
        "[~] 2. Validate ← CURRENT\n"
        "[ ] 3. Report\n"
        'Next: work on "Validate"; mark it completed as soon as it is done.'
    )
    result = await call(tools, "todo_update", item_id=3, status="blocked", reason="no data")
    assert result.content.splitlines()[4] == "[!] 3. Report (blocked: no data)"
    read = await call(tools, "todo_read")
    assert read.status == "ok"
    assert read.content == render_plan(plan.items())


async def test_tools_without_show_plan_do_not_carry_the_plan() -> None:
    plan = TodoList()
    tools = tools_for(plan, show_plan=False)
    result = await call(tools, "todo_write", todos=[{"content": "a"}, {"content": "b"}])
    assert result.content == "Todo list saved with 2 items."
    result = await call(tools, "todo_update", item_id=1, status="in_progress")
    assert result.content == "Item 1 is now in_progress."
    assert PLAN_HEADER not in result.content
    # todo_read is the way to see the list, whatever show_plan says.
    read = await call(tools, "todo_read")
    assert read.content.startswith(PLAN_HEADER + "\n[~] 1. a ← CURRENT")


async def test_two_status_tools_render_the_two_status_next_line() -> None:
    tools = tools_for(TodoList("two"))
    result = await call(tools, "todo_write", todos=[{"content": "a"}, {"content": "b"}])
    assert result.content.splitlines()[-1] == 'Next: do "a", then mark it completed.'


async def test_rule_violation_through_run_tool_is_an_error_result_with_the_retry_message() -> None:
    plan = written("Analyze", "Validate")
    tools = tools_for(plan)
    await call(tools, "todo_update", item_id=1, status="in_progress")
    result = await call(tools, "todo_update", item_id=2, status="in_progress")
    assert result.status == "error"
    assert result.content == (
        'Only one item may be in progress at a time, but these would be: 1 "Analyze", '
        '2 "Validate". Finish or block the current item before starting the next.'
    )
    assert result.arguments == {"item_id": 2, "status": "in_progress"}
    assert [i.status for i in plan.items()] == ["in_progress", "pending"]


async def test_update_before_write_through_run_tool() -> None:
    result = await call(tools_for(TodoList()), "todo_update", item_id=1, status="completed")
    assert result.status == "error"
    assert result.content == "There is no todo list yet: call todo_write with the items first."


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "todo_write",
            {},
            "Invalid arguments for 'todo_write': missing required argument todos. "
            "Fix the arguments and call the tool again.",
        ),
        (
            "todo_write",
            {"todos": "a, b"},
            "Invalid arguments for 'todo_write': todos must be an array (got \"a, b\"). "
            "Fix the arguments and call the tool again.",
        ),
        (
            "todo_write",
            {"todos": [{"content": "a"}, {"text": "b"}]},
            "Invalid arguments for 'todo_write': missing required argument todos[1].content; "
            "unknown argument todos[1].text (allowed: content, status, reason). "
            "Fix the arguments and call the tool again.",
        ),
        (
            "todo_write",
            {"todos": [{"content": "a", "status": "done"}]},
            "Invalid arguments for 'todo_write': todos[0].status must be one of "
            '"pending", "in_progress", "completed", "blocked" (got "done"). '
            "Fix the arguments and call the tool again.",
        ),
        (
            "todo_update",
            {"item_id": "1", "status": "completed"},
            "Invalid arguments for 'todo_update': item_id must be an integer (got \"1\"). "
            "Fix the arguments and call the tool again.",
        ),
        (
            "todo_update",
            {"item_id": 1, "status": "done"},
            "Invalid arguments for 'todo_update': status must be one of "
            '"pending", "in_progress", "completed", "blocked" (got "done"). '
            "Fix the arguments and call the tool again.",
        ),
        (
            "todo_read",
            {"verbose": True},
            "Invalid arguments for 'todo_read': unknown argument verbose (allowed: none). "
            "Fix the arguments and call the tool again.",
        ),
    ],
)
async def test_bad_arguments_are_error_results(
    name: str, arguments: dict[str, Any], message: str
) -> None:
    plan = written("keep")
    result = await call_raw(tools_for(plan), name, json.dumps(arguments))
    assert result.status == "error"
    assert result.content == message
    assert plan.items() == (PlanItem(id="1", text="keep", status="pending"),)


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        (
            "todo_write",
            {"todos": [{"content": "a", "status": "in_progress"}]},
            "Invalid arguments for 'todo_write': todos[0].status must be one of "
            '"pending", "completed" (got "in_progress"). '
            "Fix the arguments and call the tool again.",
        ),
        (
            "todo_update",
            {"item_id": 1, "status": "blocked", "reason": "r"},
            "Invalid arguments for 'todo_update': status must be one of "
            '"pending", "completed" (got "blocked"); '
            "unknown argument reason (allowed: item_id, status). "
            "Fix the arguments and call the tool again.",
        ),
    ],
)
async def test_two_status_tools_reject_the_other_statuses(
    name: str, arguments: dict[str, Any], message: str
) -> None:
    plan = written("keep", statuses="two")
    result = await call_raw(tools_for(plan), name, json.dumps(arguments))
    assert result.status == "error"
    assert result.content == message
    assert plan.items() == (PlanItem(id="1", text="keep", status="pending"),)


async def test_malformed_json_is_an_error_result() -> None:
    result = await call_raw(tools_for(TodoList()), "todo_write", '{"todos": [')
    assert result.status == "error"
    assert result.arguments is None
    assert result.content == (
        "The arguments of 'todo_write' are not valid JSON (Expecting value at position 11). "
        "Send a JSON object that matches the tool's schema."
    )
