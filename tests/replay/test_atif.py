"""ATIF: the `atif` importer, `trajectories_from_table`, and `plangate export atif`.

Exports are checked against the format's own rules. Harbor's reference models cannot be
installed here (harbor needs Python 3.12 and pulls in litellm, supabase, fastmcp, ...), and
Harbor publishes no JSON schema, so the check is `data/atif-v1.8.schema.json`, written from the
RFC and the models, plus the rules a schema cannot say (`atif_problems`).
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plangate.evaluators import evaluate
from plangate.replay import (
    ATIF_VERSION,
    TraceTableError,
    build_table,
    canonical_arguments,
    import_traces,
    read_dataset,
    trajectories_from_table,
)
from plangate.replay.schema import (
    ATTRIBUTES,
    INPUT_VALUE,
    PARENT_SPAN_ID,
    SOURCE,
    SPAN_ID,
    TRACE_ID,
)
from tests.ci.bad_inputs import assert_one_line_naming, run_main
from tests.conftest import REPO

DATA = Path(__file__).parent / "data"
LOOP = DATA / "atif-loop.json"
VALIDATOR = jsonschema.Draft202012Validator(
    json.loads((DATA / "atif-v1.8.schema.json").read_text(encoding="utf-8"))
)
GOLDENS = ("support-desk", "observability-core")


def atif_problems(trajectory: Any, where: str = "trajectory") -> list[str]:
    """What makes `trajectory` invalid ATIF: the schema's errors, then the cross-field rules."""
    problems = [f"{where}: {error.message}" for error in VALIDATOR.iter_errors(trajectory)]
    if problems:
        return problems
    for index, step in enumerate(trajectory["steps"]):
        if step["step_id"] != index + 1:
            problems.append(f"{where}: steps[{index}].step_id is not {index + 1}")
        try:
            datetime.fromisoformat((step.get("timestamp") or "2026-01-01").replace("Z", "+00:00"))
        except ValueError:
            problems.append(f"{where}: steps[{index}].timestamp is not ISO 8601")
        calls = {call["tool_call_id"] for call in step.get("tool_calls") or []}
        for result in (step.get("observation") or {}).get("results", []):
            if result.get("source_call_id") not in (None, *calls):
                problems.append(f"{where}: steps[{index}] has a result for no call of its own")
    embedded = trajectory.get("subagent_trajectories") or []
    if len({sub["trajectory_id"] for sub in embedded}) != len(embedded):
        problems.append(f"{where}: two embedded subagents share a trajectory_id")
    for number, sub in enumerate(embedded):
        problems += atif_problems(sub, f"{where}.subagent_trajectories[{number}]")
    return problems


def write(folder: Path, data: Any, name: str = "trajectory.json") -> Path:
    path = folder / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def turn_calls(table: Any) -> dict[tuple[str, int], list[tuple[Any, ...]]]:
    """Per turn, each call: tool, canonical arguments, result, call id."""
    turns: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
    for row in table.to_pylist():
        calls = turns.setdefault((row["session_id"], row["turn_index"]), [])
        if row["span_kind"] == "TOOL":
            calls.append(
                (row["tool_name"], row["tool_args"], row["tool_output"], row["tool_call_id"])
            )
    return turns


def turn_tokens(table: Any) -> dict[tuple[str, int], tuple[int, int]]:
    tokens: dict[tuple[str, int], tuple[int, int]] = {}
    for row in table.to_pylist():
        prompt, completion = tokens.get((row["session_id"], row["turn_index"]), (0, 0))
        prompt += row["tokens_prompt"] or 0
        tokens[row["session_id"], row["turn_index"]] = (
            prompt,
            completion + (row["tokens_completion"] or 0),
        )
    return tokens


def comparable(table: Any) -> list[dict[str, Any]]:
    """Rows without what an ATIF round trip does not keep: ids, source, prompts, atif.* notes."""
    rows = []
    for row in table.to_pylist():
        kept = {
            k: v for k, v in row.items() if k not in (TRACE_ID, SPAN_ID, PARENT_SPAN_ID, SOURCE)
        }
        if row["span_kind"] == "LLM":
            del kept[INPUT_VALUE]
        attributes = json.loads(row[ATTRIBUTES] or "{}")
        kept[ATTRIBUTES] = {k: v for k, v in attributes.items() if not k.startswith("atif.")}
        rows.append(kept)
    return rows


