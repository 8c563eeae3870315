"""plangate's own agent behind the agent boundary, as a team's would plug in.

`python:plangate.replay.agents:reference` (keyword arguments `variant` and `domain`) runs the
reference planning agent with one of its harness variants over a demo domain, knowing of
plangate only what any agent knows: the `TurnInput`. It calls its model at the turn's
OpenAI-compatible endpoint, its domain's tools are `hermetic` (recorded, then served from the
cassette), its whole session (history, plan, features) travels as the turn's opaque `state`,
and it sends its OpenInference spans to the turn's OTLP endpoint. So the boundary is proved on
a real planning harness, and its variants gate the same way either side of it.

The fast path stays `ReferenceAgent` (in process, on the served model directly). Not carried
across the boundary: a memory folder (a variant with file memory remembers nothing between
turns here), and a domain's tool state between turns that run on different slots (record with
one job when the domain's tools keep state a later turn reads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk.trace import TracerProvider

from plangate.harness import (
    ERROR_STOP_REASONS,
    Agent,
    Domain,
    Tool,
    Variant,
    get_domain,
    load_variant,
)
from plangate.harness.models import OpenAIModel, messages_to_wire
from plangate.replay.agents._boundary import TurnInput, TurnOutput
from plangate.replay.agents._hermetic import hermetic


def reference(variant: str = "alyx", domain: str = "support") -> ReferenceTurns:
    """The reference agent's turn function, with its harness variant over a demo domain.

    Raises:
        ConfigError: No such variant or domain (the message lists the choices).
    """
    return ReferenceTurns(variant=load_variant(variant), domain=get_domain(domain))


class TurnFailed(RuntimeError):
    """The turn's model or tools failed for good: the agent could not complete it."""


@dataclass(slots=True)
class ReferenceTurns:
    """Runs one turn of the reference agent from a `TurnInput`."""

    variant: Variant
    domain: Domain
    workspaces: dict[str, Sequence[Tool]] = field(default_factory=dict)
    """Each session's tools (its own workspace), kept across its turns."""
    models: dict[tuple[str, str], OpenAIModel] = field(default_factory=dict)
    """A model client per endpoint and model name, kept across turns (its connections too)."""
    providers: dict[str, TracerProvider] = field(default_factory=dict)
    """A tracer provider per OTLP endpoint, flushed at the end of every turn."""

    async def __call__(self, turn: TurnInput) -> TurnOutput:
        """Run the turn from the state the last one returned; the new state comes back."""
        provider = self._provider(turn.otlp_endpoint)
        tools = self._tools(turn.session_id)
        agent = Agent(
            model=self._model(turn),
            variant=self.variant,
            tools=lambda: tools,
            instructions=self.domain.instructions,
            tracer_provider=provider,
        )
        metadata = {"domain": self.domain.name}
        session = agent.session(turn.session_id, user_id=turn.user_id, metadata=metadata)
        if turn.state is not None:
            session.restore(turn.state)
        before = len(session.history)
        try:
            result = await session.run_turn(turn.request)
        finally:
            if provider is not None:
                provider.force_flush()  # its spans reach plangate before the turn returns
        if result.stop_reason in ERROR_STOP_REASONS:
            raise TurnFailed(f"{result.stop_reason}: {result.stop_detail}")
        return TurnOutput(
            answer=result.answer,
            state=session.state(),
            messages=tuple(messages_to_wire(session.history[before:])),
        )

    async def aclose(self) -> None:
        """Close the model clients and the tracer providers (plangate calls it at the end)."""
        for model in self.models.values():
            await model.aclose()
        for provider in self.providers.values():
            provider.shutdown()
        self.models.clear()
        self.providers.clear()

    def _model(self, turn: TurnInput) -> OpenAIModel:
        key = (turn.model_base_url, turn.model_name or "plangate")
        if key not in self.models:
            self.models[key] = OpenAIModel(
                model=key[1],
                api_key=turn.model_api_key,
                base_url=key[0],
                max_retries=0,  # plangate's endpoint answers at once, or the cassette says no
            )
        return self.models[key]

    def _tools(self, session_id: str) -> Sequence[Tool]:
        if session_id not in self.workspaces:
            self.workspaces[session_id] = [_hermetic(t) for t in self.domain.make_tools()]
        return self.workspaces[session_id]

    def _provider(self, endpoint: str | None) -> TracerProvider | None:
        """A tracer provider sending spans to `endpoint` in batches (None: no spans)."""
        if not endpoint:
            return None
        if endpoint not in self.providers:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace import SpanLimits
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            provider = TracerProvider(span_limits=SpanLimits(max_span_attributes=10_000))
            exporter = OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces")
            provider.add_span_processor(BatchSpanProcessor(exporter))
            self.providers[endpoint] = provider
        return self.providers[endpoint]


def _hermetic(tool: Tool) -> Tool:
    return Tool(
        name=tool.name,
        description=tool.description,
        parameters=tool.parameters,
        function=hermetic(tool.function, name=tool.name),
        is_async=tool.is_async,
    )
