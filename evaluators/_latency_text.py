"""`latency`'s text, column-wise: every turn's explanation and details from its numbers.

The explanation writes seconds as `f"{x:.2f}"` and token counts as `f"{n:,}"`; `two_decimals`
and `thousands` write whole columns of them with NumPy and Arrow, exactly as Python does, instead
of one f-string per turn. Parts that most turns lack (over a budget, not split, within a budget)
are only built when some turn has them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import Column, json_text, overlay, strings, text

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

_SECONDS = ("wall", "model", "tool", "harness")
_PLURALS = pa.array([" iterations", " iteration", " tool calls", " tool call"], pa.string())
_SOURCES = pa.array(["spans", "agent span"], pa.string())
_WALL_FROM = pa.array(['"spans"', '"agent span"', "null"], pa.string())
"""`wall_from` as JSON, by code: 0 spans, 1 agent span, 2 untimed."""
_NOT_SPLIT = pa.array(["", "model", "tool", "model and tool"], pa.string())
"""What has no timestamps, by code: 1 for the model spans plus 2 for the tool spans."""
_SIGNS = pa.array(["", "-"], pa.string())
_CENTS = pa.array([f".{n:02d}" for n in range(100)], pa.string())
_GROUPS = pa.array(
    [f",{n:03d}" for n in range(1000)] + [str(n) for n in range(1000)] + [""], pa.string()
)
"""A group of three digits by code: padded after a comma (0-999), the first (1000-1999), none."""
_PLAIN, _NOTHING = 1000, 2000
_DISTINCT_FROM = 1000
_LARGE = 2.0**44
"""Below this, a value times 100 and its floor plus one half are exact enough to round with
(`_hundredths`); larger values (half a millennium in seconds) are written by Python."""


def _distinct(values: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], pa.Array | None]:
    """The distinct values and each value's index among them (text is written once for each).

    Floats are told apart by their bits: 0.0 is not -0.0. A short column is kept as it is
    (index None): there, finding the distinct values costs more than it saves.
    """
    if len(values) < _DISTINCT_FROM:
        return values, None
    encoded = pa.array(values.view(np.int64)).dictionary_encode()
    return np.asarray(encoded.dictionary).view(values.dtype), encoded.indices


def _every(written: pa.Array, indices: pa.Array | None) -> pa.Array:
    """The text of each value from the text of the distinct values."""
    return written if indices is None else written.take(indices)


def two_decimals(values: Floats) -> pa.Array:
    """Floats as `f"{x:.2f}"` writes them (`1.00`, `-0.00`, `0.12` for 0.125); NaN gives null.

    Python rounds the exact binary value half to even, so 1.005 (just below 1.005) gives
    `1.00` and 0.125 (exact) gives `0.12`; the hundredths are rounded the same way here.
    """
    each, indices = _distinct(np.asarray(values, dtype=np.float64))
    return _every(_two_decimals(each), indices)


def _two_decimals(values: Floats) -> pa.Array:
    size = np.abs(values)
    plain = size < _LARGE  # False for NaN and infinities too
    whole, rest = np.divmod(_hundredths(np.where(plain, size, 0.0)), 100)
    sign = _SIGNS.take(pa.array(np.signbit(values).astype(np.int64)))
    whole_text = pa.array(whole, mask=np.isnan(values))
    written = text(sign, whole_text, _CENTS.take(pa.array(rest)), rows=len(values))
    odd = np.flatnonzero(~plain & ~np.isnan(values)).astype(np.int64)
    return overlay(written, odd, [f"{values[i]:.2f}" for i in odd])


def _hundredths(size: Floats) -> Ints:
    """`size * 100` rounded half to even on its exact value (`size` finite, 0 to `_LARGE`)."""
    scaled = size * 100.0
    low = np.floor(scaled)
    rounded = np.rint(scaled)
    # The product is off by at most half an ulp: only a value that close to a half can round
    # the other way than its float product does.
    near = np.abs(scaled - (low + 0.5)) <= np.spacing(scaled)
    if near.any():
        rows = np.flatnonzero(near)
        rounded[rows] = _round_near_half(size[rows], low[rows])
    return rounded.astype(np.int64)


def _round_near_half(size: Floats, low: Floats) -> Floats:
    """`size * 100` rounded half to even, for values whose product is near `low + 0.5`.

    Compares `size * 200` with `2 * low + 1` in integers: `size = mantissa * 2**-shift`
    exactly, so both sides are scaled by `2**shift` (a near half is at least 0.005, so the shift
    is at most 60 and both sides stay below 2**61).
    """
    fraction, exponent = np.frexp(size)
    mantissa = (fraction * 2.0**53).astype(np.int64)
    shift = (53 - exponent).astype(np.int64)
    below = low.astype(np.int64)
    twice = mantissa * 200
    half = (2 * below + 1) << shift
    up = (twice > half) | ((twice == half) & (below % 2 == 1))
    return np.asarray(below + up, dtype=np.float64)


def thousands(values: Ints) -> pa.Array:
    """Whole numbers as `f"{n:,}"` writes them (`1,234,567`, `-1,000`)."""
    each, indices = _distinct(np.asarray(values, dtype=np.int64))
    return _every(_thousands(each), indices)


def _thousands(values: Ints) -> pa.Array:
    size = np.abs(values)  # the smallest int64 stays negative: Python writes it below
    top = int(size.max()) if len(size) else 0
    groups = max(1, (len(str(top)) + 2) // 3)
    pieces = []
    for place in range(groups):  # lowest first
        group = size // 1000**place % 1000
        shown = size >= 1000**place if place else np.ones(len(size), dtype=bool)
        code = np.where(shown, _PLAIN + group, _NOTHING)
        if place < groups - 1:
            code = np.where(size >= 1000 ** (place + 1), group, code)  # a group above: padded
        pieces.append(_GROUPS.take(pa.array(code)))
    sign = _SIGNS.take(pa.array((values < 0).astype(np.int64)))
    written = text(sign, *reversed(pieces), rows=len(values))
    odd = np.flatnonzero(size < 0).astype(np.int64)
    return overlay(written, odd, [f"{values[i]:,}" for i in odd])


@dataclass(frozen=True, eq=False)
class Times:
    """Each turn's times (seconds, NaN where unknown), counts and token sums."""

    wall: Floats
    from_agent: Bools
    """Whether the wall time is the AGENT span's (else first start to last end)."""
    model: Floats
    tool: Floats
    harness: Floats
    iterations: Ints
    tool_calls: Ints
    tokens: pa.Array
    """Prompt tokens of every turn, then completion tokens (int64), null where no LLM span of
    the turn has a count."""

    @cached_property
    def seconds_text(self) -> pa.Array:
        """Wall, model, tool and harness time with two decimals, one column after another."""
        return two_decimals(np.concatenate([getattr(self, name) for name in _SECONDS]))

    @cached_property
    def counts_text(self) -> pa.Array:
        """Iterations, then tool calls, as text."""
        return strings(np.concatenate([self.iterations, self.tool_calls]), 2 * len(self.wall))

    def column(self, values: pa.Array, index: int) -> pa.Array:
        """The `index`-th column of values written one column after another."""
        return values.slice(index * len(self.wall), len(self.wall))


