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
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._registry import evaluator
from plangate.evaluators._rubric import Rubric, RubricSet, ToolExpectation
from plangate.evaluators.scores import (
    DETAILS,
    EXPLANATION,
    LABEL,
    PASSED,
    RESULT_COLUMNS,
    SCORE,
    TURN_KEY,
)
from plangate.replay.schema import (
    CONTROL_TOOLS,
    PLAN_TOOLS,
    SESSION_ID,
    TOOL_ARGS,
    TURN_INDEX,
)

IGNORED_TOOLS: tuple[str, ...] = tuple(sorted(PLAN_TOOLS | CONTROL_TOOLS))
"""Left out of the compared sequence by default: plan bookkeeping and `finish`."""
MAX_ARGUMENT_CHARS = 80


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """One tool call of the turn as compared."""

    position: int
    """1-based position among all the turn's tool calls."""
    name: str
    """Tool name."""
    arguments: Mapping[str, Any] | None
    """Parsed arguments (None: not a JSON object)."""
    text: str
    """Canonical argument text, for explanations."""

    def describe(self) -> str:
        """`name({...})`, arguments cut to `MAX_ARGUMENT_CHARS`."""
        text = (
            self.text
            if len(self.text) <= MAX_ARGUMENT_CHARS
            else self.text[: MAX_ARGUMENT_CHARS - 1] + "…"
        )
        return f"{self.name}({text})"


@dataclass(slots=True)
class Comparison:
    """The outcome of comparing one turn: score, mismatches in order, matched count."""

    score: float
    matched: int
    mismatches: list[str] = field(default_factory=list)


@evaluator("trajectory_match", version=2)
def trajectory_match(
    frame: TraceFrame, rubrics: RubricSet, ignore_tools: Iterable[str] = IGNORED_TOOLS
) -> pd.DataFrame:
    """The turn's tool calls against its rubric's required calls: strict, unordered, sub/superset.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with `required_tools` and `order`; turns without required tools get
            no score.
        ignore_tools: Tools left out of the turn's sequence before comparing.

    Returns:
        One row per turn.
    """
    ignored = frozenset(ignore_tools)
    if not rubrics.uses("required_tools"):  # nothing to compare: skip parsing every call
        keys = frame.turn_frame[TURN_KEY].itertuples(index=False)
        return pd.DataFrame(
            [_row((str(s), int(t)), None, [], 0) for s, t in keys], columns=RESULT_COLUMNS
        )
    calls = _calls_by_turn(frame, ignored)
    rows = []
    for session_id, turn_index in frame.turn_frame[TURN_KEY].itertuples(index=False):
        key = (str(session_id), int(turn_index))
        rubric = rubrics.lookup(*key)
        actual, skipped = calls.get(key, ([], 0))
        rows.append(_row(key, rubric, actual, skipped))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _calls_by_turn(
    frame: TraceFrame, ignored: frozenset[str]
) -> dict[tuple[str, int], tuple[list[Call], int]]:
    """Per turn: the compared calls, and how many calls were left out."""
    tools = frame.tool_frame
    names = tools["tool"]
    kept = ~names.isin(ignored)
    skipped = (~kept).groupby([tools[SESSION_ID], tools[TURN_INDEX]]).sum()
    out: dict[tuple[str, int], tuple[list[Call], int]] = {
        (str(s), int(t)): ([], int(n)) for (s, t), n in skipped.items()
    }
    chosen = tools[kept]
    for session, turn, position, name, text in zip(
        chosen[SESSION_ID],
        chosen[TURN_INDEX],
        chosen["call"],
        names[kept],
        chosen[TOOL_ARGS].fillna("").astype(str),
        strict=True,
    ):
        call = Call(position=int(position) + 1, name=name, arguments=_parse(text), text=text)
        out[(str(session), int(turn))][0].append(call)
    return out


