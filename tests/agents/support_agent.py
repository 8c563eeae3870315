"""A support agent on the plain `openai` client, for the agent-boundary tests (not plangate's).

`make(tools=...)` returns the turn function that `python:tests.agents.support_agent:make` names;
its keyword arguments are the variant settings (which tools it offers, how many model calls a
turn may take). It talks only to the endpoint the turn names and keeps a count of its turns as
its own state, to show that state survives between turns.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from openai import AsyncOpenAI
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import SpanLimits, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Tracer

from plangate.replay.agents import TurnInput, TurnOutput

ORDERS = {"O-7003": {"carrier": "UPS", "status": "in transit", "eta": "2026-03-14"}}
POLICY = {"window_days": 30, "condition": "damaged or unopened"}
SCHEMAS = {
    "track_shipment": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}},
        "required": ["order_id"],
    },
    "get_refund_policy": {"type": "object", "properties": {}},
}


def run_tool(name: str, arguments: dict[str, Any]) -> Any:
    """The agent's own tools: pure, so that a replay may run them live."""
    if name == "track_shipment":
        return ORDERS.get(arguments.get("order_id", ""), {"error": "no such order"})
    if name == "get_refund_policy":
        return POLICY
    return {"error": f"unknown tool {name}"}


def make(
    tools: Sequence[str] = ("track_shipment", "get_refund_policy"),
    max_calls: int = 8,
    traced: bool = False,
    attribute_limit: int | None = None,
) -> Callable[[TurnInput], Awaitable[TurnOutput]]:
    """The agent's turn function, with its variant settings.

    `traced`: the agent sends its own spans in the OpenTelemetry GenAI conventions (an
    `invoke_agent` span, a `chat` span per model call, an `execute_tool` span per call) to the
    turn's OTLP endpoint, and flushes them before it returns. `attribute_limit`: the most
    attributes its SDK keeps a span (OpenTelemetry's default, 128, without one).
    """
    offered = [
        {"type": "function", "function": {"name": n, "description": n, "parameters": SCHEMAS[n]}}
        for n in tools
    ]

    async def turn(request: TurnInput) -> TurnOutput:
        if not traced:
            return await run(request, None)
        provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=attribute_limit))
        exporter = OTLPSpanExporter(endpoint=f"{request.otlp_endpoint}/v1/traces")
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer("support-agent")
        try:
            with tracer.start_as_current_span(
                "invoke_agent support", attributes={"gen_ai.operation.name": "invoke_agent"}
            ):
                return await run(request, tracer)
        finally:
            provider.force_flush()
            provider.shutdown()

    async def run(request: TurnInput, tracer: Tracer | None) -> TurnOutput:
        client = AsyncOpenAI(base_url=request.model_base_url, api_key=request.model_api_key)
        messages: list[Any] = [
            {"role": "system", "content": "You are a support agent. Use the tools."},
            *request.history,
            {"role": "user", "content": request.request},
        ]
        answer = "I could not finish."
        async with client:
            for _ in range(max_calls):
                with _span(tracer, "chat", {"gen_ai.operation.name": "chat"}):
                    completion = await client.chat.completions.create(
                        model=request.model_name, messages=messages, tools=offered
                    )
                reply = completion.choices[0].message
                messages.append(reply.model_dump(exclude_none=True))
                if not reply.tool_calls:
                    answer = reply.content or ""
                    break
                for call in reply.tool_calls:
                    attributes = {
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": call.function.name,
                        "gen_ai.tool.call.id": call.id,
                        "gen_ai.tool.call.arguments": call.function.arguments,
                    }
                    with _span(tracer, f"execute_tool {call.function.name}", attributes):
                        result = run_tool(call.function.name, json.loads(call.function.arguments))
                    messages.append(
                        {"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)}
                    )
        turns = (request.state or {}).get("turns", 0) + 1
        return TurnOutput(answer=answer, state={"turns": turns})

    return turn


def _span(tracer: Tracer | None, name: str, attributes: dict[str, Any]) -> Any:
    if tracer is None:
        return contextlib.nullcontext()
    return tracer.start_as_current_span(name, attributes=attributes)


async def broken(request: TurnInput) -> TurnOutput:
    """A turn function with a bug."""
    raise KeyError("customer")
