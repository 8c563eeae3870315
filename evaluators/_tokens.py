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
measurement is still its score. Everything is computed column-wise; prices once per distinct
model and provider, and per call only for models whose prices are tiered or change over time.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from plangate.evaluators._columns import Column, TurnScores
from plangate.evaluators._frame import Spans, TraceFrame
from plangate.evaluators._registry import evaluator
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators._tokens_text import (
    COST_LABELS,
    TOKEN_LABELS,
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
    END_TIME,
    MODEL_NAME,
    START_TIME,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
)

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

CACHED_TOKENS = "llm.token_count.prompt_details.cache_read"
"""OpenInference's attribute for the prompt tokens served from a cache."""
COST_TOTAL = "llm.cost.total"
"""OpenInference's attribute for a call's cost in US dollars."""
AGENT_COST = "agent_cost"
"""tau2-bench's cost of the agent's calls over a simulation, on the AGENT row."""
PROVIDER_KEYS = ("llm.provider", "gen_ai.provider.name", "llm.system", "gen_ai.system")
"""Where a span names its provider, the first present winning (OpenInference, then GenAI)."""

_OVER, _UNCOUNTED, _UNBUDGETED, _WITHIN, _UNPRICED = range(5)


@evaluator("tokens", version=1)
def tokens(frame: TraceFrame, rubrics: RubricSet) -> TurnScores:
    """Prompt, completion, cached and total tokens per turn, over its model calls.

    A turn passes when its total is within its rubric's `max_tokens`; without a budget it is
    not applicable (its total is still the score); without token counts its score is null.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with the budgets.

    Returns:
        Every turn's verdict; the score is the total tokens (prompt plus completion).
    """
    usage = _usage(frame)
    budget = turn_budget(frame, rubrics, "max_tokens", lambda v: f"{v:,}")
    counted = usage.counted > 0
    total = np.where(counted, usage.total, np.nan)
    label, passed = _verdicts(total, counted, budget)
    return TurnScores(
        passed=passed,
        score=total,
        label=TOKEN_LABELS.take(pa.array(label)),
        explanation=token_explanation(usage, budget, label == _OVER, label == _WITHIN),
        details=token_details(usage, budget, _models(frame, usage)),
    )


@evaluator("cost", version=1)
def cost(frame: TraceFrame, rubrics: RubricSet) -> TurnScores:
    """The US dollars a turn's model calls cost: recorded by the source, else priced.

    A turn passes when its cost is within its rubric's `max_cost`; without a budget it is not
    applicable (its cost is still the score); without counts or costs, or with a call that
    cannot be priced (no model named, a model without a known price), its score is null.

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with the budgets.

    Returns:
        Every turn's verdict; the score is the cost in US dollars.
    """
    usage = _usage(frame)
    prices = _turn_costs(frame, usage)
    budget = turn_budget(frame, rubrics, "max_cost", lambda v: f"${v:g}")
    known = ~np.isnan(prices.cost)
    label, passed = _verdicts(prices.cost, known, budget)
    label = np.where(~known & prices.unpriced, _UNPRICED, label)
    return TurnScores(
        passed=passed,
        score=prices.cost,
        label=COST_LABELS.take(pa.array(label)),
        explanation=cost_explanation(usage, prices, budget, label == _OVER, label == _WITHIN),
        details=cost_details(usage, prices, budget, _models(frame, usage)),
    )


def _models(frame: TraceFrame, usage: Usage) -> Column:
    return models_json(frame.llms.turn, len(frame.turns), usage.model, usage.provider)


def _verdicts(measured: Floats, known: Bools, budget: Budget) -> tuple[Ints, Floats]:
    """Each turn's label code and pass (1.0), fail (0.0) or n/a (NaN), as `latency` judges."""
    budgeted = ~np.isnan(budget.limit)
    over = known & budgeted & (measured > budget.limit)
    label = np.where(over, _OVER, np.where(budgeted, _WITHIN, _UNBUDGETED))
    label = np.where(known, label, _UNCOUNTED).astype(np.int64)
    passed = np.where(known & budgeted, np.where(over, 0.0, 1.0), np.nan)
    return label, passed


