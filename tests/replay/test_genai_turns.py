"""Which session, turn and trial, and which model call, each imported GenAI span belongs to.

Spans made with the OpenTelemetry SDK (`tests.genai_spans`), or as `SpanRecord`s where a test
needs a shape the SDK does not make (cycles, skewed clocks, unexported parents).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plangate.evaluators import evaluate, repeat_scores, task_outcomes
from plangate.replay import SpanRecord, rows_from_spans
from plangate.replay.importers._otlp import read_otlp_json
from tests.genai_spans import EPOCH, FETCH, LOOPS, SEARCH, Recorder, outcomes, rows

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

    main, researcher = rows(table, session_id="main"), rows(table, session_id="r-1")
    assert [(r["span_kind"], r["tool_name"]) for r in main if r["span_kind"] != "LLM"] == [
        ("AGENT", None),
        *[("TOOL", "search")] * 5,
        ("TOOL", "ask_researcher"),  # the planner's own call, whatever it ran
    ]
    assert [r["span_kind"] for r in researcher] == ["AGENT", "LLM", "TOOL"]  # a turn of its own
    assert {r["session_id"] for r in table.to_pylist()} == {"main", "r-1"}
    assert outcomes(evaluate(table), LOOPS) == {("main", 0): "fail", ("r-1", 0): "pass"}


@pytest.mark.parametrize("named", ["on the model calls", "on one agent span"])
def test_a_harness_that_asks_a_model_itself_leaves_its_cases_whole(
    tmp_path: Path, named: str
) -> None:
    # A harness runs two cases and asks a model of its own (a judge); each case's conversation
    # is named on its model calls, or on the agent span of one of them.
    recorder = Recorder()
    agent = {"gen_ai.operation.name": "invoke_agent"}
    with recorder.span("eval run", {"case.count": 2}):
        for case, calls in (("case-A", [SEARCH] * 5), ("case-B", [FETCH])):
            on_agent = named == "on one agent span" and case == "case-A"
            with recorder.span(
                "invoke_agent solver",
                {**agent, **({"gen_ai.conversation.id": case} if on_agent else {})},
            ):
                recorder.chat(case)
                for number, call in enumerate(calls):
                    recorder.tool(*call, f"call_{number}")
        recorder.chat("harness-judge")
    table = read_otlp_json(recorder.write(tmp_path / "batch.json"))

    for case, tools in (("case-A", 5), ("case-B", 1)):
        kinds = [r["span_kind"] for r in rows(table, session_id=case)]
        assert (kinds.count("AGENT"), kinds.count("TOOL")) == (1, tools), case
    assert outcomes(evaluate(table), LOOPS)[("case-A", 0)] == "fail"
    harness = {r["session_id"] for r in table.to_pylist() if r["name"] == "eval run"}
    assert harness.isdisjoint({"case-A", "case-B"})  # the harness's own spans: a turn apart


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

    def span(
        number: int, start: int, attributes: dict[str, Any], end: int | None = None
    ) -> SpanRecord:
        return SpanRecord(
            trace_id="ab" * 16,
            span_id=f"{number:016x}",
            parent_span_id=None if number == 1 else f"{1:016x}",
            name=f"span {number}",
            start_time=EPOCH + timedelta(milliseconds=start),
            end_time=None if end is None else EPOCH + timedelta(milliseconds=end),
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
    spans[3] = span(4, 4_990, {**tool_kind, tool_id: "a"})  # before any model call: doubt
    table = rows_from_spans(spans, source="otlp")
    assert [r["iteration"] for r in table if r["span_kind"] == "TOOL"] == [None, 2]  # not 1, 1

    # A clock ahead: the call the first answer asked for started while the second model call ran.
    spans[1:] = [
        span(2, 5_000, _asking(["a"], openinference), end=5_100),
        span(3, 5_200, _asking(["b"], openinference), end=5_300),
        span(4, 5_250, {**tool_kind, tool_id: "a"}),
        span(5, 5_350, {**tool_kind, tool_id: "b"}),
    ]
    table = rows_from_spans(spans, source="otlp")
    assert [r["iteration"] for r in table if r["span_kind"] == "TOOL"] == [1, 2]


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
