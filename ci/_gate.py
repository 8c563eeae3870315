"""The CI gate: replay golden cases with a baseline and a candidate, k times each, and decide.

For every case (a golden turn) and evaluator, each side is replayed k times (repeat r uses the
same seed on both sides, so repeats pair up) and gives the case a pass rate and a pass^k. A case
is worse when the candidate's pass rate is below the baseline's, better when above. Over the
cases, worse against better goes through an exact one-sided sign test (the binomial test on
discordant pairs, McNemar's exact test when k = 1): the gate fails on a significant regression,
or when the candidate's pass rate drops below the evaluator's `min_pass_rate`. A case whose
outcomes disagree across the repeats of one side is flaky: listed apart from the regressions,
and unable to fail the gate on its own (one worse case alone has p = 0.5).
Exit codes: 0 pass, 1 regression, 2 unusable input.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ci._gate_file import GateFile, Side
from ci._stats import Interval, paired_bootstrap, ratio_interval, regression_p_value
from evaluators import RubricSet, evaluate, pass_hat_k
from replay import concat_tables, read_dataset, replay_turn

Case = tuple[str, str, int]
"""(dataset name, session id, turn index)."""
Outcome = tuple[bool, str, float | None]
"""One repeat's result: passed, explanation, score."""


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
    baseline_score: float | None = None
    """Mean score over the baseline's repeats (None where the evaluator gives none)."""
    candidate_score: float | None = None
    """The candidate's explanation on its first failing repeat (else its first)."""

    @property
    def flaky(self) -> bool:
        """Outcomes disagree across repeats of one side."""
        return len(set(self.baseline)) > 1 or len(set(self.candidate)) > 1

    @property
    def change(self) -> int:
        """-1 when the candidate passes less often than the baseline, +1 more often, else 0."""
        base, cand = (
            sum(self.baseline) / len(self.baseline),
            sum(self.candidate) / len(self.candidate),
        )
        return (cand > base) - (cand < base)

    @property
    def status(self) -> str:
        """`flaky`, `regressed`, `improved`, `pass` or `fail`."""
        if self.flaky:
            return "flaky"
        if self.change:
            return "regressed" if self.change < 0 else "improved"
        return "pass" if all(self.candidate) else "fail"


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


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """The gate's decision with its evidence."""

    passed: bool
    repeats: int
    alpha: float
    evaluators: list[EvaluatorVerdict]
    cases: list[CaseResult] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """0 pass, 1 regression."""
        return 0 if self.passed else 1


async def run_gate(gate: GateFile) -> Verdict:
    """Replay, evaluate and compare; the whole gate."""
    datasets = {s.path.name: read_dataset(s.path) for s in gate.datasets}
    rubrics = RubricSet(turns={k: v for s in gate.datasets for k, v in _rubrics(s.path).items()})
    cases = _cases(gate, datasets)
    names = list(gate.evaluators)
    params = {name: rule.params for name, rule in gate.evaluators.items() if rule.params}
    baseline = await _scores(gate, gate.baseline, datasets, cases, names, params, rubrics)
    candidate = await _scores(gate, gate.candidate, datasets, cases, names, params, rubrics)
    results = _compare(baseline, candidate, cases, names)
    verdicts = [_decide(gate, name, [r for r in results if r.evaluator == name]) for name in names]
    return Verdict(
        passed=not any(v.failed for v in verdicts),
        repeats=gate.repeats,
        alpha=gate.alpha,
        evaluators=verdicts,
        cases=results,
    )


def _rubrics(path: Path) -> dict[tuple[str, int], Any]:
    """The golden turns' rubrics (sessions are unique across the shipped datasets)."""
    from ci._eval_cli import dataset_rubrics

    return dict(dataset_rubrics(str(path)).turns)


def _cases(gate: GateFile, datasets: dict[str, Any]) -> list[Case]:
    cases = []
    for selection in gate.datasets:
        dataset = datasets[selection.path.name]
        for row in dataset.turns.to_pylist():
            if selection.sessions and row["session_id"] not in selection.sessions:
                continue
            if selection.turns and row["turn_index"] not in selection.turns:
                continue
            cases.append((selection.path.name, row["session_id"], row["turn_index"]))
    return cases