# -- usage -------------------------------------------------------------------------------------


def _usage(frame: TraceFrame) -> Usage:
    """Each LLM span's counts, costs, model and provider, and each turn's sums."""
    turns, llms = len(frame.turns), frame.llms
    prompt = _numbers(frame, TOKENS_PROMPT, llms.position)
    completion = _numbers(frame, TOKENS_COMPLETION, llms.position)
    cached, recorded, provider = _attributes(frame, llms.position)
    calls = llms.counts(turns)
    prompt_sum = _turn_sums(prompt, llms.turn, calls)
    completion_sum = _turn_sums(completion, llms.turn, calls)
    has_counts = ~np.isnan(prompt) | ~np.isnan(completion)
    counted = _per_turn(has_counts, llms, turns)
    return Usage(
        calls=calls,
        counted=counted,
        prompt=prompt_sum,
        completion=completion_sum,
        cached=_turn_sums(cached, llms.turn, calls),
        total=np.where(counted > 0, np.fmax(prompt_sum, 0) + np.fmax(completion_sum, 0), np.nan),
        span_prompt=prompt,
        span_completion=completion,
        span_cached=cached,
        span_cost=recorded,
        model=_codes(frame, MODEL_NAME, llms.position),
        provider=provider,
    )


def _numbers(frame: TraceFrame, name: str, positions: Ints) -> Floats:
    """A numeric column at some positions as float64, NaN for null (none: no copy of it)."""
    column = frame.table.column(name)
    if column.null_count == len(column):
        return _constant(np.nan, len(positions))
    values = frame.column(name)
    if values.null_count:
        every = np.asarray(values.to_numpy(zero_copy_only=False), dtype=np.float64)
        return every[positions]
    return np.asarray(values.to_numpy()[positions], dtype=np.float64)


def _codes(frame: TraceFrame, name: str, positions: Ints) -> Codes:
    """A text column's codes at some positions, and its distinct values (-1: null)."""
    column = frame.table.column(name)
    if column.null_count == len(column):
        return _constant(-1, len(positions), np.int64), pa.array([], pa.string())
    codes, names = frame.codes(name)
    return codes[positions], names


def _constant(value: float, size: int, dtype: type = np.float64) -> npt.NDArray[Any]:
    """`size` copies of `value`, read only: a view of one value, nothing is allocated."""
    return np.broadcast_to(np.asarray(value, dtype=dtype), (size,))


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
    """Cached tokens, recorded cost (NaN: none) and provider codes from spans' `attributes`.

    Each distinct `attributes` text is parsed once.
    """
    if frame.table.column(ATTRIBUTES).null_count == frame.table.num_rows:
        none = _constant(np.nan, len(positions))
        return none, none, (_constant(-1, len(positions), np.int64), pa.array([], pa.string()))
    encoded = frame.values(ATTRIBUTES, positions).dictionary_encode()
    index = np.asarray(encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False), np.int64)
    parsed = [_parse(text) for text in encoded.dictionary.to_pylist()]
    cached = np.array([_count(p.get(CACHED_TOKENS)) for p in parsed] + [np.nan])
    recorded = np.array([_dollars(p.get(COST_TOTAL)) for p in parsed] + [np.nan])
    providers = [_provider(p) for p in parsed]
    names = sorted({p for p in providers if p is not None})
    code = np.array([names.index(p) if p is not None else -1 for p in providers] + [-1])
    return (
        cached[index],
        recorded[index],
        (code.astype(np.int64)[index], pa.array(names, pa.string())),
    )


