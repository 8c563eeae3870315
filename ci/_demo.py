"""The demo's matrix: every harness variant against every simulated model, and its claims.

The matrix runs every variant against every simulated model, per demo domain. It shows the
documented failures and the patterns that fix them, and its claims are checked from the results,
so that a wrong claim shows as a failed check rather than a silent table. `plangate demo` prints
it, then runs the default gate (`ci/cli/_demo.py`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from plangate.harness import (
    BEHAVIOURS,
    Agent,
    Domain,
    SimulatedModel,
    TurnResult,
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
