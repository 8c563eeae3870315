"""`plangate demo`: the variants × simulated models matrix, its claims checked, and the gate.

The matrix and its claims are `ci._demo`; this prints them, runs the gate and prints its verdict.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from rich.table import Table

from plangate.ci._demo import DEMO_MODELS, DEMO_VARIANTS, Cell, check_claims, run_matrix
from plangate.ci.cli._gate import print_verdict
from plangate.ci.cli._printing import terminal
from plangate.ci.gate import DEFAULT_GATE, gate_with_reports, load_gate
from plangate.harness import (
    domain_names,
    get_domain,
)


def main_matrix(domain_names: Sequence[str], seed: int = 0) -> tuple[list[Cell], bool]:
    """Run the matrix, print it with its checked claims; returns the cells and whether all hold."""
    console = terminal(width=200)
    cells = asyncio.run(run_matrix(domain_names, seed))
    all_hold = True
    for name in domain_names:
        domain = get_domain(name)
        table = Table(
            title=f"{name}: {domain.demo_request}",
            caption="cell: tasks done / requested, stop reason, model calls (bounces, marked)",
            title_justify="left",
        )
        table.add_column("model")
        for variant in DEMO_VARIANTS:
            table.add_column(variant, no_wrap=True)
        for behaviour in DEMO_MODELS:
            row = [c.text() for c in cells if c.domain == name and c.behaviour == behaviour]
            table.add_row(f"sim:{behaviour}", *row)
        console.print(table)
        for claim in check_claims(cells, name):
            mark = "[green]✓[/green]" if claim.holds else "[red]✗[/red]"
            console.print(f"  {mark} {claim.text}")
            all_hold = all_hold and claim.holds
        console.print()
    return cells, all_hold


def main_gate(gate_file: str | None, output: str) -> bool:
    """Run the gate file (default: the shipped one), print its verdict; whether it ran as shown.

    The shipped gate's candidate (`todo-basic`: no pinned plan, no finish gate) is a real
    regression of the baseline (`alyx`), so the demo's claim is that the gate catches it; with
    another gate file the demo only reports the verdict.
    """
    print("The gate: plangate gate " + (gate_file or "ci/gate.toml") + f" -o {output}")
    verdict, files = gate_with_reports(gate_file or DEFAULT_GATE, output)
    print_verdict(verdict, files)
    if gate_file is not None:
        return True
    caught = verdict.exit_code == 1 and any(
        v.failed and v.evaluator == "task_completion" for v in verdict.evaluators
    )
    mark = "✓" if caught else "✗"
    print(f"  {mark} the gate catches the regression (in CI this exit code would be 1)")
    return caught


def demo(args: argparse.Namespace) -> int:
    """`plangate demo`: the matrix and the gate; 0 when every claim holds and the gate catches."""
    names = args.domain or domain_names()
    for name in names:
        get_domain(name)  # an unknown domain fails here, listing the choices
    load_gate(args.gate or DEFAULT_GATE)  # a bad gate file fails before the matrix runs
    _, all_hold = main_matrix(names, seed=args.seed)
    gate_holds = main_gate(args.gate, args.output)
    return 0 if all_hold and gate_holds else 1
