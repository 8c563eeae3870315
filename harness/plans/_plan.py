"""The plan as the harness sees it, whatever the dialect: items, rendering, the finish gate's view.

Every dialect (todo list, harness-owned list, and later dependency plans) exposes its state as a
tuple of `PlanItem`s; the plan message, the status reminder, the finish gate and the trace all
read that view and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

PlanStatus = Literal["pending", "in_progress", "completed", "blocked", "failed"]
"""Lifecycle of a plan item."""

OPEN_STATUSES: frozenset[str] = frozenset({"pending", "in_progress"})
"""Statuses that keep a plan open: finishing with such items is bounced by the gate."""

PLAN_HEADER = "# Plan"
"""First line of the plan message; models (and simulated ones) recognize the plan by it."""

_MARKERS: dict[str, str] = {
    "completed": "[x]",
    "in_progress": "[~]",
    "pending": "[ ]",
    "blocked": "[!]",
    "failed": "[!]",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanItem:
    """One item of a plan."""

    id: str
    """Item id: `1`, `2`, … for todo lists; the step name for dependency plans."""
    text: str
    """What the item is."""
    status: PlanStatus
    """Where it stands."""
    reason: str | None = None
    """Why it is blocked or failed."""
    depends_on: tuple[str, ...] = ()
    """Ids of the items that must be completed first (dependency plans)."""
    result: str | None = None
    """What the item produced (dependency plans record it when a step is done)."""

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able view (for traces and `--json`)."""
        data: dict[str, Any] = {"id": self.id, "text": self.text, "status": self.status}
        if self.reason:
            data["reason"] = self.reason
        if self.depends_on:
            data["depends_on"] = list(self.depends_on)
        if self.result is not None:
            data["result"] = self.result
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PlanItem:
        """The inverse of `as_dict`."""
        return cls(
            id=str(data["id"]),
            text=str(data["text"]),
            status=data["status"],
            reason=data.get("reason"),
            depends_on=tuple(data.get("depends_on", ())),
            result=data.get("result"),
        )


class PlanState(Protocol):
    """What every plan dialect exposes to the harness."""

    def items(self) -> tuple[PlanItem, ...]:
        """The current items, in plan order."""
        ...


def is_open(items: Sequence[PlanItem]) -> bool:
    """Whether some item is still pending or in progress."""
    return any(item.status in OPEN_STATUSES for item in items)


def incomplete(items: Sequence[PlanItem]) -> list[PlanItem]:
    """Items that must be completed (or blocked with a reason) before the turn may finish."""
    return [item for item in items if item.status in OPEN_STATUSES]


def render_item(item: PlanItem, *, current: bool = True) -> str:
    """One plan line: marker, id, text, and a note for the current or blocked item."""
    line = f"{_MARKERS[item.status]} {item.id}. {item.text}"
    if item.status == "in_progress" and current:
        line += " ← CURRENT"
    if item.status in ("blocked", "failed"):
        line += f" ({item.status}: {item.reason or 'no reason given'})"
    return line


def next_action(
    items: Sequence[PlanItem],
    *,
    statuses: Literal["two", "four"] = "four",
    dialect: Literal["todo", "dependency"] = "todo",
) -> str:
    """The line of the plan message that says what to do next."""
    if not items:
        return "Next: no plan yet. If the request has two or more tasks, write the plan first."
    active = next((i for i in items if i.status == "in_progress"), None)
    if active is not None:
        if dialect == "dependency":
            return f'Next: work on "{active.id}"; call mark_step_done with its result when done.'
        return f'Next: work on "{active.text}"; mark it completed as soon as it is done.'
    pending = next((i for i in ready_items(items)), None)
    if pending is None:
        return "Next: every item is completed or blocked; call finish with a summary."
    if dialect == "dependency":
        return f'Next: start_step "{pending.id}"{_inputs(pending, items)} and work on it.'
    if statuses == "two":
        return f'Next: do "{pending.text}", then mark it completed.'
    return f'Next: mark "{pending.text}" in_progress and work on it.'


def render_plan(
    items: Sequence[PlanItem],
    *,
    statuses: Literal["two", "four"] = "four",
    dialect: Literal["todo", "dependency"] = "todo",
) -> str:
    """The full plan message text, rebuilt from state."""
    lines = [PLAN_HEADER, *(render_item(item) for item in items)]
    lines.append(next_action(items, statuses=statuses, dialect=dialect))
    return "\n".join(lines)


def status_line(items: Sequence[PlanItem]) -> str:
    """The one-line reminder added after a tool result: `[Plan: 2/5 done. Active: "x". …]`."""
    done = sum(item.status == "completed" for item in items)
    parts = [f"Plan: {done}/{len(items)} done."]
    active = next((i for i in items if i.status == "in_progress"), None)
    if active is not None:
        parts.append(f'Active: "{active.text}".')
    ready = next((i for i in ready_items(items)), None)
    if ready is not None:
        parts.append(f'Ready: "{ready.text}"{_inputs(ready, items)}.')
    return "[" + " ".join(parts) + "]"


def ready_items(items: Sequence[PlanItem]) -> list[PlanItem]:
    """Pending items whose dependencies are all completed, in plan order."""
    done = {item.id for item in items if item.status == "completed"}
    return [i for i in items if i.status == "pending" and all(d in done for d in i.depends_on)]


def _inputs(item: PlanItem, items: Sequence[PlanItem], limit: int = 60) -> str:
    """` (from gather-data: 12 rows …)`: the results a ready step starts from."""
    results = {i.id: i.result for i in items if i.result}
    parts = []
    for dependency in item.depends_on:
        text = " ".join((results.get(dependency) or "").split())
        if text:
            parts.append(f"{dependency}: {text if len(text) <= limit else text[: limit - 1] + '…'}")
    return f" (from {'; '.join(parts)})" if parts else ""


def snapshot(items: Sequence[PlanItem]) -> str:
    """Canonical JSON of the plan, for traces and change detection."""
    return json.dumps([item.as_dict() for item in items], separators=(",", ":"), ensure_ascii=False)