@dataclass(frozen=True, slots=True, eq=False)
class Budgets:
    """Each turn's budgets (NaN: none), and their text."""

    seconds: Floats
    iterations: Floats
    seconds_text: Column
    """`max_seconds` as `:g` writes it (one string where every turn has the same budgets)."""
    iterations_text: Column
    within: Column
    """`30 s and 2 iterations`, null (or empty) without a budget."""
    seconds_json: Column
    """`max_seconds` as JSON (`null` without)."""
    iterations_json: Column


# -- the explanation and the details ---------------------------------------------------------------


def explanation(
    times: Times, budgets: Budgets, over_seconds: Bools, over_iterations: Bools, within: Bools
) -> pa.Array:
    """What is over the budget, the timing, the counts, and what it is within."""
    rows = len(times.wall)
    parts = []
    if over_seconds.any():
        over = text(
            _fixed(times, "wall"),
            " s is over the budget of ",
            budgets.seconds_text,
            " s",
            rows=rows,
        )
        parts.append(_when(over_seconds, over))
    if over_iterations.any():
        over = text(
            times.column(times.counts_text, 0),
            " iterations are over the budget of ",
            budgets.iterations_text,
            rows=rows,
        )
        parts.append(_when(over_iterations, over))
    parts += [_timing(times), _counts(times)]
    if within.any():
        parts.append(_when(within, text("within ", budgets.within, rows=rows)))
    return pc.binary_join_element_wise(*parts, "; ", null_handling="skip")


