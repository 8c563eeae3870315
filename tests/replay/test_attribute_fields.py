"""The attribute fields' columns: read from `attributes` once, when a table is built or upgraded.

A table written before they existed (schema version 1) must score exactly as the same spans
built today, whether it is evaluated in memory, read from a file, or streamed beside files of
the new version.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import evaluate, score_batches
from plangate.replay import (
    ATTRIBUTE_FIELDS,
    SCHEMA,
    build_table,
    lost_attributes,
    read_table,
    table_from_columns,
    upgrade_table,
    write_table,
)
from plangate.replay._attribute_fields import (
    CACHED_TOKENS,
    COST_TOTAL,
    DROPPED_ATTRIBUTES,
    PROVIDER_KEYS,
    _parse_fields,
    _read_fields,
    attribute_columns,
)

OLD_SCHEMA = pa.schema(
    [f for f in SCHEMA if f.name not in ATTRIBUTE_FIELDS],
    metadata={"plangate.schema": "plangate.trace_table", "plangate.version": "1"},
)
LLM_ATTRIBUTES = [
    {"llm.provider": "openai", "llm.token_count.prompt_details.cache_read": 300},
    {"gen_ai.system": "anthropic", "llm.cost.total": 0.02},
    {"llm.provider": "", "llm.system": "openai", "otel.dropped_attributes_count": 7},
    None,
]


def rows(sessions: int = 4) -> list[dict[str, Any]]:
    """Turns of an agent span and model calls whose attributes hold the fields, some not."""
    made: list[dict[str, Any]] = []
    for s in range(sessions):
        trace = f"{s + 1:032x}"
        base = {"session_id": f"s{s}", "turn_index": 0, "trace_id": trace, "status_code": "OK",
                "source": "test"}  # fmt: skip
        made.append({**base, "span_id": f"{s:012x}0000", "span_kind": "AGENT", "name": "turn"})
        for c, attributes in enumerate(LLM_ATTRIBUTES[: 1 + s % len(LLM_ATTRIBUTES)], start=1):
            made.append({**base, "span_id": f"{s:012x}{c:04x}", "span_kind": "LLM",
                         "name": "llm", "model_name": "gpt-4o", "tokens_prompt": 1000 * c,
                         "tokens_completion": None if c == 3 else 10 * c,  # lost: dropped
                         "attributes": None if attributes is None else json.dumps(attributes)})  # fmt: skip
    return made


def as_version_1(table: pa.Table) -> pa.Table:
    return table.drop_columns(list(ATTRIBUTE_FIELDS)).cast(OLD_SCHEMA)


def test_build_table_reads_the_fields_from_the_attributes() -> None:
    table = build_table(rows())
    llm = table.filter(pc.equal(table["span_kind"], "LLM"))
    assert llm["tokens_cached"].to_pylist()[:3] == [300, 300, None]
    assert llm["cost_usd"].to_pylist()[:3] == [None, None, 0.02]
    assert llm["provider"].to_pylist()[:6] == ["openai", "openai", "anthropic", "openai",
                                               "anthropic", "openai"]  # fmt: skip
    assert llm["dropped_attributes"].to_pylist()[5] == 7
    assert pc.all(pc.is_null(table.filter(pc.equal(table["span_kind"], "AGENT"))["provider"]))


def test_a_value_given_for_a_column_is_kept() -> None:
    given = rows(1)
    given[1]["provider"] = "azure"  # the row's own, over its attributes' "openai"
    table = build_table(given)
    assert table["provider"].to_pylist() == [None, "azure"]
    columns = {name: [row.get(name) for row in given] for name in SCHEMA.names}
    columns["tokens_cached"] = [None, 5]
    assert table_from_columns(columns)["tokens_cached"].to_pylist() == [None, 5]


def test_a_table_of_schema_version_1_scores_as_the_same_spans_built_today() -> None:
    today = build_table(rows())
    old = as_version_1(today)
    assert upgrade_table(old).select(SCHEMA.names).equals(today)
    assert upgrade_table(today) is today  # nothing to read
    names = ["tokens", "cost"]
    expected = evaluate(today, names=names).to_pylist()
    assert evaluate(old, names=names).to_pylist() == expected
    assert {r["label"] for r in expected} >= {"lost counts", "no budget"}  # the fields mattered
    assert lost_attributes(old) == lost_attributes(today) is not None


def test_a_file_of_schema_version_1_is_read_and_streamed_as_today(tmp_path: Path) -> None:
    today = build_table(rows(8))
    names = ["tokens", "cost"]
    expected = sorted(
        evaluate(today, names=names).to_pylist(), key=lambda r: (r["session_id"], r["evaluator"])
    )
    old_file = tmp_path / "old" / "part-0.parquet"
    old_file.parent.mkdir()
    pq.write_table(as_version_1(today.slice(0, 12)), old_file)  # as plangate 1 wrote it
    write_table(today.slice(12), tmp_path / "old" / "part-1.parquet")  # and one of today's
    assert read_table(old_file).equals(today.slice(0, 12))
    streamed = pa.concat_tables(score_batches(tmp_path / "old", names=names, batch_rows=5))
    got = sorted(streamed.to_pylist(), key=lambda r: (r["session_id"], r["evaluator"]))
    assert got == expected


@pytest.mark.parametrize("column", sorted(ATTRIBUTE_FIELDS))
def test_a_column_of_another_type_is_named(column: str) -> None:
    table = build_table(rows(1))
    index = table.schema.get_field_index(column)
    wrong = table.set_column(
        index, column, pa.array(["x"] * table.num_rows).cast(pa.large_string())
    )
    with pytest.raises(Exception, match=column):
        evaluate(wrong, names=["tokens"])


def test_a_table_made_against_the_schema_by_hand_is_read_from_its_attributes() -> None:
    """All four columns null in every row while attributes say more: made without build_table."""
    today = build_table(rows())
    by_hand = pa.Table.from_pylist(rows(), schema=SCHEMA)
    assert all(by_hand.column(name).null_count == by_hand.num_rows for name in ATTRIBUTE_FIELDS)
    assert upgrade_table(by_hand).equals(today)
    names = ["tokens", "cost"]
    assert evaluate(by_hand, names=names).to_pylist() == evaluate(today, names=names).to_pylist()
    said_nothing = build_table([{**r, "attributes": None} for r in rows()])
    assert upgrade_table(said_nothing) is said_nothing  # nothing to read: not read again


def test_counts_past_int64_are_as_large_as_a_column_holds() -> None:
    huge = 2**63 + 5
    texts = [json.dumps({"otel.dropped_attributes_count": huge}),
             json.dumps({"llm.token_count.prompt_details.cache_read": huge})]  # fmt: skip
    table = build_table([{**r, "attributes": t} for r, t in zip(rows(1)[1:], texts, strict=False)])
    assert table["dropped_attributes"].to_pylist() == [2**63 - 1]
    assert lost_attributes(table) is not None  # a lost count, not none


def test_chunks_are_read_as_they_lie() -> None:
    table = build_table(rows(8))
    halves = pa.concat_tables([as_version_1(table.slice(0, 9)), as_version_1(table.slice(9))])
    assert halves.column("attributes").num_chunks == 2
    assert upgrade_table(halves).select(SCHEMA.names).equals(table)


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 2**64), st.floats(allow_nan=True),
    st.text(max_size=4), st.just({"llm.provider": "nested"}), st.just([1]),
)  # fmt: skip
_KEYS = st.sampled_from([*PROVIDER_KEYS, CACHED_TOKENS, COST_TOTAL, DROPPED_ATTRIBUTES, "x"])
_TYPED = st.fixed_dictionaries(
    {},
    optional={
        CACHED_TOKENS: st.integers(-3, 10**6), DROPPED_ATTRIBUTES: st.integers(-3, 3),
        COST_TOTAL: st.one_of(st.floats(), st.integers(-5, 10)), "x": _VALUES,
        **dict.fromkeys(PROVIDER_KEYS, st.text(max_size=3)),
    },
)  # fmt: skip
"""Fields of the types Arrow reads (so that it reads the texts), with values to refuse."""
_TEXT = st.one_of(st.none(), _TYPED.map(json.dumps))
_ODD = st.one_of(
    st.dictionaries(_KEYS, _VALUES, max_size=4).map(json.dumps),
    st.sampled_from(["{}", "[]", "", "not JSON", '{"a": 1}{"b": 2}', '{"llm.provider": "a",']),
)


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(_TEXT, min_size=1, max_size=12),
    odd=st.one_of(st.just([]), st.just([]), st.lists(_ODD, min_size=1, max_size=1)),
    copies=st.integers(1, 40),
)
def test_arrow_and_python_read_every_text_alike(
    texts: list[str | None], odd: list[str], copies: int
) -> None:
    """Whatever the texts, Arrow's reader gives what Python gives, or leaves them to it."""
    array = pa.array((texts + odd) * copies, pa.string())
    read, parsed = _read_fields(array), _parse_fields(array)
    if read is not None:
        assert [a.to_pylist() for a in read] == [a.to_pylist() for a in parsed]
    fields = attribute_columns(array)  # whichever reads them, at any size
    assert [fields[name].to_pylist() for name in ATTRIBUTE_FIELDS] == [
        a.to_pylist() for a in parsed
    ]
