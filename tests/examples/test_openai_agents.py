"""The support desk on the OpenAI Agents SDK, through plangate's agent boundary.

Recorded once (a golden of ten sessions, twenty turns, `sim:diligent`), then: the trajectories
make the calls the rubrics name; every turn replays identically with the strict cassette, and
with a fresh simulated model as the gate runs it; the same agent runs as a `command:`; the gate
on the real command line catches a lower `max_turns` on exactly the turns that need more model
calls, and passes the baseline against itself; the task list decides whether `sim:forgetful`
finishes.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from plangate.replay import GoldenDataset, SessionRequest, read_dataset, write_dataset
from plangate.replay.agents import AgentSpec, record_agent
from tests.conftest import REPO
from tests.examples.sessions import (
    SESSIONS,
    SOME,
    TURNS,
    assert_caught,
    check_trajectories,
    failed_turns,
    gate,
    keys,
    needs_over,
    regressed,
    replay_all,
    some,
    some_sessions,
    work_over,
)

AGENT = "python:examples.support_openai_agents.agent:make"
COMMAND = f"command:{sys.executable} -m examples.support_openai_agents"


def record(
    agent: AgentSpec, model: str = "sim:diligent", sessions: list[SessionRequest] = SESSIONS
) -> GoldenDataset:
    return asyncio.run(record_agent(sessions, name="desk-agents-sdk", agent=agent, model=model))


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("agents-sdk") / "golden"
    return write_dataset(record(AgentSpec.of(AGENT)), folder)


def test_the_recorded_trajectories_make_the_requested_calls(golden: Path) -> None:
    check_trajectories(read_dataset(golden))


def test_every_turn_replays_identically_with_the_strict_cassette(golden: Path) -> None:
    dataset = read_dataset(golden)
    results = asyncio.run(replay_all(dataset, AgentSpec.of(AGENT)))
    assert len(results) == dataset.turns.num_rows == len(TURNS) == 20
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * len(TURNS)
    assert all(r.stop_reason == "finished" for r in results)


def test_a_fresh_simulated_model_gives_the_recorded_trajectories(golden: Path) -> None:
    # What the gate does: each turn alone, its history restored, a new simulated model (whose
    # call ids start again at call_1: the agent renames the history's, see its docstring).
    results = asyncio.run(replay_all(read_dataset(golden), AgentSpec.of(AGENT), "sim:diligent"))
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * len(TURNS)


def test_the_agent_runs_as_a_command_and_replays(golden: Path) -> None:
    agent = AgentSpec.of(COMMAND, {"env": {"PYTHONPATH": str(REPO)}})
    dataset = record(agent, sessions=SESSIONS[2:3])
    # The same agent, in process or as a process: the same trajectories.
    in_process = [read_dataset(golden).turn("desk-02", k)["steps"] for k in (0, 1)]
    assert [t["steps"] for t in dataset.turns.to_pylist()] == in_process
    results = asyncio.run(replay_all(dataset, agent, jobs=1))  # one process: one start-up
    assert keys(results) == [("desk-02", 0), ("desk-02", 1)]
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 2


def test_the_gate_catches_a_lower_max_turns(tmp_path: Path, golden: Path) -> None:
    verdict = gate(tmp_path, golden, AGENT, "sim:diligent", "kwargs = { max_turns = 6 }")
    # Exactly the turns whose desk calls a diligent model cannot all make in 6 model calls:
    # every request of three tasks or more and one of two; not the other two-task ones.
    expected = needs_over(6)
    assert len(expected) == 8
    assert_caught(verdict, expected)


def test_the_baseline_against_itself_passes(tmp_path: Path, golden: Path) -> None:
    verdict = gate(tmp_path, golden, AGENT, "sim:diligent", "", sessions=SOME)
    assert verdict["exit"] == 0, verdict["output"]
    assert "PASS" in verdict["output"]
    assert regressed(verdict) == set()


@pytest.mark.parametrize(("task_list", "failing"), [(True, set()), (False, some(work_over(3)))])
def test_the_task_list_keeps_a_forgetful_model_on_the_request(
    task_list: bool, failing: set[tuple[str, int]]
) -> None:
    agent = AgentSpec.of(AGENT, {"kwargs": {"task_list": task_list}})
    dataset = record(agent, model="sim:forgetful", sessions=some_sessions())
    assert failed_turns(dataset) == failing


def test_a_turn_stopped_at_max_turns_reports_its_own_messages() -> None:
    agent = AgentSpec.of(AGENT, {"kwargs": {"max_turns": 6}})
    dataset = record(agent, sessions=some_sessions())
    assert failed_turns(dataset) == some(needs_over(6))
    # The endpoint never saw the last tool results nor the answer: the agent gave them, so the
    # next turn's history is whole (the turn after desk-04's stopped one still finishes).
    messages = json.loads(dataset.turn("desk-04", 0)["messages"])
    assert [m["role"] for m in messages[-2:]] == ["tool", "assistant"]
    assert messages[-1]["content"] == dataset.turn("desk-04", 0)["answer"]
    assert messages[-1]["content"].startswith("I stopped before finishing: Max turns (6)")
