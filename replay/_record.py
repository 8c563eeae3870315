"""Recording: run multi-turn sessions through the reference agent and keep them as a golden.

Every model exchange and every work-tool result is recorded into the cassette, the spans into
the trace table, and each turn's state before it (plan, features) and trajectory into the turns
table. Secrets are redacted before anything is written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from opentelemetry.sdk.trace import SpanProcessor

from plangate.harness import (
    Agent,
    Session,
    TurnResult,
    get_domain,
    load_variant,
    message_to_dict,
    model_from_spec,
)
from plangate.harness.features import Memory
from plangate.replay._cassette import Recorder, RecordingModel, fingerprint_of, recording_tools
from plangate.replay._dataset import (
    MODEL_CASSETTE,
    SESSIONS,
    TOOL_CASSETTE,
    TURNS,
    DatasetError,
    GoldenDataset,
    table_of,
)
from plangate.replay._exporter import trace_table_provider
from plangate.replay._redact import redactor_for
from plangate.replay.schema import (
    ERROR_STOP_REASONS,
    SESSION_ID,
    SPAN_KIND,
    STATUS_MESSAGE,
    STOP_REASON,
    TOOL_ARGS,
    TOOL_NAME,
    TURN_INDEX,
    concat_tables,
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRequest:
    """One session to record: its turns' requests and rubrics."""

    session_id: str
    requests: tuple[str, ...]
    rubrics: tuple[dict[str, Any] | None, ...] = ()
    """Per turn (may be shorter than `requests`)."""
    user_id: str = "user"
    model: str | None = None
    """Overrides the recording's model spec for this session (e.g. a failure model)."""
    seed: int | None = None


@dataclass(slots=True)
class RecordedSession:
    """What one recorded session produced, before redaction."""

    session: dict[str, Any]
    turns: list[dict[str, Any]] = field(default_factory=list)


def steps(result: TurnResult) -> list[str]:
    """A turn's trajectory as comparable steps: calls, plan changes, texts, and the stop."""
    out: list[str] = []
    plans = [e for e in result.events if e.kind == "plan_updated"]
    calls = list(result.tool_calls)
    for iteration in range(0, result.iterations + 1):
        out.extend(
            f"call {c.name} {c.arguments} -> {c.status}" for c in calls if c.iteration == iteration
        )
        out.extend(f"plan {e.detail}" for e in plans if e.iteration == iteration)
    out.append(f"stop {result.stop_reason}")
    return out


def load_requests(text: str, where: str) -> list[SessionRequest]:
    """Parse a requests file: a JSON list of sessions (or JSON Lines, one session a line).

    A session is `{"session_id": "...", "turns": ["request", ...] or [{"request": "...",
    "rubric": {...}}, ...], "user_id"?: "...", "model"?: "sim:looper", "seed"?: 1}`.
    """
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        try:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DatasetError(f"{where}: neither JSON nor JSON Lines ({exc})") from exc
    if not isinstance(data, list):
        raise DatasetError(f"{where}: expected a list of sessions")
    if not data:
        raise DatasetError(f"{where}: holds no sessions; expected a JSON list of sessions")
    return [_session_request(entry, f"{where}: session {i}") for i, entry in enumerate(data)]


def _session_request(entry: Any, where: str) -> SessionRequest:
    if not isinstance(entry, dict) or not isinstance(entry.get("session_id"), str):
        raise DatasetError(f"{where}: expected an object with a 'session_id' string")
    turns = entry.get("turns")
    if not isinstance(turns, list) or not turns:
        raise DatasetError(f"{where}: 'turns' must be a non-empty list")
    requests: list[str] = []
    rubrics: list[dict[str, Any] | None] = []
    for index, turn in enumerate(turns):
        if isinstance(turn, str):
            requests.append(turn)
            rubrics.append(None)
        elif isinstance(turn, dict) and isinstance(turn.get("request"), str):
            requests.append(turn["request"])
            rubrics.append(turn.get("rubric"))
        else:
            raise DatasetError(
                f"{where}: turns[{index}]: expected a request string or {{'request': ...}}"
            )
    return SessionRequest(
        session_id=entry["session_id"],
        requests=tuple(requests),
        rubrics=tuple(rubrics),
        user_id=str(entry.get("user_id", "user")),
        model=entry.get("model"),
        seed=entry.get("seed"),
    )


async def record(
    requests: Sequence[SessionRequest],
    *,
    name: str,
    variant: str,
    model: str,
    domain: str = "observability",
    seed: int = 0,
    description: str = "",
    redact: Iterable[str] = (),
    memory_dir: Path | None = None,
    span_processor: SpanProcessor | None = None,
    allow_errors: bool = False,
) -> GoldenDataset:
    """Run every session and return the golden dataset (redacted, not yet written).

    `span_processor` also receives every span (e.g. an export to Phoenix); the dataset's trace
    table is the same with or without it.

    Raises:
        DatasetError: A turn ended in an infrastructure error (the model endpoint kept
            failing, the tools' source failed) and `allow_errors` is false: such a golden
            records nothing the agent did, and a replay against a dead endpoint would call it
            identical.
    """
    extra = (span_processor,) if span_processor is not None else ()
    redactor = redactor_for(redact)
    sessions: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    exchanges: list[dict[str, Any]] = []
    tool_rows: list[dict[str, Any]] = []
    span_tables: list[pa.Table] = []
    for request in requests:
        recorder = Recorder()
        provider, exporter = trace_table_provider(*extra)
        spec = request.model or model
        chosen_seed = request.seed if request.seed is not None else seed
        recorded = await _record_session(
            request, recorder, provider, variant, spec, domain, chosen_seed, memory_dir
        )
        provider.shutdown()
        sessions.append(recorded.session)
        turns.extend(recorded.turns)
        exchanges.extend(exchange_row(e) for e in recorder.exchanges)
        tool_rows.extend(tool_row(r) for r in recorder.tool_records)
        span_tables.append(exporter.table())
    if not allow_errors:
        refuse_errors(turns, concat_tables(span_tables))
    dataset = GoldenDataset(
        name=name,
        description=description,
        sessions=table_of(redactor.data(sessions), SESSIONS),
        turns=table_of(redactor.data(turns), TURNS),
        spans=redactor.table(concat_tables(span_tables)),
        model_cassette=table_of(refingerprint(redactor.data(exchanges)), MODEL_CASSETTE),
        tool_cassette=table_of(redactor.data(tool_rows), TOOL_CASSETTE),
    )
    return dataset


