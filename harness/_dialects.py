"""The plan dialects behind one face: which state a variant plans with, and its tools.

A dialect is a state object with `items()`, `to_dict()` and `restore()`: the todo list, the
harness-owned list, or the dependency plan. Under plan approval, the dependency plan's
`create_plan` checks the plan on a copy and hands it to the session for review instead of
applying it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from plangate.harness._harness_plan import HarnessPlan
from plangate.harness._todo import TodoList, todo_tools
from plangate.harness._tools import Tool
from plangate.harness._variant import PlanSettings

if TYPE_CHECKING:
    from plangate.harness._dependency_plan import DependencyPlan

Propose = Callable[[list[dict[str, Any]]], str]
"""Receives a checked plan that needs approval; returns what the model is told."""


def make_plan(settings: PlanSettings) -> TodoList | HarnessPlan | DependencyPlan | None:
    """The empty plan state of a dialect (None for `none`)."""
    if settings.dialect == "todo":
        return TodoList(settings.statuses)
    if settings.dialect == "harness":
        return HarnessPlan()
    if settings.dialect == "dependency":
        from plangate.harness._dependency_plan import DependencyPlan

        return DependencyPlan(
            max_plan_steps=settings.max_plan_steps,
            strict_dependencies=settings.strict_dependencies,
        )
    return None


def plan_tools(
    plan: TodoList | HarnessPlan | DependencyPlan | None, settings: PlanSettings, propose: Propose
) -> list[Tool]:
    """The tools the model plans with (none for the harness-owned plan)."""
    show = settings.message == "history"
    if isinstance(plan, TodoList):
        return todo_tools(plan, show_plan=show)
    if plan is None or isinstance(plan, HarnessPlan):
        return []
    from plangate.harness._dependency_plan import DependencyPlan, dependency_tools

    tools = dependency_tools(plan, show_plan=show)
    if not settings.approve_plan:
        return tools

    def create_for_review(steps: list[Any]) -> str:
        trial = DependencyPlan.from_dict(plan.to_dict())
        trial.create(steps)  # a ToolRetry here tells the model what to fix, as without review
        return propose([dict(step) for step in steps])

    return [
        dataclasses.replace(t, function=create_for_review, is_async=False)
        if t.name == "create_plan"
        else t
        for t in tools
    ]
