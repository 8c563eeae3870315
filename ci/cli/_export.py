"""`plangate export atif`: a trace table or a golden dataset as ATIF trajectories."""

from __future__ import annotations

import argparse
from pathlib import Path

import pyarrow as pa

from plangate.harness import check_output
from plangate.replay import (
    ATIF_VERSION,
    TraceTableError,
    read_dataset,
    read_table,
    trajectories_from_table,
    write_trajectories,
)


def atif(args: argparse.Namespace) -> int:
    """`plangate export atif SOURCE -o FILE`: one ATIF trajectory per session, secrets redacted."""
    check_output(args.output, force=args.force, what="an ATIF file")
    trajectories = trajectories_from_table(_table(args.source), args.session)
    if not trajectories:
        raise TraceTableError(f"{args.source}: holds no session to export")
    write_trajectories(trajectories, args.output, redact=args.redact)
    embedded = [sub for t in trajectories for sub in t.get("subagent_trajectories", [])]
    every = [*trajectories, *embedded]
    steps = [step for trajectory in every for step in trajectory["steps"]]
    calls = sum(len(step.get("tool_calls", [])) for step in steps)
    subagents = f" (and {len(embedded)} subagent trajectories)" if embedded else ""
    noun = "trajectory" if len(trajectories) == 1 else "trajectories"
    print(
        f"{args.output}: {len(trajectories)} {ATIF_VERSION} {noun}{subagents}, "
        f"{len(steps)} steps, {calls} tool calls"
    )
    return 0


def _table(source: str) -> pa.Table:
    """The trace table at `source`: a trace table file, or a golden dataset's recorded spans."""
    path = Path(source)
    if path.is_dir():
        return read_dataset(path).spans
    if not path.exists():
        raise TraceTableError(
            f"{path}: no such file or folder; expected a trace table (.parquet) or a golden "
            "dataset folder"
        )
    return read_table(path)