def _when(condition: Bools, values: pa.Array) -> pa.Array:
    """`values` where `condition` holds, null elsewhere."""
    return pc.if_else(pa.array(condition), values, pa.scalar(None, pa.string()))


def _fixed(times: Times, name: str) -> pa.Array:
    """One of the times (`wall`, `model`, `tool`, `harness`) with two decimals."""
    return times.column(times.seconds_text, _SECONDS.index(name))


def _timing(times: Times) -> pa.Array:
    """`wall 10.00 s (agent span) = model 6.00 s + tools 2.00 s + harness 2.00 s`, or why not."""
    rows = len(times.wall)
    source = _SOURCES.take(pa.array(times.from_agent.astype(np.int64)))
    wall = ("wall ", _fixed(times, "wall"), " s (", source, ")")
    timing = text(*wall, " = model ", _fixed(times, "model"), " s + tools ", _fixed(times, "tool"),
        " s + harness ", _fixed(times, "harness"), " s", rows=rows)  # fmt: skip
    missing = np.isnan(times.model).astype(np.int64) + 2 * np.isnan(times.tool)
    if ((missing > 0) & ~np.isnan(times.wall)).any():
        unsplit = text(*wall, "; the ", _NOT_SPLIT.take(pa.array(missing)),
                        " spans have no timestamps, so it is not split", rows=rows)  # fmt: skip
        timing = pc.coalesce(timing, unsplit)
    return pc.fill_null(timing, "no timestamps in the source")


def _counts(times: Times) -> pa.Array:
    """`2 iterations, 1 tool call, 3,000 prompt + 300 completion tokens`."""
    rows = len(times.wall)
    counts = (_counted(times.iterations, 0), ", ", _counted(times.tool_calls, 2))
    counted = pc.is_valid(times.tokens)
    if not pc.any(counted).as_py():
        return text(*counts, ", no token counts", rows=rows)
    written = thousands(np.asarray(times.tokens.fill_null(0), dtype=np.int64))
    prompt, completion = times.column(written, 0), times.column(written, 1)
    tokens = text(*counts, ", ", prompt, " prompt + ", completion, " completion tokens", rows=rows)
    either = pc.or_(times.column(counted, 0), times.column(counted, 1))
    if pc.all(either).as_py():
        return tokens
    return pc.if_else(either, tokens, text(*counts, ", no token counts", rows=rows))


def _counted(counts: Ints, noun: int) -> pa.Array:
    """`1 iteration`, `2 iterations` (`noun`: the place of the plural in `_PLURALS`)."""
    each, indices = _distinct(counts)
    ones = pa.array(noun + (each == 1).astype(np.int64))
    return _every(text(strings(each, len(each)), _PLURALS.take(ones), rows=len(each)), indices)


def details(times: Times, budgets: Budgets, timed: Bools) -> pa.Array:
    """The numbers as JSON objects, as `json.dumps(..., sort_keys=True)` writes them."""
    each, indices = _distinct(np.concatenate([getattr(times, name) for name in _SECONDS]))
    seconds = _every(pc.fill_null(strings(each, len(each)), "null"), indices)
    wall, model, tool, harness = (times.column(seconds, i) for i in range(4))
    tokens = pc.fill_null(pc.cast(times.tokens, pa.string()), "null")
    source = _WALL_FROM.take(pa.array(np.where(timed, times.from_agent, 2).astype(np.int64)))
    fields: dict[str, Column] = {
        "harness_seconds": harness,
        "iterations": times.column(times.counts_text, 0),
        "max_iterations": budgets.iterations_json,
        "max_seconds": budgets.seconds_json,
        "model_seconds": model,
        "tokens_completion": times.column(tokens, 1),
        "tokens_prompt": times.column(tokens, 0),
        "tool_calls": times.column(times.counts_text, 1),
        "tool_seconds": tool,
        "wall_from": source,
        "wall_seconds": wall,
    }
    return json_text(fields, len(times.wall))
