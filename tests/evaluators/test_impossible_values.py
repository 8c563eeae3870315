"""Values no source gives are no evidence: a turn they decide is n/a, never a pass.

A span that ends before it starts (a clock stepped back), a token count below zero, a reward of
infinity: each used to pass its turn (a wall time of -7.6 s within 5 s; -9,000 prompt tokens
within 1,000; reward inf over the threshold) and the last made the mean score infinite.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from plangate.evaluators import Rubric, RubricSet, evaluate
from tests.conftest import REPO

SPANS = pq.read_table(REPO / "datasets" / "third-party" / "spans.parquet")
TABLE = SPANS.filter(pc.is_valid(SPANS["start_time"]))  # the timed sources' spans
BUDGETS = RubricSet(default=Rubric(max_seconds=1_000, max_tokens=1_000_000))


SESSION, TURN = TABLE["session_id"][0], TABLE["turn_index"][0]


def first_turn(table: pa.Table) -> pa.Array:
    """The rows of the table's first turn (its spans, or its scores)."""
    return pc.and_(pc.equal(table["session_id"], SESSION), pc.equal(table["turn_index"], TURN))


def scored(table: pa.Table, name: str) -> dict[str, object]:
    scores = evaluate(table, BUDGETS, names=[name])
    return scores.filter(first_turn(scores)).to_pylist()[0]


def replaced(table: pa.Table, column: str, values: pa.Array) -> pa.Table:
    return table.set_column(table.schema.get_field_index(column), column, values)


def test_a_turn_whose_spans_end_before_they_start_has_no_time() -> None:
    timed = TABLE
    assert scored(timed, "latency")["outcome"] == "pass"
    back = pc.subtract(timed["start_time"], pa.scalar(timedelta(seconds=7)))
    ends = pc.if_else(first_turn(timed), back, timed["end_time"])
    stepped = scored(replaced(timed, "end_time", ends), "latency")
    assert (stepped["outcome"], stepped["label"], stepped["score"]) == ("n/a", "no timing", None)


def test_a_token_count_below_zero_is_no_count() -> None:
    counted = TABLE
    assert scored(counted, "tokens")["outcome"] == "pass"
    llm = pc.and_(first_turn(counted), pc.equal(counted["span_kind"], "LLM"))
    negative = pc.if_else(llm, pa.scalar(-9_000, pa.int64()), counted["tokens_prompt"])
    said = scored(replaced(counted, "tokens_prompt", negative), "tokens")
    assert said["outcome"] != "pass" and "-9,000" not in str(said["explanation"])


def test_an_infinite_reward_is_no_judgement() -> None:
    rewards = [math.inf if r is not None else None for r in SPANS["reward"].to_pylist()]
    scores = evaluate(replaced(SPANS, "reward", pa.array(rewards)), names=["task_completion"])
    assert all(s is None or math.isfinite(s) for s in scores["score"].to_pylist())
    assert not any("reward inf" in e for e in scores["explanation"].to_pylist())
