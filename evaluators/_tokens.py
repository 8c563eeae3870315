"""`tokens` and `cost`: what a turn's model calls used, in tokens and in US dollars.

Per turn (its AGENT span and its LLM spans): prompt, completion, cached and total tokens summed
over the LLM spans that have counts, the number of model calls, and the cost. Only what the
source records is counted: a turn whose LLM spans have no token counts has no score.

Cost: a recorded cost is used as it is, like a recorded reward: the AGENT span's `agent_cost`
(tau2-bench's per-simulation cost) for the whole turn, else each LLM span's `llm.cost.total`
(OpenInference; ATIF's `cost_usd`). An LLM span without one is priced from its prompt, cached
and completion tokens with the price table embedded in `genai-prices` (never fetched), for the
model and provider it names (`llm.provider`, `gen_ai.provider.name`, `llm.system`,
`gen_ai.system`; without one genai-prices infers it from the model). A span with counts that
cannot be priced (no model named, a model the table does not know) leaves its turn's cost n/a.

A budget (`max_tokens`, `max_cost`) fails a turn above it; without one the turn is n/a and the
measurement is still its score.

A span that lost attributes at its sender (`otel.dropped_attributes_count`: OpenTelemetry keeps
128 a span by default, and OpenInference writes each message of a model call as attributes of
its own) may have lost what is measured: an LLM span without its token counts (or, for cost,
without counts and a recorded cost), or a span whose kind went with them (UNKNOWN). Such a turn's
sum is a lower bound, so it has no score and never passes: over the budget it fails, else it is
n/a (`lost counts`).

Everything is computed column-wise; prices once per distinct model and provider, and per call
only for models whose prices are tiered or change over time.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from plangate.evaluators._columns import Column, TurnScores
from plangate.evaluators._frame import Spans, TraceFrame
from plangate.evaluators._prices import PER_CALL, price_calls, price_rule
from plangate.evaluators._registry import EvaluatorError, evaluator
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators._tokens_text import (
    LABELS,
    Budget,
    Codes,
    Prices,
    Usage,
    cost_details,
    cost_explanation,
    models_json,
    token_details,
    token_explanation,
    turn_budget,
)
from plangate.replay.schema import (
    ATTRIBUTES,
    COST_USD,
    DROPPED_COUNT,
    MODEL_NAME,
    PROVIDER,
    SPAN_KIND_CODES,
    TOKENS_CACHED,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    json_object,
    recorded_dollars,
)

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

AGENT_COST = "agent_cost"
"""tau2-bench's cost of the agent's calls over a simulation, on the AGENT row."""

_OVER, _UNCOUNTED, _UNBUDGETED, _WITHIN, _UNPRICED, _LOST = range(6)
_UNKNOWN_KIND = SPAN_KIND_CODES.index("UNKNOWN")


@evaluator("tokens", version=2)
def tokens(frame: TraceFrame, rubrics: RubricSet) -> TurnScores:
    """Prompt, completion, cached and total tokens per turn, over its model calls.

    A turn passes when its total is within its rubric's `max_tokens`; without a budget it is
    not applicable (its total is still the score); without token counts, or with counts lost at
    the sender, its score is null.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with the budgets.

    Returns:
        Every turn's verdict; the score is the total tokens (prompt plus completion).
    """
    usage = frame.kept("tokens.usage", lambda: _usage(frame))
    budget = turn_budget(frame, rubrics, "max_tokens", lambda v: f"{v:,}")
    counted = usage.counted > 0
    total = np.where(counted, usage.total, np.nan)
    label, passed = _verdicts(total, counted, budget, usage.lost > 0)
    return TurnScores(
        passed=passed,
        score=np.where(usage.lost > 0, np.nan, total),
        label=LABELS.take(pa.array(label)),
        explanation=token_explanation(usage, budget, label == _OVER, label == _WITHIN),
        details=token_details(usage, budget, _models(frame, usage)),
    )


@evaluator("cost", version=2)
def cost(frame: TraceFrame, rubrics: RubricSet, price_as: str | None = None) -> TurnScores:
    """The US dollars a turn's model calls cost: recorded by the source, else priced.

    A turn passes when its cost is within its rubric's `max_cost`; without a budget it is not
    applicable (its cost is still the score); without counts or costs, with a call that
    cannot be priced (no model named, a model without a known price), or with counts lost at
    the sender, its score is null.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with the budgets.
        price_as: Price every call without a recorded cost as this model, whatever model it
            names: what the calls would cost there (a simulated model's tokens, say).

    Returns:
        Every turn's verdict; the score is the cost in US dollars.
    """
    usage = frame.kept("tokens.usage", lambda: _usage(frame))
    priced = usage if price_as is None else _priced_as(usage, price_as)
    prices = _turn_costs(frame, priced)
    budget = turn_budget(frame, rubrics, "max_cost", lambda v: f"${v:g}")
    known = ~np.isnan(prices.cost)
    label, passed = _verdicts(prices.cost, known, budget, prices.lost > 0)
    label = np.where(~known & prices.unpriced, _UNPRICED, label)
    return TurnScores(
        passed=passed,
        score=np.where(prices.lost > 0, np.nan, prices.cost),
        label=LABELS.take(pa.array(label)),
        explanation=cost_explanation(usage, prices, budget, label == _OVER, label == _WITHIN),
        details=cost_details(usage, prices, budget, _models(frame, usage)),
    )


def _priced_as(usage: Usage, model: Any) -> Usage:
    """The usage with every call naming `model` (no provider): checked to have a price."""
    rule = price_rule(model, None) if isinstance(model, str) and model else "not a model name"
    if isinstance(rule, str) and rule != PER_CALL:
        raise EvaluatorError(f"evaluator 'cost': price_as {model!r}: {rule}")
    calls = len(usage.span_prompt)
    return dataclasses.replace(
        usage,
        model=(np.zeros(calls, dtype=np.int64), pa.array([model], pa.string())),
        provider=(np.full(calls, -1, dtype=np.int64), pa.array([], pa.string())),
    )


def _models(frame: TraceFrame, usage: Usage) -> Column:
    return models_json(frame.llms.turn, len(frame.turns), usage.model, usage.provider)


def _verdicts(measured: Floats, known: Bools, budget: Budget, lower: Bools) -> tuple[Ints, Floats]:
    """Each turn's label code and pass (1.0), fail (0.0) or n/a (NaN), as `latency` judges.

    Where `measured` is only a lower bound (`lower`: counts lost at the sender), a turn over
    its budget fails and any other is n/a.
    """
    budgeted = ~np.isnan(budget.limit)
    over = known & budgeted & (measured > budget.limit)
    label = np.where(over, _OVER, np.where(budgeted, _WITHIN, _UNBUDGETED))
    label = np.where(known, label, _UNCOUNTED)
    label = np.where(lower & ~over, _LOST, label).astype(np.int64)
    passed = np.where(over, 0.0, np.where(known & budgeted & ~lower, 1.0, np.nan))
    return label, passed


# -- usage -------------------------------------------------------------------------------------


def _usage(frame: TraceFrame) -> Usage:
    """Each LLM span's counts, costs, model and provider, and each turn's sums."""
    turns, llms = len(frame.turns), frame.llms
    prompt = frame.numbers(TOKENS_PROMPT, llms.position)
    completion = frame.numbers(TOKENS_COMPLETION, llms.position)
    garbled = (prompt < 0) | (completion < 0)  # no model call returns a count below zero:
    if garbled.any():  # such a call has no counts, as one that recorded none
        prompt, completion = (np.where(garbled, np.nan, c) for c in (prompt, completion))
    cached, recorded, provider = _attributes(frame, llms.position)
    calls = llms.counts(turns)
    prompt_sum = _turn_sums(prompt, llms.turn, calls)
    completion_sum = _turn_sums(completion, llms.turn, calls)
    has_counts = ~np.isnan(prompt) | ~np.isnan(completion)
    counted = _per_turn(has_counts, llms, turns)
    dropped = _dropped(frame, llms.position) & (np.isnan(prompt) | np.isnan(completion))
    unknown = _unknown_lost(frame)
    return Usage(
        calls=calls,
        counted=counted,
        lost=_per_turn(dropped, llms, turns) + unknown,
        span_dropped=dropped,
        unknown_lost=unknown,
        prompt=prompt_sum,
        completion=completion_sum,
        cached=_turn_sums(cached, llms.turn, calls),
        total=np.where(counted > 0, np.fmax(prompt_sum, 0) + np.fmax(completion_sum, 0), np.nan),
        span_prompt=prompt,
        span_completion=completion,
        span_cached=cached,
        span_cost=recorded,
        model=_codes_at(frame.codes(MODEL_NAME), llms.position),
        provider=provider,
    )


def _dropped(frame: TraceFrame, positions: Ints) -> Bools:
    """Whether the sender dropped attributes of each span at `positions`."""
    return frame.numbers(DROPPED_COUNT, positions) > 0  # NaN, none said: not dropped


def _unknown_lost(frame: TraceFrame) -> Ints:
    """Per turn: spans of unknown kind whose attributes the sender dropped.

    Their kind may have gone with them: they may have been model calls, counts and cost too.
    """
    unknown = np.flatnonzero(frame.kind == _UNKNOWN_KIND)
    lost = unknown[_dropped(frame, unknown)]
    return np.bincount(frame.turn[lost], minlength=len(frame.turns)).astype(np.int64)


def _codes_at(encoded: tuple[Ints, pa.Array], positions: Ints) -> Codes:
    """A text column's codes at some positions, and its distinct values (-1: null)."""
    codes, distinct = encoded
    return codes[positions], distinct


def _turn_sums(values: Floats, turn: Ints, calls: Ints) -> Floats:
    """Sums per turn of the known values (NaN where a turn has none; `calls`: spans a turn)."""
    known = ~np.isnan(values)
    if not known.any():
        return np.full(len(calls), np.nan)
    if not known.all():
        values, turn = values[known], turn[known]
        calls = np.bincount(turn, minlength=len(calls))
    sums = np.asarray(np.bincount(turn, weights=values, minlength=len(calls)), dtype=np.float64)
    return np.where(calls > 0, sums, np.nan)


def _attributes(frame: TraceFrame, positions: Ints) -> tuple[Floats, Floats, Codes]:
    """Cached tokens, recorded cost (NaN: none) and provider codes of the spans at `positions`.

    Their own columns, which hold what the spans' attributes say (`ATTRIBUTE_FIELDS`).
    """
    cached = frame.numbers(TOKENS_CACHED, positions)
    recorded = frame.numbers(COST_USD, positions)
    codes, distinct = frame.codes(PROVIDER)
    names = sorted(distinct.to_pylist())
    rank = np.array([names.index(v) for v in distinct.to_pylist()] + [-1], dtype=np.int64)
    return cached, recorded, (rank[codes[positions]], pa.array(names, pa.string()))


# -- cost --------------------------------------------------------------------------------------


def _turn_costs(frame: TraceFrame, usage: Usage) -> Prices:
    """Each turn's cost: the AGENT span's recorded cost, else its LLM spans' costs summed."""
    turns, llms = len(frame.turns), frame.llms
    agent = frame.turns.agent
    agent_cost = np.full(turns, np.nan)
    has_agent = agent >= 0
    agent_cost[has_agent] = _agent_costs(frame, agent[has_agent])
    from_agent = ~np.isnan(agent_cost)
    counted = ~from_agent[llms.turn]  # a turn whose cost is recorded whole: its calls are not read
    calls = price_calls(frame, usage, counted)
    recorded = counted & ~np.isnan(usage.span_cost)
    priced = ~recorded & ~np.isnan(calls.cost)
    costed = _per_turn(recorded | priced, llms, turns)
    summed = np.zeros(turns)
    if costed.any():
        span_cost = np.where(recorded, usage.span_cost, np.nan_to_num(calls.cost))
        summed = np.asarray(np.bincount(llms.turn, weights=span_cost, minlength=turns), np.float64)
    blocked = _per_turn(calls.unpriced, llms, turns) > 0
    cost = np.where(from_agent, agent_cost, np.where(~blocked & (costed > 0), summed, np.nan))
    uncosted = np.isnan(usage.span_prompt) & np.isnan(usage.span_completion)
    uncosted &= np.isnan(usage.span_cost) & usage.span_dropped
    lost = np.where(from_agent, 0, _per_turn(uncosted, llms, turns) + usage.unknown_lost)
    return Prices(
        cost=cost,
        from_agent=from_agent,
        recorded_calls=_per_turn(recorded, llms, turns),
        priced_calls=_per_turn(priced, llms, turns),
        unpriced=~from_agent & blocked,
        lost=lost,
        reason=calls.turn_reason(llms.turn, turns),
    )


def _per_turn(where: Bools, llms: Spans, turns: int) -> Ints:
    """How many of the LLM spans `where` marks each turn has."""
    if not where.any():
        return np.zeros(turns, dtype=np.int64)
    if where.all():
        return llms.counts(turns)
    return np.bincount(llms.turn[where], minlength=turns).astype(np.int64)


def _agent_costs(frame: TraceFrame, positions: Ints) -> Floats:
    encoded = frame.values(ATTRIBUTES, positions).dictionary_encode()
    index = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    texts = encoded.dictionary.to_pylist()
    costs = [recorded_dollars(json_object(text).get(AGENT_COST)) for text in texts]
    return np.array([np.nan if c is None else c for c in costs] + [np.nan])[index]
