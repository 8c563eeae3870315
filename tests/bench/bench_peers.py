"""Plangate beside its peers, like for like: the same 2,000 trajectories of 20 tool calls each.

The trajectories come from `bench_evaluators.synthetic_table` (every seventh one loops: from a
random call on, one call is repeated). Plangate reads the trace table; each peer gets the same
calls in its own input format, built before any timing:

- loop detection: plangate's `tool_call_loops` on the whole table, the bare run detector
  (`call_runs`) on the canonical column built before timing (the issue's bound) and built from
  the table while timed (what the detector needs to read a trace table: the key column is not
  in it), and DeepEval's `AgentLoopDetectionMetric`, which reads
  the span tree DeepEval's tracing attaches to a test case (`_trace_dict`, what
  `TraceManager.create_nested_spans_dict` makes: an agent span whose children are a model span
  and a tool span per call, the tool span's input the call's arguments as a dict);
- trajectory match: plangate's `trajectory_match` with a strict rubric per trajectory, and
  agentevals' strict trajectory match on OpenAI-style messages. Both compare every trajectory
  with the same reference: the generator's trajectory without a loop.

Plangate's `evaluate` and `prepare` check the table on a second thread beside grouping it by turn
(82,000 spans: above `BESIDE_ROWS`); its evaluators and the peers run on one.

Plangate's rows run on the memory pool the `plangate` command gives Arrow (the C library's
malloc; see `ci/cli/_main.py`); the `… Arrow's default pool` rows run the same on Arrow's own
default (mimalloc), what a program that calls `evaluate` gets unless it sets
`ARROW_DEFAULT_MEMORY_POOL=system`.

Each step is timed whole, in one process, by `peer_results.best_of`. A peer that takes
milliseconds per trajectory is timed on the first `SUBSET` trajectories (its rate is
per trajectory either way; the row says so) and its verdicts come from one more, untimed pass
over all of them. Both peers are deterministic (neither calls a model); importing this module
turns off their telemetry, LangSmith tracing and dotenv loading before either is imported.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from importlib import metadata
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console

from plangate.evaluators import (
    Rubric,
    RubricSet,
    ToolExpectation,
    evaluate,
    evaluators,
    prepare,
)
from plangate.harness import call_runs
from tests.bench.bench_evaluators import synthetic_table
from tests.bench.peer_inputs import (
    CALLS,
    ToolCall,
    Trajectory,
    arrow_pool,
    reference,
    run_keys,
    trajectories,
)
from tests.bench.peer_results import (
    TRAJECTORIES,
    Key,
    PeerResult,
    best_of,
    table,
)

# Set before DeepEval or agentevals is imported (both read them at import or on first use):
# DeepEval's PostHog telemetry and update check, its dotenv and legacy key file loading (which
# could bring in a Confident AI key), and LangSmith tracing around agentevals' evaluators.
OFFLINE = {
    "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
    "DEEPEVAL_UPDATE_WARNING_OPT_IN": "0",
    "DEEPEVAL_DISABLE_DOTENV": "1",
    "DEEPEVAL_DISABLE_LEGACY_KEYFILE": "1",
    "LANGSMITH_TRACING": "false",
    "LANGSMITH_TRACING_V2": "false",
    "LANGCHAIN_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
os.environ.update(OFFLINE)

SEED = 7
FRAMES = 12
"""Prepared frames the evaluator alone is timed on (one per run: a frame keeps what it read)."""
SUBSET = 200
"""Trajectories the peers that take milliseconds per trajectory are timed on."""
MAX_REPEATS = 2
"""`tool_call_loops`' default: a call repeated more than twice in a row is a loop."""
REQUEST = "Look at the numbers."
ANSWER = "The numbers add up."


def version(distribution: str) -> str | None:
    """The installed version of a distribution, or None."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def missing(key: Key, name: str, why: str) -> PeerResult:
    """The row of a peer that could not be measured."""
    return PeerResult(key=key, name=name, trajectories=0, seconds=None, note=why)


# -- plangate ----------------------------------------------------------------------------------


def on_default_pool(row: Callable[[], PeerResult], key: Key) -> PeerResult:
    """A plangate row measured again on Arrow's default pool (mimalloc), keyed `key`."""
    with arrow_pool(pa.mimalloc_memory_pool()):
        measured = row()
    note = "the same on Arrow's default pool (mimalloc), as a library caller gets it"
    return replace(measured, key=key, name=f"{measured.name}, Arrow's default pool", note=note)


def count_outcome(scores: pa.Table, outcome: str) -> int:
    """Turns of a score table with the given outcome."""
    return int(pc.sum(pc.equal(scores["outcome"], outcome)).as_py() or 0)


