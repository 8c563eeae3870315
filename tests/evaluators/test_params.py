"""Evaluator parameters: a value outside what a parameter means is refused, naming it.

A NaN threshold used to fail every rewarded turn, -inf to pass them all, `true` to count as 1:
verdicts decided by a typo. Hypothesis draws values of every kind.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import EvaluatorError, RubricError, evaluate, rubric_from_dict
from tests.conftest import REPO

TABLE = pq.read_table(REPO / "datasets" / "third-party" / "spans.parquet").slice(0, 300)
NUMBERS = {  # (evaluator, parameter): the bounds it means
    ("task_completion", "reward_threshold"): (-math.inf, math.inf),
    ("plan_adherence", "max_bookkeeping_ratio"): (0.0, math.inf),
    ("plan_adherence", "min_tracked_share"): (0.0, 1.0),
}
VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-5, 5),
    st.booleans(),
    st.none(),
    st.text(max_size=5),
    st.lists(st.integers(), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(sorted(NUMBERS)), VALUES)
def test_a_number_parameter_takes_a_finite_number_in_its_bounds(
    parameter: tuple[str, str], value: Any
) -> None:
    evaluator, name = parameter
    low, high = NUMBERS[parameter]
    fits = (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    )
    params = {evaluator: {name: value}}
    if fits:
        assert evaluate(TABLE, names=[evaluator], params=params).num_rows > 0
        return
    with pytest.raises(EvaluatorError, match=f"evaluator '{evaluator}': '{name}' must be a finite"):
        evaluate(TABLE, names=[evaluator], params=params)


@pytest.mark.parametrize("value", [5, "finish", [1], None])
def test_ignore_tools_takes_a_list_of_names(value: Any) -> None:
    with pytest.raises(EvaluatorError, match="'ignore_tools' must be a list of tool names"):
        evaluate(
            TABLE, names=["trajectory_match"], params={"trajectory_match": {"ignore_tools": value}}
        )


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["max_seconds", "max_iterations", "max_tokens", "max_cost"]),
    st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 10**6)),
)
def test_every_budget_of_a_rubric_is_a_finite_number_at_least_zero(budget: str, value: Any) -> None:
    """`max_seconds: NaN` was no budget at all, and inf one no turn could miss."""
    whole = budget in ("max_iterations", "max_tokens")
    fits = math.isfinite(value) and value >= 0 and (isinstance(value, int) or not whole)
    if fits:
        assert getattr(rubric_from_dict({budget: value}), budget) == value
        return
    with pytest.raises(RubricError, match=f"rubric.{budget}: "):
        rubric_from_dict({budget: value})
