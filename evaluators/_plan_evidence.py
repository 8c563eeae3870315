"""The evidence `plan_adherence` counts, for every turn with a plan at once.

Snapshots and tool calls sit on one axis of steps (twice a span's position; a carried plan one
step before its turn's first span), so "the latest snapshot before a call" and "the work calls
between two snapshots" are binary searches. Python writes only the evidence sentences that name
items (failures, mostly).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from plangate.evaluators._columns import text
from plangate.evaluators._plan_components import Evidence, Tally
from plangate.evaluators._plan_items import (
    BLOCKED,
    COMPLETED,
    FAILED,
    IN_PROGRESS,
    NONE,
    PENDING,
    Bools,
    Entries,
    Ints,
    Items,
    changes,
    ranges,
    run_starts,
)


@dataclass(frozen=True, slots=True, eq=False)
class Snapshots:
    """The plan snapshots of the turns that have their own, in order, with each turn's carried plan.

    A span's step is twice its position: a carried plan sits one step before its turn's first
    span (`began`), so snapshots and calls sort on one axis.
    """

    turn: Ints
    step: Ints
    began: Ints
    """The step just before the snapshot's turn: where a carried plan sits."""
    text: Ints
    """The plan's code in `texts`."""
    texts: list[str]
    inherited: Bools
    """The plan carried from the session's earlier turns."""
    previous: Ints
    """The turn's snapshot before this one (-1: none)."""
    last: Bools
    """The turn's last snapshot."""

    def __len__(self) -> int:
        return len(self.turn)


@dataclass(frozen=True, slots=True, eq=False)
class Calls:
    """The tool calls of the turns with plans, in order."""

    turn: Ints
    step: Ints
    number: Ints
    """From 1, within the turn."""
    plan: Bools
    work: Bools
    tool: Ints
    """The tool's code in `tools`."""
    tools: pa.Array


def tally(
    session: Ints, snapshots: Snapshots, calls: Calls, items: Items, entries: Entries
) -> Tally:
    """What the components count in every turn (`session`: each turn's), and what they show."""
    turns = len(session)
    calls_before = _up_to(calls.step, snapshots.step, snapshots.began)
    four = _four_status(session, items)
    work = calls.work
    untracked = work & ~_tracked(calls, snapshots, items, four)
    own = ~snapshots.inherited
    in_progress = np.bincount(
        items.snapshot[(items.status == IN_PROGRESS) & own[items.snapshot]],
        minlength=len(snapshots),
    )
    completions, unworked = _unworked(snapshots, calls, items, entries, calls_before, turns)
    kept, dropped = _dropped(snapshots, items, entries, turns)
    checks, out_of_order = _out_of_order(snapshots, items, entries, calls_before, turns)
    return Tally(
        four_status=four,
        work_calls=_count(calls.turn[work], turns),
        tracked_calls=_count(calls.turn[work & ~untracked], turns),
        untracked=_untracked(calls, untracked),
        snapshots=_count(snapshots.turn[own], turns),
        max_in_progress=_per_turn_max(snapshots.turn[own], in_progress[own], turns),
        several=_several(snapshots, items, entries, in_progress, calls_before),
        completions=completions,
        unworked=unworked,
        plan_calls=_count(calls.turn[calls.plan], turns),
        items=kept,
        dropped=dropped,
        dependency_checks=checks,
        out_of_order=out_of_order,
    )


def _four_status(session: Ints, items: Items) -> Bools:
    """Per turn: whether its session's plans ever show an item in progress."""
    active = np.zeros(int(session[-1]) + 1, dtype=bool)
    active[session[items.turn[items.status == IN_PROGRESS]]] = True
    return active[session]


