"""Run every benchmark, print one table, and write the results to `out/bench.json`."""

from __future__ import annotations

import asyncio
import json
import os
import platform
import sys
from importlib import metadata
from pathlib import Path

import pyarrow as pa
from rich.console import Console
from rich.table import Table

from tests.bench import (
    bench_endpoint,
    bench_evaluators,
    bench_gate,
    bench_import_memory,
    bench_imports,
    bench_loop,
    bench_peers,
    bench_ray,
    bench_receiver,
    bench_redact,
    bench_replay,
    bench_stream,
    peer_results,
)
from tests.bench.bench_loop import Result

TARGET_US = 150
"""Plangate's budget per model iteration with tracing on."""
OUT = Path(__file__).resolve().parents[2] / "out" / "bench.json"


def table(results: list[Result]) -> Table:
    """The results as a table; the span row's figures are per span."""
    grid = Table(title=f"Harness overhead per model iteration ({bench_loop.MODEL_CALLS} per run)")
    grid.add_column("benchmark")
    grid.add_column("µs median", justify="right")
    grid.add_column("min", justify="right")
    grid.add_column("p90", justify="right")
    grid.add_column("CPU median", justify="right")
    grid.add_column("SDK spans median / best", justify="right")
    grid.add_column(f"µs at {bench_loop.REFERENCE_SPAN_US:g} µs/span", justify="right")
    grid.add_column("peak KiB/run", justify="right")
    grid.add_column("runs", justify="right")
    for result in results:
        grid.add_row(
            result.name,
            f"{result.median_us:,.1f}",
            f"{result.min_us:,.1f}",
            f"{result.p90_us:,.1f}",
            f"{result.cpu_median_us:,.1f}",
            "" if result.spans is None else f"{result.spans:,.2f} / {result.best_spans:,.2f}",
            ""
            if result.spans is None
            else f"{result.at_reference:,.0f} / {result.best_at_reference:,.0f}",
            f"{result.peak_kib:,.1f}",
            str(result.runs),
        )
    return grid


def verdict(results: list[Result]) -> str:
    """The traced rows against the target, here and at the reference machine's span time."""
    traced = [r for r in results if r.name.startswith("plangate") and "tracing on" in r.name]
    lines = [f"target: ≤{TARGET_US} µs per iteration with tracing on"]
    for result in traced:
        here = "met" if result.median_us <= TARGET_US else "not met"
        line = f"  {result.name}: {result.median_us:,.1f} µs here ({here})"
        if result.spans is not None:
            worst = max(result.at_reference, result.best_at_reference)
            there = "met" if worst <= TARGET_US else "not met"
            line += (
                f"; at the reference span time {result.at_reference:,.1f} µs by medians, "
                f"{result.best_at_reference:,.1f} by best runs ({there})"
            )
        lines.append(line)
    return "\n".join(lines)


def evaluator_table(results: list[bench_evaluators.Timing]) -> Table:
    """The evaluator timings as a table."""
    calls = bench_evaluators.TURNS * bench_evaluators.CALLS_PER_TURN
    grid = Table(title=f"Evaluators on {bench_evaluators.TURNS:,} turns, {calls:,} tool calls")
    grid.add_column("step")
    grid.add_column("seconds", justify="right")
    grid.add_column("rows", justify="right")
    grid.add_column("rows/s", justify="right")
    for result in results:
        grid.add_row(
            result.name, f"{result.seconds:.3f}", f"{result.rows:,}", f"{result.per_second:,.0f}"
        )
    return grid


def study_table(rows: list[dict[str, object]]) -> Table:
    """The gate's simulation study: how often the gate failed, per scenario."""
    grid = Table(
        title=f"Gate simulation study: {bench_gate.SEEDS} seeds, {bench_gate.REPEATS} repeats, "
        f"{len(bench_gate.CASES)} cases, default settings",
        caption="target: a regression fails the gate in >= 95% of seeds, noise in <= 5%",
    )
    for column in ("scenario", "kind", "model", "gate failed", "seconds"):
        grid.add_column(column, justify="right" if column in ("gate failed", "seconds") else "left")
    for row in rows:
        grid.add_row(
            str(row["scenario"]),
            "regression" if row["regression"] else "noise",
            str(row["model"]),
            f"{row['failed_rate']:.0%}",
            f"{row['seconds']:.0f}",
        )
    return grid


