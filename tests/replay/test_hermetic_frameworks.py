"""Hermetic framework tools: the Agents SDK's and pydantic-ai's tool objects, made hermetic.

The agents here build their tools the framework's way (`@function_tool` and a `FunctionTool` by
hand; a pydantic-ai `Tool` and a `FunctionToolset`), then wrap the tool objects with `hermetic`.
Their tools count every real run, and the agents keep every tool output the model was given:
recording runs the tools and keeps each result in the golden's tool cassette, as the text the
model saw; replaying from the strict cassette gives the model the same text and runs none of
them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from agents import FunctionTool, ToolOutputImage, default_tool_error_function, function_tool
from agents.tool_context import ToolContext
from pydantic_ai import Tool, ToolReturn
from pydantic_ai.toolsets import FunctionToolset

from plangate.harness import ScriptedModel
from plangate.replay import GoldenDataset, SessionRequest, read_dataset, replay_turn, write_dataset
from plangate.replay.agents import TOOLS_URL_ENV, AgentDriver, AgentSpec, hermetic, record_agent
from plangate.replay.endpoint import ModelEndpoint, ToolAnswer
from tests.agents import pydantic_tool_agent, sdk_tool_agent

AGENTS = {"sdk": sdk_tool_agent, "pydantic": pydantic_tool_agent}
TRACK = "Where is order O-7003? Track the shipment."
POLICY = "What is the refund policy?"
REQUESTS = [
    SessionRequest(session_id="s0", requests=(TRACK,)),
    SessionRequest(session_id="s1", requests=(POLICY,)),
    SessionRequest(session_id="s2", requests=(f"{TRACK} {POLICY}",)),
]
KEYS = [("s0", 0), ("s1", 0), ("s2", 0)]
ORDER = sdk_tool_agent.ORDERS["O-7003"]
TRACKED = {  # the tool's dict, as each framework gives it to the model
    "sdk": str(ORDER),
    "pydantic": json.dumps(ORDER, separators=(",", ":")),
}
ARGS = '{"order_id":"O-7003"}'
POLICY_TEXT = sdk_tool_agent.POLICY
FAILED = "the carrier does not answer for O-7003"


@pytest.fixture(autouse=True)
def counts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fresh counts, and no tools URL from the environment."""
    monkeypatch.delenv(TOOLS_URL_ENV, raising=False)
    clear()
    yield


