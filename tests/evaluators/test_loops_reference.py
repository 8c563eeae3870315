"""tool_call_loops against a plain reference: one turn at a time, in Python, on generated tables.

The evaluator works on codes over the whole table; `judge_turn` below reads one turn's spans as
dicts (in the frame's order: start time, spans without one last, then row order) and walks its
calls once, saying what the evaluator must say: outcome, score, label, explanation and the
details. The hypothesis tests compare the two row for row on the shared generated tables
(`trace_tables`) and on tables made to trip the encoding (tool names and arguments that join to
the same text, calls without a name or arguments, the harness's notes on results, results stored
by reference, times to the microsecond, missing end times and iterations).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plangate.evaluators import evaluate
from plangate.evaluators._loops import _tool_result
from plangate.evaluators._loops_stats import find_runs
from plangate.harness import call_runs
from plangate.replay import SCHEMA
from plangate.replay.schema import ERROR_STOP_REASONS
from tests.bench.bench_evaluators import synthetic_table
from tests.evaluators.tables import trace_tables

Span = dict[str, Any]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
PARAMS = st.sampled_from(
    [
        {},
        {"compare_results": False},
        {"max_repeats": 0, "max_cycle_calls": 2},
        {"max_repeats": 3, "max_cycle_calls": 5},
    ]
)

# -- the reference ------------------------------------------------------------------------------


@dataclass
class Run:
    """Identical calls in a row with the same result."""

    start: int
    length: int
    progress: bool
    """It begins where the same call's result changed."""
    known: int
    """How many of its results are known."""


def runs_of(keys: list[str | None], results: list[str | None]) -> list[Run]:
    """The runs of a turn: a call extends the run before it when it is the same call (with a
    name) and its result, if known, is the last one known in the stretch of identical calls."""
    runs: list[Run] = []
    last: str | None = None
    for index, (key, result) in enumerate(zip(keys, results, strict=True)):
        same = index > 0 and key is not None and key == keys[index - 1]
        if not same:
            last = None
        changed = same and result is not None and last is not None and result != last
        if same and not changed:
            runs[-1].length += 1
            runs[-1].known += result is not None
        else:
            runs.append(Run(index, 1, changed, int(result is not None)))
        if result is not None:
            last = result
    return runs


def stretches_of(runs: list[Run]) -> list[tuple[int, int, int]]:
    """Runs joined across changes of result: (start, calls, changes)."""
    stretches: list[list[int]] = []
    for run in runs:
        if run.progress:
            stretches[-1][1] += run.length
            stretches[-1][2] += 1
        else:
            stretches.append([run.start, run.length, 0])
    return [(s[0], s[1], s[2]) for s in stretches]


def longest_cycle(keys: list[str | None], results: list[str | None]) -> tuple[int, int]:
    """The longest A,B,A,B stretch (calls, first call); a changed result breaks it."""
    best, start, length = (0, 0), 0, 0
    for index in range(2, len(keys)):
        key, before, earlier = keys[index], keys[index - 1], keys[index - 2]
        now, then = results[index], results[index - 2]
        changed = now is not None and then is not None and now != then
        if key is not None and key == earlier and key != before and not changed:
            start, length = (start, length + 1) if length else (index - 2, 1)
            if length + 2 > best[0]:
                best = (length + 2, start)
        else:
            length = 0
    return best


def waste(tools: list[Span], llms: list[Span], runs: list[Run]) -> tuple[Any, Any]:
    """Seconds (all calls timed) and tokens (of the repeats' iterations) the repeats cost."""
    firsts = {run.start for run in runs}
    repeats = [t for i, t in enumerate(tools) if i not in firsts]
    seconds = None
    if all(t["start_time"] is not None for t in tools):
        seconds = sum(
            (t["end_time"] - t["start_time"]).total_seconds()
            for t in repeats
            if t["end_time"] is not None
        )
    iterations = {t["iteration"] for t in repeats}
    spent = [
        llm["tokens_prompt"] + llm["tokens_completion"]
        for llm in llms
        if llm["iteration"] in iterations
        and llm["tokens_prompt"] is not None
        and llm["tokens_completion"] is not None
    ]
    return seconds, (float(sum(spent)) if spent else None)


