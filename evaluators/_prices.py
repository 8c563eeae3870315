"""Prices for the `cost` evaluator, from the table embedded in `genai-prices` (never fetched).

Each distinct (model, provider) is looked up once: a model whose prices are flat (no tiers, no
change over time) gets its per-call and per-token rates from genai-prices' own calculation, and
its calls are priced column-wise; a model whose prices are tiered or change over time has each
call priced on its own, at the call's time.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._tokens_text import Usage
from plangate.replay.schema import END_TIME, START_TIME

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


_MILLION = 1_000_000
_PROBE_TIME = datetime(2026, 1, 1, tzinfo=UTC)
"""When a model is looked up: only models whose prices do not change over time are priced
without each call's own time, so this date never changes a price."""
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PER_CALL = "per call"
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
        rule = price_rule(model, provider)
        if isinstance(rule, _Flat):
            _price_flat(calls, at, rule, prompt, completion, cached)
        elif rule == PER_CALL:
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
def price_rule(model: str, provider: str | None) -> _Flat | str:
    """How to price calls to a model: flat prices, `PER_CALL`, or why it cannot be priced."""
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
        return PER_CALL

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
