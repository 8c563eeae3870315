"""A trace table's rows as spans again (`spans_from_table`): read back, they are the same rows."""

from __future__ import annotations

import asyncio

from opentelemetry.trace import SpanContext

from plangate.replay import read_dataset, replay_turn, rows_from_spans
from plangate.replay._exporter import record_from_span
from plangate.replay._table_spans import spans_from_table
from plangate.replay.schema import (
    PARENT_SPAN_ID,
    SOURCE,
    SPAN_ID,
    TRACE_ID,
    build_table,
)
from tests.conftest import REPO


def _table():
    dataset = read_dataset(REPO / "datasets" / "support-desk")
    session = dataset.turns.to_pylist()[0]["session_id"]
    result = asyncio.run(replay_turn(dataset, session, 0))
    assert result.table is not None and result.table.num_rows > 3
    return result.table


def test_the_rows_come_back_the_same() -> None:
    table = _table()
    spans = spans_from_table(table)
    again = build_table(rows_from_spans([record_from_span(s) for s in spans], source="x"))
    assert again.drop_columns([SOURCE]).to_pylist() == table.drop_columns([SOURCE]).to_pylist()


def test_under_a_span_they_join_its_trace_as_its_children() -> None:
    table = _table()
    run = SpanContext(0xABC, 0x123, False)
    spans = spans_from_table(table, under=run)
    assert {s.context.trace_id for s in spans} == {0xABC}
    roots = [s for s in spans if s.parent is not None and s.parent.span_id == 0x123]
    assert len(roots) == table.column(PARENT_SPAN_ID).null_count > 0
    rows = build_table(rows_from_spans([record_from_span(s) for s in spans], source="x"))
    assert set(rows.column(TRACE_ID).to_pylist()) == {format(0xABC, "032x")}
    assert rows.column(SPAN_ID).to_pylist() == table.column(SPAN_ID).to_pylist()
