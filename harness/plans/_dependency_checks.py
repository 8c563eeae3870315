"""The checks of a dependency plan as the model writes it, each failure a message that says the fix.

A plan must have 2 to `max_plan_steps` steps, each with a lowercase name of at most 64
characters (letters, digits, `-`, `_`), a description, and dependencies that name other steps
of the plan without a cycle.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from plangate.harness._tools import ToolRetry
from plangate.harness.plans._plan import PlanItem

MAX_NAME_LENGTH = 64
"""The longest step name."""

_NAME = re.compile(r"[a-z0-9_-]+")
_STORED = frozenset({"pending", "in_progress", "completed", "failed"})


class StepInput(TypedDict):
    """One step as the model writes it."""

    name: str
    description: str
    depends_on: NotRequired[list[str]]


def shaped(steps: Sequence[Mapping[str, Any]]) -> list[StepInput]:
    """The steps as `StepInput`s: plans edited by a reviewer arrive as plain data."""
    found: list[StepInput] = []
    for position, step in enumerate(steps, start=1):
        if not _well_formed(step):
            raise ToolRetry(
                f"Step {position} must have a `name` and a `description` (strings) and may have "
                f"`depends_on` (a list of step names), nothing else; got {step!r}."
            )
        depends_on = list(step.get("depends_on", []))
        found.append(
            {"name": step["name"], "description": step["description"], "depends_on": depends_on}
        )
    return found


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


def checked(steps: Sequence[StepInput], limit: int) -> tuple[PlanItem, ...]:
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
            text=one_line(step["description"]),
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
            f"Step name {short(name)!r} is {len(name)} characters long; "
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


def check_saved(steps: tuple[PlanItem, ...]) -> None:
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


def one_line(text: str) -> str:
    """Fold line breaks: a step is one plan line, and must not forge others."""
    return " ".join(text.split())


def short(text: str, limit: int = 20) -> str:
    text = one_line(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _label(position: int, name: str) -> str:
    return repr(name) if name else str(position)
