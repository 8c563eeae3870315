"""Framework spans into the trace table and back into a golden: model calls numbered, requests rebuilt.

The spans are shaped as the two framework examples' instrumentations write them (checked
against the real ones in `tests/examples/test_framework_spans.py`): OpenInference's for the
OpenAI Agents SDK (`llm.input_messages.*`, tool calls whose arguments are left out when they
are `{}`, TOOL spans without call ids or iterations), the GenAI conventions' for pydantic-ai
(`gen_ai.input.messages` with parts, `gen_ai.system_instructions` joined into one text while
`model_request_parameters.instruction_parts` keeps them apart, `gen_ai.tool.definitions`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from plangate.replay import SpanRecord, build_table, dataset_from_traces, rows_from_spans

T0 = datetime(2025, 1, 1, tzinfo=UTC)
TRACK = {"type": "function", "function": {"name": "track_shipment", "parameters": {}}}


class Trace:
    """Spans of one trace, each starting a millisecond after the one before."""

    def __init__(self, trace: str = "a" * 32) -> None:
        self.trace = trace
        self.spans: list[SpanRecord] = []
        self.ids: Iterator[int] = itertools.count(1)

    def span(self, name: str, parent: str | None = None, **attributes: Any) -> str:
        number = next(self.ids)
        span_id = f"{number:016x}"
        start = T0 + timedelta(milliseconds=number)
        self.spans.append(
            SpanRecord(
                trace_id=self.trace, span_id=span_id, parent_span_id=parent, name=name,
                start_time=start, end_time=start + timedelta(microseconds=500),
                attributes=attributes,
            )
        )  # fmt: skip
        return span_id


def oi_tool(trace: Trace, parent: str, name: str, arguments: str, output: str) -> None:
    trace.span(name, parent, **{"openinference.span.kind": "TOOL", "tool.name": name,
                                "input.value": arguments, "output.value": output})  # fmt: skip


def sdk_turn(trace: Trace) -> None:
    """The Agents SDK through OpenInference: two model calls, two tool calls after the first."""
    root = trace.span("Agent workflow", **{"openinference.span.kind": "AGENT"})
    agent = trace.span("support-desk", root, **{"openinference.span.kind": "AGENT"})
    first = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "Be brief.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "Track O-7 twice, and the policy.",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.tool_calls.0.tool_call.id": "call_1",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "track_shipment",
        "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"id":"O-7"}',
        "llm.output_messages.0.message.tool_calls.1.tool_call.id": "call_2",
        "llm.output_messages.0.message.tool_calls.1.tool_call.function.name": "get_policy",
        # the arguments `{}` are left out
        "output.value": '[{"content": null, "tool_calls": []}]',  # not the answer's text
    }
    trace.span("generation", agent, **first)
    oi_tool(trace, agent, "track_shipment", '{"id": "O-7"}', "in transit")
    oi_tool(trace, agent, "get_policy", "{}", "30 days")
    second = {
        "openinference.span.kind": "LLM",
        **{k: v for k, v in first.items() if k.startswith("llm.input_messages.")},
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.tool_calls.0.tool_call.id": "call_1",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.name": "track_shipment",
        "llm.input_messages.2.message.tool_calls.0.tool_call.function.arguments": '{"id":"O-7"}',
        "llm.input_messages.2.message.tool_calls.1.tool_call.id": "call_2",
        "llm.input_messages.2.message.tool_calls.1.tool_call.function.name": "get_policy",
        "llm.input_messages.3.message.role": "tool",
        "llm.input_messages.3.message.tool_call_id": "call_1",
        "llm.input_messages.3.message.content": "in transit",
        "llm.input_messages.4.message.role": "tool",
        "llm.input_messages.4.message.tool_call_id": "call_2",
        "llm.input_messages.4.message.content": "30 days",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "In transit; 30 days.",
        "llm.tools.0.tool.json_schema": json.dumps(TRACK),
    }
    trace.span("generation", agent, **second)


def pydantic_turn(trace: Trace, **chat: Any) -> None:
    """pydantic-ai's GenAI spans: a model call asking for a tool, the tool, the answer."""
    agent = trace.span("invoke_agent agent", **{"gen_ai.operation.name": "invoke_agent",
                                                "gen_ai.agent.name": "agent"})  # fmt: skip
    user = {"role": "user", "parts": [{"type": "text", "content": "Where is O-7?"}]}
    call = {"type": "tool_call", "id": "c1", "name": "track_shipment", "arguments": {"id": "O-7"}}
    base = {"gen_ai.operation.name": "chat", "gen_ai.tool.definitions": json.dumps(
        [{"type": "function", "name": "track_shipment"}, {"type": "function", "name": "escalate"}]
    ), **chat}  # fmt: skip
    trace.span("chat m", agent, **base, **{
        "gen_ai.input.messages": json.dumps([user]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [call]}]),
    })  # fmt: skip
    trace.span("execute_tool track_shipment", agent, **{
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "track_shipment",
        "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"id":"O-7"}',
        "gen_ai.tool.call.result": "in transit",
    })  # fmt: skip
    result = {"type": "tool_call_response", "id": "c1", "name": "track_shipment",
              "result": {"status": "in transit"}}  # fmt: skip
    answer = {"role": "assistant", "parts": [{"type": "text", "content": "In transit."}]}
    trace.span("chat m", agent, **base, **{
        "gen_ai.input.messages": json.dumps(
            [user, {"role": "assistant", "parts": [call]}, {"role": "user", "parts": [result]}]
        ),
        "gen_ai.output.messages": json.dumps([answer]),
    })  # fmt: skip


