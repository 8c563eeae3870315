"""How far an evaluator's verdicts agree with labels: pairing, the confusion matrix, Cohen's kappa.

Two raters judge the same turns pass or fail: the evaluator, and people (or the source's own
judgement, such as tau-bench's reward). Turns pair up by session, turn and, where both sides
have it, trial. Kappa is computed in exact integer arithmetic from the four counts, and its
percentile bootstrap interval resamples the pairs, deterministic for a seed.

Everything here is a pure function of its arguments; reading the files is the command's work.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from plangate.ci.gate import check_bootstrap, resample_indices
from plangate.harness import PlangateError

Key = tuple[str, int, int | None]
"""A turn: session, turn index, and trial (None where the pairing does not use it)."""

UNDEFINED_KAPPA = (
    "kappa is undefined: the evaluator and the labels give one and the same verdict on every "
    "pair, so the agreement expected by chance is already 1"
)
"""Why kappa has no value when p_e == 1."""


class AgreementError(PlangateError):
    """The scores and labels cannot be compared; the message names the file, column or value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Confusion:
    """The 2×2 table: evaluator pass/fail against label pass/fail."""

    both_pass: int
    """The evaluator and the label say pass."""
    only_evaluator_passes: int
    """The evaluator says pass, the label fail."""
    only_label_passes: int
    """The evaluator says fail, the label pass."""
    both_fail: int
    """The evaluator and the label say fail."""

    @property
    def n(self) -> int:
        """The number of pairs."""
        return self.both_pass + self.only_evaluator_passes + self.only_label_passes + self.both_fail

    @property
    def accuracy(self) -> float | None:
        """The share of pairs where both say the same; None without pairs."""
        return (self.both_pass + self.both_fail) / self.n if self.n else None


@dataclass(frozen=True, slots=True, kw_only=True)
class KappaInterval:
    """A percentile bootstrap interval of Cohen's kappa over the pairs."""

    low: float | None
    """Lower bound; None when no resample has a defined kappa."""
    high: float | None
    """Upper bound; None when no resample has a defined kappa."""
    confidence: float
    """Two-sided coverage, e.g. 0.95."""
    resamples: int
    """Resamples drawn."""
    dropped: int
    """Resamples left out because their kappa is undefined (one verdict on every pair)."""
    seed: int
    """The seed of `numpy.random.default_rng`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pair:
    """One turn judged by both raters."""

    session_id: str
    turn_index: int
    trial: int | None
    """The trial, where the pairing uses it."""
    evaluator_passed: bool
    """The evaluator's verdict: True for pass."""
    label_passed: bool
    """The label: True for pass."""
    explanation: str
    """Why the evaluator decided so."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Pairing:
    """The evaluator's scores matched with the labels, and what was left out."""

    pairs: tuple[Pair, ...]
    """Turns both judged (pass/fail) and labelled, in the score table's order."""
    not_judged: int
    """Scored turns whose outcome is `n/a` or `error`."""
    unlabelled: int
    """Judged turns without a label."""
    unscored: int
    """Labels whose turn the evaluator did not score."""

    @property
    def disagreements(self) -> list[Pair]:
        """The pairs where the evaluator and the label differ."""
        return [p for p in self.pairs if p.evaluator_passed != p.label_passed]


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One scored turn: its key, outcome (`pass`, `fail`, `n/a`, `error`) and explanation."""

    key: Key
    outcome: str
    explanation: str


def pair_up(verdicts: Iterable[Verdict], labels: Mapping[Key, bool]) -> Pairing:
    """Match the evaluator's verdicts with the labels by key.

    Raises:
        AgreementError: If two verdicts share a key.
    """
    pairs: list[Pair] = []
    seen: set[Key] = set()
    not_judged = unlabelled = 0
    for verdict in verdicts:
        if verdict.key in seen:
            raise AgreementError(_duplicate(verdict.key))
        seen.add(verdict.key)
        if verdict.outcome not in ("pass", "fail"):
            not_judged += 1
        elif verdict.key not in labels:
            unlabelled += 1
        else:
            session_id, turn_index, trial = verdict.key
            pairs.append(
                Pair(
                    session_id=session_id, turn_index=turn_index, trial=trial,
                    evaluator_passed=verdict.outcome == "pass", label_passed=labels[verdict.key],
                    explanation=verdict.explanation,
                )
            )  # fmt: skip
    unscored = sum(1 for key in labels if key not in seen)
    return Pairing(
        pairs=tuple(pairs), not_judged=not_judged, unlabelled=unlabelled, unscored=unscored
    )


def _duplicate(key: Key) -> str:
    session_id, turn_index, trial = key
    where = f"session {session_id!r} turn {turn_index}" + (
        "" if trial is None else f" trial {trial}"
    )
    return (
        f"the score table holds two verdicts of the evaluator for {where}; give LABELS a `trial` "
        "column if the turns were run several times, or pass one run's score table"
    )


def confusion(evaluator: Sequence[bool], label: Sequence[bool]) -> Confusion:
    """The confusion matrix of two raters' pass (True) / fail (False) verdicts on the same turns.

    Raises:
        ValueError: If the two sequences differ in length.
    """
    if len(evaluator) != len(label):
        raise ValueError(f"the raters must pair up, got {len(evaluator)} and {len(label)} verdicts")
    a = np.asarray(evaluator, dtype=bool)
    b = np.asarray(label, dtype=bool)
    return Confusion(
        both_pass=int((a & b).sum()),
        only_evaluator_passes=int((a & ~b).sum()),
        only_label_passes=int((~a & b).sum()),
        both_fail=int((~a & ~b).sum()),
    )


def kappa_of(counts: Confusion) -> float | None:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e), from the four counts.

    Computed as n·agreed − S over n² − S, with S = n²·p_e, in exact integers, divided once.

    Returns:
        Kappa in [-1, 1]; None when it is undefined: no pairs, or p_e == 1 (both raters give one
        and the same verdict on every pair).
    """
    n = counts.n
    passes_e = counts.both_pass + counts.only_evaluator_passes
    passes_l = counts.both_pass + counts.only_label_passes
    chance = passes_e * passes_l + (n - passes_e) * (n - passes_l)
    if n == 0 or chance == n * n:
        return None
    agreed = counts.both_pass + counts.both_fail
    return (n * agreed - chance) / (n * n - chance)


