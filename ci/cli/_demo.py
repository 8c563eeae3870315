"""The demo: the variants × simulated models matrix, then the default gate.

The matrix runs every harness variant against every simulated model, per demo domain. It shows
the documented failures and the patterns that fix them, and then checks its own claims from the
results, so that a wrong claim shows as a failed check rather than a silent table. The gate is
the main job: the shipped gate file compares a baseline variant with a candidate on the shipped
golden datasets, and the demo prints its verdict table and where the reports are.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from plangate.ci.cli._gate import print_verdict
from plangate.ci.gate import gate_with_reports
from plangate.ci.gate._gate_file import DEFAULT_GATE
from plangate.harness import (
    BEHAVIOURS,
    Agent,
    Domain,
    SimulatedModel,
    TurnResult,
    domain_names,
    get_domain,
    load_variant,
)
from plangate.harness.domains import TaskSpec

DEMO_MODELS = tuple(b for b in BEHAVIOURS if b != "flaky")
"""The failure models of the demo (flaky is for the gate's statistics)."""
DEMO_VARIANTS = ("naive", "todo-basic", "alyx", "harness-plan", "flux")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One run of the matrix."""

    domain: str
    behaviour: str
    variant: str
    result: TurnResult
    requested: int
    """Tasks in the request."""
    done: int
    """Requested tasks whose work calls all ran without error."""
    marked: int
    """Plan items marked completed at the end."""
    bounces: int
    """Finish gate bounces."""

    def text(self) -> str:
        """The cell as the table shows it."""
        notes = []
        if self.bounces:
            notes.append(f"{self.bounces} bounce{'s' if self.bounces > 1 else ''}")
        if self.done == self.requested and self.marked < len(self.result.plan):
            # Work done but not recorded: what the finish gate exists to catch.
            notes.append(f"{self.marked}/{len(self.result.plan)} marked")
        note = f" ({', '.join(notes)})" if notes else ""
        calls = self.result.iterations
        plural = "" if calls == 1 else "s"
        return f"{self.done}/{self.requested} {self.result.stop_reason}, {calls} call{plural}{note}"


def tasks_done(result: TurnResult, tasks: Sequence[TaskSpec]) -> int:
    """How many of `tasks` had every work call made successfully in the turn."""
    made = {f"{c.name} {c.arguments}" for c in result.tool_calls if c.status == "ok"}
    return sum(1 for task in tasks if task.calls and all(c.key in made for c in task.calls))


def requested_tasks(domain: Domain, request: str) -> list[TaskSpec]:
    """The domain tasks a request names (by their phrases)."""
    lowered = request.lower()
    return [t for t in domain.tasks if any(p in lowered for p in t.phrases)]


async def run_cell(domain: Domain, behaviour: str, variant: str, seed: int) -> Cell:
    """Run the domain's demo request once."""
    model = SimulatedModel(behaviour, domain.tasks, seed=seed)  # type: ignore[arg-type]
    agent = Agent(
        model=model,
        variant=load_variant(variant),
        tools=domain.make_tools,
        instructions=domain.instructions,
    )
    result = await agent.session(f"demo-{domain.name}-{behaviour}-{variant}").run_turn(
        domain.demo_request
    )
    requested = requested_tasks(domain, domain.demo_request)
    return Cell(
        domain=domain.name,
        behaviour=behaviour,
        variant=variant,
        result=result,
        requested=len(requested),
        done=tasks_done(result, requested),
        marked=sum(1 for item in result.plan if item.status == "completed"),
        bounces=sum(1 for e in result.events if e.kind == "gate_bounce"),
    )


async def run_matrix(domain_names: Sequence[str], seed: int = 0) -> list[Cell]:
    """Every domain × simulated model × demo variant."""
    cells = []
    for name in domain_names:
        domain = get_domain(name)
        for behaviour in DEMO_MODELS:
            for variant in DEMO_VARIANTS:
                cells.append(await run_cell(domain, behaviour, variant, seed))
    return cells


@dataclass(frozen=True, slots=True, kw_only=True)
class Claim:
    """A documented failure or fix, checked against the matrix."""

    text: str
    holds: bool


def check_claims(cells: Sequence[Cell], domain: str) -> list[Claim]:
    """The claims of the demo for one domain, each checked on the results."""
    at = {(c.behaviour, c.variant): c for c in cells if c.domain == domain}

    def full(cell: Cell) -> bool:
        return cell.done == cell.requested

    early_alyx, early_basic = at["early-finisher", "alyx"], at["early-finisher", "todo-basic"]
    return [
        Claim(
            text="forgetful: alyx completes every task, naive does not",
            holds=full(at["forgetful", "alyx"]) and not full(at["forgetful", "naive"]),
        ),
        Claim(
            text="early-finisher: alyx's finish gate bounces and the last item gets marked; "
            "without the gate (todo-basic) it stays open",
            holds=early_alyx.bounces > 0
            and early_alyx.marked == len(early_alyx.result.plan)
            and early_basic.marked < len(early_basic.result.plan),
        ),
        Claim(
            text="looper: alyx's loop guard stops it (loop_guard); naive runs to max_iterations",
            holds=at["looper", "alyx"].result.stop_reason == "loop_guard"
            and at["looper", "naive"].result.stop_reason == "max_iterations",
        ),
        Claim(
            text="announcer: naive ends the turn on the announcement; alyx does not",
            holds=not full(at["announcer", "naive"]) and full(at["announcer", "alyx"]),
        ),
        Claim(
            text="silent: naive ends on the empty reply; alyx's continuation prompt carries on",
            holds=not full(at["silent", "naive"]) and full(at["silent", "alyx"]),
        ),
    ]


def main_matrix(domain_names: Sequence[str], seed: int = 0) -> tuple[list[Cell], bool]:
    """Run the matrix, print it with its checked claims; returns the cells and whether all hold."""
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)  # logs and pipes: keep each row on one line
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
    caught = not verdict.passed and any(
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
    _, all_hold = main_matrix(names, seed=args.seed)
    gate_holds = main_gate(args.gate, args.output)
    return 0 if all_hold and gate_holds else 1
