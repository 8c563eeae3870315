"""The support desk in Node, through plangate's agent boundary and its MCP gateway.

The agent (`examples/support_node/agent.js`) is installed with `npm ci` from its lockfile and
run as a `command:`. Its model is the official `openai` client at plangate's endpoint; its
tools come over MCP (the official client) from the server plangate names in
`SUPPORT_MCP_URL`: plangate's gateway in front of the support desk (`plangate:support`).

Recorded once (a golden of ten sessions, twenty turns, `sim:diligent`), then: the trajectories
make the calls the rubrics name, and the tool cassette holds every desk call the agent made
over MCP; every turn replays identically with the strict cassette (its tool calls answered from
the cassette), and with a fresh simulated model as the gate runs it; the gate on the real
command line catches a lower `MAX_STEPS` on exactly the turns that need more model calls, and
the task list turned off on exactly the turns whose work outlasts `sim:forgetful`'s window;
the baseline against itself passes.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from examples.support_desk import instructions
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
    needs_over,
    regressed,
    replay_all,
    some,
    some_sessions,
    why_stopped,
    work_over,
)

MISSING = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
if MISSING:
    pytest.skip(
        f"the Node support desk needs {' and '.join(MISSING)} on PATH (Node 20 or later)",
        allow_module_level=True,
    )

FOLDER = REPO / "examples" / "support_node"
AGENT = f"command:node {FOLDER / 'agent.js'}"
MCP = {"SUPPORT_MCP_URL": "plangate:support"}
SHARED = 'mcp = { SUPPORT_MCP_URL = "plangate:support" }'
"""The gate sides' `mcp` table: both sides get their tools through plangate's gateway."""
TODO = frozenset({"todo_write", "todo_update"})
"""The agent's own task list tools: run in the agent, never over MCP."""


def spec(**env: str) -> AgentSpec:
    return AgentSpec.of(AGENT, {"mcp": MCP, "env": env})


def record(
    agent: AgentSpec, model: str = "sim:diligent", sessions: list[SessionRequest] = SESSIONS
) -> GoldenDataset:
    return asyncio.run(record_agent(sessions, name="desk-node", agent=agent, model=model))


@pytest.fixture(scope="module", autouse=True)
def installed() -> None:
    """The agent's packages, exactly as its lockfile pins them."""
    done = subprocess.run(
        ["npm", "ci", "--no-audit", "--no-fund"],
        cwd=FOLDER,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"npm ci in {FOLDER} failed:\n{done.stdout}{done.stderr}"


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("node") / "golden"
    return write_dataset(record(spec()), folder)


def test_the_recorded_trajectories_make_the_requested_calls(golden: Path) -> None:
    dataset = read_dataset(golden)
    check_trajectories(dataset)
    # The agent sends the Python examples' system prompt (the desk's own, and the task list's),
    # so the simulated models behave the same, then the pinned plan.
    (first, *_) = dataset.exchanges("desk-00", 0)
    assert first.request[0] == {"role": "system", "content": instructions(task_list=True)}
    assert first.request[1]["role"] == "system"
    assert first.request[1]["content"].startswith("# Plan")


def test_the_tool_cassette_holds_the_desk_calls_made_over_mcp(golden: Path) -> None:
    dataset = read_dataset(golden)
    for row in dataset.turns.to_pylist():
        session, turn = row["session_id"], row["turn_index"]
        desk = [call for call in calls(row["steps"]) if call[0] not in TODO]
        recorded = dataset.tool_records(session, turn)
        assert [(r.tool_name, r.tool_args) for r in recorded] == desk, (session, turn)
        assert all(r.status == "ok" for r in recorded)
    # The gateway keeps one desk a session: two sessions refund the same blender, each once.
    refunds = [
        json.loads(r.result)["refund_id"]
        for session in ("desk-01", "desk-05")
        for r in dataset.tool_records(session)
        if r.tool_name == "refund_item"
    ]
    assert refunds == ["R-001", "R-001"]


def calls(steps: str) -> list[tuple[str, str]]:
    """The tool calls of a turn's steps (`call NAME ARGUMENTS -> STATUS`): names, arguments."""
    made = [s.removeprefix("call ") for s in json.loads(steps) if s.startswith("call ")]
    made = [c.rsplit(" -> ", 1)[0] for c in made]
    return [(name, arguments) for name, _, arguments in (c.partition(" ") for c in made)]


def test_every_turn_replays_identically_with_the_strict_cassette(golden: Path) -> None:
    dataset = read_dataset(golden)
    results = asyncio.run(replay_all(dataset, spec()))
    assert len(results) == dataset.turns.num_rows == len(TURNS) == 20
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * len(TURNS), why_stopped(
        results
    )
    assert all(r.stop_reason == "finished" for r in results)


def test_a_fresh_simulated_model_gives_the_recorded_trajectories(golden: Path) -> None:
    # What the gate does: each turn alone, its history restored, a new simulated model whose
    # call ids continue the session's; the desk calls answered from the tool cassette.
    results = asyncio.run(replay_all(read_dataset(golden), spec(), "sim:diligent"))
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * len(TURNS), why_stopped(
        results
    )


def test_the_gate_catches_a_lower_max_steps(tmp_path: Path, golden: Path) -> None:
    verdict = gate(
        tmp_path, golden, AGENT, "sim:diligent", 'env = { MAX_STEPS = "6" }', both=SHARED
    )
    # Exactly the turns whose desk calls a diligent model with the task list cannot all make
    # in 6 model calls: every request of three tasks or more and one of two.
    expected = needs_over(6)
    assert len(expected) == 8
    assert_caught(verdict, expected)


def test_the_gate_catches_the_task_list_turned_off(tmp_path: Path, golden: Path) -> None:
    verdict = gate(
        tmp_path, golden, AGENT, "sim:forgetful", 'env = { TASK_LIST = "0" }', both=SHARED
    )
    # sim:forgetful makes three desk calls; then the request has left its window. Without the
    # pinned list it believes it is done: exactly the turns whose tasks need more calls.
    expected = work_over(3)
    assert len(expected) == 7
    assert_caught(verdict, expected)


@pytest.mark.parametrize("model", ["sim:diligent", "sim:forgetful"])
def test_the_baseline_against_itself_passes(tmp_path: Path, golden: Path, model: str) -> None:
    verdict = gate(tmp_path, golden, AGENT, model, "", sessions=SOME, both=SHARED)
    assert verdict["exit"] == 0, verdict["output"]
    assert "PASS" in verdict["output"]
    assert regressed(verdict) == set()


def test_a_turn_stopped_at_max_steps_reports_its_own_messages() -> None:
    dataset = record(spec(MAX_STEPS="6"), sessions=some_sessions())
    assert failed_turns(dataset) == some(needs_over(6))
    # The endpoint never saw the last tool results nor the answer: the agent gave them, so the
    # next turn's history is whole, and the turn after desk-04's stopped one still finishes.
    stopped = dataset.turn("desk-04", 0)
    messages = json.loads(stopped["messages"])
    assert messages[0] == {"role": "user", "content": stopped["request"]}
    assert [m["role"] for m in messages[-2:]] == ["tool", "assistant"]
    assert messages[-1]["content"] == stopped["answer"] == "I could not finish."
    assert ("desk-04", 1) not in failed_turns(dataset)
    assert all(row["stop_reason"] == "finished" for row in dataset.turns.to_pylist())
