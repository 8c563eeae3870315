"""The gate on a team's own agent: two variants of it, compared exactly like plangate's own.

The agent is not plangate's (it calls the real `openai` client); its golden is recorded through
the agent boundary, and each side of the gate is the agent with its variant settings. The
candidate gives up after one model call, so it "finishes" after the first of two tasks: the
gate catches it; the baseline against itself passes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from plangate.ci.gate import GateFileError, load_gate
from plangate.replay import SessionRequest, write_dataset
from plangate.replay.agents import AgentSpec, record_agent
from tests.conftest import REPO
from tests.helpers import plangate

AGENT = "python:tests.agents.support_agent:make"
SESSIONS = [
    SessionRequest(
        session_id=f"desk-{i:02d}",
        requests=(
            "Track the shipment of order O-7003, then tell me the refund policy.",
            "Where is order O-7003? Track the shipment.",
        ),
        rubrics=(
            {"required_tools": ["track_shipment", "get_refund_policy"]},
            {"required_tools": ["track_shipment"]},
        ),
    )
    for i in range(6)
]


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dataset = asyncio.run(
        record_agent(SESSIONS, name="desk", agent=AgentSpec.of(AGENT), model="sim:diligent")
    )
    return write_dataset(dataset, tmp_path_factory.mktemp("agents") / "desk")


def gate_file(folder: Path, golden: Path, candidate: str) -> Path:
    path = folder / "gate.toml"
    path.write_text(
        f"""
[gate]
repeats = 2
[[datasets]]
path = "{golden}"
[baseline]
agent = "{AGENT}"
model = "sim:diligent"
[candidate]
agent = "{AGENT}"
model = "sim:diligent"
{candidate}
[evaluators.task_completion]
[evaluators.tool_call_loops]
""",
        encoding="utf-8",
    )
    return path


def test_the_gate_catches_a_regression_in_a_teams_agent(tmp_path: Path, golden: Path) -> None:
    gate = gate_file(tmp_path, golden, "kwargs = { max_calls = 1 }")
    done = plangate("gate", str(gate), "-o", str(tmp_path / "out"), cwd=REPO)
    assert done.returncode == 1, done.stdout + done.stderr
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text(encoding="utf-8"))
    (completion,) = [e for e in verdict["evaluators"] if e["evaluator"] == "task_completion"]
    assert completion["failed"] is True
    assert completion["regressed"] == len(SESSIONS)  # every two-task turn, and only those
    regressed = [
        c
        for c in verdict["cases"]
        if c["evaluator"] == "task_completion" and c["status"] == "regressed"
    ]
    assert {c["turn_index"] for c in regressed} == {0}


def test_a_teams_agent_against_itself_passes(tmp_path: Path, golden: Path) -> None:
    done = plangate(
        "gate", str(gate_file(tmp_path, golden, "")), "-o", str(tmp_path / "out"), cwd=REPO
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS" in done.stdout


def test_spans_that_lost_attributes_at_the_agents_sdk_are_a_warning(
    tmp_path: Path, golden: Path
) -> None:
    """The candidate's SDK keeps 3 attributes a span: its tool spans (4) lose one each."""
    gate = gate_file(tmp_path, golden, "kwargs = { traced = true, attribute_limit = 3 }")
    done = plangate("gate", str(gate), "-o", str(tmp_path / "out"), cwd=REPO)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    verdict = json.loads((tmp_path / "out" / "verdict.json").read_text(encoding="utf-8"))
    [warning] = [w for w in verdict["warnings"] if "lost attributes" in w]
    assert warning.startswith("candidate repeat 0: ")
    assert "otel.dropped_attributes_count" in warning and "SpanLimits" in warning
    assert "lost attributes" in done.stdout  # the console shows it too


@pytest.mark.parametrize(
    ("side", "problem"),
    [
        ('agent = "ruby:x"', "candidate: agent 'ruby:x': start it with python:, command: or http:"),
        (
            'variant = "alyx"\nagent = "python:a:b"',
            "candidate has both variant and agent; give one",
        ),
        (
            'variant = "alyx"\nenv = { A = "1" }',
            "candidate.env is an agent's setting; give candidate.agent",
        ),
        ('agent = "command:x"\nenv = { A = 1 }', "agent env must be a table of strings"),
        ('agent = "command:x"\nkwargs = 3', "agent kwargs must be a table"),
    ],
)
def test_a_bad_agent_side_is_named(tmp_path: Path, side: str, problem: str) -> None:
    path = tmp_path / "gate.toml"
    path.write_text(
        f'[[datasets]]\npath = "d"\n[baseline]\nvariant = "alyx"\n[candidate]\n{side}\n',
        encoding="utf-8",
    )
    with pytest.raises(GateFileError, match=problem):
        load_gate(path)
