"""The support desk on the OpenAI Agents SDK, behind plangate's agent boundary.

`make(max_turns=..., task_list=...)` returns the turn function that
`python:examples.support_openai_agents.agent:make` names; its keyword arguments are the variant
settings. Each turn builds an `Agent` over the desk's tools and runs the SDK's own loop
(`Runner.run`) against the model endpoint the turn names, through `OpenAIChatCompletionsModel`.

- The conversation so far (`turn.history`, OpenAI chat messages) becomes the SDK's input items
  (`input_items`); the SDK turns them back into chat messages on the wire, the same on record
  and on replay, so every request of a replay matches the cassette. The history's tool calls get
  ids of their own (`h1`, `h4`, ...): the SDK drops an input item whose call id it has seen, and
  plangate's simulated models, replayed one turn at a time (the gate), number their calls from
  `call_1` again in every turn, so a new call would collide with one of the history's.
- The desk is rebuilt from that history (`examples.support_desk`); `state` is not needed.
- `max_turns`: the SDK's limit on model calls in one run. Past it the run stops (the SDK's
  `max_turns` error handler) and the agent answers that it could not finish. Then, and only
  then, it reports the turn's messages itself (`TurnOutput.messages`, from the SDK's own
  items): plangate's endpoint never saw the last tool results nor that answer, and without them
  the next turn's history would end in tool calls with no results, which OpenAI's API refuses.
- `task_list`: the todo tools, and the rendered list pinned as a system message right after the
  instructions before every model call (`RunConfig.call_model_input_filter`).

Spans: OpenInference's instrumentor (`openinference-instrumentation-openai-agents`) turns the
SDK's traces into OpenTelemetry spans: AGENT spans for the run and the agent, an LLM span per
model call with its messages, a TOOL span per tool call. They go over OTLP/HTTP to the turn's
`otlp_endpoint` and nowhere else (`examples.telemetry`), flushed before the turn returns; a turn
without an endpoint runs with the SDK's tracing off. The SDK's own processor, which exports to
OpenAI, is never made: the SDK gets a trace provider without it, and the instrumentor's
processor is the only one. The LLM spans of chat completions do not name the offered tools, so
a golden that `plangate dataset from-traces` makes from these spans replays with
`--model cassette-lenient` (a strict cassette refuses requests whose tools it does not know).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    OpenAIChatCompletionsModel,
    RunConfig,
    RunErrorHandlerInput,
    RunErrorHandlerResult,
    Runner,
    TResponseInputItem,
    set_trace_provider,
)
from agents.models.chatcmpl_converter import Converter
from agents.run import CallModelData, ModelInputData
from agents.tool_context import ToolContext
from agents.tracing.provider import DefaultTraceProvider
from openinference.instrumentation.openai_agents import OpenAIAgentsInstrumentor

from examples.support_desk import Clients, Desk, instructions
from examples.telemetry import TRACER_PROVIDER, Exporters
from plangate.harness import Tool
from plangate.replay.agents import TurnInput, TurnOutput

# The SDK's default trace provider would make a processor that exports to OpenAI: this one has
# none. The instrumentor then registers its own processor as the only one (exclusive).
set_trace_provider(DefaultTraceProvider())
OpenAIAgentsInstrumentor().instrument(tracer_provider=TRACER_PROVIDER, exclusive_processor=True)


def make(max_turns: int = 30, task_list: bool = True) -> SupportAgent:
    """The agent's turn function, with its variant settings.

    Args:
        max_turns: The most model calls one turn may make (the SDK's `max_turns`).
        task_list: Whether the agent keeps a todo list, pinned after its instructions.
    """
    return SupportAgent(max_turns=max_turns, task_list=task_list)


@dataclass(slots=True)
class SupportAgent:
    """The support desk's turn function: plangate calls it with each `TurnInput`."""

    max_turns: int
    """The most model calls one turn may make."""
    task_list: bool
    """Whether the agent keeps a todo list, pinned after its instructions."""
    clients: Clients = field(default_factory=Clients)
    """The OpenAI client of each endpoint, kept across turns."""
    exporters: Exporters = field(default_factory=Exporters)
    """The span exporter of each OTLP endpoint, kept across turns."""

    async def __call__(self, request: TurnInput) -> TurnOutput:
        """Run one turn: the SDK's loop over the desk's tools, at the turn's endpoints."""
        async with self.exporters.turn(request.otlp_endpoint):
            return await self._run(request)

    async def _run(self, request: TurnInput) -> TurnOutput:
        desk = Desk.for_turn(request.history, task_list=self.task_list)
        client = self.clients.of(request)
        agent = Agent(
            name="support-desk",
            instructions=instructions(task_list=self.task_list),
            model=OpenAIChatCompletionsModel(model=request.model_name, openai_client=client),
            tools=[function_tool(desk, t) for t in desk.tools.values()],
        )
        result = await Runner.run(
            agent,
            input_items(request.history, request.request),
            max_turns=self.max_turns,
            run_config=RunConfig(
                tracing_disabled=request.otlp_endpoint is None,
                trace_include_sensitive_data=True,  # the messages: what from-traces rebuilds
                call_model_input_filter=pin(desk),
            ),
            error_handlers={"max_turns": stopped},
        )
        answer = result.final_output
        if not isinstance(answer, Stopped):
            return TurnOutput(answer=str(answer))
        messages = Converter.items_to_messages(result.to_input_list())[len(request.history) :]
        return TurnOutput(answer=str(answer), messages=tuple(dict(m) for m in messages))

    async def aclose(self) -> None:
        """Close the clients and exporters (plangate calls it when it is done with the agent)."""
        await self.clients.aclose()
        await self.exporters.aclose()


def function_tool(desk: Desk, spec: Tool) -> FunctionTool:
    """One desk tool as an SDK function tool: the same name, description and JSON schema."""

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return desk.call(spec.name, arguments)

    return FunctionTool(
        name=spec.name,
        description=spec.description,
        params_json_schema=spec.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,  # the desk's schemas have optional fields
    )


def pin(desk: Desk) -> Callable[[CallModelData[Any]], ModelInputData]:
    """The SDK's model-input filter that pins the task list after the instructions."""

    def pinned(data: CallModelData[Any]) -> ModelInputData:
        plan = desk.pinned_plan()
        if plan is None:
            return data.model_data
        system: TResponseInputItem = {"role": "system", "content": plan}
        return ModelInputData(
            input=[system, *data.model_data.input], instructions=data.model_data.instructions
        )

    return pinned


class Stopped(str):
    """The final output of a run that reached `max_turns` (the answer's text)."""

    __slots__ = ()


def stopped(error: RunErrorHandlerInput[Any]) -> RunErrorHandlerResult:
    """The answer when the run reached `max_turns`: the turn ends, unfinished."""
    text = f"I stopped before finishing: {error.error}."
    return RunErrorHandlerResult(final_output=Stopped(text), include_in_history=True)


def input_items(history: Sequence[Mapping[str, Any]], request: str) -> list[TResponseInputItem]:
    """The conversation (OpenAI chat messages) and the new request as the SDK's input items."""
    items: list[TResponseInputItem] = []
    ids: dict[str, str] = {}  # the history's call ids → the agent's own (h + item position)
    for message in history:
        items.extend(_items(message, ids, len(items)))
    items.append({"role": "user", "content": request})
    return items


def _items(
    message: Mapping[str, Any], ids: dict[str, str], position: int
) -> list[TResponseInputItem]:
    role = message.get("role")
    content = str(message.get("content") or "")
    if role == "tool":
        call_id = str(message["tool_call_id"])
        output: TResponseInputItem = {
            "type": "function_call_output", "call_id": ids.get(call_id, call_id), "output": content
        }  # fmt: skip
        return [output]
    if role != "assistant":
        said_by_user: TResponseInputItem = {"role": "user", "content": content}
        return [said_by_user]
    calls: list[TResponseInputItem] = []
    for number, call in enumerate(message.get("tool_calls") or (), start=position + 1):
        ids[call["id"]] = own = f"h{number}"
        function = call["function"]
        arguments = function.get("arguments") or "{}"
        calls.append(
            {
                "type": "function_call",
                "call_id": own,
                "name": function["name"],
                "arguments": arguments,
            }
        )
    if not calls:
        said: TResponseInputItem = {"role": "assistant", "content": content}
        return [said]
    if not content:
        return calls
    # Text beside calls: an output message, which the SDK merges with the calls that follow.
    text: TResponseInputItem = {
        "type": "message",
        "role": "assistant",
        "id": "history",
        "status": "completed",
        "content": [{"type": "output_text", "text": content, "annotations": []}],
    }
    return [text, *calls]
