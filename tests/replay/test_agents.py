"""A team's own agent behind the boundary: recorded, replayed identically, and failing clearly.

The agents here are not plangate's: they call the real `openai` client against plangate's local
model endpoint, which serves a simulated model over the support desk's tasks (record) or the
cassette (replay).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from plangate.evaluators import evaluate
from plangate.replay import (
    DatasetError,
    SessionRequest,
    dataset_from_traces,
    read_dataset,
    replay_turn,
    write_dataset,
)
from plangate.replay.agents import (
    AgentDriver,
    AgentError,
    AgentSpec,
    record_agent,
    recorded_agent,
)
from tests.helpers import readme_agent

AGENT = "python:tests.agents.support_agent:make"
REQUESTS = [
    SessionRequest(
        session_id=f"s{i}",
        requests=("Where is order O-7003? Track the shipment.", "What is the refund policy?"),
        rubrics=({"required_tools": ["track_shipment"]}, {"required_tools": ["get_refund_policy"]}),
    )
    for i in range(3)
]


async def record(agent: AgentSpec, requests: list[SessionRequest] = REQUESTS, **kw: object):
    return await record_agent(
        requests,
        name="agent-golden",
        agent=agent,
        model="sim:diligent",
        **kw,  # type: ignore[arg-type]
    )


async def test_a_python_agent_is_recorded_with_its_calls_results_and_state(tmp_path: Path) -> None:
    dataset = await record(AgentSpec.of(AGENT))
    turns = dataset.turns.to_pylist()
    assert [(t["session_id"], t["turn_index"], t["stop_reason"]) for t in turns] == [
        (f"s{i}", k, "finished") for i in range(3) for k in (0, 1)
    ]
    assert json.loads(turns[0]["steps"]) == [
        'call track_shipment {"order_id":"O-7003"} -> ok',
        "stop finished",
    ]
    assert json.loads(turns[1]["steps"]) == ["call get_refund_policy {} -> ok", "stop finished"]
    # The agent's own state, as it was before each turn.
    assert [json.loads(t["features_before"]) for t in turns[:2]] == [
        {"agent_state": None},
        {"agent_state": {"turns": 1}},
    ]
    # The second turn saw the first turn's conversation: its request carries the history.
    second = [e for e in dataset.model_cassette.to_pylist() if e["turn_index"] == 1][0]
    roles = [m["role"] for m in json.loads(second["request"])]
    assert roles[:5] == ["system", "user", "assistant", "tool", "assistant"]
    # The trace table comes from what the endpoint saw, with the tools' results.
    rows = dataset.spans.to_pylist()
    tools = [r for r in rows if r["span_kind"] == "TOOL" and r["session_id"] == "s0"]
    assert [(t["tool_name"], json.loads(t["tool_output"])["carrier"]) for t in tools[:1]] == [
        ("track_shipment", "UPS")
    ]
    assert {r["span_kind"] for r in rows} == {"AGENT", "LLM", "TOOL"}
    scores = evaluate(dataset.spans, names=["tool_call_loops"]).to_pylist()
    assert {s["outcome"] for s in scores} == {"pass"}
    folder = write_dataset(dataset, tmp_path / "golden")
    assert recorded_agent(read_dataset(folder).session("s0")) == AgentSpec.of(AGENT)


async def test_every_turn_replays_identically_with_the_strict_cassette(tmp_path: Path) -> None:
    dataset = read_dataset(write_dataset(await record(AgentSpec.of(AGENT)), tmp_path / "g"))
    async with AgentDriver(AgentSpec.of(AGENT), jobs=2) as driver:
        results = [
            await replay_turn(dataset, s, k, agent=driver)
            for s in ("s0", "s1", "s2")
            for k in (0, 1)
        ]
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 6
    assert all(r.table is not None and r.table.num_rows >= 3 for r in results)


async def test_a_changed_agent_is_caught_by_the_strict_cassette(tmp_path: Path) -> None:
    dataset = await record(AgentSpec.of(AGENT))
    changed = AgentSpec.of(AGENT, {"kwargs": {"tools": ["track_shipment"]}})
    async with AgentDriver(changed) as driver:
        result = await replay_turn(dataset, "s0", 0, agent=driver)
    assert result.error is not None
    assert "no longer matches the recording: offered tools" in result.error
    assert "get_refund_policy" in result.error


async def test_a_command_agent_is_recorded_and_replayed(tmp_path: Path) -> None:
    agent = AgentSpec.of(f"command:{sys.executable} {readme_agent(tmp_path)}")
    dataset = await record(agent, REQUESTS[:2])
    assert [t["stop_reason"] for t in dataset.turns.to_pylist()] == ["finished"] * 4
    async with AgentDriver(agent) as driver:
        results = [await replay_turn(dataset, "s1", k, agent=driver) for k in (0, 1)]
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 2


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("ruby:agent.rb", "start it with python:, command: or http:"),
        ("python:no_such_module_here:make", "cannot import 'no_such_module_here'"),
        ("python:tests.agents.support_agent:nothing", "has no 'nothing'"),
        ("python:tests.agents.support_agent", "write python:package.module:factory"),
        ("command:/no/such/binary --flag", "cannot start '/no/such/binary'"),
        ("command:", "name the command after command:"),
        ("http:localhost:1", "write http:http://HOST:PORT/PATH"),
    ],
)
async def test_an_unusable_agent_spec_is_named(spec: str, problem: str) -> None:
    with pytest.raises(AgentError, match=problem.replace("(", r"\(")):
        await record(AgentSpec.of(spec), REQUESTS[:1])


async def test_an_agent_that_raises_fails_its_turn_and_is_refused_unless_allowed() -> None:
    broken = AgentSpec.of("python:tests.agents.support_agent:broken")
    dataset = await record(broken, REQUESTS[:1], allow_errors=True)
    turns = dataset.turns.to_pylist()
    assert [t["stop_reason"] for t in turns] == ["agent_error", "agent_error"]
    agent_rows = [r for r in dataset.spans.to_pylist() if r["span_kind"] == "AGENT"]
    assert "KeyError: 'customer'" in agent_rows[0]["status_message"]
    # The agent's own failure is a fail, not an infrastructure error: the golden is written.
    dataset = await record(broken, REQUESTS[:1])
    scores = evaluate(dataset.spans, names=["task_completion"]).to_pylist()
    assert [s["outcome"] for s in scores] == ["fail", "fail"]


async def test_a_command_agent_that_dies_or_writes_garbage_fails_its_turn(tmp_path: Path) -> None:
    dies = tmp_path / "dies.py"
    dies.write_text("import sys\nprint('cannot start: no config', file=sys.stderr)\nsys.exit(3)\n")
    garbage = tmp_path / "garbage.py"
    garbage.write_text("import sys\nfor line in sys.stdin:\n    print('hello', flush=True)\n")
    for script, problem in ((dies, "exited (code 3) without a reply: cannot start: no config"),
                            (garbage, "not JSON on standard output")):  # fmt: skip
        agent = AgentSpec.of(f"command:{sys.executable} {script}")
        dataset = await record(agent, REQUESTS[:1], allow_errors=True)
        turns = dataset.turns.to_pylist()
        assert [t["stop_reason"] for t in turns] == ["agent_error", "agent_error"]
        agent_rows = [r for r in dataset.spans.to_pylist() if r["span_kind"] == "AGENT"]
        assert problem in agent_rows[0]["status_message"]


async def test_an_agents_own_spans_are_its_trace_table_with_loops_found() -> None:
    traced = AgentSpec.of(AGENT, {"kwargs": {"traced": True}})
    looping = [
        SessionRequest(
            session_id="loop",
            requests=("Track the shipment of order O-7003, then tell me the refund policy.",),
            model="sim:looper",
        ),
        *REQUESTS[:1],
    ]  # fmt: skip
    dataset = await record(traced, looping)
    rows = dataset.spans.to_pylist()
    tools = [r for r in rows if r["span_kind"] == "TOOL" and r["session_id"] == "s0"]
    # The agent's own execute_tool spans, not the endpoint's view (named tool.NAME).
    assert [t["name"] for t in tools] == [
        "execute_tool track_shipment",
        "execute_tool get_refund_policy",
    ]
    assert tools[0]["tool_args"] == '{"order_id":"O-7003"}'
    per_turn = {}
    for r in rows:
        per_turn.setdefault((r["session_id"], r["turn_index"]), []).append(r["span_kind"])
    # One AGENT row a turn (the boundary's); the agent's invoke_agent span became a CHAIN.
    assert all(kinds.count("AGENT") == 1 and "CHAIN" in kinds for kinds in per_turn.values())
    scores = {
        (s["session_id"], s["turn_index"]): s["outcome"]
        for s in evaluate(dataset.spans, names=["tool_call_loops"]).to_pylist()
    }
    assert scores == {("loop", 0): "fail", ("s0", 0): "pass", ("s0", 1): "pass"}


async def test_an_agent_that_stops_at_its_limit_leaves_no_unanswered_call_in_the_history() -> None:
    limited = AgentSpec.of(AGENT, {"kwargs": {"max_calls": 1}})
    requests = [
        SessionRequest(
            session_id="limited",
            requests=(
                "Track the shipment of order O-7003, then tell me the refund policy.",
                "What is the refund policy?",
            ),
        )
    ]
    dataset = await record(limited, requests)
    first = json.loads(dataset.turn("limited", 0)["messages"])
    assert [m["role"] for m in first] == ["user", "assistant"]
    assert first[-1]["content"] == "I could not finish." and not first[-1].get("tool_calls")
    # The second turn's request carries that history: every call in it has its result.
    (second,) = [e for e in dataset.model_cassette.to_pylist() if e["turn_index"] == 1]
    sent = json.loads(second["request"])
    asked = {c["id"] for m in sent for c in m.get("tool_calls") or ()}
    answered = {m["tool_call_id"] for m in sent if m["role"] == "tool"}
    assert asked == answered


async def test_a_replayed_turns_model_goes_on_with_the_sessions_call_ids(tmp_path: Path) -> None:
    dataset = await record(AgentSpec.of(AGENT), REQUESTS[:1])
    recorded = [
        c["id"]
        for e in dataset.model_cassette.to_pylist()
        if e["turn_index"] == 1
        for c in json.loads(e["response"])["message"].get("tool_calls") or ()
    ]
    async with AgentDriver(AgentSpec.of(AGENT)) as driver:
        result = await replay_turn(dataset, "s0", 1, agent=driver, model="sim:diligent")
    assert (result.error, result.divergence) == (None, None)
    assert result.table is not None
    replayed = [r["tool_call_id"] for r in result.table.to_pylist() if r["span_kind"] == "TOOL"]
    assert replayed == recorded == ["call_2"]


async def test_a_golden_built_from_an_agents_traces_replays_through_the_agent(
    tmp_path: Path,
) -> None:
    # The trace table of a recording (what the endpoint saw: requests, answers, offered tools in
    # OpenInference's names), turned into a golden the way production traces are.
    recorded = await record(AgentSpec.of(AGENT), REQUESTS[:2])
    golden = dataset_from_traces(recorded.spans, name="from-traces")
    folder = write_dataset(golden, tmp_path / "from-traces")
    dataset = read_dataset(folder)
    assert recorded_agent(dataset.session("s0")) is None  # nothing says which agent it was
    assert [json.loads(t["steps"]) for t in dataset.turns.to_pylist()] == [
        json.loads(t["steps"]) for t in recorded.turns.to_pylist()
    ]
    async with AgentDriver(AgentSpec.of(AGENT)) as driver:
        results = [
            await replay_turn(dataset, s, k, agent=driver) for s in ("s0", "s1") for k in (0, 1)
        ]
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 4


async def test_a_dead_model_behind_the_endpoint_is_a_model_error_not_a_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PLANGATE_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens
    monkeypatch.setenv("PLANGATE_OPENAI_API_KEY", "sk-test-not-a-real-key")
    monkeypatch.setenv("PLANGATE_MODEL_RETRIES", "0")
    dead = [
        SessionRequest(session_id="dead", requests=("Where is order O-7003?",), model="openai:m")
    ]
    with pytest.raises(DatasetError, match="1 of 1 recorded turns ended in model_error"):
        await record(AgentSpec.of(AGENT), dead)
    dataset = await record(AgentSpec.of(AGENT), dead, allow_errors=True)
    assert [t["stop_reason"] for t in dataset.turns.to_pylist()] == ["model_error"]
    scores = evaluate(dataset.spans, names=["task_completion", "tool_call_loops"]).to_pylist()
    assert {s["outcome"] for s in scores} == {"error"}
