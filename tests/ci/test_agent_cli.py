"""`plangate record --agent` and `plangate replay` of a team's agent, through the real CLI.

The agent is the 40-line `openai`-client script of README's "Gate your own agent", run as
`command:`; it is read from the README itself, so the walk-through stays true.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.helpers import plangate, readme_agent


@pytest.fixture
def requests(tmp_path: Path) -> Path:
    path = tmp_path / "requests.json"
    sessions = [
        {
            "session_id": f"walk-{i}",
            "turns": [
                {
                    "request": "Track the shipment of order O-7003, then tell me the refund policy.",
                    "rubric": {"required_tools": ["track_shipment", "get_refund_policy"]},
                }
            ],
        }
        for i in range(5)
    ]
    path.write_text(json.dumps(sessions), encoding="utf-8")
    return path


def test_the_readme_agent_is_recorded_replayed_and_gated(tmp_path: Path, requests: Path) -> None:
    agent = f"command:{sys.executable} {readme_agent(tmp_path)}"
    golden = tmp_path / "golden"
    done = plangate(
        "record", "--agent", agent, "--model", "sim:diligent", "--domain", "support",
        "--requests", str(requests), "-o", str(golden),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "5 sessions, 5 turns" in done.stdout

    done = plangate("replay", str(golden), "--json")  # the recorded agent, strict cassette
    assert done.returncode == 0, done.stdout + done.stderr
    assert [r["identical"] for r in json.loads(done.stdout)] == [True] * 5

    gate = tmp_path / "gate.toml"
    gate.write_text(
        f"""
[gate]
repeats = 1
[[datasets]]
path = "golden"
[baseline]
agent = "{agent}"
model = "sim:diligent"
[candidate]
agent = "{agent}"
model = "sim:diligent"
env = {{ MAX_CALLS = "1" }}
[evaluators.task_completion]
""",
        encoding="utf-8",
    )
    done = plangate("gate", str(gate), "-o", str(tmp_path / "out"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "REGRESSION" in done.stdout


def test_replay_with_a_changed_agent_shows_where_it_diverged(
    tmp_path: Path, requests: Path
) -> None:
    agent = f"command:{sys.executable} {readme_agent(tmp_path)}"
    golden = tmp_path / "golden"
    assert plangate(
        "record", "--agent", agent, "--model", "sim:diligent", "--domain", "support",
        "--requests", str(requests), "-o", str(golden),
    ).returncode == 0  # fmt: skip
    done = plangate(
        "replay", str(golden), "--session", "walk-0", "--agent", agent,
        "--agent-env", "MAX_CALLS=1",
    )  # fmt: skip
    assert done.returncode == 1
    assert "walk-0 turn 0: diverged at step 1" in done.stdout
    assert "call get_refund_policy {}" in done.stdout  # recorded, and missing from the replay


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        (
            ["--variant", "alyx", "--agent", "python:x:y"],
            "give --variant (plangate's agent) or --agent",
        ),
        ([], "record needs --variant NAME (plangate's agent) or --agent SPEC (yours)"),
        (
            ["--agent", "python:x:y", "--agent-env", "NOEQUALS"],
            "--agent-env 'NOEQUALS': write NAME=VALUE",
        ),
        (["--agent-env", "A=1"], "--agent-env is a setting of --agent; give --agent SPEC"),
        (["--agent", "pascal:agent"], "start it with python:, command: or http:"),
    ],
)
def test_bad_agent_flags_exit_2_with_one_line(
    tmp_path: Path, requests: Path, extra: list[str], problem: str
) -> None:
    done = plangate(
        "record", "--model", "sim:diligent", "--requests", str(requests), "-o",
        str(tmp_path / "g"), *extra,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert problem in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
