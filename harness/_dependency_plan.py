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
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from plangate.harness._plan import PlanItem, ready_items, render_plan
from plangate.harness._tools import Tool, ToolRetry, tool

DEFAULT_MAX_PLAN_STEPS = 20
"""At most this many steps in a plan, unless the variant says otherwise."""

MAX_NAME_LENGTH = 64
"""The longest step name."""

UNMET_WARNING = "unsatisfied dependencies, proceeding anyway"
"""Start of the warning when a step starts or completes before its dependencies (not strict)."""

_NAME = re.compile(r"[a-z0-9_-]+")
_STORED = frozenset({"pending", "in_progress", "completed", "failed"})
_NO_PLAN = "There is no plan yet: call create_plan with the steps first."


class StepInput(TypedDict):
    """One step as the model writes it."""

    name: str
    description: str
    depends_on: NotRequired[list[str]]


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
        new = _checked(_shaped(steps), self.max_plan_steps)
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
        failure = dataclasses.replace(step, status="failed", reason=_one_line(reason))
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
        _check_saved(steps)
        self._set(steps)

    def _set(self, steps: tuple[PlanItem, ...]) -> None:
        self._steps = steps
        self._blocking = _failed_above(steps)
        self._view = tuple(_shown(step, self._blocking[step.id]) for step in steps)

    def _put(self, step: PlanItem) -> None:
        self._set(tuple(step if s.id == step.id else s for s in self._steps))

    def _find(self, name: str) -> PlanItem:
        if not self._steps:
            raise ToolRetry(_NO_PLAN)
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


def _shaped(steps: Sequence[Mapping[str, Any]]) -> list[StepInput]:
    """The steps as `StepInput`s: plans edited by a reviewer arrive as plain data."""
    shaped: list[StepInput] = []
    for position, step in enumerate(steps, start=1):
        if not _well_formed(step):
            raise ToolRetry(
                f"Step {position} must have a `name` and a `description` (strings) and may have "
                f"`depends_on` (a list of step names), nothing else; got {step!r}."
            )
        depends_on = list(step.get("depends_on", []))
        shaped.append(
            {"name": step["name"], "description": step["description"], "depends_on": depends_on}
        )
    return shaped


def _well_formed(step: object) -> bool:
    if not isinstance(step, Mapping) or not set(step) <= {"name", "description", "depends_on"}:
        return False
    depends_on = step.get("depends_on", [])
    return (
        isinstance(step.get("name"), str)
        and isinstance(step.get("description"), str)
        and isinstance(depends_on, list | tuple)
        and all(isinstance(dependency, str) for dependency in depends_on)
    )


def _checked(steps: Sequence[StepInput], limit: int) -> tuple[PlanItem, ...]:
    """The new plan's steps, all pending, or a `ToolRetry` that lists every problem."""
    _check_count(len(steps), limit)
    names = [step["name"] for step in steps]
    problems = [*_name_problems(names), *_description_problems(steps)]
    problems += _dependency_problems(steps, names)
    if problems:
        raise ToolRetry(" ".join(problems))
    items = tuple(
        PlanItem(
            id=step["name"],
            text=_one_line(step["description"]),
            status="pending",
            depends_on=tuple(dict.fromkeys(step.get("depends_on", ()))),
        )
        for step in steps
    )
    cycle = _cycle(items)
    if cycle:
        raise ToolRetry(
            f"The dependencies form a cycle: {' -> '.join(cycle)} (each step depends on the "
            "next). Remove one of these dependencies so that every step can start."
        )
    return items


def _check_count(count: int, limit: int) -> None:
    if count < 2:
        raise ToolRetry(
            f"A plan needs at least 2 steps, got {count}. For a single task, do it directly "
            "without a plan; otherwise split the work into steps."
        )
    if count > limit:
        raise ToolRetry(
            f"A plan has at most {limit} steps, got {count}. Merge related steps, or plan the "
            "first stage now and replan when it is done."
        )


def _name_problems(names: Sequence[str]) -> list[str]:
    problems = [p for i, name in enumerate(names, start=1) if (p := _name_problem(i, name))]
    problems += [
        f"Step name {name!r} is used {count} times; give each step its own name."
        for name, count in Counter(names).items()
        if count > 1 and name
    ]
    return problems


def _name_problem(position: int, name: str) -> str | None:
    if not name:
        return f"Step {position} has an empty name; name it, for example 'gather-data'."
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"Step name {_short(name)!r} is {len(name)} characters long; "
            f"use at most {MAX_NAME_LENGTH}."
        )
    if not _NAME.fullmatch(name):
        return (
            f"Step name {name!r} is not valid: use only lowercase letters, digits, '-' and '_'"
            f"{_suggestion(name)}."
        )
    return None


def _suggestion(name: str) -> str:
    slug = re.sub(r"[^a-z0-9_-]+", "-", name.lower()).strip("-")[:MAX_NAME_LENGTH]
    return f" (for example {slug!r})" if slug else ""


def _description_problems(steps: Sequence[StepInput]) -> list[str]:
    return [
        f"Step {_label(i, step['name'])} has an empty description; say what the step does."
        for i, step in enumerate(steps, start=1)
        if not step["description"].strip()
    ]


def _dependency_problems(steps: Sequence[StepInput], names: Sequence[str]) -> list[str]:
    known = set(names)
    listed = ", ".join(name for name in names if name)
    return [
        f"Step {_label(i, step['name'])} depends on {dependency!r}, which is not a step of this "
        f"plan; depend only on these step names: {listed}."
        for i, step in enumerate(steps, start=1)
        for dependency in dict.fromkeys(step.get("depends_on", ()))
        if dependency not in known
    ]


def _cycle(steps: Sequence[PlanItem]) -> list[str] | None:
    """One dependency cycle as `[a, b, c, a]` (a depends on b, …), or None if there is none."""
    depends_on = {step.id: step.depends_on for step in steps}
    finished: set[str] = set()
    path: list[str] = []

    def visit(name: str) -> list[str] | None:
        path.append(name)
        for dependency in depends_on.get(name, ()):
            if dependency in path:
                return [*path[path.index(dependency) :], dependency]
            if dependency not in finished and (found := visit(dependency)):
                return found
        path.pop()
        finished.add(name)
        return None

    for name in depends_on:
        if name not in finished and (found := visit(name)):
            return found
    return None


def _check_saved(steps: tuple[PlanItem, ...]) -> None:
    """A saved plan must be one this module could have made; anything else is a bug."""
    names = {step.id for step in steps}
    for step in steps:
        if step.status not in _STORED:
            raise ValueError(f"saved step {step.id!r} has status {step.status!r}")
        unknown = [d for d in step.depends_on if d not in names]
        if unknown:
            raise ValueError(f"saved step {step.id!r} depends on unknown steps {unknown!r}")
    cycle = _cycle(steps)
    if cycle:
        raise ValueError(f"saved plan has a dependency cycle: {' -> '.join(cycle)}")


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
        return f"{step.id} (was completed, result discarded: {_short(step.result or '', 60)!r})"
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


def _one_line(text: str) -> str:
    """Fold line breaks: a step is one plan line, and must not forge others."""
    return " ".join(text.split())


def _short(text: str, limit: int = 20) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label(position: int, name: str) -> str:
    return repr(name) if name else str(position)


# --- the tools -----------------------------------------------------------------------------


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
        parts.append(f"result: {_one_line(item.result)}")
    return parts


def _ready_steps(plan: DependencyPlan) -> str:
    items = plan.items()
    if not items:
        return _NO_PLAN
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
