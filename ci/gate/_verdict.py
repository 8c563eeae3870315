"""The gate's verdict and its evidence: per case, per evaluator, and the noise floor.

Records only (frozen): what each case did on each side, how each evaluator decided, and the
verdict with every repeat's scores; the reports render them and the gate builds them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from plangate.ci.gate._stats import Interval


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """One case under one evaluator, both sides."""

    dataset: str
    session_id: str
    turn_index: int
    evaluator: str
    baseline: tuple[bool, ...]
    """Baseline outcomes, one per repeat."""
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

    @property
    def flaky(self) -> bool:
        """Outcomes disagree across repeats of one side (the baseline's noise runs included)."""
        return len(set(self.baseline + self.noise)) > 1 or len(set(self.candidate)) > 1

    @property
    def change(self) -> int:
        """-1 when the candidate passes less often than the baseline, +1 more often, else 0."""
        return pass_change(self.baseline, self.candidate)

    @property
    def below_minimum(self) -> bool:
        """The candidate's pass rate is below the case's own minimum."""
        return self.min_pass_rate is not None and pass_rate(self.candidate) < self.min_pass_rate

    @property
    def status(self) -> str:
        """`below_minimum`, `flaky`, `regressed`, `improved`, `pass` or `fail`."""
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
    """For latency: paired bootstrap interval of candidate / baseline wall time."""
    noise: NoiseFloor | None = None
    p_beyond_noise: float | None = None
    """One-sided exact test that the candidate's worse cases outnumber the noise floor's."""
    below_minimum: int = 0
    """Cases below their own minimum pass rate."""
    datasets: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per dataset: (baseline pass^k, candidate pass^k)."""


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

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression."""
        return 0 if self.passed else 1


def pass_change(before: tuple[bool, ...], after: tuple[bool, ...]) -> int:
    """-1 when `after` passes less often than `before`, +1 more often, else 0."""
    base, new = pass_rate(before), pass_rate(after)
    return (new > base) - (new < base)


def pass_rate(outcomes: tuple[bool, ...]) -> float:
    """The share of repeats that passed; nan for none."""
    return sum(outcomes) / len(outcomes) if outcomes else float("nan")