def _tracked(calls: Calls, snapshots: Snapshots, items: Items, four: Bools) -> Bools:
    """Per call: made while an item was in progress (two-status plans: while one was open)."""
    status = items.status
    active = np.zeros(len(snapshots), dtype=bool)
    active[items.snapshot[status == IN_PROGRESS]] = True
    opened = np.zeros(len(snapshots), dtype=bool)
    opened[items.snapshot[(status == PENDING) | (status == IN_PROGRESS)]] = True
    latest = np.searchsorted(snapshots.step, calls.step, side="left") - 1
    seen = latest >= 0
    seen[seen] = snapshots.turn[latest[seen]] == calls.turn[seen]
    return seen & np.where(four[calls.turn], active[latest], opened[latest])


def _untracked(calls: Calls, untracked: Bools) -> Evidence:
    """The untracked calls, as `call <number> <tool>` (written by Arrow: there may be many)."""
    tools = calls.tools.take(pa.array(calls.tool[untracked]))
    rows = int(untracked.sum())
    return Evidence(
        calls.turn[untracked], text("call ", calls.number[untracked], " ", tools, rows=rows)
    )


def _several(
    snapshots: Snapshots, items: Items, entries: Entries, in_progress: Ints, calls_before: Ints
) -> Evidence:
    """Own snapshots with more than one item in progress: which (by id, else text), in key order."""
    several = (in_progress > 1) & ~snapshots.inherited
    rows = np.flatnonzero(several[items.snapshot] & (items.status == IN_PROGRESS))
    shown: dict[int, list[str]] = {}
    for snapshot, entry in zip(
        items.snapshot[rows].tolist(), items.entry[rows].tolist(), strict=True
    ):
        ident = entries.words[entries.ident[entry]]
        shown.setdefault(snapshot, []).append(ident or entries.words[entries.text[entry]])
    found = sorted(shown)
    return Evidence.of(
        snapshots.turn[found],
        [f"after call {calls_before[s]}: items {', '.join(shown[s])} in progress" for s in found],
    )


def _unworked(
    snapshots: Snapshots,
    calls: Calls,
    items: Items,
    entries: Entries,
    calls_before: Ints,
    turns: int,
) -> tuple[Ints, Evidence]:
    """Completions per turn, and those with no work call since the item went in progress.

    Since: the snapshot where the item last went in progress, when it was in progress just
    before; else the turn's previous snapshot; else the turn's start.
    """
    inherited = snapshots.inherited[items.snapshot]
    status, previous = items.status, items.previous
    entered = (status == IN_PROGRESS) & ((previous != IN_PROGRESS) | inherited)
    # The last row at or before each row where its item went in progress, if in its run.
    went = np.maximum.accumulate(np.where(entered, np.arange(len(items)), -1))
    since = np.where(went >= run_starts(items.first), items.snapshot[went], -1)
    done = np.flatnonzero((status == COMPLETED) & (previous != COMPLETED) & ~inherited)
    at = items.snapshot[done]
    start = np.where(previous[done] == IN_PROGRESS, since[done], snapshots.previous[at])
    after = np.where(start >= 0, snapshots.step[start], snapshots.began[at])
    lazy = _up_to(calls.step[calls.work], snapshots.step[at], after) == 0
    rows, start = done[lazy], start[lazy]
    evidence = [
        f"item {entries.name(e)} completed at call {c} with no work call {_since(s, p)}"
        for e, c, s, p in zip(
            items.entry[rows].tolist(),
            calls_before[items.snapshot[rows]].tolist(),
            np.where(start >= 0, calls_before[start], 0).tolist(),
            (previous[rows] == IN_PROGRESS).tolist(),
            strict=True,
        )
    ]
    return _count(items.turn[done], turns), Evidence.of(items.turn[rows], evidence)


def _since(call: int, from_progress: bool) -> str:
    if call == 0:
        return "since the turn began"
    if from_progress:
        return f"since it went in progress at call {call}"
    return f"since the plan changed at call {call}"


