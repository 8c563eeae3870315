"""Hermetic tools: a Python agent's function tools recorded into the cassette, replayed from it.

The agents here wrap their tools with `plangate.replay.agents.hermetic`, and their tools count
every real run: recording runs them and keeps every result in the golden's tool cassette;
replaying from the cassette answers every call from it and runs none of them.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from plangate.harness import ScriptedModel
from plangate.replay import (
    GoldenDataset,
    SessionRequest,
    ToolRecord,
    read_dataset,
    replay_turn,
    write_dataset,
)
from plangate.replay.agents import (
    TOOLS_URL_ENV,
    AgentDriver,
    AgentSpec,
    ReplayedToolError,
    TurnInput,
    hermetic,
    record_agent,
)
from plangate.replay.endpoint import CassetteTools, ModelEndpoint, ToolAnswer
from tests.agents import hermetic_agent
from tests.agents.hermetic_agent import CALLS, RESULTS

AGENT = "python:tests.agents.hermetic_agent:make"
TRACK = "Where is order O-7003? Track the shipment."
POLICY = "What is the refund policy?"
REQUESTS = [
    SessionRequest(session_id=f"s{i}", requests=(TRACK, POLICY) if i < 2 else (TRACK,))
    for i in range(3)
]
KEYS = [("s0", 0), ("s0", 1), ("s1", 0), ("s1", 1), ("s2", 0)]
TRACKED = {"carrier": "UPS", "status": "in transit", "eta": "2026-03-14"}


@pytest.fixture(autouse=True)
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fresh counts, and no tools URL from the environment."""
    monkeypatch.delenv(TOOLS_URL_ENV, raising=False)
    CALLS.clear()
    RESULTS.clear()
    yield


async def record(agent: AgentSpec, requests: Sequence[SessionRequest] = REQUESTS) -> GoldenDataset:
    return await record_agent(
        requests, name="hermetic", agent=agent, model="sim:diligent", domain="support", jobs=2
    )


async def replay(
    dataset: GoldenDataset, agent: AgentSpec, keys: Sequence[tuple[str, int]], **kw: Any
) -> list[Any]:
    async with AgentDriver(agent, jobs=2) as driver:
        return [await replay_turn(dataset, s, k, agent=driver, **kw) for s, k in keys]


def cassette_rows(dataset: GoldenDataset) -> list[tuple[Any, ...]]:
    keys = ("session_id", "turn_index", "position", "tool_name", "tool_args", "status")
    rows = sorted(dataset.tool_cassette.to_pylist(), key=lambda r: [r[k] for k in keys[:3]])
    return [(*(r[k] for k in keys), r["result"], r["error_type"]) for r in rows]


def test_without_plangate_the_wrapper_calls_the_function_and_keeps_its_face() -> None:
    seen: list[str] = []

    def track(order_id: str, verbose: bool = False) -> dict[str, str]:
        """Where an order is."""
        seen.append(order_id)
        return {"order_id": order_id}

    async def policy() -> str:
        """The refund rules."""
        seen.append("policy")
        return "30 days"

    wrapped, wrapped_async = hermetic(track), hermetic(name="refund_policy")(policy)
    assert wrapped("O-1") == {"order_id": "O-1"}
    assert asyncio.run(wrapped_async()) == "30 days"
    assert seen == ["O-1", "policy"]
    # A framework reads the same schema: name, docstring, signature, sync or async.
    assert (wrapped.__name__, wrapped.__doc__) == ("track", "Where an order is.")
    assert inspect.signature(wrapped) == inspect.signature(track)
    assert inspect.iscoroutinefunction(wrapped_async)
    assert not inspect.iscoroutinefunction(wrapped)


async def test_recorded_tools_replay_from_the_cassette_and_never_run(tmp_path: Path) -> None:
    dataset = await record(AgentSpec.of(AGENT))
    assert [t["stop_reason"] for t in dataset.turns.to_pylist()] == ["finished"] * 5
    # Recording ran every tool once per call and kept each result, numbered per turn.
    assert CALLS == {"track_shipment": 3, "get_refund_policy": 2}
    policy = "30 days, for damaged or unopened items"
    tracked = json.dumps(TRACKED)  # in the tool's own key order
    calls = {
        0: ("track_shipment", '{"order_id":"O-7003"}', "ok", tracked, ""),
        1: ("get_refund_policy", "{}", "ok", policy, ""),
    }
    assert cassette_rows(dataset) == [(s, k, 0, *calls[k]) for s, k in KEYS]
    golden = read_dataset(write_dataset(dataset, tmp_path / "golden"))
    CALLS.clear()
    RESULTS.clear()
    results = await replay(golden, AgentSpec.of(AGENT), KEYS)
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 5
    assert CALLS == {}  # served from the cassette: not one real run
    assert RESULTS[:2] == [("track_shipment", json.dumps(TRACKED)), ("get_refund_policy", policy)]


async def test_live_tools_run_again_and_record_nothing() -> None:
    dataset = await record(AgentSpec.of(AGENT), REQUESTS[:1])
    CALLS.clear()
    results = await replay(dataset, AgentSpec.of(AGENT), KEYS[:2], tools="live")
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 2
    assert CALLS == {"track_shipment": 1, "get_refund_policy": 1}


