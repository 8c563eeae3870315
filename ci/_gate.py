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
Exit codes: 0 pass, 1 regression, 2 unusable input.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from plangate.ci._gate_file import GateFile, GateFileError, Side
from plangate.ci._phoenix_export import replay_processor
from plangate.ci._stats import Interval, paired_bootstrap, ratio_interval, regression_p_value
from plangate.evaluators import SCORE_SCHEMA, RubricSet, evaluate, pass_hat_k
from plangate.replay import concat_tables, read_dataset, replay_turn

if TYPE_CHECKING:
    from plangate.ci._phoenix_export import PhoenixExport

Case = tuple[str, str, int]
"""(dataset name, session id, turn index)."""
Outcome = tuple[bool, str, float | None]
"""One repeat's result: passed, explanation, score."""
Runs = dict[tuple[Case, str], list[Outcome]]
"""Per (case, evaluator): the outcome of every repeat, in repeat order."""


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
        return _change(self.baseline, self.candidate)

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


async def run_gate(gate: GateFile, *, phoenix: PhoenixExport | None = None) -> Verdict:
    """Replay (or read), evaluate and compare; the whole gate (replayed spans also to `phoenix`)."""
    datasets = {s.path.name: read_dataset(s.path) for s in gate.datasets}
    rubrics = gate_rubrics(gate, datasets)
    cases = gate_cases(gate, datasets)
    names = list(gate.evaluators)
    k = gate.repeats
    baseline_repeats = 2 * k if gate.noise_floor else k
    side_scores = {}
    for name, side, repeats in (
        ("baseline", gate.baseline, baseline_repeats),
        ("candidate", gate.candidate, k),
    ):
        if side.scores is not None:
            side_scores[name] = read_scores(side.scores, cases, names)
        else:
            side_scores[name] = await replay_scores(
                gate, side, datasets, cases, names, rubrics, repeats=repeats, phoenix=phoenix,
                label=name,
            )  # fmt: skip
    baseline = runs_from_scores(side_scores["baseline"], cases, names)
    candidate = runs_from_scores(side_scores["candidate"], cases, names)
    noise: Runs | None = None
    if gate.noise_floor:
        baseline, noise = _split_noise(baseline, gate.baseline)
    results = _compare(gate, baseline, candidate, noise, cases, names)
    verdicts = [_decide(gate, name, [r for r in results if r.evaluator == name]) for name in names]
    return Verdict(
        passed=not any(v.failed for v in verdicts),
        repeats=k,
        alpha=gate.alpha,
        evaluators=verdicts,
        cases=results,
        baseline=gate.baseline.label,
        candidate=gate.candidate.label,
        noise_floor=gate.noise_floor,
        scores=side_scores,
    )


def gate_rubrics(gate: GateFile, datasets: dict[str, Any]) -> RubricSet:
    """The rubrics of every golden turn in the gate's datasets (read once, by the caller)."""
    from plangate.ci._eval_cli import turn_rubrics

    return RubricSet(
        turns={
            key: rubric
            for s in gate.datasets
            for key, rubric in turn_rubrics(datasets[s.path.name], str(s.path)).turns.items()
        }
    )


def gate_cases(gate: GateFile, datasets: dict[str, Any] | None = None) -> list[Case]:
    """The golden turns the gate compares, in dataset order; (session, turn) must be unique."""
    if datasets is None:
        datasets = {s.path.name: read_dataset(s.path) for s in gate.datasets}
    cases: list[Case] = []
    seen: dict[tuple[str, int], str] = {}
    for selection in gate.datasets:
        dataset = datasets[selection.path.name]
        for row in dataset.turns.to_pylist():
            if selection.sessions and row["session_id"] not in selection.sessions:
                continue
            if selection.turns and row["turn_index"] not in selection.turns:
                continue
            key = (row["session_id"], row["turn_index"])
            if key in seen:
                raise GateFileError(
                    f"{gate.path}: session {key[0]!r} turn {key[1]} is in both {seen[key]} and "
                    f"{selection.path.name}; a gate needs every case once: select one of them"
                )
            seen[key] = selection.path.name
            cases.append((selection.path.name, *key))
    if not cases:
        raise GateFileError(
            f"{gate.path}: the dataset selections hold no turns; check [[datasets]] sessions "
            "and turns against `plangate dataset validate`"
        )
    _check_case_keys(gate, cases)
    return cases


