"""Evaluators at scale: a synthetic trace table of 1,025,000 spans (500,000 tool calls).

Measures, on the same table: canonicalizing every call's JSON arguments (what an importer pays
once per row), detecting identical-call runs on the already canonical column (what the loop
detector pays), preparing the evaluators' frame, each evaluator, and all of them; then all of
them on a 100-turn table (4,100 spans), the size CI scores all day, where fixed costs are all
there is; then all of them on production-shaped spans (`MESSAGES` messages in each model call's
attributes, as OpenInference writes them, every text its own), which the targets are not set
on. Whole-table timings with `perf_counter`, best of a few repeats. On a table of
`BESIDE_ROWS` spans or more, `evaluate` uses the machine's second core: the checks beside the
grouping by turn, and two evaluators at a time (`OMP_NUM_THREADS=1` turns that off).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from plangate.evaluators import evaluate, evaluators, prepare
from plangate.harness import call_runs
from plangate.replay import SCHEMA, canonical_arguments, table_from_columns, validate_table

TURNS = 25_000
SMALL_TURNS = 100
TARGET_ALL_SECONDS = 1.0
"""The issue's target for all evaluators over the big table."""
TARGET_SMALL_SECONDS = 0.050
"""... and over the 100-turn table."""
CALLS_PER_TURN = 20
REPEATS = 3
SHAPED_TURNS = 2_000
"""Turns of the production-shaped table (82,000 spans)."""
MESSAGES = 20
"""Messages in each of its model calls' attributes."""


@dataclass(frozen=True, slots=True)
class Timing:
    """One measured step."""

    name: str
    seconds: float
    rows: int

    @property
    def per_second(self) -> float:
        """Rows handled per second."""
        return self.rows / self.seconds if self.seconds else float("inf")