def show(key: str) -> str:
    return repr(key if len(key) <= 90 else key[:89] + "…")


def judge_turn(
    spans: list[Span],
    rubric: Any = None,
    max_repeats: int = 2,
    max_cycle_calls: int = 3,
    compare_results: bool = True,
) -> dict[str, Any]:
    """What tool_call_loops must say of one turn (it reads no rubric)."""
    tools = [s for s in spans if s["span_kind"] == "TOOL"]
    if not tools:
        explanation = "not applicable: the turn made no tool calls"
        return {"outcome": "n/a", "score": None, "label": "no calls",
                "explanation": explanation, "details": {"calls": 0}}  # fmt: skip
    keys = [None if t["tool_name"] is None else f"{t['tool_name']} {t['tool_args'] or ''}" for t in tools]  # fmt: skip
    made = Counter(keys)
    results = [
        _tool_result(t["tool_output"])
        if compare_results and made[k] > 1 and t["tool_output"] is not None
        else None
        for t, k in zip(tools, keys, strict=True)
    ]
    runs = runs_of(keys, results)
    longest = max(runs, key=lambda r: r.length)
    stretches = stretches_of(runs)
    moved = [s for s in stretches if s[2]]
    progress = max(moved, key=lambda s: s[1]) if moved else None
    seen: set[tuple[str | None, str | None]] = set()
    redundant = 0
    for pair in zip(keys, results, strict=True):
        redundant += pair in seen
        seen.add(pair)
    cycle, cycle_start = longest_cycle(keys, results)
    seconds, tokens = waste(tools, [s for s in spans if s["span_kind"] == "LLM"], runs)
    calls = len(tools)
    looped, cycled = longest.length > max_repeats, cycle > max_cycle_calls
    recorded = any(t["tool_output"] is not None for t in tools)
    details = {
        "calls": calls,
        "longest_run": longest.length,
        "loop_start": longest.start if longest.length >= 2 else None,
        "loop_call": keys[longest.start] if longest.length >= 2 else None,
        "results": ("compared" if recorded else "not recorded")
        if compare_results
        else "not compared",
        "identical_calls": max(s[1] for s in stretches),
        "progress_calls": progress[1] if progress else 0,
        "progress_start": progress[0] if progress else None,
        "result_changes": progress[2] if progress else 0,
        "redundant": redundant,
        "cycle_calls": cycle,
        "seconds_wasted": seconds,
        "tokens_wasted": tokens,
    }
    parts = [loop_text(longest, keys, calls, progress is not None, compare_results)]
    if progress:
        start, length, changes = progress
        every = changes == length - 1
        how = "each time" if every else f"{changes} of {length - 1} times"
        verdict = "progress, not a loop" if every else "a loop only where they stayed the same"
        parts.append(
            f"{length} identical calls to {show(str(keys[start]))} from call {start + 1} "
            f"whose results changed {how}: {verdict}"
        )
    if cycle >= 4:
        parts.append(f"two calls alternate for {cycle} calls from call {cycle_start + 1}")
    if redundant:
        parts.append(f"{redundant} of {calls} calls repeat an earlier identical call")
    return {
        "outcome": "fail" if looped or cycled else "pass",
        "score": 1 - redundant / calls,
        "label": "loop" if looped else "cycle" if cycled else "ok",
        "explanation": "; ".join(parts),
        "details": details,
    }


def loop_text(
    longest: Run, keys: list[str | None], calls: int, moved: bool, compare_results: bool
) -> str:
    if longest.length < 2:
        same = " with the same result" if moved else ""
        return f"no call repeated back to back{same} ({calls} calls)"
    text = (
        f"{show(str(keys[longest.start]))} repeated {longest.length} times in a row "
        f"from call {longest.start + 1} of {calls}"
    )
    if not compare_results:
        return f"{text} (results not compared)"
    if longest.known == longest.length:
        return f"{text} with the same result"
    if longest.known:
        unknown = longest.length - longest.known
        return f"{text} with the same result ({unknown} of {longest.length} results not recorded)"
    return f"{text} (results not recorded)"


