"""The dependency-plan dialect ("Flux" style): named steps with dependencies and results.

Tools: `create_plan`, `start_step`, `mark_step_done`, `mark_step_failed`, `get_plan`,
`get_ready_steps`. A step goes pending → in_progress → completed | failed. A pending step with a
failed step among its dependencies (directly or further up) is shown as blocked; that status is
derived in `items()`, never stored. Replanning is `create_plan` again: completed steps whose
names survive keep their status and result. Every rule violation is a `ToolRetry` whose message
says how to fix the call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from plangate.harness._tools import ToolRetry
from plangate.harness.plans._dependency_checks import (
    check_saved,
    checked,
    one_line,
    shaped,
    short,
)
from plangate.harness.plans._plan import PlanItem, ready_items

DEFAULT_MAX_PLAN_STEPS = 20
"""At most this many steps in a plan, unless the variant says otherwise."""


UNMET_WARNING = "unsatisfied dependencies, proceeding anyway"
"""Start of the warning when a step starts or completes before its dependencies (not strict)."""

NO_PLAN = "There is no plan yet: call create_plan with the steps first."


class DependencyPlan:
    """The mutable dependency plan of a session."""

    def __init__(
        self, *, max_plan_steps: int = DEFAULT_MAX_PLAN_STEPS, strict_dependencies: bool = False
    ) -> None:
        if max_plan_steps < 2:
            raise ValueError(f"max_plan_steps must be at least 2, got {max_plan_steps!r}")
        self.max_plan_steps = max_plan_steps
        """The most steps a plan may have."""
        self.strict_dependencies = strict_dependencies
        """Refuse to start or complete a step before its dependencies are completed."""
        self._steps: tuple[PlanItem, ...] = ()
        """The steps with their stored statuses (never `blocked`)."""
        self._blocking: dict[str, list[str]] = {}
        """Per step, the nearest failed steps above it."""
        self._view: tuple[PlanItem, ...] = ()
        """`_steps` as shown: pending steps below a failed one are blocked."""

    def items(self) -> tuple[PlanItem, ...]:
        """The steps in plan order: id = name, text = description; blocked steps derived."""
        return self._view

    def ready(self) -> list[PlanItem]:
        """Pending, unblocked steps whose dependencies are all completed, in plan order."""
        return ready_items(self._view)

    def create(self, steps: Sequence[Mapping[str, Any]]) -> list[str]:
        """Make the plan, or replace it (replanning); returns warnings for the model.

        Completed steps whose names survive keep their status and result; every other step
        starts pending.

        Args:
            steps: `StepInput`s; plain mappings (a reviewer's edits) have their shape checked.
        """
        new = checked(shaped(steps), self.max_plan_steps)
        merged, warnings = _merged(self._steps, new)
        self._set(merged)
        return warnings

    def start(self, name: str) -> list[str]:
        """Mark a step in progress; returns warnings (unfinished dependencies, a repeat)."""
        step = self._find(name)
        if step.status == "in_progress":
            return [f"step {name!r} was already in progress; nothing changed"]
        if step.status == "completed":
            raise ToolRetry(
                f"Step {name!r} is already completed; start a step that is ready instead "
                "(get_ready_steps lists them)."
            )
        self._check_open(step, "started")
        warnings = self._unmet(step, "started")
        self._put(dataclasses.replace(step, status="in_progress"))
        return warnings

    def done(self, name: str, result: str) -> str | None:
        """Mark a pending or in-progress step completed with its result.

        Returns:
            A note for the model (why nothing changed, or the unfinished dependencies it was
            completed without), or None.
        """
        step = self._find(name)
        if step.status == "completed":
            return f"step {name!r} was already completed; nothing changed, its first result stands"
        self._check_open(step, "completed")
        if not result.strip():
            raise ToolRetry(
                f"mark_step_done needs a result: say what step {name!r} produced "
                "(the steps that depend on it start from it)."
            )
        warnings = self._unmet(step, "completed")
        self._put(dataclasses.replace(step, status="completed", result=result.strip()))
        return warnings[0] if warnings else None

    def failed(self, name: str, reason: str) -> list[str]:
        """Mark a pending or in-progress step failed; returns notes on the steps it blocks.

        Dependents that went ahead anyway (in progress or completed without this step) go back
        to pending, so they show as blocked: their work rested on a step that failed.
        """
        step = self._find(name)
        if step.status == "failed":
            return [f"step {name!r} had already failed; nothing changed"]
        if step.status == "completed":
            raise ToolRetry(
                f"Step {name!r} is already completed and cannot fail. If its result is wrong, "
                "replan with create_plan and add a step with a new name to redo it."
            )
        if not reason.strip():
            raise ToolRetry(f"mark_step_failed needs a reason: say what went wrong in {name!r}.")
        failure = dataclasses.replace(step, status="failed", reason=one_line(reason))
        steps, undone = _with_failure(self._steps, failure)
        self._set(steps)
        blocked = [
            s.id for s in self._view if s.status == "blocked" and name in self._blocking[s.id]
        ]
        return _failure_notes(name, undone, blocked)

    def to_dict(self) -> dict[str, Any]:
        """The plan and its options as JSON-able data, for saved sessions."""
        return {
            "max_plan_steps": self.max_plan_steps,
            "strict_dependencies": self.strict_dependencies,
            "steps": [step.as_dict() for step in self._steps],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DependencyPlan:
        """The inverse of `to_dict`."""
        plan = cls(
            max_plan_steps=int(data.get("max_plan_steps", DEFAULT_MAX_PLAN_STEPS)),
            strict_dependencies=bool(data.get("strict_dependencies", False)),
        )
        plan.restore(data)
        return plan

    def restore(self, data: Mapping[str, Any]) -> None:
        """Load the steps that `to_dict` saved (the options stay as constructed)."""
        steps = tuple(PlanItem.from_dict(step) for step in data.get("steps", ()))
        check_saved(steps)
        self._set(steps)

    def _set(self, steps: tuple[PlanItem, ...]) -> None:
        self._steps = steps
        self._blocking = _failed_above(steps)
        self._view = tuple(_shown(step, self._blocking[step.id]) for step in steps)

    def _put(self, step: PlanItem) -> None:
        self._set(tuple(step if s.id == step.id else s for s in self._steps))

    def _find(self, name: str) -> PlanItem:
        if not self._steps:
            raise ToolRetry(NO_PLAN)
        found = next((s for s in self._steps if s.id == name), None)
        if found is None:
            names = ", ".join(s.id for s in self._steps)
            raise ToolRetry(
                f"There is no step {name!r} in the plan; the steps are: {names}. "
                "Call get_plan to see them."
            )
        return found

    def _check_open(self, step: PlanItem, verb: str) -> None:
        """Refuse a failed step, and a step that depends on a failed one."""
        if step.status == "failed":
            raise ToolRetry(
                f"Step {step.id!r} has failed and cannot be {verb}. Replan with create_plan: "
                f"keep a step named {step.id!r} to try it again, or plan around it."
            )
        failed = self._blocking[step.id]
        if failed:
            noun = "step" if len(failed) == 1 else "steps"
            named = ", ".join(map(repr, failed))
            raise ToolRetry(
                f"Step {step.id!r} cannot be {verb}: it depends on failed {noun} {named}. Mark "
                f"it failed with mark_step_failed, or replan with create_plan to route around "
                f"{named}."
            )

    def _unmet(self, step: PlanItem, verb: str) -> list[str]:
        """The warning for unfinished dependencies, or (strict) the refusal."""
        completed = {s.id for s in self._steps if s.status == "completed"}
        missing = [d for d in step.depends_on if d not in completed]
        if not missing:
            return []
        listed = ", ".join(missing)
        if self.strict_dependencies:
            raise ToolRetry(
                f"Step {step.id!r} cannot be {verb} yet: its dependencies are not completed: "
                f"{listed}. Complete them first (get_ready_steps lists the steps that can "
                "start now)."
            )
        return [f"{UNMET_WARNING}: {listed}"]


# --- checking a new plan -------------------------------------------------------------------


# --- replanning and failing ----------------------------------------------------------------


def _merged(
    old: tuple[PlanItem, ...], new: tuple[PlanItem, ...]
) -> tuple[tuple[PlanItem, ...], list[str]]:
    """The new steps with the surviving completed ones kept, and warnings about the rest."""
    completed = {step.id: step for step in old if step.status == "completed"}
    merged = tuple(
        dataclasses.replace(step, status="completed", result=completed[step.id].result)
        if step.id in completed
        else step
        for step in new
    )
    kept = {step.id for step in new}
    dropped = [s.id for s in old if s.status == "completed" and s.id not in kept]
    restarted = [s.id for s in old if s.status == "in_progress" and s.id in kept]
    retried = [s.id for s in old if s.status == "failed" and s.id in kept]
    warnings = []
    if dropped:
        warnings.append(
            f"completed steps dropped by the new plan, with their results: {', '.join(dropped)}"
        )
    if restarted:
        warnings.append(
            f"steps that were in progress are pending again, start them with "
            f"start_step: {', '.join(restarted)}"
        )
    if retried:
        warnings.append(f"failed steps are pending again for a new try: {', '.join(retried)}")
    return merged, warnings


def _with_failure(
    steps: tuple[PlanItem, ...], failure: PlanItem
) -> tuple[tuple[PlanItem, ...], list[PlanItem]]:
    """Record the failure; dependents that went ahead without it go back to pending."""
    below = _dependents(steps, failure.id)
    undone = [s for s in steps if s.id in below and s.status in ("in_progress", "completed")]
    undone_ids = {s.id for s in undone}
    updated = tuple(
        failure
        if s.id == failure.id
        else dataclasses.replace(s, status="pending", result=None)
        if s.id in undone_ids
        else s
        for s in steps
    )
    return updated, undone


def _dependents(steps: Sequence[PlanItem], name: str) -> set[str]:
    """The steps that depend on `name`, directly or further down."""
    found: set[str] = set()
    frontier = {name}
    while frontier:
        frontier = {s.id for s in steps if frontier & set(s.depends_on)} - found
        found |= frontier
    return found


def _failure_notes(name: str, undone: Sequence[PlanItem], blocked: Sequence[str]) -> list[str]:
    notes = []
    if undone:
        listed = ", ".join(_was(step) for step in undone)
        notes.append(f"these steps had gone ahead without {name!r} and are pending again: {listed}")
    if blocked:
        notes.append(
            f"blocked by this failure: {', '.join(blocked)}; mark them failed with "
            f"mark_step_failed, or replan with create_plan to route around {name!r}"
        )
    return notes


def _was(step: PlanItem) -> str:
    if step.status == "completed":
        return f"{step.id} (was completed, result discarded: {short(step.result or '', 60)!r})"
    return f"{step.id} (was in progress)"


# --- the derived view ----------------------------------------------------------------------


def _failed_above(steps: Sequence[PlanItem]) -> dict[str, list[str]]:
    """For each step, the nearest failed steps it depends on (directly or further up)."""
    status = {step.id: step.status for step in steps}
    depends_on = {step.id: step.depends_on for step in steps}
    position = {step.id: index for index, step in enumerate(steps)}
    memo: dict[str, list[str]] = {}

    def visit(name: str) -> list[str]:
        if name not in memo:
            found: set[str] = set()
            for dependency in depends_on[name]:
                found.update([dependency] if status[dependency] == "failed" else visit(dependency))
            memo[name] = sorted(found, key=position.__getitem__)
        return memo[name]

    return {step.id: visit(step.id) for step in steps}


def _shown(step: PlanItem, failed: Sequence[str]) -> PlanItem:
    """The step as the model sees it: a pending step below a failed one is blocked."""
    if step.status != "pending" or not failed:
        return step
    noun = "step" if len(failed) == 1 else "steps"
    reason = f"depends on failed {noun} {', '.join(failed)}"
    return dataclasses.replace(step, status="blocked", reason=reason)


# --- text helpers --------------------------------------------------------------------------


# --- the tools -----------------------------------------------------------------------------
