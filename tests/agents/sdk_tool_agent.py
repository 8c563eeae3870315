"""A support agent on the OpenAI Agents SDK whose tools are the SDK's tool objects, made hermetic.

`python:tests.agents.sdk_tool_agent:make` names it. The tools are built the SDK's way and only
then wrapped with `hermetic`: `track_shipment` by `@function_tool` (its dict result reaches the
model as the SDK writes it, `str()`), `get_refund_policy` as a `FunctionTool` built by hand, as
examples/support_openai_agents builds the desk's. Every real run of a tool counts in `CALLS`;
`SEEN` keeps each tool output the SDK gave the model, in order. One-turn sessions only: a turn
ignores the history. Tracing is off for each run (`RunConfig`), which leaves the SDK's global
trace provider as the other tests set it.

Settings: `fail` makes `track_shipment` raise; `explain` gives it a failure function that names
the error, instead of the SDK's default fixed text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    OpenAIChatCompletionsModel,
    RunConfig,
    Runner,
    RunResult,
    ToolCallItem,
    ToolCallOutputItem,
    function_tool,
)
from agents.run_context import RunContextWrapper
from agents.tool_context import ToolContext
from openai import AsyncOpenAI

from plangate.replay.agents import TurnInput, TurnOutput, hermetic

ORDERS = {"O-7003": {"carrier": "UPS", "status": "in transit", "eta": "2026-03-14"}}
POLICY = "30 days, for damaged or unopened items"
CALLS: Counter[str] = Counter()
"""How many times each tool really ran."""
SEEN: list[tuple[str, str]] = []
"""(tool, the output the model was given), every call, in order."""


def make(fail: bool = False, explain: bool = False) -> Callable[[TurnInput], Awaitable[TurnOutput]]:
    """The agent's turn function, with its variant settings."""

    def track_shipment(order_id: str) -> dict[str, str]:
        """Where an order is.

        Args:
            order_id: The order's id, such as O-7003.
        """
        CALLS["track_shipment"] += 1
        if fail:
            raise LookupError(f"the carrier does not answer for {order_id}")
        return ORDERS.get(order_id, {"error": "no such order"})

    async def refund_policy(context: ToolContext[Any], arguments: str) -> str:
        CALLS["get_refund_policy"] += 1
        return POLICY

    tracked = (
        function_tool(track_shipment, failure_error_function=named)
        if explain
        else function_tool(track_shipment)
    )
    policy = FunctionTool(
        name="get_refund_policy",
        description="The refund rules.",
        params_json_schema={"type": "object", "properties": {}},
        on_invoke_tool=refund_policy,
        strict_json_schema=False,
    )
    tools = [hermetic(tracked), hermetic(policy)]

    async def turn(request: TurnInput) -> TurnOutput:
        client = AsyncOpenAI(base_url=request.model_base_url, api_key=request.model_api_key)
        agent = Agent(
            name="support",
            instructions="You are a support agent. Use the tools.",
            model=OpenAIChatCompletionsModel(model=request.model_name, openai_client=client),
            tools=list(tools),
        )
        async with client:
            result = await Runner.run(
                agent, request.request, run_config=RunConfig(tracing_disabled=True)
            )
        SEEN.extend(outputs(result))
        return TurnOutput(answer=str(result.final_output))

    return turn


def named(context: RunContextWrapper[Any], error: Exception) -> str:
    """A failure function that tells the model which error it was."""
    return f"{type(error).__name__}: {error}"


def outputs(result: RunResult) -> list[tuple[str, str]]:
    """The run's tool outputs as the model was given them, with their tools' names."""
    names = {
        getattr(i.raw_item, "call_id", ""): getattr(i.raw_item, "name", "")
        for i in result.new_items
        if isinstance(i, ToolCallItem)
    }
    return [
        (names[o.raw_item["call_id"]], str(o.raw_item["output"]))
        for o in result.new_items
        if isinstance(o, ToolCallOutputItem) and isinstance(o.raw_item, dict)
    ]
