"""A score table in brief: per evaluator its turns, passes, mean score; failing turns; pass@k.

What `plangate eval` prints (or, with `--json`, writes as JSON). A pass rate counts the turns
that passed or failed; the ones that were not applicable and the errored ones are counted beside
it, never in it (no applicable turn: no rate).

`SummaryBuilder` takes the scores a batch at a time (`plangate eval` on a source larger than
memory) and never holds them all: per evaluator its counts and exact score sum, the first
`MAX_FAILURES` failures and errors, and per task its tries and passes. Its summary is the same
whatever the batches and their order; `summarize` is the builder fed one table.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators import outcome_repeats, task_outcomes
from plangate.evaluators.scores import (
    DETAILS,
    ERROR,
    EVALUATOR,
    EXPLANATION,
    FAIL,
    LABEL,
    NOT_APPLICABLE,
    OUTCOME,
    PASS,
    SCORE,
    VERSION,
)
from plangate.replay.schema import SESSION_ID, TASK_ID, TURN_INDEX

MAX_FAILURES = 20
"""Failing turns listed in the summary (all are in the scores table)."""
JUDGE = "judge"
"""The LLM judge: its agreement with itself is summed up apart."""
UNSTABLE = "unstable"
"""The judge's label for a turn whose verdict flipped across its samples."""
COMPLETION = "task_completion"
"""The evaluator whose tries make pass@k and pass^k."""
_SCALE = 1126
"""Every finite float64 is a whole multiple of 2**-1126 (2**-1074 with a 53-bit mantissa
shifted down): score sums are kept as exact integers in that unit."""
FAILURE_COLUMNS = [SESSION_ID, TURN_INDEX, EVALUATOR, LABEL, EXPLANATION]
"""A failure in the summary (in this order)."""
FAILURE_ORDER = (EVALUATOR, SESSION_ID, TURN_INDEX)
"""Which failures are listed: the first in this order."""
ERROR_COLUMNS = [SESSION_ID, TURN_INDEX, EVALUATOR, EXPLANATION]
_JUDGE_COLUMNS = [SESSION_ID, TURN_INDEX, LABEL, EXPLANATION, DETAILS]
TASK_COLUMNS = [EVALUATOR, OUTCOME, TASK_ID, SESSION_ID, TURN_INDEX]
"""What `task_outcomes` reads."""
_COMPACT = 64
"""Per-task counts from this many batches are folded into one frame."""


def summarize(scores: pa.Table) -> dict[str, Any]:
    """Per evaluator: turns, passes, pass rate, mean score; and pass@k / pass^k over repeats."""
    builder = SummaryBuilder()
    builder.add(scores)
    return builder.summary()


@dataclass(slots=True)
class _Tally:
    """One evaluator's counts so far."""

    version: int
    turns: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    scored: int = 0
    """Rows with a score (the mean's denominator)."""
    exact: int = 0
    """The sum of the finite scores, in units of 2**-_SCALE."""
    special: float = 0.0
    """The sum of the scores that are not finite (none, in a sane table)."""

    def add(self, outcomes: dict[str, int], scores: npt.NDArray[np.float64]) -> None:
        """Count rows of this evaluator: their outcomes, and their scores (NaN: none)."""
        self.turns += sum(outcomes.values())
        self.outcomes.update(outcomes)
        scores = scores[~np.isnan(scores)]
        finite = np.isfinite(scores)
        self.scored += len(scores)
        self.exact += _exact_sum(scores[finite])
        if not finite.all():
            self.special += float(scores[~finite].sum())

    def mean(self) -> float | None:
        if not self.scored or self.special != self.special:
            return None
        if self.special:
            return self.special
        return float(Fraction(self.exact, self.scored << _SCALE))


