"""Paired statistics for the gate: exact flip tests, bootstrap intervals, pass@k."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.ci.gate._stats import (
    Interval,
    flaky,
    mcnemar_exact,
    paired_bootstrap,
    pass_at_k,
    pass_hat_k,
    ratio_interval,
    regression_p_value,
    verdict_for_flips,
)

flips = st.integers(min_value=0, max_value=300)


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 0, 1.0),
        (0, 5, 0.0625),
        (5, 0, 0.0625),
        (1, 1, 1.0),
        (6, 0, 0.03125),
        (2, 8, 0.109375),  # 2 * (1 + 10 + 45) / 1024
        (3, 4, 1.0),
    ],
)
def test_mcnemar_exact_hand_values(b: int, c: int, expected: float) -> None:
    assert mcnemar_exact(b, c) == expected


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        (0, 0, 1.0),
        (5, 0, 0.03125),
        (0, 5, 1.0),
        (1, 1, 0.75),
        (8, 2, 0.0546875),  # (1 + 10 + 45) / 1024
    ],
)
def test_regression_p_value_hand_values(b: int, c: int, expected: float) -> None:
    assert regression_p_value(b, c) == expected


def reference_two_sided(b: int, c: int) -> Fraction:
    """Straight from the definition: outcomes at most as likely as the observed one."""
    n = b + c
    observed = math.comb(n, b)
    mass = sum(math.comb(n, k) for k in range(n + 1) if math.comb(n, k) <= observed)
    return min(Fraction(1), Fraction(mass, 2**n))


@given(st.integers(0, 40), st.integers(0, 40))
def test_mcnemar_exact_matches_definition(b: int, c: int) -> None:
    assert mcnemar_exact(b, c) == float(reference_two_sided(b, c))


@given(flips, flips)
def test_p_values_are_probabilities_and_mcnemar_is_symmetric(b: int, c: int) -> None:
    two_sided = mcnemar_exact(b, c)
    one_sided = regression_p_value(b, c)
    assert 0.0 <= two_sided <= 1.0
    assert 0.0 <= one_sided <= 1.0
    assert two_sided == mcnemar_exact(c, b)
    assert two_sided == min(1.0, 2 * min(one_sided, regression_p_value(c, b)))


@given(flips, flips)
def test_regression_p_value_decreases_with_more_new_failures(b: int, c: int) -> None:
    assert regression_p_value(b + 1, c) <= regression_p_value(b, c)


def test_large_counts_stay_exact() -> None:
    assert regression_p_value(2000, 2000) > 0.5
    assert regression_p_value(2100, 1900) < 1e-3
    assert mcnemar_exact(3000, 0) == 0.0  # underflows cleanly, no exception


def test_negative_counts_are_rejected() -> None:
    with pytest.raises(ValueError, match="b=-1"):
        mcnemar_exact(-1, 2)
    with pytest.raises(ValueError, match="c=-1"):
        regression_p_value(2, -1)


def test_calibration_under_no_change() -> None:
    # Two independent Bernoulli(0.5) runs of the same 20 cases: any flips are noise.
    false_alarms = 0
    seeds = 200
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        baseline, candidate = rng.random((2, 20)) < 0.5
        b = int(np.sum(baseline & ~candidate))
        c = int(np.sum(~baseline & candidate))
        false_alarms += regression_p_value(b, c) < 0.05
    assert false_alarms / seeds <= 0.05 + 0.02


@pytest.mark.parametrize(
    ("b", "c", "min_flips", "expected"),
    [
        (6, 0, 1, "regression"),
        (0, 6, 1, "improvement"),
        (3, 3, 1, "no_change"),
        (0, 0, 1, "no_change"),
        (6, 0, 10, "no_change"),
        (4, 0, 1, "no_change"),  # p = 1/16 > 0.05
    ],
)
def test_verdict_for_flips(b: int, c: int, min_flips: int, expected: str) -> None:
    assert verdict_for_flips(b, c, min_flips=min_flips) == expected


def test_verdict_rejects_bad_alpha() -> None:
    with pytest.raises(ValueError, match="alpha"):
        verdict_for_flips(1, 1, alpha=1.5)


scores = st.lists(st.integers(-10, 10).map(float), min_size=2, max_size=30)


@settings(max_examples=50)
@given(scores, st.integers(0, 2**32))
def test_bootstrap_interval_contains_the_mean(differences: list[float], seed: int) -> None:
    interval = paired_bootstrap(differences, resamples=500, seed=seed)
    slack = 1e-9
    assert interval.n == len(differences)
    assert interval.mean == pytest.approx(sum(differences) / len(differences))
    assert interval.low <= interval.high
    assert interval.low - slack <= interval.mean <= interval.high + slack
    assert interval == paired_bootstrap(differences, resamples=500, seed=seed)


def test_bootstrap_narrows_with_more_data() -> None:
    rng = np.random.default_rng(7)
    small = paired_bootstrap(rng.normal(0.1, 1.0, 20).tolist())
    large = paired_bootstrap(rng.normal(0.1, 1.0, 2000).tolist())
    assert large.high - large.low < (small.high - small.low) / 5


def test_bootstrap_depends_on_the_seed() -> None:
    differences = np.random.default_rng(3).normal(0.0, 1.0, 30).tolist()
    assert paired_bootstrap(differences, seed=1) == paired_bootstrap(differences, seed=1)
    assert paired_bootstrap(differences, seed=1) != paired_bootstrap(differences, seed=2)


def test_bootstrap_edge_sizes() -> None:
    empty = paired_bootstrap([])
    assert empty.n == 0
    assert all(math.isnan(v) for v in (empty.low, empty.high, empty.mean))
    assert paired_bootstrap([0.25]) == Interval(low=0.25, high=0.25, mean=0.25, n=1)


@pytest.mark.parametrize("kwargs", [{"confidence": 1.0}, {"confidence": 0.0}, {"resamples": 0}])
def test_bootstrap_rejects_bad_options(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        paired_bootstrap([1.0, 2.0], **kwargs)  # type: ignore[arg-type]


latencies = st.lists(st.floats(0.001, 1e4), min_size=1, max_size=30)


@settings(max_examples=30)
@given(latencies)
def test_ratio_of_identical_runs_is_exactly_one(values: list[float]) -> None:
    interval = ratio_interval(values, values, resamples=200)
    assert (interval.low, interval.high, interval.mean, interval.n) == (1.0, 1.0, 1.0, len(values))


def test_ratio_interval_sees_a_slowdown_and_drops_empty_baselines() -> None:
    rng = np.random.default_rng(11)
    baseline = rng.uniform(1.0, 3.0, 50)
    candidate = baseline * 1.5 * rng.uniform(0.9, 1.1, 50)
    interval = ratio_interval([*candidate, 9.0], [*baseline, 0.0])
    assert interval.n == 50
    assert 1.3 < interval.low <= interval.mean <= interval.high < 1.7


def test_ratio_interval_edges() -> None:
    assert ratio_interval([1.0], [0.0]).n == 0
    assert ratio_interval([3.0], [2.0]) == Interval(low=1.5, high=1.5, mean=1.5, n=1)
    with pytest.raises(ValueError, match="pair up"):
        ratio_interval([1.0, 2.0], [1.0])


@pytest.mark.parametrize(
    ("n", "c", "k", "at", "hat"),
    [
        (10, 10, 3, 1.0, 1.0),
        (10, 0, 3, 0.0, 0.0),
        (5, 2, 1, 0.4, 0.4),
        (4, 2, 2, 5 / 6, 1 / 6),
    ],
)
def test_pass_k_hand_values(n: int, c: int, k: int, at: float, hat: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(at)
    assert pass_hat_k(n, c, k) == pytest.approx(hat)


@given(
    st.integers(1, 60).flatmap(
        lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))
    )
)
def test_pass_hat_k_never_exceeds_pass_at_k(nck: tuple[int, int, int]) -> None:
    n, c, k = nck
    assert 0.0 <= pass_hat_k(n, c, k) <= pass_at_k(n, c, k) <= 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(3, 1, 4), (3, 1, 0), (3, 4, 1)])
def test_pass_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


@pytest.mark.parametrize(
    ("outcomes", "expected"),
    [
        ([], False),
        ([True], False),
        ([True, True, True], False),
        ([False, False], False),
        ([True, False, True], True),
        ([False, True], True),
    ],
)
def test_flaky_only_for_mixed_outcomes(outcomes: list[bool], expected: bool) -> None:
    assert flaky(outcomes) is expected