def _parse(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> float:
    """A whole token count as a float, NaN for anything else (a source's own, never guessed)."""
    ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
    return float(value) if ok else np.nan


def _dollars(value: Any) -> float:
    """A recorded cost as a float, NaN where it is not a finite number at least 0."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    return float(value) if ok and math.isfinite(value) and value >= 0 else np.nan


def _provider(attributes: dict[str, Any]) -> str | None:
    found = (attributes.get(key) for key in PROVIDER_KEYS)
    return next((v for v in found if isinstance(v, str) and v), None)


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
    return Prices(
        cost=cost,
        from_agent=from_agent,
        recorded_calls=_per_turn(recorded, llms, turns),
        priced_calls=_per_turn(priced, llms, turns),
        unpriced=~from_agent & blocked,
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
    costs = [_dollars(_parse(text).get(AGENT_COST)) for text in encoded.dictionary.to_pylist()]
    return np.array([*costs, np.nan])[index]


# -- prices ------------------------------------------------------------------------------------


_MILLION = 1_000_000
_PROBE_TIME = datetime(2026, 1, 1, tzinfo=UTC)
"""When a model is looked up: only models whose prices do not change over time are priced
without each call's own time, so this date never changes a price."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PER_CALL = "per call"
"""A model whose prices are tiered or change over time: each call is priced on its own."""


@dataclass(frozen=True, slots=True)
class _Flat:
    """Prices in US dollars that do not depend on the amounts: per call, per token."""

    call: float
    uncached: float
    cached: float
    output: float


@dataclass(frozen=True, slots=True, eq=False)
class _Calls:
    """Each LLM span's priced cost (NaN where not priced), and why a span has none."""

    cost: Floats
    unpriced: Bools
    """Spans with token counts, no recorded cost and no price."""
    reason: Ints
    """Index into `reasons` (-1: none)."""
    reasons: list[str]

    def turn_reason(self, turn: Ints, turns: int) -> pa.Array:
        """Each turn's first unpriced span's reason (null where it has none)."""
        if not self.reasons:
            return pa.nulls(turns, pa.string())
        where = np.flatnonzero(self.unpriced)
        owner = turn[where]  # ascending: spans are in turn order
        first = np.flatnonzero(np.diff(owner, prepend=-1) != 0)
        code = np.full(turns, -1, dtype=np.int64)
        code[owner[first]] = self.reason[where[first]]
        return pa.array(self.reasons, pa.string()).take(pa.array(code, mask=code < 0))


def price_calls(frame: TraceFrame, usage: Usage, counted: Bools) -> _Calls:
    """Price every LLM span with counts and no recorded cost (of those `counted`).

    Once per model where its prices are flat (then multiplied column-wise), per call where they
    are tiered or change over time.
    """
    prompt, completion, cached = usage.span_prompt, usage.span_completion, usage.span_cached
    wanted = counted & (~np.isnan(prompt) | ~np.isnan(completion)) & np.isnan(usage.span_cost)
    calls = _Calls(np.full(len(prompt), np.nan), wanted.copy(), np.full(len(prompt), -1), [])
    complete = wanted & ~np.isnan(prompt) & ~np.isnan(completion)
    _give_reason(calls, wanted & ~complete, "a model call has only part of its token counts")
    (models, model_names), (providers, provider_names) = usage.model, usage.provider
    _give_reason(
        calls,
        complete & (models < 0),
        "no model named, so its token counts cannot be priced",
    )
    complete &= models >= 0
    key = models * (len(provider_names) + 1) + providers + 1
    rows = np.flatnonzero(complete)
    each, group = np.unique(key[rows], return_inverse=True)
    for number, pair in enumerate(each.tolist()):
        model, provider = _names(pair, model_names, provider_names)
        at = rows[group == number]
        rule = _rule(model, provider)
        if isinstance(rule, _Flat):
            _price_flat(calls, at, rule, prompt, completion, cached)
        elif rule == _PER_CALL:
            _price_each(calls, frame, at, (model, provider), (prompt, completion, cached))
        else:
            _give_reason(calls, at, rule)
    return calls


def _names(pair: int, models: pa.Array, providers: pa.Array) -> tuple[str, str | None]:
    width = len(providers) + 1
    provider = pair % width
    return str(models[pair // width]), None if provider == 0 else str(providers[provider - 1])


def _give_reason(calls: _Calls, where: npt.NDArray[Any], reason: str) -> None:
    """Mark spans (a mask, or their places) unpriced for `reason`."""
    if not where.size or (where.dtype == np.bool_ and not where.any()):
        return
    if reason not in calls.reasons:
        calls.reasons.append(reason)
    calls.reason[where] = calls.reasons.index(reason)
    calls.unpriced[where] = True


def _price_flat(
    calls: _Calls, rows: Ints, rule: _Flat, prompt: Floats, completion: Floats, cached: Floats
) -> None:
    """Flat prices times the counts, column-wise.

    A call with more cached than prompt tokens (which genai-prices refuses) gets a reason.
    """
    read = np.nan_to_num(cached[rows])
    odd = read > prompt[rows]
    fresh = prompt[rows] - read
    cost = rule.call + rule.uncached * fresh + rule.cached * read + rule.output * completion[rows]
    calls.cost[rows] = np.where(odd, np.nan, cost)
    calls.unpriced[rows] = odd
    _give_reason(calls, rows[odd], "a model call has more cached than prompt tokens")


def _price_each(
    calls: _Calls,
    frame: TraceFrame,
    rows: Ints,
    names: tuple[str, str | None],
    counts: tuple[Floats, Floats, Floats],
) -> None:
    """genai-prices on each call, at the call's start (else end) time."""
    from genai_prices import Usage as Usage_  # imported when first needed: it takes a while
    from genai_prices import calc_price

    positions = frame.llms.position[rows]
    start, end = frame.micros(START_TIME, positions), frame.micros(END_TIME, positions)
    moment = np.where(np.isnan(start), end, start)
    prompt, completion, cached = (values[rows] for values in counts)
    for place, row in enumerate(rows.tolist()):
        usage = Usage_(
            input_tokens=int(prompt[place]),
            output_tokens=int(completion[place]),
            cache_read_tokens=None if np.isnan(cached[place]) else int(cached[place]),
        )
        at = (
            None if np.isnan(moment[place]) else _EPOCH + timedelta(microseconds=int(moment[place]))
        )
        try:
            found = calc_price(usage, names[0], provider_id=names[1], genai_request_timestamp=at)
        except (LookupError, ValueError) as exc:
            _give_reason(
                calls, np.array([row]), f"genai-prices cannot price model {names[0]!r}: {exc}"
            )
            continue
        calls.cost[row] = float(found.total_price)
        calls.unpriced[row] = False


@functools.cache
def _rule(model: str, provider: str | None) -> _Flat | str:
    """How to price calls to a model: flat prices, `_PER_CALL`, or why it cannot be priced."""
    from genai_prices import Usage as Usage_  # imported when first needed: it takes a while
    from genai_prices import calc_price
    from genai_prices.types import ModelPrice, TieredPrices

    try:
        found = calc_price(
            Usage_(input_tokens=0, output_tokens=0),
            model,
            provider_id=provider,
            genai_request_timestamp=_PROBE_TIME,
        )
    except LookupError:
        at = "" if provider is None else f" from provider {provider!r}"
        return f"no price known for model {model!r}{at}"
    price = found.model_price
    tiered = any(isinstance(value, TieredPrices) for value in vars(price).values())
    if tiered or not isinstance(found.model.prices, ModelPrice):
        return _PER_CALL

    def total(**counts: int) -> Decimal:
        return price.calc_price(Usage_(**counts))["total_price"]

    call = total(input_tokens=0, output_tokens=0)
    return _Flat(
        call=float(call),
        uncached=float((total(input_tokens=_MILLION, output_tokens=0) - call) / _MILLION),
        cached=float(
            (total(input_tokens=_MILLION, cache_read_tokens=_MILLION, output_tokens=0) - call)
            / _MILLION
        ),
        output=float((total(input_tokens=0, output_tokens=_MILLION) - call) / _MILLION),
    )
