"""The dependency-plan dialect: rules, tools, persistence, and invariants under arbitrary calls."""

from __future__ import annotations

import dataclasses
import graphlib
import json
import re
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, TypeVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from plangate.harness import PlanItem, Tool, ToolCall, ToolRetry
from plangate.harness._tools import ToolResult, run_tool
from plangate.harness.plans import (
    PLAN_HEADER,
    DependencyPlan,
    dependency_tools,
    render_plan,
    status_line,
)
from plangate.harness.plans._dependency_checks import StepInput
from plangate.harness.plans._plan import ready_items

T = TypeVar("T")


def step(name: str, *depends_on: str, description: str | None = None) -> StepInput:
    data: StepInput = {"name": name, "description": description or f"Do {name}"}
    if depends_on:
        data["depends_on"] = list(depends_on)
    return data


def planned(*steps: StepInput, strict: bool = False, max_plan_steps: int = 20) -> DependencyPlan:
    plan = DependencyPlan(strict_dependencies=strict, max_plan_steps=max_plan_steps)
    assert plan.create(list(steps)) == []
    return plan


def statuses(plan: DependencyPlan) -> dict[str, str]:
    return {item.id: item.status for item in plan.items()}


def rejected(plan: DependencyPlan, operation: Callable[[], object]) -> str:
    """Run an operation that must be refused; check that it changed nothing."""
    before, saved = plan.items(), plan.to_dict()
    with pytest.raises(ToolRetry) as raised:
        operation()
    assert plan.items() == before
    assert plan.to_dict() == saved
    return str(raised.value)


def pipeline(*, strict: bool = False) -> DependencyPlan:
    """gather -> clean -> report, and an independent side step."""
    return planned(
        step("gather"),
        step("clean", "gather"),
        step("report", "clean"),
        step("side"),
        strict=strict,
    )


# --- create --------------------------------------------------------------------------------


def test_create_makes_pending_items_named_by_step_with_dependencies() -> None:
    plan = DependencyPlan()
    warnings = plan.create(
        [
            {"name": "gather-data", "description": "  Gather the\nrows "},
            {"name": "validate_2", "description": "Validate", "depends_on": ["gather-data"] * 2},
        ]
    )
    assert warnings == []
    assert plan.items() == (
        PlanItem(id="gather-data", text="Gather the rows", status="pending"),
        PlanItem(id="validate_2", text="Validate", status="pending", depends_on=("gather-data",)),
    )
    assert plan.ready() == [plan.items()[0]]


@pytest.mark.parametrize("count", [0, 1])
def test_create_needs_at_least_two_steps(count: int) -> None:
    plan = DependencyPlan()
    message = rejected(plan, lambda: plan.create([step(f"s{i}") for i in range(count)]))
    assert message == (
        f"A plan needs at least 2 steps, got {count}. For a single task, do it directly "
        "without a plan; otherwise split the work into steps."
    )


def test_create_allows_at_most_max_plan_steps() -> None:
    plan = DependencyPlan(max_plan_steps=3)
    assert plan.create([step("a"), step("b"), step("c")]) == []
    message = rejected(plan, lambda: plan.create([step(n) for n in "abcd"]))
    assert message == (
        "A plan has at most 3 steps, got 4. Merge related steps, or plan the first stage now "
        "and replan when it is done."
    )
    default = DependencyPlan()
    assert default.max_plan_steps == 20
    default.create([step(f"s{i}") for i in range(20)])
    assert "at most 20 steps, got 21" in rejected(
        default, lambda: default.create([step(f"s{i}") for i in range(21)])
    )


