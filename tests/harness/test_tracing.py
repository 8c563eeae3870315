"""Spans of the reference agent: the tree, OpenInference attributes, events, robustness."""

from __future__ import annotations

import gc
import json
import logging
import time
import weakref
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.harness import (
    AssistantMessage,
    Message,
    ScriptedModel,
    SystemMessage,
    ToolDefinition,
    ToolMessage,
    UserMessage,
    tool,
)
from plangate.harness._tracing import SessionTracing
from plangate.harness.models import FunctionModel
from tests.helpers import agent, call

TWO_TASKS = "Add 1 and 2, then add 3 and 4"


def script() -> list[object]:
    return [
        call("todo_write", "w", todos=[{"content": "Add 1 and 2"}, {"content": "Add 3 and 4"}]),
        call("todo_update", "u1", item_id=1, status="in_progress"),
        call("add", "a1", a=1, b=2),
        call("todo_update", "u2", item_id=1, status="completed"),
        call("finish", "f0", summary="early"),
        call("todo_update", "u3", item_id=2, status="in_progress"),
        call("add", "a2", a=3, b=4),
        call("todo_update", "u4", item_id=2, status="completed"),
        call("finish", "f", summary="3 and 7"),
    ]


def provider_with_memory() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=10_000))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def traced_turn() -> tuple[Sequence[ReadableSpan], Any]:
    provider, exporter = provider_with_memory()
    model = ScriptedModel(script())
    session = agent(model, tracer_provider=provider).session(
        "sess-1", user_id="ana", metadata={"domain": "math"}
    )
    result = await session.run_turn(TWO_TASKS)
    model.assert_complete()
    return exporter.get_finished_spans(), result


def tree(spans: Sequence[ReadableSpan]) -> list[str]:
    """The span tree with ids and times normalized away: `depth kind name`."""
    by_id = {s.context.span_id: s for s in spans}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in spans:
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in by_id else None, []).append(span)
    lines: list[str] = []

    def walk(parent: int | None, depth: int) -> None:
        for span in sorted(children.get(parent, []), key=lambda s: s.start_time or 0):
            kind = (span.attributes or {}).get("openinference.span.kind")
            lines.append(f"{'  ' * depth}{kind} {span.name}")
            walk(span.context.span_id, depth + 1)

    walk(None, 0)
    return lines


async def test_span_tree_has_one_agent_span_with_llm_and_tool_children() -> None:
    spans, _ = await traced_turn()
    names = [
        "todo_write", "todo_update", "add", "todo_update", "finish",
        "todo_update", "add", "todo_update", "finish",
    ]  # fmt: skip
    expected = ["AGENT agent.turn"]
    for name in names:
        expected += ["  LLM llm.call", f"  TOOL tool.{name}"]
    assert tree(spans) == expected
    assert len({s.context.trace_id for s in spans}) == 1


async def test_every_span_carries_session_user_and_variant() -> None:
    spans, _ = await traced_turn()
    for span in spans:
        attributes = span.attributes or {}
        assert attributes["session.id"] == "sess-1"
        assert attributes["user.id"] == "ana"
        assert json.loads(str(attributes["metadata"])) == {"variant": "alyx", "domain": "math"}


