"""Paired statistics the gate uses to tell noise from a regression.

Candidate and baseline run on the same cases, so every comparison here is paired: an exact
binomial test on pass/fail flips (McNemar), a percentile bootstrap over cases for score
differences and latency ratios, and the unbiased pass@k / pass^k estimators over repeats.

Everything is a pure function of its arguments; the bootstrap is deterministic for a seed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

# pass@k and pass^k live with the evaluators' repeat scores; the gate uses the same functions.
from plangate.evaluators import pass_at_k as pass_at_k
from plangate.evaluators import pass_hat_k as pass_hat_k

Decision = Literal["regression", "improvement", "no_change"]
"""What a run of pass/fail flips says about the candidate compared with the baseline."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A bootstrap confidence interval around a point estimate."""

    low: float
    """Lower percentile bound; nan when there is no data."""
    high: float
    """Upper percentile bound; nan when there is no data."""
    mean: float
    """The point estimate on the full sample (mean difference, or ratio of means)."""
    n: int
    """Number of pairs the interval is computed from."""


def _check_flips(b: int, c: int) -> None:
    if b < 0 or c < 0:
        raise ValueError(f"flip counts must be >= 0, got b={b!r}, c={c!r}")


def _binomial_mass(n: int, first: int, last: int) -> int:
    """Sum of C(n, i) for first <= i <= last, in exact integers."""
    total = 0
    term = math.comb(n, first)
    for i in range(first, last + 1):
        total += term
        # C(n, i + 1) from C(n, i): exact, and one big-integer step instead of a fresh comb.
        term = term * (n - i) // (i + 1)
    return total


def _upper_tail(n: int, k: int) -> float:
    """P[X >= k] for X ~ Binomial(n, 1/2), exactly, rounded once at the end."""
    # int / int is correctly rounded in Python, so no drift however large n gets.
    return _binomial_mass(n, k, n) / (1 << n)


def mcnemar_exact(b: int, c: int) -> float:
    """Exact two-sided McNemar p-value on the discordant pairs.

    A binomial test of `b` against Binomial(b + c, 1/2): the probability of every outcome at
    most as likely as the observed one. The distribution is symmetric, so this is twice the
    smaller tail, capped at 1.

    Args:
        b: Cases that passed in the baseline and failed in the candidate.
        c: Cases that failed in the baseline and passed in the candidate.

    Returns:
        The p-value in [0, 1]; 1.0 when there are no discordant pairs.

    Raises:
        ValueError: If `b` or `c` is negative.
    """
    _check_flips(b, c)
    n = b + c
    if n == 0:
        return 1.0
    tail = _binomial_mass(n, 0, min(b, c))
    return min(1.0, 2 * tail / (1 << n))


def regression_p_value(b: int, c: int) -> float:
    """One-sided exact p-value that the candidate is worse than the baseline.

    P[X >= b] for X ~ Binomial(b + c, 1/2): how surprising this many new failures would be if
    flips in either direction were equally likely. This is the test a gate should use.

    Args:
        b: Cases that passed in the baseline and failed in the candidate.
        c: Cases that failed in the baseline and passed in the candidate.

    Returns:
        The p-value in [0, 1]; 1.0 when there are no discordant pairs.

    Raises:
        ValueError: If `b` or `c` is negative.
    """
    _check_flips(b, c)
    return _upper_tail(b + c, b)


def verdict_for_flips(b: int, c: int, *, alpha: float = 0.05, min_flips: int = 1) -> Decision:
    """Classify pass/fail flips with the one-sided exact test in each direction.

    Each direction is tested at `alpha`, so the chance of any verdict under pure noise is at
    most `2 * alpha`, and of a false "regression" at most `alpha`.

    Args:
        b: Cases that passed in the baseline and failed in the candidate.
        c: Cases that failed in the baseline and passed in the candidate.
        alpha: Significance level of each one-sided test, in (0, 1).
        min_flips: Fewest discordant pairs before any verdict other than "no_change".

    Returns:
        "regression", "improvement" or "no_change".

    Raises:
        ValueError: If a count is negative or `alpha` is outside (0, 1).
    """
    _check_flips(b, c)
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if b + c < max(min_flips, 1):
        return "no_change"
    if regression_p_value(b, c) <= alpha:
        return "regression"
    if regression_p_value(c, b) <= alpha:
        return "improvement"
    return "no_change"


