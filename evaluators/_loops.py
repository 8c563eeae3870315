"""`tool_call_loops`: repeated identical tool calls, back-and-forth cycles, and what they cost.

A call is its tool name plus canonical arguments (call ids are ignored: some agents reuse one id
for every repeat). Runs come from the same detector as the harness's loop guard
(`plangate.harness.call_runs`), applied to every turn of the table in one pass.

Where the table records results (`tool_output`), they tell a loop from progress: identical calls
whose results change (scrolling, paging, polling a job that moves on) are progress, and only a
run of identical calls that got the same result back counts as a loop (the detector's rule: a
change of result starts a new run; a missing result is no evidence either way). The parameter
`compare_results = false` turns this off: then identical calls alone count, as in version 2.
Results are compared as the tool returned them: the notes plangate's own harness appends to a
result for the model (the loop guard's warning, which counts the repeats, and the plan status
reminder) are left out, and a long result stored by reference is compared without its
reference number. The same rule applies to the other measures: a redundant call repeats an
earlier identical call with the same result, an A,B,A,B cycle repeats its results, and only
repeats inside a run waste time and tokens.

Per turn: the longest run and where it starts, the longest stretch of identical calls whose
results changed (progress, reported and not counted), redundant calls (exact repeats of an
earlier call anywhere in the turn), the longest A,B,A,B alternation, and the time and tokens
the repeats cost. The score is the share of calls that were not redundant.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import pandas as pd

from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._registry import EvaluatorError, evaluator
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators.scores import (
    DETAILS,
    EXPLANATION,
    LABEL,
    PASSED,
    RESULT_COLUMNS,
    SCORE,
    TURN_KEY,
)
from plangate.harness import call_runs
from plangate.replay.schema import (
    END_TIME,
    ITERATION,
    SESSION_ID,
    START_TIME,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TOOL_ARGS,
    TOOL_NAME,
    TOOL_OUTPUT,
    TURN_INDEX,
)

_HARNESS_NOTES = ("[Loop guard: ", "[Plan: ")
"""How the lines start that plangate's harness appends to a tool's result for the model."""
_STORED = re.compile(r"\[Stored as ref-\d+: ")
_NONE = np.array(None, dtype=object)  # compared elementwise: which results are known
_REFERENCE = re.compile(r"\bref-\d+\b")


class _Runs(Protocol):
    """What `call_runs` returns (the harness's `Runs`)."""

    @property
    def starts(self) -> npt.NDArray[np.int64]: ...
    @property
    def lengths(self) -> npt.NDArray[np.int64]: ...
    @property
    def progress(self) -> npt.NDArray[np.bool_]: ...


@evaluator("tool_call_loops", version=3)
def tool_call_loops(
    frame: TraceFrame,
    rubrics: RubricSet,
    max_repeats: int = 2,
    max_cycle_calls: int = 3,
    compare_results: bool = True,
) -> pd.DataFrame:
    """Longest run of identical consecutive calls with the same result, redundant calls, cycles.

    A turn fails when a call is repeated more than `max_repeats` times in a row with the same
    result (with `compare_results` off: whatever its results), or when two calls alternate over
    more than `max_cycle_calls` calls. Identical calls whose results change are progress.
    """
    _check_params(max_repeats, max_cycle_calls, compare_results)
    tools = frame.tool_frame
    keys = (tools[TOOL_NAME].astype(str) + " " + tools[TOOL_ARGS].fillna("").astype(str)).to_numpy(
        object
    )
    groups = tools.groupby(TURN_KEY, sort=False).ngroup().to_numpy()
    results = _results(tools, keys, groups) if compare_results else None
    runs = call_runs(keys, groups, results)
    stats = _run_stats(tools, keys, groups, runs, results)
    stats = stats.join(_progress_stats(tools, keys, groups, runs), how="left")
    stats = stats.join(_cycle_stats(keys, groups, results), how="left")
    stats = stats.join(_waste(frame, tools, runs, groups), how="left")
    per_turn = tools[TURN_KEY].assign(group=groups).drop_duplicates("group").set_index("group")
    stats = per_turn.join(stats)
    result = frame.turn_frame[TURN_KEY].merge(stats, on=TURN_KEY, how="left")
    rows = [
        _row(r, max_repeats, max_cycle_calls, compare_results) for r in result.to_dict("records")
    ]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _check_params(max_repeats: Any, max_cycle_calls: Any, compare_results: Any) -> None:
    for name, value in (("max_repeats", max_repeats), ("max_cycle_calls", max_cycle_calls)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise EvaluatorError(
                f"evaluator 'tool_call_loops': {name!r} must be a whole number >= 0, not {value!r}"
            )
    if not isinstance(compare_results, bool):
        raise EvaluatorError(
            "evaluator 'tool_call_loops': 'compare_results' must be true or false, "
            f"not {compare_results!r}"
        )


def _tool_result(output: str) -> str:
    """A recorded tool output as the tool returned it, to compare with another.

    Without the harness's notes to the model (`_HARNESS_NOTES` lines at its end), and, for a
    result stored by reference, without the reference's number.
    """
    text = output
    while text.endswith("]"):
        head, newline, last = text.rpartition("\n")
        if not newline or not last.startswith(_HARNESS_NOTES):
            break
        text = head
    if _STORED.match(text):
        text = _REFERENCE.sub("ref", text)
    return text


def _results(
    tools: pd.DataFrame, keys: npt.NDArray[Any], groups: npt.NDArray[Any]
) -> npt.NDArray[Any]:
    """Each call's result to compare, None where unknown.

    Only for calls made more than once in their turn: the others have nothing to be compared
    with, so their results are never read (most calls of most turns).
    """
    outputs = tools[TOOL_OUTPUT].to_numpy(object)
    repeated = pd.DataFrame({"g": groups, "k": keys}).duplicated(keep=False).to_numpy()
    repeated = repeated & tools[TOOL_OUTPUT].notna().to_numpy()
    results = np.full(len(keys), None, dtype=object)
    results[repeated] = [_tool_result(str(o)) for o in outputs[repeated]]
    return results


def _run_stats(
    tools: pd.DataFrame,
    keys: npt.NDArray[Any],
    groups: npt.NDArray[Any],
    runs: _Runs,
    results: npt.NDArray[Any] | None,
) -> pd.DataFrame:
    known = np.zeros(len(keys), dtype=np.int64)
    if results is not None:
        known = np.not_equal(results, _NONE).astype(np.int64)
    table = pd.DataFrame(
        {
            "group": groups[runs.starts],
            "length": runs.lengths,
            "start": tools["call"].to_numpy()[runs.starts],
            "key": keys[runs.starts],
            "known": np.add.reduceat(known, runs.starts) if len(keys) else known,
        }
    )
    longest = table.sort_values(
        ["group", "length", "start"], ascending=[True, False, True]
    ).drop_duplicates("group")
    longest = longest.set_index("group").rename(
        columns={
            "length": "longest",
            "start": "loop_start",
            "key": "loop_key",
            "known": "loop_known",
        }
    )
    totals = pd.Series(groups).value_counts().rename("calls")
    columns = (
        {"g": groups, "k": keys} if results is None else {"g": groups, "k": keys, "r": results}
    )
    redundant = pd.Series(pd.DataFrame(columns).duplicated().to_numpy()).groupby(groups).sum()
    recorded = tools[TOOL_OUTPUT].notna().groupby(groups).sum().rename("recorded")
    return longest.join(totals).join(redundant.rename("redundant")).join(recorded)


def _progress_stats(
    tools: pd.DataFrame, keys: npt.NDArray[Any], groups: npt.NDArray[Any], runs: _Runs
) -> pd.DataFrame:
    """Per group, the longest stretch of identical calls, whatever their results.

    `identical_calls` is its length; `progress_calls` (with `progress_start`, `progress_key`
    and `result_changes`) is the longest stretch whose results changed at least once.
    """
    stretch = np.cumsum(~runs.progress) - 1  # runs joined across changes of result
    firsts = runs.starts[~runs.progress]
    table = pd.DataFrame(
        {
            "group": groups[firsts],
            "length": np.bincount(stretch, weights=runs.lengths).astype(np.int64),
            "changes": np.bincount(stretch, weights=runs.progress).astype(np.int64),
            "start": tools["call"].to_numpy()[firsts],
            "key": keys[firsts],
        }
    )
    identical = table.groupby("group")["length"].max().rename("identical_calls")
    moved = table[table["changes"] > 0].sort_values(
        ["group", "length", "start"], ascending=[True, False, True]
    )
    progress = moved.drop_duplicates("group").set_index("group")
    progress = progress.rename(
        columns={
            "length": "progress_calls",
            "changes": "result_changes",
            "start": "progress_start",
            "key": "progress_key",
        }
    )
    return identical.to_frame().join(progress, how="left")


def _cycle_stats(
    keys: npt.NDArray[Any], groups: npt.NDArray[Any], results: npt.NDArray[Any] | None
) -> pd.DataFrame:
    """The longest A,B,A,B stretch per group (A != B), as a number of calls.

    A call whose result differs from the one two calls before it breaks the stretch.
    """
    if len(keys) < 4:
        return pd.DataFrame(columns=["cycle_calls", "cycle_start"], dtype="float64")
    same_group = (groups[2:] == groups[:-2]) & (groups[1:-1] == groups[2:])
    alternating = (keys[2:] == keys[:-2]) & (keys[2:] != keys[1:-1]) & same_group
    if results is not None:
        later, earlier = results[2:], results[:-2]
        known = np.not_equal(later, _NONE) & np.not_equal(earlier, _NONE)
        alternating &= ~(known & (later != earlier))
    runs = call_runs(alternating, groups[2:])
    flags = alternating[runs.starts]
    table = pd.DataFrame(
        {
            "group": groups[2:][runs.starts][flags],
            "calls": runs.lengths[flags] + 2,
            "position": runs.starts[flags],
        }
    )
    if table.empty:
        return pd.DataFrame(columns=["cycle_calls", "cycle_start"], dtype="float64")
    best = (
        table.sort_values(["group", "calls"], ascending=[True, False])
        .drop_duplicates("group")
        .set_index("group")
    )
    first = pd.Series(np.arange(len(groups))).groupby(groups).min()
    best["cycle_start"] = best["position"] - first.reindex(best.index).to_numpy()
    return best.rename(columns={"calls": "cycle_calls"})[["cycle_calls", "cycle_start"]]


def _waste(
    frame: TraceFrame, tools: pd.DataFrame, runs: _Runs, groups: npt.NDArray[Any]
) -> pd.DataFrame:
    """Seconds and tokens spent on calls that repeat the call right before them (in a run)."""
    repeat = np.ones(len(groups), dtype=bool)
    repeat[runs.starts] = False
    seconds = (tools[END_TIME] - tools[START_TIME]).dt.total_seconds()
    wasted = pd.DataFrame(
        {"group": groups, "seconds": seconds.where(repeat, 0.0).astype("float64")}
    )
    timed = tools[START_TIME].notna().groupby(groups).all()
    out = wasted.groupby("group")["seconds"].sum().where(timed).rename("seconds_wasted").to_frame()
    llm = frame.llm_frame[[*TURN_KEY, ITERATION, TOKENS_PROMPT, TOKENS_COMPLETION]].copy()
    llm["tokens"] = llm[TOKENS_PROMPT].astype("float64") + llm[TOKENS_COMPLETION].astype("float64")
    repeated = (
        tools.loc[repeat, [*TURN_KEY, ITERATION]].assign(group=groups[repeat]).drop_duplicates()
    )
    joined = repeated.merge(
        llm[[*TURN_KEY, ITERATION, "tokens"]], on=[*TURN_KEY, ITERATION], how="left"
    )
    tokens = joined.groupby("group")["tokens"].sum(min_count=1)
    return out.join(tokens.rename("tokens_wasted"))


def _row(
    stats: dict[str, Any], max_repeats: int, max_cycle_calls: int, compare_results: bool
) -> dict[str, Any]:
    calls = int(_number(stats.get("calls")) or 0)
    base = {SESSION_ID: stats[SESSION_ID], TURN_INDEX: int(stats[TURN_INDEX])}
    if calls == 0:
        return {
            **base,
            SCORE: None,
            PASSED: None,
            LABEL: "no calls",
            EXPLANATION: "not applicable: the turn made no tool calls",
            DETAILS: {"calls": 0},
        }
    longest = int(stats["longest"])
    start = int(stats["loop_start"])
    cycle = int(_number(stats.get("cycle_calls")) or 0)
    redundant = int(stats["redundant"])
    progress = int(_number(stats.get("progress_calls")) or 0)
    looped = longest > max_repeats
    cycled = cycle > max_cycle_calls
    parts = [_loop_text(stats, calls, compare_results)]
    if progress:
        parts.append(_progress_text(stats))
    if cycle >= 4:  # A,B,A is ordinary (search, open, search); A,B,A,B is going in circles
        parts.append(
            f"two calls alternate for {cycle} calls from call {int(stats['cycle_start']) + 1}"
        )
    if redundant:
        parts.append(f"{redundant} of {calls} calls repeat an earlier identical call")
    details: dict[str, Any] = {
        "calls": calls,
        "longest_run": longest,
        "loop_start": start if longest >= 2 else None,
        "loop_call": stats["loop_key"] if longest >= 2 else None,
        "results": _results_state(stats, compare_results),
        "identical_calls": int(stats["identical_calls"]),
        "progress_calls": progress,
        "progress_start": int(stats["progress_start"]) if progress else None,
        "result_changes": int(stats["result_changes"]) if progress else 0,
        "redundant": redundant,
        "cycle_calls": cycle,
        "seconds_wasted": _number(stats.get("seconds_wasted")),
        "tokens_wasted": _number(stats.get("tokens_wasted")),
    }
    return {
        **base,
        SCORE: 1.0 - redundant / calls,
        PASSED: not (looped or cycled),
        LABEL: "loop" if looped else "cycle" if cycled else "ok",
        EXPLANATION: "; ".join(parts),
        DETAILS: details,
    }


def _results_state(stats: dict[str, Any], compare_results: bool) -> str:
    """`compared`, `not compared` (the parameter is off) or `not recorded` (no result known)."""
    if not compare_results:
        return "not compared"
    return "compared" if int(_number(stats.get("recorded")) or 0) else "not recorded"


def _loop_text(stats: dict[str, Any], calls: int, compare_results: bool) -> str:
    """The longest run, and whether its calls got the same result back."""
    longest = int(stats["longest"])
    if longest < 2:
        moved = " with the same result" if _number(stats.get("progress_calls")) else ""
        return f"no call repeated back to back{moved} ({calls} calls)"
    text = (
        f"{_show(stats['loop_key'])} repeated {longest} times in a row "
        f"from call {int(stats['loop_start']) + 1} of {calls}"
    )
    known = int(stats["loop_known"])
    if not compare_results:
        return f"{text} (results not compared)"
    if known == longest:
        return f"{text} with the same result"
    if known:
        return f"{text} with the same result ({longest - known} of {longest} results not recorded)"
    return f"{text} (results not recorded)"


def _progress_text(stats: dict[str, Any]) -> str:
    """The longest stretch of identical calls whose results changed: progress, not counted."""
    calls, changes = int(stats["progress_calls"]), int(stats["result_changes"])
    how = "each time" if changes == calls - 1 else f"{changes} of {calls - 1} times"
    verdict = (
        "progress, not a loop" if changes == calls - 1 else "a loop only where they stayed the same"
    )
    return (
        f"{calls} identical calls to {_show(stats['progress_key'])} from call "
        f"{int(stats['progress_start']) + 1} whose results changed {how}: {verdict}"
    )


def _show(key: Any, limit: int = 90) -> str:
    text = str(key)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _number(value: Any) -> float | None:
    if value is None or value is pd.NA:
        return None
    number = float(value)
    return None if number != number else number
