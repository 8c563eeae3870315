"""OpenInference spans into the trace table: the exporter, on the real agent and on the spans
of other agents."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pyarrow as pa
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.evaluators import Rubric, RubricSet, evaluate
from plangate.harness import ScriptedModel, ToolCall
from plangate.replay._exporter import TraceTableExporter, trace_table_provider
from tests.helpers import agent, call

TWO_TASKS = "Add 1 and 2, then add 3 and 4"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")


def script() -> list[object]:
    return [
        # turn 0: a two-item plan, a premature finish that the gate bounces, then the rest
        call("todo_write", "w", todos=[{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}]),
        call("todo_update", "u1", item_id=1, status="in_progress"),
        ToolCall(id="a1", name="add", arguments='{"b": 2,  "a": 1}'),  # not canonical
        call("todo_update", "u2", item_id=1, status="completed"),
        call("finish", "f0", summary="early"),
        call("todo_update", "u3", item_id=2, status="in_progress"),
        call("add", "a2", a=3, b=4),
        call("todo_update", "u4", item_id=2, status="completed"),
        call("finish", "f1", summary="3 and 7"),
        # turn 1: one action, no plan
        call("add", "a3", a=5, b=6),
        call("finish", "f2", summary="11"),
    ]


async def traced_session() -> tuple[pa.Table, Sequence[ReadableSpan], TraceTableExporter]:
    provider, exporter = trace_table_provider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    model = ScriptedModel(script())
    session = agent(model, tracer_provider=provider).session(
        "sess-1", metadata={"task_id": "t-7", "trial": 2}
    )
    await session.run_turn(TWO_TASKS)
    await session.run_turn("Add 5 and 6")
    model.assert_complete()
    return exporter.table(), memory.get_finished_spans(), exporter


def rows(table: pa.Table, **where: Any) -> list[dict[str, Any]]:
    return [r for r in table.to_pylist() if all(r[k] == v for k, v in where.items())]


# -- the exporter, on the real agent --------------------------------------------------------


async def test_one_agent_row_per_turn_with_outcome_and_variant() -> None:
    table, _, _ = await traced_session()
    agents = rows(table, span_kind="AGENT")
    assert [r["turn_index"] for r in agents] == [0, 1]
    assert [r["input_value"] for r in agents] == [TWO_TASKS, "Add 5 and 6"]
    assert [r["output_value"] for r in agents] == ["3 and 7", "11"]
    for row in agents:
        assert row["stop_reason"] == "finished"
        assert row["parent_span_id"] is None
        assert (row["task_id"], row["trial"], row["reward"]) == ("t-7", 2, None)
    assert {r["variant"] for r in table.to_pylist()} == {"alyx"}
    assert {r["source"] for r in table.to_pylist()} == {"plangate"}
    assert len(set(table.column("trace_id").to_pylist())) == 2


async def test_session_on_every_row_and_children_point_at_their_agent_span() -> None:
    table, _, _ = await traced_session()
    assert set(table.column("session_id").to_pylist()) == {"sess-1"}
    agent_of = {r["trace_id"]: r["span_id"] for r in rows(table, span_kind="AGENT")}
    children = [r for r in table.to_pylist() if r["span_kind"] != "AGENT"]
    assert {r["span_kind"] for r in children} == {"LLM", "TOOL"}
    for row in children:
        assert row["parent_span_id"] == agent_of[row["trace_id"]]
        assert HEX16.match(row["span_id"]) and HEX32.match(row["trace_id"])
    # each turn's rows sit together, in order of start
    assert table.column("turn_index").to_pylist() == sorted(table.column("turn_index").to_pylist())


async def test_llm_rows_number_the_model_calls_of_each_turn() -> None:
    table, _, _ = await traced_session()
    for turn, calls in ((0, 9), (1, 2)):
        llm = rows(table, span_kind="LLM", turn_index=turn)
        assert [r["iteration"] for r in llm] == list(range(1, calls + 1))
        for row in llm:
            assert (row["model_name"], row["tokens_prompt"], row["tokens_completion"]) == (
                "scripted",
                10,
                5,
            )
            assert json.loads(row["input_value"])["messages"][0]["role"] == "system"
            assert row["tool_args"] is None and row["tool_output"] is None


async def test_tool_rows_carry_canonical_arguments_outputs_and_plan_changes() -> None:
    table, _, _ = await traced_session()
    tools = rows(table, span_kind="TOOL", turn_index=0)
    assert [r["tool_name"] for r in tools] == [
        "todo_write", "todo_update", "add", "todo_update", "finish",
        "todo_update", "add", "todo_update", "finish",
    ]  # fmt: skip
    assert [r["iteration"] for r in tools] == list(range(1, 10))
    add = tools[2]
    assert (add["tool_call_id"], add["tool_args"]) == ("a1", '{"a":1,"b":2}')
    assert add["input_value"] == '{"b": 2,  "a": 1}'  # kept as the model wrote it
    assert add["tool_output"].startswith("3\n")
    # the plan snapshot is on the rows that changed it, and only there
    changed = [r["tool_name"] for r in tools if r["plan"] is not None]
    assert changed == ["todo_write", "todo_update", "todo_update", "todo_update", "todo_update"]
    assert [item["status"] for item in json.loads(tools[3]["plan"])] == ["completed", "pending"]
    bounced = tools[4]
    assert bounced["status_code"] == "ERROR"
    assert "Cannot finish" in bounced["status_message"]
    assert (tools[8]["status_code"], tools[8]["tool_args"]) == ("UNSET", '{"summary":"3 and 7"}')
    assert [r["tool_args"] for r in rows(table, span_kind="TOOL", turn_index=1)] == [
        '{"a":5,"b":6}',
        '{"summary":"11"}',
    ]


async def test_agent_rows_carry_the_turn_events() -> None:
    table, _, _ = await traced_session()
    first, second = rows(table, span_kind="AGENT")
    events = json.loads(first["events"])
    names = [e["name"] for e in events]
    assert names.count("gate_bounce") == 1
    assert names.count("plan_updated") == 5
    assert names[-1] == "stop"
    bounce = events[names.index("gate_bounce")]
    assert bounce["attributes"]["plangate.iteration"] == 5
    assert "Add 3 and 4 (pending)" in bounce["attributes"]["plangate.detail"]
    times = [datetime.fromisoformat(e["time"]) for e in events]
    assert times == sorted(times) and first["start_time"] <= times[0] <= first["end_time"]
    assert [e["name"] for e in json.loads(second["events"])][-1] == "stop"
    assert all(r["events"] is None for r in table.to_pylist() if r["span_kind"] != "AGENT")


async def test_attributes_json_holds_only_what_has_no_column() -> None:
    table, _, _ = await traced_session()
    agent_row = rows(table, span_kind="AGENT")[0]
    rest = json.loads(agent_row["attributes"])
    assert rest["metadata"] == {"task_id": "t-7", "trial": 2, "variant": "alyx"}  # parsed
    assert rest["plangate.iterations"] == 9
    assert rest["user.id"] == "user"
    for mapped in ("session.id", "input.value", "plangate.turn_index", "plangate.stop_reason"):
        assert mapped not in rest
    add = rows(table, span_kind="TOOL", tool_call_id="a1")[0]
    rest = json.loads(add["attributes"])
    assert rest["tool.parameters"]["required"] == ["a", "b"]  # the schema, kept (parsed)
    assert not {"tool.name", "tool.id", "input.value", "output.value"} & set(rest)
    assert list(rest) == sorted(rest)


async def test_clear_forgets_the_spans() -> None:
    _, _, exporter = await traced_session()
    exporter.clear()
    assert exporter.table().num_rows == 0


def test_spans_of_other_agents_get_sessions_turns_and_kinds_by_convention() -> None:
    provider, exporter = trace_table_provider()
    tracer = provider.get_tracer("other-agent")
    base = 1_700_000_000_000_000_000
    # two traces of one session, started in reverse order; the child carries no session.id
    for offset, question in ((60, "later"), (0, "earlier")):
        with (
            tracer.start_as_current_span(
                "turn",
                start_time=base + offset * 10**9,
                attributes={"openinference.span.kind": "CHAIN", "session.id": "s", "q": question},
            ),
            tracer.start_as_current_span(
                "lookup",
                start_time=base + (offset + 1) * 10**9,
                attributes={
                    "openinference.span.kind": "TOOL",
                    "tool.name": "lookup",
                    "tool.parameters": '{"b": 1, "a": [2]}',  # no input.value: the fallback
                },
            ),
        ):
            pass
    with tracer.start_as_current_span("lonely", attributes={"openinference.span.kind": "BOGUS"}):
        pass
    table = exporter.table()
    got = [(r["turn_index"], r["span_kind"], r["name"]) for r in rows(table, session_id="s")]
    lonely = rows(table, name="lonely")[0]
    assert got == [
        (0, "CHAIN", "turn"),
        (0, "TOOL", "lookup"),
        (1, "CHAIN", "turn"),
        (1, "TOOL", "lookup"),
    ]
    assert [json.loads(r["attributes"])["q"] for r in rows(table, name="turn")] == [
        "earlier",
        "later",
    ]
    assert rows(table, name="lookup")[0]["tool_args"] == '{"a":[2],"b":1}'
    assert lonely["session_id"] == lonely["trace_id"]  # no session.id: its own session
    assert lonely["span_kind"] == "UNKNOWN"
    assert json.loads(lonely["attributes"]) == {"openinference.span.kind": "BOGUS"}
    assert set(table.column("source").to_pylist()) == {"opentelemetry"}


def test_a_span_that_lost_attributes_to_its_senders_limit_says_so() -> None:
    """OpenTelemetry's Python SDK drops the oldest attributes over its limit: the kind first."""
    exporter = TraceTableExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=16))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("a-long-turn")
    root = {"openinference.span.kind": "AGENT", "session.id": "s"}
    model = {"openinference.span.kind": "LLM"}
    with (
        tracer.start_as_current_span("turn", attributes=root),
        tracer.start_as_current_span("llm", attributes=model) as span,
    ):
        for n in range(20):  # as OpenInference writes a model call's messages
            span.set_attribute(f"llm.input_messages.{n}.message.role", "user")
            span.set_attribute(f"llm.input_messages.{n}.message.content", f"m{n}")
        span.set_attribute("llm.token_count.prompt", 900)
        span.set_attribute("llm.token_count.completion", 90)
    table = exporter.table()
    [lost] = rows(table, name="llm")
    assert lost["span_kind"] == "UNKNOWN"  # its kind went first
    assert json.loads(lost["attributes"])["otel.dropped_attributes_count"] == 43 - 16
    [kept] = rows(table, name="turn")
    assert "otel.dropped_attributes_count" not in json.loads(kept["attributes"] or "{}")
    rubrics = RubricSet(default=Rubric(max_tokens=100_000))
    [scored] = evaluate(table, rubrics, names=["tokens"]).to_pylist()
    assert (scored["outcome"], scored["label"], scored["score"]) == ("n/a", "lost counts", None)