class SummaryBuilder:
    """A summary built from score tables a batch at a time, in bounded memory.

    Equal to `summarize` of all the batches as one table, whatever the batches (so long as a
    turn's rows are in one batch, as `score_batches` gives them): failures are
    the first `MAX_FAILURES` by evaluator, session and turn; errored turns the first by session
    and turn; mean scores are the exactly rounded mean of the exact sum; pass@k and pass^k add
    each task's tries across batches (a task's repeats may be in different batches).
    """

    def __init__(self) -> None:
        self._tallies: dict[str, _Tally] = {}
        self._failures: list[dict[str, Any]] = []
        self._failures_total = 0
        self._errors: dict[tuple[str, int], dict[str, Any]] = {}
        self._errors_total = 0
        self._tasks: list[pd.DataFrame] = []
        self._completion = False
        self._judge = _JudgeTally()

    def add(self, scores: pa.Table) -> None:
        """Count one score table (a batch of turns; any part of the whole)."""
        if not scores.num_rows:
            return
        names = scores.column(EVALUATOR).combine_chunks().dictionary_encode()
        codes = names.indices.to_numpy(zero_copy_only=False)
        outcomes = scores.column(OUTCOME).combine_chunks().dictionary_encode()
        kinds = np.asarray(outcomes.dictionary.to_pylist(), dtype=object)
        values = scores.column(SCORE).to_numpy(zero_copy_only=False).astype("float64")
        versions = scores.column(VERSION).to_numpy(zero_copy_only=False)
        for code, name in enumerate(names.dictionary.to_pylist()):
            rows = codes == code
            found, counts = np.unique(
                outcomes.indices.to_numpy(zero_copy_only=False)[rows], return_counts=True
            )
            tally = self._tallies.setdefault(name, _Tally(version=int(versions[rows.argmax()])))
            tally.add(dict(zip(kinds[found], counts.tolist(), strict=True)), values[rows])
        self._add_failures(scores)
        self._add_errors(scores)
        self._judge.add(scores)
        completion = scores.select(TASK_COLUMNS).filter(pc.equal(scores[EVALUATOR], COMPLETION))
        if completion.num_rows:
            self._completion = True
            self._tasks.append(task_outcomes(completion, COMPLETION))
            if len(self._tasks) >= _COMPACT:
                self._tasks = [_fold(self._tasks)]

    def _add_failures(self, scores: pa.Table) -> None:
        failed = scores.select(FAILURE_COLUMNS).filter(pc.equal(scores[OUTCOME], FAIL))
        self._failures_total += failed.num_rows
        if not failed.num_rows:
            return
        best = failed.sort_by([(c, "ascending") for c in FAILURE_ORDER]).slice(0, MAX_FAILURES)
        merged = self._failures + best.to_pylist()
        merged.sort(key=lambda f: tuple(f[c] for c in FAILURE_ORDER))
        self._failures = merged[:MAX_FAILURES]

    def _add_errors(self, scores: pa.Table) -> None:
        """Errored turns, once whatever the evaluators (a turn's rows come in one batch)."""
        errored = scores.select(ERROR_COLUMNS).filter(pc.equal(scores[OUTCOME], ERROR))
        if not errored.num_rows:
            return
        ordered = errored.sort_by([(c, "ascending") for c in ERROR_COLUMNS[:3]])
        turns = ordered.group_by(ERROR_COLUMNS[:2], use_threads=False).aggregate(
            [(EXPLANATION, "first")]
        )
        self._errors_total += turns.num_rows
        for row in turns.slice(0, MAX_FAILURES).to_pylist():
            key = (row[SESSION_ID], row[TURN_INDEX])
            self._errors[key] = {
                "session_id": key[0], "turn_index": key[1], "error": row[f"{EXPLANATION}_first"],
            }  # fmt: skip
        if len(self._errors) > MAX_FAILURES:
            kept = sorted(self._errors)[:MAX_FAILURES]
            self._errors = {key: self._errors[key] for key in kept}

    def summary(self) -> dict[str, Any]:
        """The summary of everything added so far (what `summarize` returns)."""
        summary: dict[str, Any] = {
            "evaluators": [_row(name, self._tallies[name]) for name in sorted(self._tallies)],
            "failures": list(self._failures),
            "failures_total": self._failures_total,
            "errors": [self._errors[key] for key in sorted(self._errors)],
            "errors_total": self._errors_total,
        }
        if self._completion:
            summary["repeats"] = _repeats(_fold(self._tasks))
        if self._judge.asked:
            summary["judge"] = self._judge.summary()
        return summary


