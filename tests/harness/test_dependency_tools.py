"""The dependency-plan dialect: replanning, the reminder line, and the tools' results."""

from __future__ import annotations

import json
from typing import Any

import pytest

from plangate.harness import PlanItem, Tool, ToolCall
from plangate.harness._tools import ToolResult, run_tool
from plangate.harness.plans import (
    PLAN_HEADER,
    DependencyPlan,
    dependency_tools,
    render_plan,
    status_line,
)
from tests.harness.test_dependency_plan import pipeline, planned, statuses, step

# --- replanning ----------------------------------------------------------------------------


def test_replanning_keeps_completed_steps_and_their_results() -> None:
    plan = pipeline()
    plan.done("gather", "12 rows")
    warnings = plan.create(
        [
            step("gather", description="Gather the rows again"),
            step("dedupe", "gather"),
            step("clean", "dedupe"),
        ]
    )
    assert warnings == []
    assert plan.items() == (
        PlanItem(id="gather", text="Gather the rows again", status="completed", result="12 rows"),
        PlanItem(id="dedupe", text="Do dedupe", status="pending", depends_on=("gather",)),
        PlanItem(id="clean", text="Do clean", status="pending", depends_on=("dedupe",)),
    )


def test_replanning_warns_about_dropped_completed_steps() -> None:
    plan = pipeline()
    plan.done("gather", "12 rows")
    plan.done("side", "ok")
    assert plan.create([step("clean"), step("report", "clean")]) == [
        "completed steps dropped by the new plan, with their results: gather, side"
    ]


def test_replanning_restarts_in_progress_steps_and_retries_failed_ones() -> None:
    plan = pipeline()
    plan.start("side")
    plan.failed("gather", "source down")
    warnings = plan.create([step("gather"), step("clean", "gather"), step("side")])
    assert warnings == [
        "steps that were in progress are pending again, start them with start_step: side",
        "failed steps are pending again for a new try: gather",
    ]
    assert set(statuses(plan).values()) == {"pending"}
    assert all(item.reason is None and item.result is None for item in plan.items())
    assert plan.start("gather") == []


# --- the reminder line ---------------------------------------------------------------------


def test_status_line_carries_the_results_a_ready_step_starts_from() -> None:
    plan = planned(
        step("gather-data"),
        step("validate", "gather-data", description="validate"),
        step("report", "validate"),
    )
    plan.done(
        "gather-data", "12 rows\nof sales data from the EU shop, 3 with missing prices, all 2024"
    )
    assert status_line(plan.items()) == (
        '[Plan: 1/3 done. Ready: "validate" (from gather-data: 12 rows of sales data from the '
        "EU shop, 3 with missing pric…).]"
    )
    plan.start("validate")
    assert status_line(plan.items()) == '[Plan: 1/3 done. Active: "validate".]'


# --- the tools -----------------------------------------------------------------------------


def tools_for(plan: DependencyPlan, *, show_plan: bool = True) -> dict[str, Tool]:
    return {t.name: t for t in dependency_tools(plan, show_plan=show_plan)}


async def call(tools: dict[str, Tool], name: str, /, **arguments: Any) -> ToolResult:
    return await run_tool(ToolCall.of(name, **arguments), tools)


async def call_raw(tools: dict[str, Tool], name: str, arguments: str) -> ToolResult:
    return await run_tool(ToolCall(id="call_1", name=name, arguments=arguments), tools)


STEPS = [
    {"name": "gather-data", "description": "Gather the sales rows"},
    {"name": "validate", "description": "Validate the rows", "depends_on": ["gather-data"]},
    {"name": "report", "description": "Write the report", "depends_on": ["validate"]},
]


def test_tool_names_and_schemas() -> None:
    tools = tools_for(DependencyPlan())
    assert list(tools) == [
        "create_plan",
        "start_step",
        "mark_step_done",
        "mark_step_failed",
        "get_plan",
        "get_ready_steps",
    ]
    steps = tools["create_plan"].parameters["properties"]["steps"]
    assert steps["items"] == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "description": {"type": "string"},
            "depends_on": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name", "description"],
        "additionalProperties": False,
    }
    assert tools["mark_step_done"].parameters["required"] == ["name", "result"]
    assert tools["mark_step_failed"].parameters["required"] == ["name", "reason"]
    assert tools["get_plan"].parameters["properties"] == {}


