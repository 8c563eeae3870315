"""The dependency-plan dialect's state and rules: creating a plan, the step lifecycle,
dependencies and failures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from plangate.harness import PlanItem, ToolRetry
from plangate.harness.plans import DependencyPlan, render_plan
from plangate.harness.plans._dependency_checks import StepInput


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
