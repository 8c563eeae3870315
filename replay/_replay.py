"""Replay: run one recorded turn again with an agent, and say where it diverged.

One path for every agent (`ReplayAgent`): plangate's own with a harness variant
(`ReferenceAgent`), or a team's behind the agent boundary (`AgentDriver`). The conversation and
state are restored as recorded before turn k (history; for the reference agent also plan,
features and memory), turn k runs, and model and tool answers come from the chosen sources:
the cassette (strict: a request that no longer matches is an error naming the first difference;
lenient: served in order, drift flagged), a simulated model, or a live OpenAI-compatible model;
tools from the cassette (an unrecorded call gets a "not recorded" result) or live (a fresh
workspace, brought to its recorded state by re-running the earlier turns' recorded calls).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import pyarrow as pa
from opentelemetry.sdk.trace import SpanProcessor

from plangate.harness import (
    Agent,
    EndpointSettings,
    Model,
    SessionState,
    Tool,
    TurnResult,
    get_domain,
    infrastructure_failure,
    load_variant,
    model_from_spec,
    session_state,
)
from plangate.replay._cassette import CassetteModel, calls_of, cassette_tools
from plangate.replay._dataset import AGENT_SOURCE, DatasetError, GoldenDataset
from plangate.replay._exporter import trace_table_provider
from plangate.replay._record import steps
from plangate.replay.schema import SESSION_ID, TURN_INDEX

ToolSource = Literal["cassette", "live"]
"""Where a replayed turn's tool results come from."""
TOOL_SOURCES: tuple[ToolSource, ...] = get_args(ToolSource)
CASSETTE_MODELS = ("cassette", "cassette-lenient")
"""The model specs that answer from the recording: strictly, or leniently (drift flagged)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Divergence:
    """Where a replayed trajectory first differs from the recorded one."""

    step: int
    """Index of the first differing step (0-based)."""
    recorded: str | None
    """The recorded step there (None: the recording had ended)."""
    replayed: str | None
    """The replayed step there (None: the replay had ended)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """One replayed turn."""

    session_id: str
    turn_index: int
    variant: str
    """The agent that replayed it: a harness variant, or a team's agent's label."""
    model: str
    recorded: list[str]
    """The recorded trajectory's steps."""
    replayed: list[str]
    """The replay's steps (empty when the replay failed)."""
    divergence: Divergence | None
    """None: the trajectories are identical."""
    table: pa.Table | None
    """The replay's spans as a trace table."""
    stop_reason: str
    """How the replayed turn ended."""
    answer: str | None = None
    """The replayed turn's final answer (None when it failed)."""
    result: TurnResult | None = None
    """The reference agent's whole turn (None for a team's agent, or when it failed)."""
    drift: list[str] = field(default_factory=list)
    """Lenient cassette: where requests differed from the recording."""
    error: str | None = None
    """Why the replay could not complete (e.g. a strict cassette mismatch)."""
    seconds: float = 0.0
    """How long the replay of the turn took, wall clock (its share of a replay's cost)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able summary (what `plangate replay --json` prints per turn)."""
        return {
            "session_id": self.session_id,
            "turn_index": self.turn_index,
            "variant": self.variant,
            "model": self.model,
            "identical": self.divergence is None and self.error is None,
            "divergence": None
            if self.divergence is None
            else {
                "step": self.divergence.step,
                "recorded": self.divergence.recorded,
                "replayed": self.divergence.replayed,
            },
            "stop_reason": self.stop_reason,
            "drift": self.drift,
            "error": self.error,
            "seconds": round(self.seconds, 6),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnToReplay:
    """A recorded turn made ready to run again: what every agent's replay is given."""

    dataset: GoldenDataset
    session: dict[str, Any]
    """The session's row (`sessions.parquet`)."""
    turn: dict[str, Any]
    """The turn's row (`turns.parquet`)."""
    history: list[dict[str, Any]]
    """The conversation before the turn, as recorded (plangate's message dicts)."""
    model: Model
    """What answers the turn's model calls: its cassette, or a model a spec named."""
    tools: ToolSource
    """Where its tool results come from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayedTurn:
    """What an agent's replay of a turn gave."""

    variant: str
    """The agent that ran it, as reports name it."""
    steps: list[str]
    stop_reason: str
    detail: str = ""
    """Why the turn stopped, when it did not finish."""
    answer: str | None = None
    table: pa.Table | None = None
    result: TurnResult | None = None


class ReplayAgent(Protocol):
    """An agent that can run a recorded turn again.

    plangate's own (`ReferenceAgent`), or a team's behind the agent boundary
    (`plangate.replay.agents.AgentDriver`): one replay path for both.
    """

    async def replay(self, turn: TurnToReplay) -> ReplayedTurn:
        """Run the turn from its restored state; the agent's own failure is in the result."""
        ...


def first_divergence(recorded: Sequence[str], replayed: Sequence[str]) -> Divergence | None:
    """The first index where two step lists differ (None when equal)."""
    for index in range(max(len(recorded), len(replayed))):
        old = recorded[index] if index < len(recorded) else None
        new = replayed[index] if index < len(replayed) else None
        if old != new:
            return Divergence(step=index, recorded=old, replayed=new)
    return None


async def replay_turn(
    dataset: GoldenDataset,
    session_id: str,
    turn_index: int,
    *,
    agent: ReplayAgent | None = None,
    model: str = "cassette",
    tools: ToolSource = "cassette",
    seed: int | None = None,
    endpoint: EndpointSettings | None = None,
) -> ReplayResult:
    """Replay one turn with `agent` (default: plangate's, with the recording's variant).

    A strict cassette mismatch or a failed model is in `error`, not raised. `endpoint` sets an
    `openai:` model's timeout, retries and deadline (unset: from the environment).
    """
    if tools not in TOOL_SOURCES:
        raise DatasetError(f"unknown tool source {tools!r}; choose one of: cassette, live")
    began = time.perf_counter()
    session_row = dataset.session(session_id)
    turn_row = dataset.turn(session_id, turn_index)
    history = dataset.history(session_id, turn_index)
    served = turn_model(
        dataset, session_row, turn_index, model, history,
        domain=session_row.get("domain") or "support", seed=seed, endpoint=endpoint,
    )  # fmt: skip
    turn = TurnToReplay(
        dataset=dataset, session=session_row, turn=turn_row, history=history, model=served,
        tools=tools,
    )  # fmt: skip
    replayed = await (agent or ReferenceAgent()).replay(turn)
    recorded = json.loads(turn_row["steps"])
    cassette = served if isinstance(served, CassetteModel) else None
    error = cassette.failure if cassette is not None else None
    if error is None:  # never "identical": a dead endpoint's golden matches any dead endpoint
        error = infrastructure_failure(replayed.stop_reason, replayed.detail)
    return ReplayResult(
        session_id=session_id, turn_index=turn_index, variant=replayed.variant, model=model,
        recorded=recorded, replayed=replayed.steps,
        divergence=first_divergence(recorded, replayed.steps), table=replayed.table,
        stop_reason=replayed.stop_reason, answer=replayed.answer, result=replayed.result,
        drift=list(cassette.drift) if cassette is not None else [], error=error,
        seconds=time.perf_counter() - began,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class ReferenceAgent:
    """plangate's own agent with a harness variant, as a `ReplayAgent`.

    It runs in this process, on the served model directly: the conversation, plan, features
    and memory restored as recorded before the turn. Its spans go to the result's trace table,
    and also to `span_processor` if given (an export to Phoenix, say); or, with
    `tracer_provider`, only to that provider.
    """

    variant: str | None = None
    """The harness variant (name or .toml path); None: the one the session was recorded with."""
    _: KW_ONLY
    tracer_provider: Any = None
    span_processor: SpanProcessor | None = None

    def __post_init__(self) -> None:
        if self.tracer_provider is not None and self.span_processor is not None:
            raise ValueError("give ReferenceAgent a tracer_provider or a span_processor, not both")

    async def replay(self, turn: TurnToReplay) -> ReplayedTurn:
        """Run the turn with the variant; its spans become the result's trace table."""
        session_row, turn_row = turn.session, turn.turn
        domain = session_row.get("domain")
        if domain is None or session_row.get("source") == AGENT_SOURCE:
            raise DatasetError(
                f"session {session_row[SESSION_ID]!r} was not recorded from plangate's agent; "
                "replay it with the agent that made it (--agent SPEC)"
            )
        chosen = self.variant or session_row["variant"]
        extra = (self.span_processor,) if self.span_processor is not None else ()
        provider, exporter = (
            (self.tracer_provider, None) if self.tracer_provider else trace_table_provider(*extra)
        )
        memory_dir = _memory_before(session_row, turn_row)
        agent = Agent(
            model=turn.model,
            variant=load_variant(chosen),
            tools=_tools(turn.dataset, session_row, turn_row[TURN_INDEX], turn.tools),
            instructions=get_domain(domain).instructions,
            tracer_provider=provider,
            memory_dir=memory_dir,
        )
        session = agent.session(
            session_row[SESSION_ID], user_id=session_row["user_id"], metadata={"domain": domain}
        )
        session.restore(_state_before(session_row, turn_row, turn.history))
        try:
            result = await session.run_turn(turn_row["request"])
        finally:
            if memory_dir is not None:  # the restored memory is the replay's own: remove it
                shutil.rmtree(memory_dir, ignore_errors=True)
        return ReplayedTurn(
            variant=chosen, steps=steps(result), stop_reason=result.stop_reason,
            detail=result.stop_detail, answer=result.answer, result=result,
            table=exporter.table() if exporter is not None else None,
        )  # fmt: skip


def turn_model(
    dataset: GoldenDataset,
    session_row: dict[str, Any],
    turn_index: int,
    spec: str,
    history: Sequence[dict[str, Any]],
    *,
    domain: str,
    seed: int | None = None,
    endpoint: EndpointSettings | None = None,
) -> Model:
    """The model a replayed turn is served by: the turn's cassette, or a model a spec names.

    A simulated model works over `domain`'s tasks, with the session's seed unless `seed` is
    given, and goes on with the session's tool-call ids after the calls in `history` (the
    turn's messages before it), as the recording's one model per session did.
    """
    if spec in CASSETTE_MODELS:
        exchanges = dataset.exchanges(session_row[SESSION_ID], turn_index)
        return CassetteModel(exchanges, mode="strict" if spec == "cassette" else "lenient")
    chosen = seed if seed is not None else session_row.get("seed") or 0
    before = sum(len(m.get("tool_calls") or ()) for m in history)
    return model_from_spec(
        spec, domain=get_domain(domain), seed=chosen, endpoint=endpoint, ids_after=before
    )


def _tools(
    dataset: GoldenDataset, session_row: dict[str, Any], turn_index: int, source: ToolSource
) -> Callable[[], Sequence[Tool]]:
    domain = get_domain(session_row["domain"])
    session_id = session_row[SESSION_ID]
    if source == "cassette":
        records = dataset.tool_records(session_id, turn_index)
        return lambda: cassette_tools(domain.make_tools(), records)
    if source != "live":
        raise DatasetError(f"unknown tool source {source!r}; choose one of: cassette, live")
    earlier = [r for r in dataset.tool_records(session_id) if r.turn_index < turn_index]

    def live() -> Sequence[Tool]:
        workspace = list(domain.make_tools())
        offered = {t.name: t for t in workspace}
        for call in calls_of(earlier):  # bring the fresh workspace to its state before turn k
            _replay_call(call, offered)
        return workspace

    return live


def _replay_call(call: Any, offered: dict[str, Tool]) -> None:
    tool = offered.get(call.name)
    if tool is None or tool.is_async:
        return
    try:
        tool.function(**json.loads(call.arguments))
    except Exception:  # a call that failed when recorded fails again: its effect is the same
        return


def _memory_before(session_row: dict[str, Any], turn_row: dict[str, Any]) -> Path | None:
    """A private memory folder holding the user's memory as it was before the turn."""
    text = turn_row.get("memory_before")
    if text is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="plangate-replay-memory-"))
    space = json.loads(session_row.get("metadata") or "{}").get("space", "default")
    target = folder / session_row["user_id"] / f"{space}.md"
    target.parent.mkdir(parents=True)
    target.write_text(text, encoding="utf-8")
    return folder


def _state_before(
    session_row: dict[str, Any], turn_row: dict[str, Any], history: list[dict[str, Any]]
) -> SessionState:
    """The session's saved state as it was before the turn, in the harness's own layout."""
    return session_state(
        session_id=session_row[SESSION_ID],
        user_id=session_row["user_id"],
        metadata=json.loads(session_row.get("metadata") or "{}"),
        turns=turn_row[TURN_INDEX],
        history=history,
        plan=json.loads(turn_row["plan_before"]) if turn_row["plan_before"] else None,
        features=json.loads(turn_row["features_before"] or "{}"),
    )