def synthetic_table(
    turns: int = TURNS, calls: int = CALLS_PER_TURN, seed: int = 7, messages: int = 0
) -> tuple[pa.Table, list[str]]:
    """A trace table of `turns` turns with `calls` tool calls each (plus AGENT and LLM rows).

    Some turns loop (one call repeated), some alternate, and every fifth has a todo plan. With
    `messages`, each model call's attributes hold that many messages of its own and a provider.
    Returns the table and the raw (non-canonical) argument texts of its calls.
    """
    rng = np.random.default_rng(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    columns: dict[str, list[Any]] = {name: [] for name in SCHEMA.names}
    raw: list[str] = []

    def add(**values: Any) -> None:
        for name in SCHEMA.names:
            columns[name].append(values.get(name))

    for t in range(turns):
        session, trace = f"s{t // 4}", f"{t + 1:032x}"  # OpenTelemetry ids
        loop_from = int(rng.integers(0, calls)) if t % 7 == 0 else None
        add(session_id=session, turn_index=t % 4, trace_id=trace, span_id=_span_id(t, 0), span_kind="AGENT",
            name="agent.turn", status_code="OK", source="bench", start_time=start, stop_reason="finished",
            end_time=start + timedelta(seconds=2 * calls + 1))  # fmt: skip
        for c in range(calls):
            arguments = {
                "query": f"q{c if loop_from is None or c < loop_from else loop_from}",
                "limit": 10,
            }
            text = (
                json.dumps(arguments)
                if c % 2
                else json.dumps(dict(reversed(arguments.items())), indent=1)
            )
            raw.append(text)
            at = start + timedelta(seconds=2 * c)
            plan = (
                json.dumps([{"id": "1", "text": "work", "status": "in_progress"}])
                if t % 5 == 0 and c == 0
                else None
            )
            add(session_id=session, turn_index=t % 4, trace_id=trace, span_id=_span_id(t, 2 * c + 1), span_kind="LLM",
                name="llm.call", status_code="OK", source="bench", iteration=c + 1, start_time=at,
                end_time=at + timedelta(seconds=1), tokens_prompt=500, tokens_completion=20, parent_span_id=_span_id(t, 0),
                attributes=_messages(t, c, messages))  # fmt: skip
            add(session_id=session, turn_index=t % 4, trace_id=trace, span_id=_span_id(t, 2 * c + 2), span_kind="TOOL",
                name="tool.search", status_code="OK", source="bench", iteration=c + 1, tool_name="search",
                tool_args=canonical_arguments(text), start_time=at + timedelta(seconds=1),
                end_time=at + timedelta(seconds=2), plan=plan, parent_span_id=_span_id(t, 0))  # fmt: skip
    table = table_from_columns(columns)  # as every producer: the provider read from attributes
    validate_table(table)
    return table, raw


def _span_id(turn: int, number: int) -> str:
    """The id of a turn's `number`th span: 16 hex digits, as every source plangate reads has."""
    return f"{turn:012x}{number:04x}"


def _messages(turn: int, call: int, messages: int) -> str | None:
    """A model call's attributes as OpenInference writes its messages (None without any)."""
    if not messages:
        return None
    attributes = {"llm.provider": "openai"} | {
        f"llm.input_messages.{m}.message.content": f"turn {turn}, call {call}: message {m} so far"
        for m in range(messages)
    }
    return json.dumps(attributes, sort_keys=True, separators=(",", ":"))


def best(step: Callable[[], Any], repeats: int = REPEATS) -> float:
    """Best wall time of `repeats` runs of `step` (seconds)."""
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        step()
        times.append(time.perf_counter() - began)
    return min(times)


def run_all() -> list[Timing]:
    """Every measurement on the synthetic table."""
    table, raw = synthetic_table()
    tools = table.filter(pa.compute.equal(table["span_kind"], "TOOL"))
    keys = (
        pa.compute.binary_join_element_wise(tools["tool_name"], tools["tool_args"], " ")
    ).to_numpy(zero_copy_only=False)
    groups = pa.compute.binary_join_element_wise(
        tools["session_id"], tools["trace_id"], "/"
    ).to_numpy(zero_copy_only=False)
    calls = tools.num_rows
    results = [
        Timing(
            "canonicalize raw arguments (per row)",
            best(lambda: [canonical_arguments(r) for r in raw]),
            calls,
        ),
        Timing("detect runs on the canonical column", best(lambda: call_runs(keys, groups)), calls),
        Timing("prepare the evaluators' frame", best(lambda: prepare(table)), table.num_rows),
    ]
    for name in sorted(evaluators()):
        results.append(
            Timing(
                f"evaluator {name}",
                best(lambda n=name: evaluate(table, names=[n]), 1),
                table.num_rows,
            )
        )
    results.append(Timing("all evaluators", best(lambda: evaluate(table)), table.num_rows))
    small, _ = synthetic_table(turns=SMALL_TURNS)
    results.append(
        Timing(
            f"all evaluators, {SMALL_TURNS} turns",
            best(lambda: evaluate(small), 20),
            small.num_rows,
        )
    )
    shaped, _ = synthetic_table(turns=SHAPED_TURNS, messages=MESSAGES)
    results.append(Timing(SHAPED, best(lambda: evaluate(shaped), 2), shaped.num_rows))
    return results


SHAPED = f"all evaluators, {SHAPED_TURNS:,} turns, {MESSAGES} messages per model call"


def verdict(results: list[Timing]) -> list[str]:
    """The issue's two targets, met or not, from the measured rows."""
    timings = {r.name: r for r in results}
    lines = []
    for name, target in (
        ("all evaluators", TARGET_ALL_SECONDS),
        (f"all evaluators, {SMALL_TURNS} turns", TARGET_SMALL_SECONDS),
    ):
        seconds = timings[name].seconds
        met = "met" if seconds <= target else "not met"
        lines.append(f"{name}: {seconds * 1000:,.1f} ms, target ≤ {target * 1000:,.0f} ms ({met})")
    shaped = timings[SHAPED]
    lines.append(
        f"{SHAPED}: {1e6 / shaped.per_second:,.2f} s a million spans at its rate (the issue "
        "sets its targets on spans without attributes; this is the same work on spans shaped "
        "as production's, whose attributes are read into columns when the table is built)"
    )
    return lines
