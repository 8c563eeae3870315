"""`latency`: where a turn's time went, and whether it kept to its budget.

Per turn: wall time (the AGENT span's duration, else the last end minus the first start of its
spans), model time (the sum of LLM span durations), tool time (the sum of TOOL span durations),
harness time (wall minus model minus tool, at least 0: parallel calls can overlap), iterations
(LLM spans) and token sums (null when the source has no token counts). The score is the wall
time in seconds, null when the source has no timestamps. Over a dataset, `latency_summary` gives
p50/p95/p99 of wall time, and `latency_ratios` compares a candidate run with a baseline turn by
turn.

Every turn is computed at once, column-wise over the frame: durations from the timestamps as
integers, sums per turn over the spans' places, text from templates over columns.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from plangate.evaluators._arithmetic import group_sums, seconds_between
from plangate.evaluators._columns import Column, TurnScores
from plangate.evaluators._frame import Spans, TraceFrame
from plangate.evaluators._latency_text import Budgets, Times, details, explanation
from plangate.evaluators._registry import evaluator
from plangate.evaluators._rubric import RubricSet
from plangate.evaluators.scores import DETAILS, EVALUATOR, TURN_KEY
from plangate.replay.schema import END_TIME, START_TIME, TOKENS_COMPLETION, TOKENS_PROMPT

NAME = "latency"

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

LABELS = pa.array(["over budget", "no timing", "no budget", "within budget"], pa.string())
_OVER, _UNTIMED, _UNBUDGETED, _WITHIN = range(4)


@evaluator(NAME, version=2)
def latency(frame: TraceFrame, rubrics: RubricSet) -> TurnScores:
    """Wall time per turn, split into model, tool and harness time; iterations and tokens.

    A turn passes when it is within its rubric's `max_seconds` and `max_iterations` (each only
    when given). Without timestamps the score is null and only the iteration budget applies;
    without a budget that applies the turn is not applicable (its time is still the score).

    Args:
        frame: The prepared trace table.
        rubrics: Rubrics with the budgets.

    Returns:
        Every turn's verdict; the score is the wall time in seconds.
    """
    times = _times(frame)
    budgets = _budgets(frame, rubrics)
    timed = ~np.isnan(times.wall)
    has_seconds, has_iterations = ~np.isnan(budgets.seconds), ~np.isnan(budgets.iterations)
    over_seconds = has_seconds & timed & (times.wall > budgets.seconds)
    over_iterations = has_iterations & (times.iterations > budgets.iterations)
    over = over_seconds | over_iterations
    # Without a budget that can be checked, a time is a measurement, not a pass: n/a.
    judged = has_iterations | (has_seconds & timed)
    unbudgeted = np.where(has_seconds | has_iterations, _WITHIN, _UNBUDGETED)
    label = np.where(over, _OVER, np.where(timed, unbudgeted, _UNTIMED))
    return TurnScores(
        passed=np.where(judged, np.where(over, 0.0, 1.0), np.nan),
        score=times.wall,
        label=LABELS.take(pa.array(label.astype(np.int64))),
        explanation=explanation(times, budgets, over_seconds, over_iterations, label == _WITHIN),
        details=details(times, budgets, timed),
    )


# -- times -------------------------------------------------------------------------------------


def _times(frame: TraceFrame) -> Times:
    """Each turn's wall, model, tool and harness time, its counts and its token sums."""
    turns = len(frame.turns)
    start, start_known = _micros(frame, START_TIME)
    end, end_known = _micros(frame, END_TIME)
    inverted = start_known & end_known & (end < start)  # a clock stepped back: no time known
    if inverted.any():
        start_known, end_known = start_known & ~inverted, end_known & ~inverted
    duration = np.where(start_known & end_known, seconds_between(start, end), np.nan)
    agent = frame.turns.agent
    agent_wall = np.where(agent >= 0, duration[agent] if len(duration) else np.nan, np.nan)
    from_agent = ~np.isnan(agent_wall)
    wall = agent_wall
    if not from_agent.all():
        wall = np.where(
            from_agent, agent_wall, _span_wall(frame, start, start_known, end, end_known)
        )
    iterations, tool_calls = frame.llms.counts(turns), frame.tools.counts(turns)
    model = _part(frame.llms, iterations, duration, wall)
    tool = _part(frame.tools, tool_calls, duration, wall)
    harness = wall - model - tool
    tokens = [_tokens(frame, name, iterations) for name in (TOKENS_PROMPT, TOKENS_COMPLETION)]
    return Times(
        wall=wall,
        from_agent=from_agent,
        model=model,
        tool=tool,
        harness=np.where(harness < 0, 0.0, harness),
        iterations=iterations,
        tool_calls=tool_calls,
        tokens=pa.concat_arrays(tokens),
    )


def _micros(frame: TraceFrame, name: str) -> tuple[Ints, Bools]:
    """A timestamp column at every position in whole microseconds (0 for null), and where known."""
    return _integers(frame.column(name).cast(pa.int64()))


