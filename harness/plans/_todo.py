"""The todo-list plan dialect: `todo_write`, `todo_update`, `todo_read`.

Statuses are pending / in_progress / completed / blocked (a two-status variant keeps only
pending / completed). At most one item is in progress; blocking needs a reason. Every rule
violation is a `ToolRetry` whose message says how to fix the call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Literal, NotRequired, TypedDict

from plangate.harness._tools import Tool, ToolRetry, tool
from plangate.harness.plans._plan import PlanItem, PlanStatus, render_plan

StatusSet = Literal["two", "four"]
"""`two`: pending / completed; `four`: pending / in_progress / completed / blocked."""

ALLOWED: dict[str, tuple[PlanStatus, ...]] = {
    "two": ("pending", "completed"),
    "four": ("pending", "in_progress", "completed", "blocked"),
}


TODO_TOOLS = ("todo_write", "todo_update", "todo_read")
"""The todo dialect's tools (`todo_tools` makes them)."""


class TodoInput(TypedDict):
    """One item as the model writes it."""

    content: str
    status: NotRequired[Literal["pending", "in_progress", "completed", "blocked"]]
    reason: NotRequired[str]


class TodoList:
    """The mutable todo list of a session."""

    def __init__(self, statuses: StatusSet = "four") -> None:
        self.statuses: StatusSet = statuses
        self._items: tuple[PlanItem, ...] = ()

    def items(self) -> tuple[PlanItem, ...]:
        """The current items."""
        return self._items

    def to_dict(self) -> dict[str, Any]:
        """The list as JSON-able data, for saved sessions."""
        return {"statuses": self.statuses, "items": [item.as_dict() for item in self._items]}

    def restore(self, data: dict[str, Any]) -> None:
        """Load what `to_dict` saved."""
        self._items = tuple(PlanItem.from_dict(item) for item in data["items"])

    def write(self, todos: list[TodoInput]) -> None:
        """Replace the whole list."""
        if not todos:
            raise ToolRetry("todo_write needs at least one item; give the list of tasks to do.")
        items = tuple(
            self._checked(str(i), t["content"], t.get("status", "pending"), t.get("reason"))
            for i, t in enumerate(todos, start=1)
        )
        self._check_single_active(items)
        self._items = items

    def update(self, item_id: int, status: str, reason: str | None = None) -> PlanItem:
        """Change one item's status; returns the updated item."""
        index = item_id - 1
        if not 0 <= index < len(self._items):
            if not self._items:
                raise ToolRetry("There is no todo list yet: call todo_write with the items first.")
            raise ToolRetry(
                f"There is no item {item_id}; item ids are 1 to {len(self._items)}. "
                "Call todo_read to see the list."
            )
        current = self._items[index]
        item = self._checked(current.id, current.text, status, reason)
        items = self._items[:index] + (item,) + self._items[index + 1 :]
        self._check_single_active(items)
        self._items = items
        return item

    def _checked(self, item_id: str, content: str, status: str, reason: str | None) -> PlanItem:
        allowed = ALLOWED[self.statuses]
        if status not in allowed:
            raise ToolRetry(
                f"Status {status!r} is not allowed here; use one of: {', '.join(allowed)}."
            )
        if not content.strip():
            raise ToolRetry(f"Item {item_id} has empty content; say what the task is.")
        if status == "blocked" and not (reason and reason.strip()):
            raise ToolRetry(
                f"Blocking item {item_id} needs a reason: say what is missing or who must act."
            )
        kept_reason = _one_line(reason) if status == "blocked" and reason else None
        return PlanItem(id=item_id, text=_one_line(content), status=status, reason=kept_reason)

    @staticmethod
    def _check_single_active(items: tuple[PlanItem, ...]) -> None:
        active = [i for i in items if i.status == "in_progress"]
        if len(active) > 1:
            listed = ", ".join(f'{i.id} "{i.text}"' for i in active)
            raise ToolRetry(
                f"Only one item may be in progress at a time, but these would be: {listed}. "
                "Finish or block the current item before starting the next."
            )


def _one_line(text: str) -> str:
    """Fold line breaks: an item is one plan line, and must not forge others."""
    return " ".join(text.split())


def todo_tools(plan: TodoList, *, show_plan: bool) -> list[Tool]:
    """The todo tools over `plan`; with `show_plan`, results carry the rendered list."""

    def reply(message: str) -> str:
        if show_plan:
            return f"{message}\n{render_plan(plan.items(), statuses=plan.statuses)}"
        return message

    @tool
    def todo_write(todos: list[TodoInput]) -> str:
        """Write the plan: replace the whole todo list with these items, in order.

        Args:
            todos: The items; each has `content`, and optionally `status` (default pending)
                and `reason` (required when blocked).
        """
        plan.write(todos)
        return reply(f"Todo list saved with {len(plan.items())} items.")

    @tool
    def todo_update(item_id: int, status: str, reason: str | None = None) -> str:
        """Change the status of one todo item.

        Args:
            item_id: The item's number, from 1.
            status: The new status.
            reason: Why the item is blocked (required for blocked).
        """
        item = plan.update(item_id, status, reason)
        return reply(f"Item {item.id} is now {item.status}.")

    @tool
    def todo_read() -> str:
        """Show the todo list with every item's status."""
        return render_plan(plan.items(), statuses=plan.statuses)

    items = _restricted(_restrict_items, todo_write.parameters, plan.statuses)
    status = _restricted(_restrict_status, todo_update.parameters, plan.statuses)
    return [
        dataclasses.replace(todo_write, parameters=items),
        dataclasses.replace(todo_update, parameters=status),
        todo_read,
    ]


_RESTRICTED: dict[tuple[object, int, StatusSet], tuple[dict[str, Any], dict[str, Any]]] = {}


def _restricted(
    restrict: Callable[[dict[str, Any], StatusSet], dict[str, Any]],
    schema: dict[str, Any],
    statuses: StatusSet,
) -> dict[str, Any]:
    """`restrict(schema, statuses)`, made once per schema object and status set.

    Every session's todo tools then share their schemas (and the checks compiled from them)
    instead of building them again.
    """
    key = (restrict, id(schema), statuses)
    cached = _RESTRICTED.get(key)
    if cached is None or cached[0] is not schema:
        cached = _RESTRICTED[key] = (schema, restrict(schema, statuses))
    return cached[1]


def _restrict_items(schema: dict[str, Any], statuses: StatusSet) -> dict[str, Any]:
    items = schema["properties"]["todos"]["items"]
    props = dict(items["properties"])
    props["status"] = {"enum": list(ALLOWED[statuses])}
    if statuses == "two":
        props.pop("reason", None)
    new_items = {**items, "properties": props}
    todos = {**schema["properties"]["todos"], "items": new_items}
    if statuses == "two":
        todos["description"] = (
            "The items; each has `content`, and optionally `status` (pending or completed; "
            "default pending)."
        )
    return {**schema, "properties": {**schema["properties"], "todos": todos}}


def _restrict_status(schema: dict[str, Any], statuses: StatusSet) -> dict[str, Any]:
    allowed = ALLOWED[statuses]
    props = dict(schema["properties"])
    props["status"] = {**props["status"], "enum": list(allowed)}
    props["status"].pop("type", None)
    if "blocked" not in allowed:
        props.pop("reason")
    return {**schema, "properties": props}
