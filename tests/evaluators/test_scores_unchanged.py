"""Today's scores equal the stored ones, row for row, on every golden, the corpus and a bench table.

The stored scores (`data/scores_baseline.parquet`) were written by `tests/evaluators/baseline.py`
with the evaluators as they were before they were vectorized. An evaluator whose verdicts change
on purpose bumps its version and rewrites the file, saying why in the commit.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.evaluators.baseline import BASELINE, scores_of

KEY = ("source", "session_id", "turn_index", "evaluator")


def rows(table: Any) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in KEY): r for r in table.to_pylist()}


def same(before: Any, after: Any) -> bool:
    if isinstance(before, float) and isinstance(after, float):
        return math.isclose(before, after, rel_tol=1e-12, abs_tol=1e-12)
    return bool(before == after)


@pytest.fixture(scope="module")
def compared(corpus: Path) -> tuple[dict[tuple[Any, ...], Any], dict[tuple[Any, ...], Any]]:
    before = rows(pq.read_table(BASELINE))
    stored = {key[3] for key in before}  # evaluators added since are compared by their own tests
    after = {key: row for key, row in rows(scores_of(corpus)).items() if key[3] in stored}
    return before, after


def test_every_stored_turn_is_scored_and_no_other(compared: Any) -> None:
    before, after = compared
    assert sorted(before) == sorted(after)
    assert len(before) > 5000


@pytest.mark.parametrize(
    "column", ["score", "passed", "outcome", "label", "explanation", "task_id", "trial", "version"]
)
def test_column_unchanged_row_for_row(compared: Any, column: str) -> None:
    before, after = compared
    changed = [k for k in before if not same(before[k][column], after[k][column])]
    assert not changed, (changed[:3], [(before[k][column], after[k][column]) for k in changed[:3]])


def test_details_unchanged_row_for_row(compared: Any) -> None:
    before, after = compared

    def parsed(value: str | None) -> Any:
        return None if value is None else json.loads(value)

    changed = [k for k in before if parsed(before[k]["details"]) != parsed(after[k]["details"])]
    assert not changed, [(before[k]["details"], after[k]["details"]) for k in changed[:2]]