def turns_of(table: pa.Table) -> dict[tuple[str, int], list[Span]]:
    """Each turn's spans in the frame's order: start time (none last), then row order."""
    grouped: dict[tuple[str, int], list[tuple[int, Span]]] = defaultdict(list)
    for index, row in enumerate(table.to_pylist()):
        grouped[(row["session_id"], row["turn_index"])].append((index, row))
    return {
        turn: [
            span
            for _, span in sorted(
                spans, key=lambda p: (p[1]["start_time"] is None, p[1]["start_time"] or EPOCH, p[0])
            )
        ]
        for turn, spans in grouped.items()
    }


def assert_matches_reference(table: pa.Table, params: dict[str, Any]) -> None:
    found = evaluate(table, names=["tool_call_loops"], params={"tool_call_loops": params})
    turns = turns_of(table)
    assert found.num_rows == len(turns)
    for row in found.to_pylist():
        spans = turns[(row["session_id"], row["turn_index"])]
        if any(s["span_kind"] == "AGENT" and s["stop_reason"] in ERROR_STOP_REASONS for s in spans):
            continue  # the registry's, not the evaluator's
        expected = judge_turn(spans, None, **params)
        for column in ("outcome", "label", "explanation"):
            assert row[column] == expected[column], (column, expected)
        assert row["score"] == pytest.approx(expected["score"])
        assert json.loads(row["details"]) == pytest.approx(expected["details"]), expected


# -- tables made to trip the encoding -----------------------------------------------------------

START = datetime(2026, 1, 1, tzinfo=UTC)
NAMES = ("a", "a b", "search", None)
ARGUMENTS = ("c", "b c", '{"q":1}', "", None)
OUTPUTS = (None, "r", "s", "r\n[Loop guard: 3 times in a row]", "r\n[Plan: 0/2 done.]",
           "[Stored as ref-1: long]", "[Stored as ref-2: long]", "r\n[end]")  # fmt: skip


@st.composite
def loop_tables(draw: st.DrawFn) -> pa.Table:
    """A few turns of calls from small pools, timed to the microsecond, rows in any order."""
    rows: list[Span] = []
    pool = draw(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(ARGUMENTS)),
                         min_size=1, max_size=4, unique=True))  # fmt: skip
    for turn in range(draw(st.integers(1, 3))):
        base = {"session_id": "s", "turn_index": turn, "trace_id": f"t{turn}",
                "status_code": "OK", "source": "test"}  # fmt: skip
        rows.append({**base, "span_id": f"{turn}", "span_kind": "AGENT", "name": "agent.turn"})
        clock = START + timedelta(hours=turn)
        for index in range(draw(st.integers(0, 12))):
            name, arguments = draw(st.sampled_from(pool))
            iteration = draw(st.one_of(st.none(), st.integers(1, 4)))
            spent = timedelta(microseconds=draw(st.integers(1, 3_000_000)))
            timed = draw(st.integers(0, 9)) > 0
            rows.append({**base, "span_id": f"{turn}-l{index}", "span_kind": "LLM",
                         "name": "llm.call", "iteration": iteration,
                         "tokens_prompt": draw(st.one_of(st.none(), st.integers(1, 999))),
                         "tokens_completion": 5})  # fmt: skip
            rows.append({**base, "span_id": f"{turn}-c{index}", "span_kind": "TOOL",
                         "name": "tool.x", "iteration": iteration, "tool_name": name,
                         "tool_args": arguments, "tool_output": draw(st.sampled_from(OUTPUTS)),
                         "start_time": clock if timed else None,
                         "end_time": clock + spent if draw(st.integers(0, 5)) else None})  # fmt: skip
            clock += spent + timedelta(microseconds=draw(st.integers(0, 999)))
    if draw(st.booleans()):
        rows = draw(st.permutations(rows))
    return pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in SCHEMA.names}, schema=SCHEMA)


# -- the tests ----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(table=trace_tables(), params=PARAMS)
def test_every_turn_is_judged_as_the_reference_judges_it(
    table: pa.Table, params: dict[str, Any]
) -> None:
    assert_matches_reference(table, params)


@settings(max_examples=60, deadline=None)
@given(table=loop_tables(), params=PARAMS)
def test_keys_results_and_times_are_compared_as_the_reference_compares_them(
    table: pa.Table, params: dict[str, Any]
) -> None:
    assert_matches_reference(table, params)


