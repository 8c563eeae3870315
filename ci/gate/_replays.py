"""Replaying one side of a gate: every case, k times, each repeat scored.

A side replays its agent through `replay_turn`: a harness variant of the reference agent, or a
team's own agent behind the agent boundary (one driver for the side's repeats). Each
(case, repeat) gets a seed of its own, the same on both sides, so that the runs pair up.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from opentelemetry.sdk.trace import SpanProcessor

from plangate.ci._budget import RunBudget, not_run_table
from plangate.ci.gate._gate_file import GateFile, Side
from plangate.ci.gate._scores import Case, with_agent_spans
from plangate.evaluators import SCORE_SCHEMA, RubricSet, evaluate
from plangate.replay import (
    GoldenDataset,
    ReferenceAgent,
    concat_tables,
    lost_attributes,
    replay_turn,
    spans_from_table,
)
from plangate.replay.agents import AgentDriver
from plangate.replay.schema import EVENTS, SESSION_ID, SPAN_KIND, TRIAL, TURN_INDEX


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayRun:
    """One replayed repeat of one case on one side, for whoever wants its spans."""

    dataset: GoldenDataset
    """The golden dataset the case is in."""
    session_id: str
    """The case's session."""
    variant: str | None
    """The side's variant (None: the session's recording variant)."""
    run: str
    """The repeat's name: `baseline-r0`, `candidate-r1`, `noise-r0` (the baseline's noise floor)."""


SpanProcessors = Callable[[ReplayRun], SpanProcessor | None]
"""Gives each replayed repeat an extra span processor (or None): how the gate's caller exports
replayed spans (to Phoenix, say) without the gate knowing where they go."""


async def replay_scores(
    gate: GateFile,
    side: Side,
    datasets: dict[str, Any],
    cases: Sequence[Case],
    names: list[str],
    rubrics: RubricSet,
    *,
    repeats: int,
    span_processors: SpanProcessors | None = None,
    label: str = "side",
    warnings: list[str] | None = None,
    budget: RunBudget | None = None,
) -> pa.Table:
    """Replay every case `repeats` times with one side; the scores, `trial` = repeat.

    With `span_processors`, each replayed repeat's spans go there too, each repeat a run of its
    own: `LABEL-rN`, and the baseline's noise-floor repeats `noise-rN`. Turns a model's token
    limit cut short are added to `warnings`. With a `budget`, each finished turn's spend is
    added to it, and a turn that would start once it is reached is not run (its scores are
    errors that name the budget).
    """
    limit = asyncio.Semaphore(gate.jobs)
    params = {name: rule.params for name, rule in gate.evaluators.items() if rule.params}

    async def one(number: int, case: Case, repeat: int) -> pa.Table:
        name, session_id, turn_index = case
        # Each (case, repeat) gets its own seed, the same on both sides: the runs pair up, and
        # a simulated model's seeded choices vary from case to case as a real model's would.
        seed = gate.seed + side.seed + repeat * 100_003 + number
        run = ReplayRun(
            dataset=datasets[name],
            session_id=session_id,
            variant=side.variant,
            run=_run(gate, label, repeat),
        )
        extra = span_processors(run) if span_processors is not None else None
        agent = driver or ReferenceAgent(side.variant, span_processor=extra)
        async with limit:
            if budget is not None and budget.reached():  # asked once a turn may start
                reason = budget.skip((label, session_id, turn_index, repeat))
                return not_run_table(session_id, turn_index, reason, side.label)
            result = await replay_turn(
                datasets[name], session_id, turn_index, agent=agent, model=side.model,
                tools=side.tools, seed=seed, endpoint=gate.endpoint,  # type: ignore[arg-type]
            )  # fmt: skip
            if budget is not None:
                budget.spend(result.table)
        assert result.table is not None
        if driver is not None and extra is not None:  # a team's agent's spans, sent after
            for span in spans_from_table(result.table):
                extra.on_end(span)
        return result.table

    driver = AgentDriver(side.agent, jobs=gate.jobs) if side.agent is not None else None
    try:
        return await _repeat(repeats, cases, one, rubrics, names, params, label, warnings)
    finally:
        if driver is not None:
            await driver.aclose()


async def _repeat(
    repeats: int,
    cases: Sequence[Case],
    one: Callable[[int, Case, int], Awaitable[pa.Table]],
    rubrics: RubricSet,
    names: list[str],
    params: dict[str, dict[str, Any]],
    label: str,
    warnings: list[str] | None,
) -> pa.Table:
    """Every case `repeats` times, scored per repeat (`trial` = repeat).

    Warnings: each turn a model's token limit cut short, and the first repeat whose spans lost
    attributes at the agent's SDK (once a side: its limit is the same every repeat).
    """
    parts = []
    lost = False
    for repeat in range(repeats):
        tables = await asyncio.gather(*(one(n, case, repeat) for n, case in enumerate(cases)))
        traces = concat_tables(tables)
        if warnings is not None:
            warnings.extend(
                f"{label} {s} turn {t} repeat {repeat}: a model answer was cut at its token limit"
                for s, t in _cut_short(traces)
            )
            warning = None if lost else lost_attributes(traces)
            if warning is not None:
                warnings.append(f"{label} repeat {repeat}: {warning}")
                lost = True
        scores = evaluate(traces, rubrics, names=names, params=params)
        trial = pa.array([repeat] * scores.num_rows, pa.int32())
        scores = scores.set_column(scores.schema.get_field_index(TRIAL), TRIAL, trial)
        parts.append(with_agent_spans(scores, traces))
    return pa.concat_tables(parts) if parts else SCORE_SCHEMA.empty_table()


def _cut_short(traces: pa.Table) -> list[tuple[str, int]]:
    """The turns with a `length_cutoff` event (a model answer cut at its token limit)."""
    rows = traces.select([SESSION_ID, TURN_INDEX, SPAN_KIND, EVENTS]).to_pylist()
    return [
        (r[SESSION_ID], r[TURN_INDEX])
        for r in rows
        if r[SPAN_KIND] == "AGENT" and r[EVENTS] and '"length_cutoff"' in r[EVENTS]
    ]


def _run(gate: GateFile, label: str, repeat: int) -> str:
    """A repeat's run name in Phoenix; the baseline's repeats past k are its noise floor."""
    if label == "baseline" and gate.noise_floor and repeat >= gate.repeats:
        return f"noise-r{repeat - gate.repeats}"
    return f"{label}-r{repeat}"