def test_max_plan_steps_below_two_is_a_configuration_bug() -> None:
    with pytest.raises(ValueError, match="max_plan_steps must be at least 2, got 1"):
        DependencyPlan(max_plan_steps=1)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        (
            "Gather Data",
            "Step name 'Gather Data' is not valid: use only lowercase letters, digits, '-' and "
            "'_' (for example 'gather-data').",
        ),
        (
            "load.csv",
            "Step name 'load.csv' is not valid: use only lowercase letters, digits, '-' and '_' "
            "(for example 'load-csv').",
        ),
        (
            "ÄÖ",
            "Step name 'ÄÖ' is not valid: use only lowercase letters, digits, '-' and '_'.",
        ),
        ("a\n", "Step name 'a\\n' is not valid"),
        ("", "Step 1 has an empty name; name it, for example 'gather-data'."),
        ("x" * 65, "Step name 'xxxxxxxxxxxxxxxxxxx…' is 65 characters long; use at most 64."),
    ],
)
def test_create_rejects_bad_names_and_suggests_one(name: str, message: str) -> None:
    plan = DependencyPlan()
    assert message in rejected(plan, lambda: plan.create([step(name), step("b")]))


def test_names_of_64_characters_and_every_allowed_character_are_fine() -> None:
    plan = planned(step("x" * 64), step("a-b_c-9"))
    assert [item.id for item in plan.items()] == ["x" * 64, "a-b_c-9"]


def test_create_rejects_duplicate_names() -> None:
    plan = DependencyPlan()
    message = rejected(plan, lambda: plan.create([step("a"), step("b"), step("a")]))
    assert message == "Step name 'a' is used 2 times; give each step its own name."


@pytest.mark.parametrize("description", ["", "  \n "])
def test_create_rejects_an_empty_description(description: str) -> None:
    plan = DependencyPlan()
    bad: StepInput = {"name": "b", "description": description}
    message = rejected(plan, lambda: plan.create([step("a"), bad]))
    assert message == "Step 'b' has an empty description; say what the step does."


def test_create_rejects_an_unknown_dependency_naming_step_and_dependency() -> None:
    plan = DependencyPlan()
    message = rejected(plan, lambda: plan.create([step("a"), step("b", "a", "zeta")]))
    assert message == (
        "Step 'b' depends on 'zeta', which is not a step of this plan; depend only on these "
        "step names: a, b."
    )


def test_create_reports_every_problem_at_once() -> None:
    plan = DependencyPlan()
    message = rejected(
        plan,
        lambda: plan.create(
            [step("Bad"), {"name": "b", "description": " "}, step("c", "nope"), step("c")]
        ),
    )
    assert message == (
        "Step name 'Bad' is not valid: use only lowercase letters, digits, '-' and '_' "
        "(for example 'bad'). Step name 'c' is used 2 times; give each step its own name. "
        "Step 'b' has an empty description; say what the step does. Step 'c' depends on "
        "'nope', which is not a step of this plan; depend only on these step names: Bad, b, "
        "c, c."
    )


@pytest.mark.parametrize(
    ("steps", "cycle"),
    [
        ([step("a", "b"), step("b", "c"), step("c", "a")], "a -> b -> c -> a"),
        ([step("a", "a"), step("b")], "a -> a"),
        ([step("x"), step("a", "x", "b"), step("b", "a")], "a -> b -> a"),
    ],
)
def test_create_rejects_a_cycle_and_names_it(steps: list[StepInput], cycle: str) -> None:
    plan = DependencyPlan()
    assert rejected(plan, lambda: plan.create(steps)) == (
        f"The dependencies form a cycle: {cycle} (each step depends on the next). Remove one "
        "of these dependencies so that every step can start."
    )


@pytest.mark.parametrize(
    "bad",
    [
        {"name": "b"},
        {"name": "b", "description": 3},
        {"name": "b", "description": "d", "depends_on": "a"},
        {"name": "b", "description": "d", "depends_on": [1]},
        {"name": "b", "description": "d", "status": "completed"},
        "b",
    ],
)
def test_create_from_plain_data_checks_the_shape(bad: Any) -> None:
    # Plans edited by a reviewer reach `create` without the tool schema's checks.
    plan = DependencyPlan()
    message = rejected(plan, lambda: plan.create([{"name": "a", "description": "d"}, bad]))
    assert message == (
        "Step 2 must have a `name` and a `description` (strings) and may have `depends_on` "
        f"(a list of step names), nothing else; got {bad!r}."
    )