def _integers(values: pa.Array) -> tuple[Ints, Bools]:
    """An int64 column as NumPy (0 for null), and where it is not null."""
    if not values.null_count:
        return np.asarray(values.to_numpy(), dtype=np.int64), np.ones(len(values), dtype=bool)
    known = np.asarray(values.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return np.asarray(values.fill_null(0).to_numpy(), dtype=np.int64), known


def _span_wall(
    frame: TraceFrame, start: Ints, start_known: Bools, end: Ints, end_known: Bools
) -> Floats:
    """Each turn's last end minus its first start over all its spans (NaN without either)."""
    first = frame.turns.start
    if not len(first):
        return np.zeros(0)
    bounds = np.iinfo(np.int64)
    latest = np.maximum.reduceat(np.where(end_known, end, bounds.min), first)
    earliest = np.minimum.reduceat(np.where(start_known, start, bounds.max), first)
    known = (latest > bounds.min) & (earliest < bounds.max)
    span = seconds_between(np.where(known, earliest, 0), np.where(known, latest, 0))
    return np.where(known, span, np.nan)


def _part(spans: Spans, counts: Ints, duration: Floats, wall: Floats) -> Floats:
    """The summed durations of some spans per turn (0 where the turn has none of them).

    NaN where the turn is untimed or one of these spans has no timestamps.
    """
    values = duration[spans.position]
    missing = np.isnan(values)
    untimed = np.bincount(spans.turn[missing], minlength=len(wall)) > 0
    sums = np.zeros(len(counts))
    some = counts > 0
    sums[some] = group_sums(values, (np.cumsum(counts) - counts)[some])
    return np.where(np.isnan(wall) | untimed, np.nan, sums)


def _sums(ufunc: np.ufunc, values: npt.NDArray[Any], counts: Ints, dtype: type) -> npt.NDArray[Any]:
    """`ufunc` reduced over each turn's values (in turn order, `counts` of them a turn).

    0 (or False) where a turn has none. For seconds this is how pandas' groupby `sum` adds them
    when none of the column is NaN.
    """
    sums: npt.NDArray[Any] = np.zeros(len(counts), dtype=dtype)
    some = counts > 0
    if some.any():
        sums[some] = ufunc.reduceat(values, (np.cumsum(counts) - counts)[some])
    return sums


def _tokens(frame: TraceFrame, name: str, counts: Ints) -> pa.Array:
    """A token count summed over each turn's LLM spans (int64), null where none has one."""
    numbers, counted = _integers(frame.values(name, frame.llms.position).cast(pa.int64()))
    if (numbers < 0).any():  # a count below zero is none (as `tokens` reads it)
        counted, numbers = counted & (numbers >= 0), np.maximum(numbers, 0)
    totals = _sums(np.add, numbers, counts, np.int64)
    has = _sums(np.logical_or, counted, counts, np.bool_)
    return pa.array(totals, pa.int64(), mask=~has)


# -- budgets -----------------------------------------------------------------------------------


def _budgets(frame: TraceFrame, rubrics: RubricSet) -> Budgets:
    """Each turn's budgets, from its own rubric, else the default (text once per budget)."""
    index_of: dict[tuple[str, str], int] = {}
    pairs: list[tuple[Any, Any]] = []
    slots = []
    for rubric in [rubrics.default, *rubrics.turns.values()]:
        pair = (None, None) if rubric is None else (rubric.max_seconds, rubric.max_iterations)
        key = (json.dumps(pair[0], default=str), json.dumps(pair[1], default=str))
        if key not in index_of:
            index_of[key] = len(pairs)
            pairs.append(pair)
        slots.append(index_of[key])
    slot = np.asarray(slots, dtype=np.int64)[_own_rubrics(frame, rubrics) + 1]
    return Budgets(
        seconds=_floats([s for s, _ in pairs], slot),
        iterations=_floats([i for _, i in pairs], slot),
        seconds_text=_texts([None if s is None else f"{s:g}" for s, _ in pairs], slot),
        iterations_text=_texts([None if i is None else str(i) for _, i in pairs], slot),
        within=_texts([_within(*pair) for pair in pairs], slot),
        seconds_json=_texts([key[0] for key in index_of], slot),
        iterations_json=_texts([key[1] for key in index_of], slot),
    )


def _floats(values: list[Any], slot: Ints) -> Floats:
    per_slot = np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)
    return per_slot[slot]


def _texts(values: list[str | None], slot: Ints) -> Column:
    if len(values) == 1:  # every turn has the same budgets: a constant
        return values[0] or ""
    return pa.array(values, pa.string()).take(pa.array(slot))


def _within(max_seconds: Any, max_iterations: Any) -> str | None:
    parts = []
    if max_seconds is not None:
        parts.append(f"{max_seconds:g} s")
    if max_iterations is not None:
        parts.append(f"{max_iterations} iterations")
    return " and ".join(parts) or None


def _own_rubrics(frame: TraceFrame, rubrics: RubricSet) -> Ints:
    """Each turn's place in `rubrics.turns`, -1 where it has no rubric of its own."""
    own = np.full(len(frame.turns), -1, dtype=np.int64)
    if not rubrics.turns or not len(own):
        return own
    encoded = frame.turns.session_id.dictionary_encode()
    named = pa.array([session for session, _ in rubrics.turns], pa.string())
    session = pc.index_in(named, value_set=encoded.dictionary).fill_null(-1)
    session_code = np.asarray(session.to_numpy(zero_copy_only=False), dtype=np.int64)
    index = np.asarray([turn for _, turn in rubrics.turns], dtype=np.int64)
    turn_index = frame.turns.turn_index
    low = int(turn_index.min())
    width = int(turn_index.max()) - low + 1
    known = (session_code >= 0) & (index >= low) & (index < low + width)
    keys = np.where(known, session_code * width + index - low, -1)
    wanted = np.asarray(encoded.indices, dtype=np.int64) * width + turn_index - low
    order = np.argsort(keys, kind="stable")
    at = np.minimum(np.searchsorted(keys[order], wanted), len(keys) - 1)
    found = keys[order][at] == wanted
    own[found] = order[at[found]]
    return own


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
