"""Replay: run one recorded turn again against a harness variant, and say where it diverged.

The conversation and state are restored as recorded before turn k (history, plan, features),
turn k runs with the chosen variant, and model and tool answers come from the chosen sources:
the cassette (strict: a request that no longer matches is an error naming the first difference;
lenient: served in order, drift flagged), a simulated model, or a live OpenAI-compatible model;
tools from the cassette (an unrecorded call gets a "not recorded" result) or live (a fresh
workspace, brought to its recorded state by re-running the earlier turns' recorded calls).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

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
from plangate.replay._dataset import DatasetError, GoldenDataset
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
    model: str
    recorded: list[str]
    """The recorded trajectory's steps."""
    replayed: list[str]
    """The replay's steps (empty when the replay failed)."""
    divergence: Divergence | None
    """None: the trajectories are identical."""
    result: TurnResult | None
    """The replayed turn (None when it failed)."""
    table: pa.Table | None
    """The replay's spans as a trace table."""
    drift: list[str] = field(default_factory=list)
    """Lenient cassette: where requests differed from the recording."""
    error: str | None = None
    """Why the replay could not complete (e.g. a strict cassette mismatch)."""
    stop_reason: str | None = None
    """How the replayed turn ended (for an agent behind the boundary, which has no `result`)."""

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
            "stop_reason": self.result.stop_reason if self.result else self.stop_reason,
            "drift": self.drift,
            "error": self.error,
        }


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
    variant: str | None = None,
    model: str = "cassette",
    tools: ToolSource = "cassette",
    tracer_provider: Any = None,
    seed: int | None = None,
    span_processor: SpanProcessor | None = None,
    endpoint: EndpointSettings | None = None,
) -> ReplayResult:
    """Replay one turn; a strict cassette mismatch or a failed model is in `error`, not raised.

    The spans go to a trace table (`table`), and also to `span_processor` if given (e.g. an
    export to Phoenix); or, with `tracer_provider`, only to that provider. `endpoint` sets an
    `openai:` model's timeout, retries and deadline (unset: from the environment).
    """
    if tracer_provider is not None and span_processor is not None:
        raise ValueError("give replay_turn a tracer_provider or a span_processor, not both")
    session_row = dataset.session(session_id)
    turn_row = dataset.turn(session_id, turn_index)
    chosen = variant or session_row["variant"]
    recorded = json.loads(turn_row["steps"])
    extra = (span_processor,) if span_processor is not None else ()
    provider, exporter = (
        (tracer_provider, None) if tracer_provider else trace_table_provider(*extra)
    )
    history = dataset.history(session_id, turn_index)
    cassette = turn_model(
        dataset, session_row, turn_index, model, history,
        domain=session_row["domain"], seed=seed, endpoint=endpoint,
    )  # fmt: skip
    memory_dir = _memory_before(session_row, turn_row)
    agent = Agent(
        model=cassette,
        variant=load_variant(chosen),
        tools=_tools(dataset, session_row, turn_index, tools),
        instructions=get_domain(session_row["domain"]).instructions,
        tracer_provider=provider,
        memory_dir=memory_dir,
    )
    session = agent.session(
        session_id, user_id=session_row["user_id"], metadata={"domain": session_row["domain"]}
    )
    session.restore(_state_before(session_row, turn_row, history))
    base = {
        "session_id": session_id,
        "turn_index": turn_index,
        "variant": chosen,
        "model": model,
        "recorded": recorded,
    }
    try:
        result = await session.run_turn(turn_row["request"])
    finally:
        if memory_dir is not None:  # the restored memory is the replay's own: leave nothing behind
            shutil.rmtree(memory_dir, ignore_errors=True)
    replayed = steps(result)
    served = cassette if isinstance(cassette, CassetteModel) else None
    table = exporter.table() if exporter is not None else None
    error = served.failure if served else None
    if error is None:  # never "identical": a dead endpoint's golden matches any dead endpoint
        error = infrastructure_failure(result.stop_reason, result.stop_detail)
    return ReplayResult(
        **base,
        replayed=replayed,
        divergence=first_divergence(recorded, replayed),
        result=result,
        table=table,
        drift=list(served.drift) if served else [],
        error=error,
    )


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
