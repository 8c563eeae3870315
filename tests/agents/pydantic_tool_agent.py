"""A support agent on pydantic-ai whose tools are pydantic-ai's tool objects, made hermetic.

`python:tests.agents.pydantic_tool_agent:make` names it. The tools are built pydantic-ai's way
and only then wrapped with `hermetic`: `track_shipment` is a `Tool` over a plain function that
takes the run context (its dict result reaches the model as JSON), `get_refund_policy` sits,
async, in a `FunctionToolset`. Every real run of a tool counts in `CALLS`; `SEEN` keeps each tool
result the model was given, in order, as pydantic-ai wrote it. One-turn sessions only: a turn
ignores the history.

Settings: `fail="retry"` makes `track_shipment` raise `ModelRetry` (the model is asked to try
again), `fail="failed"` raise `ToolFailed` (the model is told the call failed).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Literal

from openai import AsyncOpenAI
from pydantic_ai import Agent, ModelRetry, RunContext, Tool, ToolFailed
from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.toolsets import FunctionToolset

from plangate.replay.agents import TurnInput, TurnOutput, hermetic

ORDERS = {"O-7003": {"carrier": "UPS", "status": "in transit", "eta": "2026-03-14"}}
POLICY = "30 days, for damaged or unopened items"
CALLS: Counter[str] = Counter()
"""How many times each tool really ran."""
SEEN: list[tuple[str, str]] = []
"""(tool, the result the model was given), every call, in order."""


def make(
    fail: Literal["", "retry", "failed"] = "",
) -> Callable[[TurnInput], Awaitable[TurnOutput]]:
    """The agent's turn function, with its variant settings."""

    def track_shipment(ctx: RunContext[None], order_id: str) -> dict[str, str]:
        """Where an order is.

        Args:
            ctx: The run's context.
            order_id: The order's id, such as O-7003.
        """
        CALLS["track_shipment"] += 1
        if fail == "retry":
            raise ModelRetry(f"the carrier does not answer for {order_id}, ask again later")
        if fail == "failed":
            raise ToolFailed(f"the carrier does not answer for {order_id}")
        return ORDERS.get(order_id, {"error": "no such order"})

    async def get_refund_policy() -> str:
        """The refund rules."""
        CALLS["get_refund_policy"] += 1
        return POLICY

    tracked = hermetic(Tool(track_shipment, takes_ctx=True, max_retries=3))
    toolset = hermetic(FunctionToolset([get_refund_policy]))

    async def turn(request: TurnInput) -> TurnOutput:
        client = AsyncOpenAI(base_url=request.model_base_url, api_key=request.model_api_key)
        model = OpenAIChatModel(request.model_name, provider=OpenAIProvider(openai_client=client))
        agent = Agent(
            model,
            instructions="You are a support agent. Use the tools.",
            tools=[tracked],
            toolsets=[toolset],
        )
        async with client:
            result = await agent.run(request.request)
        SEEN.extend(results(result.new_messages()))
        return TurnOutput(answer=result.output)

    return turn


def results(messages: list[ModelMessage]) -> list[tuple[str, str]]:
    """The run's tool results as the model was given them, with their tools' names."""
    return [
        (part.tool_name, part.model_response_str())  # what the chat model sends (no files here)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart)
    ]
