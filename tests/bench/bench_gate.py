"""Simulation study of the gate: does it catch a real regression, and stay quiet on noise?

Cases: the multi-task turns of `observability-core`. Every scenario runs the gate with its
default settings (3 repeats, alpha 0.05, the noise floor on) once per seed, and counts how often
it fails:

- finish gate off: `alyx` against `alyx` with its finish gate switched off, on `sim:flaky`,
  whose seeded coin makes it finish early (forgetting to mark its last item) in about half of
  the runs; without the gate those early finishes go through.
- plan unpinned: `alyx` against `alyx` with the plan message only in the history, on
  `sim:forgetful`, which loses track of requested tasks that scroll out of its window.
- noise, paired: `alyx` against itself on `sim:flaky`, the same seeds on both sides.
- noise, unpaired: a flaky baseline (`alyx` without its finish gate on `sim:flaky`, passing
  about half of its runs) against itself with the candidate's seeds shifted: the two sides
  differ by chance alone, as two runs of a real model would.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from plangate.ci.gate._gate import run_gate
from plangate.ci.gate._gate_file import DatasetSelection, EvaluatorRule, GateFile, Side
from tests.conftest import REPO

SEEDS = 20
REPEATS = 3
CASES = ("obs-008", "obs-009", "obs-010", "obs-011", "obs-012", "obs-013", "obs-017", "obs-020")
NO_GATE = 'name = "alyx-no-gate"\n[plan]\ntrigger = "action_verbs"\n[turn]\nfinish_gate = false\n'
UNPINNED = 'name = "alyx-unpinned"\n[plan]\nmessage = "history"\nstatus_reminder = false\n'


@dataclass(frozen=True, slots=True)
class Scenario:
    """One row of the study."""

    name: str
    baseline: str
    candidate: str
    model: str
    regression: bool
    """A real regression (the gate should fail), or noise (it should pass)."""
    candidate_seed: int = 0


def scenarios(folder: Path) -> list[Scenario]:
    """The study's scenarios, with their variant files written into `folder`."""
    no_gate, unpinned = folder / "alyx-no-gate.toml", folder / "alyx-unpinned.toml"
    no_gate.write_text(NO_GATE, encoding="utf-8")
    unpinned.write_text(_alyx_with(UNPINNED), encoding="utf-8")
    return [
        Scenario("finish gate off", "alyx", str(no_gate), "sim:flaky", regression=True),
        Scenario("plan unpinned", "alyx", str(unpinned), "sim:forgetful", regression=True),
        Scenario("noise, paired seeds", "alyx", "alyx", "sim:flaky", regression=False),
        Scenario(
            "noise, unpaired seeds",
            str(no_gate),
            str(no_gate),
            "sim:flaky",
            regression=False,
            candidate_seed=7_919,
        ),  # fmt: skip
    ]


def _alyx_with(changes: str) -> str:
    """alyx's variant file with `changes` (name and [plan] keys) applied."""
    text = (REPO / "harness" / "variants" / "alyx.toml").read_text(encoding="utf-8")
    lines = dict(line.split(" = ", 1) for line in changes.splitlines() if " = " in line)
    out = []
    for line in text.splitlines():
        key = line.split(" = ", 1)[0]
        out.append(f"{key} = {lines[key]}" if key in lines and " = " in line else line)
    return "\n".join(out) + "\n"


def gate(scenario: Scenario, seed: int, folder: Path) -> GateFile:
    """The scenario's gate with the default settings, for one seed."""
    return GateFile(
        path=folder / "study.toml",
        datasets=(DatasetSelection(path=REPO / "datasets" / "observability-core", sessions=CASES),),
        baseline=Side(variant=scenario.baseline, model=scenario.model, tools="live"),
        candidate=Side(
            variant=scenario.candidate,
            model=scenario.model,
            tools="live",
            seed=scenario.candidate_seed,
        ),  # fmt: skip
        evaluators={"task_completion": EvaluatorRule()},
        repeats=REPEATS,
        seed=seed * 100,
    )


def study(seeds: int = SEEDS) -> list[dict[str, object]]:
    """Per scenario: how often the gate failed over `seeds` runs, and the time it took."""
    folder = Path(tempfile.mkdtemp(prefix="plangate-study-"))
    rows: list[dict[str, object]] = []
    for scenario in scenarios(folder):
        began = time.perf_counter()
        failed = sum(
            not asyncio.run(run_gate(gate(scenario, s, folder))).passed for s in range(seeds)
        )
        rows.append(
            {
                "scenario": scenario.name,
                "regression": scenario.regression,
                "model": scenario.model,
                "seeds": seeds,
                "failed_rate": failed / seeds,
                "seconds": time.perf_counter() - began,
            }
        )
    return rows


if __name__ == "__main__":
    for row in study():
        print(row)