def _check_case_keys(gate: GateFile, cases: Sequence[Case]) -> None:
    """Per-case minimums must name cases the gate has."""
    known = {c[1] for c in cases} | {f"{c[1]}:{c[2]}" for c in cases}
    for name, rule in gate.evaluators.items():
        for key in rule.cases:
            if key not in known:
                raise GateFileError(
                    f"{gate.path}: evaluators.{name}.cases names {key!r}, which is not a case of "
                    "the selected datasets (use SESSION or SESSION:TURN of a selected turn)"
                )


async def replay_scores(
    gate: GateFile,
    side: Side,
    datasets: dict[str, Any],
    cases: Sequence[Case],
    names: list[str],
    rubrics: RubricSet,
    *,
    repeats: int,
    phoenix: PhoenixExport | None = None,
    label: str = "side",
) -> pa.Table:
    """Replay every case `repeats` times with one side; the scores, `trial` = repeat.

    With `phoenix`, the spans are exported too, each repeat a run of its own: `LABEL-rN`, and
    the baseline's noise-floor repeats `noise-rN`.
    """
    limit = asyncio.Semaphore(gate.jobs)
    params = {name: rule.params for name, rule in gate.evaluators.items() if rule.params}

    async def one(number: int, case: Case, repeat: int) -> pa.Table:
        name, session_id, turn_index = case
        # Each (case, repeat) gets its own seed, the same on both sides: the runs pair up, and
        # a simulated model's seeded choices vary from case to case as a real model's would.
        seed = gate.seed + side.seed + repeat * 100_003 + number
        async with limit:
            result = await replay_turn(
                datasets[name], session_id, turn_index, variant=side.variant, model=side.model,
                tools=side.tools, seed=seed,  # type: ignore[arg-type]
                span_processor=replay_processor(
                    phoenix, datasets[name], session_id, side.variant, _run(gate, label, repeat)
                ),
            )  # fmt: skip
        assert result.table is not None
        return result.table

    parts = []
    for repeat in range(repeats):
        tables = await asyncio.gather(*(one(n, case, repeat) for n, case in enumerate(cases)))
        traces = concat_tables(tables)
        scores = evaluate(traces, rubrics, names=names, params=params)
        trial = pa.array([repeat] * scores.num_rows, pa.int32())
        scores = scores.set_column(scores.schema.get_field_index("trial"), "trial", trial)
        parts.append(_with_agent_spans(scores, traces))
    return pa.concat_tables(parts) if parts else SCORE_SCHEMA.empty_table()


def _with_agent_spans(scores: pa.Table, traces: pa.Table) -> pa.Table:
    """Each score row with its turn's AGENT `span_id` and `trace_id`: the way to its trace."""
    agents = traces.filter(pc.equal(traces["span_kind"], "AGENT")).select(
        ["session_id", "turn_index", "span_id", "trace_id"]
    )
    return scores.join(agents, keys=["session_id", "turn_index"], join_type="left outer")


def _run(gate: GateFile, label: str, repeat: int) -> str:
    """A repeat's run name in Phoenix; the baseline's repeats past k are its noise floor."""
    if label == "baseline" and gate.noise_floor and repeat >= gate.repeats:
        return f"noise-r{repeat - gate.repeats}"
    return f"{label}-r{repeat}"