# -- the checker itself -------------------------------------------------------------------------

VALID = json.loads(LOOP.read_text(encoding="utf-8"))
BROKEN = {
    "agent without version": lambda t: t["agent"].pop("version"),
    "step ids out of order": lambda t: t["steps"][0].update(step_id=2),
    "a field ATIF does not have": lambda t: t.update(comment="hi"),
    "tool calls on a user step": lambda t: t["steps"][1].update(tool_calls=[]),
    "a result for no call": lambda t: t["steps"][2]["observation"]["results"][0].update(source_call_id="x"),
    "metrics on a dispatch": lambda t: t["steps"][3].update(llm_call_count=0),
    "a timestamp that is no time": lambda t: t["steps"][0].update(timestamp="yesterday"),
    "an unresolvable reference": lambda t: t["steps"][2]["observation"]["results"][0].update(subagent_trajectory_ref=[{"session_id": "s"}]),
    "an unknown version": lambda t: t.update(schema_version="ATIF-v2.0"),
    "arguments as text": lambda t: t["steps"][2]["tool_calls"][0].update(arguments="{}"),
}  # fmt: skip


def test_the_checker_accepts_the_hand_written_file() -> None:
    assert atif_problems(VALID) == []


@pytest.mark.parametrize("breaking", sorted(BROKEN))
def test_the_checker_refuses_what_harbor_refuses(breaking: str) -> None:
    trajectory = copy.deepcopy(VALID)
    BROKEN[breaking](trajectory)
    assert atif_problems(trajectory) != []


# -- importing ----------------------------------------------------------------------------------


def test_a_repeated_identical_call_imports_as_a_loop() -> None:
    scores = evaluate(import_traces("atif", [LOOP]), names=["tool_call_loops"]).to_pylist()
    looping, thanks = sorted(scores, key=lambda score: score["turn_index"])
    assert (looping["passed"], looping["label"]) == (False, "loop")
    assert json.loads(looping["details"])["longest_run"] == 4
    assert thanks["outcome"] == "n/a"  # the second turn made no call


def test_steps_become_turns_model_calls_and_tool_calls() -> None:
    rows = import_traces("atif", [LOOP]).to_pylist()
    assert {row["session_id"] for row in rows} == {"order-1042"}
    agents = [row for row in rows if row["span_kind"] == "AGENT"]
    assert [a["input_value"] for a in agents] == ["Where is my order 1042?", "Thanks anyway."]
    assert agents[0]["output_value"] == "Sorry, I could not find order 1042 right now."
    system = json.loads(agents[0]["events"])[0]["attributes"]
    assert system["position"] == 0 and system["step"]["source"] == "system"
    first = json.loads(agents[0]["attributes"])
    assert first["agent.name"] == "support-bot" and first["atif.agent"]["version"] == "2.1.0"
    assert first["atif.trajectory"]["final_metrics"]["total_steps"] == 9
    llms = [row for row in rows if row["span_kind"] == "LLM" and row["turn_index"] == 0]
    assert [row["iteration"] for row in llms] == [1, 2, 3, 4, 5]
    assert [row["model_name"] for row in llms] == ["gpt-4o-mini"] * 4 + ["gpt-4o"]
    assert [row["tokens_prompt"] for row in llms] == [812, 851, 890, 929, 968]
    attributes = json.loads(llms[0]["attributes"])
    assert attributes["llm.token_count.prompt_details.cache_read"] == 512
    assert attributes["llm.cost.total"] == 0.0004
    assert attributes["atif.step"] == {"reasoning_content": "Look the order up first."}
    assert llms[0]["output_value"] == "Let me look that up." and llms[1]["output_value"] is None
    # a step's timestamp ends its model call, which began at the step before's
    assert (llms[0]["start_time"], llms[0]["end_time"]) == (
        datetime(2026, 3, 2, 9, 0, 1, tzinfo=UTC), datetime(2026, 3, 2, 9, 0, 3, tzinfo=UTC))  # fmt: skip
    tools = [row for row in rows if row["span_kind"] == "TOOL"]
    assert [row["tool_call_id"] for row in tools] == ["call_1", "call_2", "call_3", "call_4"]
    assert {row["tool_args"] for row in tools} == {'{"fields":["status","eta"],"order_id":"1042"}'}
    assert {row["tool_output"] for row in tools} == {"error: lookup timed out"}
    assert [row["iteration"] for row in tools] == [1, 2, 3, 4]
    assert tools[0]["start_time"] == llms[0]["end_time"] and tools[0]["end_time"] is None


