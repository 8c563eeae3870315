"""Importers on the real third-party trajectories in ../shared/corpus."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from plangate.harness import canonical_json
from plangate.replay import (
    TraceTableError,
    concat_tables,
    import_formats,
    import_traces,
    validate_table,
)

TAU_BENCH = "tau-bench/gpt-4o-airline.json"
TAU2_LEADERBOARD = [
    (
        "claude-sonnet-4-5_aide-platform_airline.json",
        "claude-sonnet-4-5_aide-platform_submission.json",
    ),
    ("button-claude-opus-4-6_distyl_airline.json", "button-claude-opus-4-6_distyl_submission.json"),
    ("toolorchestra_airline_gpt-5_1trial.json", "toolorchestra_submission.json"),
]
TAU2_FILES = [
    "button-claude-opus-4-6_distyl_airline.json",
    "claude-sonnet-4-5_aide-platform_airline.json",
    "sierra_gym_gpt-4.1_airline_default_1trial.json",
    "sierra_gym_gpt-4.1_telecom_no-user_4trials_5tasks.json",
    "toolorchestra_airline_gpt-5_1trial.json",
]


def frame(table: pa.Table) -> pd.DataFrame:
    return table.to_pandas()


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def test_every_format_is_registered() -> None:
    assert {"openai-messages", "tau-bench", "tau2", "swe-agent"} <= set(import_formats())


# tau-bench


@pytest.fixture(scope="module")
def tau_bench(corpus: Path) -> tuple[list[dict[str, Any]], pd.DataFrame]:
    path = corpus / TAU_BENCH
    return load(path), frame(import_traces("tau-bench", [path]))


def test_tau_bench_has_one_turn_per_record(tau_bench: tuple[list[Any], pd.DataFrame]) -> None:
    records, spans = tau_bench
    agents = spans[spans.span_kind == "AGENT"]
    assert len(agents) == len(records) == 200
    assert agents.task_id.nunique() == 50
    assert agents.groupby("task_id").trial.apply(lambda s: sorted(s) == [0, 1, 2, 3]).all()
    assert agents.session_id.is_unique and (agents.turn_index == 0).all()
    assert (spans.source == "tau-bench").all()
    expected = {(str(r["task_id"]), r["trial"]): r["reward"] for r in records}
    actual = {(row.task_id, row.trial): row.reward for row in agents.itertuples()}
    assert actual == expected
    assert Counter(actual.values()) == Counter({0.0: 116, 1.0: 84})


def test_tau_bench_tool_calls_match_the_file(tau_bench: tuple[list[Any], pd.DataFrame]) -> None:
    records, spans = tau_bench
    calls = [
        (f"tau-bench/{r['task_id']}/{r['trial']}", call)
        for r in records
        for message in r["traj"]
        for call in message.get("tool_calls") or []
    ]
    tools = spans[spans.span_kind == "TOOL"]
    assert len(tools) == len(calls) == 1164
    assert list(tools.session_id) == [session for session, _ in calls]
    assert list(tools.tool_name) == [call["function"]["name"] for _, call in calls]
    canonical = [
        json.dumps(json.loads(call["function"]["arguments"]), sort_keys=True, separators=(",", ":"))
        for _, call in calls
    ]
    assert list(tools.tool_args) == canonical
    assert all(canonical_json(json.loads(args)) == args for args in tools.tool_args)


def test_tau_bench_tool_results_follow_their_calls(
    tau_bench: tuple[list[Any], pd.DataFrame],
) -> None:
    # Call ids repeat within a conversation in this file; each result must still go to its call.
    records, spans = tau_bench
    results = [m["content"] for r in records for m in r["traj"] if m["role"] == "tool"]
    tools = spans[spans.span_kind == "TOOL"]
    assert list(tools.tool_output) == results
    assert (
        tools.status_code == "UNSET"
    ).all()  # tau-bench marks no errors; "Error: ..." text is not guessed


def test_tau_bench_turn_structure(tau_bench: tuple[list[Any], pd.DataFrame]) -> None:
    records, spans = tau_bench
    assistants = sum(m["role"] == "assistant" for r in records for m in r["traj"])
    llms = spans[spans.span_kind == "LLM"]
    assert len(llms) == assistants
    agents = spans[spans.span_kind == "AGENT"].set_index("trace_id")
    children = spans[spans.span_kind != "AGENT"]
    assert (children.parent_span_id.values == agents.loc[children.trace_id, "span_id"].values).all()
    per_turn = llms.groupby("trace_id").iteration.apply(list)
    assert all(its == list(range(1, len(its) + 1)) for its in per_turn)
    assert spans.start_time.isna().all() and spans.end_time.isna().all()
    assert spans.model_name.isna().all() and spans.tokens_prompt.isna().all()
    first = agents.loc[spans.trace_id.iloc[0]]
    assert first.input_value == records[0]["traj"][1]["content"]
    assert json.loads(first.attributes)["gold_actions"] == records[0]["info"]["task"]["actions"]


# tau2


def test_tau2_files_are_all_covered(corpus: Path) -> None:
    found = sorted(p.name for p in (corpus / "tau2-bench").glob("*.json"))
    assert [n for n in found if not n.endswith("_submission.json")] == TAU2_FILES


@pytest.mark.parametrize("name", TAU2_FILES)
def test_tau2_file_imports_with_rewards_and_stop_reasons(corpus: Path, name: str) -> None:
    path = corpus / "tau2-bench" / name
    data = load(path)
    spans = frame(import_traces("tau2", [path]))
    agents = spans[spans.span_kind == "AGENT"].set_index("session_id")
    simulations = {f"tau2/{s['id']}": s for s in data["simulations"]}
    assert sorted(agents.index) == sorted(simulations)
    for session, simulation in simulations.items():
        row = agents.loc[session]
        assert row.stop_reason == simulation["termination_reason"]
        assert row.reward == simulation["reward_info"]["reward"]
        assert (row.task_id, row.trial) == (simulation["task_id"], simulation["trial"])
    assert (spans.model_name.dropna() == data["info"]["agent_info"]["llm"]).all()


@pytest.mark.parametrize("name", TAU2_FILES)
def test_tau2_timestamps_are_present_and_ordered(corpus: Path, name: str) -> None:
    path = corpus / "tau2-bench" / name
    data = load(path)
    spans = frame(import_traces("tau2", [path]))
    agents = spans[spans.span_kind == "AGENT"].set_index("trace_id")
    assert agents.start_time.notna().all() and (agents.start_time <= agents.end_time).all()
    children = spans[spans.span_kind != "AGENT"]
    if not any("timestamp" in m for s in data["simulations"] for m in s["messages"]):
        assert children.start_time.isna().all() and children.end_time.isna().all()  # none invented
        return
    assert children.start_time.notna().all() and children.end_time.notna().all()
    assert (children.start_time <= children.end_time).all()
    assert children.groupby("trace_id").start_time.apply(lambda s: s.is_monotonic_increasing).all()
    turns = agents[["start_time", "end_time"]].add_prefix("turn_")
    merged = children.join(turns, on="trace_id")
    assert (merged.start_time >= merged.turn_start_time).all()
    assert (merged.end_time <= merged.turn_end_time).all()


@pytest.mark.parametrize("name", TAU2_FILES)
def test_tau2_tokens_and_errors_are_the_agents_own(corpus: Path, name: str) -> None:
    path = corpus / "tau2-bench" / name
    messages = [m for s in load(path)["simulations"] for m in s["messages"]]
    spans = frame(import_traces("tau2", [path]))
    llms = spans[spans.span_kind == "LLM"]
    agent_prompt = sum(
        (m.get("usage") or {}).get("prompt_tokens", 0) for m in messages if m["role"] == "assistant"
    )
    assert llms.tokens_prompt.sum() == agent_prompt  # the user simulator's usage is left out
    tools = spans[spans.span_kind == "TOOL"]
    assert (tools.status_code == "ERROR").sum() == sum(m.get("error") is True for m in messages)
    assert (tools.status_code == "OK").sum() == sum(m.get("error") is False for m in messages)


@pytest.mark.parametrize(("results", "submission"), TAU2_LEADERBOARD)
def test_tau2_mean_reward_is_the_leaderboard_pass_1(
    corpus: Path, results: str, submission: str
) -> None:
    table = import_traces("tau2", [corpus / "tau2-bench" / results])
    agents = frame(table.filter(pc.equal(table["span_kind"], "AGENT")))
    published = load(corpus / "tau2-bench" / submission)["results"]["airline"]["pass_1"]
    assert len(agents) == 50
    assert agents.reward.mean() == pytest.approx(published / 100)


# SWE-agent


def swe_files(corpus: Path) -> list[Path]:
    return sorted((corpus / "swe-agent").rglob("*.traj"))


def test_every_swe_agent_trajectory_imports(corpus: Path) -> None:
    paths = swe_files(corpus)
    assert len(paths) == 22
    table = import_traces("swe-agent", paths)
    validate_table(table)  # session and span ids stay unique across runs of the same task
    spans = frame(table)
    agents = spans[spans.span_kind == "AGENT"]
    assert len(agents) == 22 and agents.session_id.is_unique
    for path in paths:
        data = load(path)
        steps = data.get("trajectory") or [m for m in data["history"] if "action" in m]
        turn = spans[spans.session_id.str.endswith(f"/{path.parent.name}/{path.stem}")]
        tools = turn[turn.span_kind == "TOOL"]
        assert (turn.span_kind == "LLM").sum() == len(tools) == len(steps)
        assert list(tools.tool_name) == [s["action"].split()[0] for s in steps]
        assert list(tools.iteration) == list(range(1, len(steps) + 1))
        agent = turn[turn.span_kind == "AGENT"].iloc[0]
        exit_status = data.get("info", {}).get("exit_status")
        assert agent.stop_reason == exit_status if exit_status else pd.isna(agent.stop_reason)
        assert agent.task_id == path.stem
    assert spans.start_time.isna().all() and spans.end_time.isna().all()


def test_swe_agent_keeps_execution_time_and_run_stats(corpus: Path) -> None:
    path = next(p for p in swe_files(corpus) if p.stem == "6e44b9__sweagenttestrepo-1c2844")
    data = load(path)
    spans = frame(import_traces("swe-agent", [path]))
    tools = spans[spans.span_kind == "TOOL"]
    times = [json.loads(a)["execution_time"] for a in tools.attributes]
    assert times == [step["execution_time"] for step in data["trajectory"]]
    agent = spans[spans.span_kind == "AGENT"].iloc[0]
    stats = data["info"]["model_stats"]
    assert json.loads(agent.attributes) == {
        "api_calls": stats["api_calls"],
        "cost": stats["instance_cost"],
        "tokens_received": stats["tokens_received"],
        "tokens_sent": stats["tokens_sent"],
    }
    assert agent.output_value == data["info"]["submission"]
    assert spans[spans.span_kind == "LLM"].tokens_prompt.isna().all()  # not invented per step


def test_swe_agent_repeated_submit_is_a_run_of_identical_tool_rows(corpus: Path) -> None:
    path = corpus / "swe-agent/trajectories/demonstrations/ctf/crypto/eps.traj"
    spans = frame(import_traces("swe-agent", [path]))
    tools = spans[spans.span_kind == "TOOL"].reset_index(drop=True)
    keys = list(zip(tools.tool_name, tools.tool_args, strict=True))
    runs, position = [], 0
    for key, group in itertools.groupby(keys):
        length = len(list(group))
        runs.append((length, position, key))
        position += length
    run, first, key = max(runs)
    assert run == 4
    assert key == (
        "submit",
        canonical_json({"command": "submit flag{People always make the best exploits.}"}),
    )
    assert list(tools.iteration[first : first + run]) == [10, 11, 12, 13]
    assert list(tools.tool_name[8:]) == ["submit"] * 6  # the last six actions all submit


# Determinism and bad input


@pytest.mark.parametrize(
    ("format", "relative"),
    [
        ("tau-bench", TAU_BENCH),
        ("tau2", "tau2-bench/sierra_gym_gpt-4.1_airline_default_1trial.json"),
        ("swe-agent", "swe-agent/trajectories/demonstrations/ctf/crypto/eps.traj"),
    ],
)
def test_importing_twice_gives_identical_tables(corpus: Path, format: str, relative: str) -> None:
    first = import_traces(format, [corpus / relative])
    second = import_traces(format, [corpus / relative])
    assert first.equals(second)
    assert (
        concat_tables([first]).column("span_id").to_pylist() == second.column("span_id").to_pylist()
    )


TAU_RECORD = {
    "task_id": 1,
    "trial": 0,
    "reward": 1.0,
    "info": {},
    "traj": [{"role": "user", "content": "hi"}],
}
TAU2_SIMULATION = {
    "id": "s1",
    "task_id": "1",
    "trial": 0,
    "messages": [],
    "reward_info": {"reward": 1.0},
}


@pytest.mark.parametrize(
    ("format", "content", "fragments"),
    [
        ("tau-bench", "{not json", ["not JSON", "expected a JSON list"]),
        ("tau-bench", {"task_id": 1}, ["top level is dict", "expected a JSON list"]),
        (
            "tau-bench",
            [TAU_RECORD, {**TAU_RECORD, "reward": None}],
            ["record 1", "'reward'", "expected"],
        ),
        (
            "tau-bench",
            [{k: v for k, v in TAU_RECORD.items() if k != "traj"}],
            ["record 0", "'traj'", "missing"],
        ),
        (
            "tau-bench",
            [{**TAU_RECORD, "traj": [{"role": "user", "content": "a"}, {"content": "b"}]}],
            ["record 0", "message 1", "'role'", "missing"],
        ),
        ("tau2", [], ["top level is list", "Results"]),
        ("tau2", {"info": {}}, ["'simulations'", "missing"]),
        (
            "tau2",
            {"simulations": [TAU2_SIMULATION, {"id": "s2", "task_id": "2"}]},
            ["simulations[1]", "'messages'"],
        ),
        (
            "tau2",
            {
                "simulations": [
                    {
                        **TAU2_SIMULATION,
                        "messages": [{"role": "user", "content": "x", "timestamp": "soon"}],
                    }
                ]
            },
            ["simulations[0]", "message 0", "'timestamp'", "'soon'"],
        ),
        (
            "tau2",
            {"simulations": [{**TAU2_SIMULATION, "reward_info": {"reward": "yes"}}]},
            ["simulations[0]", "'reward'"],
        ),
        ("swe-agent", "", ["not JSON"]),
        ("swe-agent", [1, 2], ["top level is list", "SWE-agent trajectory"]),
        ("swe-agent", {"info": {}}, ["'trajectory'", "missing"]),
        (
            "swe-agent",
            {"trajectory": [{"action": "ls"}, {"action": "ls"}, {"observation": "x"}]},
            ["trajectory[2]", "'action'", "missing"],
        ),
        ("openai-messages", "[1, ", ["not JSON"]),
        ("openai-messages", 3, ["top level is int"]),
        (
            "openai-messages",
            [[{"role": "user", "content": "a"}], [{"content": "b"}]],
            ["conversation 1", "message 0", "'role'"],
        ),
        (
            "openai-messages",
            [{"role": "robot", "content": "a"}],
            ["conversation 0", "message 0", "'robot'"],
        ),
        (
            "openai-messages",
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "tool_calls": [{"id": "c", "function": {}}]},
            ],
            ["message 1", "tool_calls[0]", "'name'"],
        ),
        ("openai-messages", [{"role": "tool", "content": "a"}], ["message 0", "'tool_call_id'"]),
        ("openai-messages", {"session_id": "s"}, ["conversation 0", "'messages'", "missing"]),
        (  # past the column's type: found when the table is built, still named
            "tau-bench",
            [{**TAU_RECORD, "trial": 10**23}],
            ["column 'trial'", "100000000000000000000000 is not int32"],
        ),
        ("tau-bench", [], ["nothing to import"]),
    ],
)
def test_bad_input_names_file_record_and_field(
    tmp_path: Path, format: str, content: Any, fragments: list[str]
) -> None:
    path = tmp_path / "input.json"
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    with pytest.raises(TraceTableError) as caught:
        import_traces(format, [path])
    message = str(caught.value)
    assert message.startswith(str(path)), message
    for fragment in fragments:
        assert fragment in message, message
