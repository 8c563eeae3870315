"""`plangate eval` on a trace table larger than memory: peak RSS and spans per second.

A base table comes from the evaluators' bench (`synthetic_table`: turns of 20 tool calls, 41
spans each), made once; copies of it, each with its session and trace ids prefixed by its copy
number, are written as Parquet files under a temporary folder until the source holds `spans`
spans. Two layouts of the same rows:

- in order: one file per copy, each session's rows contiguous (streamed without a spill);
- interleaved: each copy's even turns in one file and its odd turns in another, the files named
  so that every session is spread over two files far apart (spilled by session hash first).

`plangate eval FOLDER -o OUT` runs in a child process; its peak RSS is the one the child reads
from `/proc/self/status` (`VmHWM`) as it ends: the `ru_maxrss` that `os.wait4` gives would
start from the bench's own RSS at the fork (Linux keeps the larger through `exec`). Its rate is
the one it prints (the whole command: the session check, the spill, the
scoring and the writing; not the interpreter's start). Target: peak RSS < 2 GiB at the default
batch size, whatever the source's size. Run alone: `python -m tests.bench.bench_stream [SPANS]`.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from tests.bench.bench_evaluators import synthetic_table

SPANS = 20_000_000
"""The large run's source."""
SMALL_SPANS = 2_000_000
"""The run that shows how the time scales."""
BASE_TURNS = 10_000
"""Turns of the base table (410,000 spans): copies of it make the source."""
TARGET_RSS_MIB = 2_048
LAYOUTS = ("in order", "interleaved")
CHILD = """
import sys
from plangate.ci.cli import main  # what `python -m plangate` runs
code = main(sys.argv[1:])
with open("/proc/self/status") as status:
    print(*(line.strip() for line in status if line.startswith("VmHWM:")), flush=True)
sys.exit(code)
"""
"""The child: the plangate command, then its own peak RSS."""
PEAK = re.compile(r"^VmHWM:\s+(\d+) kB$", re.MULTILINE)
RATE = re.compile(r"([\d,]+) spans scored in ([\d,.]+) s \(([\d,]+) spans/s\)")


@dataclass(frozen=True, slots=True)
class StreamResult:
    """One `plangate eval` run over a source on disk."""

    layout: str
    spans: int
    files: int
    wall_seconds: float
    """The child process, start to exit."""
    rate: float
    """Spans per second as the command prints it."""
    peak_rss_mib: float
    parts: int
    """Score files written (one per batch)."""

    def as_dict(self) -> dict[str, object]:
        return {
            "layout": self.layout,
            "spans": self.spans,
            "files": self.files,
            "wall_seconds": round(self.wall_seconds, 1),
            "spans_per_second": round(self.rate),
            "peak_rss_mib": round(self.peak_rss_mib),
            "parts": self.parts,
        }


def base_table() -> pa.Table:
    """The table every copy repeats."""
    table, _ = synthetic_table(BASE_TURNS, 20, 11)
    return table


def _copy(base: pa.Table, number: int) -> pa.Table:
    """The base with session and trace ids of its own (span ids stay unique per trace)."""
    prefix = pa.scalar(f"c{number}-")
    for name in ("session_id", "trace_id"):
        index = base.schema.get_field_index(name)
        ids = pc.binary_join_element_wise(prefix, base[name], "")
        base = base.set_column(index, base.schema.field(index), ids)
    return base


def write_source(base: pa.Table, folder: Path, spans: int, layout: str) -> int:
    """Write copies of `base` under `folder` until `spans` rows; returns the files written."""
    folder.mkdir(parents=True)
    written, number, files = 0, 0, 0
    while written < spans:
        table = _copy(base, number).slice(0, spans - written)
        if layout == "in order":
            pq.write_table(table, folder / f"part-{number:05d}.parquet")
            files += 1
        else:
            odd = pc.equal(pc.bit_wise_and(table["turn_index"], 1), 1)
            pq.write_table(table.filter(pc.invert(odd)), folder / f"a-{number:05d}.parquet")
            pq.write_table(table.filter(odd), folder / f"b-{number:05d}.parquet")
            files += 2
        written += table.num_rows
        number += 1
    return files


def run_eval(source: Path, output: Path) -> tuple[float, float, str]:
    """`plangate eval SOURCE -o OUTPUT` in a child: wall seconds, peak RSS MiB, and its output."""
    log = output.with_suffix(".log")
    began = time.perf_counter()
    with log.open("w") as out:
        child = subprocess.run(
            [sys.executable, "-c", CHILD, "eval", str(source), "-o", str(output)],
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    seconds = time.perf_counter() - began
    text = log.read_text()
    peak = PEAK.search(text)
    if child.returncode != 0 or peak is None:
        raise RuntimeError(f"plangate eval exited {child.returncode}: {text[-2000:]}")
    return seconds, int(peak.group(1)) / 1024, text


def measure(base: pa.Table, spans: int, layout: str, folder: Path) -> StreamResult:
    """One layout at one size."""
    source = folder / f"traces-{layout.replace(' ', '-')}-{spans}"
    files = write_source(base, source, spans, layout)
    output = folder / f"scores-{layout.replace(' ', '-')}-{spans}"
    seconds, peak, text = run_eval(source, output)
    match = RATE.search(text)
    if match is None:
        raise RuntimeError(f"no rate in the output of plangate eval: {text[-2000:]}")
    parts = len(list(output.glob("part-*.parquet")))
    return StreamResult(
        layout=layout,
        spans=spans,
        files=files,
        wall_seconds=seconds,
        rate=float(match.group(3).replace(",", "")),
        peak_rss_mib=peak,
        parts=parts,
    )


def run_all(sizes: tuple[int, ...] = (SMALL_SPANS, SPANS)) -> list[StreamResult]:
    """Every size in both layouts; the sources are written under a temporary folder."""
    base = base_table()
    results = []
    for spans in sizes:
        for layout in LAYOUTS:
            with tempfile.TemporaryDirectory(prefix="plangate-bench-stream-") as folder:
                results.append(measure(base, spans, layout, Path(folder)))
    return results


def table(results: list[StreamResult]) -> Table:
    """The runs as a table, against the memory target."""
    grid = Table(
        title="plangate eval on a source larger than memory (default batch size)",
        caption=f"target: peak RSS < {TARGET_RSS_MIB:,} MiB whatever the source's size",
    )
    for column in ("layout", "spans", "files", "parts", "seconds", "spans/s", "peak RSS MiB"):
        grid.add_column(column, justify="left" if column == "layout" else "right")
    for r in results:
        grid.add_row(
            r.layout, f"{r.spans:,}", str(r.files), str(r.parts), f"{r.wall_seconds:,.1f}",
            f"{r.rate:,.0f}", f"{r.peak_rss_mib:,.0f}",
        )  # fmt: skip
    return grid


if __name__ == "__main__":
    chosen = tuple(int(a.replace("_", "")) for a in sys.argv[1:]) or (SMALL_SPANS, SPANS)
    Console(width=150).print(table(run_all(chosen)))