def test_a_rejected_create_keeps_the_plan_that_was_there() -> None:
    plan = pipeline()
    plan.done("gather", "12 rows")
    rejected(plan, lambda: plan.create([step("only")]))
    rejected(plan, lambda: plan.create([step("a", "b"), step("b", "a")]))
    assert statuses(plan)["gather"] == "completed"


# --- lifecycle -----------------------------------------------------------------------------


def test_lifecycle_pending_in_progress_completed() -> None:
    plan = pipeline()
    assert plan.start("gather") == []
    assert statuses(plan)["gather"] == "in_progress"
    assert plan.done("gather", "  12 rows\nof sales ") is None
    assert plan.items()[0] == PlanItem(
        id="gather", text="Do gather", status="completed", result="12 rows\nof sales"
    )


def test_done_accepts_a_pending_step_without_start() -> None:
    plan = pipeline()
    assert plan.done("side", "ok") is None
    assert statuses(plan)["side"] == "completed"


def test_starting_a_step_twice_is_a_no_op_note() -> None:
    plan = pipeline()
    plan.start("gather")
    before = plan.items()
    assert plan.start("gather") == ["step 'gather' was already in progress; nothing changed"]
    assert plan.items() == before


def test_several_steps_may_be_in_progress() -> None:
    plan = pipeline()
    plan.start("gather")
    plan.start("side")
    assert [i.id for i in plan.items() if i.status == "in_progress"] == ["gather", "side"]


def test_completing_a_completed_step_is_a_no_op_that_keeps_the_first_result() -> None:
    plan = pipeline()
    plan.done("gather", "12 rows")
    before = plan.items()
    assert plan.done("gather", "13 rows") == (
        "step 'gather' was already completed; nothing changed, its first result stands"
    )
    assert plan.done("gather", "") is not None
    assert plan.items() == before


def test_starting_a_completed_step_is_refused() -> None:
    plan = pipeline()
    plan.done("gather", "12 rows")
    assert rejected(plan, lambda: plan.start("gather")) == (
        "Step 'gather' is already completed; start a step that is ready instead "
        "(get_ready_steps lists them)."
    )


@pytest.mark.parametrize("result", ["", " \n "])
def test_done_needs_a_result(result: str) -> None:
    plan = pipeline()
    assert rejected(plan, lambda: plan.done("gather", result)) == (
        "mark_step_done needs a result: say what step 'gather' produced (the steps that "
        "depend on it start from it)."
    )


def test_completing_a_failed_step_says_to_replan() -> None:
    plan = pipeline()
    plan.failed("gather", "source down")
    assert rejected(plan, lambda: plan.done("gather", "12 rows")) == (
        "Step 'gather' has failed and cannot be completed. Replan with create_plan: keep a "
        "step named 'gather' to try it again, or plan around it."
    )
    assert "has failed and cannot be started. Replan with create_plan" in rejected(
        plan, lambda: plan.start("gather")
    )


def test_failing_records_the_one_line_reason() -> None:
    plan = pipeline()
    plan.start("side")
    assert plan.failed("side", " no\naccess ") == []
    assert plan.items()[3] == PlanItem(
        id="side", text="Do side", status="failed", reason="no access"
    )
    assert plan.failed("side", "again") == ["step 'side' had already failed; nothing changed"]
    assert plan.items()[3].reason == "no access"


def test_failing_needs_a_reason_and_a_completed_step_cannot_fail() -> None:
    plan = pipeline()
    assert rejected(plan, lambda: plan.failed("gather", "  ")) == (
        "mark_step_failed needs a reason: say what went wrong in 'gather'."
    )
    plan.done("gather", "12 rows")
    assert rejected(plan, lambda: plan.failed("gather", "wrong rows")) == (
        "Step 'gather' is already completed and cannot fail. If its result is wrong, replan "
        "with create_plan and add a step with a new name to redo it."
    )


