"""The harness-owned plan: the harness keeps the list and tells the model the next item.

The model gets no plan tools. The list is the request's task clauses (see `split_tasks`); the
first is in progress from the start. When the model calls `finish`, the harness records the
current item as completed and, if items remain, answers with the next one instead of ending the
turn.
"""

from __future__ import annotations

from typing import Any

from plangate.harness._trigger import split_tasks
from plangate.harness.plans._plan import PLAN_HEADER, PlanItem, render_item


class HarnessPlan:
    """A plan the harness owns and advances on `finish`."""

    def __init__(self) -> None:
        self._items: tuple[PlanItem, ...] = ()

    def items(self) -> tuple[PlanItem, ...]:
        """The current items."""
        return self._items

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-able data, for saved sessions."""
        return {"items": [item.as_dict() for item in self._items]}

    def restore(self, data: dict[str, Any]) -> None:
        """Load what `to_dict` saved."""
        self._items = tuple(PlanItem.from_dict(item) for item in data["items"])

    def start(self, request: str) -> None:
        """Make the plan for a new request: one item per task clause (the whole request if none)."""
        texts = split_tasks(request) or ([" ".join(request.split())] if request.strip() else [])
        self._items = tuple(
            PlanItem(id=str(i), text=text, status="in_progress" if i == 1 else "pending")
            for i, text in enumerate(texts, start=1)
        )

    def current(self) -> PlanItem | None:
        """The item in progress, if any."""
        return next((i for i in self._items if i.status == "in_progress"), None)

    def advance(self) -> PlanItem | None:
        """Complete the current item and start the next; returns the new current item."""
        items = list(self._items)
        for index, item in enumerate(items):
            if item.status == "in_progress":
                items[index] = PlanItem(id=item.id, text=item.text, status="completed")
                break
        for index, item in enumerate(items):
            if item.status == "pending":
                items[index] = PlanItem(id=item.id, text=item.text, status="in_progress")
                break
        self._items = tuple(items)
        return self.current()

    def finish(self) -> str | None:
        """`finish` was called: record the current item as done and start the next.

        Returns what the model is told when an item remains (the turn goes on), else None.
        """
        done = self.current()
        following = self.advance()
        if following is None:
            return None
        return (
            f'Recorded "{done.text if done else ""}" as done. Next item: "{following.text}". '
            "Do it, then call finish."
        )

    def message(self) -> str:
        """What the harness tells the model about the plan on every call."""
        lines = [PLAN_HEADER, *(render_item(item) for item in self._items)]
        current = self.current()
        if current is None:
            lines.append("Next: every item is done; call finish with a summary.")
        else:
            lines.append(
                f'Next: do only "{current.text}" now, then call finish; '
                "the harness will then give you the next item."
            )
        return "\n".join(lines)
