"""Span exporters: in memory, OTLP over HTTP to a real local collector, none."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from plangate.ci import telemetry
from plangate.harness import ConfigError, ScriptedModel, ToolCall
from tests.helpers import agent
from tests.otlp_collector import OtlpCollector


def attributes(span: object) -> dict[str, str]:
    return {a.key: a.value.string_value or str(a.value.int_value) for a in span.attributes}  # type: ignore[attr-defined]


async def test_memory_exporter_keeps_the_spans_of_a_run() -> None:
    wiring = telemetry("memory")
    model = ScriptedModel([ToolCall.of("finish", "f", summary="ok")])
    await agent(model, tracer_provider=wiring.provider).session("s").run_turn("hi")
    assert wiring.memory is not None
    assert sorted(s.name for s in wiring.memory.get_finished_spans()) == [
        "agent.turn",
        "llm.call",
        "tool.finish",
    ]
    wiring.shutdown()


def test_none_means_no_provider() -> None:
    assert telemetry("none").provider is None


def test_otlp_needs_an_endpoint() -> None:
    with pytest.raises(ConfigError, match="needs an endpoint"):
        telemetry("otlp")


async def test_otlp_exporter_delivers_every_span_to_a_collector() -> None:
    with OtlpCollector() as collector:
        wiring = telemetry("otlp", endpoint=collector.endpoint, project="plangate-test")
        model = ScriptedModel(
            [ToolCall.of("add", "a", a=1, b=2), ToolCall.of("finish", "f", summary="3")]
        )
        await (
            agent(model, tracer_provider=wiring.provider)
            .session("otlp-1", user_id="u")
            .run_turn("Add 1 and 2")
        )
        wiring.shutdown()
        spans = list(collector.spans)
        resources = list(collector.resources)
    assert sorted(s.name for s in spans) == [
        "agent.turn",
        "llm.call",
        "llm.call",
        "tool.add",
        "tool.finish",
    ]
    assert {r["openinference.project.name"] for r in resources} == {"plangate-test"}
    for span in spans:
        assert attributes(span)["session.id"] == "otlp-1"
    tool = next(s for s in spans if s.name == "tool.add")
    assert json.loads(attributes(tool)["input.value"]) == {"a": 1, "b": 2}


def test_cli_run_exports_over_otlp() -> None:
    with OtlpCollector() as collector:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "plangate",
                "run",
                "Sort the LLM spans by latency",
                "--otlp",
                collector.endpoint,
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        spans = list(collector.spans)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    kinds = [attributes(s)["openinference.span.kind"] for s in spans]
    assert kinds.count("AGENT") == 1
    assert kinds.count("LLM") == result["iterations"]
    assert kinds.count("TOOL") == len(result["tool_calls"])
