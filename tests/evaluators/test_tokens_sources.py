"""`tokens` and `cost` on what importers make: tau2-bench results and GenAI-convention spans.

tau2: the importer keeps the agent's (assistant) messages' `usage` on the LLM rows and leaves
the user simulator's out, and keeps the simulation's `agent_cost` on the AGENT row. So a
simulation's tokens are its assistant messages' usage summed, and its cost is `agent_cost`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from genai_prices import Usage, calc_price

from plangate.evaluators import evaluate
from plangate.replay import SpanRecord, build_table, import_traces, rows_from_spans
from plangate.replay._attribute_fields import _parse_fields, _read_fields

TAU2 = "tau2-bench"


def tau2_files(corpus: Path) -> list[Path]:
    files = []
    for path in sorted((corpus / TAU2).glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict) and "simulations" in data:
            files.append(path)
    return files


def by_session(scores: pa.Table, evaluator: str) -> dict[str, dict[str, Any]]:
    return {r["session_id"]: r for r in scores.to_pylist() if r["evaluator"] == evaluator}


def agent_usage(simulation: dict[str, Any]) -> tuple[int, int] | None:
    """The assistant messages' prompt and completion tokens summed (None: none has usage)."""
    usages = [m["usage"] for m in simulation["messages"]
              if m.get("role") == "assistant" and m.get("usage")]  # fmt: skip
    if not usages:
        return None
    return sum(u["prompt_tokens"] for u in usages), sum(u["completion_tokens"] for u in usages)


def test_tau2_tokens_are_the_agents_usage_and_cost_is_agent_cost(corpus: Path) -> None:
    files = tau2_files(corpus)
    assert len(files) >= 4
    with_usage = with_cost = user_usage = 0
    for path in files:
        simulations = json.loads(path.read_text(encoding="utf-8"))["simulations"]
        scores = evaluate(import_traces("tau2", [path]), names=["tokens", "cost"])
        tokens, cost = by_session(scores, "tokens"), by_session(scores, "cost")
        for simulation in simulations:
            session = f"tau2/{simulation['id']}"
            usage = agent_usage(simulation)
            details = json.loads(tokens[session]["details"])
            if usage is None:
                assert (tokens[session]["score"], tokens[session]["label"]) == (None, "no counts")
            else:
                with_usage += 1
                assert (details["tokens_prompt"], details["tokens_completion"]) == usage
                assert tokens[session]["score"] == sum(usage)
                users = [m for m in simulation["messages"] if m.get("role") == "user"]
                user_usage += sum(1 for m in users if m.get("usage"))
            if simulation.get("agent_cost") is not None:
                with_cost += 1
                assert cost[session]["score"] == simulation["agent_cost"]
                assert json.loads(cost[session]["details"])["cost_from"] == "agent span"
            elif usage is None:
                assert cost[session]["label"] == "no counts"
    assert with_usage > 100
    assert with_cost > 100
    assert user_usage > 100  # the user simulator's usage is there, and left out of the sums


# -- GenAI-convention spans --------------------------------------------------------------------


START = datetime(2026, 2, 1, tzinfo=UTC)


def span(number: int, parent: str | None, attributes: dict[str, Any]) -> SpanRecord:
    at = START + timedelta(seconds=number)
    return SpanRecord(trace_id="ab" * 16, span_id=f"{number:016x}", parent_span_id=parent,
                      name=f"span {number}", start_time=at, end_time=at + timedelta(seconds=1),
                      attributes={"gen_ai.conversation.id": "conv-1", **attributes})  # fmt: skip


@pytest.mark.parametrize(
    ("input_key", "output_key"),
    [
        ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"),
        ("gen_ai.usage.prompt_tokens", "gen_ai.usage.completion_tokens"),  # the older names
    ],
)
def test_genai_usage_becomes_the_turns_tokens(input_key: str, output_key: str) -> None:
    root = span(0, None, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "p"})
    chats = [
        span(
            n,
            root.span_id,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.provider.name": "openai",
                input_key: prompt,
                output_key: completion,
            },
        )  # fmt: skip
        for n, (prompt, completion) in enumerate([(812, 64), (1000, 36)], start=1)
    ]
    table = build_table(rows_from_spans([root, *chats], source="otlp"))
    scores = evaluate(table, names=["tokens", "cost"]).to_pylist()
    tokens = next(r for r in scores if r["evaluator"] == "tokens")
    details = json.loads(tokens["details"])
    assert tokens["score"] == 812 + 64 + 1000 + 36
    assert (details["tokens_prompt"], details["tokens_completion"]) == (1812, 100)
    assert details["models"] == [{"model": "gpt-4o", "provider": "openai"}]
    cost = next(r for r in scores if r["evaluator"] == "cost")
    assert json.loads(cost["details"])["priced_calls"] == 2
    expected = sum(
        float(calc_price(Usage(input_tokens=p, output_tokens=c), "gpt-4o", provider_id="openai",
                         genai_request_timestamp=START).total_price)
        for p, c in [(812, 64), (1000, 36)]
    )  # fmt: skip
    assert cost["score"] == pytest.approx(expected, rel=1e-12)