def loops_row(table: pa.Table) -> PeerResult:
    """`tool_call_loops` through `evaluate`, on the whole table."""
    seconds, scores = best_of(lambda: evaluate(table, names=["tool_call_loops"]))
    return PeerResult(
        key="loops",
        name="plangate evaluate(tool_call_loops)",
        trajectories=TRAJECTORIES,
        seconds=seconds,
        count=count_outcome(scores, "fail"),
        counted="flagged",
        note="whole table: validation and the evaluators' frame included",
    )


def loop_rows(table: pa.Table) -> list[PeerResult]:
    """`tool_call_loops` on the whole table and alone, and the bare run detector on its column."""
    keys, groups = run_keys(table)
    seconds, runs = best_of(lambda: call_runs(keys, groups))
    from_table, _ = best_of(lambda: call_runs(*run_keys(table)))
    looping = len(set(groups[runs.starts[runs.lengths > MAX_REPEATS]]))
    fresh = [prepare(table) for _ in range(FRAMES)]  # each timed run on a fresh frame
    frames = iter(fresh)
    function = evaluators()["tool_call_loops"].function
    alone, _ = best_of(lambda: function(next(frames), RubricSet()), most=len(fresh))
    return [
        loops_row(table),
        PeerResult(key="loops_frame", name="plangate tool_call_loops on a prepared frame",
                   trajectories=TRAJECTORIES, seconds=alone,
                   note="the evaluator alone: table validated and grouped by turn before timing"),
        PeerResult(key="prepare", name="plangate prepare: validation and the evaluators' frame",
                   trajectories=TRAJECTORIES, seconds=best_of(lambda: prepare(table))[0],
                   note="what every evaluate() does before its evaluators: no evaluator run"),
        PeerResult(key="runs", name="plangate call_runs on the canonical column",
                   trajectories=TRAJECTORIES, seconds=seconds, count=looping, counted="flagged",
                   note=f"keys and labels built before timing; flagged: a run > {MAX_REPEATS}"),
        PeerResult(key="runs_table", name="plangate call_runs, its keys built from the table",
                   trajectories=TRAJECTORIES, seconds=from_table,
                   note="the TOOL rows' name and arguments joined and the turn labels made, "
                   "timed: what reading the table costs the bare detector"),
    ]  # fmt: skip


def rubric_set(turns: Sequence[Trajectory]) -> RubricSet:
    """A strict rubric per trajectory: exactly the reference calls, in order."""
    rubric = Rubric(
        required_tools=tuple(
            ToolExpectation(name=c.name, arguments=json.loads(c.arguments), match="exact")
            for c in reference()
        ),
        order="strict",
    )
    return RubricSet(turns={(t.session_id, t.turn_index): rubric for t in turns})


def trajectory_row(table: pa.Table, rubrics: RubricSet) -> PeerResult:
    """`trajectory_match` on the whole table against the strict rubrics."""
    seconds, scores = best_of(lambda: evaluate(table, rubrics, names=["trajectory_match"]))
    return PeerResult(
        key="trajectory",
        name="plangate evaluate(trajectory_match), strict",
        trajectories=TRAJECTORIES,
        seconds=seconds,
        count=count_outcome(scores, "pass"),
        counted="passed",
        note="whole table; rubrics built before timing",
    )


# -- DeepEval ----------------------------------------------------------------------------------


