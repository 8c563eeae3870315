"""`tool_call_loops`' verdicts, explanations and details for every turn.

A plain turn (no call repeated back to back, no progress, no cycle) gets its text from a
template over columns. The others (loops, cycles, progress, turns without calls) are written by
Python, once for each distinct set of figures: the same figures always read the same.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._columns import Column, TurnScores, json_text, overlay, text
from plangate.evaluators._loops_stats import Bools, Ints, Keys, TurnStats, numpy_ints

_LABELS = pa.array(["ok", "loop", "cycle", "no calls"], pa.string())
_FIGURES = (
    "calls", "longest", "loop_start", "loop_code", "loop_known", "identical", "progress",
    "progress_start", "progress_code", "changes", "redundant", "cycle", "cycle_start",
)  # fmt: skip
"""The figures a written turn's text reads (besides whether results were recorded, the time
and the tokens)."""


def scores(
    stats: TurnStats,
    keys: Keys,
    max_repeats: int,
    max_cycle_calls: int,
    compare_results: bool,
) -> TurnScores:
    """Every turn's verdict: a loop, a cycle, or ok; the share of calls that were not redundant."""
    some = stats.calls > 0
    looped = stats.longest > max_repeats
    cycled = stats.cycle > max_cycle_calls
    label = np.where(~some, 3, np.where(looped, 1, np.where(cycled, 2, 0)))
    share = 1.0 - np.divide(stats.redundant, stats.calls, where=some, out=np.zeros(len(some)))
    explanation, details = _plain(stats, compare_results)
    written = np.flatnonzero(
        ~some | (stats.longest >= 2) | (stats.progress > 0) | (stats.cycle >= 4)
    )
    if len(written):
        texts, objects = _written(stats, keys, written, compare_results)
        explanation = overlay(explanation, written, texts)
        details = overlay(details, written, objects)
    return TurnScores(
        passed=np.where(some, (~(looped | cycled)).astype(np.float64), np.nan),
        score=np.where(some, share, np.nan),
        label=_LABELS.take(pa.array(label)),
        explanation=explanation,
        details=details,
    )


def _plain(stats: TurnStats, compare_results: bool) -> tuple[pa.Array, pa.Array]:
    """Explanations and details of turns whose calls were never repeated back to back.

    Figures that are the same for every turn are written into the templates.
    """
    rows = len(stats.calls)
    parts: list[Column] = ["no call repeated back to back (", stats.calls, " calls)"]
    if stats.redundant.any():
        redundant = pa.array(stats.redundant, pa.int64(), mask=stats.redundant == 0)
        repeats = text(
            "; ",
            redundant,
            " of ",
            stats.calls,
            " calls repeat an earlier identical call",
            rows=rows,
        )
        parts.append(pc.fill_null(repeats, ""))
    results: Any = "not compared"
    if compare_results:
        results = _either(stats.recorded > 0, "compared", "not recorded")
    fields: dict[str, Any] = {
        "calls": _constant(stats.calls),
        "longest_run": 1,
        "loop_start": None,
        "loop_call": None,
        "results": results,
        "identical_calls": 1,
        "progress_calls": 0,
        "progress_start": None,
        "result_changes": 0,
        "redundant": _constant(stats.redundant),
        "cycle_calls": _constant(stats.cycle),
        "seconds_wasted": _either(np.isnan(stats.seconds), None, 0.0),  # nothing repeated
        "tokens_wasted": None,
    }
    details = json_text(
        {
            k: v if isinstance(v, pa.Array | np.ndarray) else json.dumps(v)
            for k, v in fields.items()
        },
        rows,
    )
    return text(*parts, rows=rows), details


def _constant(values: Ints) -> int | Ints:
    """The one value of every row, where they are all equal; else the values."""
    if len(values) and (values == values[0]).all():
        return int(values[0])
    return values


def _either(where: Bools, yes: Any, no: Any) -> Any:
    """`yes` where `where` holds, else `no`: one value where the rows agree, else JSON text."""
    if where.all() or not where.any():
        return yes if where.all() else no
    return pc.if_else(pa.array(where), json.dumps(yes), json.dumps(no))


