"""`tokens` and `cost`: their per-turn numbers, and their text, column-wise.

Counts are written as `f"{n:,}"` writes them (`thousands`), dollars as Python's `repr` of the
cost rounded to a millionth of a dollar, budgets as the rubric gives them; every explanation
and details object is a template over columns, like `latency`'s.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import Column, json_text, strings, text
from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._latency import _own_rubrics
from plangate.evaluators._latency_text import thousands
from plangate.evaluators._rubric import RubricSet

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
Codes = tuple[Ints, pa.Array]
"""Codes into a dictionary of names (-1: none), and the dictionary."""

LABELS = pa.array(
    ["over budget", "no counts", "no budget", "within budget", "no price", "lost counts"],
    pa.string(),
)
"""By code: 0 over, 1 no counts, 2 no budget, 3 within, 4 (cost only) a call without a price,
5 counts lost at the sender (the sum a lower bound, within its budget or without one)."""
PRICE_TABLE = f"genai-prices {version('genai-prices')}"
"""Whose prices fill in where the source records no cost (its embedded snapshot)."""

_CALLS = pa.array([" model calls", " model call"], pa.string())
_SPANS = pa.array([" spans", " span"], pa.string())
_COST_FROM = pa.array(['"calls"', '"agent span"', "null"], pa.string())
_SOURCES = pa.array(
    ["recorded by the source", "priced from token counts with genai-prices", "", ""], pa.string()
)


@dataclass(frozen=True, slots=True, eq=False)
class Usage:
    """Each turn's model calls and token sums, and each LLM span's own numbers.

    Sums are NaN where no span of the turn has the count; a span's numbers are in the order of
    `frame.llms`.
    """

    calls: Ints
    counted: Ints
    """Model calls with a prompt or completion count."""
    lost: Ints
    """Spans that lost attributes at the sender and may have held a count (the sums are then
    lower bounds): LLM spans without a count among `span_dropped`, and `unknown_lost`."""
    prompt: Floats
    completion: Floats
    cached: Floats
    total: Floats
    """Prompt plus completion tokens; NaN where no call has a count."""
    span_prompt: Floats
    span_completion: Floats
    span_cached: Floats
    span_cost: Floats
    """The cost the source recorded for the call (NaN: none)."""
    span_dropped: Bools
    """Whether the sender dropped the call's attributes (looked at where a count is missing)."""
    unknown_lost: Ints
    """Per turn: spans of unknown kind that lost attributes at the sender."""
    model: Codes
    provider: Codes


@dataclass(frozen=True, slots=True, eq=False)
class Prices:
    """Each turn's cost (NaN: unknown) and where it comes from."""

    cost: Floats
    from_agent: Bools
    """Whether the AGENT span recorded the turn's cost (its calls' costs are then not read)."""
    recorded_calls: Ints
    priced_calls: Ints
    unpriced: Bools
    """Whether a call with counts could not be priced (and nothing recorded the turn's cost)."""
    lost: Ints
    """Spans that lost attributes at the sender and may have held a count or a cost (the cost
    is then a lower bound); 0 where the AGENT span recorded the turn's cost."""
    reason: pa.Array
    """Why not, for those turns: the first such call's reason (null elsewhere)."""


@dataclass(frozen=True, slots=True, eq=False)
class Budget:
    """Each turn's budget from its rubric (NaN: none), and its text."""

    name: str
    limit: Floats
    text: Column
    """As the explanation writes it (`1,000`, `$0.5`); empty or null without one."""
    json: Column
    """As JSON (`null` without)."""


# -- budgets -----------------------------------------------------------------------------------


def turn_budget(
    frame: TraceFrame, rubrics: RubricSet, name: str, write: Callable[[Any], str]
) -> Budget:
    """Each turn's budget `name` from its own rubric, else the default (NaN: none)."""
    rubric_list = [rubrics.default, *rubrics.turns.values()]
    values = [None if r is None else getattr(r, name) for r in rubric_list]
    slot = np.arange(len(values), dtype=np.int64)[_own_rubrics(frame, rubrics) + 1]
    limit = np.array([np.nan if v is None else float(v) for v in values])[slot]
    written = [None if v is None else write(v) for v in values]
    as_json = [json.dumps(v) for v in values]
    return Budget(
        name=name,
        limit=limit,
        text=_texts(written, slot),
        json=_texts(as_json, slot),
    )


def _texts(values: Sequence[str | None], slot: Ints) -> Column:
    if len(set(values)) == 1:  # the same for every turn: a constant
        return values[0] or ""
    return pa.array(values, pa.string()).take(pa.array(slot))


# -- tokens ------------------------------------------------------------------------------------


