"""The support desk on pydantic-ai, behind plangate's agent boundary.

`make(request_limit=..., task_list=...)` returns the turn function that
`python:examples.support_pydantic_ai.agent:make` names; its keyword arguments are the variant
settings. Each turn builds an `Agent` over the desk's tools (`Tool.from_schema`) and runs
pydantic-ai's own loop (`Agent.run`) against the model endpoint the turn names, through
`OpenAIChatModel`.

- The conversation so far (`turn.history`, OpenAI chat messages) becomes pydantic-ai's
  `message_history` (`model_messages`); pydantic-ai maps it back to the same chat messages on the
  wire, so every request of a replay matches the cassette.
- The desk is rebuilt from that history (`examples.support_desk`); `state` is not needed.
- `request_limit`: pydantic-ai's `UsageLimits(request_limit=...)`, the most model requests in
  one run. Past it the run stops (`UsageLimitExceeded`) and the agent answers that it could not
  finish. plangate's endpoint then saw the last tool calls but never their results, so the turn's
  recorded messages end in calls without results; `Agent.run` refuses such a history, and the
  next turn closes them with pydantic-ai's own `repair_messages`.
- `task_list`: the todo tools, and the rendered list as a second, dynamic instruction, which
  pydantic-ai re-evaluates before every model request and sends as its own system message
  right after the first.

Spans: pydantic-ai's own instrumentation (its `Instrumentation` capability, content included),
in the OpenTelemetry GenAI conventions: an `invoke_agent` span per run, a `chat` span per model
request with its messages and offered tools, an `execute_tool` span per tool call. They go over
OTLP/HTTP to the turn's `otlp_endpoint` and nowhere else (`examples.telemetry`), flushed before
the turn returns; a turn without an endpoint is not instrumented. `plangate dataset
from-traces` rebuilds every request from them, so a golden made from them replays under the
strict cassette.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import Agent, InstrumentationSettings, Tool, UsageLimitExceeded, UsageLimits
from pydantic_ai.capabilities import Instrumentation
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    ModelResponsePart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    repair_messages,
)
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from examples.support_desk import Clients, Desk, instructions
from examples.telemetry import TRACER_PROVIDER, Exporters
from plangate.harness import Tool as DeskTool
from plangate.replay.agents import TurnInput, TurnOutput

INSTRUMENTATION = InstrumentationSettings(tracer_provider=TRACER_PROVIDER, include_content=True)
"""pydantic-ai's spans, with the messages and tool arguments (what `dataset from-traces` reads)."""


def make(request_limit: int = 30, task_list: bool = True) -> SupportAgent:
    """The agent's turn function, with its variant settings.

    Args:
        request_limit: The most model requests one turn may make (pydantic-ai's usage limit).
        task_list: Whether the agent keeps a todo list, pinned after its instructions.
    """
    return SupportAgent(request_limit=request_limit, task_list=task_list)


@dataclass(slots=True)
class SupportAgent:
    """The support desk's turn function: plangate calls it with each `TurnInput`."""

    request_limit: int
    """The most model requests one turn may make."""
    task_list: bool
    """Whether the agent keeps a todo list, pinned after its instructions."""
    clients: Clients = field(default_factory=Clients)
    """The OpenAI client of each endpoint, kept across turns."""
    exporters: Exporters = field(default_factory=Exporters)
    """The span exporter of each OTLP endpoint, kept across turns."""

    async def __call__(self, request: TurnInput) -> TurnOutput:
        """Run one turn: pydantic-ai's loop over the desk's tools, at the turn's endpoints."""
        async with self.exporters.turn(request.otlp_endpoint):
            return await self._run(request)

    async def _run(self, request: TurnInput) -> TurnOutput:
        desk = Desk.for_turn(request.history, task_list=self.task_list)
        provider = OpenAIProvider(openai_client=self.clients.of(request))
        agent = Agent(
            OpenAIChatModel(request.model_name, provider=provider),
            instructions=[instructions(task_list=self.task_list), desk.pinned_plan],
            tools=[pydantic_tool(desk, t) for t in desk.tools.values()],
            capabilities=[Instrumentation(INSTRUMENTATION)] if request.otlp_endpoint else [],
        )
        try:
            result = await agent.run(
                request.request,
                message_history=repair_messages(model_messages(request.history)),
                usage_limits=UsageLimits(request_limit=self.request_limit),
            )
        except UsageLimitExceeded as exc:
            return TurnOutput(answer=f"I stopped before finishing: {exc}.")
        return TurnOutput(answer=result.output)

    async def aclose(self) -> None:
        """Close the clients and exporters (plangate calls it when it is done with the agent)."""
        await self.clients.aclose()
        await self.exporters.aclose()


def pydantic_tool(desk: Desk, spec: DeskTool) -> Tool[None]:
    """One desk tool as a pydantic-ai tool: the same name, description and JSON schema."""

    def invoke(**arguments: Any) -> str:
        return desk.call(spec.name, arguments)

    # sequential: the desk's calls change its state, so they run one at a time, in order.
    return Tool.from_schema(
        invoke, name=spec.name, description=spec.description, json_schema=spec.parameters,
        sequential=True,
    )  # fmt: skip


def model_messages(history: Sequence[Mapping[str, Any]]) -> list[ModelMessage]:
    """The conversation (OpenAI chat messages) as pydantic-ai's message history.

    A user message is a request; an assistant message a response (its text, its tool calls);
    consecutive tool messages are one request of tool returns, each named after the call it
    answers.
    """
    messages: list[ModelMessage] = []
    names: dict[str, str] = {}
    for message in history:
        role = message.get("role")
        if role == "assistant":
            response = _response(message)
            names.update((p.tool_call_id, p.tool_name) for p in _calls(response))
            messages.append(response)
            continue
        part: ModelRequestPart
        if role == "tool":
            call_id = str(message["tool_call_id"])
            content = str(message.get("content") or "")
            part = ToolReturnPart(names.get(call_id, ""), content, tool_call_id=call_id)
        else:
            part = UserPromptPart(str(message.get("content") or ""))
        last = messages[-1] if messages else None
        if role == "tool" and isinstance(last, ModelRequest) and _returns_only(last):
            last.parts = [*last.parts, part]
        else:
            messages.append(ModelRequest(parts=[part]))
    return messages


def _response(message: Mapping[str, Any]) -> ModelResponse:
    parts: list[ModelResponsePart] = []
    if message.get("content") or not message.get("tool_calls"):
        parts.append(TextPart(str(message.get("content") or "")))
    for call in message.get("tool_calls") or ():
        function = call["function"]
        arguments = function.get("arguments") or "{}"
        parts.append(ToolCallPart(function["name"], arguments, tool_call_id=call["id"]))
    return ModelResponse(parts=parts)


def _calls(response: ModelResponse) -> list[ToolCallPart]:
    return [p for p in response.parts if isinstance(p, ToolCallPart)]


def _returns_only(request: ModelRequest) -> bool:
    return all(isinstance(p, ToolReturnPart) for p in request.parts)