@pytest.mark.parametrize("operation", ["start", "done", "failed"])
def test_unknown_step_and_missing_plan(operation: str) -> None:
    def call(plan: DependencyPlan) -> Callable[[], object]:
        if operation == "start":
            return lambda: plan.start("nope")
        return lambda: getattr(plan, operation)("nope", "text")

    empty = DependencyPlan()
    assert rejected(empty, call(empty)) == (
        "There is no plan yet: call create_plan with the steps first."
    )
    plan = pipeline()
    assert rejected(plan, call(plan)) == (
        "There is no step 'nope' in the plan; the steps are: gather, clean, report, side. "
        "Call get_plan to see them."
    )


# --- dependencies --------------------------------------------------------------------------


def test_unfinished_dependencies_warn_and_proceed_when_not_strict() -> None:
    plan = planned(step("a"), step("b"), step("c", "a", "b"))
    plan.done("a", "ok")
    assert plan.start("c") == ["unsatisfied dependencies, proceeding anyway: b"]
    plan = planned(step("a"), step("b"), step("c", "a", "b"))
    assert plan.start("c") == ["unsatisfied dependencies, proceeding anyway: a, b"]
    assert statuses(plan)["c"] == "in_progress"
    assert plan.done("c", "guessed") == "unsatisfied dependencies, proceeding anyway: a, b"
    assert statuses(plan)["c"] == "completed"


@pytest.mark.parametrize(("operation", "verb"), [("start", "started"), ("done", "completed")])
def test_strict_dependencies_refuse_and_leave_the_step_pending(operation: str, verb: str) -> None:
    plan = planned(step("a"), step("b"), step("c", "a", "b"), strict=True)
    plan.done("b", "ok")
    act: Callable[[], object] = (
        (lambda: plan.start("c")) if operation == "start" else (lambda: plan.done("c", "r"))
    )
    assert rejected(plan, act) == (
        f"Step 'c' cannot be {verb} yet: its dependencies are not completed: a. Complete them "
        "first (get_ready_steps lists the steps that can start now)."
    )
    assert statuses(plan)["c"] == "pending"
    plan.done("a", "ok")
    act()
    assert statuses(plan)["c"] == ("in_progress" if operation == "start" else "completed")


def test_a_failed_step_blocks_its_dependents_further_down_too() -> None:
    plan = pipeline()
    plan.failed("gather", "source down")
    assert plan.items() == (
        PlanItem(id="gather", text="Do gather", status="failed", reason="source down"),
        PlanItem(
            id="clean",
            text="Do clean",
            status="blocked",
            reason="depends on failed step gather",
            depends_on=("gather",),
        ),
        PlanItem(
            id="report",
            text="Do report",
            status="blocked",
            reason="depends on failed step gather",
            depends_on=("clean",),
        ),
        PlanItem(id="side", text="Do side", status="pending"),
    )
    assert plan.ready() == [plan.items()[3]]
    assert render_plan(plan.items()).splitlines()[2] == (
        "[!] clean. Do clean (blocked: depends on failed step gather)"
    )


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize(("operation", "verb"), [("start", "started"), ("done", "completed")])
def test_a_dependent_of_a_failed_step_cannot_start_or_complete(
    operation: str, verb: str, strict: bool
) -> None:
    plan = pipeline(strict=strict)
    plan.failed("gather", "source down")
    act: Callable[[], object] = (
        (lambda: plan.start("report"))
        if operation == "start"
        else (lambda: plan.done("report", "r"))
    )
    assert rejected(plan, act) == (
        f"Step 'report' cannot be {verb}: it depends on failed step 'gather'. Mark it failed "
        "with mark_step_failed, or replan with create_plan to route around 'gather'."
    )


