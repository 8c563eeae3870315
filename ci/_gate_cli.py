"""`plangate gate GATE.toml`: the verdict, its reports, and the exit code."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any


def add_commands(commands: Any) -> None:
    """Add `gate`."""
    gate = commands.add_parser("gate", help="compare a candidate with a baseline on golden turns")
    gate.add_argument("gate_file", metavar="GATE.toml")
    gate.add_argument("-o", "--output", default="out/gate", help="report folder (default out/gate)")
    gate.add_argument("--repeats", type=int, help="override gate.repeats")


def run_gate_command(args: argparse.Namespace) -> int:
    """Run the gate; 0 pass, 1 regression (2 for unusable input comes from PlangateError)."""
    import dataclasses

    from ci._gate import run_gate
    from ci._gate_file import load_gate
    from ci._reports import write_reports

    gate = load_gate(args.gate_file)
    if args.repeats is not None:
        gate = dataclasses.replace(gate, repeats=max(1, args.repeats))
    verdict = asyncio.run(run_gate(gate))
    files = write_reports(verdict, args.output)
    print("plangate gate: " + ("PASS" if verdict.passed else "REGRESSION"))
    for v in verdict.evaluators:
        print(f"  {'✗' if v.failed else '✓'} {v.evaluator}: {v.reason}")
    for case in [c for c in verdict.cases if c.status == "regressed"][:10]:
        print(f"    regressed: {case.dataset} {case.session_id} turn {case.turn_index} "
              f"({case.evaluator}): {case.explanation}")  # fmt: skip
    print("reports: " + ", ".join(str(p) for p in files.values()))
    return verdict.exit_code