def refuse_errors(turns: list[dict[str, Any]], spans: pa.Table) -> None:
    errored = [t for t in turns if t[STOP_REASON] in ERROR_STOP_REASONS]
    if not errored:
        return
    first = errored[0]
    agents = spans.filter(pc.equal(spans[SPAN_KIND], "AGENT")).to_pylist()
    detail = next(
        (
            a[STATUS_MESSAGE]
            for a in agents
            if (a[SESSION_ID], a[TURN_INDEX]) == (first[SESSION_ID], first[TURN_INDEX])
        ),
        None,
    )
    raise DatasetError(
        f"{len(errored)} of {len(turns)} recorded turns ended in {first[STOP_REASON]} (first: "
        f"session {first[SESSION_ID]!r} turn {first[TURN_INDEX]}: {detail or 'no detail'}); "
        "nothing was written: fix the model endpoint or the tools, or pass --allow-errors to "
        "keep them"
    )


async def _record_session(
    request: SessionRequest,
    recorder: Recorder,
    provider: Any,
    variant: str,
    spec: str,
    domain_name: str,
    seed: int,
    memory_dir: Path | None = None,
) -> RecordedSession:
    domain = get_domain(domain_name)
    agent = Agent(
        model=RecordingModel(model_from_spec(spec, domain=domain, seed=seed), recorder),
        variant=load_variant(variant),
        tools=lambda: recording_tools(domain.make_tools(), recorder),
        instructions=domain.instructions,
        tracer_provider=provider,
        memory_dir=memory_dir,
    )
    session = agent.session(
        request.session_id, user_id=request.user_id, metadata={"domain": domain.name}
    )
    recorded = RecordedSession(
        session={
            SESSION_ID: request.session_id,
            "user_id": request.user_id,
            "variant": variant,
            "model": spec,
            "domain": domain.name,
            "seed": seed,
            "source": "plangate",
            "metadata": json.dumps({"domain": domain.name}),
        }
    )
    for index, text in enumerate(request.requests):
        rubric = request.rubrics[index] if index < len(request.rubrics) else None
        recorded.turns.append(await _record_turn(session, recorder, index, text, rubric))
    return recorded


async def _record_turn(
    session: Session, recorder: Recorder, index: int, text: str, rubric: dict[str, Any] | None
) -> dict[str, Any]:
    # A deep copy now: the state holds live objects that the turn is about to change.
    before = json.loads(json.dumps(session.state()))
    memory = next((f for f in session.features if isinstance(f, Memory)), None)
    recorder.begin_turn(session.session_id, index)
    result = await session.run_turn(text)
    return {
        SESSION_ID: session.session_id,
        TURN_INDEX: index,
        "request": text,
        "rubric": json.dumps(rubric, sort_keys=True) if rubric is not None else None,
        "plan_before": json.dumps(before["plan"]) if before["plan"] is not None else None,
        "features_before": json.dumps(before["features"], sort_keys=True),
        "memory_before": memory.read() if memory is not None else None,
        "messages": json.dumps([message_to_dict(m) for m in result.messages], ensure_ascii=False),
        "steps": json.dumps(steps(result), ensure_ascii=False),
        STOP_REASON: result.stop_reason,
        "answer": result.answer,
    }


def exchange_row(exchange: Any) -> dict[str, Any]:
    return {
        SESSION_ID: exchange.session_id,
        TURN_INDEX: exchange.turn_index,
        "iteration": exchange.iteration,
        "fingerprint": exchange.fingerprint,
        "request": exchange.request,
        "tools": exchange.tools,
        "response": exchange.response,
    }


def refingerprint(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Fingerprints of the redacted requests (what a replay will send), then JSON columns."""
    out = []
    for row in rows:
        out.append(
            {
                **row,
                "fingerprint": fingerprint_of(row["request"], row["tools"]),
                "request": json.dumps(row["request"], ensure_ascii=False),
                "tools": json.dumps(row["tools"]),
                "response": json.dumps(row["response"], ensure_ascii=False),
            }
        )
    return out


def tool_row(record: Any) -> dict[str, Any]:
    return {
        SESSION_ID: record.session_id,
        TURN_INDEX: record.turn_index,
        "position": record.position,
        TOOL_NAME: record.tool_name,
        TOOL_ARGS: record.tool_args,
        "status": record.status,
        "result": record.result,
        "error_type": record.error_type,
    }