def test_a_blocked_step_can_be_marked_failed() -> None:
    plan = pipeline()
    plan.failed("gather", "source down")
    plan.failed("clean", "no input")
    items = {item.id: item for item in plan.items()}
    assert items["clean"].status == "failed"
    assert items["report"].reason == "depends on failed step clean"


def test_blocked_reason_names_every_nearest_failed_step() -> None:
    plan = planned(step("a"), step("b"), step("c", "a", "b"))
    plan.failed("b", "x")
    plan.failed("a", "y")
    assert plan.items()[2].reason == "depends on failed steps a, b"
    assert "it depends on failed steps 'a', 'b'. Mark it failed" in rejected(
        plan, lambda: plan.start("c")
    )


def test_failing_says_which_steps_it_blocks() -> None:
    plan = pipeline()
    assert plan.failed("gather", "source down") == [
        "blocked by this failure: clean, report; mark them failed with mark_step_failed, or "
        "replan with create_plan to route around 'gather'"
    ]


def test_dependents_that_went_ahead_are_pending_again_after_the_failure() -> None:
    plan = pipeline()
    plan.done("clean", "cleaned nothing")  # not strict: proceeds without gather
    plan.start("report")
    notes = plan.failed("gather", "source down")
    assert notes[0] == (
        "these steps had gone ahead without 'gather' and are pending again: clean (was "
        "completed, result discarded: 'cleaned nothing'), report (was in progress)"
    )
    assert [(i.status, i.result) for i in plan.items()[1:3]] == [("blocked", None)] * 2


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


# --- persistence ---------------------------------------------------------------------------


def test_to_dict_and_from_dict_round_trip_exactly() -> None:
    plan = planned(step("a"), step("b", "a"), step("c"), step("d"), step("e", "d"), strict=True)
    plan.done("a", "line one\nline two")
    plan.start("b")
    plan.failed("d", "gone")
    saved = plan.to_dict()
    assert saved == {
        "max_plan_steps": 20,
        "strict_dependencies": True,
        "steps": [
            {"id": "a", "text": "Do a", "status": "completed", "result": "line one\nline two"},
            {"id": "b", "text": "Do b", "status": "in_progress", "depends_on": ["a"]},
            {"id": "c", "text": "Do c", "status": "pending"},
            {"id": "d", "text": "Do d", "status": "failed", "reason": "gone"},
            {"id": "e", "text": "Do e", "status": "pending", "depends_on": ["d"]},
        ],
    }
    restored = DependencyPlan.from_dict(json.loads(json.dumps(saved)))
    assert restored.to_dict() == saved
    assert restored.items() == plan.items()
    assert restored.items()[4].status == "blocked"
    assert restored.strict_dependencies is True