async def test_a_call_with_other_arguments_is_answered_not_recorded() -> None:
    dataset = await record(AgentSpec.of(AGENT), REQUESTS[:1])
    CALLS.clear()
    RESULTS.clear()
    changed = AgentSpec.of(AGENT, {"kwargs": {"order": "O-9999"}})
    [result] = await replay(dataset, changed, [("s0", 0)], model="cassette-lenient")
    assert CALLS == {}
    assert RESULTS == [
        (
            "track_shipment",
            "Not recorded: the cassette has no result for "
            'track_shipment({"order_id":"O-9999"}) in this turn.',
        )
    ]
    assert result.drift  # the model then saw another tool result than recorded


async def test_a_recorded_tool_error_replays_as_the_same_error() -> None:
    failing = AgentSpec.of(AGENT, {"kwargs": {"fail": True}})
    dataset = await record(failing, REQUESTS[:1])
    message = "the carrier does not answer for O-7003"
    assert RESULTS[0] == ("track_shipment", f"LookupError: {message}")
    row = dataset.tool_cassette.to_pylist()[0]
    assert (row["status"], row["result"], row["error_type"]) == ("error", message, "LookupError")
    CALLS.clear()
    RESULTS.clear()
    # The agent no longer fails by itself: the error comes from the cassette, same type name.
    results = await replay(dataset, AgentSpec.of(AGENT), KEYS[:2])
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 2
    assert CALLS == {}
    assert RESULTS[0] == ("track_shipment", f"LookupError: {message}")


async def test_a_command_agent_records_and_replays_its_tools(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = tmp_path / "calls.txt"
    script = Path(hermetic_agent.__file__).with_name("hermetic_command.py")
    agent = AgentSpec.of(
        f"command:{sys.executable} {script}", {"env": {"COUNT_FILE": str(counted)}}
    )
    dataset = await record(agent, REQUESTS[:2])
    assert [t["stop_reason"] for t in dataset.turns.to_pylist()] == ["finished"] * 4
    assert sorted(counted.read_text().split()) == ["get_refund_policy"] * 2 + ["track_shipment"] * 2
    assert [(r[3], r[5]) for r in cassette_rows(dataset)] == [
        ("track_shipment", "ok"),
        ("get_refund_policy", "ok"),
    ] * 2
    counted.write_text("")
    results = await replay(dataset, agent, KEYS[:4])
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 4
    assert counted.read_text() == ""


def test_the_tool_routes_answer_from_the_cassette_and_refuse_what_they_cannot() -> None:
    record = ToolRecord(
        session_id="s", turn_index=0, position=0, tool_name="track", tool_args='{"id":"1"}',
        status="error", result="gone", error_type="KeyError",
    )  # fmt: skip
    with ModelEndpoint() as endpoint:
        served = endpoint.open_route(ScriptedModel([]), tools=CassetteTools([record]))
        bare = endpoint.open_route(ScriptedModel([]))
        with httpx.Client() as client:
            first = client.post(f"{served.tools_url}/track", json={"id": "1"}).json()
            again = client.post(f"{served.tools_url}/track", json={"id": "1"}).json()
            bad = client.post(f"{served.tools_url}/track", content=b"[1]")
            none = client.post(f"{bare.tools_url}/track", json={})
    assert first == {"status": "error", "result": "gone", "error_type": "KeyError"}
    assert again["status"] == "ok" and again["result"].startswith("Not recorded: ")
    assert (bad.status_code, none.status_code) == (400, 404)
    assert "serves no tools" in none.json()["error"]["message"]


async def test_a_replayed_error_is_raised_by_the_wrapper_with_its_recorded_name() -> None:
    record_error = {"status": "error", "result": "gone", "error_type": "KeyError"}
    with ModelEndpoint() as endpoint:
        route = endpoint.open_route(ScriptedModel([]), tools=_Fixed(record_error))

        @hermetic(url=route.tools_url)
        def track(order_id: str) -> str:
            raise AssertionError("a replayed tool must not run")

        with pytest.raises(ReplayedToolError, match="^gone$") as raised:
            track("O-1")
    assert type(raised.value).__name__ == "KeyError"


class _Fixed:
    def __init__(self, answer: dict[str, str]) -> None:
        self.answer = answer

    def call(self, name: str, arguments: dict[str, Any]) -> Any:
        return ToolAnswer(**self.answer)  # type: ignore[arg-type]

    def result(self, *args: Any) -> None:
        raise AssertionError("nothing to record")


async def test_a_tool_call_after_the_turn_is_refused() -> None:
    async with AgentDriver(AgentSpec.of(AGENT)) as driver:
        turn = TurnInput(session_id="s", turn_index=0, request="hello")
        await driver.run(turn, ScriptedModel([]), tools=[])
        url = driver.endpoint.url
        key = driver._slots[0].route.key
        async with httpx.AsyncClient() as client:
            refused = await client.post(f"{url}/r/{key}/tools/track", json={})
    assert refused.status_code == 409
    assert "no turn is running on this route" in refused.json()["error"]["message"]
