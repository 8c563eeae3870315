"""How plan-adherence evidence becomes each turn's verdict: one component per rule, with limits.

Each component (work tracked by the plan, one item at a time, items earned, bookkeeping per work
call, nothing dropped silently, dependency order) is computed for every judged turn at once: a
score column (NaN: does not apply), whether it holds, and what it says, from templates over the
turns' counts and evidence lists. The score is the mean of the components that apply; the
explanation lists the failing components first, then what held.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import Column, TurnScores, json_text, quoted, strings, text

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]

MAX_LISTED = 5
"""Evidence lists in explanations stop after this many entries."""
NO_PLAN = "not applicable: no plan in this turn"
NO_PLAN_EXPECTED = "no plan in this turn; the rubric expects one"


@dataclass(frozen=True, slots=True)
class Limits:
    """The thresholds of one run."""

    max_bookkeeping_ratio: float
    min_tracked_share: float


@dataclass(frozen=True, slots=True, eq=False)
class Evidence:
    """Evidence entries, one sentence each, in turn order (then in the order they are shown)."""

    turn: Ints
    text: pa.Array

    @classmethod
    def of(cls, turn: Ints, sentences: list[str]) -> Evidence:
        """Entries from Python sentences."""
        return cls(np.asarray(turn, dtype=np.int64), pa.array(sentences, pa.string()))

    def at(self, place: Ints) -> Evidence:
        """The entries of the turns with a `place` (>= 0), renumbered to it."""
        keep = place[self.turn] >= 0
        if keep.all():
            return Evidence(place[self.turn], self.text)
        return Evidence(place[self.turn[keep]], self.text.filter(pa.array(keep)))

    def counts(self, rows: int) -> Ints:
        """How many entries each turn has."""
        return np.bincount(self.turn, minlength=rows).astype(np.int64)

    def listed(self, rows: int) -> Column:
        """Each turn's first `MAX_LISTED` entries, then how many more."""
        if not len(self.turn):
            return ""
        head = pc.binary_join(pc.list_slice(self._lists(self.text, rows), 0, MAX_LISTED), ", ")
        more = self.counts(rows) - MAX_LISTED
        return _pick(more > 0, lambda: text(head, " and ", more, " more", rows=rows), head)

    def json(self, rows: int) -> Column:
        """Each turn's entries as a JSON list."""
        if not len(self.turn):
            return "[]"
        values = quoted(self.text)
        return text("[", pc.binary_join(self._lists(values, rows), ", "), "]", rows=rows)

    def _lists(self, values: pa.Array, rows: int) -> pa.Array:
        offsets = np.concatenate(([0], np.cumsum(self.counts(rows)))).astype(np.int32)
        return pa.ListArray.from_arrays(pa.array(offsets), values)


@dataclass(frozen=True, slots=True, eq=False)
class Tally:
    """What the components count, per turn (arrays over turns), and the evidence they show."""

    four_status: Bools
    """The session's plans show items in progress (else: two-status plans, pending / done)."""
    work_calls: Ints
    tracked_calls: Ints
    untracked: Evidence
    snapshots: Ints
    """The turn's own snapshots (not the one carried from earlier turns)."""
    max_in_progress: Ints
    several: Evidence
    completions: Ints
    unworked: Evidence
    plan_calls: Ints
    items: Ints
    dropped: Evidence
    dependency_checks: Ints
    out_of_order: Evidence

    def at(self, rows: Ints) -> Tally:
        """The tally of some turns (ascending), numbered from 0."""
        place = np.full(len(self.work_calls), -1, dtype=np.int64)
        place[rows] = np.arange(len(rows))
        values: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            values[f.name] = value.at(place) if isinstance(value, Evidence) else value[rows]
        return Tally(**values)


@dataclass(frozen=True, slots=True, eq=False)
class Component:
    """One component of every judged turn's adherence."""

    name: str
    score: Floats
    """NaN where it does not apply."""
    holds: Bools
    said: Column | None
    """What it says (null, or None for every turn: nothing)."""
    label: str


def verdicts(tally: Tally | None, limits: Limits, expected: Bools) -> TurnScores:
    """Every turn's verdict; turns without a plan fail only where a plan is `expected`."""
    turns = len(expected)
    judged = np.zeros(0, dtype=np.int64)
    if tally is not None:
        judged = np.flatnonzero((tally.items > 0) & (tally.snapshots > 0))
    # Turns without a plan take one of two texts, by `expected`; the judged ones their own.
    place = expected.astype(np.int64)
    place[judged] = 2 + np.arange(len(judged))
    passed = np.where(expected, 0.0, np.nan)
    score = np.full(turns, np.nan)
    label = explanation = details = pa.array([], pa.string())
    if tally is not None and len(judged):
        mine = _judged(tally.at(judged), limits)
        passed[judged], score[judged] = mine.passed, mine.score
        label, explanation, details = mine.label, mine.explanation, mine.details
    return TurnScores(
        passed=passed,
        score=score,
        label=_placed(("no plan", "no plan"), label, place),
        explanation=_placed((NO_PLAN, NO_PLAN_EXPECTED), explanation, place),
        details=_placed(_NO_PLAN_DETAILS, details, place),
    )


