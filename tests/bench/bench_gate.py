"""Simulation study of the gate: does it catch a real regression, and stay quiet on noise?

Cases: the multi-task turns of `observability-core`. Model: `sim:flaky`, whose seeded coin makes
it finish early (forgetting to mark its last item) in about half of the runs. Regression: the
candidate is `alyx` with its finish gate switched off, so those early finishes go through.
Noise: the baseline against itself. Each gate run uses its own seeds; the study counts how often
the gate fails in each scenario.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from ci._gate import run_gate
from ci._gate_file import DatasetSelection, EvaluatorRule, GateFile, Side
from tests.conftest import REPO

SEEDS = 20
REPEATS = 3
CASES = ("obs-008", "obs-009", "obs-010", "obs-011", "obs-012", "obs-013", "obs-017", "obs-020")


def gate(candidate: str, seed: int, folder: Path) -> GateFile:
    """A gate comparing `alyx` with `candidate` on sim:flaky."""
    return GateFile(
        path=folder / "study.toml",
        datasets=(DatasetSelection(path=REPO / "datasets" / "observability-core", sessions=CASES),),
        baseline=Side(variant="alyx", model="sim:flaky", tools="live"),
        candidate=Side(variant=candidate, model="sim:flaky", tools="live"),
        evaluators={"task_completion": EvaluatorRule()},
        repeats=REPEATS,
        seed=seed * 100,
    )


def study(seeds: int = SEEDS) -> dict[str, float]:
    """Detection and false-alarm rates over `seeds` gate runs each."""
    folder = Path(tempfile.mkdtemp(prefix="plangate-study-"))
    no_gate = folder / "alyx-no-gate.toml"
    no_gate.write_text(
        'name = "alyx-no-gate"\n[plan]\ntrigger = "action_verbs"\n[turn]\nfinish_gate = false\n',
        encoding="utf-8",
    )
    began = time.perf_counter()
    caught = sum(
        not asyncio.run(run_gate(gate(str(no_gate), s, folder))).passed for s in range(seeds)
    )
    alarms = sum(not asyncio.run(run_gate(gate("alyx", s, folder))).passed for s in range(seeds))
    return {
        "seeds": seeds,
        "detection_rate": caught / seeds,
        "false_alarm_rate": alarms / seeds,
        "seconds": time.perf_counter() - began,
    }


if __name__ == "__main__":
    print(study())
