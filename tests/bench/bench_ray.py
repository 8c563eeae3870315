"""The evaluators on Ray Data against the same evaluators in process, on a million spans.

A synthetic trace table of `TURNS` turns with `CALLS` tool calls each (1,025,000 spans) is
written as `FILES` Parquet files (contiguous slices: a few sessions straddle two files). In
process: read the files and `evaluate` the whole table. On Ray: `ray_score_batches` over the
files on a local Ray of `CPUS` CPUs, started once and timed apart; its first run pays for
starting the worker processes (each imports plangate), the second finds them ready. Both sides'
scores are compared row for row; a difference raises. Wall times with `perf_counter`.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.table import Table

from plangate.evaluators import evaluate
from plangate.evaluators._ray import ray_score_batches
from tests.bench.bench_evaluators import synthetic_table

TURNS = 25_000
CALLS = 20
FILES = 8
CPUS = 2
BATCH_ROWS = 200_000
"""Trace rows per `evaluate` call on Ray (about: sessions are kept whole)."""
ORDER = [("session_id", "ascending"), ("turn_index", "ascending"), ("evaluator", "ascending")]


@dataclass(frozen=True, slots=True)
class RayTiming:
    """One measured step over the whole table."""

    name: str
    seconds: float
    spans: int
    """Trace rows handled (0 for a step that handles none, such as starting Ray)."""

    @property
    def per_second(self) -> float | None:
        """Spans per second, where the step handles spans."""
        return self.spans / self.seconds if self.spans and self.seconds else None

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "seconds": round(self.seconds, 3), "spans": self.spans}


def write_files(table: pa.Table, folder: Path, files: int = FILES) -> list[str]:
    """The table as `files` Parquet files of contiguous rows."""
    size = math.ceil(table.num_rows / files)
    paths = []
    for index in range(files):
        path = folder / f"part-{index:02d}.parquet"
        pq.write_table(table.slice(index * size, size), path)
        paths.append(str(path))
    return paths


def in_process(paths: list[str]) -> pa.Table:
    """What one machine does without Ray: read every file, `evaluate` the whole table."""
    return evaluate(pa.concat_tables(pq.read_table(p) for p in paths))


def on_ray(paths: list[str]) -> pa.Table:
    """`ray_score_batches` over the files on the Ray this process runs."""
    tables = ray_score_batches(
        paths, rubrics=None, names=None, params=None, batch_rows=BATCH_ROWS, address=None
    )
    return pa.concat_tables(list(tables))


def timed(step: Any) -> tuple[float, Any]:
    """Wall seconds of `step()`, and what it returned."""
    began = time.perf_counter()
    value = step()
    return time.perf_counter() - began, value


def run_all() -> list[RayTiming]:
    """Both sides on the same files, on a local Ray started for the measurement."""
    import ray

    table, _ = synthetic_table(TURNS, CALLS)
    spans = table.num_rows
    with tempfile.TemporaryDirectory(prefix="plangate-bench-ray-") as folder:
        paths = write_files(table, Path(folder))
        del table
        local_s, expected = timed(lambda: in_process(paths))
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        start_s, _ = timed(
            lambda: ray.init(
                address="local", num_cpus=CPUS, include_dashboard=False, log_to_driver=False
            )
        )
        try:
            cold_s, cold = timed(lambda: on_ray(paths))
            warm_s, warm = timed(lambda: on_ray(paths))
        finally:
            ray.shutdown()
    want = expected.sort_by(ORDER).to_pylist()
    for name, got in (("first", cold), ("second", warm)):
        if got.sort_by(ORDER).to_pylist() != want:
            raise RuntimeError(f"Ray's {name} run scored differently from evaluate in process")
    return [
        RayTiming("in process: read the files, evaluate", local_s, spans),
        RayTiming(f"Ray: start a local cluster ({CPUS} CPUs)", start_s, 0),
        RayTiming("Ray: first run (starts its workers)", cold_s, spans),
        RayTiming("Ray: second run (workers ready)", warm_s, spans),
    ]


def table(results: list[RayTiming]) -> Table:
    """The timings as a table."""
    spans = max(r.spans for r in results)
    grid = Table(
        title=f"Evaluators on Ray Data: {spans:,} spans in {FILES} Parquet files, "
        f"{CPUS} CPUs, about {BATCH_ROWS:,} spans per evaluate call",
        caption="Same scores on both sides, row for row (checked).",
    )
    grid.add_column("step")
    grid.add_column("seconds", justify="right")
    grid.add_column("spans/s", justify="right")
    for r in results:
        rate = r.per_second
        grid.add_row(r.name, f"{r.seconds:.2f}", "" if rate is None else f"{rate:,.0f}")
    return grid
