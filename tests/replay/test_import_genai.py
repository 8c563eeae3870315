"""Spans in the OpenTelemetry GenAI conventions (and pydantic-ai's) into the trace table.

The spans are real: made with the OpenTelemetry SDK on a fake clock, with no OpenInference and
no plangate attribute, written as OTLP JSON by `otlp_json_from_spans`, read by `read_otlp_json`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as conventions

from plangate.ci.cli._main import LOG_FOLDER_VARIABLE, main
from plangate.evaluators import evaluate
from plangate.harness.semconv import GenAI
from plangate.replay import TraceTableError
from plangate.replay._openinference import GENAI_KINDS
from plangate.replay.importers._otlp import read_otlp_json
from tests.genai_spans import LOOPS, SEARCH, Recorder, looping_session, outcomes, rows

# -- the names are the conventions' own -------------------------------------------------------


def test_the_genai_names_are_the_conventions() -> None:
    names = {n: getattr(GenAI, n) for n in vars(GenAI) if n.isupper()}
    attributes = {n: v for n, v in names.items() if v.startswith("gen_ai.")}
    for name, value in attributes.items():
        assert getattr(conventions, f"GEN_AI_{name}") == value, name
    operations = {v.value for v in conventions.GenAiOperationNameValues}
    assert set(names.values()) - set(attributes.values()) == operations
    assert set(GENAI_KINDS) == operations


# -- turns, tools and the loop -----------------------------------------------------------------


def test_a_genai_session_imports_as_its_turns_and_the_loop_is_found(tmp_path: Path) -> None:
    table = read_otlp_json(looping_session(tmp_path / "genai.json"))

    assert {(r["session_id"], r["turn_index"]) for r in table.to_pylist()} == {
        ("conv-1", 0),
        ("conv-1", 1),
    }
    assert [r["span_kind"] for r in rows(table, turn_index=1)] == ["AGENT", "LLM", "TOOL", "TOOL"]
    first, second = (
        rows(table, span_kind="TOOL", turn_index=0),
        rows(table, span_kind="TOOL", turn_index=1),
    )
    assert [r["tool_name"] for r in first] == ["search"] * 5
    assert {r["tool_args"] for r in first} == {'{"limit":5,"query":"error rate"}'}  # canonical
    assert [r["tool_call_id"] for r in first] == [f"call_{n}" for n in range(5)]
    assert {r["tool_output"] for r in first} == {"search done"}
    assert [(r["tool_name"], r["tool_args"]) for r in second] == [
        ("search", '{"limit":5,"query":"error rate"}'),
        ("fetch", '{"id":7}'),
    ]
    assert json.loads(first[0]["input_value"]) == SEARCH[1]  # as the agent wrote it

    scores = evaluate(table)
    assert outcomes(scores, LOOPS) == {("conv-1", 0): "fail", ("conv-1", 1): "pass"}


def test_token_counts_and_model_names_land_on_the_model_calls(tmp_path: Path) -> None:
    recorder = Recorder()
    with recorder.span("invoke_agent planner", {"gen_ai.operation.name": "invoke_agent"}):
        recorder.chat("conv-2")
        older = {"gen_ai.usage.prompt_tokens": 30, "gen_ai.usage.completion_tokens": 4}
        recorder.chat("conv-2", **older)  # the newer names win where a span has both
        old = {"gen_ai.operation.name": "text_completion", "gen_ai.request.model": "davinci"}
        with recorder.span("text_completion davinci", {**old, **older}):
            pass
    table = read_otlp_json(recorder.write(tmp_path / "tokens.json"))

    llms = rows(table, span_kind="LLM")
    assert [(r["model_name"], r["tokens_prompt"], r["tokens_completion"]) for r in llms] == [
        ("gpt-4o-2024-08-06", 812, 64),
        ("gpt-4o-2024-08-06", 812, 64),
        ("davinci", 30, 4),
    ]
    assert json.loads(llms[0]["input_value"]) == [{"role": "user", "parts": []}]
    rest = json.loads(llms[0]["attributes"])
    assert rest["gen_ai.request.model"] == "gpt-4o"  # the model asked for: not in a column
    assert "gen_ai.response.model" not in rest and "gen_ai.usage.input_tokens" not in rest
    assert {r["session_id"] for r in table.to_pylist()} == {"conv-2"}  # from the child spans


# -- pydantic-ai's own instrumentation (versions 1 and 2) ------------------------------------


def test_pydantic_ai_spans_are_read(tmp_path: Path) -> None:
    recorder = Recorder()
    run = {
        "agent_name": "support",
        "model_name": "gpt-4o",
        "logfire.msg": "support run",
        "final_result": "The refund is on its way.",
        "metadata": json.dumps({"trial": 1}),
    }
    with recorder.span("agent run", run):
        recorder.chat("conv-5")
        tool = {
            "gen_ai.tool.name": "refund",
            "gen_ai.tool.call.id": "call_9",
            "tool_arguments": '{"order": 12, "amount": 3.5}',
            "tool_response": "refunded",
            "logfire.msg": "running tool: refund",
        }
        with recorder.span("running tool", tool):
            pass
    table = read_otlp_json(recorder.write(tmp_path / "pydantic-ai.json"))

    agent, llm, call = table.to_pylist()
    assert [agent["span_kind"], llm["span_kind"], call["span_kind"]] == ["AGENT", "LLM", "TOOL"]
    assert (agent["output_value"], agent["trial"]) == ("The refund is on its way.", 1)
    assert (call["tool_name"], call["tool_call_id"], call["tool_output"]) == (
        "refund",
        "call_9",
        "refunded",
    )
    assert call["tool_args"] == '{"amount":3.5,"order":12}'
    assert "tool_arguments" not in json.loads(call["attributes"])


# -- what is refused, and what stays as it was -------------------------------------------------


def test_spans_of_no_known_convention_are_refused_naming_the_file(tmp_path: Path) -> None:
    recorder = Recorder()
    with (
        recorder.span("GET /orders", {"http.request.method": "GET"}),
        recorder.span("SELECT orders", {"db.system": "postgresql"}),
    ):
        pass
    path = recorder.write(tmp_path / "http.json")
    with pytest.raises(TraceTableError) as raised:
        read_otlp_json(path)
    message = str(raised.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert "none of the 2 spans" in message and "gen_ai.operation.name" in message


def test_a_file_without_spans_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}))
    with pytest.raises(TraceTableError, match="no spans") as raised:
        read_otlp_json(path)
    assert str(path) in str(raised.value)


def test_openinference_wins_where_a_span_has_both_conventions(tmp_path: Path) -> None:
    recorder = Recorder()
    both = {
        "openinference.span.kind": "CHAIN",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
    }
    with recorder.span("both", both):
        pass
    (row,) = read_otlp_json(recorder.write(tmp_path / "both.json")).to_pylist()
    assert (row["span_kind"], row["tool_name"]) == ("CHAIN", None)


# -- the command line --------------------------------------------------------------------------


def test_import_then_eval_on_the_command_line_shows_the_loop(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spans = looping_session(tmp_path / "genai.json")
    table = tmp_path / "genai.parquet"
    assert main(["import", "otlp-json", str(spans), "-o", str(table)]) == 0
    assert "11 spans, 2 turns, 1 sessions" in capsys.readouterr().out

    assert main(["eval", str(table), "--json", "--evaluator", LOOPS]) == 0
    summary = json.loads(capsys.readouterr().out)
    loops = next(r for r in summary["evaluators"] if r["evaluator"] == LOOPS)
    assert (loops["turns"], loops["passed"], loops["failed"]) == (2, 1, 1)
    (failure,) = [f for f in summary["failures"] if f["evaluator"] == LOOPS]
    assert (failure["session_id"], failure["turn_index"]) == ("conv-1", 0)
    assert "repeated 5 times" in failure["explanation"]


def test_eval_with_every_evaluator_on_turns_nothing_could_judge_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LOG_FOLDER_VARIABLE, str(tmp_path / "logs"))  # the crash log goes here
    table = tmp_path / "genai.parquet"
    assert (
        main(["import", "otlp-json", str(looping_session(tmp_path / "g.json")), "-o", str(table)])
        == 0
    )
    assert main(["eval", str(table), "--json"]) == 0


def test_the_command_line_exits_2_on_a_file_of_no_known_convention(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    recorder = Recorder()
    with recorder.span("GET /", {"http.request.method": "GET"}):
        pass
    path = recorder.write(tmp_path / "http.json")
    assert main(["import", "otlp-json", str(path), "-o", str(tmp_path / "t.parquet")]) == 2
    assert str(path) in capsys.readouterr().err
    assert not (tmp_path / "t.parquet").exists()
