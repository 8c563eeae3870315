"""`plangate compare VARIANT...`: harness variants side by side on every evaluator, with intervals.

Every variant replays the same golden cases with the same seeds (repeat r of case n gets the same
seed in every variant), so differences pair up case by case. Only judged repeats count (not the
not-applicable or errored ones), and a change pairs only the cases both variants were judged on.
Per variant and evaluator: the pass rate with a bootstrap interval over cases, pass^k, and the
mean score with its interval. Each later variant is also set against the first: the paired
interval of the per-case pass-rate change and the two-sided exact test on the cases that got
worse or better.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from plangate.ci.gate._cases import gate_cases, gate_rubrics
from plangate.ci.gate._gate import judged
from plangate.ci.gate._gate_file import GateFile, Side
from plangate.ci.gate._replays import replay_scores
from plangate.ci.gate._scores import runs_from_scores
from plangate.ci.gate._stats import Interval, mcnemar_exact, paired_bootstrap
from plangate.ci.gate._verdict import pass_rate
from plangate.evaluators import RubricSet, pass_hat_k
from plangate.replay import read_dataset


@dataclass(frozen=True, slots=True, kw_only=True)
class VariantScore:
    """One variant under one evaluator."""

    variant: str
    evaluator: str
    pass_rate: Interval
    """Mean over cases of the per-case pass rate over repeats, with its interval."""
    pass_hat_k: float
    score: Interval | None
    """Mean score over cases (None where the evaluator gives no score)."""
    change: Interval | None = None
    """Against the first variant: per-case pass-rate change (this - first), paired."""
    worse: int = 0
    """Cases this variant passes less often than the first."""
    better: int = 0
    p_value: float = 1.0
    """Two-sided exact test on worse against better."""
    not_applicable: int = 0
    """Cases this variant could not be judged on (no evidence, or every repeat errored): left
    out of its rates."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Comparison:
    """Every variant on every evaluator."""

    variants: tuple[str, ...]
    evaluators: tuple[str, ...]
    cases: int
    repeats: int
    model: str
    scores: list[VariantScore]

    def score(self, variant: str, evaluator: str) -> VariantScore:
        """The row of one variant and evaluator."""
        return next(s for s in self.scores if s.variant == variant and s.evaluator == evaluator)


async def compare(gate: GateFile, sides: Sequence[Side], *, model: str) -> Comparison:
    """Replay the gate's cases with each side (the gate file gives datasets and evaluators).

    A side is a harness variant of plangate's agent or a team's agent (`side_of`); the
    comparison names each by its label.
    """
    datasets = {s.path.name: read_dataset(s.path) for s in gate.datasets}
    cases = gate_cases(gate, datasets)
    names = list(gate.evaluators)
    rubrics: RubricSet = gate_rubrics(gate, datasets)
    variants = [side.label for side in sides]
    per_variant = {}
    for side in sides:
        table = await replay_scores(
            gate, side, datasets, cases, names, rubrics, repeats=gate.repeats
        )
        per_variant[side.label] = runs_from_scores(table, cases, names)
    rows = []
    first = per_variant[variants[0]]
    for name in names:
        base = [judged(first[(case, name)]) for case in cases]
        for variant in variants:
            runs = per_variant[variant]
            outcomes = [judged(runs[(case, name)]) for case in cases]
            applicable = [o for o in outcomes if o]
            scores = [
                sum(s) / len(s)
                for case in cases
                if (s := [o[2] for o in runs[(case, name)] if o[2] is not None])
            ]
            row = VariantScore(
                variant=variant,
                evaluator=name,
                pass_rate=paired_bootstrap([pass_rate(o) for o in applicable], seed=gate.seed),
                pass_hat_k=_mean([pass_hat_k(len(o), sum(o), len(o)) for o in applicable]),
                score=paired_bootstrap(scores, seed=gate.seed) if scores else None,
                not_applicable=len(cases) - len(applicable),
            )
            if variant != variants[0]:
                # Paired: only the cases both variants could be judged on.
                changes = [
                    pass_rate(new) - pass_rate(old)
                    for new, old in zip(outcomes, base, strict=True)
                    if new and old
                ]
                worse = sum(c < 0 for c in changes)
                better = sum(c > 0 for c in changes)
                row = replace(
                    row,
                    change=paired_bootstrap(changes, seed=gate.seed),
                    worse=worse,
                    better=better,
                    p_value=mcnemar_exact(worse, better),
                )
            rows.append(row)
    return Comparison(
        variants=tuple(variants),
        evaluators=tuple(names),
        cases=len(cases),
        repeats=gate.repeats,
        model=model,
        scores=rows,
    )


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else float("nan")
