"""A support agent whose function tools are `hermetic`, for the tool-cassette tests.

`python:tests.agents.hermetic_agent:make` names it. Its tools count every real run in `CALLS`
(a replay from the cassette must leave it untouched) and the agent keeps every result it gave
the model in `RESULTS`. Settings: `fail` makes `track_shipment` raise, `order` makes the agent
track that order whatever the model asked (a changed agent: its call was never recorded).
"""

from __future__ import annotations

import inspect
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

from openai import AsyncOpenAI

from plangate.replay.agents import TurnInput, TurnOutput, hermetic

ORDERS = {"O-7003": {"carrier": "UPS", "status": "in transit", "eta": "2026-03-14"}}
CALLS: Counter[str] = Counter()
"""How many times each tool really ran."""
RESULTS: list[tuple[str, str]] = []
"""(tool, the text the model was given), every call, in order."""


def make(
    fail: bool = False, order: str | None = None
) -> Callable[[TurnInput], Awaitable[TurnOutput]]:
    """The agent's turn function, with its variant settings."""

    @hermetic
    def track_shipment(order_id: str) -> dict[str, str]:
        """Where an order is."""
        CALLS["track_shipment"] += 1
        if fail:
            raise LookupError(f"the carrier does not answer for {order_id}")
        return ORDERS.get(order_id, {"error": "no such order"})

    @hermetic
    async def get_refund_policy() -> str:
        """The refund rules."""
        CALLS["get_refund_policy"] += 1
        return "30 days, for damaged or unopened items"

    tools: dict[str, Callable[..., Any]] = {
        "track_shipment": track_shipment,
        "get_refund_policy": get_refund_policy,
    }
    offered = [schema(f) for f in tools.values()]

    async def turn(request: TurnInput) -> TurnOutput:
        client = AsyncOpenAI(base_url=request.model_base_url, api_key=request.model_api_key)
        messages: list[Any] = [
            {"role": "system", "content": "You are a support agent. Use the tools."},
            *request.history,
            {"role": "user", "content": request.request},
        ]
        async with client:
            for _ in range(6):
                completion = await client.chat.completions.create(
                    model=request.model_name, messages=messages, tools=offered
                )
                reply = completion.choices[0].message
                messages.append(reply.model_dump(exclude_none=True))
                if not reply.tool_calls:
                    return TurnOutput(answer=reply.content or "")
                for call in reply.tool_calls:
                    name = call.function.name
                    arguments = json.loads(call.function.arguments or "{}")
                    if name == "track_shipment" and order is not None:
                        arguments = {"order_id": order}
                    text = await run_tool(tools[name], arguments)
                    RESULTS.append((name, text))
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return TurnOutput(answer="I could not finish.")

    return turn


async def run_tool(tool: Callable[..., Any], arguments: dict[str, Any]) -> str:
    """Run a tool; its error goes back to the model as text, as frameworks do."""
    try:
        value = tool(**arguments)
        if inspect.isawaitable(value):
            value = await value
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return value if isinstance(value, str) else json.dumps(value)


def schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """A chat-completions tool schema read from the (wrapped) function, as frameworks do."""
    parameters = inspect.signature(fn).parameters
    return {
        "type": "function",
        "function": {
            "name": fn.__name__,
            "description": fn.__doc__ or "",
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string"} for p in parameters},
                "required": list(parameters),
            },
        },
    }
