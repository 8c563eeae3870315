"""A support agent whose only tools come from an MCP server, for the MCP tool tests.

`python:tests.agents.mcp_agent:make` names it. Each turn it connects to the MCP server whose URL
plangate gives it under `DESK_MCP_URL` (the turn's `mcp`, or the environment), offers that
server's tools to the model as function tools, and calls them through MCP. It knows nothing of
cassettes: plangate's gateway records or replays the calls.
"""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import Client
from openai import AsyncOpenAI

from plangate.replay.agents import TurnInput, TurnOutput

SERVER = "DESK_MCP_URL"


def make(max_calls: int = 8) -> Callable[[TurnInput], Awaitable[TurnOutput]]:
    """The agent's turn function: at most `max_calls` model calls a turn."""

    async def turn(request: TurnInput) -> TurnOutput:
        url = request.mcp.get(SERVER) or os.environ[SERVER]
        model = AsyncOpenAI(base_url=request.model_base_url, api_key=request.model_api_key)
        async with Client(url) as tools, model:
            listed = (await tools.list_tools()).tools
            offered = [_function(t) for t in listed]
            messages: list[Any] = [
                {"role": "system", "content": "You are a support agent. Use the tools."},
                *request.history,
                {"role": "user", "content": request.request},
            ]
            for _ in range(max_calls):
                reply = await model.chat.completions.create(
                    model=request.model_name, messages=messages, tools=offered
                )
                message = reply.choices[0].message
                messages.append(message.model_dump(exclude_none=True))
                if not message.tool_calls:
                    return TurnOutput(answer=message.content or "")
                for call in message.tool_calls:
                    arguments = json.loads(call.function.arguments or "{}")
                    result = await tools.call_tool(call.function.name, arguments)
                    text = "\n".join(getattr(p, "text", "") for p in result.content)
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return TurnOutput(answer="I could not finish.")

    return turn


def _function(tool: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description or tool.name,
            "parameters": tool.input_schema,
        },
    }
