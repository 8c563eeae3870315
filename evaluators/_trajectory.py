"""`trajectory_match`: did the turn make the calls its rubric expects, in the expected way?

The turn's tool calls (name and parsed arguments, plan and control tools left out by default)
are compared with the rubric's `required_tools` under the rubric's `order`; each expectation
compares arguments by its own `match` (exact, ignore, subset: `ToolExpectation.matches`).

- strict: the same sequence, call by call; score = the longest matching prefix over the longer
  of the two sequences;
- unordered: a one-to-one matching of calls to expectations that uses every call and every
  expectation; score = matched pairs over the longer of the two;
- subset: every call matches some expectation (an expectation may match several calls);
  score = matching calls over calls (1 without calls);
- superset: every expectation is matched by a distinct call; score = matched expectations over
  expectations.

So a turn passes exactly when its score is 1. The explanation names the first mismatch, with the
call's position in the turn (plan and control calls count in that position).

Computed column-wise: the calls of the turns with a rubric are codes (tool, argument text) and
the expected calls flat indices (`_trajectory_codes`). A strict turn's matching prefix ends at
its first call that does not fit the expected call at its place; a subset turn's calls each fit
some expected call or not; and where a rubric checks each tool it names one way, a maximum
matching is a count per tool (each of its calls fits all of that tool's expected calls or none).
Python compares, call by call (`_trajectory_rows`), only a failing unordered, subset or superset
turn (its explanation lists every mismatch) and a turn whose rubric checks a tool two ways.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from plangate.evaluators._columns import Floats, TurnScores, dumps, json_objects, overlay, strings
from plangate.evaluators._frame import Ints, TraceFrame
from plangate.evaluators._registry import EvaluatorError, evaluator
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators._trajectory_calls import Judged
from plangate.evaluators._trajectory_codes import (
    ORDERS,
    Bools,
    Expectations,
    ToolCodes,
    assign,
    expectations,
    fits,
    tool_codes,
)
from plangate.evaluators._trajectory_rows import Call, verdict
from plangate.evaluators._trajectory_text import Pieces, columns
from plangate.replay.schema import CONTROL_TOOLS, PLAN_TOOLS

IGNORED_TOOLS: tuple[str, ...] = tuple(sorted(PLAN_TOOLS | CONTROL_TOOLS))
"""Left out of the compared sequence by default: plan bookkeeping and `finish`."""
NOT_APPLICABLE = "not applicable: no rubric names the tools this turn must call"
NO_RUBRIC = "no rubric"
STRICT, UNORDERED, SUBSET, SUPERSET = range(len(ORDERS))
FIRST_BAND = 4096
"""Calls the first band of `_prefixes` spans, about: fewer cost more in fixed steps than in
calls."""


@evaluator("trajectory_match", version=2)
def trajectory_match(
    frame: TraceFrame, rubrics: RubricSet, ignore_tools: Iterable[str] = IGNORED_TOOLS
) -> TurnScores:
    """The turn's tool calls against its rubric's required calls: strict, unordered, sub/superset.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with `required_tools` and `order`; turns without required tools get
            no score.
        ignore_tools: Tools left out of the turn's sequence before comparing.

    Returns:
        The verdict of every turn.
    """
    if (
        not isinstance(ignore_tools, Iterable)
        or isinstance(ignore_tools, str)
        or not all(isinstance(t, str) for t in ignore_tools)
    ):
        raise EvaluatorError(
            f"evaluator 'trajectory_match': 'ignore_tools' must be a list of tool names, not "
            f"{ignore_tools!r}"
        )
    turns = len(frame.turns)
    if not rubrics.uses("required_tools"):  # nothing to compare: no call is looked at
        return _not_applicable(strings('{"calls": 0, "ignored_calls": 0}', turns), turns)
    tools = tool_codes(frame, frozenset(ignore_tools))
    assignment = assign(frame.turns, rubrics)
    judged = np.flatnonzero(assignment.slot >= 0)
    if not len(judged):
        return _not_applicable(_counted(frame, tools), turns)
    table = expectations(assignment.rubrics, tools.names)
    shape = table.shape[assignment.slot[judged]]
    distinct, unit = Judged.of(frame, tools, judged, shape).distinct()
    scores = _judge(distinct, table, tools)
    if len(distinct) < len(judged):  # turns with the same rubric and calls, judged once
        scores = _take(scores, unit)
    if len(judged) == turns:
        return scores
    return _among(scores, judged, _not_applicable(_counted(frame, tools), turns))


def _counted(frame: TraceFrame, tools: ToolCodes) -> pa.Array:
    """The details of a turn without a rubric: how many calls it has, and how many left out."""
    turns = len(frame.turns)
    calls = np.bincount(frame.tools.turn[tools.kept], minlength=turns)
    skipped = np.bincount(frame.tools.turn[~tools.kept], minlength=turns)
    return json_objects({"calls": calls, "ignored_calls": skipped}, turns)


def _among(scores: TurnScores, rows: Ints, others: TurnScores) -> TurnScores:
    """`others` with `scores` at `rows`."""
    turns, judged = len(others.passed), len(rows)
    passed, score = others.passed.copy(), others.score.copy()
    passed[rows], score[rows] = scores.passed, scores.score
    return TurnScores(
        passed=passed,
        score=score,
        label=overlay(strings(others.label, turns), rows, strings(scores.label, judged)),
        explanation=overlay(
            strings(others.explanation, turns), rows, strings(scores.explanation, judged)
        ),
        details=overlay(others.details, rows, scores.details),
    )


def _take(scores: TurnScores, rows: Ints) -> TurnScores:
    index = pa.array(rows)
    return TurnScores(
        passed=scores.passed[rows],
        score=scores.score[rows],
        label=strings(scores.label, len(scores.passed)).take(index),
        explanation=strings(scores.explanation, len(scores.passed)).take(index),
        details=scores.details.take(index),
    )


def _not_applicable(details: pa.Array, turns: int) -> TurnScores:
    nothing = np.full(turns, np.nan)
    return TurnScores(
        passed=nothing, score=nothing, label=NO_RUBRIC, explanation=NOT_APPLICABLE, details=details
    )


@dataclass(frozen=True, slots=True, eq=False)
class _Tally:
    """Per judged turn: matched count, score, verdict, and whether Python must compare it."""

    matched: Ints
    score: Floats
    passed: Bools
    python: Bools


def _judge(judged: Judged, table: Expectations, tools: ToolCodes) -> TurnScores:
    """The verdicts of the judged turns: columns, then Python for the few that need it."""
    tally = _tally(judged, table)
    label, explanation, details = columns(
        Pieces.of(tools.names, judged.arguments, table), judged, table, tally.matched, tally.passed
    )
    scores = TurnScores(
        passed=tally.passed.astype(np.float64),
        score=tally.score,
        label=label,
        explanation=explanation,
        details=details,
    )
    return _python(scores, judged, table, tools, np.flatnonzero(tally.python))


def _tally(judged: Judged, table: Expectations) -> _Tally:
    """Matched count, score and verdict of every judged turn, by its rubric's order."""
    order = table.order[judged.slot]
    expected = table.size[judged.slot]
    calls = judged.calls
    strict, subset, superset = order == STRICT, order == SUBSET, order == SUPERSET
    prefix = _prefixes(judged, table, strict, expected)
    fitting, used, pairs = _counts(judged, table, ~strict, expected)
    longest = np.maximum(calls, expected)
    fitting_share = np.divide(fitting, calls, out=np.ones(len(calls)), where=calls > 0)
    score = np.select(
        [strict, subset, superset],
        [prefix / longest, fitting_share, pairs / expected],
        pairs / longest,
    )
    passed = np.select(
        [strict, subset, superset],
        [(prefix == calls) & (prefix == expected), fitting == calls, pairs == expected],
        (pairs == expected) & (pairs == calls),
    )
    matching = (order == UNORDERED) | superset
    return _Tally(
        matched=np.select([strict, subset], [prefix, used], pairs),
        score=score,
        passed=passed,
        python=~strict & (~passed | (matching & ~table.simple[judged.slot])),
    )