@pytest.fixture(params=list(AGENTS))
def framework(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def clear() -> None:
    for module in AGENTS.values():
        module.CALLS.clear()
        module.SEEN.clear()


def agent_of(framework: str, **kwargs: Any) -> AgentSpec:
    return AgentSpec.of(f"python:{AGENTS[framework].__name__}:make", {"kwargs": kwargs})


def calls(framework: str) -> dict[str, int]:
    """How many times each of the framework agent's tools really ran."""
    return dict(AGENTS[framework].CALLS)


def seen(framework: str) -> list[tuple[str, str]]:
    """The tool outputs the framework agent's model was given: (tool, text), in order."""
    return list(AGENTS[framework].SEEN)


async def record(agent: AgentSpec, requests: Sequence[SessionRequest] = REQUESTS) -> GoldenDataset:
    return await record_agent(
        requests, name="hermetic-frameworks", agent=agent, model="sim:diligent", domain="support"
    )


async def replay(
    dataset: GoldenDataset, agent: AgentSpec, keys: Sequence[tuple[str, int]], **kw: Any
) -> list[Any]:
    async with AgentDriver(agent) as driver:
        return [await replay_turn(dataset, s, k, agent=driver, **kw) for s, k in keys]


def cassette_rows(dataset: GoldenDataset) -> list[tuple[Any, ...]]:
    keys = ("session_id", "turn_index", "position", "tool_name", "tool_args", "status")
    rows = sorted(dataset.tool_cassette.to_pylist(), key=lambda r: [r[k] for k in keys[:3]])
    return [(*(r[k] for k in keys), r["result"], r["error_type"]) for r in rows]


async def test_recorded_tools_replay_from_the_cassette_and_never_run(
    framework: str, tmp_path: Path
) -> None:
    dataset = await record(agent_of(framework))
    assert [t["stop_reason"] for t in dataset.turns.to_pylist()] == ["finished"] * 3
    assert calls(framework) == {"track_shipment": 2, "get_refund_policy": 2}
    # Each call kept under the tool's name, with the model's arguments, and the text the model saw.
    tracked = ("track_shipment", ARGS, "ok", TRACKED[framework], "")
    policy = ("get_refund_policy", "{}", "ok", POLICY_TEXT, "")
    assert cassette_rows(dataset) == [
        ("s0", 0, 0, *tracked), ("s1", 0, 0, *policy), ("s2", 0, 0, *tracked), ("s2", 0, 1, *policy)
    ]  # fmt: skip
    given = [("track_shipment", TRACKED[framework]), ("get_refund_policy", POLICY_TEXT)] * 2
    assert seen(framework) == given
    golden = read_dataset(write_dataset(dataset, tmp_path / "golden"))
    clear()
    results = await replay(golden, agent_of(framework), KEYS)
    assert [(r.error, r.divergence) for r in results] == [(None, None)] * 3
    assert calls(framework) == {}  # served from the cassette: not one real run
    assert seen(framework) == given


async def test_live_tools_run_again(framework: str) -> None:
    dataset = await record(agent_of(framework), REQUESTS[2:])
    clear()
    [result] = await replay(dataset, agent_of(framework), KEYS[2:], tools="live")
    assert (result.error, result.divergence) == (None, None)
    assert calls(framework) == {"track_shipment": 1, "get_refund_policy": 1}


async def test_a_call_the_cassette_does_not_hold_is_answered_not_recorded(framework: str) -> None:
    dataset = await record(agent_of(framework), REQUESTS[:1])
    rows = dataset.tool_cassette.to_pylist()
    rows[0]["tool_args"] = '{"order_id":"O-9999"}'  # the recording tracked another order
    changed = dataclasses.replace(
        dataset, tool_cassette=pa.Table.from_pylist(rows, schema=dataset.tool_cassette.schema)
    )
    clear()
    [result] = await replay(changed, agent_of(framework), KEYS[:1], model="cassette-lenient")
    assert calls(framework) == {}
    not_recorded = (
        f"Not recorded: the cassette has no result for track_shipment({ARGS}) in this turn."
    )
    assert seen(framework) == [("track_shipment", not_recorded)]
    assert result.drift  # the model then saw another tool result than recorded


SDK_FAILURE = default_tool_error_function(None, LookupError())  # type: ignore[arg-type]
"""The text the Agents SDK gives the model for a failed `@function_tool` (its wording changes
between releases: "…the tool. Please try again." until 0.24)."""

ERRORS = {
    # framework, the settings it records with (failing) and replays with, the error recorded,
    # the text the model is given
    "sdk-default-failure": (
        "sdk", {"fail": True}, {}, "LookupError",
        SDK_FAILURE,
    ),
    "sdk-own-failure": (
        "sdk", {"fail": True, "explain": True}, {"explain": True}, "LookupError",
        f"LookupError: {FAILED}",
    ),
    "pydantic-retry": (
        "pydantic", {"fail": "retry"}, {}, "ModelRetry",
        json.dumps({"error": f"{FAILED}, ask again later"}, separators=(",", ":")),
    ),
    "pydantic-failed": (
        "pydantic", {"fail": "failed"}, {}, "ToolFailed",
        json.dumps({"error": FAILED}, separators=(",", ":")),
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(ERRORS))
async def test_a_recorded_tool_error_gives_the_model_the_same_text_on_replay(case: str) -> None:
    framework, failing, replaying, error_type, text = ERRORS[case]
    dataset = await record(agent_of(framework, **failing), REQUESTS[:1])
    [row] = dataset.tool_cassette.to_pylist()
    assert row["result"].startswith(FAILED)  # the error itself, not the text the model saw
    assert (row["status"], row["error_type"]) == ("error", error_type)
    assert seen(framework) == [("track_shipment", text)]
    clear()
    # The agent no longer fails by itself: the error comes from the cassette, and the framework
    # turns it into the same text for the model (the strict cassette compares every request).
    [result] = await replay(dataset, agent_of(framework, **replaying), KEYS[:1])
    assert (result.error, result.divergence) == (None, None)
    assert calls(framework) == {}
    assert seen(framework) == [("track_shipment", text)]


def test_a_wrapped_tool_keeps_the_face_the_framework_shows_the_model() -> None:
    def track(order_id: str, verbose: bool = False) -> dict[str, str]:
        """Where an order is.

        Args:
            order_id: The order's id.
            verbose: Whether to say more.
        """
        return {"order_id": order_id}

    sdk = function_tool(track, name_override="track_shipment", strict_mode=False)
    wrapped_sdk = hermetic(sdk)
    assert isinstance(wrapped_sdk, FunctionTool) and wrapped_sdk is not sdk
    face = ("name", "description", "params_json_schema", "strict_json_schema", "needs_approval")
    assert [getattr(wrapped_sdk, f) for f in face] == [getattr(sdk, f) for f in face]
    assert wrapped_sdk.on_invoke_tool is not sdk.on_invoke_tool
    pydantic = Tool(track, name="track_shipment", max_retries=4, sequential=True)
    wrapped = hermetic(pydantic)
    assert isinstance(wrapped, Tool) and wrapped is not pydantic
    assert wrapped.tool_def == pydantic.tool_def
    assert (wrapped.takes_ctx, wrapped.max_retries) == (False, 4)
    assert pydantic.function is track  # the original is left as it was
    toolset = FunctionToolset([track], max_retries=2)
    wrapped_set = hermetic(toolset)
    assert isinstance(wrapped_set, FunctionToolset) and wrapped_set is not toolset
    assert {n: t.tool_def for n, t in wrapped_set.tools.items()} == {
        n: t.tool_def for n, t in toolset.tools.items()
    }
    assert toolset.tools["track"].function is track


async def test_without_plangate_a_wrapped_sdk_tool_answers_as_the_original() -> None:
    def track(order_id: str) -> str:
        """Where an order is."""
        raise LookupError(f"no carrier for {order_id}")

    async def by_hand(context: ToolContext[Any], arguments: str) -> str:
        raise LookupError("no carrier")

    context = ToolContext(
        context=None, tool_name="track", tool_call_id="c1", tool_arguments='{"order_id":"O-1"}'
    )
    # `@function_tool` gives the model its failure function's text; a tool built by hand raises.
    caught = function_tool(track)
    texts = [
        await t.on_invoke_tool(context, '{"order_id":"O-1"}') for t in (caught, hermetic(caught))
    ]
    assert texts == [SDK_FAILURE] * 2
    raising = FunctionTool(
        name="track", description="", params_json_schema={}, on_invoke_tool=by_hand,
        strict_json_schema=False,
    )  # fmt: skip
    with pytest.raises(LookupError, match="^no carrier$"):
        await hermetic(raising).on_invoke_tool(context, "{}")


async def test_what_cannot_be_recorded_as_text_is_refused_when_recording() -> None:
    async def screenshot(context: ToolContext[Any], arguments: str) -> ToolOutputImage:
        return ToolOutputImage(image_url="https://example.com/a.png")

    async def tracked() -> ToolReturn[str]:
        """Where an order is."""
        return ToolReturn("in transit", content="a picture of the parcel")

    sdk = FunctionTool(
        name="screenshot", description="", params_json_schema={}, on_invoke_tool=screenshot,
        strict_json_schema=False,
    )  # fmt: skip
    context = ToolContext(
        context=None, tool_name="screenshot", tool_call_id="c1", tool_arguments=""
    )
    recording = _Recording()
    with ModelEndpoint() as endpoint:
        url = endpoint.open_route(ScriptedModel([]), tools=recording).tools_url
        with pytest.raises(TypeError, match="'screenshot' returned ToolOutputImage"):
            await hermetic(sdk, url=url).on_invoke_tool(context, "")
        pydantic = hermetic(Tool(tracked), url=url)
        with pytest.raises(TypeError, match="'tracked' returned ToolReturn"):
            await pydantic.function_schema.call({}, None)  # takes no run context
    assert recording.results == []


def test_hermetic_refuses_what_it_cannot_wrap() -> None:
    takes = (
        "^hermetic takes a tool function, an OpenAI Agents SDK FunctionTool, or a pydantic-ai "
        "Tool or FunctionToolset, not 'object'"
    )
    with pytest.raises(TypeError, match=takes):
        hermetic(object())
    with pytest.raises(TypeError, match="names one tool, not a toolset's tools"):
        hermetic(FunctionToolset([]), name="tools")


class _Recording:
    """A tool provider that lets every call run and keeps what is posted."""

    def __init__(self) -> None:
        self.results: list[tuple[Any, ...]] = []

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        return ToolAnswer(status="record")

    def result(self, *posted: Any) -> None:
        self.results.append(posted)
