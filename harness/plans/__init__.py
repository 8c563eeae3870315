"""Plans: the three dialects a variant can plan in, and what they share.

- `_plan`: the plan item, its statuses and markers, the rendered plan and status line;
- `_todo`: the todo list (`todo_write`, `todo_update`, `todo_read`);
- `_dependency`, `_dependency_checks`, `_dependency_tools`: the dependency plan (named steps with
  dependencies and results), the checks of a plan as the model writes it, and its tools;
- `_harness_plan`: the harness-owned list (no plan tools: the harness says what is next);
- `_dialects`: one face over the three (the state a variant plans with, its tools, the pinned
  plan message).

Imports only harness basics (messages, tools, variants, the planning trigger).
"""

from plangate.harness.plans._dependency import DependencyPlan
from plangate.harness.plans._dependency_tools import DEPENDENCY_TOOLS, dependency_tools
from plangate.harness.plans._dialects import PLAN_TOOLS, Plan, make_plan, plan_message, plan_tools
from plangate.harness.plans._harness_plan import HarnessPlan
from plangate.harness.plans._plan import (
    PLAN_HEADER,
    PlanItem,
    PlanState,
    PlanStatus,
    incomplete,
    is_open,
    render_item,
    render_plan,
    snapshot,
    status_line,
)
from plangate.harness.plans._todo import TODO_TOOLS, TodoList, todo_tools

__all__ = [
    "DEPENDENCY_TOOLS",
    "PLAN_HEADER",
    "PLAN_TOOLS",
    "TODO_TOOLS",
    "DependencyPlan",
    "HarnessPlan",
    "Plan",
    "PlanItem",
    "PlanState",
    "PlanStatus",
    "TodoList",
    "dependency_tools",
    "incomplete",
    "is_open",
    "make_plan",
    "plan_message",
    "plan_tools",
    "render_item",
    "render_plan",
    "snapshot",
    "status_line",
    "todo_tools",
]