@dataclass(slots=True)
class _JudgeTally:
    """The judge's agreement with itself: over the turns it was asked more than once."""

    asked: int = 0
    """Turns the judge gave replies for."""
    repeated: int = 0
    """Of them, the turns asked more than once."""
    agreement: Fraction = Fraction(0)
    """The sum of their agreements (the share of samples on the majority's side)."""
    unstable: list[dict[str, Any]] = field(default_factory=list)
    """The first `MAX_FAILURES` turns whose verdict flipped (by session and turn)."""
    unstable_total: int = 0

    def add(self, scores: pa.Table) -> None:
        judged = scores.filter(pc.equal(scores[EVALUATOR], JUDGE)).select(_JUDGE_COLUMNS)
        for row in judged.filter(pc.is_valid(judged[DETAILS])).to_pylist():
            details = json.loads(row[DETAILS])
            self.asked += 1
            if details.get("samples", 1) > 1 and details.get("agreement") is not None:
                self.repeated += 1
                self.agreement += Fraction(details["agreement"])
            if row[LABEL] == UNSTABLE:
                self.unstable_total += 1
                self.unstable.append({k: row[k] for k in (SESSION_ID, TURN_INDEX, EXPLANATION)})
        self.unstable.sort(key=lambda u: (u[SESSION_ID], u[TURN_INDEX]))
        del self.unstable[MAX_FAILURES:]

    def summary(self) -> dict[str, Any]:
        mean = float(self.agreement / self.repeated) if self.repeated else None
        return {
            "turns": self.asked, "repeated_turns": self.repeated, "mean_agreement": mean,
            "unstable": self.unstable, "unstable_total": self.unstable_total,
        }  # fmt: skip


def _row(name: str, tally: _Tally) -> dict[str, Any]:
    passed, failed = tally.outcomes[PASS], tally.outcomes[FAIL]
    return {
        "evaluator": name,
        "version": tally.version,
        "turns": tally.turns,
        "passed": passed,
        "failed": failed,
        "not_applicable": tally.outcomes[NOT_APPLICABLE],
        "errors": tally.outcomes[ERROR],
        "pass_rate": passed / (passed + failed) if passed + failed else None,
        "mean_score": tally.mean(),
    }


def _exact_sum(values: npt.NDArray[np.float64]) -> int:
    """The exact sum of finite floats, as a whole number of 2**-_SCALE (order does not matter)."""
    mantissas, exponents = np.frexp(values)
    whole = (mantissas * 2.0**53).astype(np.int64)  # exact: |mantissa| < 1 has 53 bits
    total = 0
    for exponent in np.unique(exponents):
        chosen = whole[exponents == exponent]
        # Halves of 26 and 27 bits: their sums cannot overflow int64 below 2**36 rows.
        high, low = chosen >> 26, chosen & ((1 << 26) - 1)
        part = (int(high.sum()) << 26) + int(low.sum())
        total += part << (int(exponent) - 53 + _SCALE)
    return total


def _fold(parts: list[pd.DataFrame]) -> pd.DataFrame:
    """Per task `n` and `c`, summed over batches, tasks sorted (as `task_outcomes` sorts)."""
    if not parts:
        return pd.DataFrame({"n": pd.Series(dtype="int64"), "c": pd.Series(dtype="int64")})
    return pd.concat(parts).groupby(level=0, sort=True).sum()


def _repeats(outcomes: pd.DataFrame) -> list[dict[str, Any]]:
    """pass@k and pass^k for k = 1 to the most tries of a task (as `repeat_scores`)."""
    return [
        {"k": r.k, "pass_at_k": r.pass_at_k, "pass_hat_k": r.pass_hat_k, "tasks": r.tasks}
        for r in outcome_repeats(outcomes)
    ]