async def _scores(
    gate: GateFile,
    side: Side,
    datasets: dict[str, Any],
    cases: Sequence[Case],
    names: list[str],
    params: dict[str, dict[str, Any]],
    rubrics: RubricSet,
) -> dict[tuple[Case, str], list[Outcome]]:
    """Per (case, evaluator): the outcome and explanation of every repeat."""
    limit = asyncio.Semaphore(gate.jobs)

    async def one(number: int, case: Case, repeat: int) -> pa.Table:
        name, session_id, turn_index = case
        # Each (case, repeat) gets its own seed, the same on both sides: the runs pair up, and
        # a simulated model's seeded choices vary from case to case as a real model's would.
        seed = gate.seed + repeat * 100_003 + number
        async with limit:
            result = await replay_turn(
                datasets[name], session_id, turn_index, variant=side.variant, model=side.model,
                tools=side.tools, seed=seed,  # type: ignore[arg-type]
            )  # fmt: skip
        assert result.table is not None
        return result.table

    outcomes: dict[tuple[Case, str], list[Outcome]] = {}
    for repeat in range(gate.repeats):
        tables = await asyncio.gather(*(one(n, case, repeat) for n, case in enumerate(cases)))
        scores = evaluate(concat_tables(tables), rubrics, names=names, params=params).to_pylist()
        index = {(r["session_id"], r["turn_index"], r["evaluator"]): r for r in scores}
        for case in cases:
            for name in names:
                row = index[(case[1], case[2], name)]
                outcome = (bool(row["passed"]), row["explanation"], row["score"])
                outcomes.setdefault((case, name), []).append(outcome)
    return outcomes


def _compare(
    baseline: dict[tuple[Case, str], list[Outcome]],
    candidate: dict[tuple[Case, str], list[Outcome]],
    cases: Sequence[Case],
    names: list[str],
) -> list[CaseResult]:
    results = []
    for case in cases:
        for name in names:
            base = baseline[(case, name)]
            cand = candidate[(case, name)]
            failing = next((text for ok, text, _ in cand if not ok), cand[0][1])
            results.append(
                CaseResult(
                    dataset=case[0],
                    session_id=case[1],
                    turn_index=case[2],
                    evaluator=name,
                    baseline=tuple(o[0] for o in base),
                    candidate=tuple(o[0] for o in cand),
                    explanation=failing,
                    baseline_score=_mean_score(base),
                    candidate_score=_mean_score(cand),
                )  # fmt: skip
            )
    return results


def _decide(gate: GateFile, name: str, results: list[CaseResult]) -> EvaluatorVerdict:
    regressed = sum(r.change < 0 for r in results)
    improved = sum(r.change > 0 for r in results)
    p_value = regression_p_value(regressed, improved)
    k = gate.repeats
    base_hat = _mean([pass_hat_k(k, sum(r.baseline), k) for r in results])
    cand_hat = _mean([pass_hat_k(k, sum(r.candidate), k) for r in results])
    rate = _mean([sum(r.candidate) / k for r in results])
    rule = gate.evaluators[name]
    failures = []
    if regressed and p_value < gate.alpha:
        failures.append(
            f"{regressed} case(s) regressed against {improved} improved (p = {p_value:.3g} < "
            f"{gate.alpha})"
        )
    if rule.min_pass_rate is not None and rate < rule.min_pass_rate:
        failures.append(f"pass rate {rate:.1%} is below the minimum {rule.min_pass_rate:.1%}")
    summary = f"{regressed} regressed, {improved} improved, p = {p_value:.3g}; pass rate {rate:.1%}"
    paired = [
        (r.baseline_score, r.candidate_score)
        for r in results
        if r.baseline_score is not None and r.candidate_score is not None
    ]
    difference = paired_bootstrap([c - b for b, c in paired], seed=gate.seed) if paired else None
    ratio = (
        ratio_interval([c for _, c in paired], [b for b, _ in paired], seed=gate.seed)
        if name == "latency" and paired
        else None
    )
    return EvaluatorVerdict(
        evaluator=name, regressed=regressed, improved=improved,
        score_difference=difference, ratio=ratio,
        flaky=sum(r.flaky for r in results), cases=len(results), p_value=p_value,
        baseline_pass_hat_k=base_hat, candidate_pass_hat_k=cand_hat, candidate_pass_rate=rate,
        min_pass_rate=rule.min_pass_rate, failed=bool(failures),
        reason="; ".join(failures) if failures else summary,
    )  # fmt: skip


def _mean_score(outcomes: Sequence[Outcome]) -> float | None:
    scores = [score for _, _, score in outcomes if score is not None]
    return sum(scores) / len(scores) if scores else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")