def test_tool_descriptions_state_the_rules_with_the_configured_limit() -> None:
    default = tools_for(DependencyPlan())["create_plan"].description
    assert "2 to 20 steps" in default
    for rule_text in ("lowercase letters", "64 characters", "cycles", "completed steps"):
        assert rule_text in default
    assert "2 to 5 steps" in tools_for(DependencyPlan(max_plan_steps=5))["create_plan"].description
    assert "replan with create_plan" in tools_for(DependencyPlan())["mark_step_done"].description


async def test_tools_through_a_whole_plan_with_show_plan() -> None:
    plan = DependencyPlan()
    tools = tools_for(plan, show_plan=True)
    result = await call(tools, "create_plan", steps=STEPS)
    assert result.status == "ok"
    assert result.content == (
        "Plan saved with 3 steps. Ready to start: gather-data.\n"
        "# Plan\n"
        "[ ] gather-data. Gather the sales rows\n"
        "[ ] validate. Validate the rows\n"
        "[ ] report. Write the report\n"
        'Next: mark "Gather the sales rows" in_progress and work on it.'
    )
    result = await call(tools, "start_step", name="gather-data")
    assert result.content.splitlines()[:3] == [
        "Step 'gather-data' is in progress.",
        "# Plan",
        "[~] gather-data. Gather the sales rows ← CURRENT",
    ]
    result = await call(tools, "mark_step_done", name="gather-data", result="12 rows\n3 bad")
    assert result.content.splitlines()[0] == (
        "Step 'gather-data' is completed. Ready to start: validate."
    )
    ready = await call(tools, "get_ready_steps")
    assert ready.content == (
        "Ready to start (call start_step with one of them):\n"
        "- validate: Validate the rows\n"
        "  gather-data result: 12 rows\n"
        "  3 bad"
    )
    whole = await call(tools, "get_plan")
    assert whole.content == (
        f"{render_plan(plan.items())}\n"
        "Steps:\n"
        "- gather-data: result: 12 rows 3 bad\n"
        "- validate: depends on gather-data\n"
        "- report: depends on validate"
    )
    result = await call(tools, "mark_step_failed", name="validate", reason="schema changed")
    assert result.content.splitlines()[:2] == [
        "Step 'validate' is marked failed. No step can start: the rest failed or is blocked. "
        "Replan with create_plan, or finish and report what failed.",
        "Warning: blocked by this failure: report; mark them failed with mark_step_failed, "
        "or replan with create_plan to route around 'validate'",
    ]
    assert "[!] report. Write the report (blocked: depends on failed step validate)" in (
        result.content
    )
    ready = await call(tools, "get_ready_steps")
    assert ready.content == (
        "No step is ready to start. No step can start: the rest failed or is blocked. "
        "Replan with create_plan, or finish and report what failed."
    )


async def test_tools_without_show_plan_carry_confirmations_and_warnings_only() -> None:
    plan = DependencyPlan()
    tools = tools_for(plan, show_plan=False)
    result = await call(tools, "create_plan", steps=STEPS)
    assert result.content == "Plan saved with 3 steps. Ready to start: gather-data."
    result = await call(tools, "start_step", name="report")
    assert result.content == (
        "Step 'report' is in progress.\n"
        "Warning: unsatisfied dependencies, proceeding anyway: validate"
    )
    result = await call(tools, "mark_step_done", name="gather-data", result="12 rows")
    assert result.content == "Step 'gather-data' is completed. Ready to start: validate."
    result = await call(tools, "mark_step_done", name="gather-data", result="again")
    assert result.content == (
        "Step 'gather-data' is completed. Ready to start: validate.\n"
        "Warning: step 'gather-data' was already completed; nothing changed, its first result "
        "stands"
    )
    assert PLAN_HEADER not in result.content
    await call(tools, "mark_step_done", name="validate", result="ok")
    result = await call(tools, "mark_step_done", name="report", result="sent")
    assert result.content == "Step 'report' is completed. Every step is completed."
    ready = await call(tools, "get_ready_steps")
    assert ready.content == "No step is ready to start. Every step is completed."


