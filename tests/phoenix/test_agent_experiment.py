"""A team's agent as a Phoenix experiment, against a real Phoenix server.

A golden recorded through the agent boundary (the plain-openai support agent of
`tests/agents`) is mirrored, then replayed by the command line's `phoenix experiment --agent`
twice: the agent as recorded, and allowed one model call a turn. Each run's trace holds the agent's
replayed turn under Phoenix's task span, and the experiments' scores tell the two apart.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from pathlib import Path
from typing import Any

import pytest

from plangate.ci.cli import main
from plangate.ci.phoenix._server import PhoenixServer
from plangate.replay import SessionRequest, write_dataset
from plangate.replay.agents import AgentSpec, record_agent
from tests.phoenix.sending import INGEST_TIMEOUT

pytestmark = pytest.mark.filterwarnings("ignore::pandas.errors.Pandas4Warning")

AGENT = "python:tests.agents.support_agent:make"
REQUESTS = [
    SessionRequest(
        session_id=f"s{i}",
        requests=("Track the shipment of order O-7003, then tell me the refund policy.",),
        rubrics=({"required_tools": ["track_shipment", "get_refund_policy"]},),
    )
    for i in range(3)
]


def test_an_agent_replays_as_an_experiment_with_its_turns_in_the_runs_traces(
    phoenix: PhoenixServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from phoenix.client import Client
    from phoenix.client.types.spans import SpanQuery

    recorded = record_agent(
        REQUESTS, name="agent-exp", agent=AgentSpec.of(AGENT), model="sim:diligent"
    )
    golden = write_dataset(asyncio.run(recorded), tmp_path / "golden")
    limited = tmp_path / "one-call.toml"
    limited.write_text(f'agent = "{AGENT}"\n[kwargs]\nmax_calls = 1\n')
    token = secrets.token_hex(3)
    common = [str(golden), "--phoenix-url", phoenix.url, "--name", f"agent-{token}"]
    assert main(["phoenix", "dataset", *common, "--phoenix-project", f"agent-{token}"]) == 0
    code = main(
        ["phoenix", "experiment", *common, "--agent", AGENT, "--agent", str(limited),
         "--model", "sim:diligent", "--evaluator", "task_completion"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"{AGENT} · sim:diligent: 3 runs, 0 failed" in out
    assert "task_completion 1.000 (3/3 passed)" in out
    assert "(0/3 passed)" in out.split("max_calls")[1]  # one model call: not both tools

    client = Client(base_url=phoenix.url)
    listed = client.experiments.list(dataset_id=_dataset_id(client, f"agent-{token}"))
    stored = [client.experiments.get_experiment(experiment_id=e["id"]) for e in listed]
    (project,) = [e["project_name"] for e in stored if e["experiment_metadata"]["variant"] == AGENT]
    deadline = time.monotonic() + INGEST_TIMEOUT  # as long as ingest may take under load
    while True:
        tools = client.spans.get_spans_dataframe(
            query=SpanQuery().where("span_kind == 'TOOL'"), project_identifier=project
        )
        if len(tools) >= 6 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert sorted(tools["name"]) == sorted(["tool.get_refund_policy", "tool.track_shipment"] * 3)
    assert tools["parent_id"].notna().all()
    assert all(s.startswith("agent-exp:agent:") for s in tools["attributes.session.id"])


def _dataset_id(client: Any, name: str) -> str:
    return str(client.datasets.get_dataset(dataset=name).id)