def test_an_empty_plan_round_trips() -> None:
    plan = DependencyPlan(max_plan_steps=5)
    restored = DependencyPlan.from_dict(plan.to_dict())
    assert restored.items() == ()
    assert restored.max_plan_steps == 5


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ([{"id": "a", "text": "t", "status": "blocked"}], "saved step 'a' has status 'blocked'"),
        (
            [{"id": "a", "text": "t", "status": "pending", "depends_on": ["z"]}],
            "saved step 'a' depends on unknown steps ['z']",
        ),
        (
            [
                {"id": "a", "text": "t", "status": "pending", "depends_on": ["b"]},
                {"id": "b", "text": "t", "status": "pending", "depends_on": ["a"]},
            ],
            "saved plan has a dependency cycle: a -> b -> a",
        ),
    ],
)
def test_from_dict_refuses_a_state_the_plan_cannot_reach(
    steps: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        DependencyPlan.from_dict({"steps": steps})


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


# --- the state machine under arbitrary operations ------------------------------------------

NAMES = ["a", "b", "c", "d", "e"]
BAD_NAMES = ["", "B", "a b", "x" * 65]
NAME_PATTERN = re.compile(r"[a-z0-9_-]{1,64}")
DESCRIPTIONS = st.sampled_from(["", "  ", "Do it", "two\nlines"])
ANY_NAME = st.one_of(st.sampled_from(NAMES), st.sampled_from([*BAD_NAMES, "z"]))
RESULTS = st.sampled_from(["", " ", "12 rows", "ok\nmore "])
REASONS = st.sampled_from(["", "  ", "timeout", "two\nlines"])


@st.composite
def step_inputs(draw: st.DrawFn) -> dict[str, Any]:
    data: dict[str, Any] = {"name": draw(ANY_NAME), "description": draw(DESCRIPTIONS)}
    if draw(st.booleans()):
        data["depends_on"] = draw(st.lists(st.sampled_from([*NAMES, "z"]), max_size=3))
    return data


@st.composite
def plausible_plans(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Mostly valid plans: unique names, dependencies on earlier steps, now and then a cycle."""
    names = draw(st.permutations(NAMES))[: draw(st.integers(2, len(NAMES) - 1))]
    steps: list[dict[str, Any]] = []
    for index, name in enumerate(names):
        earlier = names[:index]
        depends_on = draw(st.lists(st.sampled_from(earlier), max_size=2)) if earlier else []
        steps.append({"name": name, "description": f"Do {name}", "depends_on": depends_on})
    if draw(st.integers(0, 9)) == 0:
        steps[0]["depends_on"] = [names[-1]]
    return steps


def blank(text: str) -> bool:
    return not text.strip()


def one_line(text: str) -> str:
    return " ".join(text.split())


def acyclic(depends_on: dict[str, Sequence[str]]) -> bool:
    try:
        graphlib.TopologicalSorter(depends_on).prepare()
    except graphlib.CycleError:
        return False
    return True


def valid_plan(steps: list[dict[str, Any]], limit: int) -> bool:
    names = [s["name"] for s in steps]
    if not 2 <= len(steps) <= limit or len(set(names)) != len(names):
        return False
    if not all(NAME_PATTERN.fullmatch(name) for name in names):
        return False
    if any(blank(s["description"]) for s in steps):
        return False
    depends_on = {s["name"]: s.get("depends_on", []) for s in steps}
    known = all(d in depends_on for deps in depends_on.values() for d in deps)
    return known and acyclic(depends_on)


def below(items: Sequence[PlanItem], name: str) -> set[str]:
    """The steps that depend on `name`, directly or further down (a reference version)."""
    found: set[str] = set()
    changed = True
    while changed:
        more = {i.id for i in items if set(i.depends_on) & (found | {name})} - found
        changed = bool(more)
        found |= more
    return found


def replaced(items: Sequence[PlanItem], item: PlanItem) -> tuple[PlanItem, ...]:
    return tuple(item if i.id == item.id else i for i in items)


class DependencyMachine(RuleBasedStateMachine):
    strict: ClassVar[bool] = False
    limit: ClassVar[int] = len(NAMES) - 1

    def __init__(self) -> None:
        super().__init__()
        self.plan = DependencyPlan(max_plan_steps=self.limit, strict_dependencies=self.strict)
        self.results: dict[str, str] = {}

    def attempt(self, operation: Callable[[], T]) -> tuple[bool, T | None]:
        """Run an operation; a refusal must say something and change nothing."""
        before, saved = self.plan.items(), self.plan.to_dict()
        try:
            value = operation()
        except ToolRetry as exc:
            assert str(exc)
            assert self.plan.items() == before
            assert self.plan.to_dict() == saved
            return False, None
        return True, value

    def find(self, name: str) -> PlanItem | None:
        return next((i for i in self.plan.items() if i.id == name), None)

    def unmet(self, item: PlanItem) -> list[str]:
        done = {i.id for i in self.plan.items() if i.status == "completed"}
        return [d for d in item.depends_on if d not in done]

    # --- rules ---

    @rule(steps=st.lists(step_inputs(), max_size=6))
    def create(self, steps: list[dict[str, Any]]) -> None:
        before = {i.id: i for i in self.plan.items()}
        ok, _ = self.attempt(lambda: self.plan.create(steps))
        assert ok == valid_plan(steps, self.limit), steps
        if not ok:
            return
        expected = []
        for s in steps:
            kept = before.get(s["name"])
            completed = kept is not None and kept.status == "completed"
            expected.append(
                PlanItem(
                    id=s["name"],
                    text=one_line(s["description"]),
                    status="completed" if completed else "pending",
                    depends_on=tuple(dict.fromkeys(s.get("depends_on", []))),
                    result=kept.result if kept is not None and completed else None,
                )
            )
        assert self.plan.items() == tuple(expected)

    @initialize(steps=st.one_of(st.just([]), plausible_plans(), plausible_plans()))
    def first_plan(self, steps: list[dict[str, Any]]) -> None:
        self.create(steps)

    @rule(steps=plausible_plans())
    def create_plausible(self, steps: list[dict[str, Any]]) -> None:
        self.create(steps)

    @rule(name=ANY_NAME)
    def start(self, name: str) -> None:
        item, before = self.find(name), self.plan.items()
        unmet = self.unmet(item) if item is not None else []
        ok, warnings = self.attempt(lambda: self.plan.start(name))
        if item is None or item.status in ("completed", "failed", "blocked"):
            assert not ok
        elif item.status == "in_progress":
            assert ok and warnings and "already in progress" in warnings[0]
            assert self.plan.items() == before
        elif self.check_transition(ok, before, item, unmet, status="in_progress"):
            assert warnings == self.expected_warnings(unmet)

    @rule(name=ANY_NAME, result=RESULTS)
    def done(self, name: str, result: str) -> None:
        item, before = self.find(name), self.plan.items()
        unmet = self.unmet(item) if item is not None else []
        ok, note = self.attempt(lambda: self.plan.done(name, result))
        if item is None or item.status in ("failed", "blocked"):
            assert not ok
        elif item.status == "completed":
            assert ok and note and "already completed" in note
            assert self.plan.items() == before
        elif blank(result):
            assert not ok
        elif self.check_transition(
            ok, before, item, unmet, status="completed", result=result.strip()
        ):
            assert ([note] if note else []) == self.expected_warnings(unmet)
            self.results[name] = result.strip()

    @rule(name=ANY_NAME, reason=REASONS)
    def failed(self, name: str, reason: str) -> None:
        item = self.find(name)
        before = self.plan.items()
        ok, _ = self.attempt(lambda: self.plan.failed(name, reason))
        if (
            item is None
            or item.status == "completed"
            or (item.status != "failed" and blank(reason))
        ):
            assert not ok
            return
        assert ok
        if item.status == "failed":
            assert self.plan.items() == before
            return
        dependents = below(before, name)
        for old, new in zip(before, self.plan.items(), strict=True):
            if new.id == name:
                assert new == PlanItem(
                    id=name,
                    text=old.text,
                    status="failed",
                    reason=one_line(reason),
                    depends_on=old.depends_on,
                )
            elif new.id in dependents and old.status != "failed":
                assert (new.status, new.result) == ("blocked", None)
            else:
                assert new == old

    @precondition(lambda self: bool(self.plan.items()))
    @rule(data=st.data())
    def work_on_a_step(self, data: st.DataObject) -> None:
        # Names drawn from the whole alphabet often miss the plan; drive real transitions too.
        name = data.draw(st.sampled_from([i.id for i in self.plan.items()]))
        operation = data.draw(st.sampled_from(["start", "start", "done", "done", "failed"]))
        if operation == "start":
            self.start(name)
        elif operation == "done":
            self.done(name, data.draw(RESULTS))
        else:
            self.failed(name, data.draw(REASONS))

    @precondition(
        lambda self: any(i.status in ("pending", "in_progress") for i in self.plan.items())
    )
    @rule(data=st.data())
    def advance(self, data: st.DataObject) -> None:
        # Carry the plan forward as a diligent model would: finish what runs, start what is ready.
        active = [i.id for i in self.plan.items() if i.status == "in_progress"]
        if active:
            self.done(data.draw(st.sampled_from(active)), "12 rows")
        elif ready := [i.id for i in self.plan.ready()]:
            self.start(data.draw(st.sampled_from(ready)))

    @staticmethod
    def expected_warnings(unmet: list[str]) -> list[str]:
        return [f"unsatisfied dependencies, proceeding anyway: {', '.join(unmet)}"] if unmet else []

    def check_transition(
        self,
        ok: bool,
        before: tuple[PlanItem, ...],
        item: PlanItem,
        unmet: list[str],
        **changes: Any,
    ) -> bool:
        """A pending or in-progress step moves on, unless (strict) a dependency is unfinished.

        This is the strict rule "at the time": whether a step may move on is decided by the
        dependencies' statuses before the call.
        """
        if self.strict and unmet:
            assert not ok, (item, unmet)
            return False
        assert ok, item
        assert self.plan.items() == replaced(before, dataclasses.replace(item, **changes))
        return True

    # --- invariants ---

    @invariant()
    def dependencies_exist_and_form_no_cycle(self) -> None:
        items = self.plan.items()
        names = {i.id for i in items}
        assert all(d in names for i in items for d in i.depends_on)
        assert acyclic({i.id: i.depends_on for i in items})

    @invariant()
    def step_count_is_within_bounds(self) -> None:
        assert len(self.plan.items()) == 0 or 2 <= len(self.plan.items()) <= self.limit

    @invariant()
    def completed_steps_keep_their_result(self) -> None:
        for item in self.plan.items():
            if item.status == "completed":
                assert item.result == self.results[item.id]
            else:
                assert item.result is None

    @invariant()
    def nothing_below_a_failed_step_is_active_or_completed(self) -> None:
        items = self.plan.items()
        for failed in (i for i in items if i.status == "failed"):
            assert failed.reason and failed.reason == one_line(failed.reason)
            for item in items:
                if item.id in below(items, failed.id):
                    assert item.status in ("blocked", "failed"), (failed.id, item)

    @invariant()
    def blocked_means_below_a_failed_step(self) -> None:
        items = self.plan.items()
        failed = [i.id for i in items if i.status == "failed"]
        for item in items:
            is_below = any(item.id in below(items, f) for f in failed)
            assert (item.status == "blocked") == (is_below and item.status != "failed")
            if item.status == "blocked":
                assert item.reason and item.reason.startswith("depends on failed step")

    @invariant()
    def strict_steps_in_progress_have_their_dependencies_completed(self) -> None:
        if self.strict:
            for item in self.plan.items():
                if item.status == "in_progress":
                    assert self.unmet(item) == []

    @invariant()
    def ready_steps_are_the_shared_view(self) -> None:
        assert self.plan.ready() == ready_items(self.plan.items())

    @invariant()
    def saved_state_round_trips(self) -> None:
        saved = self.plan.to_dict()
        restored = DependencyPlan.from_dict(json.loads(json.dumps(saved)))
        assert restored.to_dict() == saved
        assert restored.items() == self.plan.items()


class StrictDependencyMachine(DependencyMachine):
    strict: ClassVar[bool] = True


MACHINE_SETTINGS = settings(max_examples=40, stateful_step_count=15, deadline=None)
TestDependencyPlan = DependencyMachine.TestCase
TestDependencyPlan.settings = MACHINE_SETTINGS
TestStrictDependencyPlan = StrictDependencyMachine.TestCase
TestStrictDependencyPlan.settings = MACHINE_SETTINGS