async def test_get_ready_steps_explains_why_nothing_is_ready() -> None:
    tools = tools_for(DependencyPlan())
    assert (await call(tools, "get_ready_steps")).content == (
        "There is no plan yet: call create_plan with the steps first."
    )
    await call(tools, "create_plan", steps=STEPS[:2])
    await call(tools, "start_step", name="gather-data")
    assert (await call(tools, "get_ready_steps")).content == (
        "No step is ready to start. Complete the steps in progress first: gather-data."
    )


async def test_replanning_through_the_tool_reports_dropped_steps() -> None:
    plan = DependencyPlan()
    tools = tools_for(plan, show_plan=False)
    await call(tools, "create_plan", steps=STEPS)
    await call(tools, "mark_step_done", name="gather-data", result="12 rows")
    result = await call(
        tools,
        "create_plan",
        steps=[{"name": "fetch", "description": "Fetch"}, {"name": "sum", "description": "Sum"}],
    )
    assert result.content == (
        "Plan saved with 2 steps. Ready to start: fetch, sum.\n"
        "Warning: completed steps dropped by the new plan, with their results: gather-data"
    )


async def test_rule_violations_through_run_tool_are_error_results() -> None:
    plan = DependencyPlan(strict_dependencies=True)
    tools = tools_for(plan)
    cyclic = [
        {"name": "a", "description": "A", "depends_on": ["b"]},
        {"name": "b", "description": "B", "depends_on": ["a"]},
    ]
    result = await call(tools, "create_plan", steps=cyclic)
    assert result.status == "error"
    assert result.content.startswith("The dependencies form a cycle: a -> b -> a")
    assert plan.items() == ()
    await call(tools, "create_plan", steps=STEPS)
    result = await call(tools, "start_step", name="validate")
    assert result.status == "error"
    assert result.content == (
        "Step 'validate' cannot be started yet: its dependencies are not completed: "
        "gather-data. Complete them first (get_ready_steps lists the steps that can start now)."
    )
    assert statuses(plan)["validate"] == "pending"


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("create_plan", {}, "missing required argument steps"),
        ("create_plan", {"steps": "a, b"}, 'steps must be an array (got "a, b")'),
        (
            "create_plan",
            {"steps": [{"name": "a", "description": "A"}, {"name": "b"}]},
            "missing required argument steps[1].description",
        ),
        (
            "create_plan",
            {"steps": [{"name": "a", "description": "A", "deps": ["b"]}]},
            "unknown argument steps[0].deps (allowed: name, description, depends_on)",
        ),
        (
            "create_plan",
            {"steps": [{"name": "a", "description": "A", "depends_on": "b"}]},
            'steps[0].depends_on must be an array (got "b")',
        ),
        ("start_step", {}, "missing required argument name"),
        ("start_step", {"name": 1}, "name must be a string (got 1)"),
        ("mark_step_done", {"name": "keep"}, "missing required argument result"),
        ("mark_step_failed", {"name": "keep"}, "missing required argument reason"),
        ("get_plan", {"verbose": True}, "unknown argument verbose (allowed: none)"),
    ],
)
async def test_bad_arguments_are_error_results(
    name: str, arguments: dict[str, Any], message: str
) -> None:
    plan = planned(step("keep"), step("other"))
    before = plan.to_dict()
    result = await call_raw(tools_for(plan), name, json.dumps(arguments))
    assert result.status == "error"
    assert result.content == (
        f"Invalid arguments for {name!r}: {message}. Fix the arguments and call the tool again."
    )
    assert plan.to_dict() == before


async def test_malformed_json_is_an_error_result() -> None:
    result = await call_raw(tools_for(DependencyPlan()), "create_plan", '{"steps": [')
    assert result.status == "error"
    assert result.arguments is None
    assert result.content.startswith("The arguments of 'create_plan' are not valid JSON")