def read_scores(path: Path, cases: Sequence[Case], names: list[str]) -> pa.Table:
    """A stored score table, checked to hold every case and evaluator in every trial."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise GateFileError(f"cannot read score table {path}: {exc}") from exc
    missing = [
        c
        for c in ("session_id", "turn_index", "evaluator", "passed")
        if c not in table.column_names
    ]
    if missing:
        raise GateFileError(
            f"{path}: not a score table: column {missing[0]!r} is missing (write one with "
            "`plangate gate` (scores/) or `plangate eval -o`)"
        )
    for column, kind in (
        ("score", pa.float64()),
        ("explanation", pa.string()),
        ("trial", pa.int32()),
    ):
        if column not in table.column_names:
            table = table.append_column(column, pa.nulls(table.num_rows, kind))
    table = table.set_column(
        table.schema.get_field_index("trial"),
        "trial",
        pc.fill_null(table["trial"].cast(pa.int32()), 0),
    )
    present = set(
        zip(
            *(table[c].to_pylist() for c in ("session_id", "turn_index", "evaluator", "trial")),
            strict=True,
        )
    )
    for trial in sorted({t for *_, t in present}):
        for _, session_id, turn_index in cases:
            for name in names:
                if (session_id, turn_index, name, trial) not in present:
                    raise GateFileError(
                        f"{path}: no {name!r} score for session {session_id!r} turn "
                        f"{turn_index} in trial {trial}; the stored table must cover every "
                        "selected case and evaluator (store it from a gate run with the same "
                        "datasets and evaluators)"
                    )
    return table


def runs_from_scores(scores: pa.Table, cases: Sequence[Case], names: list[str]) -> Runs:
    """Per (case, evaluator): outcomes in trial order, from a score table with `trial`."""
    wanted = {(c[1], c[2]): c for c in cases}
    rows = sorted(
        scores.select(
            ["session_id", "turn_index", "evaluator", "trial", "passed", "explanation", "score"]
        ).to_pylist(),
        key=lambda r: r["trial"],
    )
    runs: Runs = {}
    for row in rows:
        case = wanted.get((row["session_id"], row["turn_index"]))
        if case is not None and row["evaluator"] in names:
            outcome = (bool(row["passed"]), row["explanation"] or "", row["score"])
            runs.setdefault((case, row["evaluator"]), []).append(outcome)
    return runs


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
                    noise=tuple(o[0] for o in again),
                    noise_score=_mean_score(again),
                    min_pass_rate=gate.evaluators[name].case_minimum(case[1], case[2]),
                )  # fmt: skip
            )
    return results


def _decide(gate: GateFile, name: str, results: list[CaseResult]) -> EvaluatorVerdict:
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
    if rule.min_pass_rate is not None and rate < rule.min_pass_rate:
        failures.append(f"pass rate {rate:.1%} is below the minimum {rule.min_pass_rate:.1%}")
    if below:
        first = below[0]
        failures.append(
            f"{len(below)} case(s) below their own minimum, e.g. {first.session_id} turn "
            f"{first.turn_index}: {pass_rate(first.candidate):.0%} < {first.min_pass_rate:.0%}"
        )
    summary = f"{regressed} regressed, {improved} improved, p = {p_value:.3g}; pass rate {rate:.1%}"
    if noise is not None:
        summary += f"; noise floor {noise.regressed} regressed, {noise.improved} improved"
        if regressed and p_value < gate.alpha and beyond is not None and beyond >= gate.alpha:
            summary += f" (not beyond it: p = {beyond:.3g})"
        if noise.p_value < gate.alpha:
            summary += "; the baseline is unstable against itself: add repeats"
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
        score_difference=difference, ratio=ratio, noise=noise, p_beyond_noise=beyond,
        flaky=sum(r.flaky for r in results), cases=len(results), p_value=p_value,
        baseline_pass_hat_k=_pass_hat_k([r.baseline for r in results]),
        candidate_pass_hat_k=_pass_hat_k([r.candidate for r in results]),
        candidate_pass_rate=rate, min_pass_rate=rule.min_pass_rate, failed=bool(failures),
        reason="; ".join(failures) if failures else summary, below_minimum=len(below),
        datasets={
            d: (
                _pass_hat_k([r.baseline for r in results if r.dataset == d]),
                _pass_hat_k([r.candidate for r in results if r.dataset == d]),
            )
            for d in dict.fromkeys(r.dataset for r in results)
        },
    )  # fmt: skip


def _noise_floor(results: list[CaseResult], seed: int) -> NoiseFloor:
    """The baseline's noise runs compared with its own first runs, like a candidate."""
    changes = [_change(r.baseline, r.noise) for r in results]
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


def _change(before: tuple[bool, ...], after: tuple[bool, ...]) -> int:
    base, new = pass_rate(before), pass_rate(after)
    return (new > base) - (new < base)


def pass_rate(outcomes: tuple[bool, ...]) -> float:
    """The share of repeats that passed; nan for none."""
    return sum(outcomes) / len(outcomes) if outcomes else float("nan")


def _pass_hat_k(sides: list[tuple[bool, ...]]) -> float:
    """Mean pass^k over cases, each with its own number of repeats."""
    return _mean([pass_hat_k(len(o), sum(o), len(o)) for o in sides])


def _mean_score(outcomes: Sequence[Outcome]) -> float | None:
    scores = [score for _, _, score in outcomes if score is not None]
    return sum(scores) / len(scores) if scores else None


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")
