"""The gate's verdict and its evidence: per case, per evaluator, and the noise floor.

Records only (frozen): what each case did on each side, how each evaluator decided, and the
verdict with every repeat's scores; the reports render them and the gate builds them.

A case's outcomes per side are the repeats the evaluator could judge (passed or failed); the
repeats it could not (no evidence) and the errored ones (infrastructure failures) are counted
beside them. A case is compared only when both sides have a judged repeat.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pyarrow as pa

from plangate.ci._budget import BudgetUse
from plangate.ci.gate._stats import Interval


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """One case under one evaluator, both sides."""

    dataset: str
    session_id: str
    turn_index: int
    evaluator: str
    baseline: tuple[bool, ...]
    """Baseline outcomes, one per judged repeat (passed or failed)."""
    candidate: tuple[bool, ...]
    explanation: str
    """The candidate's explanation on its first failing repeat (else its first)."""
    baseline_score: float | None = None
    """Mean score over the baseline's repeats (None where the evaluator gives none)."""
    candidate_score: float | None = None
    noise: tuple[bool, ...] = ()
    """The baseline's outcomes on its noise-floor repeats (fresh seeds); empty without."""
    noise_score: float | None = None
    min_pass_rate: float | None = None
    """The case's own minimum pass rate from the gate file, if any."""
    trace_url: str | None = None
    """The candidate's trace in Phoenix (its first failing repeat), when exported there."""
    baseline_na: int = 0
    """Baseline repeats (noise runs included) the evaluator had no evidence to judge."""
    candidate_na: int = 0
    baseline_errors: int = 0
    """Baseline repeats (noise runs included) that ended in an infrastructure error."""
    candidate_errors: int = 0

    @property
    def why_not_applicable(self) -> str:
        """The explanation of an `n/a` case, said once as not applicable."""
        text = self.explanation
        return text if text.startswith("not applicable") else f"not applicable: {text}"

    @property
    def applicable(self) -> bool:
        """Both sides have a judged repeat: the case can be compared."""
        return bool(self.baseline) and bool(self.candidate)

    @property
    def flaky(self) -> bool:
        """Outcomes disagree across repeats of one side (the baseline's noise runs included)."""
        if not self.applicable:
            return False
        return len(set(self.baseline + self.noise)) > 1 or len(set(self.candidate)) > 1

    @property
    def change(self) -> int:
        """-1 when the candidate passes less often than the baseline, +1 more often, else 0."""
        return pass_change(self.baseline, self.candidate) if self.applicable else 0

    @property
    def below_minimum(self) -> bool:
        """The candidate's pass rate is below the case's own minimum."""
        return self.min_pass_rate is not None and pass_rate(self.candidate) < self.min_pass_rate

    @property
    def status(self) -> str:
        """`error`, `n/a`, `below_minimum`, `flaky`, `regressed`, `improved`, `pass` or `fail`."""
        if not self.applicable:
            errored = (not self.baseline and self.baseline_errors) or (
                not self.candidate and self.candidate_errors
            )
            return "error" if errored else "n/a"
        if self.below_minimum:
            return "below_minimum"
        if self.flaky:
            return "flaky"
        if self.change:
            return "regressed" if self.change < 0 else "improved"
        return "pass" if all(self.candidate) else "fail"

    @property
    def candidate_pass_hat_k(self) -> float:
        """1.0 when the candidate passed every repeat, else 0.0 (pass^k of one case)."""
        return float(all(self.candidate))

    @property
    def baseline_pass_hat_k(self) -> float:
        """1.0 when the baseline passed every repeat, else 0.0."""
        return float(all(self.baseline))


