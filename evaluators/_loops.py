"""`tool_call_loops`: repeated identical tool calls, back-and-forth cycles, and what they cost.

A call is its tool name plus canonical arguments (call ids are ignored: some agents reuse one id
for every repeat). Runs of identical consecutive calls come from the same detector as the
harness's loop guard (`plangate.harness.call_runs`), applied to every turn of the table in one pass.
Per turn: the longest run and where it starts, redundant calls (exact repeats of an earlier call
anywhere in the turn), the longest A,B,A,B alternation, and the time and tokens the repeats
cost. The score is the share of calls that were not redundant.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._registry import evaluator
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
    TURN_INDEX,
)


@evaluator("tool_call_loops", version=2)
def tool_call_loops(
    frame: TraceFrame, rubrics: RubricSet, max_repeats: int = 2, max_cycle_calls: int = 3
) -> pd.DataFrame:
    """Longest run of identical consecutive calls, redundant calls and A,B,A,B cycles per turn.

    A turn fails when a call is repeated more than `max_repeats` times in a row, or when two
    calls alternate over more than `max_cycle_calls` calls.
    """
    tools = frame.tools
    keys = (tools[TOOL_NAME].astype(str) + " " + tools[TOOL_ARGS].fillna("").astype(str)).to_numpy(
        object
    )
    groups = tools.groupby(TURN_KEY, sort=False).ngroup().to_numpy()
    stats = _run_stats(tools, keys, groups)
    stats = stats.join(_cycle_stats(keys, groups), how="left")
    stats = stats.join(_waste(frame, tools, keys, groups), how="left")
    per_turn = tools[TURN_KEY].assign(group=groups).drop_duplicates("group").set_index("group")
    stats = per_turn.join(stats)
    result = frame.turns[TURN_KEY].merge(stats, on=TURN_KEY, how="left")
    rows = [_row(r, max_repeats, max_cycle_calls) for r in result.to_dict("records")]
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _run_stats(
    tools: pd.DataFrame, keys: npt.NDArray[Any], groups: npt.NDArray[Any]
) -> pd.DataFrame:
    runs = call_runs(keys, groups)
    table = pd.DataFrame(
        {
            "group": groups[runs.starts],
            "length": runs.lengths,
            "start": tools["call"].to_numpy()[runs.starts],
            "key": keys[runs.starts],
        }
    )
    longest = table.sort_values(
        ["group", "length", "start"], ascending=[True, False, True]
    ).drop_duplicates("group")
    longest = longest.set_index("group").rename(
        columns={"length": "longest", "start": "loop_start", "key": "loop_key"}
    )
    totals = pd.Series(groups).value_counts().rename("calls")
    redundant = (
        pd.Series(pd.DataFrame({"g": groups, "k": keys}).duplicated().to_numpy())
        .groupby(groups)
        .sum()
    )
    return longest.join(totals).join(redundant.rename("redundant"))


def _cycle_stats(keys: npt.NDArray[Any], groups: npt.NDArray[Any]) -> pd.DataFrame:
    """The longest A,B,A,B stretch per group (A != B), as a number of calls."""
    if len(keys) < 4:
        return pd.DataFrame(columns=["cycle_calls", "cycle_start"], dtype="float64")
    same_group = (groups[2:] == groups[:-2]) & (groups[1:-1] == groups[2:])
    alternating = (keys[2:] == keys[:-2]) & (keys[2:] != keys[1:-1]) & same_group
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
    frame: TraceFrame, tools: pd.DataFrame, keys: npt.NDArray[Any], groups: npt.NDArray[Any]
) -> pd.DataFrame:
    """Seconds and tokens spent on calls that repeat the call right before them."""
    repeat = np.zeros(len(keys), dtype=bool)
    if len(keys) > 1:
        repeat[1:] = (keys[1:] == keys[:-1]) & (groups[1:] == groups[:-1])
    seconds = (tools[END_TIME] - tools[START_TIME]).dt.total_seconds()
    wasted = pd.DataFrame(
        {"group": groups, "seconds": seconds.where(repeat, 0.0).astype("float64")}
    )
    timed = tools[START_TIME].notna().groupby(groups).all()
    out = wasted.groupby("group")["seconds"].sum().where(timed).rename("seconds_wasted").to_frame()
    llm = frame.llms[[*TURN_KEY, ITERATION, TOKENS_PROMPT, TOKENS_COMPLETION]].copy()
    llm["tokens"] = llm[TOKENS_PROMPT].astype("float64") + llm[TOKENS_COMPLETION].astype("float64")
    repeated = (
        tools.loc[repeat, [*TURN_KEY, ITERATION]].assign(group=groups[repeat]).drop_duplicates()
    )
    joined = repeated.merge(
        llm[[*TURN_KEY, ITERATION, "tokens"]], on=[*TURN_KEY, ITERATION], how="left"
    )
    tokens = joined.groupby("group")["tokens"].sum(min_count=1)
    return out.join(tokens.rename("tokens_wasted"))


def _row(stats: dict[str, Any], max_repeats: int, max_cycle_calls: int) -> dict[str, Any]:
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
    looped = longest > max_repeats
    cycled = cycle > max_cycle_calls
    parts = []
    if longest >= 2:
        shown = _show(stats["loop_key"])
        parts.append(f"{shown} repeated {longest} times in a row from call {start + 1} of {calls}")
    else:
        parts.append(f"no call repeated back to back ({calls} calls)")
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


def _show(key: Any, limit: int = 90) -> str:
    text = str(key)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _number(value: Any) -> float | None:
    if value is None or value is pd.NA:
        return None
    number = float(value)
    return None if number != number else number
