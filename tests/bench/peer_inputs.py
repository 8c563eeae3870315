"""The trajectories the peers are compared on, each peer's input made from them, and Arrow's pool.

Plangate reads the trace table `bench_evaluators.synthetic_table` makes; the peers get the same
calls as `Trajectory` values (the arguments as the agent sent them, not canonical).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

CALLS = 20
"""Calls per trajectory."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """One call of a trajectory as the agent made it."""

    name: str
    """Tool name."""
    arguments: str
    """The arguments' JSON text as sent (not canonical)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory:
    """One turn's tool calls, in order."""

    session_id: str
    """Session of the turn in the trace table."""
    turn_index: int
    """Index of the turn in its session."""
    calls: tuple[ToolCall, ...]
    """The turn's calls."""


def trajectories(table: pa.Table, raw: Sequence[str]) -> list[Trajectory]:
    """The table's turns with their calls; `raw` holds the argument texts of its TOOL rows."""
    tools = table.filter(pc.equal(table["span_kind"], "TOOL"))
    by_turn: dict[tuple[str, int], list[ToolCall]] = {}
    for session, turn, name, text in zip(
        tools["session_id"].to_pylist(),
        tools["turn_index"].to_pylist(),
        tools["tool_name"].to_pylist(),
        raw,
        strict=True,
    ):
        by_turn.setdefault((session, turn), []).append(ToolCall(name=name, arguments=text))
    return [
        Trajectory(session_id=s, turn_index=t, calls=tuple(calls))
        for (s, t), calls in by_turn.items()
    ]


def reference(calls: int = CALLS) -> tuple[ToolCall, ...]:
    """The generator's trajectory without a loop: what every trajectory is matched against."""
    return tuple(
        ToolCall(name="search", arguments=json.dumps({"query": f"q{c}", "limit": 10}))
        for c in range(calls)
    )


def run_keys(table: pa.Table) -> tuple[Any, Any]:
    """Call keys (tool name and canonical arguments) and turn labels of the TOOL rows."""
    tools = table.filter(pc.equal(table["span_kind"], "TOOL"))
    keys = pc.binary_join_element_wise(tools["tool_name"], tools["tool_args"], " ")
    groups = pc.binary_join_element_wise(tools["session_id"], tools["trace_id"], "/")
    return keys.to_numpy(zero_copy_only=False), groups.to_numpy(zero_copy_only=False)


@contextmanager
def arrow_pool(pool: pa.MemoryPool) -> Iterator[None]:
    """Arrow allocates from `pool` inside the block."""
    before = pa.default_memory_pool()
    pa.set_memory_pool(pool)
    try:
        yield
    finally:
        pa.set_memory_pool(before)
