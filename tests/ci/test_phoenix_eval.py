"""The parts of `plangate.ci.phoenix` that need no Phoenix server: links, namespaces, span conversion,
the score join and the session-renaming exporter. The server tests are in tests/phoenix/."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
from pathlib import Path

import pyarrow as pa
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.ci.phoenix._annotations import AnnotationError, joined_scores
from plangate.ci.phoenix._datasets import golden_examples, phoenix_spans
from plangate.ci.phoenix._experiments import NamespacedSessions, run_coroutine
from plangate.ci.phoenix.names import compare_url, joined, namespace, session_url, trace_url
from plangate.evaluators import evaluate
from plangate.replay import build_table, read_dataset
from plangate.replay.schema import ATTRIBUTE_OF_COLUMN
from tests.helpers import turn_rows

GOLDEN = Path(__file__).resolve().parents[2] / "datasets" / "observability-core"


def test_links_use_the_project_id_or_phoenixs_redirects() -> None:
    base = "http://127.0.0.1:6006/"
    trace = "ab" * 16
    assert trace_url(base, "UHJvamVjdDoy", trace) == (
        f"http://127.0.0.1:6006/projects/UHJvamVjdDoy/traces/{trace}"
    )
    # A name (or nothing) cannot go in the project route: Phoenix's redirect finds the project.
    assert trace_url(base, "my-project", trace) == f"http://127.0.0.1:6006/redirects/traces/{trace}"
    assert trace_url(base, None, trace) == f"http://127.0.0.1:6006/redirects/traces/{trace}"
    assert session_url(base, "ds:alyx:run 1:s?1") == (
        "http://127.0.0.1:6006/redirects/sessions/ds:alyx:run%201:s%3F1"
    )
    assert compare_url(base, "RGF0YXNldDox", ["RXhwZXJpbWVudDox", "RXhwZXJpbWVudDoy"]) == (
        "http://127.0.0.1:6006/datasets/RGF0YXNldDox/compare"
        "?experimentId=RXhwZXJpbWVudDox&experimentId=RXhwZXJpbWVudDoy"
    )


def test_namespaced_session_ids_hold_no_characters_phoenix_refuses() -> None:
    prefix = namespace("golden/core", "variants/my:flux.toml", run="r1")
    assert prefix == "golden_core:my_flux:r1"
    assert joined(prefix, "s#1/a") == "golden_core:my_flux:r1:s_1_a"
    assert namespace("d", "alyx").startswith("d:alyx:")


def test_recorded_spans_become_phoenix_spans_with_fresh_ids_and_the_same_content() -> None:
    golden = read_dataset(GOLDEN)
    rows = [r for r in golden.spans.to_pylist() if r["session_id"] == "obs-008"]
    spans = phoenix_spans(rows, namespace="obs:recorded:r1")

    assert len(spans) == len(rows)
    new_trace = {r["trace_id"]: s["context"]["trace_id"] for r, s in zip(rows, spans, strict=True)}
    new_span = {r["span_id"]: s["context"]["span_id"] for r, s in zip(rows, spans, strict=True)}
    assert not set(new_trace) & set(new_trace.values())
    assert len(set(new_span.values())) == len(rows)
    for row, span in zip(rows, spans, strict=True):
        assert span["context"]["trace_id"] == new_trace[row["trace_id"]]
        assert span.get("parent_id") == (
            new_span[row["parent_span_id"]] if row["parent_span_id"] else None
        )
        assert span["span_kind"] == row["span_kind"] and span["name"] == row["name"]
        attributes = span["attributes"]
        assert attributes["session.id"] == "obs:recorded:r1:obs-008"
        assert attributes["plangate.session_id"] == "obs-008"
        for column, key in ATTRIBUTE_OF_COLUMN.items():
            assert attributes.get(key) == row[column]
        for key, value in json.loads(row["attributes"] or "{}").items():
            assert attributes[key] == value
        events = json.loads(row["events"] or "[]")
        assert [e["name"] for e in span["events"]] == [e["name"] for e in events]


def test_examples_have_stable_ids_that_change_with_their_content() -> None:
    golden = read_dataset(GOLDEN)
    examples = golden_examples(golden, ["obs-001"])
    assert [e["id"].rsplit(":", 1)[0] for e in examples] == ["obs-001:0", "obs-001:1"]
    assert [e["id"] for e in golden_examples(golden, ["obs-001"])] == [e["id"] for e in examples]
    changed = golden.turns.set_column(
        golden.turns.schema.get_field_index("answer"),
        "answer",
        pa.array(["another answer"] * golden.turns.num_rows),
    )
    other = golden_examples(dataclasses.replace(golden, turns=changed), ["obs-001"])
    assert {e["id"] for e in other}.isdisjoint(e["id"] for e in examples)


def test_scores_join_their_turns_agent_span() -> None:
    traces = build_table(turn_rows("s1", 0, [("add", {"a": 1})]) + turn_rows("s1", 1))
    scores = evaluate(traces, names=["tool_call_loops"])
    joined = joined_scores(scores, traces)
    agents = {(r["session_id"], r["turn_index"]): r for r in traces.to_pylist()
              if r["span_kind"] == "AGENT"}  # fmt: skip
    assert len(joined) == 2
    for row in joined.itertuples():
        assert row.span_id == agents[(row.session_id, row.turn_index)]["span_id"]

    with pytest.raises(AnnotationError, match="no column 'outcome'"):
        joined_scores(scores.drop_columns(["passed", "outcome"]), traces)
    # A table written before outcomes existed gets them from `passed`.
    old = joined_scores(scores.drop_columns(["outcome"]), traces)
    assert list(old["outcome"]) == list(joined["outcome"])
    twice = pa.concat_tables([traces, build_table(turn_rows("s1", 1, source="other"))])
    with pytest.raises(AnnotationError, match="2 AGENT spans for session 's1' turn 1"):
        joined_scores(scores, twice)


def test_the_exporter_namespaces_session_ids_on_copies() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    seen = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(seen))
    provider.add_span_processor(SimpleSpanProcessor(NamespacedSessions(memory, "d:alyx:r1")))
    tracer = provider.get_tracer("test")
    with (
        tracer.start_as_current_span("turn", attributes={"session.id": "s1", "x": 1}),
        tracer.start_as_current_span("bare"),
    ):
        pass
    exported = {s.name: s for s in memory.get_finished_spans()}
    assert exported["turn"].attributes == {
        "session.id": "d:alyx:r1:s1",
        "plangate.session_id": "s1",
        "x": 1,
    }
    assert exported["turn"].context == seen.get_finished_spans()[1].context
    assert dict(exported["bare"].attributes or {}) == {}
    # The other processors (the trace table) keep the original id.
    assert seen.get_finished_spans()[1].attributes == {"session.id": "s1", "x": 1}


async def test_a_coroutine_runs_from_sync_code_inside_a_running_loop_with_its_context() -> None:
    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker")
    marker.set("outer")

    async def read() -> str:
        await asyncio.sleep(0)
        return marker.get()

    assert run_coroutine(read()) == "outer"