def trace(calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The span tree DeepEval's tracing would attach to the test case of one trajectory.

    The shape of `TraceManager.create_nested_spans_dict` (deepeval/tracing/tracing.py): name,
    type, input and output (None values left out) and children. Per call, the model span that
    asked for it (the table has one before each call, without text), then the tool span.
    """
    children: list[dict[str, Any]] = []
    for call in calls:
        children.append({"name": "llm.call", "type": "llm", "children": []})
        children.append(
            {"name": call.name, "type": "tool", "input": json.loads(call.arguments), "children": []}
        )
    return {"name": "agent.turn", "type": "agent", "input": REQUEST, "output": ANSWER,
            "children": children}  # fmt: skip


@contextmanager
def event_loop() -> Iterator[None]:
    """An event loop for DeepEval's sync `measure()` to run its async path on, closed after."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        yield
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def measure_all(metric: Any, cases: Sequence[Any], show: bool) -> list[tuple[float, bool]]:
    """`measure()` on each test case: its score and whether it passed."""
    verdicts = []
    for case in cases:
        metric.measure(case, _show_indicator=show)
        verdicts.append((float(metric.score), bool(metric.success)))
    return verdicts


def deepeval_rows(turns: Sequence[Trajectory]) -> list[PeerResult]:
    """DeepEval's `AgentLoopDetectionMetric`, its default `measure()` and with the spinner off."""
    installed = version("deepeval")
    name = f"DeepEval {installed} AgentLoopDetectionMetric.measure()"
    try:
        from deepeval.metrics import AgentLoopDetectionMetric
        from deepeval.test_case import LLMTestCase
    except ImportError:
        why = "not installed" if installed is None else "no AgentLoopDetectionMetric here"
        return [missing("deepeval", name, why), missing("deepeval_quiet", name, why)]
    cases = []
    for turn in turns:
        case = LLMTestCase(input=REQUEST, actual_output=ANSWER)
        case._trace_dict = trace(turn.calls)  # what DeepEval's evaluate() sets from @observe
        cases.append(case)
    metric = AgentLoopDetectionMetric()
    with event_loop():
        default, _ = best_of(lambda: measure_all(metric, cases[:SUBSET], True))
        quiet, verdicts = best_of(lambda: measure_all(metric, cases, False))
    failed = sum(not passed for _, passed in verdicts)
    signalled = sum(score < 1.0 for score, _ in verdicts)
    where = "a terminal" if sys.stderr.isatty() else "not a terminal"
    return [
        PeerResult(key="deepeval", name=f"{name}, default (spinner on)", trajectories=SUBSET,
                   seconds=default, count=failed, counted="flagged",
                   note=f"first {SUBSET} timed, rate per trajectory; verdicts of the full pass "
                   f"below; stderr is {where}"),
        PeerResult(key="deepeval_quiet", name=f"{name}, _show_indicator=False",
                   trajectories=TRAJECTORIES, seconds=quiet, count=failed, counted="flagged",
                   note=f"flagged: success False at its threshold 0.5; {signalled} scored "
                   "below 1 (tool repetition weighs 0.4, so it alone never fails a case)"),
    ]  # fmt: skip


# -- agentevals --------------------------------------------------------------------------------


def messages(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """One trajectory as OpenAI chat messages: the request, a call and its result per step."""
    out: list[dict[str, Any]] = [{"role": "user", "content": REQUEST}]
    for i, call in enumerate(calls):
        function = {"name": call.name, "arguments": call.arguments}
        out.append(
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": f"call_{i}", "type": "function", "function": function}]}
        )  # fmt: skip
        out.append({"role": "tool", "tool_call_id": f"call_{i}", "content": ""})
    out.append({"role": "assistant", "content": ANSWER})
    return out


def agentevals_row(turns: Sequence[Trajectory]) -> PeerResult:
    """agentevals' strict trajectory match, once per trajectory, against the reference."""
    installed = version("agentevals")
    name = f"agentevals {installed} trajectory match, strict"
    try:
        from agentevals.trajectory.match import create_trajectory_match_evaluator
    except ImportError:
        return missing("agentevals", name, "not installed")
    match = create_trajectory_match_evaluator(
        trajectory_match_mode="strict", tool_args_match_mode="exact"
    )
    expected = messages(reference())
    pairs = [(messages(t.calls), expected) for t in turns]

    def run(chosen: Sequence[tuple[list[dict[str, Any]], list[dict[str, Any]]]]) -> list[bool]:
        return [bool(match(outputs=o, reference_outputs=r)["score"]) for o, r in chosen]

    seconds, _ = best_of(lambda: run(pairs[:SUBSET]))
    return PeerResult(
        key="agentevals",
        name=name,
        trajectories=SUBSET,
        seconds=seconds,
        count=sum(run(pairs)),
        counted="passed",
        note=f"first {SUBSET} trajectories, rate per trajectory; passes from one untimed pass "
        "over all",
    )


# -- all of it ---------------------------------------------------------------------------------


def run_all() -> list[PeerResult]:
    """Every row, measured in this process on the same trajectories."""
    table, raw = synthetic_table(TRAJECTORIES, CALLS, SEED)
    turns = trajectories(table, raw)
    rubrics = rubric_set(turns)
    with arrow_pool(pa.system_memory_pool()):  # the plangate command's
        loops = loop_rows(table)
        matched = trajectory_row(table, rubrics)
    return [
        *loops,
        on_default_pool(lambda: loops_row(table), "loops_default_pool"),
        *deepeval_rows(turns),
        matched,
        on_default_pool(lambda: trajectory_row(table, rubrics), "trajectory_default_pool"),
        agentevals_row(turns),
    ]


if __name__ == "__main__":
    console = Console(width=None if sys.stdout.isatty() else 200)
    console.print(f"load average before the run: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    console.print(table(run_all()))
