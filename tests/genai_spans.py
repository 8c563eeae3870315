"""GenAI spans made with the OpenTelemetry SDK, for the tests of what is imported from them.

The spans are real: made with the OpenTelemetry SDK on a fake clock, with no OpenInference and
no plangate attribute, written as OTLP JSON by `otlp_json_from_spans`, read by `read_otlp_json`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from plangate.replay.importers._otlp import otlp_json_from_spans

LOOPS = "tool_call_loops"
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)
SEARCH = ("search", {"query": "error rate", "limit": 5})
FETCH = ("fetch", {"id": 7})


class Recorder:
    """GenAI spans made with the OpenTelemetry SDK, one millisecond apart, written as OTLP JSON."""

    def __init__(self) -> None:
        self.memory = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.tracer = provider.get_tracer("genai-test")
        self.clock = itertools.count(1_700_000_000_000_000_000, 1_000_000)

    @contextmanager
    def span(self, name: str, attributes: dict[str, Any]) -> Iterator[None]:
        with self.tracer.start_as_current_span(
            name, attributes=attributes, start_time=next(self.clock), end_on_exit=False
        ) as span:
            yield
        span.end(end_time=next(self.clock))

    def turn(self, conversation: str, calls: list[tuple[str, dict[str, Any]]], **root: Any) -> None:
        """One `invoke_agent` root: a model call, then the tool calls it asked for."""
        agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "planner"}
        with self.span("invoke_agent planner", {**agent, **root}):
            self.chat(conversation)
            for number, (name, arguments) in enumerate(calls):
                self.tool(name, arguments, f"call_{number}")

    def chat(self, conversation: str, **usage: Any) -> None:
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.conversation.id": conversation,
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.response.model": "gpt-4o-2024-08-06",
            "gen_ai.usage.input_tokens": 812,
            "gen_ai.usage.output_tokens": 64,
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": []}]),
            **usage,
        }
        with self.span("chat gpt-4o", attributes):
            pass

    def tool(self, name: str, arguments: dict[str, Any], call_id: str) -> None:
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.call.arguments": json.dumps(arguments, indent=1),  # not canonical
            "gen_ai.tool.call.result": f"{name} done",
        }
        with self.span(f"execute_tool {name}", attributes):
            pass

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(otlp_json_from_spans(self.memory.get_finished_spans())))
        return path


def rows(table: pa.Table, **where: Any) -> list[dict[str, Any]]:
    return [r for r in table.to_pylist() if all(r[k] == v for k, v in where.items())]


def outcomes(scores: pa.Table, evaluator: str) -> dict[tuple[str, int], str]:
    return {
        (r["session_id"], r["turn_index"]): r["outcome"]
        for r in scores.to_pylist()
        if r["evaluator"] == evaluator
    }


def looping_session(path: Path) -> Path:
    """One conversation, two turns: five identical searches, then a search and a fetch."""
    recorder = Recorder()
    recorder.turn("conv-1", [SEARCH] * 5)
    recorder.turn("conv-1", [SEARCH, FETCH])
    return recorder.write(path)