def _row(
    key: tuple[str, int], rubric: Rubric | None, actual: list[Call], skipped: int
) -> dict[str, Any]:
    base = {SESSION_ID: key[0], TURN_INDEX: key[1]}
    if rubric is None or not rubric.required_tools:
        return {
            **base,
            SCORE: None,
            PASSED: None,
            LABEL: "no rubric",
            EXPLANATION: "not applicable: no rubric names the tools this turn must call",
            DETAILS: {"calls": len(actual), "ignored_calls": skipped},
        }
    expected = list(rubric.required_tools)
    result = _COMPARE[rubric.order](actual, expected)
    passed = not result.mismatches
    summary = (
        f"{result.matched} of {len(expected)} expected calls matched ({rubric.order}) "
        f"in {len(actual)} calls"
    )
    if skipped:
        summary += f" ({skipped} plan/control calls left out)"
    explanation = summary if passed else f"{result.mismatches[0]}; {summary}"
    if len(result.mismatches) > 1:
        explanation += f"; {len(result.mismatches) - 1} more mismatches"
    return {
        **base,
        SCORE: result.score,
        PASSED: passed,
        LABEL: "match" if passed else "mismatch",
        EXPLANATION: explanation,
        DETAILS: {
            "order": rubric.order,
            "expected": [e.describe() for e in expected],
            "actual": [c.describe() for c in actual],
            "matched": result.matched,
            "mismatches": result.mismatches,
            "calls": len(actual),
            "ignored_calls": skipped,
        },
    }


# -- the four orders ---------------------------------------------------------------------------


def _strict(actual: Sequence[Call], expected: Sequence[ToolExpectation]) -> Comparison:
    prefix = 0
    for call, expectation in zip(actual, expected, strict=False):
        if not expectation.matches(call.name, call.arguments):
            break
        prefix += 1
    longest = max(len(actual), len(expected))
    result = Comparison(score=prefix / longest if longest else 1.0, matched=prefix)
    if prefix < len(actual) and prefix < len(expected):
        call, expectation = actual[prefix], expected[prefix]
        result.mismatches.append(
            f"call {call.position} is {call.describe()} but the rubric expects "
            f"{expectation.describe()}"
        )
    elif prefix < len(expected):
        result.mismatches.append(f"missing {expected[prefix].describe()}")
    elif prefix < len(actual):
        result.mismatches.append(f"unexpected call {_at(actual[prefix])}")
    return result


def _unordered(actual: Sequence[Call], expected: Sequence[ToolExpectation]) -> Comparison:
    pairs = _matching(actual, expected)
    longest = max(len(actual), len(expected))
    result = Comparison(score=len(pairs) / longest if longest else 1.0, matched=len(pairs))
    result.mismatches += _missing(expected, pairs.values())
    result.mismatches += _unexpected(actual, pairs.keys())
    return result


def _subset(actual: Sequence[Call], expected: Sequence[ToolExpectation]) -> Comparison:
    fits = [
        i for i, c in enumerate(actual) if any(e.matches(c.name, c.arguments) for e in expected)
    ]
    used = {j for c in actual for j, e in enumerate(expected) if e.matches(c.name, c.arguments)}
    result = Comparison(score=len(fits) / len(actual) if actual else 1.0, matched=len(used))
    result.mismatches += _unexpected(actual, fits)
    return result


def _superset(actual: Sequence[Call], expected: Sequence[ToolExpectation]) -> Comparison:
    pairs = _matching(actual, expected)
    result = Comparison(score=len(pairs) / len(expected), matched=len(pairs))
    result.mismatches += _missing(expected, pairs.values())
    return result


_COMPARE: dict[str, Callable[[Sequence[Call], Sequence[ToolExpectation]], Comparison]] = {
    "strict": _strict,
    "unordered": _unordered,
    "subset": _subset,
    "superset": _superset,
}


def _matching(actual: Sequence[Call], expected: Sequence[ToolExpectation]) -> dict[int, int]:
    """A maximum one-to-one matching of calls to expectations (augmenting paths; counts are small).

    Expectations are served in rubric order and each tries the earliest free call first, so the
    matching follows the turn's order where it can.

    Returns:
        Matched call index → expectation index.
    """
    fits = [
        [i for i, call in enumerate(actual) if expectation.matches(call.name, call.arguments)]
        for expectation in expected
    ]
    owner: dict[int, int] = {}

    def claim(j: int, seen: set[int]) -> bool:
        for i in fits[j]:
            if i in seen:
                continue
            seen.add(i)
            if i not in owner or claim(owner[i], seen):
                owner[i] = j
                return True
        return False

    for j in range(len(expected)):
        claim(j, set())
    return owner


def _missing(expected: Sequence[ToolExpectation], matched: Iterable[int]) -> list[str]:
    done = set(matched)
    return [f"missing {e.describe()}" for j, e in enumerate(expected) if j not in done]


def _unexpected(actual: Sequence[Call], matched: Iterable[int]) -> list[str]:
    done = set(matched)
    return [f"unexpected call {_at(c)}" for i, c in enumerate(actual) if i not in done]


def _at(call: Call) -> str:
    return f"{call.describe()} (call {call.position})"


def _parse(text: str) -> Mapping[str, Any] | None:
    if not text:
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
