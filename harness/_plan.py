"""The plan as the harness sees it, whatever the dialect: items, rendering, the finish gate's view.

Every dialect (todo list, harness-owned list, and later dependency plans) exposes its state as a
tuple of `PlanItem`s; the plan message, the status reminder, the finish gate and the trace all
read that view and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

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

    def as_dict(self) -> dict[str, str]:
        """A JSON-able view (for traces and `--json`)."""
        data = {"id": self.id, "text": self.text, "status": self.status}
        if self.reason:
            data["reason"] = self.reason
        return data


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


def next_action(items: Sequence[PlanItem], *, statuses: Literal["two", "four"] = "four") -> str:
    """The line of the plan message that says what to do next."""
    if not items:
        return "Next: no plan yet. If the request has two or more tasks, write the plan first."
    active = next((i for i in items if i.status == "in_progress"), None)
    if active is not None:
        return f'Next: work on "{active.text}"; mark it completed as soon as it is done.'
    pending = next((i for i in items if i.status == "pending"), None)
    if pending is None:
        return "Next: every item is completed or blocked; call finish with a summary."
    if statuses == "two":
        return f'Next: do "{pending.text}", then mark it completed.'
    return f'Next: mark "{pending.text}" in_progress and work on it.'


def render_plan(items: Sequence[PlanItem], *, statuses: Literal["two", "four"] = "four") -> str:
    """The full plan message text, rebuilt from state."""
    lines = [PLAN_HEADER, *(render_item(item) for item in items)]
    lines.append(next_action(items, statuses=statuses))
    return "\n".join(lines)


def status_line(items: Sequence[PlanItem]) -> str:
    """The one-line reminder added after a tool result: `[Plan: 2/5 done. Active: "x". …]`."""
    done = sum(item.status == "completed" for item in items)
    parts = [f"Plan: {done}/{len(items)} done."]
    active = next((i for i in items if i.status == "in_progress"), None)
    if active is not None:
        parts.append(f'Active: "{active.text}".')
    ready = next((i for i in items if i.status == "pending"), None)
    if ready is not None:
        parts.append(f'Ready: "{ready.text}".')
    return "[" + " ".join(parts) + "]"


def snapshot(items: Sequence[PlanItem]) -> str:
    """Canonical JSON of the plan, for traces and change detection."""
    return json.dumps([item.as_dict() for item in items], separators=(",", ":"), ensure_ascii=False)
