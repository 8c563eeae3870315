"""The CI gate: replay golden cases with a baseline and a candidate, k times each, and decide.

For every case (a golden turn) and evaluator, each side is replayed k times (repeat r uses the
same seed on both sides, so repeats pair up) and gives the case a pass rate and a pass^k. A case
is worse when the candidate's pass rate is below the baseline's, better when above. Over the
cases, worse against better goes through an exact one-sided sign test (the binomial test on
discordant pairs, McNemar's exact test when k = 1).

The noise floor: the baseline is replayed k more times with fresh seeds and compared with itself
the same way. Its worse cases are what chance alone produces, so a regression must also beat
them: the candidate's worse cases against the noise floor's, in a second exact binomial test.
The gate fails on an evaluator when both tests are significant, when the candidate's pass rate
drops below the evaluator's `min_pass_rate`, or when a case drops below its own minimum. A case
whose outcomes disagree across the repeats of one side (the noise runs included) is flaky:
listed apart from the regressions, and unable to fail the gate on its own.

A side can also be a stored score table (one written by an earlier gate run), so a pull request
is compared with what main scored without replaying main again.

Only judged repeats count: a repeat where the evaluator had no evidence (`n/a`) or whose turn
ended in an infrastructure error is left out, and a case is compared only when both sides have a
judged repeat. The gate cannot decide (exit 2) when a side has more errored turns than
`gate.max_errors` (default 0: a dead model endpoint is never a verdict), or when an evaluator has
no applicable case on a side (unless `allow_not_applicable`); its reports still say why.
With a budget (`gate.budget_tokens`, `gate.budget_usd`, or the command's flags), one budget
covers both sides and every repeat: once the finished turns have spent it, the turns left are not
run, and the gate cannot decide (a verdict needs every turn); the finished turns' scores are kept.
Exit codes: 0 pass, 1 regression, 2 unusable input or cannot decide.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from plangate.ci._budget import RunBudget, check_priceable, check_recording_priced
from plangate.ci._turns import recorded_spans
from plangate.ci.gate._cases import gate_cases, gate_rubrics
from plangate.ci.gate._gate_file import GateFile, GateFileError, Side
from plangate.ci.gate._replays import SpanProcessors, replay_scores
from plangate.ci.gate._scores import (
    Case,
    Outcome,
    Runs,
    read_scores,
    runs_from_scores,
)
from plangate.ci.gate._stats import (
    Interval,
    paired_bootstrap,
    ratio_interval,
    regression_p_value,
)
from plangate.ci.gate._verdict import (
    MEASURES,
    CaseResult,
    EvaluatorVerdict,
    NoiseFloor,
    TurnError,
    Verdict,
    pass_change,
    pass_rate,
)
from plangate.evaluators import pass_hat_k
from plangate.evaluators.scores import (
    APPLICABLE,
    ERROR,
    EXPLANATION,
    FAIL,
    NOT_APPLICABLE,
    OUTCOME,
    PASS,
)
from plangate.replay import CASSETTE_MODELS, read_dataset
from plangate.replay.schema import SESSION_ID, TRIAL, TURN_INDEX


async def run_gate(gate: GateFile, *, span_processors: SpanProcessors | None = None) -> Verdict:
    """Replay (or read), evaluate and compare: the whole gate.

    Args:
        gate: The gate file.
        span_processors: Where else each replayed repeat's spans go, besides the trace table
            the gate scores (e.g. an export to Phoenix): called once per replayed repeat.
    """
    datasets = {s.path.name: read_dataset(s.path) for s in gate.datasets}
    rubrics = gate_rubrics(gate, datasets)
    cases = gate_cases(gate, datasets)
    names = list(gate.evaluators)
    k = gate.repeats
    baseline_repeats = 2 * k if gate.noise_floor else k
    budget = _budget(gate, datasets, cases)
    side_scores = {}
    warnings: list[str] = []
    for name, side, repeats in (
        ("baseline", gate.baseline, baseline_repeats),
        ("candidate", gate.candidate, k),
    ):
        if side.scores is not None:
            side_scores[name] = read_scores(side.scores, cases, names)
        else:
            side_scores[name] = await replay_scores(
                gate, side, datasets, cases, names, rubrics, repeats=repeats,
                span_processors=span_processors, label=name, warnings=warnings, budget=budget,
            )  # fmt: skip
    baseline = runs_from_scores(side_scores["baseline"], cases, names)
    candidate = runs_from_scores(side_scores["candidate"], cases, names)
    noise: Runs | None = None
    if gate.noise_floor:
        baseline, noise = _split_noise(baseline, gate.baseline)
    results = _compare(gate, baseline, candidate, noise, cases, names)
    verdicts = [_decide(gate, name, [r for r in results if r.evaluator == name]) for name in names]
    errors = tuple(e for side, table in side_scores.items() for e in turn_errors(side, table))
    if budget is not None and budget.not_run:  # the budget first: it is why the rest is missing
        ran = [e for e in errors if not _not_run(e, budget)]
        undecided: str | None = "; ".join([_over_budget(budget), *_error_reasons(gate, ran)])
    else:
        undecided = _undecided(gate, errors, results)
    return Verdict(
        passed=undecided is None and not any(v.failed for v in verdicts),
        undecided=undecided,
        errors=errors,
        warnings=tuple(warnings),
        repeats=k,
        alpha=gate.alpha,
        evaluators=verdicts,
        cases=results,
        baseline=gate.baseline.label,
        candidate=gate.candidate.label,
        noise_floor=gate.noise_floor,
        scores=side_scores,
        budget=budget.use() if budget is not None else None,
    )


def _budget(gate: GateFile, datasets: dict[str, Any], cases: Sequence[Case]) -> RunBudget | None:
    """The run's budget (None without one), checked before anything runs.

    A side that replays plangate's agent from the cassette spends what the recording did.
    """
    budget = RunBudget.of(gate.budget)
    if not budget.limited:
        return None
    for name, side in (("baseline", gate.baseline), ("candidate", gate.candidate)):
        if side.scores is not None:
            continue
        where = f"{gate.path}: {name}.model"
        check_priceable(budget, side.model, where)
        if side.model in CASSETTE_MODELS and side.agent is None:
            for dataset, chosen in _by_dataset(cases).items():
                check_recording_priced(budget, recorded_spans(datasets[dataset], chosen), where)
    return budget


def _by_dataset(cases: Sequence[Case]) -> dict[str, list[tuple[str, int]]]:
    chosen: dict[str, list[tuple[str, int]]] = {}
    for dataset, session, turn in cases:
        chosen.setdefault(dataset, []).append((session, turn))
    return chosen


def _over_budget(budget: RunBudget) -> str:
    """Why a gate whose budget stopped it cannot decide."""
    total = budget.not_run + budget.finished
    advice = (
        "raise the budget (--budget-tokens, --budget-usd) or select fewer cases; "
        if budget.broken is None  # a budget that cannot be kept says what to do itself
        else ""
    )
    return (
        f"{budget.reason()}: {budget.not_run} of {total} turns not run, and a verdict needs "
        f"every turn; {advice}the finished turns' scores are kept"
    )


def _not_run(error: TurnError, budget: RunBudget) -> bool:
    """A turn the budget did not run (as `replay_scores` keyed it), not one that failed."""
    return (error.side, error.session_id, error.turn_index, error.trial) in budget.skipped


def turn_errors(side: str, scores: pa.Table) -> list[TurnError]:
    """The turns of one side's scores that errored, once per turn and repeat."""
    seen: dict[tuple[str, int, int], TurnError] = {}
    rows = scores.select([SESSION_ID, TURN_INDEX, TRIAL, OUTCOME, EXPLANATION]).to_pylist()
    for row in rows:
        key = (row[SESSION_ID], row[TURN_INDEX], row[TRIAL] or 0)
        if row[OUTCOME] == ERROR and key not in seen:
            seen[key] = TurnError(
                side=side, session_id=key[0], turn_index=key[1], trial=key[2],
                message=row[EXPLANATION] or "",
            )  # fmt: skip
    return list(seen.values())