def test_a_list_and_json_lines_import_alike(tmp_path: Path) -> None:
    other = {**copy.deepcopy(VALID), "session_id": None}
    listed = import_traces("atif", [write(tmp_path, [VALID, other], "both.json")])
    lines = "\n".join(json.dumps(t) for t in (VALID, other)) + "\n"
    (tmp_path / "both.jsonl").write_text(lines, encoding="utf-8")
    assert import_traces("atif", [tmp_path / "both.jsonl"]).equals(listed)
    assert sorted({row["session_id"] for row in listed.to_pylist()}) == [
        "atif/both/1",
        "order-1042",
    ]


def test_subagents_are_linked_under_the_call_and_embedded_again(tmp_path: Path) -> None:
    agent = {"name": "desk", "version": "1"}
    child = {"schema_version": "ATIF-v1.7", "trajectory_id": "research-1", "agent": agent,
             "steps": [{"step_id": 1, "source": "user", "message": "Find the policy."},
                       {"step_id": 2, "source": "agent", "message": "30 days."}]}  # fmt: skip
    ref = {"trajectory_id": "research-1"}
    call = {"tool_call_id": "d1", "function_name": "delegate", "arguments": {"job": "policy"}}
    result = {"source_call_id": "d1", "content": "30 days.", "subagent_trajectory_ref": [ref]}
    parent = {"schema_version": "ATIF-v1.7", "session_id": "desk-7", "agent": agent,
              "steps": [{"step_id": 1, "source": "user", "message": "Refund window?"},
                        {"step_id": 2, "source": "agent", "message": "", "tool_calls": [call],
                         "observation": {"results": [result]}}],
              "subagent_trajectories": [child]}  # fmt: skip
    table = import_traces("atif", [write(tmp_path, parent)])
    rows = table.to_pylist()
    delegate = next(row for row in rows if row["tool_name"] == "delegate")
    sub = next(row for row in rows if row["span_kind"] == "AGENT" and row["session_id"] != "desk-7")
    assert sub["session_id"] == "desk-7/research-1"
    assert (sub[TRACE_ID], sub[PARENT_SPAN_ID]) == (delegate[TRACE_ID], delegate[SPAN_ID])
    (again,) = trajectories_from_table(table)
    assert atif_problems(again) == []
    assert [t["trajectory_id"] for t in again["subagent_trajectories"]] == ["research-1"]
    assert again["steps"][1]["observation"]["results"][0]["subagent_trajectory_ref"] == [ref]