TRICKY = [
    '{"llm.provider": "openai", "llm.token_count.prompt_details.cache_read": 100}',
    '{"gen_ai.system": "anthropic", "llm.provider": ""}',  # an empty name is no name
    '{"llm.system": "x", "gen_ai.provider.name": "y"}',  # the first key in order wins
    '{"metadata": {"llm.provider": "nested"}, "llm.cost.total": 0.5}',  # not the span's own
    '{"llm.cost.total": -1, "llm.token_count.prompt_details.cache_read": -5}',
    '{"llm.cost.total": Infinity}',
    '{"llm.provider": "caf\\u00e9"}',
    None,
    '{"llm.cost.total": 2}',
    '{"otel.dropped_attributes_count": 3, "llm.cost.total": 0}',
]


@pytest.mark.parametrize(
    "extra",
    [None, '{"llm.token_count.prompt_details.cache_read": 5.0}', "[]", "", '{"a": 1}{"b": 2}',
     '{"llm.system": 7}', "not JSON"],
)  # fmt: skip
def test_arrow_reads_the_attributes_as_python_does_or_leaves_them_to_it(extra: str | None) -> None:
    """Arrow's JSON reader gives what Python gives, and gives up where only Python can say."""
    texts = pa.array([*TRICKY, *([extra] if extra is not None else [])], pa.string())
    read = _read_fields(texts)
    if extra is not None:
        assert read is None  # another type, not one object per text: Python reads them
        return
    assert read is not None
    parsed = _parse_fields(texts)
    assert [a.to_pylist() for a in read] == [a.to_pylist() for a in parsed]
    assert [a.type for a in read] == [a.type for a in parsed]
    assert read[0].to_pylist() == [100, None, None, None, None, None, None, None, None, None]
    assert read[1].to_pylist() == [None, None, None, 0.5, None, None, None, None, 2.0, 0.0]
    assert read[2].to_pylist() == ["openai", "anthropic", "y", None, None, None, "café", None,
                                   None, None]  # fmt: skip
    assert read[3].to_pylist() == [None] * 9 + [3]


@pytest.mark.parametrize(
    "texts",
    [
        ['{"otel.dropped_attributes_count": 3, "x": ', '{"y": 1}}{"z": 2}'],
        ['{"a": "}', '{", "otel.dropped_attributes_count": 3}{"w": 2}'],
        ['{"otel.dropped_attributes_count": 3, "x": {', '"y": 1}}{"z": 2}'],
    ],
)
def test_texts_are_never_read_across_each_other(texts: list[str]) -> None:
    """Two broken texts together can spell objects: Arrow must not read them so."""
    array = pa.array(texts, pa.string())
    assert _read_fields(array) is None  # not one object each: Python reads them
    parsed = _parse_fields(array)
    assert parsed[3].to_pylist() == [None, None]


def test_a_newline_between_tokens_is_read_as_python_reads_it() -> None:
    array = pa.array(['{"llm.provider":\n "x"}', '{"llm.cost.total": 1}'], pa.string())
    read, parsed = _read_fields(array), _parse_fields(array)
    assert read is not None
    assert [a.to_pylist() for a in read] == [a.to_pylist() for a in parsed]


def test_a_null_that_holds_bytes_is_left_to_python() -> None:
    """Arrow allows a null slot to hold bytes: read in place, they could complete a broken text."""
    data = b'{"llm.provider": "a"' + b"}"  # a text cut short, then a null slot's byte
    offsets = pa.py_buffer(np.array([0, 20, 21], dtype=np.int32).tobytes())
    validity = pa.py_buffer(np.packbits([1, 0], bitorder="little").tobytes())
    texts = pa.Array.from_buffers(pa.string(), 2, [validity, offsets, pa.py_buffer(data)], 1)
    assert texts.to_pylist() == ['{"llm.provider": "a"', None]
    assert _read_fields(texts) is None
    assert _parse_fields(texts)[2].to_pylist() == [None, None]  # not JSON: no provider


def test_attributes_read_in_the_tables_own_order_land_on_their_spans() -> None:
    """Arrow reads `attributes` in the table's row order: the fields go to their own spans.

    Rows in reverse put every span elsewhere than its turn-order position; each call's cached
    tokens, provider and recorded cost must still be its own.
    """
    spans = []
    for turn in range(3):
        trace = f"{turn + 1:032x}"  # a trace a turn
        root = replace(span(10 * turn, None, {"openinference.span.kind": "AGENT"}), trace_id=trace)
        spans.append(root)
        for call in range(1, 3):
            number = 10 * turn + call
            llm = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
                   "llm.token_count.prompt": 1000 * number, "llm.token_count.completion": 10,
                   "llm.token_count.prompt_details.cache_read": number,
                   "llm.provider": "openai" if call == 1 else "azure"}  # fmt: skip
            if turn == 1:
                llm["llm.cost.total"] = 0.25 * call
            spans.append(replace(span(number, root.span_id, llm), trace_id=trace))
    table = build_table(rows_from_spans(spans, source="otlp"))
    reversed_rows = table.take(pa.array(np.arange(table.num_rows)[::-1]))
    assert reversed_rows.column("span_id").to_pylist() != table.column("span_id").to_pylist()
    scores = evaluate(table, names=["tokens", "cost"]).to_pylist()
    assert evaluate(reversed_rows, names=["tokens", "cost"]).to_pylist() == scores
    turns = {(r["evaluator"], r["turn_index"]): r for r in scores}
    assert len(turns) == 6
    assert turns["cost", 1]["score"] == 0.75  # the recorded costs, not priced
    assert json.loads(turns["cost", 1]["details"])["recorded_calls"] == 2
    assert json.loads(turns["tokens", 2]["details"])["tokens_cached"] == 21 + 22
    models = json.loads(turns["tokens", 0]["details"])["models"]
    assert [m["provider"] for m in models] == ["azure", "openai"]