_NO_PLAN_DETAILS = tuple(
    json.dumps({"plan": False, "plan_expected": expected}, sort_keys=True)
    for expected in (False, True)
)


def _judged(tally: Tally, limits: Limits) -> TurnScores:
    """The verdict of turns with a plan."""
    rows = len(tally.work_calls)
    parts = [build(tally, limits) for build in _COMPONENTS]
    total, applied = np.zeros(rows), np.zeros(rows, dtype=np.int64)
    for part in parts:
        applies = ~np.isnan(part.score)
        total, applied = total + np.where(applies, part.score, 0.0), applied + applies
    holds = np.logical_and.reduce([p.holds for p in parts])
    label = np.select([~p.holds for p in parts], [p.label for p in parts], "adherent")
    return TurnScores(
        passed=holds.astype(np.float64),
        score=total / applied,
        label=pa.array(label, pa.string()),
        explanation=_explanation(parts, rows),
        details=_details(tally, parts, rows),
    )


def _explanation(parts: list[Component], rows: int) -> pa.Array:
    """What the failing components say, then what the holding ones say, joined by `; `."""
    said: list[Column] = []
    for holding in (False, True):
        for part in parts:
            shown = part.holds == holding
            if part.said is not None and shown.any():
                said.append(_pick(shown, part.said, pa.scalar(None, pa.string())))
    joined = pc.binary_join_element_wise(*said, "; ", null_handling="skip")
    return joined if isinstance(joined, pa.Array) else strings(joined.as_py(), rows)


# -- the components -----------------------------------------------------------------------------


def _tracked(tally: Tally, limits: Limits) -> Component:
    """(a) The share of work calls made while the plan tracked them."""
    rows = len(tally.work_calls)
    work, tracked = tally.work_calls, tally.tracked_calls
    share = _share(tracked, work)
    holds = ~(share < limits.min_tracked_share)
    where = _pick(tally.four_status, "an item was in progress", "an item was open")
    untracked = _pick(
        tracked < work,
        lambda: text(" (untracked: ", tally.untracked.listed(rows), ")", rows=rows),
        "",
    )
    below = _pick(holds, "", f", below {limits.min_tracked_share:g}")
    said = _pick(
        work == 0,
        "no work calls",
        lambda: text(
            tracked, " of ", work, " work calls made while ", where, untracked, below, rows=rows
        ),
    )
    return Component("tracked_work", share, holds, said, "untracked work")


def _single(tally: Tally, limits: Limits) -> Component:
    """(b) The share of own snapshots with at most one item in progress."""
    rows = len(tally.snapshots)
    snapshots, several = tally.snapshots, tally.several.counts(rows)
    said = _pick(
        several == 0,
        lambda: text(
            "at most one item in progress in ", _plural(snapshots, "snapshot", True), rows=rows
        ),
        lambda: text(
            several,
            " of ",
            snapshots,
            " snapshots had several items in progress (",
            tally.several.listed(rows),
            ")",
            rows=rows,
        ),
    )
    return Component(
        "one_at_a_time", 1 - several / snapshots, several == 0, said, "several in progress"
    )


def _earned(tally: Tally, limits: Limits) -> Component:
    """(c) The share of completions with work since the item went in progress."""
    rows = len(tally.completions)
    completions, lazy = tally.completions, tally.unworked.counts(rows)
    worked = completions - lazy
    listed = _pick(
        lazy > 0, lambda: text(" (not: ", tally.unworked.listed(rows), ")", rows=rows), ""
    )
    said = _pick(
        completions == 0,
        "no item completed",
        lambda: text(
            worked, " of ", completions, " completed items were worked on", listed, rows=rows
        ),
    )
    return Component(
        "worked_on", _share(worked, completions), lazy == 0, said, "completed without work"
    )


def _ratio(tally: Tally, limits: Limits) -> Component:
    """(d) Plan calls per work call, within the limit."""
    rows = len(tally.plan_calls)
    plan, work = tally.plan_calls, tally.work_calls
    limit = limits.max_bookkeeping_ratio
    ratio = _share(plan, work)
    holds = ~(ratio > limit)
    said = _pick(
        work == 0,
        lambda: text(_plural(plan, "plan call"), ", no work calls", rows=rows),
        lambda: text(
            _plural(plan, "plan call"),
            " for ",
            _plural(work, "work call"),
            " (ratio ",
            _formatted(ratio, "{:.2f}"),
            ", ",
            _pick(holds, "within", "above"),
            f" the limit {limit:g})",
            rows=rows,
        ),
    )
    with np.errstate(divide="ignore"):
        score = np.where(work == 0, np.nan, np.where(holds, 1.0, limit / ratio))
    return Component("bookkeeping", score, holds, said, "bookkeeping")