def _undecided(
    gate: GateFile, errors: Sequence[TurnError], results: Sequence[CaseResult]
) -> str | None:
    """Why the evidence cannot give a verdict, or None when it can."""
    reasons = _error_reasons(gate, errors)
    if reasons:  # with the model down, every evaluator is empty too: say the cause only
        return "; ".join(reasons)
    for name, rule in gate.evaluators.items():
        cases = [r for r in results if r.evaluator == name]
        if rule.max_ratio is not None and not _paired_scores(cases):
            reasons.append(
                f"evaluator {name!r} has a max_ratio but no case measured on both sides: "
                "nothing to compare"
            )
        for side in ("baseline", "candidate"):
            judged_here = any(getattr(r, side) for r in cases)
            if rule.allow_not_applicable or rule.max_ratio is not None or judged_here:
                continue
            example = f" ({cases[0].explanation})" if cases and side == "candidate" else ""
            reasons.append(
                f"evaluator {name!r} has no applicable case on the {side}{example}: give the "
                f"cases rubrics it can judge, or set evaluators.{name}.allow_not_applicable = "
                "true in the gate file"
            )
    return "; ".join(reasons) or None


def _error_reasons(gate: GateFile, errors: Sequence[TurnError]) -> list[str]:
    """Per side with more errored turns than `gate.max_errors`: why that is no verdict."""
    reasons = []
    for side in ("baseline", "candidate"):
        mine = [e for e in errors if e.side == side]
        if len(mine) > gate.max_errors:
            first = mine[0]
            reasons.append(
                f"the {side} has {len(mine)} errored turn(s), more than gate.max_errors = "
                f"{gate.max_errors}; first: session {first.session_id!r} turn "
                f"{first.turn_index} (repeat {first.trial}): {first.message}"
            )
    return reasons