def _dropped(
    snapshots: Snapshots, items: Items, entries: Entries, turns: int
) -> tuple[Ints, Evidence]:
    """Items per turn, and those missing from its last snapshot though never closed."""
    starts = np.flatnonzero(items.first)
    status = items.status
    closed = (status == COMPLETED) | (status == BLOCKED) | (status == FAILED)
    in_last = _any_per_run(snapshots.last[items.snapshot], starts)
    ever_closed = _any_per_run(closed, starts)
    mentioned = _any_per_run(~snapshots.inherited[items.snapshot], starts)
    # Items closed in an earlier turn and not mentioned in this one are not this turn's items.
    counted = mentioned | ~ever_closed
    ends = np.append(starts[1:], len(items)) - 1
    last = ends[counted & ~in_last & ~ever_closed]
    evidence = [
        f"{entries.name(e)} (last {entries.statuses[s]})"
        for e, s in zip(items.entry[last].tolist(), status[last].tolist(), strict=True)
    ]
    return _count(items.turn[starts[counted]], turns), Evidence.of(items.turn[last], evidence)


def _out_of_order(
    snapshots: Snapshots, items: Items, entries: Entries, calls_before: Ints, turns: int
) -> tuple[Ints, Evidence]:
    """Starts and completions of items with dependencies, and those made before them."""
    status, previous = items.status, items.previous
    started = (status == IN_PROGRESS) & (previous != IN_PROGRESS)
    done = (status == COMPLETED) & (previous != COMPLETED)
    needs = (entries.depends_start[items.entry + 1] - entries.depends_start[items.entry]) > 0
    checked = np.flatnonzero((started | done) & ~snapshots.inherited[items.snapshot] & needs)
    wrong: list[int] = []
    evidence: list[str] = []
    for row, unmet in _unmet(items, entries, checked):
        event = "completed" if status[row] == COMPLETED else "started"
        ident = entries.words[entries.ident[items.entry[row]]]
        call = calls_before[items.snapshot[row]]
        wrong.append(row)
        evidence.append(f"item {ident} {event} at call {call} before {', '.join(unmet)}")
    return _count(items.turn[checked], turns), Evidence.of(items.turn[wrong], evidence)


def _unmet(items: Items, entries: Entries, checked: Ints) -> list[tuple[int, list[str]]]:
    """The checked rows with dependencies not completed in their snapshot, with those (status).

    A dependency's status is that of the first item with its id in the snapshot, in key order.
    """
    width = len(entries.words)
    keys, first = np.unique(items.snapshot * width + entries.ident[items.entry], return_index=True)
    owner, place = ranges(
        entries.depends_start[items.entry[checked]], entries.depends_start[items.entry[checked] + 1]
    )
    row, need = checked[owner], entries.depends[place]
    wanted = items.snapshot[row] * width + need
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    state = np.where(keys[at] == wanted, items.status[first[at]], NONE)
    unmet = state != COMPLETED
    found: dict[int, list[str]] = {}
    for r, n, s in zip(
        row[unmet].tolist(), need[unmet].tolist(), state[unmet].tolist(), strict=True
    ):
        said = "missing" if s == NONE else entries.statuses[s]
        found.setdefault(r, []).append(f"{entries.words[n]} ({said})")
    return sorted(found.items())


def _any_per_run(flags: Bools, starts: Ints) -> Bools:
    """Whether any row of each run (rows `starts[i]:starts[i+1]`) is flagged."""
    if not len(starts):
        return np.zeros(0, dtype=bool)
    return np.logical_or.reduceat(flags, starts)


def _count(turn: Ints, turns: int) -> Ints:
    return np.bincount(turn, minlength=turns).astype(np.int64)


def _per_turn_max(turn: Ints, values: Ints, turns: int) -> Ints:
    """The largest value per turn (`turn` sorted), 0 for turns without any."""
    out = np.zeros(turns, dtype=np.int64)
    starts = np.flatnonzero(changes(turn))
    if len(starts):
        out[turn[starts]] = np.maximum.reduceat(values, starts)
    return out


def _up_to(steps: Ints, at: Ints, after: Ints) -> Ints:
    """How many of `steps` (sorted) fall after `after` and at or before `at`, per query."""
    return np.searchsorted(steps, at, side="right") - np.searchsorted(steps, after, side="right")