def test_the_bench_table_is_judged_as_the_reference_judges_it() -> None:
    table, _ = synthetic_table(turns=60, calls=12)
    found = evaluate(table, names=["tool_call_loops"]).to_pylist()
    assert {r["label"] for r in found} == {"ok", "loop"}  # the table loops where it should
    assert_matches_reference(table, {})


def one_turn(calls: list[tuple[str | None, str | None, str | None]]) -> pa.Table:
    """A turn of calls given as (tool name, arguments, output), untimed."""
    base = {"session_id": "s", "turn_index": 0, "trace_id": "t", "status_code": "OK",
            "source": "test"}  # fmt: skip
    rows = [{**base, "span_id": "a", "span_kind": "AGENT", "name": "agent.turn"}]
    for index, (name, arguments, output) in enumerate(calls):
        rows.append({**base, "span_id": f"c{index}", "span_kind": "TOOL", "name": "tool.x",
                     "tool_name": name, "tool_args": arguments, "tool_output": output})  # fmt: skip
    return pa.Table.from_pydict({n: [r.get(n) for r in rows] for n in SCHEMA.names}, schema=SCHEMA)


def test_a_name_and_arguments_that_join_to_the_same_text_are_the_same_call() -> None:
    table = one_turn([("a b", "c", "r"), ("a", "b c", "r"), ("a b", "c", "r")])
    row = evaluate(table, names=["tool_call_loops"]).to_pylist()[0]
    assert (row["label"], json.loads(row["details"])["loop_call"]) == ("loop", "a b c")
    assert_matches_reference(table, {})


def test_empty_arguments_are_no_arguments() -> None:
    # found by the test above: "search" with "" and "search" with null were two calls
    table = one_turn([("search", "", "r"), ("search", None, "r"), ("search", None, "r")])
    row = evaluate(table, names=["tool_call_loops"]).to_pylist()[0]
    details = json.loads(row["details"])
    assert (row["label"], details["longest_run"], details["redundant"]) == ("loop", 3, 2)
    assert_matches_reference(table, {})


def test_calls_without_a_name_never_run_but_repeat_each_other() -> None:
    table = one_turn([(None, "x", "r"), (None, "x", "r"), (None, "y", "r"), ("t", None, None)])
    details = json.loads(evaluate(table, names=["tool_call_loops"]).to_pylist()[0]["details"])
    assert (details["longest_run"], details["redundant"]) == (1, 2)
    assert_matches_reference(table, {})


def test_a_table_without_calls_or_rows() -> None:
    empty = pa.Table.from_pydict({n: [] for n in SCHEMA.names}, schema=SCHEMA)
    assert evaluate(empty, names=["tool_call_loops"]).num_rows == 0
    agent = {"session_id": "s", "turn_index": 0, "trace_id": "t", "span_id": "a",
             "span_kind": "AGENT", "name": "agent.turn", "status_code": "OK", "source": "x"}  # fmt: skip
    table = pa.Table.from_pydict({n: [agent.get(n)] for n in SCHEMA.names}, schema=SCHEMA)
    assert_matches_reference(table, {})


RESULTS = st.lists(
    st.tuples(st.sampled_from("abc"), st.sampled_from([None, "r0", "r1"])), max_size=30
)


@settings(max_examples=200, deadline=None)
@given(calls=RESULTS, cut=st.integers(0, 30), compare=st.booleans())
def test_runs_on_codes_are_the_harness_detectors_runs(
    calls: list[tuple[str, str | None]], cut: int, compare: bool
) -> None:
    keys = [k for k, _ in calls]
    results = [r for _, r in calls] if compare else None
    turn = np.array([0 if i < cut else 1 for i in range(len(calls))], dtype=np.int64)
    codes = np.array(["abc".index(k) for k in keys], dtype=np.int64)
    coded = None if results is None else np.array([-1 if r is None else int(r[1]) for r in results])
    found = find_runs(codes, np.ones(len(calls), dtype=bool), turn, coded)
    expected = call_runs(keys, turn.tolist(), results)
    assert found.starts.tolist() == expected.starts.tolist()
    assert found.lengths.tolist() == expected.lengths.tolist()
    assert found.progress.tolist() == expected.progress.tolist()