def write(
    results: list[Result],
    pydantic_ai: str | None,
    load: float,
    evaluator_results: list[bench_evaluators.Timing] | None = None,
    study: list[dict[str, object]] | None = None,
    imports: list[bench_imports.ImportTiming] | None = None,
    redaction: list[bench_redact.RedactTiming] | None = None,
    endpoint: list[bench_endpoint.EndpointTiming] | None = None,
    receiver: list[bench_receiver.ReceiverTiming] | None = None,
    replays: list[bench_replay.Throughput] | None = None,
    extra: dict[str, object] | None = None,
) -> None:
    """Save the results with the versions they were measured with."""
    OUT.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "python": platform.python_version(),
        "opentelemetry_sdk": metadata.version("opentelemetry-sdk"),
        "pydantic_ai_slim": pydantic_ai,
        "load_average_1min": round(load, 2),
        "cpus": os.cpu_count(),
        "model_calls_per_run": bench_loop.MODEL_CALLS,
        "target_us_per_iteration_traced": TARGET_US,
        "results": [result.as_dict() for result in results],
        "evaluators": [
            {"name": r.name, "seconds": round(r.seconds, 4), "rows": r.rows}
            for r in evaluator_results or []
        ],
        "gate_study": study or [],
        "imports": [r.as_dict() for r in imports or []],
        "redaction": [r.as_dict() for r in redaction or []],
        "endpoint": [r.as_dict(endpoint[0]) for r in endpoint] if endpoint else [],
        "otlp_receiver": [r.as_dict() for r in receiver or []],
        "replay_turns_per_second": {r.name: round(r.per_second, 2) for r in replays or []},
        **(extra or {}),
    }
    OUT.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


def main() -> None:
    # Rich falls back to 80 columns when piped, which would wrap every row.
    console = Console(width=None if sys.stdout.isatty() else 150)
    pydantic_ai = bench_loop.pydantic_ai_version()
    if pydantic_ai is None:
        console.print(
            "pydantic-ai is not installed: skipping its rows "
            "(install it with `pip install -e '.[bench]'`).",
            markup=False,
        )
    # Arrow's allocator as the plangate command sets it (ci/cli/_main.py); bench_peers also
    # times two rows on Arrow's default, what a library caller gets.
    pa.set_memory_pool(pa.system_memory_pool())
    console.print("Arrow memory pool: the C library's malloc, as the plangate command uses")
    load = os.getloadavg()
    results = asyncio.run(bench_loop.run_all())
    console.print(table(results))
    console.print(
        "Median, min and p90: wall clock (perf_counter_ns) of whole runs / model calls. CPU "
        "median: process CPU time; well below the wall median, other processes took the CPU. "
        "SDK spans: the row's time in OpenTelemetry SDK spans timed in the same rounds (median "
        "of the rounds' ratios, which holds still when the machine's speed does not / fastest "
        "run over fastest span, higher: a slow spell slows the span's tight loop more); the next "
        f"column is that many spans at the reference machine's {bench_loop.REFERENCE_SPAN_US:g} "
        "µs. The span row is per span, its peak KiB too (the exporter keeps the spans)."
    )
    console.print(f"load average before the run: {load[0]:.2f} (1 min) on {os.cpu_count()} CPUs")
    console.print(verdict(results))
    evaluator_results = bench_evaluators.run_all()
    console.print(evaluator_table(evaluator_results))
    console.print("\n".join(bench_evaluators.verdict(evaluator_results)), markup=False)
    peers = bench_peers.run_all()
    console.print(peer_results.table(peers))
    streamed = bench_stream.run_all()
    console.print(bench_stream.table(streamed))
    on_ray = bench_ray.run_all()
    console.print(bench_ray.table(on_ray))
    study = bench_gate.study()
    console.print(study_table(study))
    imports = bench_imports.run_all()
    console.print(bench_imports.table(imports))
    redaction = bench_redact.run_all()
    console.print(bench_redact.table(redaction))
    endpoint = bench_endpoint.run_all()
    console.print(bench_endpoint.table(endpoint))
    receiver = bench_receiver.run_all()
    console.print(bench_receiver.table(receiver))
    import_memory = bench_import_memory.run_all()
    console.print(bench_import_memory.table(import_memory))
    replays = asyncio.run(bench_replay.measure())
    console.print(bench_replay.table(replays))
    write(
        results,
        pydantic_ai,
        load[0],
        evaluator_results,
        study,
        imports,
        redaction,
        endpoint,
        receiver,
        replays,
        {
            "peers": [r.as_dict() for r in peers],
            "stream": [r.as_dict() for r in streamed],
            "ray": [r.as_dict() for r in on_ray],
            "import_memory": [r.as_dict() for r in import_memory],
        },
    )
    console.print(f"written to {OUT}")


if __name__ == "__main__":
    main()
