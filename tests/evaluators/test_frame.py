"""The evaluators' frame groups spans by turn in the order the score table promises."""

from __future__ import annotations

import os
from unittest import mock

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import _threads, evaluate, prepare
from plangate.replay import SCHEMA, TraceTableError, validate_table
from tests.evaluators.tables import trace_tables

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def pandas_order(table: pa.Table) -> pd.DataFrame:
    """The order the frame must give: session, turn, start time (none last), then row."""
    spans = table.to_pandas()
    spans["row"] = range(len(spans))
    return spans.sort_values(
        ["session_id", "turn_index", "start_time", "row"], na_position="last", kind="stable"
    ).reset_index(drop=True)


@SETTINGS
@given(trace_tables())
def test_positions_are_the_rows_in_turn_order(table: pa.Table) -> None:
    frame = prepare(table)
    expected = pandas_order(table)
    rows = np.arange(table.num_rows) if frame.order is None else frame.order
    assert rows.tolist() == expected["row"].tolist()
    turns = expected[["session_id", "turn_index"]].drop_duplicates()
    assert frame.turns.session_id.to_pylist() == turns["session_id"].tolist()
    assert frame.turns.turn_index.tolist() == turns["turn_index"].tolist()
    keys = list(zip(expected["session_id"], expected["turn_index"], strict=True))
    assert [keys.index(k) for k in keys] == frame.turns.start[frame.turn].tolist()


@SETTINGS
@given(trace_tables())
def test_spans_of_a_kind_are_numbered_within_their_turn(table: pa.Table) -> None:
    frame = prepare(table)
    expected = pandas_order(table)
    for spans, kind in ((frame.tools, "TOOL"), (frame.llms, "LLM"), (frame.agents, "AGENT")):
        mine = expected[expected["span_kind"] == kind]
        assert spans.position.tolist() == mine.index.tolist()
        numbers = mine.groupby(["session_id", "turn_index"], sort=False).cumcount()
        assert spans.number.tolist() == numbers.tolist()
    agent = [
        int(g.index[g["span_kind"] == "AGENT"][0]) if (g["span_kind"] == "AGENT").any() else -1
        for _, g in expected.groupby(["session_id", "turn_index"], sort=True)
    ]
    assert frame.turns.agent.tolist() == agent


def interleaved(table: pa.Table, seed: int) -> pa.Table:
    """The rows of different turns interleaved at random, each turn's rows in their order.

    (Within a turn, spans without a start time are in row order: that order is evidence.)
    """
    keys = list(zip(table["session_id"].to_pylist(), table["turn_index"].to_pylist(), strict=True))
    slots = np.random.default_rng(seed).permutation(len(keys))
    rows: dict[tuple[str, int], list[int]] = {}
    for row, key in enumerate(keys):
        rows.setdefault(key, []).append(row)
    order = np.empty(len(keys), dtype=np.int64)
    for members in rows.values():
        order[np.sort(slots[members])] = members
    return table.take(order)


def turns_moved(table: pa.Table, seed: int) -> pa.Table:
    """Each turn's rows kept together and in their order, the turns in a random order."""
    keys = list(zip(table["session_id"].to_pylist(), table["turn_index"].to_pylist(), strict=True))
    rows: dict[tuple[str, int], list[int]] = {}
    for row, key in enumerate(keys):
        rows.setdefault(key, []).append(row)
    blocks = list(rows.values())
    moved = np.random.default_rng(seed).permutation(len(blocks))
    return table.take(pa.array([row for b in moved for row in blocks[b]], pa.int64()))


@SETTINGS
@given(trace_tables(), st.integers(0, 3))
def test_turns_that_come_as_blocks_are_moved_into_order(table: pa.Table, seed: int) -> None:
    moved = turns_moved(table, seed)
    frame = prepare(moved)
    rows = np.arange(moved.num_rows) if frame.order is None else frame.order
    assert rows.tolist() == pandas_order(moved)["row"].tolist()
    assert evaluate(moved).to_pylist() == evaluate(table).to_pylist()


@SETTINGS
@given(trace_tables())
def test_every_evaluator_scores_every_turn_once_whatever_the_row_order(table: pa.Table) -> None:
    scores = evaluate(table)
    shuffled = evaluate(interleaved(table, 0))
    turns = {
        (s, t)
        for s, t in zip(
            table["session_id"].to_pylist(), table["turn_index"].to_pylist(), strict=True
        )
    }
    for name in {
        "latency",
        "plan_adherence",
        "task_completion",
        "tool_call_loops",
        "trajectory_match",
    }:
        mine = scores.filter(pa.compute.equal(scores["evaluator"], name))
        keys = list(
            zip(mine["session_id"].to_pylist(), mine["turn_index"].to_pylist(), strict=True)
        )
        assert sorted(keys) == sorted(turns) and len(keys) == len(set(keys))
    assert scores.to_pylist() == shuffled.to_pylist()


def test_an_empty_table_gives_an_empty_score_table() -> None:
    assert evaluate(SCHEMA.empty_table()).num_rows == 0