def token_explanation(usage: Usage, budget: Budget, over: Bools, within: Bools) -> pa.Array:
    """`3,000 prompt (1,000 cached) + 300 completion = 3,300 tokens over 2 model calls`."""
    rows = len(usage.calls)
    total = _whole(usage.total)
    parts = []
    if over.any():
        over_text = text(total, " tokens are over the budget of ", budget.text, rows=rows)
        parts.append(_when(over, over_text))
    parts.append(pc.coalesce(_sums(usage, total), _uncounted(usage, "token counts")))
    least = text(total, " tokens", rows=rows)
    parts += _lost(usage.lost, "token counts", least, budget, over, " tokens")
    if within.any():
        parts.append(_when(within, text("within ", budget.text, " tokens", rows=rows)))
    return pc.binary_join_element_wise(*parts, "; ", null_handling="skip")


def _lost(
    lost: Ints, what: str, least: pa.Array, budget: Budget, over: Bools, unit: str
) -> list[pa.Array]:
    """What a turn with counts lost at the sender says: what it lost, and what that leaves.

    `2 spans lost attributes at the sender (over its limit) and may have held more token counts:
    at least 3,300 tokens`, and, under a budget it is not over, that it cannot be told within it.
    `least` is the sum of what is known (null where nothing is).
    """
    rows = len(lost)
    if not lost.any():
        return []
    spans = text(strings(lost, rows), _SPANS.take(pa.array((lost == 1).astype(np.int64))),
                 rows=rows)  # fmt: skip
    said = text(spans, f" lost attributes at the sender (over its limit) and may have held more "
                f"{what}", rows=rows)  # fmt: skip
    said = pc.coalesce(text(said, ": at least ", least, rows=rows), said)
    parts = [_when(lost > 0, said)]
    untold = (lost > 0) & ~over & ~np.isnan(budget.limit)
    if untold.any():
        parts.append(_when(untold, text("cannot tell whether within ", budget.text, unit,
                                        rows=rows)))  # fmt: skip
    return parts


def _sums(usage: Usage, total: pa.Array) -> pa.Array:
    """The token sums of the turns with counts (null elsewhere)."""
    rows = len(usage.calls)
    prompt, completion = _whole(usage.prompt, "unknown"), _whole(usage.completion, "unknown")
    cached: Column = ""
    if not np.isnan(usage.cached).all():
        cached = pc.fill_null(text(" (", _whole(usage.cached), " cached)", rows=rows), "")
    calls = _counted(usage.calls)
    sums = text(prompt, " prompt", cached, " + ", completion, " completion = ", total,
                " tokens over ", calls, rows=rows)  # fmt: skip
    partial = (usage.counted < usage.calls) & (usage.counted > 0)
    if partial.any():
        some = text(sums, " (", strings(usage.counted, rows), " with token counts)", rows=rows)
        sums = pc.if_else(pa.array(partial), some, sums)
    return sums


def _uncounted(usage: Usage, what: str) -> pa.Array:
    """`no model calls`, or `no token counts on its 2 model calls`."""
    rows = len(usage.calls)
    some = text(f"no {what} on its ", _counted(usage.calls), rows=rows)
    none = usage.calls == 0
    return pc.if_else(pa.array(none), "no model calls", some) if none.any() else some


def token_details(usage: Usage, budget: Budget, models: Column) -> pa.Array:
    """The numbers as JSON objects, as `json.dumps(..., sort_keys=True)` writes them."""
    rows = len(usage.calls)
    fields: dict[str, Column] = {
        "llm_calls": strings(usage.calls, rows),
        "counted_calls": strings(usage.counted, rows),
        "lost_spans": strings(usage.lost, rows),
        "max_tokens": budget.json,
        "models": models,
        "tokens_cached": _json_whole(usage.cached),
        "tokens_completion": _json_whole(usage.completion),
        "tokens_prompt": _json_whole(usage.prompt),
        "tokens_total": _json_whole(usage.total),
    }
    return json_text(fields, rows)


# -- cost --------------------------------------------------------------------------------------


def cost_explanation(
    usage: Usage, prices: Prices, budget: Budget, over: Bools, within: Bools
) -> pa.Array:
    """`$0.0123 for 3 model calls, recorded by the source`, over or within a budget, or why not."""
    rows = len(usage.calls)
    known = ~np.isnan(prices.cost)
    dollars = dollars_text(prices.cost) if known.any() else None
    parts = []
    if over.any():
        parts.append(_when(over, text(dollars, " is over the budget of ", budget.text, rows=rows)))
    said = []  # the first that a turn has
    if dollars is not None:
        said.append(text(dollars, " for ", _counted(usage.calls), ", ", _source(prices), rows=rows))
    if prices.unpriced.any():
        said.append(_when(prices.unpriced, prices.reason))
    if not said or not (known | prices.unpriced).all():
        said.append(_uncounted(usage, "token counts or costs"))
    parts.append(pc.coalesce(*said) if len(said) > 1 else said[0])
    least = dollars if dollars is not None else pa.nulls(rows, pa.string())
    parts += _lost(prices.lost, "token counts or costs", least, budget, over, "")
    if within.any():
        parts.append(_when(within, text("within ", budget.text, rows=rows)))
    return pc.binary_join_element_wise(*parts, "; ", null_handling="skip")


