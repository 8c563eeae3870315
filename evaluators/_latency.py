"""`latency`: where a turn's time went, and whether it kept to its budget.

Per turn: wall time (the AGENT span's duration, else the last end minus the first start of its
spans), model time (the sum of LLM span durations), tool time (the sum of TOOL span durations),
harness time (wall minus model minus tool, at least 0: parallel calls can overlap), iterations
(LLM spans) and token sums (null when the source has no token counts). The score is the wall
time in seconds, null when the source has no timestamps. Over a dataset, `latency_summary` gives
p50/p95/p99 of wall time, and `latency_ratios` compares a candidate run with a baseline turn by
turn.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from plangate.evaluators._frame import TraceFrame
from plangate.evaluators._registry import evaluator
from plangate.evaluators._rubric import Rubric, RubricSet
from plangate.evaluators.scores import (
    DETAILS,
    EVALUATOR,
    EXPLANATION,
    LABEL,
    PASSED,
    RESULT_COLUMNS,
    SCORE,
    TURN_KEY,
)
from plangate.replay.schema import (
    END_TIME,
    SESSION_ID,
    SPAN_KIND,
    START_TIME,
    TOKENS_COMPLETION,
    TOKENS_PROMPT,
    TURN_INDEX,
)

NAME = "latency"


@evaluator(NAME, version=2)
def latency(frame: TraceFrame, rubrics: RubricSet) -> pd.DataFrame:
    """Wall time per turn, split into model, tool and harness time; iterations and tokens.

    A turn passes when it is within its rubric's `max_seconds` and `max_iterations` (each only
    when given). Without timestamps the score is null and only the iteration budget applies;
    without a budget that applies the turn is not applicable (its time is still the score).

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with the budgets.

    Returns:
        One row per turn; the score is the wall time in seconds.
    """
    stats = frame.turn_frame[TURN_KEY].merge(_turn_times(frame), on=TURN_KEY, how="left")
    rows = []
    for record in stats.to_dict("records"):
        key = (str(record[SESSION_ID]), int(record[TURN_INDEX]))
        rows.append(_row(key, record, rubrics.lookup(*key)))
    return pd.DataFrame(rows, columns=RESULT_COLUMNS)


def _turn_times(frame: TraceFrame) -> pd.DataFrame:
    """Times, iterations and tokens per turn, one groupby per span kind."""
    spans = frame.span_frame
    seconds = (spans[END_TIME] - spans[START_TIME]).dt.total_seconds().astype("float64")
    timed = spans.assign(seconds=seconds, untimed=seconds.isna())
    by_turn = timed.groupby(TURN_KEY, sort=False)
    span_wall = (by_turn[END_TIME].max() - by_turn[START_TIME].min()).dt.total_seconds()
    agents = timed[timed[SPAN_KIND] == "AGENT"].drop_duplicates(TURN_KEY).set_index(TURN_KEY)
    llms = timed[timed[SPAN_KIND] == "LLM"].groupby(TURN_KEY, sort=False)
    tools = timed[timed[SPAN_KIND] == "TOOL"].groupby(TURN_KEY, sort=False)
    stats = pd.DataFrame(
        {
            "agent_wall": agents["seconds"],
            "span_wall": span_wall.astype("float64"),
            "model": llms["seconds"].sum(),
            "model_untimed": llms["untimed"].any(),
            "tool": tools["seconds"].sum(),
            "tool_untimed": tools["untimed"].any(),
            "iterations": llms.size(),
            "tool_calls": tools.size(),
            TOKENS_PROMPT: llms[TOKENS_PROMPT].sum(min_count=1).astype("float64"),
            TOKENS_COMPLETION: llms[TOKENS_COMPLETION].sum(min_count=1).astype("float64"),
        }
    )
    stats["wall"] = stats["agent_wall"].fillna(stats["span_wall"])
    stats["wall_from"] = np.where(stats["agent_wall"].notna(), "agent span", "spans")
    timed_turn = stats["wall"].notna()
    # A part is known when every span of its kind has timestamps (none of the kind: 0 s).
    for part in ("model", "tool"):
        known = timed_turn & ~stats[f"{part}_untimed"].fillna(False).astype(bool)
        stats[part] = stats[part].fillna(0.0).where(known)
    stats["harness"] = (stats["wall"] - stats["model"] - stats["tool"]).clip(lower=0.0)
    stats[["iterations", "tool_calls"]] = stats[["iterations", "tool_calls"]].fillna(0)
    return stats.reset_index()


def _row(key: tuple[str, int], record: dict[str, Any], rubric: Rubric | None) -> dict[str, Any]:
    wall = _number(record.get("wall"))
    iterations = int(_number(record.get("iterations")) or 0)
    max_seconds = rubric.max_seconds if rubric is not None else None
    max_iterations = rubric.max_iterations if rubric is not None else None
    over = []
    if max_seconds is not None and wall is not None and wall > max_seconds:
        over.append(f"{wall:.2f} s is over the budget of {max_seconds:g} s")
    if max_iterations is not None and iterations > max_iterations:
        over.append(f"{iterations} iterations are over the budget of {max_iterations}")
    # Without a budget that can be checked, a time is a measurement, not a pass: n/a.
    judged = max_iterations is not None or (max_seconds is not None and wall is not None)
    details = _details(record, max_seconds, max_iterations)
    parts = [_timing(details), _counts(details)]
    if over:
        label = "over budget"
    elif wall is None:
        label = "no timing"
    elif max_seconds is None and max_iterations is None:
        label = "no budget"
    else:
        label = "within budget"
        parts.append(f"within {_budget(max_seconds, max_iterations)}")
    return {
        SESSION_ID: key[0],
        TURN_INDEX: key[1],
        SCORE: wall,
        PASSED: not over if judged else None,
        LABEL: label,
        EXPLANATION: "; ".join(over + parts),
        DETAILS: details,
    }


def _details(
    record: dict[str, Any], max_seconds: float | None, max_iterations: int | None
) -> dict[str, Any]:
    def count(name: str) -> int | None:
        value = _number(record.get(name))
        return None if value is None else int(value)

    wall = _number(record.get("wall"))
    return {
        "wall_seconds": wall,
        "wall_from": record.get("wall_from") if wall is not None else None,
        "model_seconds": _number(record.get("model")),
        "tool_seconds": _number(record.get("tool")),
        "harness_seconds": _number(record.get("harness")),
        "iterations": count("iterations") or 0,
        "tool_calls": count("tool_calls") or 0,
        "tokens_prompt": count(TOKENS_PROMPT),
        "tokens_completion": count(TOKENS_COMPLETION),
        "max_seconds": max_seconds,
        "max_iterations": max_iterations,
    }


def _timing(details: dict[str, Any]) -> str:
    wall = details["wall_seconds"]
    if wall is None:
        return "no timestamps in the source"
    text = f"wall {wall:.2f} s ({details['wall_from']})"
    model, tool = details["model_seconds"], details["tool_seconds"]
    if model is None or tool is None:
        missing = " and ".join(
            name for name, value in (("model", model), ("tool", tool)) if value is None
        )
        return text + f"; the {missing} spans have no timestamps, so it is not split"
    return text + (
        f" = model {model:.2f} s + tools {tool:.2f} s + harness {details['harness_seconds']:.2f} s"
    )


def _counts(details: dict[str, Any]) -> str:
    iterations = _plural(details["iterations"], "iteration")
    text = f"{iterations}, {_plural(details['tool_calls'], 'tool call')}"
    prompt, completion = details["tokens_prompt"], details["tokens_completion"]
    if prompt is None and completion is None:
        return text + ", no token counts"
    return text + f", {prompt or 0:,} prompt + {completion or 0:,} completion tokens"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _budget(max_seconds: float | None, max_iterations: int | None) -> str:
    parts = []
    if max_seconds is not None:
        parts.append(f"{max_seconds:g} s")
    if max_iterations is not None:
        parts.append(f"{max_iterations} iterations")
    return " and ".join(parts)


def _number(value: Any) -> float | None:
    if value is None or value is pd.NA:
        return None
    number = float(value)
    return None if number != number else number


# -- over a dataset ----------------------------------------------------------------------------


def latency_summary(scores: pa.Table | pd.DataFrame) -> dict[str, Any]:
    """Percentiles of wall time, mean iterations and total tokens over a score table.

    Args:
        scores: Scores as `evaluate` returns them (rows of other evaluators are ignored).

    Returns:
        `turns`, `timed_turns`, `p50_seconds`, `p95_seconds`, `p99_seconds`,
        `mean_iterations`, `tokens_prompt`, `tokens_completion`, `tokens_total` (None where
        no turn has the number).
    """
    table = latency_details(scores)
    wall = table["wall_seconds"].dropna().to_numpy("float64")
    prompt = table["tokens_prompt"].dropna()
    completion = table["tokens_completion"].dropna()
    has_tokens = len(prompt) + len(completion) > 0
    return {
        "turns": len(table),
        "timed_turns": len(wall),
        "p50_seconds": _percentile(wall, 50),
        "p95_seconds": _percentile(wall, 95),
        "p99_seconds": _percentile(wall, 99),
        "mean_iterations": float(table["iterations"].mean()) if len(table) else None,
        "tokens_prompt": int(prompt.sum()) if len(prompt) else None,
        "tokens_completion": int(completion.sum()) if len(completion) else None,
        "tokens_total": int(prompt.sum() + completion.sum()) if has_tokens else None,
    }


def latency_ratios(
    candidate: pa.Table | pd.DataFrame, baseline: pa.Table | pd.DataFrame
) -> pd.DataFrame:
    """Wall time of each turn in a candidate run over the same turn in a baseline run.

    Args:
        candidate: Scores of the candidate run.
        baseline: Scores of the baseline run.

    Returns:
        One row per turn timed in both (matched by session and turn index, baseline time above
        zero): `session_id`, `turn_index`, `candidate_seconds`, `baseline_seconds`, `ratio`.
    """
    columns = [*TURN_KEY, "wall_seconds"]
    new = latency_details(candidate)[columns].dropna()
    old = latency_details(baseline)[columns].dropna()
    pairs = new.merge(old, on=TURN_KEY, suffixes=("_candidate", "_baseline"))
    pairs = pairs.rename(
        columns={
            "wall_seconds_candidate": "candidate_seconds",
            "wall_seconds_baseline": "baseline_seconds",
        }
    )
    pairs = pairs[pairs["baseline_seconds"] > 0].reset_index(drop=True)
    pairs["ratio"] = pairs["candidate_seconds"] / pairs["baseline_seconds"]
    return pairs[[*TURN_KEY, "candidate_seconds", "baseline_seconds", "ratio"]]


def ratio_p50(ratios: pd.DataFrame) -> float | None:
    """Median of `latency_ratios`' ratio column (None without pairs)."""
    return _percentile(ratios["ratio"].to_numpy("float64"), 50)


