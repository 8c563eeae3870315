"""The plan dialects behind one face: which state a variant plans with, and its tools.

A dialect is a state object with `items()`, `to_dict()` and `restore()`: the todo list, the
harness-owned list, or the dependency plan. Under plan approval, the dependency plan's
`create_plan` checks the plan on a copy and hands it to the session for review instead of
applying it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal

from plangate.harness._messages import SystemMessage
from plangate.harness._tools import Tool
from plangate.harness._variant import PlanSettings
from plangate.harness.plans._dependency import DependencyPlan
from plangate.harness.plans._dependency_tools import DEPENDENCY_TOOLS, dependency_tools
from plangate.harness.plans._harness_plan import HarnessPlan
from plangate.harness.plans._plan import render_plan
from plangate.harness.plans._todo import TODO_TOOLS, TodoList, todo_tools

Plan = TodoList | HarnessPlan | DependencyPlan
"""The state of a session's plan, whichever dialect it is in."""

PLAN_TOOLS: frozenset[str] = frozenset((*TODO_TOOLS, *DEPENDENCY_TOOLS))
"""The names of every plan bookkeeping tool: the todo and the dependency dialects'."""

Propose = Callable[[list[dict[str, Any]]], str]
"""Receives a checked plan that needs approval; returns what the model is told."""


def make_plan(settings: PlanSettings) -> Plan | None:
    """The empty plan state of a dialect (None for `none`)."""
    if settings.dialect == "todo":
        return TodoList(settings.statuses)
    if settings.dialect == "harness":
        return HarnessPlan()
    if settings.dialect == "dependency":
        return DependencyPlan(
            max_plan_steps=settings.max_plan_steps,
            strict_dependencies=settings.strict_dependencies,
        )
    return None


def plan_tools(plan: Plan | None, settings: PlanSettings, propose: Propose) -> list[Tool]:
    """The tools the model plans with (none for the harness-owned plan)."""
    show = settings.message == "history"
    if isinstance(plan, TodoList):
        return todo_tools(plan, show_plan=show)
    if plan is None or isinstance(plan, HarnessPlan):
        return []
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


def plan_message(plan: Plan | None, settings: PlanSettings) -> SystemMessage | None:
    """The plan as the message pinned after the system prompt (None unless the variant pins it).

    Rebuilt from the plan's state on every model call: the harness-owned plan says what to do
    next; the todo and dependency plans list their items with their markers.
    """
    if settings.message != "pinned" or plan is None:
        return None
    if isinstance(plan, HarnessPlan):
        return SystemMessage(content=plan.message())
    dialect: Literal["todo", "dependency"] = (
        "dependency" if isinstance(plan, DependencyPlan) else "todo"
    )
    return SystemMessage(
        content=render_plan(plan.items(), statuses=settings.statuses, dialect=dialect)
    )
