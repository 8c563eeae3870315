"""`rows_from_messages` and the openai-messages importer on hand-made conversations."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.replay import TraceTableError, build_table, import_traces
from plangate.replay.importers._messages import rows_from_messages, span_id_for, trace_id_for


def call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def write(tmp_path: Path, content: Any, name: str = "chat.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(content), encoding="utf-8")
    return path


def spans(path: Path) -> pd.DataFrame:
    return import_traces("openai-messages", [path]).to_pandas()


def kinds(frame: pd.DataFrame) -> list[tuple[str, Any]]:
    """(span kind, tool name or iteration) per row, for compact comparisons."""
    return [(row.span_kind, label(row)) for row in frame.itertuples()]


def label(row: Any) -> Any:
    if row.span_kind == "AGENT":
        return None
    return row.tool_name if row.span_kind == "TOOL" else int(row.iteration)


MULTI_TURN = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+3?"},
    {"role": "assistant", "content": "5"},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            call("a", "weather", '{"city": "Paris", "unit": "C"}'),
            call("b", "weather", '{"unit":"C","city":"Rome"}'),
        ],
    },
    {"role": "tool", "tool_call_id": "b", "content": "Rome: 20"},  # answers out of order
    {"role": "tool", "tool_call_id": "a", "content": "Paris: 15"},
    {"role": "assistant", "content": "Paris 15, Rome 20."},
]


def test_each_user_message_starts_a_turn(tmp_path: Path) -> None:
    frame = spans(write(tmp_path, MULTI_TURN))
    agents = frame[frame.span_kind == "AGENT"]
    assert list(agents.turn_index) == [0, 1]
    assert (frame.session_id == "openai-messages/chat").all()
    assert list(agents.input_value) == ["What is 2+3?", "Weather in Paris and Rome?"]
    assert list(agents.output_value) == ["5", "Paris 15, Rome 20."]
    assert json.loads(agents.attributes.iloc[0]) == {"system_prompt_chars": len("You are terse.")}
    assert pd.isna(agents.attributes.iloc[1])
    assert kinds(frame[frame.turn_index == 0]) == [("AGENT", None), ("LLM", 1)]
    assert [k for k in kinds(frame[frame.turn_index == 1]) if k[0] != "AGENT"] == [
        ("LLM", 1),
        ("TOOL", "weather"),
        ("TOOL", "weather"),
        ("LLM", 2),
    ]


def test_parallel_calls_get_their_results_by_id(tmp_path: Path) -> None:
    frame = spans(write(tmp_path, MULTI_TURN))
    tools = frame[frame.span_kind == "TOOL"]
    assert list(tools.tool_call_id) == ["a", "b"]
    assert list(tools.tool_output) == ["Paris: 15", "Rome: 20"]
    assert list(tools.tool_args) == ['{"city":"Paris","unit":"C"}', '{"city":"Rome","unit":"C"}']
    assert list(tools.iteration) == [1, 1]
    assert list(tools.name) == ["tool.weather", "tool.weather"]
    assert (tools.status_code == "UNSET").all()
    agent = frame[(frame.span_kind == "AGENT") & (frame.turn_index == 1)].iloc[0]
    assert (frame[frame.trace_id == agent.trace_id].parent_span_id.iloc[1:] == agent.span_id).all()
    assert pd.isna(agent.events)


def test_missing_and_unmatched_results(tmp_path: Path) -> None:
    conversation = [
        {"role": "user", "content": "look up x"},
        {"role": "assistant", "tool_calls": [call("x", "lookup", {"key": "x"})]},
        {"role": "tool", "tool_call_id": "zzz", "content": "orphan"},
        {"role": "user", "content": "well?"},
    ]
    frame = spans(write(tmp_path, {"messages": conversation, "session_id": "s-1", "model": "m-1"}))
    tool = frame[frame.span_kind == "TOOL"].iloc[0]
    assert (
        pd.isna(tool.tool_output)
        and tool.status_code == "UNSET"
        and tool.tool_args == '{"key":"x"}'
    )
    assert (frame.session_id == "s-1").all()
    assert list(frame[frame.span_kind == "LLM"].model_name) == ["m-1"]
    first = frame[frame.turn_index == 0]
    events = json.loads(first[first.span_kind == "AGENT"].events.iloc[0])
    assert events == [
        {
            "name": "unmatched_tool_result",
            "attributes": {"tool_call_id": "zzz", "content": "orphan"},
        }
    ]
    assert len(frame[frame.turn_index == 1]) == 1  # the second user message: an AGENT row only


def test_a_reused_call_id_matches_only_the_results_right_after_its_call() -> None:
    # tau-bench's historical trajectories reuse call ids within a conversation.
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "tool_calls": [call("same", "f", {"n": 1})]},
        {"role": "user", "content": "hello?"},
        {"role": "assistant", "tool_calls": [call("same", "f", {"n": 2})]},
        {"role": "tool", "tool_call_id": "same", "content": "second"},
    ]
    rows = rows_from_messages(messages, session_id="s", turn_index=0, source="t")
    outputs = [row["tool_output"] for row in rows if row["span_kind"] == "TOOL"]
    assert outputs == [None, "second"]


def test_list_of_conversations_gives_one_session_each(tmp_path: Path) -> None:
    one = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = write(tmp_path, [one, {"messages": one, "session_id": "named"}, one], "many.json")
    frame = spans(path)
    assert list(frame[frame.span_kind == "AGENT"].session_id) == [
        "openai-messages/many/0",
        "named",
        "openai-messages/many/2",
    ]
    assert frame.groupby("session_id").trace_id.nunique().eq(1).all()
    assert frame.trace_id.nunique() == 3


def test_tau2_style_calls_content_parts_and_error_marks() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {
            "role": "assistant",
            "content": "checking",
            "tool_calls": [
                {"id": "1", "name": "get", "arguments": {"z": 1, "a": [2, 1]}},
                {"id": "2", "name": "put", "arguments": {}},
            ],
        },
        {"role": "tool", "id": "1", "content": "ok", "error": False},
        {"role": "tool", "id": "2", "content": "Error: no", "error": True},
        {"role": "user", "content": "thanks"},
    ]
    rows = rows_from_messages(messages, session_id="s", turn_index=0, source="tau2", reward=1.0)
    agent, llm, get, put = rows
    assert agent["input_value"] == "a\nb" and agent["reward"] == 1.0
    assert json.loads(agent["events"]) == [
        {"name": "user_message", "attributes": {"content": "thanks"}}
    ]
    assert llm["output_value"] == "checking"
    assert (get["tool_args"], get["tool_output"], get["status_code"]) == (
        '{"a":[2,1],"z":1}',
        "ok",
        "OK",
    )
    assert (put["tool_args"], put["status_code"]) == ("{}", "ERROR")
    build_table(rows)


def test_times_come_from_the_messages_only() -> None:
    def at(second: int) -> str:
        return f"2025-01-01T00:00:{second:02d}"

    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [call("c", "f", "{}"), call("d", "g", "{}")],
        },
        {"role": "tool", "tool_call_id": "c", "content": "1"},
        {"role": "assistant", "content": "done"},
    ]
    rows = rows_from_messages(
        messages,
        session_id="s",
        turn_index=0,
        source="test",
        timestamps=[at(1), at(3), at(4), at(9)],
        usage=[{"prompt_tokens": 99}, {"prompt_tokens": 10, "completion_tokens": 2}, None, None],
        start_time=at(0),
    )
    agent, llm1, f, g, llm2 = rows

    def utc(second: int) -> datetime:
        return datetime(2025, 1, 1, 0, 0, second, tzinfo=UTC)

    assert (agent["start_time"], agent["end_time"]) == (utc(0), utc(9))
    assert (llm1["start_time"], llm1["end_time"]) == (utc(1), utc(3))
    assert (f["start_time"], f["end_time"]) == (utc(3), utc(4))
    assert (g["start_time"], g["end_time"]) == (utc(3), None)  # no result: issued, never answered
    assert (llm2["start_time"], llm2["end_time"]) == (utc(4), utc(9))
    assert (llm1["tokens_prompt"], llm1["tokens_completion"]) == (10, 2)
    assert "tokens_prompt" not in llm2  # the user's usage (99) is nobody's tokens here
    untimed = rows_from_messages(messages, session_id="s", turn_index=0, source="test")
    assert all(row.get("start_time") is None and row.get("end_time") is None for row in untimed)


def test_ids_are_deterministic_and_distinct() -> None:
    messages = MULTI_TURN[3:]
    first = rows_from_messages(messages, session_id="s", turn_index=1, source="t")
    again = rows_from_messages(messages, session_id="s", turn_index=1, source="t")
    other = rows_from_messages(messages, session_id="s", turn_index=2, source="t")
    assert first == again
    assert {row["trace_id"] for row in first} == {trace_id_for("s", 1)}
    assert [row["span_id"] for row in first] == [
        span_id_for(trace_id_for("s", 1), i) for i in range(5)
    ]
    assert len({row["span_id"] for row in first}) == 5
    assert first[0]["trace_id"] != other[0]["trace_id"]
    given_id = rows_from_messages(
        messages, session_id="s", turn_index=1, source="t", trace_id="abc"
    )
    assert {row["trace_id"] for row in given_id} == {"abc"}


def test_files_of_several_conversations_import_together(tmp_path: Path) -> None:
    one = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = write(tmp_path / "a", one, "x.json"), write(tmp_path / "b", one, "y.json")
    frame = import_traces("openai-messages", [first, second]).to_pandas()
    assert sorted(frame.session_id.unique()) == ["openai-messages/x", "openai-messages/y"]

    # Two files both named conv.json hold one session: merged, each span would be there twice.
    clash = write(tmp_path / "b", one, "x.json")
    with pytest.raises(TraceTableError) as raised:
        import_traces("openai-messages", [first, clash])
    assert str(raised.value).startswith(
        f"{first} and {clash} both hold session 'openai-messages/x'"
    )


def test_two_conversations_of_one_session_in_a_file_are_refused_naming_both(
    tmp_path: Path,
) -> None:
    one = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    both = [{"session_id": "s", "messages": one}, {"session_id": "s", "messages": one}]
    path = write(tmp_path, both, "both.json")
    with pytest.raises(TraceTableError) as raised:
        import_traces("openai-messages", [path])
    assert str(raised.value).startswith(
        f"{path}: conversations 0 and 1 both have session_id 's'; a session is one conversation"
    )


def test_a_file_of_no_conversation_is_refused(tmp_path: Path) -> None:
    # Imported, it would be a table of nothing, and `eval` would have nothing to say about it.
    with pytest.raises(TraceTableError, match="empty.json: nothing to import"):
        import_traces("openai-messages", [write(tmp_path, [], "empty.json")])


def test_importing_twice_gives_identical_tables(tmp_path: Path) -> None:
    path = write(tmp_path, MULTI_TURN)
    assert import_traces("openai-messages", [path]).equals(import_traces("openai-messages", [path]))


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A user message, then assistant messages with calls, some answered, some not, some twice."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for step in range(draw(st.integers(0, 5))):
        ids = [f"{step}-{n}" for n in range(draw(st.integers(0, 3)))]
        calls = [
            call(i, draw(st.sampled_from(["f", "g"])), {"n": draw(st.integers(0, 2))}) for i in ids
        ]
        messages.append(
            {
                "role": "assistant",
                "content": draw(st.none() | st.text(max_size=3)),
                "tool_calls": calls,
            }
        )
        answered = draw(st.lists(st.sampled_from([*ids, "stray"]), max_size=4)) if ids else []
        messages += [{"role": "tool", "tool_call_id": i, "content": f"r{i}"} for i in answered]
        if draw(st.booleans()):
            messages.append({"role": "user", "content": "more"})
    return messages


@settings(max_examples=200, deadline=None)
@given(conversations())
def test_every_call_and_result_is_accounted_for(messages: list[dict[str, Any]]) -> None:
    rows = rows_from_messages(messages, session_id="p", turn_index=0, source="t")
    table = build_table(rows)  # valid: unique ids, allowed kinds and codes
    tools = [row for row in rows if row["span_kind"] == "TOOL"]
    assert len(tools) == sum(len(m.get("tool_calls", [])) for m in messages)
    assert sum(row["span_kind"] == "LLM" for row in rows) == sum(
        m["role"] == "assistant" for m in messages
    )
    events = json.loads(rows[0]["events"] or "[]")
    unmatched = [e for e in events if e["name"] == "unmatched_tool_result"]
    answered = [row for row in tools if row["tool_output"] is not None]
    assert len(answered) + len(unmatched) == sum(m["role"] == "tool" for m in messages)
    assert all(row["tool_output"] == f"r{row['tool_call_id']}" for row in answered)
    assert table.num_rows == len(rows)
