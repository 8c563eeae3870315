"""latency against a plain reference: one turn at a time, in Python, on generated tables.

The evaluator works column-wise over the whole table; `judge_turn` below reads one turn's spans
as dicts and says what the evaluator must say: outcome, score, label, explanation (written with
f-strings) and details. Times are pandas' times, as the evaluator's were before it was
vectorized: a duration is `total_seconds` of the timestamps' difference, and a turn's model or
tool time is pandas' groupby sum (numpy's reduction when no span of that kind lacks a timestamp
anywhere in the table, Kahan summation otherwise), so every number agrees to the last bit. The
hypothesis tests compare the two row for row on the shared generated tables (`trace_tables`) and
on tables with times to the microsecond (ties at half a hundredth, ends before starts, many spans
per turn), and the column-wise number formats with Python's.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import Rubric, RubricSet, evaluate
from plangate.evaluators._latency_text import thousands, two_decimals
from plangate.replay import SCHEMA
from tests.evaluators.tables import trace_tables

Span = dict[str, Any]
Key = tuple[str, int]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
START = datetime(2026, 1, 1, tzinfo=UTC)
SPLIT_KINDS = ("LLM", "TOOL")

# -- the reference ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """What the evaluator must say about one turn."""

    outcome: str
    score: float | None
    label: str
    explanation: str
    details: dict[str, Any]


def micros(at: datetime | None) -> int | None:
    return None if at is None else (at - EPOCH) // timedelta(microseconds=1)


def times(span: Span) -> tuple[int | None, int | None]:
    """A span's start and end in µs; neither where it ends before it starts (no time known)."""
    start, end = micros(span["start_time"]), micros(span["end_time"])
    if start is not None and end is not None and end < start:
        return None, None
    return start, end


def seconds(span: Span) -> float | None:
    """pandas' `total_seconds` of end minus start: whole seconds plus the rest over 1e6."""
    start, end = times(span)
    return None if start is None or end is None else total_seconds(end - start)


def total_seconds(us: int) -> float:
    whole, rest = divmod(us, 10**6)
    return whole + rest / 10**6


def pandas_sum(values: list[float], compensated: bool) -> float:
    """A turn's values added as pandas' groupby `sum` adds them (turns in order, no NaN here).

    `compensated`: the column has a NaN somewhere in the table, so pandas takes its Cython
    Kahan summation; otherwise it takes `np.add.reduceat` over the turns.
    """
    if not values:
        return 0.0
    if not compensated:
        return float(np.add.reduceat(np.array(values, dtype=np.float64), [0])[0])
    total = compensation = 0.0
    for value in values:
        step = value - compensation
        new = total + step
        compensation = (new - total) - step
        total = new
    return total


def judge_turn(spans: list[Span], rubric: Rubric | None, compensated: dict[str, bool]) -> Verdict:
    """The verdict on one turn, its spans in turn order."""
    agent = next((s for s in spans if s["span_kind"] == "AGENT"), None)
    agent_wall = None if agent is None else seconds(agent)
    starts = [at for at, _ in map(times, spans) if at is not None]
    ends = [at for _, at in map(times, spans) if at is not None]
    span_wall = total_seconds(max(ends) - min(starts)) if starts and ends else None
    wall = agent_wall if agent_wall is not None else span_wall
    parts: dict[str, float | None] = {}
    for kind in SPLIT_KINDS:
        durations = [seconds(s) for s in spans if s["span_kind"] == kind]
        timed = [d for d in durations if d is not None]
        known = wall is not None and len(timed) == len(durations)
        parts[kind] = pandas_sum(timed, compensated[kind]) if known else None
    model, tool = parts["LLM"], parts["TOOL"]
    harness = None
    if wall is not None and model is not None and tool is not None:
        harness = max(wall - model - tool, 0.0)
    llms = [s for s in spans if s["span_kind"] == "LLM"]
    details = {
        "wall_seconds": wall,
        "wall_from": None if wall is None else "agent span" if agent_wall is not None else "spans",
        "model_seconds": model,
        "tool_seconds": tool,
        "harness_seconds": harness,
        "iterations": len(llms),
        "tool_calls": sum(s["span_kind"] == "TOOL" for s in spans),
        "tokens_prompt": token_sum(llms, "tokens_prompt"),
        "tokens_completion": token_sum(llms, "tokens_completion"),
        "max_seconds": None if rubric is None else rubric.max_seconds,
        "max_iterations": None if rubric is None else rubric.max_iterations,
    }
    return verdict(details)


def token_sum(llms: list[Span], name: str) -> int | None:
    counted = [s[name] for s in llms if s[name] is not None]
    return sum(counted) if counted else None