def _prefixes(judged: Judged, table: Expectations, strict: Bools, expected: Ints) -> Ints:
    """Per judged turn: how many leading calls fit the expected calls at their places.

    Places are checked in bands of doubling width, each only in the turns still matching, so a
    turn that fails early has few of its calls' arguments parsed. The first band spans about
    `FIRST_BAND` calls (at least one place): a band costs a few fixed steps besides its calls,
    so a few turns (distinct ones, say) are checked at once.
    """
    prefix = np.minimum(judged.calls, expected)
    matching = strict & (prefix > 0)  # turns whose prefix may still end sooner
    low, width = 0, max(1, FIRST_BAND // max(1, int(np.count_nonzero(matching))))
    while matching.any():
        band = (judged.rank >= low) & (judged.rank < low + width)
        rows = np.flatnonzero(band & matching[judged.turn] & (judged.rank < prefix[judged.turn]))
        if not len(rows):
            break
        flat = table.base[judged.slot[judged.turn[rows]]] + judged.rank[rows]
        fit = fits(table, judged.arguments, flat, judged.tool[rows], judged.argument[rows])
        bad = rows[~fit]
        turn = judged.turn[bad]
        first = np.ones(len(bad), dtype=bool)
        first[1:] = turn[1:] != turn[:-1]
        prefix[turn[first]] = judged.rank[bad[first]]
        matching[turn] = False
        low, width = low + width, 2 * width
    return prefix


def _counts(
    judged: Judged, table: Expectations, chosen: Bools, expected: Ints
) -> tuple[Ints, Ints, Ints]:
    """Per judged turn among `chosen`: fitting calls, fitted expected calls, matched pairs.

    A call fits when some expected call accepts it; an expected call is fitted when some call
    fits it; matched pairs is the size of a maximum matching, right where the rubric is simple.
    """
    turns = len(judged.slot)
    calls = np.flatnonzero(chosen[judged.turn])
    if not len(calls):
        nothing = np.zeros(turns, dtype=np.int64)
        return nothing, nothing, nothing
    repeats = expected[judged.turn[calls]]  # one row per (call, expected call of its turn)
    call = np.repeat(calls, repeats)
    place = np.arange(len(call)) - np.repeat(np.cumsum(repeats) - repeats, repeats)
    turn = judged.turn[call]
    fit = fits(
        table, judged.arguments, table.base[judged.slot[turn]] + place, judged.tool[call],
        judged.argument[call],
    )  # fmt: skip
    fitting_calls = np.bincount(call[fit], minlength=len(judged.turn)) > 0
    fitting = np.bincount(judged.turn[fitting_calls], minlength=turns)
    first = np.cumsum(expected) - expected  # per turn: its first (turn, expected call) slot
    hits = np.bincount(first[turn[fit]] + place[fit], minlength=int(expected.sum()))
    flat = np.repeat(table.base[judged.slot] - first, expected) + np.arange(len(hits))
    used = np.add.reduceat((hits > 0).astype(np.int64), first)
    pairs = np.add.reduceat(np.minimum(table.group[flat], hits), first)
    return fitting, used, pairs


def _python(
    scores: TurnScores, judged: Judged, table: Expectations, tools: ToolCodes, rows: Ints
) -> TurnScores:
    """`scores` with the verdicts of the judged turns at `rows` compared call by call."""
    if not len(rows):
        return scores
    picked = np.zeros(len(judged.slot), dtype=bool)
    picked[rows] = True
    actual: dict[int, list[Call]] = {turn: [] for turn in rows.tolist()}
    chosen = np.flatnonzero(picked[judged.turn])
    for turn, number, tool, code in zip(
        judged.turn[chosen].tolist(),
        judged.number[chosen].tolist(),
        judged.tool[chosen].tolist(),
        judged.argument[chosen].tolist(),
        strict=True,
    ):
        call = Call(
            position=number,
            name=tools.names[tool],
            arguments=judged.arguments.parsed(code),
            text=judged.arguments.text(code),
        )
        actual[turn].append(call)
    verdicts = [
        verdict(table.rubrics[judged.slot[turn]], calls, int(judged.skipped[turn]))
        for turn, calls in actual.items()
    ]
    python = TurnScores(
        passed=np.array([float(v.passed) for v in verdicts]),
        score=np.array([v.score for v in verdicts], dtype=np.float64),
        label=pa.array([v.label for v in verdicts], pa.string()),
        explanation=pa.array([v.explanation for v in verdicts], pa.string()),
        details=pa.array(dumps([v.details for v in verdicts]), pa.string()),
    )
    return _among(python, rows, scores)