def cohen_kappa(evaluator: Sequence[bool], label: Sequence[bool]) -> float | None:
    """Cohen's kappa of two raters' pass/fail verdicts; None where undefined (see `kappa_of`)."""
    return kappa_of(confusion(evaluator, label))


def kappa_interval(
    evaluator: Sequence[bool],
    label: Sequence[bool],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> KappaInterval:
    """Percentile bootstrap interval of Cohen's kappa, the pairs resampled with replacement.

    All resamples are drawn at once as one (resamples, n) index array; resamples whose kappa is
    undefined are dropped and counted.

    Raises:
        ValueError: If the sequences differ in length, `confidence` is outside (0, 1) or
            `resamples` < 1.
    """
    if len(evaluator) != len(label):
        raise ValueError(f"the raters must pair up, got {len(evaluator)} and {len(label)} verdicts")
    check_bootstrap(confidence, resamples)
    n = len(evaluator)
    if n == 0:
        return KappaInterval(
            low=None, high=None, confidence=confidence, resamples=resamples,
            dropped=resamples, seed=seed,
        )  # fmt: skip
    indices = resample_indices(n, resamples, seed)
    kappas = _resampled_kappas(
        np.asarray(evaluator, dtype=bool)[indices], np.asarray(label, dtype=bool)[indices]
    )
    tail = (1.0 - confidence) / 2.0
    bounds = [float(q) for q in np.quantile(kappas, [tail, 1.0 - tail])] if len(kappas) else []
    return KappaInterval(
        low=bounds[0] if bounds else None, high=bounds[1] if bounds else None,
        confidence=confidence, resamples=resamples, dropped=resamples - len(kappas), seed=seed,
    )  # fmt: skip


def _resampled_kappas(
    evaluator: npt.NDArray[np.bool_], label: npt.NDArray[np.bool_]
) -> npt.NDArray[np.float64]:
    """Kappa of each row (one resample), the rows where it is undefined left out."""
    n = evaluator.shape[1]
    passes_e = evaluator.sum(axis=1, dtype=np.int64)
    passes_l = label.sum(axis=1, dtype=np.int64)
    agreed = (evaluator == label).sum(axis=1, dtype=np.int64)
    chance = passes_e * passes_l + (n - passes_e) * (n - passes_l)
    defined = chance != n * n
    numerator = (n * agreed - chance)[defined]
    denominator = (n * n - chance)[defined]
    kappas: npt.NDArray[np.float64] = numerator.astype(np.float64) / denominator.astype(np.float64)
    return kappas