BAD = {
    "a step that is no object": (lambda t: t["steps"].__setitem__(2, 7), ["step 2", "a step object"]),
    "an unknown source": (lambda t: t["steps"][1].update(source="robot"), ["step 1", "'source'", "robot"]),
    "arguments missing": (lambda t: t["steps"][2]["tool_calls"][0].pop("arguments"), ["step 2", "tool_calls[0]", "'arguments'"]),
    "tokens as text": (lambda t: t["steps"][3]["metrics"].update(prompt_tokens="851"), ["step 3", "metrics", "'prompt_tokens'"]),
    "a bad timestamp": (lambda t: t["steps"][4].update(timestamp="soon"), ["step 4", "'timestamp'"]),
    "results not a list": (lambda t: t["steps"][2]["observation"].update(results={}), ["step 2", "observation.results"]),
    "no steps": (lambda t: t.update(steps=[]), ["'steps'", "at least one"]),
    "no agent name": (lambda t: t["agent"].pop("name"), ["agent", "'name'"]),
    "another format": (lambda t: t.update(schema_version="1.4"), ["'schema_version'", "ATIF-v1"]),
    "bad restored column": (lambda t: t["steps"][2].update(extra={"plangate": {"status_code": "FINE"}}), ["step 2", "extra.plangate", "'status_code'"]),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_input_is_one_error_naming_the_file_step_and_field(tmp_path: Path, case: str) -> None:
    breaking, fragments = BAD[case]
    trajectory = copy.deepcopy(VALID)
    breaking(trajectory)
    path = write(tmp_path, [VALID, trajectory])
    with pytest.raises(TraceTableError) as raised:
        import_traces("atif", [path])
    message = str(raised.value)
    assert message.startswith(f"{path}: trajectory 1: ")
    assert all(fragment in message for fragment in fragments), message


# -- exporting: a golden there and back ---------------------------------------------------------


@pytest.mark.parametrize("name", GOLDENS)
def test_a_shipped_golden_exports_valid_atif_that_imports_back(tmp_path: Path, name: str) -> None:
    table = read_dataset(REPO / "datasets" / name).spans
    trajectories = trajectories_from_table(table)
    assert len(trajectories) == len(set(table.column("session_id").to_pylist()))
    for trajectory in trajectories:
        assert trajectory["schema_version"] == ATIF_VERSION
        assert atif_problems(trajectory) == [], trajectory["session_id"]
    back = import_traces("atif", [write(tmp_path, trajectories)])
    assert turn_calls(back) == turn_calls(table)
    assert turn_tokens(back) == turn_tokens(table)
    assert comparable(back) == comparable(table)  # times, status, stop reasons, plans, ... too


# -- the command line ---------------------------------------------------------------------------


def test_export_writes_refuses_to_overwrite_and_names_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    golden, out = str(REPO / "datasets" / "support-desk"), tmp_path / "desk.json"
    code, printed, _ = run_main(
        ["export", "atif", golden, "-o", str(out), "--session", "sup-001"], capsys
    )
    assert code == 0 and printed.startswith(f"{out}: 1 {ATIF_VERSION} trajectory")
    written = out.read_bytes()
    assert atif_problems(json.loads(written)) == []
    code, _, err = run_main(["export", "atif", golden, "-o", str(out)], capsys)
    assert_one_line_naming(code, err, out, "existing output")
    assert "--force" in err
    assert out.read_bytes() == written
    assert run_main(["export", "atif", golden, "-o", str(out), "--force"], capsys)[0] == 0
    assert len(json.loads(out.read_bytes())) == 21  # every session: a list
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    (tmp_path / "empty").mkdir()
    for bad in (tmp_path / "missing", tmp_path / "junk.parquet", tmp_path / "empty"):
        code, _, err = run_main(
            ["export", "atif", str(bad), "-o", str(tmp_path / "x.json")], capsys
        )
        assert_one_line_naming(code, err, bad, f"export {bad.name}")
    assert not (tmp_path / "x.json").exists()
    broken = write(tmp_path, {**VALID, "steps": [{"source": "agent", "tool_calls": [{}]}]})
    code, _, err = run_main(
        ["import", "atif", str(broken), "-o", str(tmp_path / "t.parquet")], capsys
    )
    assert_one_line_naming(code, err, broken, "import atif")


# -- properties ---------------------------------------------------------------------------------

TEXT = st.text(max_size=12)
ARGUMENTS = st.one_of(
    st.dictionaries(st.sampled_from("abc"), st.one_of(st.integers(-5, 5), TEXT), max_size=3).map(canonical_arguments),
    st.sampled_from(["ls -la", "[1, 2]", "{}", None]),
)  # fmt: skip
TOOL = st.fixed_dictionaries({
    "tool_name": st.sampled_from(["search", "open", "finish"]), "tool_args": ARGUMENTS,
    "tool_output": st.none() | TEXT, "tool_call_id": st.none() | st.sampled_from(["c1", "c2"]),
    "status_code": st.sampled_from(["OK", "ERROR", "UNSET"]),
})  # fmt: skip
LLM = st.fixed_dictionaries({
    "tokens_prompt": st.none() | st.integers(0, 10**6), "tokens_completion": st.none() | st.integers(0, 999),
    "output_value": st.none() | TEXT, "model_name": st.none() | st.sampled_from(["m1", "m2"]),
    "tools": st.lists(TOOL, max_size=3),
})  # fmt: skip
TURN = st.fixed_dictionaries({
    "input_value": st.none() | TEXT, "stop_reason": st.none() | st.just("finished"),
    "calls": st.lists(LLM, max_size=3), "timed": st.booleans(),
})  # fmt: skip


def table_of(sessions: list[list[dict[str, Any]]]) -> Any:
    rows: list[dict[str, Any]] = []
    start = datetime(2026, 1, 1, tzinfo=UTC)
    for number, turns in enumerate(sessions):
        for index, turn in enumerate(turns):
            base = {
                "session_id": f"s{number}",
                "turn_index": index,
                "trace_id": f"t{number}-{index}",
                "source": "test",
            }
            clock = (lambda n: start + timedelta(seconds=n)) if turn["timed"] else (lambda n: None)
            rows.append({**base, "span_id": "a", "span_kind": "AGENT", "name": "agent.turn",
                         "status_code": "OK", "input_value": turn["input_value"],
                         "attributes": '{"agent.name":"bot"}',
                         "stop_reason": turn["stop_reason"], "start_time": clock(0)})  # fmt: skip
            for iteration, call in enumerate(turn["calls"], start=1):
                llm = {k: v for k, v in call.items() if k != "tools"}
                rows.append({**base, **llm, "span_id": f"l{iteration}", "parent_span_id": "a",
                             "span_kind": "LLM", "name": "llm.call", "status_code": "UNSET",
                             "iteration": iteration, "end_time": clock(iteration)})  # fmt: skip
                for position, tool in enumerate(call["tools"]):
                    rows.append({**base, **tool, "span_id": f"t{iteration}-{position}", "parent_span_id": "a",
                                 "span_kind": "TOOL", "name": f"tool.{tool['tool_name']}", "iteration": iteration})  # fmt: skip
    return build_table(rows)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(sessions=st.lists(st.lists(TURN, min_size=1, max_size=3), min_size=1, max_size=3))
def test_any_table_survives_the_round_trip(tmp_path: Path, sessions: list[Any]) -> None:
    table = table_of(sessions)
    trajectories = trajectories_from_table(table)
    assert [problem for t in trajectories for problem in atif_problems(t)] == []
    back = import_traces("atif", [write(tmp_path, trajectories)])
    assert comparable(back) == comparable(table)
    assert trajectories_from_table(back) == trajectories


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=8,
)
FIELDS = ["schema_version", "agent", "steps", "session_id", "final_metrics", "extra", "source",
          "message", "tool_calls", "observation", "results", "metrics", "timestamp",
          "tool_call_id", "function_name", "arguments", "source_call_id", "content",
          "subagent_trajectory_ref", "subagent_trajectories", "llm_call_count", "plangate"]  # fmt: skip


