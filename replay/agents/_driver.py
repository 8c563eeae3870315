"""Running an agent's turns behind plangate's local model endpoint.

The driver starts the endpoint (`plangate.replay.endpoint.ModelEndpoint`) and keeps `jobs`
slots; a slot is one route on the endpoint and one runner of the agent, and runs one turn at
a time. For each turn the slot's route serves that turn's model (a recording, a cassette, a
simulated model), so concurrent turns are kept apart by their route, never by timing. A
`command:` agent is started once per slot with `OPENAI_BASE_URL` pointing at the slot's route;
`python:` and `http:` agents get the route in the turn's `model_base_url`. The same route takes
the agent's spans over OTLP/HTTP (`OTEL_EXPORTER_OTLP_ENDPOINT`, or the turn's
`otlp_endpoint`); a turn's spans are those that started during it. It also answers the agent's
wrapped tools (`hermetic`, at `PLANGATE_TOOLS_URL` or the turn's `tools_url`) from the turn's
tool source: a recorder, the turn's recorded results, or none (the tools run as they are).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plangate.harness import (
    Message,
    ModelError,
    ModelResponse,
    ToolDefinition,
    ToolSourceError,
    message_from_dict,
)
from plangate.harness.models import Model, messages_from_wire, messages_to_wire
from plangate.replay._cassette import Recorder, ToolRecord
from plangate.replay._replay import ReplayedTurn, TurnToReplay
from plangate.replay._spans import SpanRecord
from plangate.replay.agents._boundary import (
    LOCAL_API_KEY,
    TOOLS_URL_ENV,
    AgentFailed,
    AgentRunner,
    AgentSpec,
    TurnInput,
    TurnOutput,
)
from plangate.replay.agents._observed import SeenTurn, turn_messages, turn_steps, turn_table
from plangate.replay.agents._runners import runner_for
from plangate.replay.endpoint import (
    MCP_LIST,
    CassetteTools,
    LiveTools,
    McpGateway,
    ModelEndpoint,
    RecordingTools,
    Route,
    ToolAnswer,
    ToolProvider,
    catalog_from,
    mcp_urls,
)

STATE_KEY = "agent_state"
"""The key of the agent's own state in a turn's `features_before` (JSON)."""

Tools = Recorder | Sequence[ToolRecord] | None
"""A turn's tool source: a recorder (record), the turn's recorded results (replay from the
cassette), or None (the agent's tools run as they are, recording nothing)."""


@dataclass(slots=True)
class _Switch:
    """The model a slot's route serves: the current turn's."""

    current: Model | None = None
    name: str = "plangate"

    async def request(
        self, messages: Sequence[Message], tools: Sequence[ToolDefinition]
    ) -> ModelResponse:
        if self.current is None:
            raise ModelError("no turn is running on this route: a call after the turn ended")
        return await self.current.request(messages, tools)


@dataclass(slots=True)
class _ToolSwitch:
    """What answers a slot's tool calls: the current turn's tool source."""

    current: ToolProvider | None = None

    def call(self, name: str, arguments: dict[str, Any]) -> ToolAnswer:
        return self._running().call(name, arguments)

    def result(
        self, name: str, arguments: dict[str, Any], status: str, result: str, error_type: str
    ) -> None:
        self._running().result(name, arguments, status, result, error_type)

    def _running(self) -> ToolProvider:
        if self.current is None:
            raise ToolSourceError("no turn is running on this route: a call after the turn ended")
        return self.current


@dataclass(slots=True)
class _Slot:
    route: Route
    switch: _Switch
    tools: _ToolSwitch
    runner: AgentRunner
    gateways: list[McpGateway]


@dataclass(frozen=True, slots=True, kw_only=True)
class DrivenTurn:
    """What running one turn gave: the agent's reply or its failure, and what the model saw."""

    output: TurnOutput | None
    """The agent's reply (None when it failed)."""
    stop_reason: str
    """`finished`, `model_error` (the turn's model failed and the agent gave up), `agent_error`."""
    detail: str
    """Why the turn stopped, when it did not finish."""
    calls: tuple[Any, ...]
    """The endpoint's observed calls (`ObservedCall`) of the turn, in order."""
    start_ns: int
    end_ns: int
    route: Route
    """The route the turn ran on: its spans arrive there (`spans`)."""

    def spans(self) -> list[SpanRecord]:
        """The agent's spans that started during the turn (those that have arrived)."""
        return self.route.spans_between(self.start_ns, self.end_ns)


@dataclass(slots=True)
class AgentDriver:
    """Runs one agent's turns, `jobs` at a time, each behind its own route."""

    agent: AgentSpec
    jobs: int = 1
    endpoint: ModelEndpoint = field(init=False)
    _free: asyncio.Queue[_Slot] | None = field(default=None, init=False)
    _slots: list[_Slot] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        self.agent.kind  # noqa: B018 - a bad spec is reported before anything starts
        self.endpoint = ModelEndpoint().start()

    async def run(
        self,
        turn: TurnInput,
        model: Model,
        tools: Tools = None,
        catalogs: Mapping[str, Sequence[dict[str, Any]]] | None = None,
    ) -> DrivenTurn:
        """Run `turn` with `model` behind its route; never raises for the agent's own failure.

        Args:
            turn: The turn (its endpoint fields are filled in here).
            model: What the route's model endpoint serves during the turn.
            tools: What answers the agent's wrapped tools and its MCP servers' calls: a
                `Recorder` (they run, and their results are recorded into it), the turn's
                `ToolRecord`s (they are answered from the cassette and never run), or None
                (they run, nothing is recorded; the turn's `tools_url` is None).
            catalogs: The recorded tool list of each MCP server, by name, to serve instead of
                asking the server (replay).
        """
        slot = await self._take()
        slot.switch.current = model
        slot.tools.current = _provider(tools)
        for gateway in slot.gateways:
            gateway.session = turn.session_id
            gateway.catalog = (catalogs or {}).get(gateway.name)
        first = len(slot.route.calls)
        start = time.time_ns()
        output: TurnOutput | None = None
        failure = ""
        try:
            routed = self._routed(turn, slot, model, served=tools is not None)
            output = await slot.runner.run_turn(routed)
        except AgentFailed as exc:
            failure = str(exc)
        finally:
            slot.switch.current = slot.tools.current = None
            assert self._free is not None
            self._free.put_nowait(slot)
        end = time.time_ns()
        calls = tuple(slot.route.calls[first:])
        stop, detail = _stop(output, failure, calls)
        return DrivenTurn(
            output=output, stop_reason=stop, detail=detail, calls=calls, start_ns=start,
            end_ns=end, route=slot.route,
        )  # fmt: skip

    async def replay(self, turn: TurnToReplay) -> ReplayedTurn:
        """Run a recorded turn again: its conversation and the agent's own state restored.

        The turn's `hermetic` tools are answered from its recorded results (tools `cassette`;
        an unrecorded call gets a "Not recorded" result), or run (`live`).
        """
        session, row = turn.session, turn.turn
        history = [message_from_dict(m) for m in turn.history]
        given = TurnInput(
            session_id=session["session_id"], turn_index=row["turn_index"],
            request=row["request"], history=tuple(messages_to_wire(history)),
            user_id=session["user_id"],
            state=json.loads(row["features_before"] or "{}").get(STATE_KEY),
        )  # fmt: skip
        records = (
            turn.dataset.tool_records(given.session_id, given.turn_index)
            if turn.tools == "cassette"
            else None
        )
        catalogs = self._catalogs(turn.dataset) if self.agent.mcp else None
        driven = await self.run(given, turn.model, tools=records, catalogs=catalogs)
        await self.settle(driven)
        seen, _ = seen_turn(given, driven, self.agent, history)
        return ReplayedTurn(
            variant=self.agent.label, steps=turn_steps(seen), stop_reason=driven.stop_reason,
            detail=driven.detail, answer=seen.answer if driven.output is not None else None,
            table=turn_table(seen, driven.spans()),
        )  # fmt: skip

    def _catalogs(self, dataset: Any) -> dict[str, list[dict[str, Any]]]:
        """The tool list recorded for each of the agent's MCP servers, anywhere in `dataset`."""
        records = dataset.tool_records_named(MCP_LIST)
        found = {name: catalog_from(records, name) for name in self.agent.mcp}
        return {name: listed for name, listed in found.items() if listed is not None}

    def _routed(self, turn: TurnInput, slot: _Slot, model: Model, *, served: bool) -> TurnInput:
        route = slot.route
        return dataclasses.replace(
            turn,
            model_base_url=route.base_url,
            tools_url=route.tools_url if served else None,
            otlp_endpoint=route.otlp_endpoint,
            model_api_key=LOCAL_API_KEY,
            model_name=turn.model_name or getattr(model, "name", "plangate"),
            mcp=mcp_urls(slot.gateways),
        )

    async def _take(self) -> _Slot:
        if self._free is None:
            self._free = asyncio.Queue()
            for _ in range(self.jobs):
                self._free.put_nowait(self._new_slot())
        return await self._free.get()

    def _new_slot(self) -> _Slot:
        switch, tools = _Switch(), _ToolSwitch()
        route = self.endpoint.open_route(switch, tools=tools)
        gateways = [McpGateway(n, s, tools).start() for n, s in self.agent.mcp.items()]
        env = {
            **mcp_urls(gateways),
            TOOLS_URL_ENV: route.tools_url,
            "OPENAI_BASE_URL": route.base_url,
            "OPENAI_API_KEY": LOCAL_API_KEY,
            "OTEL_EXPORTER_OTLP_ENDPOINT": route.otlp_endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{route.otlp_endpoint}/v1/traces",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # ms: a turn's spans arrive soon after it
        }
        runner = runner_for(self.agent, env)
        slot = _Slot(route=route, switch=switch, tools=tools, runner=runner, gateways=gateways)
        self._slots.append(slot)
        return slot

    async def close_agents(self) -> None:
        """Stop every runner (a `command:` agent exits, flushing its spans); the endpoint stays."""
        for slot in self._slots:
            await slot.runner.aclose()

    async def settle(self, turn: DrivenTurn, seconds: float = 2.0) -> None:
        """Wait (at most `seconds`) for the spans of `turn`, if its agent sends spans at all."""
        if turn.route.spans:
            await asyncio.to_thread(
                turn.route.wait_for_turn, turn.start_ns, turn.end_ns, timeout=seconds
            )

    async def aclose(self) -> None:
        """Stop every runner, the MCP gateways and the endpoint."""
        await self.close_agents()
        for slot in self._slots:
            for gateway in slot.gateways:
                await asyncio.to_thread(gateway.close)
        self._slots.clear()
        self.endpoint.close()

    async def __aenter__(self) -> AgentDriver:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def seen_turn(
    turn: TurnInput, driven: DrivenTurn, agent: AgentSpec, history: Sequence[Message]
) -> tuple[SeenTurn, list[Message]]:
    """The turn as plangate saw it, and its messages: the agent's own, or the endpoint's view."""
    answer = driven.output.answer if driven.output is not None else ""
    seen = SeenTurn(
        session_id=turn.session_id, turn_index=turn.turn_index, request=turn.request,
        answer=answer, stop_reason=driven.stop_reason, detail=driven.detail, calls=driven.calls,
        start_ns=driven.start_ns, end_ns=driven.end_ns, agent=agent.label,
    )  # fmt: skip
    given = driven.output.messages if driven.output is not None else None
    if given is not None:
        messages = list(messages_from_wire(list(given)))
    else:
        messages = turn_messages(history, driven.calls, turn.request, answer)
    return seen, messages


def _provider(tools: Tools) -> ToolProvider:
    if tools is None:
        return LiveTools()
    if isinstance(tools, Recorder):
        return RecordingTools(tools)
    return CassetteTools(tuple(tools))


def _stop(output: TurnOutput | None, failure: str, calls: Sequence[Any]) -> tuple[str, str]:
    """How the turn ended: a model failure the agent could not get past is the model's."""
    if output is not None:
        return "finished", ""
    errors = [c.error for c in calls if c.error]
    if errors:
        return "model_error", errors[-1]
    return "agent_error", failure
