"""`task_completion`'s evidence as columns: a check over every turn, and each turn's last plan.

A plan snapshot is JSON text; a turn's plan is the last snapshot of the turn. Each distinct
snapshot text is parsed once, and what the checks need of it (how many items, which are open,
the failure text naming them) is kept per distinct snapshot and taken for each turn by code.
As `plan_adherence` reads them, a snapshot that is not a JSON list has no items, and entries
that are not objects are not items.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from plangate.evaluators._frame import Ints, TraceFrame
from plangate.replay.schema import PLAN

Flags = npt.NDArray[np.bool_]

OPEN = ("pending", "in_progress")
"""Statuses of a plan item that is not done with."""
CLOSED = ("completed", "blocked")
"""Statuses of a plan item that `required_plan_items` accepts."""
_MARK = {
    "pending": "[ ]",
    "in_progress": "[~]",
    "completed": "[x]",
    "blocked": "[!]",
    "failed": "[!]",
}


@dataclass(frozen=True, slots=True, eq=False)
class Check:
    """One check over every turn of a frame."""

    applied: Flags
    """Whether the check applies to the turn."""
    failed: Flags
    """Whether it applies and fails."""
    message: pa.Array
    """What failed, for each turn where it failed, in turn order."""


@dataclass(frozen=True, slots=True, eq=False)
class Plans:
    """The last plan snapshot of each turn, read once per distinct snapshot text.

    Each array has one entry per distinct snapshot, then one for a turn without a snapshot (or
    not read); `code` gives each turn's entry.
    """

    code: Ints
    """Each turn's entry."""
    items: Ints
    """How many items the plan has (0 without a plan)."""
    open: Flags
    """Whether an item is still pending or in progress."""
    blocked: Flags
    """Whether an item is blocked."""
    unexplained: Flags
    """Whether a blocked item gives no reason."""
    open_failure: pa.Array
    """The failure naming the open items (null where none is open)."""
    blocked_failure: pa.Array
    """The failure naming the blocked items without a reason (null where there are none)."""
    closed: tuple[tuple[str, ...], ...]
    """The texts of the completed and blocked items, lowercased."""

    def checks(self) -> list[Check]:
        """The plan's own checks: no item left open, every blocked item with a reason."""
        left = self.open[self.code]
        unexplained = self.unexplained[self.code]
        return [
            Check(self.items[self.code] > 0, left, _at(self.open_failure, self.code[left])),
            Check(
                self.blocked[self.code],
                unexplained,
                _at(self.blocked_failure, self.code[unexplained]),
            ),
        ]


@dataclass(frozen=True, slots=True)
class _Snapshot:
    """What the checks need of one plan snapshot."""

    items: int
    open_failure: str | None
    blocked: bool
    blocked_failure: str | None
    closed: tuple[str, ...]


def agent_values(frame: TraceFrame, name: str) -> pa.Array:
    """A column's value on each turn's AGENT span (null for a turn without one)."""
    return frame.values(name, frame.turns.agent)


def last_plans(frame: TraceFrame, read: Flags) -> Plans:
    """The last plan snapshot of each turn where `read` is set (the others count as no plan)."""
    positions = _last_snapshots(frame)
    positions = positions[read[frame.turn[positions]]]
    texts = frame.values(PLAN, positions).dictionary_encode()
    snapshots = [_read(text) for text in texts.dictionary.to_pylist()]
    snapshots.append(_read(None))
    code = np.full(len(frame.turns), len(snapshots) - 1, dtype=np.int64)
    code[frame.turn[positions]] = np.asarray(texts.indices.to_numpy(zero_copy_only=False))
    return Plans(
        code=code,
        items=np.array([s.items for s in snapshots], dtype=np.int64),
        open=np.array([s.open_failure is not None for s in snapshots], dtype=bool),
        blocked=np.array([s.blocked for s in snapshots], dtype=bool),
        unexplained=np.array([s.blocked_failure is not None for s in snapshots], dtype=bool),
        open_failure=pa.array([s.open_failure for s in snapshots], pa.string()),
        blocked_failure=pa.array([s.blocked_failure for s in snapshots], pa.string()),
        closed=tuple(s.closed for s in snapshots),
    )


def _last_snapshots(frame: TraceFrame) -> Ints:
    """The position of each turn's last span with a plan snapshot (turns without one: none)."""
    column = frame.table.column(PLAN)
    if column.null_count == len(column):
        return np.zeros(0, dtype=np.int64)
    valid = np.asarray(column.is_valid().to_numpy(zero_copy_only=False))
    positions = np.flatnonzero(valid if frame.order is None else valid[frame.order])
    turn = frame.turn[positions]
    last = np.ones(len(positions), dtype=bool)
    last[:-1] = turn[1:] != turn[:-1]
    return positions[last].astype(np.int64)


def _read(text: str | None) -> _Snapshot:
    """One snapshot's items, judged as a turn's plan."""
    items = _plan(text)
    open_items = [i for i in items if i.get("status") in OPEN]
    blocked = [i for i in items if i.get("status") == "blocked"]
    unexplained = [i for i in blocked if not i.get("reason")]
    closed = tuple(str(i.get("text", "")).lower() for i in items if i.get("status") in CLOSED)
    return _Snapshot(
        items=len(items),
        open_failure=f"{len(open_items)} plan item(s) left open: " + _items(open_items)
        if open_items
        else None,
        blocked=bool(blocked),
        blocked_failure="blocked without a reason: " + _items(unexplained) if unexplained else None,
        closed=closed,
    )


def _plan(text: str | None) -> list[dict[str, Any]]:
    """A snapshot's items: a JSON list's objects (text that is not a JSON list has none)."""
    if text is None:
        return []
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return []
    return [i for i in value if isinstance(i, dict)] if isinstance(value, list) else []


def _items(items: list[dict[str, Any]]) -> str:
    return ", ".join(_item(i) for i in items)


def _item(item: Mapping[str, Any]) -> str:
    mark = _MARK.get(str(item.get("status")), "[?]")
    return f"{mark} {item.get('id', '?')} {item.get('text', '')!r} ({item.get('status')})"


def _at(values: pa.Array, code: Ints) -> pa.Array:
    return values.take(pa.array(code))