@st.composite
def mutated(draw: Any) -> Any:
    """The hand-written trajectory with a few of its values, anywhere, replaced by anything."""
    trajectory = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 4))):
        node, key = trajectory, None
        for _ in range(draw(st.integers(0, 5))):
            keys = (
                list(node)
                if isinstance(node, dict)
                else list(range(len(node)))
                if isinstance(node, list)
                else []
            )
            if not keys:
                break
            key = draw(st.sampled_from(keys))
            if not isinstance(node[key], dict | list):
                break
            node = node[key]
        if isinstance(node, dict):
            node[draw(st.sampled_from(FIELDS) | st.sampled_from(list(node) or ["x"]))] = draw(JSON)
        elif isinstance(node, list) and node:
            node[draw(st.integers(0, len(node) - 1))] = draw(JSON)
    return trajectory


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=mutated() | JSON)
def test_the_importer_raises_nothing_but_its_error(tmp_path: Path, document: Any) -> None:
    path = tmp_path / "drawn.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    try:
        table = import_traces("atif", [path])
    except TraceTableError as error:
        assert str(error).startswith(str(path))
        return
    exported = trajectories_from_table(table)  # whatever was accepted exports
    if isinstance(document, dict) and atif_problems(document) == []:  # and valid in, valid out
        assert [problem for t in exported for problem in atif_problems(t)] == []