def _source(prices: Prices) -> pa.Array:
    """Where a turn's cost comes from, in words."""
    rows = len(prices.cost)
    recorded, priced = prices.recorded_calls > 0, prices.priced_calls > 0
    code = np.where(recorded & priced, 2, np.where(priced, 1, 0))
    code = np.where(prices.from_agent, 3, code)
    said = _SOURCES.take(pa.array(code))
    if (code == 2).any():
        mixed = text(strings(prices.recorded_calls, rows), " recorded by the source, ",
                     strings(prices.priced_calls, rows), " priced with genai-prices",
                     rows=rows)  # fmt: skip
        said = pc.if_else(pa.array(code == 2), mixed, said)
    if prices.from_agent.any():
        said = pc.if_else(pa.array(prices.from_agent), "recorded by the source for the turn", said)
    return said


def cost_details(usage: Usage, prices: Prices, budget: Budget, models: Column) -> pa.Array:
    """The numbers as JSON objects, as `json.dumps(..., sort_keys=True)` writes them."""
    rows = len(usage.calls)
    known = ~np.isnan(prices.cost)
    cost: Column = "null"
    source: Column = "null"
    if known.any():
        cost = pc.fill_null(strings(prices.cost, rows), "null")
        source = _COST_FROM.take(pa.array(np.where(known, prices.from_agent, 2).astype(np.int64)))
    fields: dict[str, Column] = {
        "cost_usd": cost,
        "cost_from": source,
        "llm_calls": strings(usage.calls, rows),
        "lost_spans": strings(prices.lost, rows),
        "max_cost": budget.json,
        "models": models,
        "price_table": json.dumps(PRICE_TABLE),
        "priced_calls": strings(prices.priced_calls, rows),
        "recorded_calls": strings(prices.recorded_calls, rows),
    }
    return json_text(fields, rows)


def dollars_text(cost: Floats) -> pa.Array:
    """`$0.00325`: a cost rounded to a millionth of a dollar, as Python writes it (NaN: null)."""
    return text("$", strings(np.round(cost, 6), len(cost)), rows=len(cost))


# -- models ------------------------------------------------------------------------------------


def models_json(turn: Ints, turns: int, model: Codes, provider: Codes) -> Column:
    """Each turn's distinct (model, provider) pairs its LLM spans name, as a JSON list.

    `turn` is each LLM span's turn; a span that names neither is left out. Pairs are sorted by
    model, then provider (none first). Providers come sorted already.
    """
    (models, model_names), (providers, provider_names) = model, provider
    named = (models >= 0) | (providers >= 0)
    if not named.any():
        return "[]"
    order = np.asarray(pc.sort_indices(model_names), dtype=np.int64)
    rank = np.empty(len(order) + 1, dtype=np.int64)
    rank[order] = np.arange(len(order))
    rank[-1] = -1
    models, model_names = rank[models], model_names.take(pa.array(order))  # in name order
    width = len(provider_names) + 1
    pairs = (models[named] + 1) * width + providers[named] + 1
    span = (len(model_names) + 1) * width
    distinct = np.unique(turn[named] * span + pairs)
    owner, pair = distinct // span, distinct % span
    each, index = np.unique(pair, return_inverse=True)
    names, vendors = model_names.to_pylist(), provider_names.to_pylist()
    written = [
        json.dumps(
            {
                "model": names[p // width - 1] if p // width else None,
                "provider": vendors[p % width - 1] if p % width else None,
            },
            sort_keys=True,
        )
        for p in each.tolist()
    ]
    entries = pa.array(written, pa.string()).take(pa.array(index.astype(np.int64)))
    offsets = np.searchsorted(owner, np.arange(turns + 1)).astype(np.int32)
    lists = pa.ListArray.from_arrays(pa.array(offsets), entries)
    return text("[", pc.binary_join(lists, ", "), "]", rows=turns)


# -- helpers -----------------------------------------------------------------------------------


def _whole(values: Floats, missing: str | None = None) -> pa.Array:
    """Whole numbers (as floats) written as `f"{n:,}"` does; NaN as `missing` (or null)."""
    absent = np.isnan(values)
    written = thousands(np.where(absent, 0, values).astype(np.int64))
    if not absent.any():
        return written
    nulls = pc.if_else(pa.array(absent), pa.scalar(None, pa.string()), written)
    return nulls if missing is None else pc.fill_null(nulls, missing)


def _json_whole(values: Floats) -> Column:
    absent = np.isnan(values)
    if absent.all():
        return "null"
    written = strings(np.where(absent, 0, values).astype(np.int64), len(values))
    return pc.if_else(pa.array(absent), "null", written) if absent.any() else written


def _counted(counts: Ints) -> pa.Array:
    """`1 model call`, `2 model calls`."""
    return text(strings(counts, len(counts)), _CALLS.take(pa.array((counts == 1).astype(np.int64))),
                rows=len(counts))  # fmt: skip


def _when(condition: Bools, values: pa.Array) -> pa.Array:
    """`values` where `condition` holds, null elsewhere."""
    return pc.if_else(pa.array(condition), values, pa.scalar(None, pa.string()))