async def test_llm_spans_carry_messages_as_json_tools_when_they_change_and_tokens() -> None:
    spans, _ = await traced_turn()
    llm = [s for s in spans if s.name == "llm.call"]
    third = llm[2].attributes or {}
    assert third["llm.model_name"] == "scripted"
    assert third["plangate.iteration"] == 3
    assert third["input.mime_type"] == "application/json"
    messages = json.loads(str(third["input.value"]))["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]
    assert messages[1]["content"].startswith("# Plan")
    assert messages[2]["content"] == TWO_TASKS
    assert messages[3]["tool_calls"][0]["function"]["name"] == "todo_write"
    assert messages[4]["tool_call_id"] == "w"
    assert not any(k.startswith("llm.input_messages") for k in third)
    assert third["llm.output_messages.0.message.tool_calls.0.tool_call.function.name"] == "add"
    assert json.loads(
        str(third["llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments"])
    ) == {"a": 1, "b": 2}
    assert (
        third["llm.token_count.prompt"],
        third["llm.token_count.completion"],
        third["llm.token_count.total"],
    ) == (10, 5, 15)
    # Tool schemas ride on the first LLM span of the turn (they do not change afterwards).
    first = llm[0].attributes or {}
    schemas = [json.loads(str(v)) for k, v in first.items() if k.startswith("llm.tools.")]
    assert {s["function"]["name"] for s in schemas} >= {"add", "todo_write", "finish"}
    assert not any(k.startswith("llm.tools.") for k in third)


async def test_flat_message_detail_uses_openinference_message_attributes() -> None:
    provider, exporter = provider_with_memory()
    model = ScriptedModel(script())
    flat = agent(model, tracer_provider=provider, trace_messages="flat")
    await flat.session("s").run_turn(TWO_TASKS)
    third = next(
        s
        for s in exporter.get_finished_spans()
        if (s.attributes or {}).get("plangate.iteration") == 3 and s.name == "llm.call"
    )
    attributes = third.attributes or {}
    assert attributes["llm.input_messages.0.message.role"] == "system"
    assert str(attributes["llm.input_messages.1.message.content"]).startswith("# Plan")
    assert attributes["llm.input_messages.2.message.content"] == TWO_TASKS
    assert (
        attributes["llm.input_messages.3.message.tool_calls.0.tool_call.function.name"]
        == "todo_write"
    )
    assert attributes["llm.input_messages.4.message.tool_call_id"] == "w"
    assert any(k.startswith("llm.tools.") for k in attributes)


async def test_tool_spans_carry_arguments_in_input_value_and_the_plan_when_it_changed() -> None:
    spans, _ = await traced_turn()
    tools = [s for s in spans if (s.attributes or {}).get("openinference.span.kind") == "TOOL"]
    add = tools[2].attributes or {}
    assert add["tool.name"] == "add"
    assert add["tool.id"] == "a1"
    assert json.loads(str(add["input.value"])) == {"a": 1, "b": 2}
    assert json.loads(str(add["tool.parameters"]))["required"] == ["a", "b"]
    assert str(add["output.value"]).startswith("3")
    assert "plangate.plan" not in add
    update = tools[3].attributes or {}
    assert json.loads(str(update["plangate.plan"]))[0]["status"] == "completed"
    bounced = tools[4]
    assert bounced.status.status_code.name == "ERROR"
    assert "Cannot finish" in (bounced.status.description or "")


async def test_events_on_the_agent_span() -> None:
    spans, result = await traced_turn()
    turn = next(s for s in spans if s.name == "agent.turn")
    kinds = [e.name for e in turn.events]
    assert kinds[0] == "plan_updated"
    assert kinds.count("plan_updated") == 5
    assert kinds.count("gate_bounce") == 1
    assert kinds[-1] == "stop"
    bounce = next(e for e in turn.events if e.name == "gate_bounce")
    assert "[ ] 2. Add 3 and 4 (pending)" in str((bounce.attributes or {})["plangate.detail"])
    attributes = turn.attributes or {}
    assert attributes["plangate.stop_reason"] == "finished"
    assert attributes["plangate.iterations"] == result.iterations
    assert attributes["input.value"] == TWO_TASKS
    assert attributes["output.value"] == "3 and 7"


async def test_model_error_marks_the_llm_and_agent_spans() -> None:
    from plangate.harness import ModelError

    provider, exporter = provider_with_memory()
    model = ScriptedModel([ModelError("HTTP 503 after 5 attempts")])
    await agent(model, tracer_provider=provider).session("s").run_turn("hi")
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["llm.call"].status.status_code.name == "ERROR"
    assert spans["agent.turn"].status.status_code.name == "ERROR"
    assert spans["agent.turn"].attributes["plangate.stop_reason"] == "model_error"  # type: ignore[index]


class ExplodingExporter(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        raise RuntimeError("collector is down")

    def shutdown(self) -> None:
        pass


class ExplodingProcessor(SimpleSpanProcessor):
    def on_start(self, span: Any, parent_context: Any = None) -> None:
        raise RuntimeError("processor bug on start")

    def on_end(self, span: ReadableSpan) -> None:
        raise RuntimeError("processor bug on end")


@pytest.mark.parametrize(
    "processor",
    [SimpleSpanProcessor(ExplodingExporter()), ExplodingProcessor(InMemorySpanExporter())],
)
async def test_a_tracing_failure_is_logged_and_never_breaks_the_run(
    processor: SimpleSpanProcessor, caplog: pytest.LogCaptureFixture
) -> None:
    provider = TracerProvider()
    provider.add_span_processor(processor)
    model = ScriptedModel(script())
    with caplog.at_level(logging.ERROR):
        result = await agent(model, tracer_provider=provider).session("s").run_turn(TWO_TASKS)
    assert result.stop_reason == "finished"
    assert result.answer == "3 and 7"
    model.assert_complete()


async def test_long_strings_are_bounded() -> None:
    from plangate.harness._spans import MAX_CHARS

    provider, exporter = provider_with_memory()
    request = "x" * (MAX_CHARS + 500)
    await (
        agent(ScriptedModel([call("finish", "f", summary="ok")]), tracer_provider=provider)
        .session("s")
        .run_turn(request)
    )
    turn = next(s for s in exporter.get_finished_spans() if s.name == "agent.turn")
    value = str((turn.attributes or {})["input.value"])
    assert len(value) < MAX_CHARS + 100
    assert value.endswith("…[500 more characters]")


async def test_no_tracer_provider_means_no_spans_and_same_result() -> None:
    _, exporter = provider_with_memory()
    model = ScriptedModel(script())
    result = await agent(model).session("s").run_turn(TWO_TASKS)
    assert exporter.get_finished_spans() == ()
    assert result.stop_reason == "finished"


async def test_events_before_the_first_model_call_reach_the_agent_span() -> None:
    provider, exporter = provider_with_memory()
    model = ScriptedModel([call("finish", "f", summary="p95 is 2 s")])
    result = await agent(model, tracer_provider=provider).session("s").run_turn("What is the p95?")
    turn = next(s for s in exporter.get_finished_spans() if s.name == "agent.turn")
    assert (
        [e.name for e in turn.events]
        == [e.kind for e in result.events]
        == ["planning_skipped", "stop"]
    )


def message_dict(message: Message) -> dict[str, Any]:
    """A message as LLM spans have always written it (`input.value`), for comparison."""
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if isinstance(message, ToolMessage):
        data["tool_call_id"] = message.tool_call_id
        data["name"] = message.name
    elif isinstance(message, AssistantMessage) and message.tool_calls:
        data["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in message.tool_calls
        ]
    return data


def input_value(messages: Sequence[Message]) -> str:
    """An LLM span's `input.value` for these messages, as it has always been written."""
    parts = [json.dumps(message_dict(m), ensure_ascii=False) for m in messages]
    return '{"messages":[' + ",".join(parts) + "]}"


async def test_input_value_is_exactly_the_json_of_what_the_model_was_sent() -> None:
    # Plan changes rebuild the pinned plan message, the second turn starts from the history,
    # and the request has characters JSON must escape: every call's text is still exact.
    provider, exporter = provider_with_memory()
    request = TWO_TASKS + ' — "both" \\ at once,\nplease\t\x01 ✓'
    model = ScriptedModel(
        [*script(), call("add", "a9", a=5, b=6), call("finish", "f9", summary="11")]
    )
    session = agent(model, tracer_provider=provider).session("s")
    await session.run_turn(request)
    await session.run_turn("Add 5 and 6")
    model.assert_complete()
    llm = [s for s in exporter.get_finished_spans() if s.name == "llm.call"]
    assert len(llm) == len(model.requests) == 11
    for span, seen in zip(llm, model.requests, strict=True):
        assert (span.attributes or {})["input.value"] == input_value(seen.messages)


async def test_llm_spans_cover_the_model_call_and_tool_spans_the_tool_run() -> None:
    provider, exporter = provider_with_memory()
    moments: dict[str, int] = {}

    @tool
    def stamp(label: str) -> str:
        """Note when the tool ran.

        Args:
            label: What to call the moment.
        """
        moments[label] = time.time_ns()
        return label

    def answer(messages: Sequence[Message], tools: Sequence[ToolDefinition]) -> object:
        moments[f"model-{len(moments)}"] = time.time_ns()
        if len(moments) == 1:
            return call("stamp", "s1", label="tool")
        return "done"

    await (
        agent(FunctionModel(answer), "naive", tools=(stamp,), tracer_provider=provider)
        .session("s")
        .run_turn("Note the time.")
    )
    spans = exporter.get_finished_spans()
    llm = [s for s in spans if s.name == "llm.call"]
    (tool_span,) = [s for s in spans if s.name == "tool.stamp"]
    for span, moment in zip(llm, [moments["model-0"], moments["model-2"]], strict=True):
        assert (span.start_time or 0) <= moment <= (span.end_time or 0)
    assert (tool_span.start_time or 0) <= moments["tool"] <= (tool_span.end_time or 0)
    assert (llm[0].end_time or 0) <= (tool_span.start_time or 0)
    assert (tool_span.end_time or 0) <= (llm[1].start_time or 0)


def test_input_value_follows_contexts_that_do_not_extend_the_previous_one() -> None:
    provider, exporter = provider_with_memory()
    tracing = SessionTracing(provider, session_id="s", user_id="u", metadata={})
    system, request = SystemMessage(content="Be brief."), UserMessage(content="a")
    reply = AssistantMessage(content="b")
    contexts: list[list[Message]] = [
        [system, request],
        [system, SystemMessage(content="# Plan"), request, reply],  # extends it
        [system, UserMessage(content="a"), AssistantMessage(content="b"), request],  # equal values
        [SystemMessage(content="Summarize."), UserMessage(content="a b")],  # a side request
        [system, request],
        [],
    ]
    for context in contexts:
        with tracing.llm(1, context, (), "m"):
            pass
    values = [(s.attributes or {})["input.value"] for s in exporter.get_finished_spans()]
    assert values == [input_value(context) for context in contexts]


def test_a_provider_is_asked_for_the_tracer_once_and_held_weakly() -> None:
    asked: list[str] = []

    class Counting(TracerProvider):
        def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
            asked.append(args[0])
            return super().get_tracer(*args, **kwargs)

    provider = Counting(shutdown_on_exit=False)  # else atexit holds it
    first = SessionTracing(provider, session_id="a", user_id="u", metadata={})
    second = SessionTracing(provider, session_id="b", user_id="u", metadata={})
    assert asked == ["plangate.harness"] and first._tracer is second._tracer
    other = SessionTracing(
        Counting(shutdown_on_exit=False), session_id="c", user_id="u", metadata={}
    )
    assert len(asked) == 2 and other._tracer is not first._tracer
    gone = weakref.ref(provider)
    del provider, first, second
    gc.collect()
    assert gone() is None  # the cache does not keep a provider alive
