"""`tool_call_loops`' verdicts, explanations and details for every turn.

Python writes the text once for each distinct set of figures (the same figures always read the
same) and the turns take theirs by index: the plain turns (no call repeated back to back, no
progress, no cycle) share a handful of texts, so the cost grows with the loops, cycles and
progress found, not with the turns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from plangate.evaluators._columns import TurnScores
from plangate.evaluators._loops_stats import Bools, Ints, Keys, TurnStats, numpy_ints

_LABELS = pa.array(["ok", "loop", "cycle", "no calls"], pa.string())
_FIGURES = (
    "calls", "longest", "loop_start", "loop_code", "loop_known", "identical", "progress",
    "progress_start", "progress_code", "changes", "redundant", "cycle", "cycle_start",
)  # fmt: skip
"""The figures a turn's text reads (besides whether results were recorded, the time and the
tokens)."""
_HIDDEN: dict[str, Callable[[TurnStats], Bools]] = {
    "loop_start": lambda s: s.longest < 2,
    "loop_code": lambda s: s.longest < 2,
    "loop_known": lambda s: s.longest < 2,
    "progress_start": lambda s: s.progress == 0,
    "progress_code": lambda s: s.progress == 0,
    "cycle_start": lambda s: s.cycle < 4,
}
"""Where a figure is not shown (`_turn_text` reads it only where it is)."""


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
    explanation, details = _texts(stats, keys, compare_results)
    return TurnScores(
        passed=np.where(some, (~(looped | cycled)).astype(np.float64), np.nan),
        score=np.where(some, share, np.nan),
        label=_LABELS.take(pa.array(label)),
        explanation=explanation,
        details=details,
    )


def _texts(stats: TurnStats, keys: Keys, compare_results: bool) -> tuple[pa.Array, pa.Array]:
    """Explanations and details (JSON) of every turn, each distinct set of figures written once.

    Figures a turn's text does not show (where a run starts when no call was repeated, say)
    are set to 0 first, so that the many plain turns share a handful of texts.
    """
    figures = np.column_stack([_shown(stats, name) for name in _FIGURES])
    measured = np.column_stack(
        [stats.recorded > 0, stats.seconds.view(np.int64), stats.tokens.view(np.int64)]
    )
    first, distinct = _distinct_rows(np.hstack([figures, measured]))
    turns = [dict(zip(_FIGURES, figures[row].tolist(), strict=True)) for row in first]
    for turn, row in zip(turns, first, strict=True):
        turn["recorded"] = bool(measured[row, 0])
        turn["seconds"] = _number(stats.seconds[row])
        turn["tokens"] = _number(stats.tokens[row])
    shown = {t["loop_code"] for t in turns if t["longest"] >= 2}
    shown |= {t["progress_code"] for t in turns if t["progress"]}
    codes = sorted(shown)
    texts = dict(zip(codes, keys.texts(np.asarray(codes, dtype=np.int64)), strict=True))
    written = [_turn_text(turn, texts, compare_results) for turn in turns]
    index = pa.array(distinct)
    explanations = pa.array([w[0] for w in written], pa.string()).take(index)
    return explanations, pa.array([w[1] for w in written], pa.string()).take(index)


def _shown(stats: TurnStats, name: str) -> Ints:
    """A figure of every turn, 0 where the turn's text does not show it."""
    values: Ints = getattr(stats, name)
    hidden = _HIDDEN.get(name)
    if hidden is None:
        return values
    return np.where(hidden(stats), 0, values)


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