def _written(
    stats: TurnStats, keys: Keys, rows: Ints, compare_results: bool
) -> tuple[list[str], list[str]]:
    """Explanations and details (JSON) of the turns at `rows`, each distinct turn written once."""
    figures = np.column_stack([getattr(stats, name)[rows] for name in _FIGURES])
    measured = np.column_stack(
        [
            stats.recorded[rows] > 0,
            stats.seconds[rows].view(np.int64),
            stats.tokens[rows].view(np.int64),
        ]
    )
    first, distinct = _distinct_rows(np.hstack([figures, measured]))
    turns = [dict(zip(_FIGURES, figures[row].tolist(), strict=True)) for row in first]
    for turn, row in zip(turns, first, strict=True):
        turn["recorded"] = bool(measured[row, 0])
        turn["seconds"] = _number(stats.seconds[rows[row]])
        turn["tokens"] = _number(stats.tokens[rows[row]])
    shown = {t["loop_code"] for t in turns if t["longest"] >= 2}
    shown |= {t["progress_code"] for t in turns if t["progress"]}
    codes = sorted(shown)
    texts = dict(zip(codes, keys.texts(np.asarray(codes, dtype=np.int64)), strict=True))
    written = [_turn_text(turn, texts, compare_results) for turn in turns]
    return [written[d][0] for d in distinct], [written[d][1] for d in distinct]


def _distinct_rows(matrix: Ints) -> tuple[Ints, Ints]:
    """The first of each distinct row of a whole-number matrix, and each row's distinct number."""
    data = np.ascontiguousarray(matrix, dtype=np.int64)
    binary = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(8 * data.shape[1]), len(data), [None, pa.py_buffer(data)]
    )
    distinct = numpy_ints(binary.dictionary_encode().indices)
    _, first = np.unique(distinct, return_index=True)
    return first.astype(np.int64), distinct


def _turn_text(
    turn: dict[str, Any], keys: dict[int, str], compare_results: bool
) -> tuple[str, str]:
    """One turn's explanation and details (JSON)."""
    calls, cycle, redundant = turn["calls"], turn["cycle"], turn["redundant"]
    if calls == 0:
        return "not applicable: the turn made no tool calls", json.dumps({"calls": 0})
    parts = [_loop_text(turn, keys, compare_results)]
    if turn["progress"]:
        parts.append(_progress_text(turn, keys))
    if cycle >= 4:  # A,B,A is ordinary (search, open, search); A,B,A,B is going in circles
        parts.append(f"two calls alternate for {cycle} calls from call {turn['cycle_start'] + 1}")
    if redundant:
        parts.append(f"{redundant} of {calls} calls repeat an earlier identical call")
    return "; ".join(parts), json.dumps(_details(turn, keys, compare_results), sort_keys=True)


def _details(turn: dict[str, Any], keys: dict[int, str], compare_results: bool) -> dict[str, Any]:
    """One turn's evidence, for machines."""
    repeated, progress = turn["longest"] >= 2, turn["progress"]
    results = "not compared"
    if compare_results:
        results = "compared" if turn["recorded"] else "not recorded"
    return {
        "calls": turn["calls"],
        "longest_run": turn["longest"],
        "loop_start": turn["loop_start"] if repeated else None,
        "loop_call": keys[turn["loop_code"]] if repeated else None,
        "results": results,
        "identical_calls": turn["identical"],
        "progress_calls": progress,
        "progress_start": turn["progress_start"] if progress else None,
        "result_changes": turn["changes"],
        "redundant": turn["redundant"],
        "cycle_calls": turn["cycle"],
        "seconds_wasted": turn["seconds"],
        "tokens_wasted": turn["tokens"],
    }


def _loop_text(turn: dict[str, Any], keys: dict[int, str], compare_results: bool) -> str:
    """The longest run, and whether its calls got the same result back."""
    calls, longest = turn["calls"], turn["longest"]
    if longest < 2:
        moved = " with the same result" if turn["progress"] else ""
        return f"no call repeated back to back{moved} ({calls} calls)"
    text = (
        f"{_show(keys[turn['loop_code']])} repeated {longest} times in a row "
        f"from call {turn['loop_start'] + 1} of {calls}"
    )
    known = turn["loop_known"]
    if not compare_results:
        return f"{text} (results not compared)"
    if known == longest:
        return f"{text} with the same result"
    if known:
        return f"{text} with the same result ({longest - known} of {longest} results not recorded)"
    return f"{text} (results not recorded)"


def _progress_text(turn: dict[str, Any], keys: dict[int, str]) -> str:
    """The longest stretch of identical calls whose results changed: progress, not counted."""
    calls, changes = turn["progress"], turn["changes"]
    how = "each time" if changes == calls - 1 else f"{changes} of {calls - 1} times"
    verdict = (
        "progress, not a loop" if changes == calls - 1 else "a loop only where they stayed the same"
    )
    return (
        f"{calls} identical calls to {_show(keys[turn['progress_code']])} from call "
        f"{turn['progress_start'] + 1} whose results changed {how}: {verdict}"
    )


def _show(key: str, limit: int = 90) -> str:
    return repr(key if len(key) <= limit else key[: limit - 1] + "…")


def _number(value: float) -> float | None:
    return None if math.isnan(value) else float(value)
