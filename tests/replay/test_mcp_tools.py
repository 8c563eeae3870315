"""Tools over MCP, recorded and replayed through plangate's gateway.

The agent (`tests/agents/mcp_agent.py`) gets its only tools from an MCP server, a team's own
(`tests/agents/desk_mcp_server.py`, over streamable HTTP or stdio) or plangate's demo desk
(`plangate:support`). plangate points it at its gateway; recording runs the calls at the
server and keeps them in the tool cassette, with the server's tool list; a replay serves both
from the recording, so it works with the server stopped, and never calls it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import uvicorn

from plangate.replay import GoldenDataset, SessionRequest, read_dataset, replay_turn, write_dataset
from plangate.replay.agents import AgentDriver, AgentError, AgentSpec, record_agent
from plangate.replay.endpoint._mcp import LIST
from tests.agents import desk_mcp_server
from tests.conftest import REPO
from tests.helpers import plangate

AGENT = "python:tests.agents.mcp_agent:make"
REQUESTS = [
    SessionRequest(
        session_id=f"m{i}",
        requests=("Where is order O-7003? Track the shipment.", "What is the refund policy?"),
        rubrics=({"required_tools": ["track_shipment"]}, {"required_tools": ["get_refund_policy"]}),
    )
    for i in range(3)
]


@dataclasses.dataclass
class Served:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


@pytest.fixture
def desk_server() -> Iterator[Served]:
    """The team's MCP server over streamable HTTP, in this process (its calls are counted)."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(desk_mcp_server.app(), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listening]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    served = Served(f"http://127.0.0.1:{port}/mcp", server, thread)
    desk_mcp_server.CALLS.clear()
    yield served
    served.stop()


def agent(source: str) -> AgentSpec:
    return AgentSpec.of(AGENT, {"mcp": {"DESK_MCP_URL": source}})


def record(spec: AgentSpec) -> GoldenDataset:
    return asyncio.run(record_agent(REQUESTS, name="mcp", agent=spec, model="sim:diligent"))


async def _replay_all(
    dataset: GoldenDataset, spec: AgentSpec, keys: list[tuple[str, int]] | None = None, **kw: Any
) -> list[Any]:
    keys = keys or [(t["session_id"], t["turn_index"]) for t in dataset.turns.to_pylist()]
    async with AgentDriver(spec, jobs=2) as driver:
        return list(
            await asyncio.gather(*(replay_turn(dataset, s, k, agent=driver, **kw) for s, k in keys))
        )


def calls(dataset: GoldenDataset) -> list[tuple[str, Any, str]]:
    return [
        (r["tool_name"], json.loads(r["tool_args"]), r["status"])
        for r in dataset.tool_cassette.to_pylist()
    ]


def tool_rows(table: pa.Table) -> list[str]:
    return [r["tool_name"] for r in table.to_pylist() if r["span_kind"] == "TOOL"]


def test_a_replay_works_with_the_agents_own_server_stopped(
    desk_server: Served, tmp_path: Path
) -> None:
    spec = agent(desk_server.url)
    golden = write_dataset(record(spec), tmp_path / "golden")
    dataset = read_dataset(golden)
    recorded = calls(dataset)
    work = [c for c in recorded if c[0] != LIST]
    assert (
        work
        == [
            ("track_shipment", {"order_id": "O-7003"}, "ok"),
            ("get_refund_policy", {}, "ok"),
        ]
        * 3
    )
    assert any(c[0] == LIST for c in recorded)  # the server's tool list, recorded with them
    assert desk_mcp_server.CALLS == {"track_shipment": 3, "get_refund_policy": 3}
    rows = dataset.tool_cassette.to_pylist()
    # A result with structured content is kept whole (text parts alone are kept as text).
    kept = json.loads(next(r["result"] for r in rows if r["tool_name"] == "track_shipment"))
    assert kept["mcp_result"]["structuredContent"] == desk_mcp_server.ORDERS["O-7003"]
    policy = next(r["result"] for r in rows if r["tool_name"] == "get_refund_policy")
    assert "30 days" in policy
    # The MCP calls are the trace table's TOOL rows, though the agent sends no spans.
    assert sorted(tool_rows(dataset.spans)) == sorted(["track_shipment", "get_refund_policy"] * 3)

    desk_server.stop()
    desk_mcp_server.CALLS.clear()
    results = asyncio.run(_replay_all(dataset, spec))
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 6
    assert desk_mcp_server.CALLS == {}  # every result and the tool list came from the cassette
    replayed = [name for r in results for name in tool_rows(r.table)]
    assert sorted(replayed) == sorted(["track_shipment", "get_refund_policy"] * 3)


def test_an_unrecorded_call_gets_the_not_recorded_result(
    desk_server: Served, tmp_path: Path
) -> None:
    spec = agent(desk_server.url)
    dataset = record(spec)
    changed = [
        {**r, "tool_args": json.dumps({"order_id": "O-0000"})}
        if r["tool_name"] == "track_shipment"
        else r
        for r in dataset.tool_cassette.to_pylist()
    ]
    cassette = pa.Table.from_pylist(changed, schema=dataset.tool_cassette.schema)
    tampered = dataclasses.replace(dataset, tool_cassette=cassette)
    desk_server.stop()
    desk_mcp_server.CALLS.clear()
    (result,) = asyncio.run(_replay_all(tampered, spec, [("m0", 0)], model="cassette-lenient"))
    outputs = [r["tool_output"] for r in result.table.to_pylist() if r["span_kind"] == "TOOL"]
    assert outputs and outputs[0].startswith("Not recorded: the cassette has no result for")
    assert desk_mcp_server.CALLS == {}


def test_a_server_over_stdio_is_started_recorded_and_not_needed_again() -> None:
    source = f"stdio:{sys.executable} -m tests.agents.desk_mcp_server"
    dataset = record(agent(source))
    assert [c[0] for c in calls(dataset) if c[0] != LIST] == [
        "track_shipment",
        "get_refund_policy",
    ] * 3
    missing = AgentSpec.of(AGENT, {"mcp": {"DESK_MCP_URL": "stdio:/no/such/server"}})
    results = asyncio.run(_replay_all(dataset, missing))  # the server is never started
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 6


def test_plangates_own_desk_over_mcp() -> None:
    dataset = record(agent("plangate:support"))
    assert [c[0] for c in calls(dataset)] == ["track_shipment", "get_refund_policy"] * 3
    results = asyncio.run(_replay_all(dataset, agent("plangate:support")))
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 6


def test_bad_sources_are_named(tmp_path: Path) -> None:
    with pytest.raises(AgentError, match="mcp must be a table of strings"):
        AgentSpec.of(AGENT, {"mcp": ["plangate:support"]})
    with pytest.raises(Exception, match=r"MCP source 'ftp://x': give plangate:DOMAIN"):
        AgentSpec.of(AGENT, {"mcp": {"DESK_MCP_URL": "ftp://x"}})
    done = plangate(
        "record", "--agent", AGENT, "--agent-mcp", "DESK_MCP_URL", "--requests", "x.json",
        "--model", "sim:diligent", "-o", str(tmp_path / "golden"), cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 2 and "--agent-mcp 'DESK_MCP_URL': write NAME=VALUE" in done.stderr
    assert "Traceback" not in done.stderr
