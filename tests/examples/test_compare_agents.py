"""`plangate compare` with a team's agents as sides, named on the command line.

A side is an agent spec, a `.toml` file naming an agent and its settings, or one of plangate's
harness variants: the pydantic-ai support desk with and without its task list, compared on a
few recorded sessions with `sim:forgetful`, shows exactly the turns the task list saves.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from plangate.replay import write_dataset
from plangate.replay.agents import AgentSpec, record_agent
from tests.conftest import REPO
from tests.examples.sessions import some, some_sessions, work_over
from tests.helpers import plangate

AGENT = "python:examples.support_pydantic_ai.agent:make"


def test_agents_side_by_side_and_the_regression_counted(tmp_path: Path) -> None:
    recorded = record_agent(
        some_sessions(), name="desk-compare", agent=AgentSpec.of(AGENT), model="sim:diligent"
    )
    golden = write_dataset(asyncio.run(recorded), tmp_path / "golden")
    gate = tmp_path / "gate.toml"
    gate.write_text(
        f'[gate]\nrepeats = 1\n[[datasets]]\npath = "{golden}"\n'
        f'[baseline]\nagent = "{AGENT}"\n[candidate]\nagent = "{AGENT}"\n'
        "[evaluators.task_completion]\n",
        encoding="utf-8",
    )
    without = tmp_path / "no-task-list.toml"
    without.write_text(f'agent = "{AGENT}"\n[kwargs]\ntask_list = false\n', encoding="utf-8")
    done = plangate(
        "compare", AGENT, str(without), "--gate", str(gate), "--model", "sim:forgetful",
        "--json", cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    label = f'{AGENT} {{"kwargs": {{"task_list": false}}}}'
    assert result["variants"] == [AGENT, label]
    base, changed = result["scores"]
    assert base["pass_rate"]["mean"] == 1.0 and base["change"] is None
    # sim:forgetful forgets the request after three desk calls unless the list is pinned.
    expected = some(work_over(3))
    assert len(expected) >= 2
    assert (changed["worse"], changed["better"]) == (len(expected), 0)
    assert result["cases"] == sum(len(s.requests) for s in some_sessions())

    bad = tmp_path / "bad.toml"
    bad.write_text(f'agent = "{AGENT}"\nkwarg = {{ task_list = false }}\n', encoding="utf-8")
    refused = plangate("compare", AGENT, str(bad), "--gate", str(gate), cwd=REPO)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert f"{bad}: unknown key 'kwarg'; allowed: agent, args, env, kwargs" in refused.stderr
    twice = plangate("compare", AGENT, AGENT, "--gate", str(gate), cwd=REPO)
    assert twice.returncode == 2 and f"{AGENT!r} is given twice" in twice.stderr
