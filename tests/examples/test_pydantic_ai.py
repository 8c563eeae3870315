"""The support desk on pydantic-ai, through plangate's agent boundary.

Recorded once (a golden of ten sessions, twenty turns, `sim:diligent`), then: the trajectories
make the calls the rubrics name; every turn replays identically with the strict cassette, and
with a fresh simulated model as the gate runs it; the gate on the real command line, with
`sim:forgetful` on both sides, catches the task list turned off on exactly the turns whose work
outlasts the model's window, and passes the baseline against itself; a low request limit stops
the turns that need more model requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from plangate.replay import GoldenDataset, SessionRequest, read_dataset, write_dataset
from plangate.replay.agents import AgentSpec, record_agent
from tests.examples.sessions import (
    SESSIONS,
    SOME,
    TURNS,
    assert_caught,
    check_trajectories,
    failed_turns,
    gate,
    needs_over,
    regressed,
    replay_all,
    some,
    some_sessions,
    work_over,
)

AGENT = "python:examples.support_pydantic_ai.agent:make"


def record(
    agent: AgentSpec, model: str = "sim:diligent", sessions: list[SessionRequest] = SESSIONS
) -> GoldenDataset:
    return asyncio.run(record_agent(sessions, name="desk-pydantic-ai", agent=agent, model=model))


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("pydantic-ai") / "golden"
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
    results = asyncio.run(replay_all(read_dataset(golden), AgentSpec.of(AGENT), "sim:diligent"))
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * len(TURNS)


def test_the_gate_catches_the_task_list_turned_off(tmp_path: Path, golden: Path) -> None:
    verdict = gate(tmp_path, golden, AGENT, "sim:forgetful", "kwargs = { task_list = false }")
    # sim:forgetful makes three desk calls; then the request has left its window. Without the
    # pinned list it believes it is done: exactly the turns whose tasks need more calls.
    expected = work_over(3)
    assert len(expected) == 7
    assert_caught(verdict, expected)


def test_the_baseline_against_itself_passes(tmp_path: Path, golden: Path) -> None:
    verdict = gate(tmp_path, golden, AGENT, "sim:forgetful", "", sessions=SOME)
    assert verdict["exit"] == 0, verdict["output"]
    assert "PASS" in verdict["output"]
    assert regressed(verdict) == set()


@pytest.mark.parametrize(("limit", "failing"), [(30, set()), (6, some(needs_over(6)))])
def test_a_low_request_limit_stops_the_longer_turns(
    limit: int, failing: set[tuple[str, int]]
) -> None:
    agent = AgentSpec.of(AGENT, {"kwargs": {"request_limit": limit}})
    assert failed_turns(record(agent, sessions=some_sessions())) == failing