def verdict(details: dict[str, Any]) -> Verdict:
    """Outcome, label and explanation from the numbers, as the evaluator writes them."""
    wall, iterations = details["wall_seconds"], details["iterations"]
    max_seconds, max_iterations = details["max_seconds"], details["max_iterations"]
    over = []
    if max_seconds is not None and wall is not None and wall > max_seconds:
        over.append(f"{wall:.2f} s is over the budget of {max_seconds:g} s")
    if max_iterations is not None and iterations > max_iterations:
        over.append(f"{iterations} iterations are over the budget of {max_iterations}")
    judged = max_iterations is not None or (max_seconds is not None and wall is not None)
    parts = [*over, timing(details), counts(details)]
    if over:
        label = "over budget"
    elif wall is None:
        label = "no timing"
    elif max_seconds is None and max_iterations is None:
        label = "no budget"
    else:
        label = "within budget"
        budgets = [f"{max_seconds:g} s"] if max_seconds is not None else []
        budgets += [f"{max_iterations} iterations"] if max_iterations is not None else []
        parts.append("within " + " and ".join(budgets))
    outcome = "n/a" if not judged else "fail" if over else "pass"
    return Verdict(outcome, wall, label, "; ".join(parts), details)


def timing(details: dict[str, Any]) -> str:
    wall = details["wall_seconds"]
    if wall is None:
        return "no timestamps in the source"
    text = f"wall {wall:.2f} s ({details['wall_from']})"
    model, tool = details["model_seconds"], details["tool_seconds"]
    if model is None or tool is None:
        missing = " and ".join(n for n, v in (("model", model), ("tool", tool)) if v is None)
        return text + f"; the {missing} spans have no timestamps, so it is not split"
    harness = details["harness_seconds"]
    return text + f" = model {model:.2f} s + tools {tool:.2f} s + harness {harness:.2f} s"


def counts(details: dict[str, Any]) -> str:
    def plural(count: int, noun: str) -> str:
        return f"{count} {noun}" if count == 1 else f"{count} {noun}s"

    text = f"{plural(details['iterations'], 'iteration')}, "
    text += plural(details["tool_calls"], "tool call")
    prompt, completion = details["tokens_prompt"], details["tokens_completion"]
    if prompt is None and completion is None:
        return text + ", no token counts"
    return text + f", {prompt or 0:,} prompt + {completion or 0:,} completion tokens"


def reference(table: pa.Table, rubrics: RubricSet) -> dict[Key, Verdict]:
    """Every turn's verdict: spans grouped by turn, ordered by start (none last), then row."""
    turns: dict[Key, list[tuple[int, Span]]] = defaultdict(list)
    for row, span in enumerate(table.to_pylist()):
        turns[(span["session_id"], span["turn_index"])].append((row, span))
    compensated = {
        kind: any(
            s["span_kind"] == kind and seconds(s) is None
            for spans in turns.values()
            for _, s in spans
        )
        for kind in SPLIT_KINDS
    }

    def order(entry: tuple[int, Span]) -> tuple[bool, int, int]:
        row, span = entry
        start = micros(span["start_time"])
        return (start is None, start or 0, row)

    return {
        key: judge_turn([s for _, s in sorted(spans, key=order)], rubrics.lookup(*key), compensated)
        for key, spans in turns.items()
    }


# -- generated tables ---------------------------------------------------------------------------


@st.composite
def timed_tables(draw: st.DrawFn) -> pa.Table:
    """Turns of up to 15 spans timed to the microsecond, some untimed, in any row order."""
    rows: list[Span] = []
    timed = draw(st.booleans())  # every timestamp there: pandas adds with numpy, not Kahan
    for s in range(draw(st.integers(1, 3))):
        for t in range(draw(st.integers(1, 3))):
            rows += draw(_timed_turn(f"s{s}", t, timed))
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    return pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in SCHEMA.names}, SCHEMA)


LENGTHS = st.integers(-(10**6), 10**8) | st.integers(0, 10**4).map(lambda k: k * 10_000 + 5_000)
"""Span lengths in microseconds: an end before its start, too, and x.xx5 s (a tie)."""
TOKENS = st.none() | st.integers(0, 10**7)
SPANS = st.tuples(
    st.sampled_from(["LLM", "LLM", "TOOL", "TOOL", "CHAIN", "AGENT"]),
    st.integers(0, 10**8),
    LENGTHS,
    st.integers(0, 5),  # 0: no start time, 1: no end time
    TOKENS,
    TOKENS,
)


