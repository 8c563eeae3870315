"""Spans in the OpenTelemetry GenAI conventions (and pydantic-ai's) into the trace table.

The spans are real: made with the OpenTelemetry SDK on a fake clock, with no OpenInference and
no plangate attribute, written as OTLP JSON by `otlp_json_from_spans`, read by `read_otlp_json`.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as conventions

from plangate.ci.cli._main import LOG_FOLDER_VARIABLE, main
from plangate.evaluators import evaluate, repeat_scores, task_outcomes
from plangate.harness.semconv import GenAI
from plangate.replay import SpanRecord, TraceTableError, rows_from_spans
from plangate.replay._openinference import GENAI_KINDS
from plangate.replay.importers._otlp import otlp_json_from_spans, read_otlp_json

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


# -- repeats ---------------------------------------------------------------------------------


TRIAL_MARKS: dict[str, Callable[[int], dict[str, Any]]] = {
    "metadata JSON": lambda n: {"metadata": json.dumps({"trial": n})},
    "flat metadata.trial": lambda n: {"metadata.trial": n},
    "plangate.trial": lambda n: {"plangate.trial": n},
    "trial": lambda n: {"trial": str(n)},
}


@pytest.mark.parametrize("wrapped", [False, True], ids=["a trace each", "under one root"])
@pytest.mark.parametrize("mark", sorted(TRIAL_MARKS))
def test_repeats_of_one_turn_are_scored_as_trials_not_merged(
    tmp_path: Path, mark: str, wrapped: bool
) -> None:
    recorder = Recorder()
    with recorder.span("experiment", {}) if wrapped else nullcontext():
        for trial in (0, 1):
            recorder.turn("conv-3", [SEARCH, FETCH], **TRIAL_MARKS[mark](trial))
    table = read_otlp_json(recorder.write(tmp_path / "trials.json"))

    agents = rows(table, span_kind="AGENT")
    assert [(r["session_id"], r["turn_index"], r["trial"]) for r in agents] == [
        ("conv-3/trial-0", 0, 0),
        ("conv-3/trial-1", 0, 1),
    ]
    assert {r["task_id"] for r in agents} == {"conv-3#0"}  # one task, tried twice
    for session in ("conv-3/trial-0", "conv-3/trial-1"):
        tools = rows(table, session_id=session, span_kind="TOOL")
        assert [r["tool_name"] for r in tools] == ["search", "fetch"]  # never search,fetch,…

    scores = evaluate(table, names=[LOOPS])
    assert outcomes(scores, LOOPS) == {
        ("conv-3/trial-0", 0): "pass",
        ("conv-3/trial-1", 0): "pass",
        **({("conv-3", 0): "n/a"} if wrapped else {}),  # the wrapper: a turn of no calls
    }
    assert task_outcomes(scores, LOOPS).to_dict("index") == {"conv-3#0": {"n": 2, "c": 2}}
    pass_hat_2 = repeat_scores(scores, [2], evaluator=LOOPS)[0]
    assert (pass_hat_2.tasks, pass_hat_2.pass_hat_k) == (1, 1.0)


def test_a_session_of_one_trial_keeps_its_name_and_numbered_turns(tmp_path: Path) -> None:
    recorder = Recorder()
    recorder.turn("conv-4", [SEARCH], trial=3, **{"plangate.turn_index": 5})
    recorder.turn("conv-4", [FETCH], trial=3)
    table = read_otlp_json(recorder.write(tmp_path / "one-trial.json"))
    agents = rows(table, span_kind="AGENT")
    assert [(r["session_id"], r["turn_index"], r["trial"]) for r in agents] == [
        ("conv-4", 0, 3),  # ranked by start among the turns without a number
        ("conv-4", 5, 3),  # plangate.turn_index still wins
    ]
    assert {r["task_id"] for r in agents} == {None}


def test_a_turn_without_a_number_never_takes_one_another_turn_has(tmp_path: Path) -> None:
    recorder = Recorder()
    recorder.turn("conv-6", [FETCH])  # ranked first by start, but 0 is taken
    recorder.turn("conv-6", [SEARCH], **{"plangate.turn_index": 0})
    table = read_otlp_json(recorder.write(tmp_path / "mixed.json"))
    agents = rows(table, span_kind="AGENT")
    assert sorted(r["turn_index"] for r in agents) == [0, 1]  # two turns, never one merged
    assert [r["tool_name"] for r in rows(table, turn_index=0, span_kind="TOOL")] == ["search"]


def test_a_sub_agent_with_its_own_conversation_leaves_the_agent_that_called_it_whole(
    tmp_path: Path,
) -> None:
    # The planner's model call names its conversation; one of its tools runs a researcher agent
    # whose model call names another. No agent span names one (the usual GenAI layout).
    recorder = Recorder()
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with recorder.span("invoke_agent planner", agent):
        recorder.chat("main")
        for number in range(5):
            recorder.tool(*SEARCH, f"call_{number}")
        tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ask_researcher"}
        with (
            recorder.span("execute_tool ask_researcher", tool),
            recorder.span("invoke_agent researcher", agent),
        ):
            recorder.chat("r-1")
            recorder.tool(*FETCH, "call_r")
    table = read_otlp_json(recorder.write(tmp_path / "sub.json"))

    main = rows(table, session_id="main")
    assert [r["span_kind"] for r in main].count("TOOL") == 7  # its searches, its call, and the
    assert [r["name"] for r in main if r["span_kind"] == "AGENT"] == [  # researcher's own work
        "invoke_agent planner",
        "invoke_agent researcher",
    ]
    assert [r["span_kind"] for r in rows(table, session_id="r-1")] == ["LLM"]  # it names r-1
    assert {r["session_id"] for r in table.to_pylist()} == {"main", "r-1"}
    assert outcomes(evaluate(table), LOOPS)[("main", 0)] == "fail"


def _asking(ids: list[str], openinference: bool) -> dict[str, Any]:
    """A model call's attributes whose answer asks for the tool calls `ids`."""
    if openinference:
        prefix = "llm.output_messages.0.message"
        return {
            "openinference.span.kind": "LLM",
            f"{prefix}.role": "assistant",
            **{f"{prefix}.tool_calls.{n}.tool_call.id": i for n, i in enumerate(ids)},
            **{
                f"{prefix}.tool_calls.{n}.tool_call.function.name": "search"
                for n in range(len(ids))
            },
        }
    parts = [{"type": "tool_call", "id": i, "name": "search", "arguments": {}} for i in ids]
    answer = [{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}]
    return {"gen_ai.operation.name": "chat", "gen_ai.output.messages": json.dumps(answer)}