def ratio_p95(ratios: pd.DataFrame) -> float | None:
    """95th percentile of `latency_ratios`' ratio column (None without pairs)."""
    return _percentile(ratios["ratio"].to_numpy("float64"), 95)


def latency_details(scores: pa.Table | pd.DataFrame) -> pd.DataFrame:
    """The latency rows of a score table with their details as columns.

    Args:
        scores: Scores as `evaluate` returns them, as an Arrow table or a DataFrame.

    Returns:
        `session_id`, `turn_index`, `wall_seconds`, `iterations`, `tokens_prompt`,
        `tokens_completion` (floats, NaN where missing).
    """
    frame = scores.to_pandas() if isinstance(scores, pa.Table) else scores
    if EVALUATOR in frame.columns:
        frame = frame[frame[EVALUATOR] == NAME]
    parsed = [_parse(d) for d in frame[DETAILS]]
    numbers = pd.DataFrame(
        {
            name: pd.array([p.get(name) for p in parsed], dtype="Float64")
            for name in ("wall_seconds", "iterations", "tokens_prompt", "tokens_completion")
        }
    ).astype("float64")
    keys = frame[TURN_KEY].reset_index(drop=True)
    return pd.concat([keys, numbers], axis=1)


def _parse(details: Any) -> dict[str, Any]:
    if isinstance(details, dict):
        return details
    if not isinstance(details, str):
        return {}
    value = json.loads(details)
    return value if isinstance(value, dict) else {}


def _percentile(values: Any, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None