@st.composite
def _timed_turn(draw: st.DrawFn, session: str, turn: int, timed: bool) -> list[Span]:
    base = {"session_id": session, "turn_index": turn, "trace_id": f"{session}-{turn}",
            "status_code": "OK", "source": "test"}  # fmt: skip
    spans = []
    for n, (kind, start, length, missing, prompt, completion) in enumerate(
        draw(st.lists(SPANS, max_size=14))
    ):
        spans.append(
            {**base, "span_id": f"x{n}", "span_kind": kind, "name": kind.lower(),
             "start_time": _at(start, timed or missing != 0),
             "end_time": _at(start + length, timed or missing != 1),
             "tokens_prompt": prompt if kind == "LLM" else None,
             "tokens_completion": completion if kind == "LLM" else None}
        )  # fmt: skip
    if not spans or draw(st.booleans()):
        length, missing = draw(LENGTHS), draw(st.integers(0, 5))
        spans.insert(0, {**base, "span_id": "a", "span_kind": "AGENT", "name": "agent.turn",
                         "start_time": _at(0, timed or missing != 0),
                         "end_time": _at(length, timed or missing != 1)})  # fmt: skip
    return spans


def _at(us: int, present: bool) -> datetime | None:
    return START + timedelta(microseconds=us) if present else None


def _budget_rubrics() -> st.SearchStrategy[Rubric]:
    seconds = st.none() | st.integers(0, 120) | st.floats(0.001, 150, allow_nan=False)
    return st.builds(Rubric, max_seconds=seconds, max_iterations=st.none() | st.integers(0, 10))


@st.composite
def rubric_sets(draw: st.DrawFn) -> RubricSet:
    keys = st.tuples(st.sampled_from(["s0", "s1", "s2", "a0", "b1", "zz"]), st.integers(0, 3))
    return RubricSet(
        default=draw(st.none() | _budget_rubrics()),
        turns=draw(st.dictionaries(keys, _budget_rubrics(), max_size=5)),
    )


# -- the comparisons ----------------------------------------------------------------------------


def assert_agrees(table: pa.Table, rubrics: RubricSet) -> None:
    expected = reference(table, rubrics)
    scores = evaluate(table, rubrics, names=["latency"]).to_pylist()
    assert sorted((r["session_id"], r["turn_index"]) for r in scores) == sorted(expected)
    for row in scores:
        want = expected[(row["session_id"], row["turn_index"])]
        assert json.loads(row["details"]) == want.details, row["explanation"]
        if row["outcome"] == "error":  # an infrastructure failure, marked by the registry
            continue
        got = (row["outcome"], row["score"], row["label"], row["explanation"])
        assert got == (want.outcome, want.score, want.label, want.explanation)


@settings(max_examples=60, deadline=None)
@given(trace_tables(), rubric_sets())
def test_the_evaluator_agrees_with_the_reference(table: pa.Table, rubrics: RubricSet) -> None:
    assert_agrees(table, rubrics)


@settings(max_examples=80, deadline=None)
@given(timed_tables(), rubric_sets())
def test_times_agree_to_the_last_bit(table: pa.Table, rubrics: RubricSet) -> None:
    assert_agrees(table, rubrics)


def test_a_turn_that_needs_every_rule() -> None:
    """Ten LLM spans (numpy adds eight at a time), one untimed TOOL span elsewhere (Kahan)."""
    rows = [
        {"session_id": "s", "turn_index": t, "trace_id": f"t{t}", "span_id": f"l{n}",
         "span_kind": "LLM", "name": "llm", "status_code": "OK", "source": "test",
         "start_time": START + timedelta(microseconds=n * 10**6),
         "end_time": START + timedelta(microseconds=n * 10**6 + 1_234 + 97 * n), "tokens_prompt": 1_000_000}
        for t in range(2) for n in range(10)
    ] + [{"session_id": "s", "turn_index": 1, "trace_id": "t", "span_id": "c", "span_kind": "TOOL",
          "name": "tool.x", "status_code": "OK", "source": "test", "start_time": START}]  # fmt: skip
    table = pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in SCHEMA.names}, SCHEMA)
    rubrics = RubricSet(default=Rubric(max_seconds=9), turns={("s", 1): Rubric(max_iterations=9)})
    assert_agrees(table, rubrics)
    first, second = evaluate(table, rubrics, names=["latency"]).to_pylist()
    assert first["outcome"] == "fail" and "10,000,000 prompt" in first["explanation"]
    assert (
        second["label"] == "over budget"
        and "the tool spans have no timestamps" in (second["explanation"])
    )


# -- number formats -----------------------------------------------------------------------------

NEAR_HALVES = st.integers(-(10**9), 10**9).map(lambda k: (k * 10 + 5) / 1000)
MICROS = st.integers(-(10**12), 10**12).map(total_seconds)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.floats() | NEAR_HALVES | MICROS | st.sampled_from([0.125, -0.0, 2.675]), max_size=40
    )
)
def test_two_decimals_are_python_s(values: list[float]) -> None:
    written = two_decimals(np.array(values, dtype=np.float64)).to_pylist()
    assert written == [None if v != v else f"{v:.2f}" for v in values]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(-(2**62), 2**62), max_size=40))
def test_thousands_are_python_s(values: list[int]) -> None:
    written = thousands(np.array(values, dtype=np.int64)).to_pylist()
    assert written == [f"{v:,}" for v in values]
