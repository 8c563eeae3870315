"""The dependency plan's tools: what the model calls to plan, start, complete and fail steps.

Each tool's result says where the plan stands and what to do next (the progress line, the ready
steps and the results of their dependencies), so the model needs no extra call to find out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence

from plangate.harness._tools import Tool, tool
from plangate.harness.plans._dependency import NO_PLAN, DependencyPlan
from plangate.harness.plans._dependency_checks import StepInput, one_line
from plangate.harness.plans._plan import PlanItem, render_plan

DEPENDENCY_TOOLS = (
    "create_plan",
    "start_step",
    "mark_step_done",
    "mark_step_failed",
    "get_plan",
    "get_ready_steps",
)
"""The dependency dialect's tools (`dependency_tools` makes them)."""


def dependency_tools(plan: DependencyPlan, *, show_plan: bool) -> list[Tool]:
    """The dependency-plan tools over `plan`; with `show_plan`, results carry the plan."""

    def reply(message: str, warnings: Iterable[str] = ()) -> str:
        lines = [message, *(f"Warning: {warning}" for warning in warnings)]
        if show_plan:
            lines.append(render_plan(plan.items()))
        return "\n".join(lines)

    @tool
    def create_plan(steps: list[StepInput]) -> str:
        """Create the plan, or replace it (replan): named steps and the steps each depends on.

        Rules: 2 to 20 steps; names are unique, lowercase letters, digits, '-' and '_', at
        most 64 characters; `depends_on` names steps of the same plan that must be completed
        first, without cycles. Replanning keeps the completed steps whose names you keep,
        with their results; every other step starts pending (keep a failed step's name to try
        it again).

        Args:
            steps: The steps in order; each has `name` (e.g. "gather-data"), `description`
                (what the step does) and optionally `depends_on` (names of the steps whose
                results it needs).
        """
        warnings = plan.create(steps)
        return reply(_joined(f"Plan saved with {len(steps)} steps.", _progress(plan)), warnings)

    @tool
    def start_step(name: str) -> str:
        """Start a step: mark it in progress before working on it.

        Start a step when the steps it depends on are completed (get_ready_steps lists those
        steps, with the results they start from). A step that depends on a failed step cannot
        start; a completed or failed step cannot start again.

        Args:
            name: The step's name.
        """
        warnings = plan.start(name)
        return reply(f"Step {name!r} is in progress.", warnings)

    @tool
    def mark_step_done(name: str, result: str) -> str:
        """Mark a step completed, with its result, as soon as its work is done.

        Works on a pending or in-progress step; marking a completed step again changes nothing.
        A failed step cannot be completed: replan with create_plan. The steps that depend on
        this one start from its result, so make it specific (numbers, names, findings).

        Args:
            name: The step's name.
            result: What the step produced.
        """
        note = plan.done(name, result)
        message = _joined(f"Step {name!r} is completed.", _progress(plan))
        return reply(message, [note] if note else [])

    @tool
    def mark_step_failed(name: str, reason: str) -> str:
        """Mark a step failed, with the reason, when it cannot be done.

        The steps that depend on it are blocked: mark them failed too, or replan with
        create_plan to route around it (keep its name to try it again). A completed step
        cannot fail.

        Args:
            name: The step's name.
            reason: What went wrong.
        """
        notes = plan.failed(name, reason)
        return reply(_joined(f"Step {name!r} is marked failed.", _progress(plan)), notes)

    @tool
    def get_plan() -> str:
        """Show the plan: every step's status, dependencies and result."""
        return _full_plan(plan.items())

    @tool
    def get_ready_steps() -> str:
        """List the steps that can start now, with the results of the steps they depend on."""
        return _ready_steps(plan)

    return [
        _with_limit(create_plan, plan.max_plan_steps),
        start_step,
        mark_step_done,
        mark_step_failed,
        get_plan,
        get_ready_steps,
    ]


def _with_limit(create_plan: Tool, limit: int) -> Tool:
    description = create_plan.description.replace("2 to 20 steps", f"2 to {limit} steps")
    return dataclasses.replace(create_plan, description=description)


def _joined(*sentences: str) -> str:
    return " ".join(sentence for sentence in sentences if sentence)


def _progress(plan: DependencyPlan) -> str:
    """What can happen next: the ready steps, or why there are none."""
    ready = plan.ready()
    if ready:
        return f"Ready to start: {', '.join(step.id for step in ready)}."
    statuses = {step.status for step in plan.items()}
    if statuses == {"completed"}:
        return "Every step is completed."
    if statuses <= {"completed", "failed", "blocked"}:
        return (
            "No step can start: the rest failed or is blocked. Replan with create_plan, or "
            "finish and report what failed."
        )
    return ""


def _full_plan(items: Sequence[PlanItem]) -> str:
    details = [f"- {item.id}: {'; '.join(parts)}" for item in items if (parts := _details(item))]
    return "\n".join([render_plan(items), *(["Steps:", *details] if details else [])])


def _details(item: PlanItem) -> list[str]:
    parts = []
    if item.depends_on:
        parts.append(f"depends on {', '.join(item.depends_on)}")
    if item.result is not None:
        parts.append(f"result: {one_line(item.result)}")
    return parts


def _ready_steps(plan: DependencyPlan) -> str:
    items = plan.items()
    if not items:
        return NO_PLAN
    ready = plan.ready()
    if not ready:
        return _joined("No step is ready to start.", _progress(plan) or _waiting(items))
    results = {item.id: item.result for item in items}
    lines = ["Ready to start (call start_step with one of them):"]
    for step in ready:
        lines.append(f"- {step.id}: {step.text}")
        lines += [_indented(f"{d} result: {results[d]}") for d in step.depends_on]
    return "\n".join(lines)


def _waiting(items: Sequence[PlanItem]) -> str:
    active = [item.id for item in items if item.status == "in_progress"]
    return f"Complete the steps in progress first: {', '.join(active)}." if active else ""


def _indented(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
