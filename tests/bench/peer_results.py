"""The rows `bench_peers` measures, how they are timed, and the table they are shown in.

A row is one measurement on the same 2,000 trajectories (`PeerResult`); the issue's targets
compare two rows' rates (`TARGETS`), and the floor line sets beside the loop targets what
preparing the table alone takes. Each step is timed whole with `perf_counter`, in one process:
the best of `REPEATS` runs, or of as many as fill `SAMPLE` seconds (up to `MOST`), as `timeit`
picks its number of runs: a step of milliseconds is timed as often as a step of a second lasts,
so that one disturbed run does not decide its row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from rich.table import Table

from tests.bench.peer_inputs import CALLS

TRAJECTORIES = 2_000
REPEATS = 3
"""Runs of every step, at least."""
SAMPLE = 0.25
"""Seconds of runs a step gets, at least (short steps run more often)."""
MOST = 50
"""Runs of a step, at most."""

Key = Literal[
    "loops",
    "loops_default_pool",
    "loops_frame",
    "prepare",
    "runs",
    "runs_table",
    "deepeval",
    "deepeval_quiet",
    "trajectory",
    "trajectory_default_pool",
    "agentevals",
]
Counted = Literal["flagged", "passed"]
T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerResult:
    """One row: a measurement and the verdicts it gave."""

    key: Key
    """Which measurement (the targets compare rows by it)."""
    name: str
    """What was measured, with the peer's version."""
    trajectories: int
    """Trajectories in each timed run."""
    seconds: float | None
    """Best wall time of the timed runs; None when the peer is not installed."""
    count: int | None = None
    """Trajectories flagged as looping, or passed, over all of them; None when not counted."""
    counted: Counted | None = None
    """What `count` counts."""
    note: str = ""
    """How the row was measured, where that differs from the others."""

    @property
    def per_second(self) -> float | None:
        """Trajectories per second; None when not measured."""
        if self.seconds is None:
            return None
        return self.trajectories / self.seconds if self.seconds else float("inf")

    def as_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "trajectories": self.trajectories,
            "seconds": None if self.seconds is None else round(self.seconds, 4),
            "per_second": None if self.per_second is None else round(self.per_second, 1),
            "count": self.count,
            "counted": self.counted,
            "of": TRAJECTORIES,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """One of the issue's targets: how many times faster one row must be than another."""

    text: str
    """The target in words."""
    fast: Key
    """The row that must be faster."""
    slow: Key
    """The row it is compared with."""
    at_least: float
    """Required ratio of the rates, `fast` over `slow`."""


TARGETS = (
    Target(text="tool_call_loops within 2× of bare run detection", fast="loops", slow="runs",
           at_least=0.5),
    Target(text="... the evaluator alone, on a prepared frame", fast="loops_frame", slow="runs",
           at_least=0.5),
    Target(text="tool_call_loops within 2× of run detection from the table's columns",
           fast="loops", slow="runs_table", at_least=0.5),
    Target(text="tool_call_loops ≥ 500× DeepEval's default measure()", fast="loops",
           slow="deepeval", at_least=500),
    Target(text="tool_call_loops ≥ 100× DeepEval with its spinner off", fast="loops",
           slow="deepeval_quiet", at_least=100),
    Target(text="trajectory_match ≥ 500× agentevals' strict match", fast="trajectory",
           slow="agentevals", at_least=500),
)  # fmt: skip


def best_of(step: Callable[[], T], repeats: int = REPEATS, most: int = MOST) -> tuple[float, T]:
    """Best wall time of `step` (seconds), and the last run's result.

    At least `repeats` runs, more while they sum to under `SAMPLE` seconds (at most `most`).
    """
    times: list[float] = []
    while len(times) < repeats or (sum(times) < SAMPLE and len(times) < most):
        began = time.perf_counter()
        result = step()
        times.append(time.perf_counter() - began)
    return min(times), result


def verdict(results: Sequence[PeerResult]) -> list[str]:
    """Each target: the ratio measured, and met or not met."""
    rates = {r.key: r.per_second for r in results}
    lines = []
    for target in TARGETS:
        fast, slow = rates.get(target.fast), rates.get(target.slow)
        if not fast or not slow:
            lines.append(f"{target.text}: not measured")
            continue
        ratio = fast / slow
        met = "met" if ratio >= target.at_least else "not met"
        shown = f"{1 / ratio:,.1f}× slower" if ratio < 1 else f"{ratio:,.1f}× faster"
        lines.append(f"{target.text}: {shown} ({met})")
    return lines


def floor(results: Sequence[PeerResult]) -> str | None:
    """What the loop targets leave for the whole table, beside what preparing it takes.

    Every evaluation validates its table and groups it by turn first (`prepare`): a target that
    leaves less time than that cannot be met by any evaluator that checks its input.
    """
    seconds = {r.key: r.seconds for r in results}
    rates = {r.key: r.per_second for r in results}
    if seconds.get("prepare") is None:
        return None
    allowed = [
        f"{target.text.removeprefix('tool_call_loops ')}: "
        f"{TRAJECTORIES / (rate * target.at_least) * 1e3:.1f} ms"
        for target in TARGETS
        if target.fast == "loops" and (rate := rates.get(target.slow))
    ]
    prepared = f"{seconds['prepare'] * 1e3:.1f} ms"
    return f"floor: prepare alone takes {prepared}; each loop target allows, for all of it: " + (
        "; ".join(allowed)
    )


def table(results: Sequence[PeerResult]) -> Table:
    """The rows, with the targets as the caption."""
    grid = Table(
        title=f"Plangate and its peers on the same {TRAJECTORIES:,} trajectories of {CALLS} calls",
        caption="\n".join(["targets:", *verdict(results), *filter(None, [floor(results)])]),
        caption_justify="left",
    )
    grid.add_column("measurement")
    grid.add_column("timed", justify="right")
    grid.add_column("best s", justify="right")
    grid.add_column("trajectories/s", justify="right")
    grid.add_column("verdicts", justify="right")
    grid.add_column("note")
    for r in results:
        grid.add_row(
            r.name,
            f"{r.trajectories:,}" if r.seconds is not None else "",
            "" if r.seconds is None else f"{r.seconds:.4f}",
            "" if r.per_second is None else f"{r.per_second:,.0f}",
            "" if r.count is None else f"{r.count:,} of {TRAJECTORIES:,} {r.counted}",
            r.note,
        )
    return grid