def check_bootstrap(confidence: float, resamples: int) -> None:
    """Raise ValueError unless `confidence` is in (0, 1) and `resamples` >= 1."""
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples!r}")


def resample_indices(n: int, resamples: int, seed: int) -> npt.NDArray[np.intp]:
    """Every bootstrap resample at once: (resamples, n) indices drawn with replacement."""
    rng = np.random.default_rng(seed)
    return rng.integers(0, n, size=(resamples, n))


def _percentiles(
    statistics: npt.NDArray[np.float64], point: float, n: int, confidence: float
) -> Interval:
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(statistics, [tail, 1.0 - tail])
    return Interval(low=float(low), high=float(high), mean=point, n=n)


def _empty() -> Interval:
    return Interval(low=math.nan, high=math.nan, mean=math.nan, n=0)


def paired_bootstrap(
    differences: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap confidence interval of the mean of paired differences.

    Cases are resampled with replacement, all resamples at once as one (resamples, n) index
    array.

    Args:
        differences: Candidate minus baseline score, one per case.
        confidence: Two-sided coverage of the interval, in (0, 1).
        resamples: Number of bootstrap resamples.
        seed: Seed for `numpy.random.default_rng`; the same seed gives the same interval.

    Returns:
        The interval; all nan with n == 0 when there is no data, and a single point when there
        is one pair.

    Raises:
        ValueError: If `confidence` is outside (0, 1) or `resamples` < 1.
    """
    check_bootstrap(confidence, resamples)
    values = np.asarray(differences, dtype=np.float64)
    n = len(values)
    if n == 0:
        return _empty()
    point = float(values.mean())
    if n == 1:
        return Interval(low=point, high=point, mean=point, n=1)
    means = values[resample_indices(n, resamples, seed)].mean(axis=1)
    return _percentiles(means, point, n, confidence)


def ratio_interval(
    candidate: Sequence[float],
    baseline: Sequence[float],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> Interval:
    """Paired bootstrap confidence interval of the ratio of means, candidate over baseline.

    Meant for latency and cost: a ratio of 1.2 means the candidate is 20% slower. Each resample
    takes the same cases from both sides and computes sum(candidate) / sum(baseline). Pairs whose
    baseline is not positive are dropped, since they carry no scale.

    Args:
        candidate: Candidate measurement, one per case.
        baseline: Baseline measurement for the same cases, in the same order.
        confidence: Two-sided coverage of the interval, in (0, 1).
        resamples: Number of bootstrap resamples.
        seed: Seed for `numpy.random.default_rng`; the same seed gives the same interval.

    Returns:
        The interval around sum(candidate) / sum(baseline); all nan with n == 0 when no pair
        is left, a single point when one is.

    Raises:
        ValueError: If the sequences differ in length, `confidence` is outside (0, 1) or
            `resamples` < 1.
    """
    if len(candidate) != len(baseline):
        raise ValueError(
            f"candidate and baseline must pair up, got {len(candidate)} and {len(baseline)} values"
        )
    check_bootstrap(confidence, resamples)
    cand = np.asarray(candidate, dtype=np.float64)
    base = np.asarray(baseline, dtype=np.float64)
    keep = base > 0
    cand, base = cand[keep], base[keep]
    n = len(base)
    if n == 0:
        return _empty()
    point = float(cand.sum() / base.sum())
    if n == 1:
        return Interval(low=point, high=point, mean=point, n=1)
    indices = resample_indices(n, resamples, seed)
    ratios = cand[indices].sum(axis=1) / base[indices].sum(axis=1)
    return _percentiles(ratios, point, n, confidence)


def flaky(outcomes: Sequence[bool]) -> bool:
    """Whether repeats of one variant on one case disagree.

    Args:
        outcomes: Pass (True) or fail (False) of each repeat.

    Returns:
        True when both a pass and a fail occur.
    """
    return len(set(outcomes)) > 1