def table_of(trace: Trace) -> Any:
    return build_table(rows_from_spans(trace.spans, source="test"))


def cassette(trace: Trace) -> list[dict[str, Any]]:
    exchanges = dataset_from_traces(table_of(trace), name="t").model_cassette.to_pylist()
    return [
        {**e, **{k: json.loads(e[k]) for k in ("request", "tools", "response")}} for e in exchanges
    ]


# -- model calls numbered ------------------------------------------------------------------------


def test_a_turn_without_iterations_numbers_its_model_calls_and_their_tool_calls() -> None:
    trace = Trace()
    sdk_turn(trace)
    rows = table_of(trace).to_pylist()
    assert [(r["span_kind"], r["iteration"]) for r in rows] == [
        ("AGENT", None), ("AGENT", None), ("LLM", 1), ("TOOL", 1), ("TOOL", 1), ("LLM", 2),
    ]  # fmt: skip
    assert [(r["tool_name"], r["tool_args"]) for r in rows if r["span_kind"] == "TOOL"] == [
        ("track_shipment", '{"id":"O-7"}'), ("get_policy", "{}"),
    ]  # fmt: skip


def test_iterations_the_spans_give_are_kept() -> None:
    trace = Trace()
    agent = trace.span("agent.turn", **{"openinference.span.kind": "AGENT"})
    trace.span("llm.call", agent, **{"openinference.span.kind": "LLM", "plangate.iteration": 4})
    oi_tool(trace, agent, "track_shipment", "{}", "ok")  # a tool span the agent left unnumbered
    assert [r["iteration"] for r in table_of(trace).to_pylist()] == [None, 4, None]


# -- requests, tools and answers rebuilt ---------------------------------------------------------


def test_openinference_messages_become_the_requests_the_wire_reader_gives() -> None:
    trace = Trace()
    sdk_turn(trace)
    first, second = cassette(trace)
    system, user = {"role": "system", "content": "Be brief."}, first["request"][1]
    assert first["request"] == [system, user]
    assert first["response"]["message"] == {
        "role": "assistant",
        "content": "",  # not `output.value`: the answer has calls and no text
        "tool_calls": [
            {"id": "call_1", "name": "track_shipment", "arguments": '{"id":"O-7"}'},
            {"id": "call_2", "name": "get_policy", "arguments": "{}"},
        ],
    }
    assert second["request"][2:] == [
        first["response"]["message"],
        {"role": "tool", "content": "in transit", "tool_call_id": "call_1",
         "name": "track_shipment", "is_error": False},
        {"role": "tool", "content": "30 days", "tool_call_id": "call_2", "name": "get_policy",
         "is_error": False},
    ]  # fmt: skip
    assert (first["tools"], second["tools"]) == ([], ["track_shipment"])
    assert second["response"]["message"] == {"role": "assistant", "content": "In transit; 30 days."}


INSTRUCTIONS = [{"type": "text", "content": "Be brief.\n\n# Plan\n[ ] 1. Track O-7"}]
PARTS = {"instruction_parts": [{"content": "Be brief.", "dynamic": False},
                               {"content": "# Plan\n[ ] 1. Track O-7", "dynamic": True}]}  # fmt: skip


@pytest.mark.parametrize(
    ("chat", "system"),
    [
        ({}, []),
        ({"gen_ai.system_instructions": json.dumps(INSTRUCTIONS)}, [INSTRUCTIONS[0]["content"]]),
        (  # pydantic-ai joins its parts there, and sends each as a system message of its own
            {"gen_ai.system_instructions": json.dumps(INSTRUCTIONS),
             "model_request_parameters": json.dumps(PARTS)},
            ["Be brief.", "# Plan\n[ ] 1. Track O-7"],
        ),
    ],
    ids=["none", "system-instructions", "pydantic-ai-parts"],
)  # fmt: skip
def test_genai_messages_become_the_requests_the_wire_reader_gives(
    chat: dict[str, Any], system: list[str]
) -> None:
    trace = Trace()
    pydantic_turn(trace, **chat)
    first, second = cassette(trace)
    head = [{"role": "system", "content": text} for text in system]
    user = {"role": "user", "content": "Where is O-7?"}
    asked = {"role": "assistant", "content": "",
             "tool_calls": [{"id": "c1", "name": "track_shipment", "arguments": '{"id":"O-7"}'}]}  # fmt: skip
    assert first["request"] == [*head, user]
    assert first["response"]["message"] == asked  # an arguments object as canonical JSON text
    assert second["request"] == [
        *head, user, asked,
        {"role": "tool", "content": '{"status":"in transit"}', "tool_call_id": "c1",
         "name": "track_shipment", "is_error": False},
    ]  # fmt: skip
    assert first["tools"] == second["tools"] == ["track_shipment", "escalate"]
    assert second["response"]["message"] == {"role": "assistant", "content": "In transit."}