@pytest.mark.parametrize(
    ("traces", "spans", "clash"),
    [
        (["t1", "t1", "t2"], ["s1", "s2", "s1"], None),  # span ids repeat across traces: fine
        (["t1", "t2", "t1"], ["s1", "s2", "s1"], "rows 0 and 2"),
    ],
)
def test_a_span_listed_twice_is_refused_by_row(
    traces: list[str], spans: list[str], clash: str | None
) -> None:
    rows = [
        {"session_id": "s", "turn_index": 0, "trace_id": t, "span_id": s, "span_kind": "TOOL",
         "name": "tool.x", "status_code": "OK", "source": "test"}
        for t, s in zip(traces, spans, strict=True)
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=SCHEMA)  # not validated: prepare must refuse it
    if clash is None:
        assert prepare(table).tools.number.tolist() == [0, 1, 2]
        return
    with pytest.raises(TraceTableError, match=f"{clash} have the same trace_id/span_id 't1/s1'"):
        prepare(table)


@pytest.mark.parametrize(
    ("statuses", "bad"),
    [
        (["OK"] * 40, None),
        (["OK"] * 23 + ["BAD"] + ["OK"] * 16, 23),  # few changes: only they are looked at
        (["OK", "ERROR"] * 19 + ["BAD", "BAD"], 38),  # many: every row is
        (["OK"] * 30 + ["ERROR", "BAD", "BAD"] + ["OK"] * 7, 31),
    ],
)
def test_a_bad_status_is_refused_at_its_first_row(statuses: list[str], bad: int | None) -> None:
    rows = [
        {"session_id": "s", "turn_index": 0, "trace_id": "t", "span_id": f"s{i}", "span_kind": "TOOL",
         "name": "tool.x", "status_code": status, "source": "test"}
        for i, status in enumerate(statuses)
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    if bad is None:
        assert len(prepare(table).tools) == len(statuses)
        return
    with pytest.raises(TraceTableError, match=f"row {bad}, column 'status_code' is 'BAD'"):
        prepare(table)


@pytest.mark.parametrize("chunks", [1, 3])
def test_codes_give_nulls_minus_one_and_keep_first_seen_order(chunks: int) -> None:
    names = [None, "b", "a", None, "b", "c", None]
    rows = [
        {"session_id": "s", "turn_index": 0, "trace_id": "t", "span_id": f"s{i}", "span_kind": "TOOL",
         "name": "tool.x", "status_code": "OK", "source": "test", "tool_name": name}
        for i, name in enumerate(names)
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    size = -(-len(rows) // chunks)
    table = pa.concat_tables([table.slice(i, size) for i in range(0, len(rows), size)])
    codes, distinct = prepare(table).codes("tool_name")
    assert distinct.to_pylist() == ["b", "a", "c"]
    assert codes.tolist() == [-1, 0, 1, -1, 0, 2, -1]


@SETTINGS
@given(trace_tables(), st.integers(0, 3))
def test_a_table_checked_on_a_second_thread_gives_the_same_frame(
    table: pa.Table, seed: int
) -> None:
    table = interleaved(table, seed)
    alone = prepare(table)
    with mock.patch.object(_threads, "BESIDE_ROWS", 0), mock.patch.dict(os.environ):
        os.environ.pop("OMP_NUM_THREADS", None)  # every table large, two threads allowed
        beside = prepare(table)
    assert (alone.order is None) == (beside.order is None)
    for name in ("order", "turn", "kind"):
        mine, theirs = getattr(alone, name), getattr(beside, name)
        assert theirs is None if mine is None else theirs.tolist() == mine.tolist()
    assert beside.tools.position.tolist() == alone.tools.position.tolist()
    assert beside.turns.start.tolist() == alone.turns.start.tolist()
    assert beside.turns.agent.tolist() == alone.turns.agent.tolist()


def spans(rows: int, **columns: list[object]) -> pa.Table:
    """`rows` valid TOOL spans of turn 0 of one session, with some columns replaced."""
    values: dict[str, list[object]] = {
        "session_id": ["s"] * rows, "turn_index": [0] * rows, "trace_id": ["t"] * rows,
        "span_id": [f"{i:016x}" for i in range(rows)], "span_kind": ["TOOL"] * rows,
        "name": ["tool.x"] * rows, "status_code": ["OK"] * rows, "source": ["test"] * rows,
    }  # fmt: skip
    values.update(columns)
    nothing = [None] * rows
    return pa.table([values.get(f.name, nothing) for f in SCHEMA], schema=SCHEMA)  # unchecked


ROWS = 30_000
"""Above `BESIDE_ROWS`: the checks run on a second thread."""


@pytest.mark.parametrize(
    ("table", "error"),
    [
        (spans(ROWS, span_id=["a"] + [f"{i:016x}" for i in range(1, ROWS - 1)] + ["a"]),
         f"rows 0 and {ROWS - 1} have the same trace_id/span_id 't/a'"),
        (spans(ROWS, span_kind=["TOOL"] * 7 + ["tool"] + ["TOOL"] * (ROWS - 8)),
         "row 7, column 'span_kind' is 'tool'"),
        (spans(ROWS, session_id=["s"] * 5 + [None] + ["s"] * (ROWS - 6)),
         "row 5, column 'session_id' is null"),
        (spans(ROWS, turn_index=[0] * 9 + [None] + [0] * (ROWS - 10)),
         "row 9, column 'turn_index' is null"),
        (spans(ROWS).drop_columns(["status_code"]), "status_code"),
    ],
)  # fmt: skip
def test_a_large_table_gets_the_error_of_its_checks(table: pa.Table, error: str) -> None:
    assert table.num_rows > _threads.BESIDE_ROWS
    with pytest.raises(TraceTableError) as serial:
        validate_table(table)
    assert error in str(serial.value)
    with mock.patch.dict(os.environ), pytest.raises(TraceTableError) as raised:
        os.environ.pop("OMP_NUM_THREADS", None)
        prepare(table)
    assert str(raised.value) == str(serial.value)