def _split_noise(runs: Runs, side: Side) -> tuple[Runs, Runs]:
    """The baseline's first half of repeats, and the second half: its noise-floor runs."""
    trials = {len(outcomes) for outcomes in runs.values()}
    if any(n < 2 or n % 2 for n in trials):
        raise GateFileError(
            f"the baseline has {min(trials)} repeat(s) per case; the noise floor needs an even "
            f"number, at least 2 (a stored baseline written by a gate run with noise_floor = "
            f"true has them): {side.label}; or set gate.noise_floor = false"
        )
    half = {key: len(outcomes) // 2 for key, outcomes in runs.items()}
    return (
        {key: outcomes[: half[key]] for key, outcomes in runs.items()},
        {key: outcomes[half[key] :] for key, outcomes in runs.items()},
    )


def _compare(
    gate: GateFile,
    baseline: Runs,
    candidate: Runs,
    noise: Runs | None,
    cases: Sequence[Case],
    names: list[str],
) -> list[CaseResult]:
    results = []
    for case in cases:
        for name in names:
            base = baseline[(case, name)]
            cand = candidate[(case, name)]
            again = noise[(case, name)] if noise is not None else []
            failing = next((text for kind, text, _ in cand if kind == FAIL), cand[0][1])
            results.append(
                CaseResult(
                    dataset=case[0],
                    session_id=case[1],
                    turn_index=case[2],
                    evaluator=name,
                    baseline=judged(base),
                    candidate=judged(cand),
                    explanation=failing,
                    baseline_score=_mean_score(base),
                    candidate_score=_mean_score(cand),
                    noise=judged(again),
                    noise_score=_mean_score(again),
                    min_pass_rate=gate.evaluators[name].case_minimum(case[1], case[2]),
                    baseline_na=_count([*base, *again], NOT_APPLICABLE),
                    candidate_na=_count(cand, NOT_APPLICABLE),
                    baseline_errors=_count([*base, *again], ERROR),
                    candidate_errors=_count(cand, ERROR),
                )  # fmt: skip
            )
    return results


def judged(outcomes: Sequence[Outcome]) -> tuple[bool, ...]:
    """The repeats an evaluator judged, as passed or not (n/a and errored ones left out)."""
    return tuple(kind == PASS for kind, _, _ in outcomes if kind in APPLICABLE)


def _count(outcomes: Sequence[Outcome], kind: str) -> int:
    return sum(1 for k, _, _ in outcomes if k == kind)


def _summary(cases: int, judged: int, flips: tuple[int, int, float], rate: float) -> str:
    """What an evaluator's cases came to: flips, their p-value, the pass rate of those judged."""
    regressed, improved, p_value = flips
    skipped = cases - judged
    if not judged:  # no pass rate to give
        return f"no case judged ({skipped} not applicable or errored)"
    summary = f"{regressed} regressed, {improved} improved, p = {p_value:.3g}; pass rate {rate:.1%}"
    if skipped:
        summary += f" of {judged} judged cases ({skipped} not applicable or errored)"
    return summary


def _decide(gate: GateFile, name: str, every: list[CaseResult]) -> EvaluatorVerdict:
    results = [r for r in every if r.applicable]
    regressed = sum(r.change < 0 for r in results)
    improved = sum(r.change > 0 for r in results)
    p_value = regression_p_value(regressed, improved)
    noise = _noise_floor(results, gate.seed) if gate.noise_floor else None
    beyond = regression_p_value(regressed, noise.regressed) if noise is not None else None
    rate = _mean([pass_rate(r.candidate) for r in results])
    rule = gate.evaluators[name]
    below = [r for r in results if r.below_minimum]
    failures = []
    if regressed and p_value < gate.alpha and (beyond is None or beyond < gate.alpha):
        failures.append(
            f"{regressed} case(s) regressed against {improved} improved (p = {p_value:.3g} < "
            f"{gate.alpha})"
            + (
                f", beyond the noise floor's {noise.regressed} (p = {beyond:.3g})"
                if noise is not None
                else ""
            )
        )
    if rule.min_pass_rate is not None and results and rate < rule.min_pass_rate:
        failures.append(f"pass rate {rate:.1%} is below the minimum {rule.min_pass_rate:.1%}")
    if below:
        first = below[0]
        failures.append(
            f"{len(below)} case(s) below their own minimum, e.g. {first.session_id} turn "
            f"{first.turn_index}: {pass_rate(first.candidate):.0%} < {first.min_pass_rate:.0%}"
        )
    summary = _summary(len(every), len(results), (regressed, improved, p_value), rate)
    if noise is not None:
        summary += f"; noise floor {noise.regressed} regressed, {noise.improved} improved"
        if regressed and p_value < gate.alpha and beyond is not None and beyond >= gate.alpha:
            summary += f" (not beyond it: p = {beyond:.3g})"
        if noise.p_value < gate.alpha:
            summary += "; the baseline is unstable against itself: add repeats"
    paired = _paired_scores(every)
    difference = paired_bootstrap([c - b for b, c in paired], seed=gate.seed) if paired else None
    measure = name in MEASURES and bool(paired)
    ratio = (
        ratio_interval([c for _, c in paired], [b for b, _ in paired], seed=gate.seed)
        if measure
        else None
    )
    too_much = _above_max_ratio(name, rule.max_ratio, ratio)
    if too_much:
        failures.append(too_much)
    if ratio is not None and not results:  # a measure without budgets: its ratio is the news
        summary = f"no turn judged (no budget); {_ratio_text(name, ratio)}"
    return EvaluatorVerdict(
        evaluator=name, regressed=regressed, improved=improved,
        score_difference=difference, ratio=ratio, noise=noise, p_beyond_noise=beyond,
        baseline_total=sum(b for b, _ in paired) if measure else None,
        candidate_total=sum(c for _, c in paired) if measure else None,
        measured=len(paired) if measure else 0,
        flaky=sum(r.flaky for r in results), cases=len(every), p_value=p_value,
        baseline_pass_hat_k=_pass_hat_k([r.baseline for r in results]),
        candidate_pass_hat_k=_pass_hat_k([r.candidate for r in results]),
        candidate_pass_rate=rate, min_pass_rate=rule.min_pass_rate, failed=bool(failures),
        reason="; ".join(failures) if failures else summary, below_minimum=len(below),
        not_applicable=sum(r.status == "n/a" for r in every),
        errors=sum(r.status == "error" for r in every),
        datasets={
            d: (
                _pass_hat_k([r.baseline for r in results if r.dataset == d]),
                _pass_hat_k([r.candidate for r in results if r.dataset == d]),
            )
            for d in dict.fromkeys(r.dataset for r in results)
        },
    )  # fmt: skip


def _paired_scores(results: Sequence[CaseResult]) -> list[tuple[float, float]]:
    """(baseline, candidate) mean scores of the cases scored on both sides.

    Scores pair up whatever the outcome: a measure's score (latency's time, a turn's tokens)
    is evidence even where no budget judged it.
    """
    return [
        (r.baseline_score, r.candidate_score)
        for r in results
        if r.baseline_score is not None and r.candidate_score is not None
    ]


def _above_max_ratio(name: str, most: float | None, ratio: Interval | None) -> str | None:
    """Why a measure failed its `max_ratio`, or None: its whole interval must lie above."""
    if most is None or ratio is None or ratio.n == 0 or not ratio.low > most:
        return None
    return f"{_ratio_text(name, ratio)}, above the maximum {most:g}×"


def _ratio_text(name: str, ratio: Interval) -> str:
    return (
        f"candidate / baseline {name} is {ratio.mean:.3g}× (95% CI {ratio.low:.3g}–"
        f"{ratio.high:.3g}× over {ratio.n} cases)"
    )


def _noise_floor(results: list[CaseResult], seed: int) -> NoiseFloor:
    """The baseline's noise runs compared with its own first runs, like a candidate."""
    changes = [pass_change(r.baseline, r.noise) for r in results]
    regressed, improved = changes.count(-1), changes.count(1)
    diffs = [
        r.noise_score - r.baseline_score
        for r in results
        if r.noise_score is not None and r.baseline_score is not None
    ]
    return NoiseFloor(
        regressed=regressed,
        improved=improved,
        p_value=regression_p_value(regressed, improved),
        score_difference=paired_bootstrap(diffs, seed=seed) if diffs else None,
    )


def _pass_hat_k(sides: list[tuple[bool, ...]]) -> float:
    """Mean pass^k over cases, each with its own number of repeats."""
    return _mean([pass_hat_k(len(o), sum(o), len(o)) for o in sides])


def _mean_score(outcomes: Sequence[Outcome]) -> float | None:
    scores = [score for _, _, score in outcomes if score is not None]
    return sum(scores) / len(scores) if scores else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")