@pytest.mark.parametrize("openinference", [False, True], ids=["genai", "openinference"])
def test_a_tool_call_belongs_to_the_model_call_that_asked_for_it_whatever_the_clocks(
    openinference: bool,
) -> None:
    # The tools ran on a host whose clock is 5 s behind the model's: by start, every tool call
    # came before the first model call. The answers name the calls they asked for.
    tool_id = "tool.id" if openinference else "gen_ai.tool.call.id"
    tool_kind = (
        {"openinference.span.kind": "TOOL", "tool.name": "search"}
        if openinference
        else {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search"}
    )

    def span(number: int, start: int, attributes: dict[str, Any]) -> SpanRecord:
        return SpanRecord(
            trace_id="ab" * 16,
            span_id=f"{number:016x}",
            parent_span_id=None if number == 1 else f"{1:016x}",
            name=f"span {number}",
            start_time=EPOCH + timedelta(milliseconds=start),
            attributes=attributes,
        )

    agent = {"gen_ai.operation.name": "invoke_agent", "gen_ai.conversation.id": "c"}
    spans = [
        span(1, 5_000, agent),
        span(2, 5_010, _asking(["a", "b"], openinference)),
        span(3, 5_020, _asking(["c"], openinference)),
        *(span(n + 4, 15 + n, {**tool_kind, tool_id: i}) for n, i in enumerate("abc")),
        span(9, 11, {**tool_kind, tool_id: "unasked"}),
    ]
    table = rows_from_spans(spans, source="otlp")
    iterations = {r["tool_call_id"]: r["iteration"] for r in table if r["span_kind"] == "TOOL"}
    assert iterations == {"a": 1, "b": 1, "c": 2, "unasked": None}  # before any model call
    assert [r["iteration"] for r in table if r["span_kind"] == "LLM"] == [1, 2]

    # Ids each answer numbers afresh (`call_0` twice) say nothing: then the clock decides.
    spans[1:3] = [
        span(2, 5_010, _asking(["a"], openinference)),
        span(3, 5_020, _asking(["a"], openinference)),
    ]
    spans[3:] = [
        span(4, 5_015, {**tool_kind, tool_id: "a"}),
        span(5, 5_025, {**tool_kind, tool_id: "a"}),
    ]
    table = rows_from_spans(spans, source="otlp")
    assert [r["iteration"] for r in table if r["span_kind"] == "TOOL"] == [1, 2]
    spans[2] = span(3, 5_020, {"gen_ai.operation.name": "chat"})  # its answer was not kept
    table = rows_from_spans(spans, source="otlp")
    assert [r["iteration"] for r in table if r["span_kind"] == "TOOL"] == [1, 2]  # not 1, 1


@pytest.mark.parametrize("key", ["gen_ai.conversation.id", "session.id"])
def test_a_batch_of_conversations_in_one_trace_is_a_turn_each(tmp_path: Path, key: str) -> None:
    # An eval harness runs its cases under one span: one trace, three conversations. The
    # conversation is named on the model call (GenAI) or the agent span, never on the harness.
    recorder = Recorder()
    with recorder.span("run cases", {"case.count": 3}):
        for conversation, calls in (("a", [SEARCH] * 5), ("b", [SEARCH, FETCH]), ("c", [FETCH])):
            named = {"session.id": conversation} if key == "session.id" else {}
            recorder.turn(conversation, calls, **named)
    table = read_otlp_json(recorder.write(tmp_path / "batch.json"))

    trace = rows(table, span_kind="AGENT")[0]["trace_id"]
    for conversation, tools in (
        ("a", ["search"] * 5),
        ("b", ["search", "fetch"]),
        ("c", ["fetch"]),
    ):
        assert [
            r["tool_name"] for r in rows(table, session_id=conversation, span_kind="TOOL")
        ] == tools
        assert [r["name"] for r in rows(table, session_id=conversation)][
            0
        ] == "invoke_agent planner"
    assert [r["name"] for r in rows(table, session_id=trace)] == ["run cases"]  # the harness's
    scores = evaluate(table, names=[LOOPS])
    assert outcomes(scores, LOOPS) == {  # the loop in "a" is not absorbed into a passing turn
        ("a", 0): "fail",
        ("b", 0): "pass",
        ("c", 0): "pass",
        (trace, 0): "n/a",
    }


@given(
    st.lists(
        st.tuples(st.integers(-2, 30), st.sampled_from([None, "a", "b", "c"])),
        min_size=1,
        max_size=12,
    )
)
def test_a_span_naming_a_session_is_always_in_it(shape: list[tuple[int, str | None]]) -> None:
    # One trace, any shape: a parent earlier, later (cycles), itself, unexported (-1), none (-2).
    trace, unexported = "ab" * 16, "f" * 16
    ids = [f"{i + 1:016x}" for i in range(len(shape))]
    spans = [
        SpanRecord(
            trace_id=trace,
            span_id=ids[i],
            parent_span_id=None
            if parent == -2
            else unexported
            if parent < 0
            else ids[parent % len(ids)],
            attributes={"openinference.span.kind": "CHAIN", **({"session.id": s} if s else {})},
        )
        for i, (parent, s) in enumerate(shape)
    ]
    rows = rows_from_spans(spans, source="test")
    placed = {r["span_id"]: r["session_id"] for r in rows}
    named = {span.span_id: span.attributes.get("session.id") for span in spans}
    for span_id, session in named.items():
        assert session is None or placed[span_id] == session
    assert set(placed.values()) <= {*filter(None, named.values()), trace}
    if len(set(filter(None, named.values()))) <= 1:  # one session: one turn, all in it
        assert len({(r["session_id"], r["turn_index"]) for r in rows}) == 1


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


# -- a property: one turn per root span ------------------------------------------------------


@st.composite
def genai_forests(draw: st.DrawFn) -> list[SpanRecord]:
    """Sessions of GenAI traces: a root with a random tree under it, some roots marked as a
    trial, some missing from the file (their children then have a parent not in the file)."""
    spans: list[SpanRecord] = []
    ids = itertools.count(1)
    operations = st.sampled_from(["chat", "execute_tool", "invoke_agent", "embeddings"])
    for session in range(draw(st.integers(1, 3))):
        for _ in range(draw(st.integers(1, 4))):
            trace_id, members = f"{next(ids):032x}", [f"{next(ids):016x}"]
            root: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent"}
            trial = draw(st.none() | st.integers(0, 1))
            if trial is not None:
                root["trial"] = trial
            start = draw(st.integers(0, 10**6)) * 1000
            if draw(st.integers(0, 4)):  # one root in five is not in the file
                spans.append(_record(trace_id, members[0], None, start, root, f"s{session}"))
            for _ in range(draw(st.integers(0, 5))):
                parent = draw(st.sampled_from(members))
                members.append(f"{next(ids):016x}")
                operation = {"gen_ai.operation.name": draw(operations)}
                spans.append(_record(trace_id, members[-1], parent, start + 1, operation, None))
    return draw(st.permutations(spans))


def _record(
    trace_id: str, span_id: str, parent: str | None, start: int, attributes: Any, session: Any
) -> SpanRecord:
    if session is not None:
        attributes = {**attributes, "gen_ai.conversation.id": session}
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=attributes["gen_ai.operation.name"],
        start_time=None if start % 7 == 0 else EPOCH + timedelta(microseconds=start),
        attributes=attributes,
    )


@given(genai_forests())
def test_every_root_span_is_one_turn(spans: list[SpanRecord]) -> None:
    table = rows_from_spans(spans, source="otlp")
    turns_of: dict[str, set[tuple[str, int]]] = {}
    for row in table:
        turns_of.setdefault(row["trace_id"], set()).add((row["session_id"], row["turn_index"]))
    # a root and everything under it is one turn (the orphans of a missing root together)
    assert all(len(turns) == 1 for turns in turns_of.values())
    roots = {s.trace_id for s in spans}  # each trace here has one root, in the file or not
    turns = {turn for trace_turns in turns_of.values() for turn in trace_turns}
    assert len(turns) == len(roots)
    per_session: dict[str, list[int]] = {}
    for session, index in turns:
        per_session.setdefault(session, []).append(index)
    assert all(sorted(i) == list(range(len(i))) for i in per_session.values())
    assert {r["span_kind"] for r in table} <= {"AGENT", "LLM", "TOOL", "EMBEDDING"}


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
