"""Recording and replaying a team's own agent through the agent boundary.

`record_agent` runs sessions through any agent (`AgentSpec`) behind plangate's local model
endpoint and keeps them as a golden dataset in the same format as the reference agent's: each
model exchange in the cassette, the turns with their requests, messages and steps, and a trace
table built from what the endpoint saw (or from the agent's own spans). Its turns replay with
`replay_turn(..., agent=AgentDriver(spec))`, the one replay path for every agent: the driver
restores a turn's conversation and the agent's own state. The agent's `hermetic` tools are
recorded into the golden's tool cassette, and answered from it on replay (or run live).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable, Sequence
from typing import Any

from plangate.harness import (
    EndpointSettings,
    Message,
    get_domain,
    message_to_dict,
    model_from_spec,
)
from plangate.harness.models import messages_to_wire
from plangate.replay._cassette import Recorder, RecordingModel
from plangate.replay._dataset import (
    AGENT_SOURCE,
    MODEL_CASSETTE,
    SESSIONS,
    TOOL_CASSETTE,
    TURNS,
    GoldenDataset,
    table_of,
)
from plangate.replay._record import (
    SessionRequest,
    exchange_row,
    refingerprint,
    refuse_errors,
    tool_row,
)
from plangate.replay._redact import redactor_for
from plangate.replay.agents._boundary import AgentSpec, TurnInput
from plangate.replay.agents._driver import STATE_KEY, AgentDriver, DrivenTurn, seen_turn
from plangate.replay.agents._observed import SeenTurn, turn_steps, turn_table
from plangate.replay.schema import (
    SESSION_ID,
    STOP_REASON,
    TURN_INDEX,
    concat_tables,
)


async def record_agent(
    requests: Sequence[SessionRequest],
    *,
    name: str,
    agent: AgentSpec,
    model: str,
    domain: str = "support",
    seed: int = 0,
    description: str = "",
    redact: Iterable[str] = (),
    allow_errors: bool = False,
    jobs: int = 1,
    endpoint: EndpointSettings | None = None,
) -> GoldenDataset:
    """Run every session through `agent` and return the golden dataset (redacted, unwritten).

    `model` is the model behind the endpoint (`sim:NAME` over `domain`'s tasks, `openai:MODEL`);
    sessions run `jobs` at a time, the turns of one session in order.

    Raises:
        DatasetError: A turn ended in an infrastructure error and `allow_errors` is false.
        AgentError: The agent cannot be started.
    """
    async with AgentDriver(agent, jobs=jobs) as driver:
        limit = asyncio.Semaphore(jobs)

        async def one(request: SessionRequest) -> _Recorded:
            async with limit:
                return await _record_session(driver, request, agent, model, domain, seed, endpoint)

        recorded = await asyncio.gather(*(one(r) for r in requests))
        await driver.close_agents()  # a command: agent exits, so every span it sent is in
        spans = concat_tables(
            turn_table(seen, driven.spans()) for r in recorded for seen, driven in r.seen
        )
    turns = [t for r in recorded for t in r.turns]
    if not allow_errors:
        refuse_errors(turns, spans)
    redactor = redactor_for(redact)
    exchanges = [exchange_row(e) for r in recorded for e in r.recorder.exchanges]
    tools = [tool_row(t) for r in recorded for t in r.recorder.tool_records]
    return GoldenDataset(
        name=name,
        description=description,
        sessions=table_of(redactor.data([r.session for r in recorded]), SESSIONS),
        turns=table_of(redactor.data(turns), TURNS),
        spans=redactor.table(spans),
        model_cassette=table_of(refingerprint(redactor.data(exchanges)), MODEL_CASSETTE),
        tool_cassette=table_of(redactor.data(tools), TOOL_CASSETTE),
    )


class _Recorded:
    def __init__(self, session: dict[str, Any]) -> None:
        self.session = session
        self.turns: list[dict[str, Any]] = []
        self.seen: list[tuple[SeenTurn, DrivenTurn]] = []
        self.recorder = Recorder()


async def _record_session(
    driver: AgentDriver,
    request: SessionRequest,
    agent: AgentSpec,
    spec: str,
    domain: str,
    seed: int,
    endpoint: EndpointSettings | None,
) -> _Recorded:
    chosen_seed = request.seed if request.seed is not None else seed
    chosen_model = request.model or spec
    source = model_from_spec(
        chosen_model, domain=get_domain(domain), seed=chosen_seed, endpoint=endpoint
    )
    recorded = _Recorded(
        {
            SESSION_ID: request.session_id,
            "user_id": request.user_id,
            "variant": agent.label,
            "model": chosen_model,
            "domain": domain,
            "seed": chosen_seed,
            "source": AGENT_SOURCE,
            "metadata": json.dumps(
                {"domain": domain, "agent": {"spec": agent.spec, **agent.settings()}},
                sort_keys=True,
            ),
        }
    )
    history: list[Message] = []
    state: Any = None
    for index, text in enumerate(request.requests):
        recorded.recorder.begin_turn(request.session_id, index)
        turn = TurnInput(
            session_id=request.session_id, turn_index=index, request=text,
            history=tuple(messages_to_wire(history)), user_id=request.user_id, state=state,
        )  # fmt: skip
        recorder = recorded.recorder
        driven = await driver.run(turn, RecordingModel(source, recorder), tools=recorder)
        seen, messages = seen_turn(turn, driven, agent, history)
        rubric = request.rubrics[index] if index < len(request.rubrics) else None
        recorded.turns.append(_turn_row(turn, seen, messages, rubric))
        recorded.seen.append((seen, driven))
        history.extend(messages)
        state = driven.output.state if driven.output is not None else state
    return recorded


def _turn_row(
    turn: TurnInput, seen: SeenTurn, messages: Sequence[Message], rubric: dict[str, Any] | None
) -> dict[str, Any]:
    return {
        SESSION_ID: turn.session_id,
        TURN_INDEX: turn.turn_index,
        "request": turn.request,
        "rubric": json.dumps(rubric, sort_keys=True) if rubric is not None else None,
        "plan_before": None,
        "features_before": json.dumps({STATE_KEY: turn.state}, sort_keys=True),
        "memory_before": None,
        "messages": json.dumps([message_to_dict(m) for m in messages], ensure_ascii=False),
        "steps": json.dumps(turn_steps(seen), ensure_ascii=False),
        STOP_REASON: seen.stop_reason,
        "answer": seen.answer,
    }


def recorded_agent(session_row: dict[str, Any]) -> AgentSpec | None:
    """The agent a session was recorded with (None: recorded from the reference agent)."""
    if session_row.get("source") != AGENT_SOURCE:
        return None
    settings = dict(json.loads(session_row.get("metadata") or "{}").get("agent") or {})
    spec = settings.pop("spec", None)
    return AgentSpec.of(spec, settings) if isinstance(spec, str) else None
