"""`trajectory_match` one turn at a time, in Python: for the few turns the columns do not cover.

The column-wise evaluator (`_trajectory.py`) settles strict turns, and passing turns of the
other orders, by itself; a failing unordered, subset or superset turn (whose explanation lists
its mismatches), or a turn whose rubric names one tool with different argument checks (which
needs a real matching), is compared here, call by call.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plangate.evaluators._rubric import Rubric, ToolExpectation

MAX_ARGUMENT_CHARS = 80
"""A call's arguments are cut to this many characters in explanations."""


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
    """Argument text as recorded, for explanations."""

    def describe(self) -> str:
        """`name({...})`, arguments cut to `MAX_ARGUMENT_CHARS`."""
        return f"{self.name}({cut(self.text)})"


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One turn's verdict as the Python comparison gives it."""

    score: float
    passed: bool
    label: str
    explanation: str
    details: dict[str, Any]


@dataclass(slots=True)
class Comparison:
    """The outcome of comparing one turn: score, mismatches in order, matched count."""

    score: float
    matched: int
    mismatches: list[str] = field(default_factory=list)


def cut(text: str) -> str:
    """Argument text cut to `MAX_ARGUMENT_CHARS` (an ellipsis marks the cut)."""
    if len(text) <= MAX_ARGUMENT_CHARS:
        return text
    return text[: MAX_ARGUMENT_CHARS - 1] + "…"


def parse(text: str) -> Mapping[str, Any] | None:
    """A call's arguments as a mapping; None when empty, not JSON or not an object."""
    if not text:
        return None
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def summary(matched: int, expected: int, order: str, calls: int, skipped: int) -> str:
    """The explanation's closing clause (all of it for a passing turn)."""
    text = f"{matched} of {expected} expected calls matched ({order}) in {calls} calls"
    if skipped:
        text += f" ({skipped} plan/control calls left out)"
    return text


def verdict(rubric: Rubric, actual: Sequence[Call], skipped: int) -> Verdict:
    """Compare one turn's calls with its rubric (which has required tools)."""
    expected = list(rubric.required_tools)
    result = _COMPARE[rubric.order](actual, expected)
    passed = not result.mismatches
    closing = summary(result.matched, len(expected), rubric.order, len(actual), skipped)
    explanation = closing if passed else f"{result.mismatches[0]}; {closing}"
    if len(result.mismatches) > 1:
        explanation += f"; {len(result.mismatches) - 1} more mismatches"
    return Verdict(
        score=result.score,
        passed=passed,
        label="match" if passed else "mismatch",
        explanation=explanation,
        details={
            "order": rubric.order,
            "expected": [e.describe() for e in expected],
            "actual": [c.describe() for c in actual],
            "matched": result.matched,
            "mismatches": result.mismatches,
            "calls": len(actual),
            "ignored_calls": skipped,
        },
    )


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