@dataclass(frozen=True, slots=True, kw_only=True)
class NoiseFloor:
    """The baseline against itself (fresh seeds): what chance alone changes."""

    regressed: int
    """Cases the noise runs pass less often than the baseline runs."""
    improved: int
    p_value: float
    """The sign test on these flips; below alpha means the baseline is unstable."""
    score_difference: Interval | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EvaluatorVerdict:
    """One evaluator's decision."""

    evaluator: str
    regressed: int
    """Cases the candidate passes less often than the baseline (flaky ones included)."""
    improved: int
    flaky: int
    cases: int
    p_value: float
    """One-sided exact test that the candidate is worse."""
    baseline_pass_hat_k: float
    candidate_pass_hat_k: float
    candidate_pass_rate: float
    min_pass_rate: float | None
    failed: bool
    reason: str
    score_difference: Interval | None = None
    """Paired bootstrap interval of the mean per-case score change (candidate - baseline)."""
    ratio: Interval | None = None
    """For a measure (`MEASURES`): paired bootstrap interval of candidate / baseline totals."""
    baseline_total: float | None = None
    """For a measure: the sum over the cases measured on both sides of each case's mean."""
    candidate_total: float | None = None
    measured: int = 0
    """For a measure: the cases measured on both sides (the totals' and the ratio's cases)."""
    noise: NoiseFloor | None = None
    p_beyond_noise: float | None = None
    """One-sided exact test that the candidate's worse cases outnumber the noise floor's."""
    below_minimum: int = 0
    """Cases below their own minimum pass rate."""
    not_applicable: int = 0
    """Cases not compared: no judged repeat on a side (no evidence there)."""
    errors: int = 0
    """Cases not compared: every repeat of a side errored."""
    datasets: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per dataset: (baseline pass^k, candidate pass^k)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnError:
    """A replayed turn that ended in an infrastructure failure: evidence of nothing."""

    side: str
    """`baseline` or `candidate`."""
    session_id: str
    turn_index: int
    trial: int
    """The repeat."""
    message: str
    """What failed, as the turn recorded it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The gate's decision with its evidence."""

    passed: bool
    repeats: int
    alpha: float
    evaluators: list[EvaluatorVerdict]
    cases: list[CaseResult] = field(default_factory=list)
    baseline: str = "baseline"
    """The baseline's variant (or stored score table)."""
    candidate: str = "candidate"
    noise_floor: bool = False
    scores: dict[str, pa.Table] = field(default_factory=dict, repr=False)
    """Every repeat's scores per side (`baseline`, `candidate`), to store and compare later."""
    undecided: str | None = None
    """Why the gate cannot decide (too many errors, an evaluator with no applicable case)."""
    errors: tuple[TurnError, ...] = ()
    """Every errored turn of either side."""
    warnings: tuple[str, ...] = ()
    """What a reader should know that is not a failure (answers cut at a token limit)."""
    budget: BudgetUse | None = None
    """The run's budget and what the run spent (None: the gate had no budget)."""

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression, 2 cannot decide."""
        if self.undecided is not None:
            return 2
        return 0 if self.passed else 1

    @property
    def word(self) -> str:
        """`pass`, `regression` or `cannot decide`."""
        return ("pass", "regression", "cannot decide")[self.exit_code]

    def evaluator_word(self, evaluator: EvaluatorVerdict) -> str:
        """`fail`, `pass`, or `undecided` where the gate cannot decide and it did not fail."""
        if evaluator.failed:
            return "fail"
        return "pass" if self.undecided is None else "undecided"


def figure(value: float | None, spec: str) -> str:
    """A number for a report, or "—" where there is none (no case judged: NaN)."""
    return "—" if value is None or math.isnan(value) else f"{value:{spec}}"


MEASURES = frozenset({"latency", "tokens", "cost"})
"""Evaluators whose score is a measurement (seconds, tokens, dollars) rather than a grade: the
gate sums them per side and compares them as a ratio, candidate over baseline."""


def pass_change(before: tuple[bool, ...], after: tuple[bool, ...]) -> int:
    """-1 when `after` passes less often than `before`, +1 more often, else 0."""
    base, new = pass_rate(before), pass_rate(after)
    return (new > base) - (new < base)


def pass_rate(outcomes: tuple[bool, ...]) -> float:
    """The share of repeats that passed; nan for none."""
    return sum(outcomes) / len(outcomes) if outcomes else float("nan")