def _dropped(tally: Tally, limits: Limits) -> Component:
    """(e) The share of items not dropped without a word."""
    rows = len(tally.items)
    count, dropped = tally.items, tally.dropped.counts(rows)
    said = _pick(
        dropped == 0,
        lambda: text("no item dropped (", _plural(count, "item"), ")", rows=rows),
        lambda: text(
            dropped,
            " of ",
            count,
            " items dropped without being completed, blocked or failed: ",
            tally.dropped.listed(rows),
            rows=rows,
        ),
    )
    return Component("kept", 1 - dropped / count, dropped == 0, said, "dropped items")


def _ordered(tally: Tally, limits: Limits) -> Component:
    """(f) The share of starts and completions made after their dependencies completed."""
    rows = len(tally.dependency_checks)
    checks, wrong = tally.dependency_checks, tally.out_of_order.counts(rows)
    said = _pick(
        wrong == 0,
        lambda: text(
            "dependency order respected in ", checks, " starts and completions", rows=rows
        ),
        lambda: text(
            wrong,
            " of ",
            checks,
            " starts and completions came before their dependencies ",
            "completed: ",
            tally.out_of_order.listed(rows),
            rows=rows,
        ),
    )
    return Component(
        "dependency_order",
        1 - _share(wrong, checks),
        wrong == 0,
        None if not checks.any() else _pick(checks == 0, pa.scalar(None, pa.string()), said),
        "dependency order",
    )


_COMPONENTS: tuple[Callable[[Tally, Limits], Component], ...] = (
    _tracked,
    _single,
    _earned,
    _ratio,
    _dropped,
    _ordered,
)


# -- the details and the column helpers ---------------------------------------------------------


def _details(tally: Tally, parts: list[Component], rows: int) -> pa.Array:
    """The evidence as JSON objects, as `json.dumps(..., sort_keys=True)` writes them."""
    work, plan = tally.work_calls, tally.plan_calls
    counts = {
        "work_calls": work,
        "tracked_calls": tally.tracked_calls,
        "snapshots": tally.snapshots,
        "max_in_progress": tally.max_in_progress,
        "completions": tally.completions,
        "worked_on": tally.completions - tally.unworked.counts(rows),
        "plan_calls": plan,
        "items": tally.items,
        "dependency_checks": tally.dependency_checks,
    }
    shares = {
        "tracked_share": _share(tally.tracked_calls, work),
        "bookkeeping_ratio": _share(plan, work),
    }
    numbers = {**_written(counts, _whole), **_written(shares, _formatted)}
    components = _written({p.name: p.score for p in parts}, _formatted)
    return json_text(
        {
            **numbers,
            "plan": "true",
            "statuses": _pick(tally.four_status, '"four"', '"two"'),
            "untracked": tally.untracked.json(rows),
            "several_in_progress": tally.several.json(rows),
            "unworked": tally.unworked.json(rows),
            "dropped": tally.dropped.json(rows),
            "out_of_order": tally.out_of_order.json(rows),
            "components": json_text(components, rows),
        },
        rows,
    )


def _formatted(values: Floats, form: str = "{!r}") -> pa.Array:
    """Numbers as `form` writes them, NaN as `null` (each distinct value formatted once)."""
    distinct, index = np.unique(values, return_inverse=True)
    written = ["null" if v != v else form.format(v) for v in distinct.tolist()]
    return pa.array(written, pa.string()).take(pa.array(index.reshape(-1)))


def _written(
    columns: Mapping[str, npt.NDArray[Any]], write: Callable[[npt.NDArray[Any]], pa.Array]
) -> dict[str, pa.Array]:
    """Columns of numbers as text, written together (one conversion for all)."""
    values = list(columns.values())
    rows = len(values[0])
    written = write(np.concatenate(values))
    return {name: written.slice(i * rows, rows) for i, name in enumerate(columns)}


def _whole(values: Ints) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _pick(
    condition: Bools,
    then: Column | pa.Scalar | Callable[[], Column],
    otherwise: Column | pa.Scalar | Callable[[], Column],
) -> Column:
    """`then` where `condition` holds, else `otherwise`; a branch no row takes is not built."""
    if condition.all():
        return _built(then)
    if not condition.any():
        return _built(otherwise)
    return pc.if_else(pa.array(condition), _built(then), _built(otherwise))


def _built(value: Column | pa.Scalar | Callable[[], Column]) -> Any:
    return value() if callable(value) else value


def _share(part: Ints, whole: Ints) -> Floats:
    """`part / whole`, NaN where `whole` is 0."""
    return np.where(whole > 0, part / np.maximum(whole, 1), np.nan)


def _plural(count: Ints, noun: str, every: bool = False) -> Column:
    """`1 call` / `3 calls` (`every`: `the 1 call` / `all 3 calls`)."""
    return _pick(
        count == 1,
        f"the 1 {noun}" if every else f"1 {noun}",
        lambda: text("all " if every else "", count, f" {noun}s", rows=len(count)),
    )


def _placed(constants: tuple[str, ...], values: pa.Array, place: Ints) -> pa.Array:
    """Each turn's text: `constants[place]` for 0 and 1, `values[place - 2]` above."""
    return pa.concat_arrays([pa.array(constants, pa.string()), values]).take(pa.array(place))
